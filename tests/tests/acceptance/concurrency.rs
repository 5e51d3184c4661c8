//! Nobody double-books, under any concurrency: the races the product exists for.

use acceptance::{TestApp, hours, send, slug};
use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::json;
use shared::clock::Clock;
use shared::domain::peak_load;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Barrier;
use uuid::Uuid;

/// Fires `n` requests built by `make` at once; none may fail with a 5xx.
async fn burst(n: usize, make: impl Fn(usize) -> reqwest::RequestBuilder) -> Vec<(StatusCode, serde_json::Value)> {
    let barrier = Arc::new(Barrier::new(n));
    let results = join_all((0..n).map(|i| {
        let req = make(i);
        let barrier = barrier.clone();
        async move {
            barrier.wait().await;
            send(req).await
        }
    }))
    .await;
    for (status, body) in &results {
        assert!(!status.is_server_error(), "{status} {body}");
    }
    results
}

fn count(results: &[(StatusCode, serde_json::Value)], status: StatusCode) -> usize {
    results.iter().filter(|(s, _)| *s == status).count()
}

async fn active_rows(app: &TestApp, resource: Uuid) -> i64 {
    app.count(
        "SELECT count(*) FROM reservations WHERE resource_id = $1 AND status IN ('HELD','CONFIRMED')",
        &[&resource],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hundred_concurrent_holds_of_one_slot_have_exactly_one_winner() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (start, end) = hours(10, 11);
    let results = burst(100, |i| {
        app.post(&format!("user{i}"), "/v1/reservations", &json!({"resource_id": room, "start": start, "end": end}))
    })
    .await;
    assert_eq!(count(&results, StatusCode::CREATED), 1);
    assert_eq!(count(&results, StatusCode::CONFLICT), 99);
    for (status, body) in &results {
        if *status == StatusCode::CONFLICT {
            assert_eq!(slug(body), "slot-unavailable");
        }
    }
    assert_eq!(active_rows(&app, room).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_concurrent_one_step_bookings_have_exactly_one_winner() {
    let app = TestApp::spawn().await;
    let worker = app.resource(1).await;
    let (start, end) = hours(14, 15);
    let results = burst(12, |i| {
        app.post(
            &format!("client{i}"),
            "/v1/reservations",
            &json!({"resource_id": worker, "start": start, "end": end, "confirm": true}),
        )
    })
    .await;
    assert_eq!(count(&results, StatusCode::CREATED), 1);
    assert_eq!(count(&results, StatusCode::CONFLICT), 11);
    let winner = results.iter().find(|(s, _)| *s == StatusCode::CREATED).unwrap();
    assert_eq!(winner.1["status"], "CONFIRMED");
    assert_eq!(active_rows(&app, worker).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_overlaps_conflict_and_adjacent_ranges_do_not() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    assert_eq!(app.reserve("alice", room, (&hours(10, 11).0, &hours(10, 11).1), 1).await.0, StatusCode::CREATED);
    // 10:30-11:30 overlaps the tail of 10-11
    let (s, e) = (acceptance::rfc3339(acceptance::day() + chrono::Duration::minutes(630)), hours(11, 12).0);
    assert_eq!(app.reserve("bob", room, (&s, &e), 1).await.0, StatusCode::CONFLICT);
    // 09-10:30 overlaps the head
    let s = hours(9, 10).0;
    let e = acceptance::rfc3339(acceptance::day() + chrono::Duration::minutes(630));
    assert_eq!(app.reserve("bob", room, (&s, &e), 1).await.0, StatusCode::CONFLICT);
    // 08-13 contains it
    assert_eq!(app.reserve("bob", room, (&hours(8, 13).0, &hours(8, 13).1), 1).await.0, StatusCode::CONFLICT);
    // 09-10 and 11-12 only touch it
    assert_eq!(app.reserve("bob", room, (&hours(9, 10).0, &hours(9, 10).1), 1).await.0, StatusCode::CREATED);
    assert_eq!(app.reserve("carol", room, (&hours(11, 12).0, &hours(11, 12).1), 1).await.0, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_refuses_overlaps_on_single_unit_resources_even_without_the_lock() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (s, e) = hours(10, 12);
    assert_eq!(app.reserve("alice", room, (&s, &e), 1).await.0, StatusCode::CREATED);
    // A code path that forgets the lock and the load check: a raw insert.
    let db = app.db().await;
    let err = db
        .execute(
            "INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, \
             status, expires_at, source, created_at, updated_at) \
             VALUES ($1, $2, 1, 'mallory', $3::text::timestamptz, $4::text::timestamptz, 1, 'CONFIRMED', NULL, \
             'request', now(), now())",
            &[&Uuid::new_v4(), &room, &hours(11, 13).0, &hours(11, 13).1],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&tokio_postgres::error::SqlState::EXCLUSION_VIOLATION));
    // ... and the capacity can't be lied about either: it is a foreign key to the resource.
    let err = db
        .execute(
            "INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, \
             status, expires_at, source, created_at, updated_at) \
             VALUES ($1, $2, 2, 'mallory', $3::text::timestamptz, $4::text::timestamptz, 1, 'CONFIRMED', NULL, \
             'request', now(), now())",
            &[&Uuid::new_v4(), &room, &hours(11, 13).0, &hours(11, 13).1],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION));
}

/// A small deterministic generator, so a failing run can be replayed from its seed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_n_is_never_exceeded_under_random_concurrent_load() {
    const CAPACITY: i64 = 5;
    let seed = 0x5eed_1234_u64;
    let app = TestApp::spawn().await;
    let hall = app.resource(CAPACITY as i32).await;
    let (day_start, day_end) = (acceptance::day(), acceptance::day() + chrono::Duration::hours(24));

    // A watcher checks the invariant on committed state, again and again, while the
    // load runs: at no instant of the timeline, at no moment of the run, is the load
    // over capacity.
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, db) = (stop.clone(), app.db().await);
        tokio::spawn(async move {
            let mut checks = 0;
            while !stop.load(Ordering::Relaxed) {
                let peak = peak_load(day_start, day_end, &acceptance::active_claims(&db, hall).await);
                assert!(peak <= CAPACITY, "load {peak} over capacity {CAPACITY}");
                checks += 1;
            }
            checks
        })
    };

    let mut rng = Rng(seed);
    let mut plans = Vec::new();
    for i in 0..300 {
        let start = rng.below(22) as i64;
        let len = 1 + rng.below(4) as i64;
        let quantity = 1 + rng.below(3) as i32;
        let confirm = rng.below(3) == 0;
        let release = rng.below(4) == 0;
        plans.push((format!("u{i}"), hours(start, (start + len).min(24)), quantity, confirm, release));
    }
    let barrier = Arc::new(Barrier::new(plans.len()));
    let outcomes = join_all(plans.into_iter().map(|(who, (s, e), quantity, confirm, release)| {
        let (app, barrier) = (&app, barrier.clone());
        async move {
            barrier.wait().await;
            let (status, body) = send(app.post(
                &who,
                "/v1/reservations",
                &json!({"resource_id": hall, "start": s, "end": e, "quantity": quantity, "confirm": confirm}),
            ))
            .await;
            assert!(status == StatusCode::CREATED || status == StatusCode::CONFLICT, "{status} {body}");
            if status == StatusCode::CREATED && release {
                let id = body["id"].as_str().unwrap();
                let (status, _) = send(app.delete(&who, &format!("/v1/reservations/{id}"))).await;
                assert_eq!(status, StatusCode::OK);
            }
            status
        }
    }))
    .await;
    stop.store(true, Ordering::Relaxed);
    let checks = watcher.await.expect("the invariant held throughout");

    let won = outcomes.iter().filter(|s| **s == StatusCode::CREATED).count();
    let lost = outcomes.iter().filter(|s| **s == StatusCode::CONFLICT).count();
    assert!(won > 0 && lost > 0, "the load must both fill and overflow the hall ({won} won, {lost} lost)");
    assert!(checks > 0);
    let db = app.db().await;
    let final_claims = acceptance::active_claims(&db, hall).await;
    assert!(peak_load(day_start, day_end, &final_claims) <= CAPACITY);
}

/// A competitor's lock on the resource, held until `release` (the hold asks for a
/// free lock first and looks before waiting only when it is taken).
async fn lock_resource(app: &TestApp, resource: Uuid) -> deadpool_postgres::Object {
    let locker = app.db().await;
    locker.batch_execute("BEGIN").await.unwrap();
    locker.execute("SELECT 1 FROM resources WHERE id = $1 FOR NO KEY UPDATE", &[&resource]).await.unwrap();
    locker
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_of_a_taken_range_is_refused_at_once_while_a_competitor_holds_the_lock() {
    // Were the loser to queue on the lock, it would end in a lock timeout (503) here.
    let app = TestApp::spawn_with(acceptance::Options {
        tweak: Box::new(|c| c.database.statement_timeout = std::time::Duration::from_millis(800)),
        ..Default::default()
    })
    .await;
    let room = app.resource(1).await;
    let (start, end) = hours(10, 11);
    let body = json!({"resource_id": room, "start": start, "end": end});
    let (status, _) = send(app.post("alice", "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CREATED);
    let locker = lock_resource(&app, room).await;
    let (status, problem) = send(app.post("bob", "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert_eq!(slug(&problem), "slot-unavailable");
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(active_rows(&app, room).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_of_a_free_range_waits_for_a_competitors_lock_and_is_stored_after_it() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (start, end) = hours(10, 11);
    let locker = lock_resource(&app, room).await;
    let hold = tokio::spawn(send(app.post(
        "alice",
        "/v1/reservations",
        &json!({"resource_id": room, "start": start, "end": end}),
    )));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!hold.is_finished(), "the hold went ahead while another transaction held the resource's lock");
    // The competitor wins the same range in the meantime, and commits.
    locker
        .execute(
            "INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, \
             status, expires_at, source, created_at, updated_at, acted_by) \
             SELECT gen_random_uuid(), $1, 1, 'carol', $2::text::timestamptz, $3::text::timestamptz, 1, 'CONFIRMED', \
             NULL, 'request', now(), now(), 'carol'",
            &[&room, &start, &end],
        )
        .await
        .unwrap();
    locker.batch_execute("COMMIT").await.unwrap();
    // Read under the lock after it was granted, the competitor's booking refuses it.
    let (status, problem) = hold.await.unwrap();
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert_eq!(slug(&problem), "slot-unavailable");
    assert_eq!(active_rows(&app, room).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_fits_beside_two_claims_that_never_overlap_each_other() {
    // Capacity 2, held 10-11 and 11-12: their total (2) leaves no room, their peak (1)
    // does, so only the sweep of the load profile can let 10-12 in; a third unit may
    // not follow it.
    let app = TestApp::spawn().await;
    let room = app.resource(2).await;
    for (from, to) in [(10, 11), (11, 12)] {
        let (start, end) = hours(from, to);
        let (status, r) =
            send(app.post("alice", "/v1/reservations", &json!({"resource_id": room, "start": start, "end": end})))
                .await;
        assert_eq!(status, StatusCode::CREATED, "{r}");
    }
    let (start, end) = hours(10, 12);
    let body = json!({"resource_id": room, "start": start, "end": end});
    let (status, r) = send(app.post("bob", "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    let (status, r) = send(app.post("carol", "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{r}");
    let (day_start, day_end) = (acceptance::day(), acceptance::day() + chrono::Duration::hours(24));
    assert_eq!(peak_load(day_start, day_end, &acceptance::active_claims(&app.db().await, room).await), 2);
}

/// A hold of a capacity-1 resource left in flight: `reservation_hold` in a transaction
/// that stays open, holding the resource row as every such hold does (FOR SHARE).
async fn hold_in_flight(app: &TestApp, resource: Uuid, (start, end): (&str, &str)) -> deadpool_postgres::Object {
    let tx = app.db().await;
    tx.batch_execute("BEGIN").await.unwrap();
    let outcome: String = tx
        .query_one(
            "SELECT outcome FROM reservation_hold(gen_random_uuid(), $1, 'dave', $2::text::timestamptz, \
             $3::text::timestamptz, 1, false, now(), '{}', gen_random_uuid())",
            &[&resource, &start, &end],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(outcome, "reserved");
    tx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_of_one_single_unit_resource_go_side_by_side_and_one_range_goes_to_the_first_to_commit() {
    // Were the second hold to queue on the first one's lock, it would end in a statement
    // timeout (503) here.
    let app = TestApp::spawn_with(acceptance::Options {
        tweak: Box::new(|c| c.database.statement_timeout = std::time::Duration::from_millis(800)),
        ..Default::default()
    })
    .await;
    let room = app.resource(1).await;
    let (ten, eleven) = hours(10, 11);
    let in_flight = hold_in_flight(&app, room, (&ten, &eleven)).await;
    let (next, noon) = hours(11, 12);
    let (status, r) = app.reserve("alice", room, (&next, &noon), 1).await;
    assert_eq!(status, StatusCode::CREATED, "{r}");

    // The same range waits for the hold in flight, and takes it when that one rolls back.
    let same = tokio::spawn(send(app.post(
        "bob",
        "/v1/reservations",
        &json!({"resource_id": room, "start": ten, "end": eleven}),
    )));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!same.is_finished(), "a hold of a range in flight did not wait for it");
    in_flight.batch_execute("ROLLBACK").await.unwrap();
    let (status, r) = same.await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{r}");
    assert_eq!(r["owner"], "bob");

    // And one that commits keeps it.
    let (one, two) = hours(13, 14);
    let in_flight = hold_in_flight(&app, room, (&one, &two)).await;
    let late = tokio::spawn(send(app.post(
        "carol",
        "/v1/reservations",
        &json!({"resource_id": room, "start": one, "end": two}),
    )));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    in_flight.batch_execute("COMMIT").await.unwrap();
    let (status, problem) = late.await.unwrap();
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert_eq!(slug(&problem), "slot-unavailable");
    assert_eq!(active_rows(&app, room).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_change_waits_for_a_single_unit_hold_in_flight_and_carries_it_over() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (start, end) = hours(10, 11);
    let in_flight = hold_in_flight(&app, room, (&start, &end)).await;
    let change = tokio::spawn(send(app.patch("admin", &format!("/v1/resources/{room}"), &json!({"capacity": 2}))));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!change.is_finished(), "the change went ahead while a hold held the resource");
    in_flight.batch_execute("COMMIT").await.unwrap();
    let (status, r) = change.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{r}");
    // The hold counts against the new capacity: one more unit fits, not two.
    let capacities: Vec<i32> = app
        .db()
        .await
        .query("SELECT resource_capacity FROM reservations WHERE resource_id = $1", &[&room])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(capacities, [2]);
    assert_eq!(app.reserve("alice", room, (&start, &end), 1).await.0, StatusCode::CREATED);
    assert_eq!(app.reserve("bob", room, (&start, &end), 1).await.0, StatusCode::CONFLICT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_for_a_range_behind_a_lapsed_hold_has_one_winner_and_no_deadlock() {
    // Each request's one-statement hold finds the lapsed hold and leaves it to the
    // general path, whose transaction must take the resource's lock exclusively. Had
    // that transaction first taken it shared (the capacity-1 hold's lock), two of
    // them would each wait for the other to let go (a deadlock, answered 503).
    let clock = Arc::new(shared::clock::ManualClock::new(chrono::Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "capacity": 1, "hold_ttl_seconds": 1})).await;
    // Three rounds, each on a range of its own: a deadlock needs two transactions in
    // the same window, which one round does not always open.
    for (round, from) in [10, 12, 14].into_iter().enumerate() {
        let (start, end) = hours(from, from + 1);
        assert_eq!(app.reserve("alice", room, (&start, &end), 1).await.0, StatusCode::CREATED);
        clock.advance(chrono::Duration::seconds(2));
        let body = json!({"resource_id": room, "start": start, "end": end});
        let results = burst(24, |i| app.post(&format!("user{i}"), "/v1/reservations", &body)).await;
        assert_eq!(count(&results, StatusCode::CREATED), 1, "round {round}: {results:?}");
        assert_eq!(count(&results, StatusCode::CONFLICT), 23, "round {round}");
        // In SQL: one live claim on the range, the winner's.
        let live = app
            .count(
                "SELECT count(*) FROM reservations WHERE resource_id = $1 AND status IN ('HELD', 'CONFIRMED') \
                 AND (status = 'CONFIRMED' OR expires_at > $2) AND period && tstzrange($3::text::timestamptz, \
                 $4::text::timestamptz)",
                &[&room, &clock.now(), &start, &end],
            )
            .await;
        assert_eq!(live, 1, "round {round}");
    }
}
