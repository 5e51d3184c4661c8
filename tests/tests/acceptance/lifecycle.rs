//! A reservation's life: hold, confirm, release, cancel, expire; who may see it; what
//! the calendar read reports.

use acceptance::{TestApp, hours, reservation_path, send, slug};
use chrono::{Duration, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::Clock;
use shared::clock::ManualClock;
use std::sync::Arc;
use uuid::Uuid;

#[tokio::test]
async fn a_lapsed_hold_stops_blocking_at_once_without_any_sweep() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 60})).await;
    let first = app.hold("alice", room, 10, 11).await;
    let (s, e) = hours(10, 11);
    assert_eq!(app.reserve("bob", room, (&s, &e), 1).await.0, StatusCode::CONFLICT);

    clock.advance(Duration::seconds(60));
    let (status, read) = send(app.get("alice", &reservation_path(&first["id"]))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["status"], "EXPIRED");
    assert_eq!(read["expires_at"], Value::Null);
    let (status, second) = app.reserve("bob", room, (&s, &e), 1).await;
    assert_eq!(status, StatusCode::CREATED, "{second}");

    let (status, problem) = app.confirm("alice", &first["id"]).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(slug(&problem), "reservation-not-held");
    // The inline expiry wrote the lapse down, in the same transaction that reused the slot.
    assert_eq!(stored_status(&app, &first).await, "EXPIRED");
}

#[tokio::test]
async fn a_hold_confirms_once_and_confirming_again_changes_nothing() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    assert_eq!(r["status"], "HELD");
    assert!(r["expires_at"].is_string());
    let (status, confirmed) = app.confirm("alice", &r["id"]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(confirmed["status"], "CONFIRMED");
    assert_eq!(confirmed["expires_at"], Value::Null);
    let (status, again) = app.confirm("alice", &r["id"]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["updated_at"], confirmed["updated_at"]);
}

#[tokio::test]
async fn a_released_hold_frees_the_slot_and_cannot_be_confirmed() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    let (status, released) = send(app.delete("alice", &reservation_path(&r["id"]))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(released["status"], "RELEASED");
    let (status, again) = send(app.delete("alice", &reservation_path(&r["id"]))).await;
    assert_eq!(status, StatusCode::OK, "deleting again answers the current state");
    assert_eq!(again["status"], "RELEASED");
    let (status, problem) = app.confirm("alice", &r["id"]).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(slug(&problem), "reservation-not-held");
    app.hold("bob", room, 10, 11).await;
}

#[tokio::test]
async fn deleting_a_confirmed_booking_cancels_it_and_frees_the_slot() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    app.confirm("alice", &r["id"]).await;
    let (status, cancelled) = send(app.delete("alice", &reservation_path(&r["id"]))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cancelled["status"], "CANCELLED");
    let (status, problem) = app.confirm("alice", &r["id"]).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "reservation-not-held"));
    app.hold("bob", room, 10, 11).await;
}

#[tokio::test]
async fn deleting_a_lapsed_hold_reports_it_expired() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 5})).await;
    let r = app.hold("alice", room, 10, 11).await;
    clock.advance(Duration::seconds(6));
    let (status, body) = send(app.delete("alice", &reservation_path(&r["id"]))).await;
    assert_eq!((status, body["status"].as_str()), (StatusCode::OK, Some("EXPIRED")));
}

#[tokio::test]
async fn others_cannot_see_confirm_or_release_a_reservation_but_admins_can_read_it() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    for (status, problem) in [
        send(app.get("mallory", &reservation_path(&r["id"]))).await,
        app.confirm("mallory", &r["id"]).await,
        send(app.delete("mallory", &reservation_path(&r["id"]))).await,
    ] {
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(slug(&problem), "reservation-not-found");
    }
    let (status, read) = send(app.get("alice", &reservation_path(&r["id"]))).await;
    assert_eq!((status, read["status"].as_str()), (StatusCode::OK, Some("HELD")));
    let (status, read) = send(app.get("admin", &reservation_path(&r["id"]))).await;
    assert_eq!((status, read["owner"].as_str()), (StatusCode::OK, Some("alice")));
}

#[tokio::test]
async fn the_owner_is_the_principal_and_only_an_admin_names_another() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (s, e) = hours(10, 11);
    let (status, problem) = send(app.post(
        "alice",
        "/v1/reservations",
        &json!({"resource_id": room, "start": s, "end": e, "owner": "bob"}),
    ))
    .await;
    assert_eq!((status, slug(&problem)), (StatusCode::FORBIDDEN, "forbidden"));
    let r = app.hold("alice", room, 10, 11).await;
    assert_eq!(r["owner"], "alice");
}

#[tokio::test]
async fn availability_lists_what_is_taken_and_cuts_the_rest_into_free_pieces() {
    let app = TestApp::spawn().await;
    let room = app.resource(2).await;
    app.hold("alice", room, 10, 12).await;
    let b = app.hold("bob", room, 11, 13).await;
    app.confirm("bob", &b["id"]).await;
    let released = app.hold("carol", room, 9, 10).await;
    send(app.delete("carol", &reservation_path(&released["id"]))).await;

    let (from, to) = hours(9, 14);
    let (status, a) =
        send(app.get("dave", &format!("/v1/resources/{room}/availability")).query(&[("from", &from), ("to", &to)]))
            .await;
    assert_eq!(status, StatusCode::OK, "{a}");
    assert_eq!(a["capacity"], 2);
    let taken: Vec<(&str, &str, &str)> = a["taken"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["start"].as_str().unwrap(), t["end"].as_str().unwrap(), t["status"].as_str().unwrap()))
        .collect();
    let (h10, h11, h12, h13) = (hours(10, 11).0, hours(11, 12).0, hours(12, 13).0, hours(13, 14).0);
    assert_eq!(taken, vec![(h10.as_str(), h12.as_str(), "HELD"), (h11.as_str(), h13.as_str(), "CONFIRMED")]);
    assert!(a["taken"][0]["expires_at"].is_string());
    assert!(a["taken"][0].get("owner").is_none(), "availability names no owners");
    let free: Vec<(String, String, i64)> = a["free"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (f["start"].as_str().unwrap().into(), f["end"].as_str().unwrap().into(), f["remaining"].as_i64().unwrap())
        })
        .collect();
    let (h9, h14) = (hours(9, 10).0, hours(14, 15).0);
    assert_eq!(free, vec![(h9, h10.clone(), 2), (h10, h11, 1), (h12, h13.clone(), 1), (h13, h14, 2)]);
}

#[tokio::test]
async fn availability_forgets_lapsed_holds_at_once() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 30})).await;
    app.hold("alice", room, 10, 11).await;
    clock.advance(Duration::seconds(31));
    let (from, to) = hours(9, 12);
    let (_, a) =
        send(app.get("dave", &format!("/v1/resources/{room}/availability")).query(&[("from", &from), ("to", &to)]))
            .await;
    assert_eq!(a["taken"], json!([]));
    assert_eq!(a["free"], json!([{"start": from, "end": to, "remaining": 1}]));
}

/// One availability read of 9:00-14:00 of the test day, with `extra` query pairs.
async fn read_availability(app: &TestApp, resource: Uuid, extra: &[(&str, &str)]) -> (StatusCode, Value) {
    let (from, to) = hours(9, 14);
    let mut query = vec![("from", from.as_str()), ("to", to.as_str())];
    query.extend_from_slice(extra);
    send(app.get("dave", &format!("/v1/resources/{resource}/availability")).query(&query)).await
}

#[tokio::test]
async fn availability_lists_the_claims_a_page_at_a_time_in_calendar_order_with_free_whole_on_each() {
    let app = TestApp::spawn().await;
    let hall = app.resource(20).await;
    let range = |from, to| hours(from, to);
    // Five claims of one range (told apart by their quantities), one before, one after.
    for (who, (from, to), quantity) in [
        ("ann", range(10, 12), 1),
        ("bob", range(10, 12), 2),
        ("cat", range(9, 11), 1),
        ("dan", range(10, 12), 3),
        ("eve", range(11, 13), 1),
        ("fay", range(10, 12), 4),
        ("gus", range(10, 12), 5),
    ] {
        let (status, body) = app.reserve(who, hall, (&from, &to), quantity).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, whole) = read_availability(&app, hall, &[]).await;
    assert_eq!(status, StatusCode::OK, "{whole}");
    assert_eq!(whole["next_cursor"], Value::Null, "one page holds them all by default");
    let claim = |t: &Value| (t["start"].as_str().unwrap().to_string(), t["quantity"].as_i64().unwrap());
    let listed: Vec<_> = whole["taken"].as_array().unwrap().iter().map(claim).collect();
    let at = |h: i64| hours(h, h + 1).0;
    assert_eq!(
        listed,
        [(at(9), 1), (at(10), 1), (at(10), 2), (at(10), 3), (at(10), 4), (at(10), 5), (at(11), 1)],
        "by start, then end, then in the order they were made"
    );

    // Pages of three. A claim made between two pages, before where the first ended,
    // neither shifts nor repeats what follows.
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0.. {
        let limit = [("limit", "3")];
        let (status, body) = match &cursor {
            None => read_availability(&app, hall, &limit).await,
            Some(c) => read_availability(&app, hall, &[limit[0], ("cursor", c.as_str())]).await,
        };
        assert_eq!(status, StatusCode::OK, "{body}");
        let now_whole = read_availability(&app, hall, &[]).await.1;
        assert_eq!(body["free"], now_whole["free"], "page {page}: free is whole on every page");
        paged.extend(body["taken"].as_array().unwrap().iter().map(claim));
        if page == 0 {
            let (status, body) = app.reserve("hal", hall, (&at(9), &at(10)), 6).await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
        }
        match body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(paged, listed);

    // A cursor is this resource's and this window's; a limit is 1 to 5000.
    let first = read_availability(&app, hall, &[("limit", "1")]).await.1;
    let cursor = first["next_cursor"].as_str().unwrap();
    let (from, to) = hours(9, 15);
    let (status, problem) = send(app.get("dave", &format!("/v1/resources/{hall}/availability")).query(&[
        ("from", from.as_str()),
        ("to", to.as_str()),
        ("cursor", cursor),
    ]))
    .await;
    assert_eq!((status, slug(&problem)), (StatusCode::BAD_REQUEST, "invalid-cursor"));
    for limit in ["0", "5001", "many"] {
        let (status, problem) = read_availability(&app, hall, &[("limit", limit)]).await;
        assert_eq!((status, slug(&problem)), (StatusCode::BAD_REQUEST, "validation-error"), "limit={limit}");
        assert_eq!(problem["errors"][0]["field"], "limit");
    }
}

#[tokio::test]
async fn resources_are_made_by_admins_and_read_by_anyone() {
    let app = TestApp::spawn().await;
    let (status, problem) = send(app.post("alice", "/v1/resources", &json!({"name": "Mine"}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::FORBIDDEN, "forbidden"));
    let resp = app
        .post("admin", "/v1/resources", &json!({"name": "Hall", "capacity": 40, "hold_ttl_seconds": 120}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let location = resp.headers()["location"].to_str().unwrap().to_string();
    let created: Value = resp.json().await.unwrap();
    assert_eq!(location, format!("/v1/resources/{}", created["id"].as_str().unwrap()));
    assert_eq!(created["offer_ttl_seconds"], 900, "defaults from configuration");
    let (status, read) = send(app.get("alice", &location)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read, created);
}

#[tokio::test]
async fn an_upstream_confirm_never_fakes_success_and_without_a_view_availability_is_refused() {
    // No system of record is configured for this server.
    let app = TestApp::spawn().await;
    let seat =
        app.resource_with(json!({"name": "Library seat", "authority": "upstream", "upstream_ref": "seat-42"})).await;
    let r = app.hold("alice", seat, 10, 11).await;
    let (status, confirming) = app.confirm("alice", &r["id"]).await;
    assert_eq!((status, confirming["status"].as_str()), (StatusCode::ACCEPTED, Some("CONFIRMING")));
    let (_, read) = send(app.get("alice", &reservation_path(&r["id"]))).await;
    assert_eq!((read["status"].as_str(), read["intent"]["state"].as_str()), (Some("CONFIRMING"), Some("REQUESTED")));
    let (from, to) = hours(9, 12);
    let resp = app
        .get("alice", &format!("/v1/resources/{seat}/availability"))
        .query(&[("from", &from), ("to", &to)])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(resp.headers().contains_key("retry-after"));
    let problem: Value = resp.json().await.unwrap();
    assert_eq!(slug(&problem), "upstream-unavailable");
}

#[tokio::test]
async fn health_answers_without_identity() {
    let app = TestApp::spawn().await;
    let (status, body) = send(app.http.get(app.url("/v1/health"))).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));
}

/// The sweep drains a backlog oldest first across resources: its claim takes the
/// resource of the oldest lapsed hold, not the resource of the lowest id, and a hold
/// written down since is passed over by the next claim.
#[tokio::test]
async fn the_sweeps_claim_takes_the_resource_of_the_oldest_lapsed_hold_first() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let ttl = json!({"name": "R", "capacity": 1, "hold_ttl_seconds": 60});
    let (first, second) = (app.resource_with(ttl.clone()).await, app.resource_with(ttl).await);
    assert!(first < second, "ids are made in order");
    // The older hold is on the resource of the higher id.
    app.hold("alice", second, 10, 11).await;
    clock.advance(Duration::seconds(10));
    app.hold("bob", first, 10, 11).await;
    clock.advance(Duration::seconds(61));
    let claim = |now| {
        let app = &app;
        async move {
            let mut db = app.db().await;
            let tx = db.transaction().await.unwrap();
            let claimed = shared::db::lapse::claim_lapsed_resource(&tx, now).await.unwrap();
            tx.rollback().await.unwrap();
            claimed
        }
    };
    assert_eq!(claim(clock.now()).await, Some(second), "the oldest lapse first");
    app.db()
        .await
        .execute("UPDATE reservations SET status = 'EXPIRED' WHERE resource_id = $1", &[&second])
        .await
        .unwrap();
    assert_eq!(claim(clock.now()).await, Some(first), "then the next oldest");
    app.db().await.execute("UPDATE reservations SET status = 'EXPIRED'", &[]).await.unwrap();
    assert_eq!(claim(clock.now()).await, None, "nothing left");
}

/// The status a reservation's row has now, as stored (a read reports a lapse at once,
/// whether or not it is written down).
async fn stored_status(app: &TestApp, reservation: &Value) -> String {
    let id = Uuid::parse_str(reservation["id"].as_str().unwrap()).unwrap();
    app.db().await.query_one("SELECT status FROM reservations WHERE id = $1", &[&id]).await.unwrap().get(0)
}

/// A request writes down the lapsed holds in its own way and leaves the others to the
/// sweep, so that its transaction does not grow with the lapsed holds around it.
#[tokio::test]
async fn a_request_writes_down_only_the_lapsed_holds_in_its_own_way() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 60})).await;
    let in_the_way = app.hold("alice", room, 10, 11).await;
    let beside = app.hold("alice", room, 11, 12).await;
    let later = app.hold("alice", room, 15, 16).await;
    clock.advance(Duration::seconds(60));

    let (s, e) = hours(10, 11);
    let (status, made) = app.reserve("bob", room, (&s, &e), 1).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(stored_status(&app, &in_the_way).await, "EXPIRED");
    assert_eq!(stored_status(&app, &beside).await, "HELD", "beside the new hold, not in its way");
    assert_eq!(stored_status(&app, &later).await, "HELD", "later the same day");
}

/// With buffers, the lapsed holds in the way are those whose kept ranges meet the range
/// the new booking keeps: buffers included, and no further.
#[tokio::test]
async fn with_buffers_a_request_writes_down_the_lapsed_holds_whose_kept_ranges_meet_its_own() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 60, "buffer_after_minutes": 30})).await;
    // Kept until 11:30 and from 12:00 to 13:30: both meet 11:00-12:30, which a booking
    // of 11:00-12:00 keeps.
    let before = app.hold("alice", room, 10, 11).await;
    let after = app.hold("alice", room, 12, 13).await;
    let later = app.hold("alice", room, 15, 16).await;
    clock.advance(Duration::seconds(60));

    let (s, e) = hours(11, 12);
    let (status, made) = app.reserve("bob", room, (&s, &e), 1).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(stored_status(&app, &before).await, "EXPIRED", "its buffer reached the new start");
    assert_eq!(stored_status(&app, &after).await, "EXPIRED", "the new buffer reached its start");
    assert_eq!(stored_status(&app, &later).await, "HELD", "later the same day, kept apart");
}
