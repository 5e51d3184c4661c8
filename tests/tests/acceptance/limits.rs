//! Booking limits: at most so many live bookings and holds of one principal on a
//! resource per day, week, month or rolling span, counted under the resource's lock.

use acceptance::{TestApp, day, hours, reservation_path, rfc3339, send, send_at_once, slug};
use chrono::{DateTime, Duration, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};

fn at(v: &Value, field: &str) -> DateTime<Utc> {
    v[field].as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_holds_by_one_principal_under_a_limit_of_three_a_day_yield_exactly_three() {
    let app = TestApp::spawn().await;
    let hall =
        app.resource_with(json!({"name": "Hall", "capacity": 100, "limits": [{"max": 3, "window": "day"}]})).await;
    let results = send_at_once(
        (0..50)
            .map(|i| {
                let (start, end) = hours(i % 20, i % 20 + 1);
                app.post("bot", "/v1/reservations", &json!({"resource_id": hall, "start": start, "end": end}))
            })
            .collect(),
    )
    .await;
    let won = results.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    let refused = results.iter().filter(|(s, p)| *s == StatusCode::CONFLICT && slug(p) == "limit-exceeded").count();
    assert_eq!((won, refused), (3, 47), "{results:?}");
    let live = app
        .count(
            "SELECT count(*) FROM reservations WHERE resource_id = $1 AND owner = 'bot' AND status = 'HELD'",
            &[&hall],
        )
        .await;
    assert_eq!(live, 3, "the table holds three, not the answers only");
    let (_, problem) = results.iter().find(|(s, _)| *s == StatusCode::CONFLICT).unwrap();
    assert_eq!(problem["limit"], json!({"max": 3, "window": "day"}));
    assert_eq!((at(problem, "window_start"), at(problem, "window_end")), (day(), day() + Duration::days(1)));
    assert!(problem["frees_at"].is_string(), "the earliest counted hold lapses: {problem}");

    let (status, other) = app.reserve("alice", hall, (&hours(9, 10).0, &hours(9, 10).1), 1).await;
    assert_eq!(status, StatusCode::CREATED, "another principal is not limited: {other}");
    let (start, end) = (rfc3339(day() + Duration::hours(26)), rfc3339(day() + Duration::hours(27)));
    let (status, next_day) = app.reserve("bot", hall, (&start, &end), 1).await;
    assert_eq!(status, StatusCode::CREATED, "the next day is another window: {next_day}");
}

#[tokio::test]
async fn a_limit_frees_when_a_counted_booking_is_released_and_an_admin_is_not_limited() {
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Room", "limits": [{"max": 1, "window": "week"}]})).await;
    let first = app.hold("alice", room, 9, 10).await;
    let (s, e) = hours(11, 12);
    let (status, problem) = app.reserve("alice", room, (&s, &e), 1).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "limit-exceeded"), "{problem}");
    let (status, _) = send(app.delete("alice", &reservation_path(&first["id"]))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, second) = app.reserve("alice", room, (&s, &e), 1).await;
    assert_eq!(status, StatusCode::CREATED, "released, the place is free again: {second}");

    app.hold("admin", room, 13, 14).await;
    app.hold("admin", room, 15, 16).await;
}

#[tokio::test]
async fn a_reschedule_does_not_count_against_itself() {
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Room", "limits": [{"max": 1, "window": "day"}]})).await;
    let held = app.hold("alice", room, 9, 10).await;
    let (s, e) = hours(14, 15);
    let (status, moved) =
        send(app.patch("alice", &reservation_path(&held["id"]), &json!({"start": s, "end": e}))).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    assert_eq!(at(&moved, "start"), day() + Duration::hours(14));
}

#[tokio::test]
async fn a_rolling_limit_counts_any_span_of_its_length() {
    let app = TestApp::spawn().await;
    let room = app
        .resource_with(json!({"name": "Room", "capacity": 5,
                              "limits": [{"max": 2, "window": "rolling", "rolling_minutes": 240}]}))
        .await;
    app.hold("alice", room, 8, 9).await;
    app.hold("alice", room, 11, 12).await;
    let (s, e) = hours(10, 11);
    let (status, problem) = app.reserve("alice", room, (&s, &e), 1).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "limit-exceeded"), "{problem}");
    assert_eq!(problem["limit"], json!({"max": 2, "window": "rolling", "rolling_minutes": 240}));
    let (s, e) = hours(15, 16);
    let (status, _) = app.reserve("alice", room, (&s, &e), 1).await;
    assert_eq!(status, StatusCode::CREATED, "11:00-15:00 holds one start");
}

#[tokio::test]
async fn the_slots_read_shows_the_starts_a_limit_closed_for_the_asking_principal_only() {
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Room", "capacity": 3, "limits": [{"max": 1, "window": "day"}]})).await;
    app.hold("alice", room, 9, 10).await;
    let (from, to) = (rfc3339(day()), rfc3339(day() + Duration::days(2)));
    let path = format!("/v1/resources/{room}/slots?from={from}&to={to}&duration=PT1H&unavailable=true");
    let (_, alice) = send(app.get("alice", &path)).await;
    let (_, bob) = send(app.get("bob", &path)).await;
    let first_day = |v: &Value, list: &str| {
        v[list].as_array().unwrap().iter().filter(|s| at(s, "start") < day() + Duration::days(1)).count()
    };
    assert_eq!(first_day(&alice, "slots"), 0, "alice's day is full: {alice}");
    assert_eq!(first_day(&bob, "slots"), 24, "bob may book any hour");
    let limited: Vec<&Value> =
        alice["unavailable"].as_array().unwrap().iter().filter(|u| u["reason"] == "limit").collect();
    assert_eq!(limited.len(), 24, "{alice}");
    assert_eq!(first_day(&alice, "slots") + alice["slots"].as_array().unwrap().len(), 24, "the next day is open");
}

#[tokio::test]
async fn a_pool_item_moves_on_to_a_member_the_principal_may_still_book() {
    let app = TestApp::spawn().await;
    let limited = app.resource_with(json!({"name": "A", "limits": [{"max": 1, "window": "day"}]})).await;
    let free = app.resource(1).await;
    let (status, pool) = send(app.post(
        "admin",
        "/v1/pools",
        &json!({"name": "Rooms", "resource_ids": [limited, free], "strategy": "ordered"}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{pool}");
    app.hold("alice", limited, 8, 9).await;
    let (s, e) = hours(10, 11);
    let (status, booked) =
        send(app.post("alice", "/v1/reservations", &json!({"items": [{"pool_id": pool["id"]}], "start": s, "end": e})))
            .await;
    assert_eq!(status, StatusCode::CREATED, "{booked}");
    assert_eq!(booked["items"][0]["resource_id"], json!(free));
}

#[tokio::test]
async fn limits_are_set_read_and_cleared_and_every_bad_part_is_named() {
    let app = TestApp::spawn().await;
    let (status, problem) = send(app.post(
        "admin",
        "/v1/resources",
        &json!({"name": "Room", "limits": [{"max": 0, "window": "year"}, {"max": 1, "window": "day", "rolling_minutes": 5},
                                             {"max": 1, "window": "rolling"}]}),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    let fields: Vec<&str> =
        problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["limits[0].max", "limits[0].window", "limits[1].rolling_minutes", "limits[2].rolling_minutes"]);

    let room = app.resource_with(json!({"name": "Room", "limits": [{"max": 2, "window": "month"}]})).await;
    let path = format!("/v1/resources/{room}");
    let (_, read) = send(app.get("admin", &path)).await;
    assert_eq!(read["limits"], json!([{"max": 2, "window": "month"}]));
    let (status, cleared) = send(app.patch("admin", &path, &json!({"limits": null}))).await;
    assert_eq!((status, cleared["limits"].clone()), (StatusCode::OK, json!([])));
    for i in 0..3 {
        app.hold("alice", room, 9 + i, 10 + i).await;
    }
}

#[tokio::test]
async fn limits_set_after_a_process_read_the_rules_still_bind_its_next_hold() {
    let app = TestApp::spawn().await;
    let room = app.resource(3).await;
    app.hold("alice", room, 8, 9).await;
    let path = format!("/v1/resources/{room}");
    let (status, r) = send(app.patch("admin", &path, &json!({"limits": [{"max": 1, "window": "day"}]}))).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let (s, e) = hours(10, 11);
    let (status, problem) = app.reserve("alice", room, (&s, &e), 1).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "limit-exceeded"), "{problem}");
}

#[tokio::test]
async fn a_series_is_judged_occurrence_by_occurrence_against_the_limits() {
    let app = TestApp::spawn().await;
    let room = app
        .resource_with(json!({"name": "Room", "capacity": 2, "limits": [{"max": 2, "window": "rolling", "rolling_minutes": 4320}]}))
        .await;
    let (s, e) = hours(9, 10);
    let body = json!({"resource_id": room, "start": s, "end": e, "recurrence": "FREQ=DAILY;COUNT=3", "mode": "skip_conflicts"});
    let (status, series) = send(app.post("alice", "/v1/series", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "{series}");
    let occurrences = series["occurrences"].as_array().unwrap();
    let held: Vec<bool> = occurrences.iter().map(|o| o["reservation_id"].is_string()).collect();
    assert_eq!(held, [true, true, false], "{series}");
    assert_eq!(slug(&occurrences[2]["problem"]), "limit-exceeded", "{series}");
}

/// The payload of the one event of `kind` about reservation `id`.
async fn event_of(app: &TestApp, kind: &str, id: &Value) -> Value {
    let id: uuid::Uuid = id.as_str().unwrap().parse().unwrap();
    let db = app.db().await;
    let row =
        db.query_one("SELECT payload FROM outbox WHERE kind = $1 AND subject_id = $2", &[&kind, &id]).await.unwrap();
    row.get::<_, Value>(0)
}

#[tokio::test]
async fn an_admin_books_for_an_owner_past_the_owners_limit_and_the_booking_records_who_acted() {
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Room", "capacity": 3, "limits": [{"max": 1, "window": "day"}]})).await;
    app.hold("alice", room, 8, 9).await;
    let (s, e) = hours(10, 11);
    let body = json!({"resource_id": room, "start": s, "end": e, "owner": "alice", "confirm": true});
    let (status, booked) = send(app.post("admin", "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "admins are not limited, for whomever they act: {booked}");
    assert_eq!((booked["owner"].clone(), booked["acted_by"].clone()), (json!("alice"), json!("admin")));
    let event = event_of(&app, "reservation.confirmed", &booked["id"]).await;
    assert_eq!((event["owner"].clone(), event["acted_by"].clone()), (json!("alice"), json!("admin")), "{event}");

    let (_, listed) = send(app.get("alice", &format!("/v1/reservations?resource_id={room}"))).await;
    let ids: Vec<&Value> = listed["items"].as_array().unwrap().iter().map(|r| &r["id"]).collect();
    assert!(ids.contains(&&booked["id"]), "alice lists it as hers: {listed}");
    let (status, cancelled) = send(app.delete("alice", &reservation_path(&booked["id"]))).await;
    assert_eq!((status, cancelled["acted_by"].clone()), (StatusCode::OK, json!("alice")), "{cancelled}");

    let (s, e) = hours(12, 13);
    let (status, problem) = app.reserve("alice", room, (&s, &e), 1).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "limit-exceeded"), "alice still is: {problem}");
}

#[tokio::test]
async fn an_admin_books_several_items_for_an_owner() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.resource(1).await, app.resource(1).await);
    let (s, e) = hours(10, 11);
    let body = json!({"items": [{"resource_id": a}, {"resource_id": b}], "start": s, "end": e, "owner": "alice"});
    let (status, held) = send(app.post("admin", "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    assert_eq!((held["owner"].clone(), held["acted_by"].clone()), (json!("alice"), json!("admin")));
    let (status, confirmed) = app.confirm("alice", &held["id"]).await;
    assert_eq!((status, confirmed["status"].clone()), (StatusCode::OK, json!("CONFIRMED")), "{confirmed}");
}

#[tokio::test]
async fn only_an_admin_names_another_owner_and_the_name_is_checked() {
    let app = TestApp::spawn().await;
    let room = app.resource(2).await;
    let (s, e) = hours(10, 11);
    let for_bob = json!({"resource_id": room, "start": s, "end": e, "owner": "bob"});
    let (status, problem) = send(app.post("alice", "/v1/reservations", &for_bob)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::FORBIDDEN, "forbidden"), "{problem}");
    let series = json!({"resource_id": room, "start": s, "end": e, "owner": "bob", "recurrence": "FREQ=DAILY;COUNT=2"});
    let (status, problem) = send(app.post("alice", "/v1/series", &series)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::FORBIDDEN, "forbidden"), "{problem}");
    assert_eq!(app.count("SELECT count(*) FROM reservations", &[]).await, 0);

    let herself = json!({"resource_id": room, "start": s, "end": e, "owner": "alice"});
    let (status, held) = send(app.post("alice", "/v1/reservations", &herself)).await;
    assert_eq!(status, StatusCode::CREATED, "naming oneself is the plain booking: {held}");
    assert_eq!((held["owner"].clone(), held["acted_by"].clone()), (json!("alice"), json!("alice")));

    let bad = json!({"resource_id": room, "start": s, "end": e, "owner": "bo\u{7}b"});
    let (status, problem) = send(app.post("admin", "/v1/reservations", &bad)).await;
    assert_eq!((status, problem["errors"][0]["field"].clone()), (StatusCode::BAD_REQUEST, json!("owner")), "{problem}");
}

#[tokio::test]
async fn an_admin_makes_a_series_for_an_owner_whose_occurrences_and_events_name_the_series() {
    let app = TestApp::spawn().await;
    let room =
        app.resource_with(json!({"name": "Room", "capacity": 2, "limits": [{"max": 1, "window": "week"}]})).await;
    let (s, e) = hours(9, 10);
    let body = json!({"resource_id": room, "start": s, "end": e, "recurrence": "FREQ=DAILY;COUNT=3", "owner": "alice"});
    let (status, series) = send(app.post("admin", "/v1/series", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "three in a week, past alice's limit of one: {series}");
    assert_eq!(series["owner"], json!("alice"));
    let (status, read) = send(app.get("alice", &format!("/v1/series/{}", series["id"].as_str().unwrap()))).await;
    assert_eq!(status, StatusCode::OK, "alice reads her series: {read}");
    for o in series["occurrences"].as_array().unwrap() {
        let r = app.reservation("alice", &o["reservation_id"]).await;
        assert_eq!((r["owner"].clone(), r["acted_by"].clone()), (json!("alice"), json!("admin")), "{r}");
        assert_eq!(r["series_id"], series["id"]);
        let event = event_of(&app, "reservation.held", &o["reservation_id"]).await;
        assert_eq!((event["acted_by"].clone(), event["series_id"].clone()), (json!("admin"), series["id"].clone()));
    }
    let first = &series["occurrences"][0]["reservation_id"];
    let (status, _) = app.confirm("alice", first).await;
    assert_eq!(status, StatusCode::OK);
    let event = event_of(&app, "reservation.confirmed", first).await;
    assert_eq!(event["series_id"], series["id"], "every event of an occurrence names its series: {event}");
    let second = &series["occurrences"][1]["reservation_id"];
    let (later, _) = hours(34, 35);
    let (status, moved) =
        send(app.patch("admin", &reservation_path(second), &json!({"start": later, "end": hours(35, 36).0}))).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    let event = event_of(&app, "reservation.rescheduled", second).await;
    assert_eq!(event["series_id"], series["id"], "{event}");
    let third = &series["occurrences"][2]["reservation_id"];
    let (status, _) = send(app.delete("alice", &reservation_path(third))).await;
    assert_eq!(status, StatusCode::OK);
    let event = event_of(&app, "reservation.released", third).await;
    assert_eq!(event["series_id"], series["id"], "{event}");
    let single = app.hold("bob", room, 11, 12).await;
    let event = event_of(&app, "reservation.held", &single["id"]).await;
    assert!(event.get("series_id").is_none(), "a booking of no series has none: {event}");
}

// ---- The service-wide limit of active holds per principal ----------------------------

/// A server whose limit of active holds per principal is `max` (the harness turns it
/// off), on `clock`.
async fn app_with_holds_limit(max: i32, clock: std::sync::Arc<shared::clock::ManualClock>) -> TestApp {
    TestApp::spawn_with(acceptance::Options {
        clock,
        tweak: Box::new(move |c| c.max_active_holds_per_principal = max),
        ..Default::default()
    })
    .await
}

fn clock() -> std::sync::Arc<shared::clock::ManualClock> {
    std::sync::Arc::new(shared::clock::ManualClock::new(Utc::now()))
}

/// The owner's active holds as the table has them, a booking of several counting once.
async fn active_holds(app: &TestApp, owner: &str) -> i64 {
    app.count(
        "SELECT count(DISTINCT coalesce(booking_id, id)) FROM reservations \
         WHERE owner = $1 AND status = 'HELD' AND expires_at > now()",
        &[&owner],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_concurrent_holds_by_one_principal_on_thirty_resources_under_a_limit_of_three_yield_exactly_three() {
    let app = app_with_holds_limit(3, clock()).await;
    let mut resources = Vec::new();
    for i in 0..30 {
        // Both ways of the one-statement hold: capacity 1 (the row shared) and N.
        resources.push(app.resource(1 + i % 2).await);
    }
    let (start, end) = hours(9, 10);
    let results = send_at_once(
        resources
            .iter()
            .map(|r| app.post("bot", "/v1/reservations", &json!({"resource_id": r, "start": start, "end": end})))
            .collect(),
    )
    .await;
    let won = results.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    let refused = results.iter().filter(|(s, p)| *s == StatusCode::CONFLICT && slug(p) == "limit-exceeded").count();
    assert_eq!((won, refused), (3, 27), "{results:?}");
    assert_eq!(active_holds(&app, "bot").await, 3, "the table holds three, not the answers only");
    let (status, other) = app.reserve("alice", resources[0], (&start, &end), 1).await;
    assert!(status == StatusCode::CREATED || slug(&other) == "slot-unavailable", "another principal is not limited");
}

#[tokio::test]
async fn over_the_limit_the_problem_names_the_limit_and_when_it_frees() {
    let app = app_with_holds_limit(2, clock()).await;
    let (a, b, c) = (app.resource(1).await, app.resource(3).await, app.resource(1).await);
    let first = app.hold("alice", a, 9, 10).await;
    app.hold("alice", b, 9, 10).await;
    let (s, e) = hours(9, 10);
    let (status, problem) = app.reserve("alice", c, (&s, &e), 1).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "limit-exceeded"), "{problem}");
    assert_eq!(problem["limit"], json!({"scope": "principal", "max": 2}));
    assert_eq!(at(&problem, "frees_at"), at(&first, "expires_at"), "the earliest hold lapses first: {problem}");
    assert!(problem.get("window_start").is_none(), "the service's limit has no window: {problem}");
    let (status, keyed) = send(
        app.post("alice", "/v1/reservations", &json!({"resource_id": c, "start": s, "end": e}))
            .header("idempotency-key", "k-1"),
    )
    .await;
    assert_eq!((status, slug(&keyed)), (StatusCode::CONFLICT, "limit-exceeded"), "with a key too: {keyed}");
    assert_eq!(active_holds(&app, "alice").await, 2);
}

#[tokio::test]
async fn a_booking_of_several_counts_as_one_hold() {
    let app = app_with_holds_limit(2, clock()).await;
    let rooms: Vec<_> = futures::future::join_all((0..6).map(|_| app.resource(1))).await;
    let (s, e) = hours(9, 10);
    let items = |i: usize, j: usize| json!({"items": [{"resource_id": rooms[i]}, {"resource_id": rooms[j]}], "start": s, "end": e});
    let (status, both) = send(app.post("alice", "/v1/reservations", &items(0, 1))).await;
    assert_eq!(status, StatusCode::CREATED, "{both}");
    app.hold("alice", rooms[2], 9, 10).await;
    assert_eq!(active_holds(&app, "alice").await, 2, "two rows of one booking, and one hold");
    let (status, problem) = send(app.post("alice", "/v1/reservations", &items(3, 4))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "limit-exceeded"), "{problem}");
    let (status, problem) = app.reserve("alice", rooms[5], (&s, &e), 1).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "limit-exceeded"), "{problem}");
    let (status, _) = send(app.delete("alice", &reservation_path(&both["id"]))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, again) = send(app.post("alice", "/v1/reservations", &items(3, 4))).await;
    assert_eq!(status, StatusCode::CREATED, "the released booking freed one place: {again}");
}

#[tokio::test]
async fn an_admin_is_not_limited_for_themselves_nor_when_booking_for_an_owner() {
    let app = app_with_holds_limit(1, clock()).await;
    let rooms: Vec<_> = futures::future::join_all((0..5).map(|_| app.resource(1))).await;
    app.hold("alice", rooms[0], 9, 10).await;
    let (s, e) = hours(9, 10);
    let body = json!({"resource_id": rooms[1], "start": s, "end": e, "owner": "alice"});
    let (status, held) = send(app.post("admin", "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "an admin holds for alice past her limit: {held}");
    assert_eq!((held["owner"].clone(), held["acted_by"].clone()), (json!("alice"), json!("admin")));
    app.hold("admin", rooms[2], 9, 10).await;
    app.hold("admin", rooms[3], 9, 10).await;
    let (status, problem) = app.reserve("alice", rooms[4], (&s, &e), 1).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "limit-exceeded"), "alice still is: {problem}");
    assert_eq!(active_holds(&app, "alice").await, 2);
}

#[tokio::test]
async fn bookings_do_not_count_and_a_confirmed_hold_frees_a_place_as_a_lapsed_one_does() {
    let clock = clock();
    let app = app_with_holds_limit(1, clock.clone()).await;
    let rooms: Vec<_> = futures::future::join_all((0..5).map(|_| app.resource(1))).await;
    let (s, e) = hours(9, 10);
    let booking = json!({"resource_id": rooms[0], "start": s, "end": e, "confirm": true});
    let (status, booked) = send(app.post("alice", "/v1/reservations", &booking)).await;
    assert_eq!(status, StatusCode::CREATED, "a booking is no hold: {booked}");
    let held = app.hold("alice", rooms[1], 9, 10).await;
    let (status, problem) = app.reserve("alice", rooms[2], (&s, &e), 1).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "limit-exceeded"), "{problem}");
    let (status, confirmed) = app.confirm("alice", &held["id"]).await;
    assert_eq!(status, StatusCode::OK, "{confirmed}");
    let later = app.hold("alice", rooms[2], 9, 10).await;
    let (status, _) = app.reserve("alice", rooms[3], (&s, &e), 1).await;
    assert_eq!(status, StatusCode::CONFLICT);
    clock.set(at(&later, "expires_at"));
    let (status, lapsed) = app.reserve("alice", rooms[3], (&s, &e), 1).await;
    assert_eq!(status, StatusCode::CREATED, "a lapsed hold is not active: {lapsed}");
}

#[tokio::test]
async fn a_series_of_holds_is_judged_occurrence_by_occurrence_against_the_limit() {
    let app = app_with_holds_limit(2, clock()).await;
    let room = app.resource(1).await;
    let (s, e) = hours(9, 10);
    let body = json!({"resource_id": room, "start": s, "end": e, "recurrence": "FREQ=DAILY;COUNT=3", "mode": "skip_conflicts"});
    let (status, series) = send(app.post("alice", "/v1/series", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "{series}");
    let occurrences = series["occurrences"].as_array().unwrap();
    let held: Vec<bool> = occurrences.iter().map(|o| o["reservation_id"].is_string()).collect();
    assert_eq!(held, [true, true, false], "{series}");
    assert_eq!(occurrences[2]["problem"]["limit"], json!({"scope": "principal", "max": 2}), "{series}");
    assert_eq!(active_holds(&app, "alice").await, 2);
}

#[tokio::test]
async fn a_limit_of_zero_turns_the_limit_off_and_takes_no_principal_lock() {
    let app = app_with_holds_limit(0, clock()).await;
    let room = app.resource(100).await;
    for hour in 0..25 {
        app.hold("alice", room, hour, hour + 1).await;
    }
    assert_eq!(active_holds(&app, "alice").await, 25);
    assert_eq!(app.count("SELECT count(*) FROM principals", &[]).await, 0, "no principal's row was written");
}
