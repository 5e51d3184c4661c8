//! Changing what exists: moving a booking (`PATCH /v1/reservations/{id}`), operators
//! acting on anyone's reservations and entries, a resource's settings, capacity and
//! archive, and metadata. Capacity invariants are checked in SQL.

use acceptance::{TestApp, active_claims, day, hours, reservation_path, rfc3339, send, slug, waitlist_entry_path};
use chrono::{Duration, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::ManualClock;
use shared::domain::peak_load;
use std::sync::Arc;
use uuid::Uuid;

fn id_of(v: &Value) -> Uuid {
    v["id"].as_str().unwrap().parse().unwrap()
}

async fn move_to(app: &TestApp, who: &str, r: &Value, from_hour: i64, to_hour: i64) -> (StatusCode, Value) {
    let (s, e) = hours(from_hour, to_hour);
    send(app.patch(who, &reservation_path(&r["id"]), &json!({"start": s, "end": e}))).await
}

async fn stored_range(app: &TestApp, id: Uuid) -> (chrono::DateTime<Utc>, chrono::DateTime<Utc>, i32, String) {
    let row = app
        .db()
        .await
        .query_one("SELECT starts_at, ends_at, quantity, status FROM reservations WHERE id = $1", &[&id])
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

#[tokio::test]
async fn a_booking_moves_onto_time_it_overlaps_itself_because_it_is_left_out_of_its_own_check() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    let (s, e) = (rfc3339(day() + Duration::minutes(630)), rfc3339(day() + Duration::minutes(690)));
    let (status, moved) = send(app.patch("alice", &reservation_path(&r["id"]), &json!({"start": s, "end": e}))).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    assert_eq!((moved["start"].as_str(), moved["end"].as_str()), (Some(s.as_str()), Some(e.as_str())));
    assert_eq!(moved["id"], r["id"]);
    assert_eq!(moved["acted_by"], "alice");
}

#[tokio::test]
async fn a_move_onto_taken_time_is_refused_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    app.hold("bob", room, 12, 13).await;
    let before = stored_range(&app, id_of(&r)).await;
    let (status, problem) = move_to(&app, "alice", &r, 12, 13).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(slug(&problem), "slot-unavailable");
    assert_eq!(stored_range(&app, id_of(&r)).await, before);
    let events = app.count("SELECT count(*) FROM outbox WHERE kind = 'reservation.rescheduled'", &[]).await;
    assert_eq!(events, 0);
}

#[tokio::test]
async fn a_hold_keeps_its_expiry_and_a_booking_stays_confirmed_when_moved() {
    let app = TestApp::spawn().await;
    let room = app.resource(2).await;
    let held = app.hold("alice", room, 10, 11).await;
    let (status, moved) = move_to(&app, "alice", &held, 14, 15).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    assert_eq!((moved["status"].clone(), moved["expires_at"].clone()), (json!("HELD"), held["expires_at"].clone()));

    let booked = app.hold("bob", room, 10, 11).await;
    app.confirm("bob", &booked["id"]).await;
    let (status, moved) =
        send(app.patch("bob", &reservation_path(&booked["id"]), &json!({"quantity": 2, "end": hours(10, 12).1}))).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    assert_eq!((moved["status"].as_str(), moved["quantity"].as_i64()), (Some("CONFIRMED"), Some(2)));
}

#[tokio::test]
async fn capacity_a_move_gives_up_goes_to_the_waitlist_in_the_same_transaction() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    let (s, e) = hours(10, 11);
    let (status, entry) = app.join_waitlist_with("bob", room, &json!({"start": s, "end": e})).await;
    assert_eq!((status, entry["status"].as_str()), (StatusCode::CREATED, Some("WAITING")));

    assert_eq!(move_to(&app, "alice", &r, 14, 15).await.0, StatusCode::OK);
    let entry = app.waitlist_entry("bob", &entry).await;
    assert_eq!(entry["status"], "OFFERED");
    let (_, offer) = send(app.get("bob", &reservation_path(&entry["reservation_id"]))).await;
    assert_eq!((offer["start"].as_str(), offer["status"].as_str()), (Some(s.as_str()), Some("HELD")));
}

#[tokio::test]
async fn a_move_checks_its_new_range_and_a_booking_under_way_may_still_grow() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    let (status, problem) = move_to(&app, "alice", &r, 12, 11).await;
    assert_eq!((status, problem["errors"][0]["field"].as_str()), (StatusCode::BAD_REQUEST, Some("end")));
    let (status, problem) = send(app.patch("alice", &reservation_path(&r["id"]), &json!({}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::BAD_REQUEST, "validation-error"));
    let (status, problem) = send(app.patch("alice", &reservation_path(&r["id"]), &json!({"quantity": 2}))).await;
    assert_eq!((status, problem["errors"][0]["field"].as_str()), (StatusCode::BAD_REQUEST, Some("quantity")));

    app.confirm("alice", &r["id"]).await;
    clock.set(day() + Duration::minutes(630));
    // Its start now lies half an hour back: only a new start must lie ahead.
    let (status, moved) = send(app.patch("alice", &reservation_path(&r["id"]), &json!({"end": hours(10, 12).1}))).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
}

#[tokio::test]
async fn a_finished_or_in_flight_reservation_cannot_be_moved() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    send(app.delete("alice", &reservation_path(&r["id"]))).await;
    let (status, problem) = move_to(&app, "alice", &r, 12, 13).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "reservation-not-held"));
}

#[tokio::test]
async fn bookings_of_an_upstream_resource_are_not_moved_but_may_be_relabelled() {
    let app = TestApp::spawn().await;
    let seat = app.resource_with(json!({"name": "Seat", "authority": "upstream", "upstream_ref": "S1"})).await;
    let r = app.hold("alice", seat, 10, 11).await;
    let (status, problem) = move_to(&app, "alice", &r, 12, 13).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "reschedule-not-supported"));
    let (status, relabelled) =
        send(app.patch("alice", &reservation_path(&r["id"]), &json!({"metadata": {"note": "window"}}))).await;
    assert_eq!(status, StatusCode::OK, "{relabelled}");
    assert_eq!(relabelled["metadata"], json!({"note": "window"}));
}

#[tokio::test]
async fn a_retried_move_with_its_key_runs_once_and_replays() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    let (s, e) = hours(12, 13);
    let patch = || {
        app.patch("alice", &reservation_path(&r["id"]), &json!({"start": s, "end": e}))
            .header("idempotency-key", "mv-1")
    };
    let first = patch().send().await.unwrap();
    assert_eq!(first.headers()["idempotency-replayed"], "false");
    let first: Value = first.json().await.unwrap();
    let again = patch().send().await.unwrap();
    assert_eq!((again.status(), again.headers()["idempotency-replayed"].to_str().unwrap()), (StatusCode::OK, "true"));
    assert_eq!(again.json::<Value>().await.unwrap(), first);
    let events = app.count("SELECT count(*) FROM outbox WHERE kind = 'reservation.rescheduled'", &[]).await;
    assert_eq!(events, 1);
}

#[tokio::test]
async fn twenty_bookings_moving_at_once_onto_one_slot_leave_exactly_one_there() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let mut holds = Vec::new();
    for h in 0..20 {
        holds.push(app.hold(&format!("user{h}"), room, h, h + 1).await);
    }
    let (s, e) = hours(30, 31);
    let moves = holds.iter().enumerate().map(|(h, r)| {
        let req = app.patch(&format!("user{h}"), &reservation_path(&r["id"]), &json!({"start": s, "end": e}));
        async move { req.send().await.unwrap().status() }
    });
    let statuses = futures::future::join_all(moves).await;
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::OK).count(), 1, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == StatusCode::OK || *s == StatusCode::CONFLICT), "{statuses:?}");
    let db = app.db().await;
    let (from, to) = (day() + Duration::hours(30), day() + Duration::hours(31));
    assert_eq!(peak_load(from, to, &active_claims(&db, room).await), 1);
}

#[tokio::test]
async fn an_admin_may_confirm_move_and_cancel_anyones_reservation_and_the_record_says_who_acted() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let r = app.hold("alice", room, 10, 11).await;
    assert_eq!(move_to(&app, "mallory", &r, 12, 13).await.0, StatusCode::NOT_FOUND);
    assert_eq!(send(app.delete("mallory", &reservation_path(&r["id"]))).await.0, StatusCode::NOT_FOUND);

    let (status, confirmed) = app.confirm("admin", &r["id"]).await;
    assert_eq!((status, confirmed["acted_by"].as_str()), (StatusCode::OK, Some("admin")));
    assert_eq!(confirmed["owner"], "alice");
    let (status, moved) = move_to(&app, "admin", &r, 12, 13).await;
    assert_eq!((status, moved["acted_by"].as_str()), (StatusCode::OK, Some("admin")));
    let (status, cancelled) = send(app.delete("admin", &reservation_path(&r["id"]))).await;
    assert_eq!((status, cancelled["status"].as_str()), (StatusCode::OK, Some("CANCELLED")));
    assert_eq!(cancelled["acted_by"], "admin");

    let rows = app
        .db()
        .await
        .query("SELECT kind, payload->>'acted_by' FROM outbox WHERE subject_id = $1 ORDER BY id", &[&id_of(&r)])
        .await
        .unwrap();
    let log: Vec<(String, Option<String>)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    let expected = [
        ("reservation.held", Some("alice")),
        ("reservation.confirmed", Some("admin")),
        ("reservation.rescheduled", Some("admin")),
        ("reservation.cancelled", Some("admin")),
    ];
    assert_eq!(log, expected.map(|(k, a)| (k.to_string(), a.map(String::from))));
}

#[tokio::test]
async fn an_admin_may_remove_anyones_waitlist_entry() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    app.hold("alice", room, 10, 11).await;
    let (s, e) = hours(10, 11);
    let (_, entry) = app.join_waitlist_with("bob", room, &json!({"start": s, "end": e})).await;
    let path = waitlist_entry_path(&entry["id"]);
    assert_eq!(send(app.delete("mallory", &path)).await.0, StatusCode::NOT_FOUND);
    let (status, removed) = send(app.delete("admin", &path)).await;
    assert_eq!((status, removed["status"].as_str()), (StatusCode::OK, Some("CANCELLED")));
}

#[tokio::test]
async fn a_resource_changes_its_name_ttls_and_metadata_for_what_comes_next() {
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Room", "metadata": {"floor": "1"}})).await;
    let path = format!("/v1/resources/{room}");
    assert_eq!(send(app.patch("alice", &path, &json!({"name": "Mine"}))).await.0, StatusCode::FORBIDDEN);
    let (status, r) = send(app.patch(
        "admin",
        &path,
        &json!({"name": "Room 101", "hold_ttl_seconds": 42, "metadata": {"floor": "2"}}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!((r["name"].as_str(), r["hold_ttl_seconds"].as_i64()), (Some("Room 101"), Some(42)));
    assert_eq!(r["metadata"], json!({"floor": "2"}));
    assert_eq!(send(app.get("alice", &path)).await.1, r);
    let held = app.hold("alice", room, 10, 11).await;
    let ttl = chrono::DateTime::parse_from_rfc3339(held["expires_at"].as_str().unwrap()).unwrap()
        - chrono::DateTime::parse_from_rfc3339(held["created_at"].as_str().unwrap()).unwrap();
    assert_eq!(ttl.num_seconds(), 42);
}

#[tokio::test]
async fn more_capacity_goes_to_the_waitlist_at_once() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    app.hold("alice", room, 10, 11).await;
    let (s, e) = hours(10, 11);
    let (_, entry) = app.join_waitlist_with("bob", room, &json!({"start": s, "end": e})).await;
    let (status, r) = send(app.patch("admin", &format!("/v1/resources/{room}"), &json!({"capacity": 2}))).await;
    assert_eq!((status, r["capacity"].as_i64()), (StatusCode::OK, Some(2)));
    let entry = app.waitlist_entry("bob", &entry).await;
    assert_eq!(entry["status"], "OFFERED");
}

#[tokio::test]
async fn less_capacity_is_refused_while_an_instant_ahead_holds_more() {
    let app = TestApp::spawn().await;
    let hall = app.resource(3).await;
    let (s, e) = hours(10, 12);
    assert_eq!(app.reserve("alice", hall, (&s, &e), 2).await.0, StatusCode::CREATED);
    app.hold("bob", hall, 11, 13).await;
    let path = format!("/v1/resources/{hall}");
    let (status, problem) = send(app.patch("admin", &path, &json!({"capacity": 2}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "capacity-in-use"));
    let capacity: i32 =
        app.db().await.query_one("SELECT capacity FROM resources WHERE id = $1", &[&hall]).await.unwrap().get(0);
    assert_eq!(capacity, 3);
    assert_eq!(app.reserve("carol", hall, (&hours(20, 21).0, &hours(20, 21).1), 3).await.0, StatusCode::CREATED);
    let (status, problem) = send(app.patch("admin", &path, &json!({"capacity": 2}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "capacity-in-use"));
}

#[tokio::test]
async fn crossing_from_two_places_to_one_and_back_keeps_the_database_guarantee_exact() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource(2).await;
    // Two overlapping bookings, legal with two places, that will lie in the past.
    for who in ["alice", "bob"] {
        let r = app.hold(who, room, 10, 11).await;
        app.confirm(who, &r["id"]).await;
    }
    let ahead = app.hold("carol", room, 30, 31).await;
    app.confirm("carol", &ahead["id"]).await;
    clock.set(day() + Duration::hours(12));
    let path = format!("/v1/resources/{room}");
    let (status, r) = send(app.patch("admin", &path, &json!({"capacity": 1}))).await;
    assert_eq!(status, StatusCode::OK, "{r}");

    let db = app.db().await;
    // The booking ahead now carries capacity 1, so the exclusion constraint guards it.
    let carried: Vec<Option<i32>> = db
        .query("SELECT resource_capacity FROM reservations WHERE resource_id = $1 ORDER BY starts_at", &[&room])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(carried, [None, None, Some(1)]);
    let overlapping = db
        .execute(
            "INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, status, \
             expires_at, source, created_at, updated_at) \
             VALUES ($1, $2, 1, 'raw', $3, $4, 1, 'CONFIRMED', NULL, 'request', now(), now())",
            &[&Uuid::now_v7(), &room, &(day() + Duration::hours(30)), &(day() + Duration::hours(31))],
        )
        .await;
    let err = overlapping.expect_err("the exclusion constraint refuses an overlap at capacity 1");
    assert_eq!(err.code(), Some(&tokio_postgres::error::SqlState::EXCLUSION_VIOLATION));

    let (status, _) = send(app.patch("admin", &path, &json!({"capacity": 2}))).await;
    assert_eq!(status, StatusCode::OK);
    let (s, e) = hours(30, 31);
    assert_eq!(app.reserve("dave", room, (&s, &e), 1).await.0, StatusCode::CREATED);
    assert_eq!(app.reserve("erin", room, (&s, &e), 1).await.0, StatusCode::CONFLICT);
}

#[tokio::test]
async fn capacity_changes_racing_forty_clients_never_let_the_load_pass_the_capacity() {
    let app = TestApp::spawn().await;
    let hall = app.resource(4).await;
    let (s, e) = hours(10, 11);
    let path = format!("/v1/resources/{hall}");
    let clients = (0..40).map(|i| {
        let req = app.post(
            &format!("user{i}"),
            "/v1/reservations",
            &json!({"resource_id": hall, "start": s, "end": e, "confirm": i % 2 == 0}),
        );
        async move { req.send().await.unwrap().status() }
    });
    let admin = async {
        let mut statuses = Vec::new();
        for capacity in [2, 6, 3, 1, 8, 5] {
            statuses.push(send(app.patch("admin", &path, &json!({"capacity": capacity}))).await.0);
        }
        statuses
    };
    let (statuses, admin_statuses) = tokio::join!(futures::future::join_all(clients), admin);
    assert!(statuses.iter().all(|s| *s == StatusCode::CREATED || *s == StatusCode::CONFLICT), "{statuses:?}");
    assert!(admin_statuses.iter().all(|s| *s == StatusCode::OK || *s == StatusCode::CONFLICT), "{admin_statuses:?}");
    let db = app.db().await;
    let capacity: i32 = db.query_one("SELECT capacity FROM resources WHERE id = $1", &[&hall]).await.unwrap().get(0);
    let (from, to) = (day() + Duration::hours(10), day() + Duration::hours(11));
    let load = peak_load(from, to, &active_claims(&db, hall).await);
    assert!(load <= i64::from(capacity), "load {load} over capacity {capacity}");
    let stale: i64 = db
        .query_one(
            "SELECT count(*) FROM reservations r JOIN resources res ON res.id = r.resource_id \
             WHERE r.resource_capacity IS NOT NULL AND r.resource_capacity <> res.capacity",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stale, 0);
}

#[tokio::test]
async fn an_archived_resource_takes_nothing_new_but_keeps_what_it_has() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let booked = app.hold("alice", room, 10, 11).await;
    let (s, e) = hours(10, 11);
    let (_, entry) = app.join_waitlist_with("bob", room, &json!({"start": s, "end": e})).await;
    let path = format!("/v1/resources/{room}");
    assert_eq!(send(app.delete("alice", &path)).await.0, StatusCode::FORBIDDEN);
    let (status, archived) = send(app.delete("admin", &path)).await;
    assert_eq!(status, StatusCode::OK, "{archived}");
    assert!(archived["archived_at"].is_string());
    let (status, again) = send(app.delete("admin", &path)).await;
    assert_eq!((status, again["archived_at"].clone()), (StatusCode::OK, archived["archived_at"].clone()));

    let (s2, e2) = hours(12, 13);
    let (status, problem) = app.reserve("carol", room, (&s2, &e2), 1).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "resource-archived"));
    let join = json!({"start": s2, "end": e2});
    let (status, problem) = app.join_waitlist_with("carol", room, &join).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "resource-archived"));
    let (status, problem) = move_to(&app, "alice", &booked, 12, 13).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "resource-archived"));
    let entry = app.waitlist_entry("bob", &entry).await;
    assert_eq!(entry["status"], "CANCELLED");

    assert_eq!(send(app.get("alice", &path)).await.0, StatusCode::OK);
    let (status, released) = send(app.delete("alice", &reservation_path(&booked["id"]))).await;
    assert_eq!((status, released["status"].as_str()), (StatusCode::OK, Some("RELEASED")));
    // Nobody is offered the freed time of an archived resource.
    let offers = app.count("SELECT count(*) FROM reservations WHERE source = 'waitlist_offer'", &[]).await;
    assert_eq!(offers, 0);
}

#[tokio::test]
async fn metadata_is_kept_returned_changed_and_carried_in_events() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (s, e) = hours(10, 11);
    let body = json!({"resource_id": room, "start": s, "end": e, "metadata": {"booking_ref": "A-17"}});
    let (status, r) = send(app.post("alice", "/v1/reservations", &body)).await;
    assert_eq!((status, r["metadata"].clone()), (StatusCode::CREATED, json!({"booking_ref": "A-17"})));
    let (status, r) =
        send(app.patch("alice", &reservation_path(&r["id"]), &json!({"metadata": {"booking_ref": "A-18"}}))).await;
    assert_eq!((status, r["metadata"].clone()), (StatusCode::OK, json!({"booking_ref": "A-18"})));
    assert_eq!(send(app.get("alice", &reservation_path(&r["id"]))).await.1["metadata"], json!({"booking_ref": "A-18"}));
    let rows = app
        .db()
        .await
        .query("SELECT kind, payload->'metadata' FROM outbox WHERE subject_id = $1 ORDER BY id", &[&id_of(&r)])
        .await
        .unwrap();
    let log: Vec<(String, Value)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    assert_eq!(
        log,
        [
            ("reservation.held".to_string(), json!({"booking_ref": "A-17"})),
            ("reservation.updated".to_string(), json!({"booking_ref": "A-18"})),
        ]
    );
}

#[tokio::test]
async fn metadata_out_of_bounds_is_refused_naming_every_entry() {
    let app = TestApp::spawn().await;
    let long = "v".repeat(501);
    let (status, problem) =
        send(app.post("admin", "/v1/resources", &json!({"name": "Room", "metadata": {"a": 1, "b": long}}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let fields: Vec<&str> =
        problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["metadata.a", "metadata.b"]);
    let many: serde_json::Map<String, Value> = (0..21).map(|i| (format!("k{i}"), json!("v"))).collect();
    let (status, _) = send(app.post("admin", "/v1/resources", &json!({"name": "Room", "metadata": many}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}
