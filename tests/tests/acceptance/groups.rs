//! Bookings of several items (resources, and "any one of" a pool), all or nothing,
//! under real concurrency: no deadlock, no half booking, checked in SQL.

use acceptance::{TestApp, hours, reservation_path, send, send_at_once, slug};
use chrono::Duration;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::booking::sweep::Bounds;
use shared::clock::ManualClock;
use std::sync::Arc;
use uuid::Uuid;

fn book(app: &TestApp, who: &str, items: Value, from_hour: i64, to_hour: i64) -> reqwest::RequestBuilder {
    let (start, end) = hours(from_hour, to_hour);
    app.post(who, "/v1/reservations", &json!({"items": items, "start": start, "end": end}))
}

async fn pool(app: &TestApp, members: &[Uuid], strategy: &str) -> Uuid {
    let (status, p) =
        send(app.post("admin", "/v1/pools", &json!({"name": "Chairs", "resource_ids": members, "strategy": strategy})))
            .await;
    assert_eq!(status, StatusCode::CREATED, "{p}");
    p["id"].as_str().unwrap().parse().unwrap()
}

/// Rows of bookings of several that are live and whose booking is not whole: must be 0.
async fn half_bookings(app: &TestApp) -> i64 {
    app.count(
        "SELECT count(*) FROM (
             SELECT booking_id FROM reservations WHERE booking_id IS NOT NULL
             GROUP BY booking_id
             HAVING count(*) FILTER (WHERE status IN ('HELD', 'CONFIRMED')) NOT IN (0, count(*))) b",
        &[],
    )
    .await
}

/// Instants where a resource holds more than its capacity: must be 0.
async fn overbooked(app: &TestApp) -> i64 {
    app.count(
        "SELECT count(*) FROM reservations a JOIN reservations b
           ON a.resource_id = b.resource_id AND a.id < b.id AND a.period && b.period
          JOIN resources r ON r.id = a.resource_id AND r.capacity = 1
         WHERE a.status IN ('HELD', 'CONFIRMED') AND b.status IN ('HELD', 'CONFIRMED')",
        &[],
    )
    .await
}

#[tokio::test]
async fn a_booking_of_a_room_and_a_person_holds_both_and_reads_as_one_booking_with_its_items() {
    let app = TestApp::spawn().await;
    let (room, host) = (app.resource(1).await, app.resource(1).await);
    let (status, r) = send(book(&app, "alice", json!([{"resource_id": room}, {"resource_id": host}]), 10, 11)).await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    let items = json!([{"resource_id": room, "pool_id": null, "quantity": 1},
                       {"resource_id": host, "pool_id": null, "quantity": 1}]);
    assert_eq!(
        (r["items"].clone(), r["resource_id"].clone(), r["status"].as_str()),
        (items.clone(), json!(room), Some("HELD"))
    );
    assert_eq!(app.reservation("alice", &r["id"]).await["items"], items);
    let events = app.count("SELECT count(*) FROM outbox WHERE kind = 'reservation.held'", &[]).await;
    assert_eq!(events, 1, "a booking is one event");
    let payload_items = app
        .count("SELECT jsonb_array_length(payload -> 'items')::bigint FROM outbox WHERE kind = 'reservation.held'", &[])
        .await;
    assert_eq!(payload_items, 2);
    let (_, single) = send(app.post(
        "bob",
        "/v1/reservations",
        &json!({"resource_id": room, "start": hours(12, 13).0, "end": hours(12, 13).1}),
    ))
    .await;
    assert_eq!(
        single["items"],
        json!([{"resource_id": room, "pool_id": null, "quantity": 1}]),
        "one resource is one item"
    );
    let (_, list) = send(app.get("alice", "/v1/reservations")).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "listed once");
}

/// The ids a reservations list gives, every page of `limit` followed.
async fn listed(app: &TestApp, who: &str, query: &str, limit: usize) -> Vec<String> {
    let (mut ids, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let after = cursor.as_ref().map_or(String::new(), |c| format!("&cursor={c}"));
        let (status, page) = send(app.get(who, &format!("/v1/reservations?limit={limit}{query}{after}"))).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        ids.extend(page["items"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.into()),
            None => return ids,
        }
    }
}

#[tokio::test]
async fn a_booking_of_several_is_listed_once_under_each_of_its_resources_and_by_its_owner() {
    let app = TestApp::spawn().await;
    let (room, host, hall) = (app.resource(1).await, app.resource(1).await, app.resource(2).await);
    let (_, both) = send(book(&app, "alice", json!([{"resource_id": room}, {"resource_id": host}]), 10, 11)).await;
    // Two items on one resource, and one on another.
    let (_, twice) =
        send(book(&app, "alice", json!([{"resource_id": hall}, {"resource_id": hall}, {"resource_id": host}]), 12, 13))
            .await;
    let alone = app.hold("alice", host, 14, 15).await;
    let (both, twice, alone) = (both["id"].to_string(), twice["id"].to_string(), alone["id"].to_string());
    let ids = |v: &[&String]| v.iter().map(|s| s.trim_matches('"').to_string()).collect::<Vec<_>>();

    for limit in [1, 50] {
        let by = |q: String| {
            let app = &app;
            async move { listed(app, "admin", &q, limit).await }
        };
        assert_eq!(by(format!("&resource_id={room}")).await, ids(&[&both]), "under its lead's resource");
        assert_eq!(by(format!("&resource_id={host}")).await, ids(&[&alone, &twice, &both]), "under its items'");
        assert_eq!(by(format!("&resource_id={hall}")).await, ids(&[&twice]), "once, two items there");
        assert_eq!(by(String::new()).await, ids(&[&alone, &twice, &both]), "everyone's, once each");
        assert_eq!(
            listed(&app, "alice", &format!("&resource_id={host}"), limit).await,
            ids(&[&alone, &twice, &both]),
            "the owner's, by an item's resource"
        );
        assert_eq!(listed(&app, "alice", "&status=HELD", limit).await, ids(&[&alone, &twice, &both]));
    }
}

#[tokio::test]
async fn a_booking_whose_second_item_is_taken_leaves_nothing_behind_and_names_the_item() {
    let app = TestApp::spawn().await;
    let (room, host) = (app.resource(1).await, app.resource(1).await);
    app.hold("bob", host, 10, 11).await;
    let events_before = app.count("SELECT count(*) FROM outbox", &[]).await;
    let (status, problem) =
        send(book(&app, "alice", json!([{"resource_id": room}, {"resource_id": host}]), 10, 11)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "slot-unavailable"), "{problem}");
    assert_eq!(problem["items"], json!([{"index": 1, "resource_id": host, "reason": "taken"}]));
    assert_eq!(app.count("SELECT count(*) FROM reservations WHERE owner = 'alice'", &[]).await, 0);
    assert_eq!(app.count("SELECT count(*) FROM outbox", &[]).await, events_before);
}

#[tokio::test]
async fn an_item_whose_rules_refuse_the_range_is_named_in_a_422() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let closed = app.resource_with(json!({"name": "Closed", "schedule": {"weekly": {}}})).await;
    let (status, problem) =
        send(book(&app, "alice", json!([{"resource_id": room}, {"resource_id": closed}]), 10, 11)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::UNPROCESSABLE_ENTITY, "outside-schedule"), "{problem}");
    assert_eq!(problem["items"][0]["index"], 1);
    assert_eq!(problem["items"][0]["reason"], "outside_schedule");
    assert_eq!(app.count("SELECT count(*) FROM reservations", &[]).await, 0);
}

#[tokio::test]
async fn an_upstream_resource_cannot_be_booked_with_others() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let seat = app.resource_with(json!({"name": "Seat", "authority": "upstream", "upstream_ref": "seat-1"})).await;
    let (status, problem) =
        send(book(&app, "alice", json!([{"resource_id": room}, {"resource_id": seat}]), 10, 11)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::UNPROCESSABLE_ENTITY, "upstream-not-groupable"), "{problem}");
    assert_eq!(problem["items"][0]["index"], 1);
}

#[tokio::test]
async fn bad_items_are_named_one_by_one() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (status, problem) = send(book(
        &app,
        "alice",
        json!([{"resource_id": room, "pool_id": room}, {"quantity": 0, "resource_id": "x"}, {}]),
        10,
        11,
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    let mut fields: Vec<&str> =
        problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    fields.sort();
    assert_eq!(fields, ["items[0].pool_id", "items[1].quantity", "items[1].resource_id", "items[2].resource_id"]);
    let (status, problem) = send(app.post(
        "alice",
        "/v1/reservations",
        &json!({"resource_id": room, "items": [{"resource_id": room}], "start": hours(10, 11).0, "end": hours(10, 11).1}),
    ))
    .await;
    assert_eq!((status, problem["errors"][0]["field"].as_str()), (StatusCode::BAD_REQUEST, Some("items")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_bookings_of_a_and_b_against_a_hundred_of_b_and_a_never_deadlock_nor_half_book() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.resource(1).await, app.resource(1).await);
    let results = send_at_once(
        (0..200)
            .map(|i| {
                // Overlapping ranges: 10-11, 10-12, 11-12, ... in both orders.
                let from = 10 + (i % 3) as i64;
                let items = if i % 2 == 0 {
                    json!([{"resource_id": a}, {"resource_id": b}])
                } else {
                    json!([{"resource_id": b}, {"resource_id": a}])
                };
                book(&app, &format!("user{i}"), items, from, from + 1 + (i % 2) as i64)
            })
            .collect(),
    )
    .await;
    for (status, body) in &results {
        assert!(*status == StatusCode::CREATED || *status == StatusCode::CONFLICT, "{status} {body}");
    }
    assert!(results.iter().any(|(s, _)| *s == StatusCode::CREATED));
    assert_eq!(half_bookings(&app).await, 0, "never one of A or B without the other");
    assert_eq!(overbooked(&app).await, 0);
    let a_rows = app.count("SELECT count(*) FROM reservations WHERE resource_id = $1", &[&a]).await;
    let b_rows = app.count("SELECT count(*) FROM reservations WHERE resource_id = $1", &[&b]).await;
    assert_eq!(a_rows, b_rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_bookings_of_a_pool_of_three_for_one_slot_have_exactly_three_winners() {
    let app = TestApp::spawn().await;
    let chairs = [app.resource(1).await, app.resource(1).await, app.resource(1).await];
    let pool = pool(&app, &chairs, "least_booked").await;
    let results =
        send_at_once((0..50).map(|i| book(&app, &format!("user{i}"), json!([{"pool_id": pool}]), 10, 11)).collect())
            .await;
    let won = results.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    let lost: Vec<&Value> = results.iter().filter(|(s, _)| *s == StatusCode::CONFLICT).map(|(_, b)| b).collect();
    assert_eq!((won, lost.len()), (3, 47), "{results:?}");
    assert!(lost.iter().all(|p| p["items"] == json!([{"index": 0, "pool_id": pool, "reason": "taken"}])));
    for chair in chairs {
        let held = app
            .count(
                "SELECT count(*) FROM reservations WHERE resource_id = $1 AND status = 'HELD' AND pool_id = $2",
                &[&chair, &pool],
            )
            .await;
        assert_eq!(held, 1, "each member once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookings_in_one_statement_and_bookings_with_a_key_race_without_deadlock_nor_half_booking() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.resource(1).await, app.resource(1).await);
    let results = send_at_once(
        (0..100)
            .map(|i| {
                let items = if i % 2 == 0 {
                    json!([{"resource_id": a}, {"resource_id": b}])
                } else {
                    json!([{"resource_id": b}, {"resource_id": a}])
                };
                let req = book(&app, &format!("user{i}"), items, 10, 11);
                // Every other request has a key: the guard's transaction, beside the one statement.
                if i % 4 < 2 { req.header("idempotency-key", format!("k{i}")) } else { req }
            })
            .collect(),
    )
    .await;
    let won = results.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    let lost = results.iter().filter(|(s, _)| *s == StatusCode::CONFLICT).count();
    let other: Vec<_> =
        results.iter().filter(|(s, _)| !matches!(*s, StatusCode::CREATED | StatusCode::CONFLICT)).collect();
    assert_eq!((won, lost), (1, 99), "{other:?}");
    assert_eq!(half_bookings(&app).await, 0);
    assert_eq!(overbooked(&app).await, 0);
}

#[tokio::test]
async fn items_of_one_booking_on_one_resource_count_against_each_other() {
    let app = TestApp::spawn().await;
    let (hall, desk) = (app.resource(2).await, app.resource(1).await);
    let both = json!([{"resource_id": hall}, {"resource_id": desk}, {"resource_id": hall}]);
    let (status, r) = send(book(&app, "alice", both, 10, 11)).await;
    assert_eq!((status, r["items"].as_array().map(Vec::len)), (StatusCode::CREATED, Some(3)), "{r}");
    let (status, problem) =
        send(book(&app, "bob", json!([{"resource_id": hall, "quantity": 1}, {"resource_id": hall}]), 11, 12)).await;
    assert_eq!(status, StatusCode::CREATED, "{problem}");
    let (status, problem) =
        send(book(&app, "carol", json!([{"resource_id": hall, "quantity": 2}, {"resource_id": hall}]), 12, 13)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "slot-unavailable"), "{problem}");
    assert_eq!(problem["items"], json!([{"index": 1, "resource_id": hall, "reason": "taken"}]));
    assert_eq!(overbooked(&app).await, 0);
    let over_two = app
        .count(
            "SELECT count(*) FROM (SELECT starts_at FROM reservations WHERE resource_id = $1 AND status = 'HELD'
                                     GROUP BY starts_at HAVING sum(quantity) > 2) over_capacity",
            &[&hall],
        )
        .await;
    assert_eq!(over_two, 0);
}

#[tokio::test]
async fn a_lapsed_hold_in_the_way_of_a_booking_of_several_goes_to_its_waiter_first() {
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 30})).await;
    let host = app.resource(1).await;
    app.hold("alice", room, 10, 11).await;
    let (status, bob) = app.join_waitlist("bob", room, 10, 11, 1).await;
    assert_eq!(status, StatusCode::CREATED, "{bob}");
    clock.advance(Duration::seconds(31));
    let (status, problem) =
        send(book(&app, "mallory", json!([{"resource_id": host}, {"resource_id": room}]), 10, 11)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "slot-unavailable"), "{problem}");
    assert_eq!(problem["items"], json!([{"index": 1, "resource_id": room, "reason": "taken"}]));
    assert_eq!(app.waitlist_entry("bob", &bob).await["status"], "OFFERED");
    let left = app.count("SELECT count(*) FROM reservations WHERE owner = 'mallory'", &[]).await;
    assert_eq!(left, 0, "nothing of the refused booking is left");
}

#[tokio::test]
async fn a_pool_picks_by_its_strategy_and_the_same_state_gives_the_same_pick() {
    let app = TestApp::spawn().await;
    let mut chairs = [app.resource(1).await, app.resource(1).await, app.resource(1).await];
    chairs.sort();
    // The last by id is busy nearby: least_booked takes the first by id, then the next.
    app.hold("bob", chairs[0], 14, 15).await;
    let least = pool(&app, &chairs, "least_booked").await;
    let picked = |r: &Value| r["items"][0]["resource_id"].as_str().unwrap().parse::<Uuid>().unwrap();
    let (_, first) = send(book(&app, "alice", json!([{"pool_id": least}]), 10, 11)).await;
    assert_eq!(picked(&first), chairs[1], "{first}");
    assert_eq!(first["items"][0]["pool_id"], json!(least));
    send(app.delete("alice", &reservation_path(&first["id"]))).await;
    let (_, again) = send(book(&app, "carol", json!([{"pool_id": least}]), 10, 11)).await;
    assert_eq!(picked(&again), chairs[1], "the same state, the same pick");

    let ordered = pool(&app, &[chairs[2], chairs[0], chairs[1]], "ordered").await;
    let (_, r) = send(book(&app, "dave", json!([{"pool_id": ordered}]), 12, 13)).await;
    assert_eq!(picked(&r), chairs[2], "the pool's own order");
    let (_, r) = send(book(&app, "erin", json!([{"pool_id": ordered}]), 12, 13)).await;
    assert_eq!(picked(&r), chairs[0], "a taken member is passed over in the same transaction");
}

#[tokio::test]
async fn confirm_release_move_and_expiry_act_on_the_whole_booking() {
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let (room, host) = (app.resource(1).await, app.resource(1).await);
    let items = json!([{"resource_id": room}, {"resource_id": host}]);
    let (_, r) = send(book(&app, "alice", items.clone(), 10, 11)).await;
    let (status, confirmed) = app.confirm("alice", &r["id"]).await;
    assert_eq!((status, confirmed["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(2)), "{confirmed}");
    let booking_rows = |status: &'static str| {
        let app = &app;
        let id = r["id"].as_str().unwrap().to_string();
        async move {
            app.count("SELECT count(*) FROM reservations WHERE booking_id::text = $1 AND status = $2", &[&id, &status])
                .await
        }
    };
    assert_eq!(booking_rows("CONFIRMED").await, 2);

    let (s, e) = hours(14, 15);
    let (status, moved) = send(app.patch("alice", &reservation_path(&r["id"]), &json!({"start": s, "end": e}))).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    let moved_rows = app
        .count(
            "SELECT count(*) FROM reservations WHERE booking_id::text = $1 AND starts_at = $2::text::timestamptz",
            &[&r["id"].as_str(), &s],
        )
        .await;
    assert_eq!(moved_rows, 2, "every item moved");
    app.hold("bob", host, 16, 17).await;
    let (s, e) = hours(16, 17);
    let (status, problem) = send(app.patch("alice", &reservation_path(&r["id"]), &json!({"start": s, "end": e}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "slot-unavailable"), "{problem}");
    assert_eq!(problem["items"][0]["index"], 1);
    assert_eq!(
        moved_rows,
        app.count(
            "SELECT count(*) FROM reservations WHERE booking_id::text = $1 AND starts_at = $2::text::timestamptz",
            &[&r["id"].as_str(), &hours(14, 15).0]
        )
        .await,
        "a refused move moves nothing"
    );

    let (status, cancelled) = send(app.delete("alice", &reservation_path(&r["id"]))).await;
    assert_eq!((status, cancelled["status"].as_str()), (StatusCode::OK, Some("CANCELLED")));
    assert_eq!(booking_rows("CANCELLED").await, 2);
    let events = app.count("SELECT count(*) FROM outbox WHERE subject_id::text = $1", &[&r["id"].as_str()]).await;
    assert_eq!(events, 4, "held, confirmed, rescheduled, cancelled: one each");

    let (_, held) = send(book(&app, "carol", items, 10, 11)).await;
    clock.advance(Duration::seconds(i64::from(app.state.config.hold_ttl_seconds) + 1));
    let bounds = Bounds { batch: 10, budget: std::time::Duration::from_secs(10) };
    shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), bounds).await.unwrap();
    let expired = app
        .count(
            "SELECT count(*) FROM reservations WHERE booking_id::text = $1 AND status = 'EXPIRED'",
            &[&held["id"].as_str()],
        )
        .await;
    assert_eq!(expired, 2);
    let events = app
        .count(
            "SELECT count(*) FROM outbox WHERE kind = 'reservation.expired' AND payload ->> 'reservation_id' IN
               (SELECT id::text FROM reservations WHERE booking_id::text = $1)",
            &[&held["id"].as_str()],
        )
        .await;
    assert_eq!(events, 1, "a booking expires as one event");
}

#[tokio::test]
async fn pools_are_created_read_changed_and_deleted_by_admins() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.resource(1).await, app.resource(1).await);
    let (status, _) = send(app.post("alice", "/v1/pools", &json!({"name": "P", "resource_ids": [a]}))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, problem) = send(app.post(
        "admin",
        "/v1/pools",
        &json!({"name": "P", "resource_ids": [a, a, Uuid::nil()], "strategy": "random"}),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "strategy");
    let (status, problem) =
        send(app.post("admin", "/v1/pools", &json!({"name": "P", "resource_ids": [a, a, Uuid::nil()]}))).await;
    let fields: Vec<&str> =
        problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    assert_eq!((status, fields), (StatusCode::BAD_REQUEST, vec!["resource_ids[1]", "resource_ids[2]"]));

    let id = pool(&app, &[a, b], "ordered").await;
    let (status, read) = send(app.get("alice", &format!("/v1/pools/{id}"))).await;
    assert_eq!(
        (status, read["resource_ids"].clone(), read["strategy"].as_str()),
        (StatusCode::OK, json!([a, b]), Some("ordered"))
    );
    let (status, changed) =
        send(app.patch("admin", &format!("/v1/pools/{id}"), &json!({"resource_ids": [b, a], "name": "Q"}))).await;
    assert_eq!(
        (status, changed["resource_ids"].clone(), changed["name"].as_str()),
        (StatusCode::OK, json!([b, a]), Some("Q"))
    );
    let (_, list) = send(app.get("alice", "/v1/pools")).await;
    assert_eq!(list["items"][0]["id"], json!(id));
    let (status, _) = send(app.delete("admin", &format!("/v1/pools/{id}"))).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, problem) = send(app.get("alice", &format!("/v1/pools/{id}"))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "pool-not-found"));
    let (status, problem) = send(book(&app, "alice", json!([{"pool_id": id}]), 10, 11)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "pool-not-found"));
}

#[tokio::test]
async fn the_slots_of_a_group_are_the_starts_at_which_every_resource_and_some_pool_member_is_free() {
    let app = TestApp::spawn().await;
    let (room, host) = (app.resource(1).await, app.resource(1).await);
    let chairs = [app.resource(1).await, app.resource(1).await];
    let barbers = pool(&app, &chairs, "ordered").await;
    app.hold("bob", host, 10, 11).await;
    app.hold("bob", chairs[0], 11, 12).await;
    app.hold("carol", chairs[1], 11, 12).await;
    let (from, to) = hours(9, 13);
    let path = format!(
        "/v1/slots?resource_id={room}&resource_id={host}&pool_id={barbers}&together=true&from={from}&to={to}&duration=PT1H"
    );
    let (status, body) = send(app.get("alice", &path)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let starts: Vec<&str> = body["slots"].as_array().unwrap().iter().map(|s| s["start"].as_str().unwrap()).collect();
    assert_eq!(starts, [hours(9, 10).0.as_str(), hours(12, 13).0.as_str()], "{body}");
    let (status, problem) =
        send(app.get("alice", &format!("/v1/slots?pool_id={barbers}&from={from}&to={to}&duration=PT1H"))).await;
    assert_eq!((status, problem["errors"][0]["field"].as_str()), (StatusCode::BAD_REQUEST, Some("pool_id")));
}
