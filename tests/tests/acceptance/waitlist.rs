//! The waitlist: freed capacity is handed over in FIFO order, in the transaction that
//! frees it, and never exceeds the capacity.

use acceptance::{TestApp, hours, reservation_path, send, slug, waitlist_entry_path};
use chrono::{Duration, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::booking::sweep::Bounds;
use shared::clock::ManualClock;
use shared::domain::peak_load;
use shared::outbox::LogPublisher;
use std::sync::Arc;
use uuid::Uuid;

/// A wait that must be taken: the entry.
async fn join(app: &TestApp, who: &str, resource: Uuid, from: i64, to: i64, quantity: i32) -> Value {
    let (status, body) = app.join_waitlist(who, resource, from, to, quantity).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

/// A waiter's position counts those waiting for a time that overlaps its own: nobody
/// waiting for another time of the day is ahead of it.
#[tokio::test]
async fn a_waiters_position_counts_only_those_waiting_for_an_overlapping_time() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    app.hold("alice", room, 9, 12).await;
    let bob = join(&app, "bob", room, 9, 10, 1).await;
    let carol = join(&app, "carol", room, 11, 12, 1).await;
    let dave = join(&app, "dave", room, 9, 11, 1).await;
    let positions = [&bob, &carol, &dave].map(|e| e["position"].as_i64());
    assert_eq!(positions, [Some(1), Some(1), Some(2)], "on joining");
    let read = [&bob, &carol, &dave].map(|e| {
        let app = &app;
        async move { app.waitlist_entry("admin", e).await["position"].as_i64() }
    });
    assert_eq!(futures::future::join_all(read).await, vec![Some(1), Some(1), Some(2)], "read one by one");
    let (status, queue) = send(app.get("admin", &format!("/v1/resources/{room}/waitlist"))).await;
    assert_eq!(status, StatusCode::OK, "{queue}");
    let listed: Vec<Option<i64>> = queue["items"].as_array().unwrap().iter().map(|e| e["position"].as_i64()).collect();
    assert_eq!(listed, vec![Some(1), Some(1), Some(2)], "in the resource's queue");
}

#[tokio::test]
async fn a_release_offers_the_slot_to_the_first_waiter_and_not_to_the_second() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let alice = app.hold("alice", room, 10, 11).await;
    let bob = join(&app, "bob", room, 10, 11, 1).await;
    let carol = join(&app, "carol", room, 10, 11, 1).await;
    assert_eq!((bob["status"].as_str(), bob["position"].as_i64()), (Some("WAITING"), Some(1)));
    assert_eq!((carol["status"].as_str(), carol["position"].as_i64()), (Some("WAITING"), Some(2)));

    send(app.delete("alice", &reservation_path(&alice["id"]))).await;
    let bob = app.waitlist_entry("bob", &bob).await;
    assert_eq!(bob["status"], "OFFERED");
    assert_eq!(bob["position"], Value::Null);
    let offer = app.reservation("bob", &bob["reservation_id"]).await;
    assert_eq!((offer["status"].as_str(), offer["source"].as_str()), (Some("HELD"), Some("waitlist_offer")));
    assert_eq!(offer["owner"], "bob");
    let carol = app.waitlist_entry("carol", &carol).await;
    assert_eq!((carol["status"].as_str(), carol["position"].as_i64()), (Some("WAITING"), Some(1)));
    // The slot went to bob, not back to the public pool.
    let (s, e) = hours(10, 11);
    assert_eq!(app.reserve("dave", room, (&s, &e), 1).await.0, StatusCode::CONFLICT);
}

#[tokio::test]
async fn a_declined_offer_passes_to_the_next_waiter_and_confirming_accepts() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let alice = app.hold("alice", room, 10, 11).await;
    let bob = join(&app, "bob", room, 10, 11, 1).await;
    let carol = join(&app, "carol", room, 10, 11, 1).await;
    send(app.delete("alice", &reservation_path(&alice["id"]))).await;
    let bob = app.waitlist_entry("bob", &bob).await;

    // Only the entry's owner can accept: the offer is bob's reservation.
    assert_eq!(app.confirm("carol", &bob["reservation_id"]).await.0, StatusCode::NOT_FOUND);
    // Bob declines by deleting the offer; it passes to carol.
    let (status, declined) = send(app.delete("bob", &reservation_path(&bob["reservation_id"]))).await;
    assert_eq!((status, declined["status"].as_str()), (StatusCode::OK, Some("RELEASED")));
    assert_eq!(app.waitlist_entry("bob", &bob).await["status"], "CANCELLED");
    let carol = app.waitlist_entry("carol", &carol).await;
    assert_eq!(carol["status"], "OFFERED");

    let (status, accepted) = app.confirm("carol", &carol["reservation_id"]).await;
    assert_eq!((status, accepted["status"].as_str()), (StatusCode::OK, Some("CONFIRMED")));
    assert_eq!(app.waitlist_entry("carol", &carol).await["status"], "ACCEPTED");
}

#[tokio::test]
async fn joining_when_the_capacity_is_free_offers_at_once() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let e = join(&app, "bob", room, 10, 11, 1).await;
    assert_eq!(e["status"], "OFFERED");
    let offer = app.reservation("bob", &e["reservation_id"]).await;
    assert_eq!(offer["status"], "HELD");
}

#[tokio::test]
async fn entries_that_do_not_fit_keep_waiting_and_later_ones_that_fit_are_offered() {
    let app = TestApp::spawn().await;
    let hall = app.resource(3).await;
    let (s, e) = hours(10, 11);
    let (_, a) = app.reserve("alice", hall, (&s, &e), 1).await;
    app.reserve("amy", hall, (&s, &e), 2).await;
    let big = join(&app, "bob", hall, 10, 11, 2).await;
    let small = join(&app, "carol", hall, 10, 11, 1).await;
    assert_eq!((big["status"].as_str(), small["status"].as_str()), (Some("WAITING"), Some("WAITING")));
    // One unit frees: bob (2) does not fit and keeps his place; carol (1) does.
    send(app.delete("alice", &reservation_path(&a["id"]))).await;
    let big = app.waitlist_entry("bob", &big).await;
    assert_eq!((big["status"].as_str(), big["position"].as_i64()), (Some("WAITING"), Some(1)));
    assert_eq!(app.waitlist_entry("carol", &small).await["status"], "OFFERED");
}

#[tokio::test]
async fn an_offer_that_lapses_passes_on_and_leaving_an_offered_entry_passes_it_on_too() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "offer_ttl_seconds": 60})).await;
    let alice = app.hold("alice", room, 10, 11).await;
    let bob = join(&app, "bob", room, 10, 11, 1).await;
    let carol = join(&app, "carol", room, 10, 11, 1).await;
    let dave = join(&app, "dave", room, 10, 11, 1).await;
    send(app.delete("alice", &reservation_path(&alice["id"]))).await;
    let bob = app.waitlist_entry("bob", &bob).await;
    assert_eq!(bob["status"], "OFFERED");

    clock.advance(Duration::seconds(61));
    assert_eq!(app.waitlist_entry("bob", &bob).await["status"], "EXPIRED", "reads know before any sweep");
    let report = sweeper::sweep(&app.state, &LogPublisher, Bounds::default()).await;
    assert_eq!(report.expiry.as_ref().map(|e| (e.expired, e.offers)), Some((1, 1)));
    assert_eq!(app.waitlist_entry("bob", &bob).await["status"], "EXPIRED");
    let carol = app.waitlist_entry("carol", &carol).await;
    assert_eq!(carol["status"], "OFFERED");
    assert_eq!(app.confirm("bob", &bob["reservation_id"]).await.0, StatusCode::CONFLICT);

    // Carol leaves while offered: her hold is released and passes to dave.
    let (status, left) = send(app.delete("carol", &waitlist_entry_path(&carol["id"]))).await;
    assert_eq!((status, left["status"].as_str()), (StatusCode::OK, Some("CANCELLED")));
    assert_eq!(app.reservation("carol", &carol["reservation_id"]).await["status"], "RELEASED");
    assert_eq!(app.waitlist_entry("dave", &dave).await["status"], "OFFERED");
}

/// Alice's 30-second hold of 10:00 to 11:00 has lapsed, not yet swept, while bob waits
/// for that hour: the server, the room and bob's entry.
async fn bob_waits_for_an_hour_whose_hold_lapsed() -> (TestApp, Uuid, Value) {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 30})).await;
    app.hold("alice", room, 10, 11).await;
    let bob = join(&app, "bob", room, 10, 11, 1).await;
    clock.advance(Duration::seconds(31));
    (app, room, bob)
}

#[tokio::test]
async fn a_lapsed_hold_is_offered_by_the_sweep_without_any_client_call() {
    let (app, _room, bob) = bob_waits_for_an_hour_whose_hold_lapsed().await;
    // The scheduled function, invoked as EventBridge would invoke it.
    let event: aws_lambda_events::eventbridge::EventBridgeEvent<Value> =
        serde_json::from_str(include_str!("../../events/scheduled.json")).unwrap();
    let report =
        sweeper::handler(&app.state, &LogPublisher, lambda_runtime::LambdaEvent::new(event, Default::default()))
            .await
            .unwrap();
    assert_eq!(report.expiry.as_ref().unwrap().offers, 1);
    assert!(report.failed.is_empty());
    assert_eq!(app.waitlist_entry("bob", &bob).await["status"], "OFFERED");
}

#[tokio::test]
async fn a_lapsed_hold_goes_to_the_waiter_before_a_newcomer_even_before_the_sweep() {
    let (app, room, bob) = bob_waits_for_an_hour_whose_hold_lapsed().await;
    let (s, e) = hours(10, 11);
    assert_eq!(app.reserve("mallory", room, (&s, &e), 1).await.0, StatusCode::CONFLICT);
    assert_eq!(app.waitlist_entry("bob", &bob).await["status"], "OFFERED");
}

#[tokio::test]
async fn others_cannot_see_or_leave_an_entry() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    app.hold("alice", room, 10, 11).await;
    let bob = join(&app, "bob", room, 10, 11, 1).await;
    let path = waitlist_entry_path(&bob["id"]);
    for (status, problem) in [send(app.get("mallory", &path)).await, send(app.delete("mallory", &path)).await] {
        assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "waitlist-entry-not-found"));
    }
    assert_eq!(send(app.get("admin", &path)).await.0, StatusCode::OK);
    assert_eq!(send(app.get("bob", "/v1/waitlist/not-a-uuid")).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_sweeps_expire_a_thousand_holds_once_each_and_offer_each_waiter_at_most_once() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    // 100 single-unit rooms, 10 one-hour holds each, and a waiter for every other hold.
    let mut rooms = Vec::new();
    for _ in 0..100 {
        rooms.push(app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 60})).await);
    }
    let mut waiters = 0;
    for (i, room) in rooms.iter().enumerate() {
        for h in 0..10 {
            app.hold(&format!("h{i}x{h}"), *room, h, h + 1).await;
            if h % 2 == 0 {
                join(&app, &format!("w{i}x{h}"), *room, h, h + 1, 1).await;
                waiters += 1;
            }
        }
    }
    clock.advance(Duration::seconds(61));
    let bounds = Bounds { batch: 7, budget: std::time::Duration::from_secs(60) };
    let (a, b) = tokio::join!(
        shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), bounds),
        shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), bounds),
    );
    let (a, b) = (a.expect("no deadlock, no error"), b.expect("no deadlock, no error"));
    assert_eq!(a.expired + b.expired, 1000, "{a:?} {b:?}");
    assert_eq!(a.offers + b.offers, waiters);

    let db = app.db().await;
    let twice: i64 = db
        .query_one(
            "SELECT count(*) FROM (SELECT subject_id FROM outbox WHERE kind = 'reservation.expired' \
             GROUP BY subject_id HAVING count(*) > 1) x",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(twice, 0, "a hold was expired twice");
    let offered_twice: i64 = db
        .query_one(
            "SELECT count(*) FROM (SELECT subject_id FROM outbox WHERE kind = 'waitlist.offered' \
             GROUP BY subject_id HAVING count(*) > 1) x",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(offered_twice, 0, "a waiter was offered twice");
    let offered: i64 =
        db.query_one("SELECT count(*) FROM waitlist_entries WHERE status = 'OFFERED'", &[]).await.unwrap().get(0);
    assert_eq!(offered as u64, waiters);
    for room in &rooms {
        let claims = acceptance::active_claims(&db, *room).await;
        assert!(peak_load(acceptance::day(), acceptance::day() + Duration::days(1), &claims) <= 1);
    }
}

/// A transaction of the sweep writes down at most a batch of one resource's lapsed
/// holds: what it locks and writes stays bounded however many have lapsed.
#[tokio::test]
async fn a_sweep_writes_down_a_batch_at_most_per_transaction() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 60})).await;
    for hour in 0..5 {
        app.hold(&format!("h{hour}"), room, hour, hour + 1).await;
    }
    clock.advance(Duration::seconds(61));
    let bounds = Bounds { batch: 2, budget: std::time::Duration::from_secs(30) };
    let report = shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), bounds).await.unwrap();
    assert_eq!((report.expired, report.batches), (5, 3), "{report:?}");
}

/// A batch of lapsed holds frees the span from its first start to its last end; an
/// offer in that span writes down the lapsed hold in its way before it is taken, and
/// the sweep's report counts that hold too.
#[tokio::test]
async fn a_sweep_counts_the_lapsed_holds_its_offers_wrote_down_on_the_way() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 60})).await;
    // Lapsing in the order 10h, 12h, 11h: a batch of two frees 10h-13h with 11h's hold
    // still in it.
    for hour in [10, 12, 11] {
        app.hold(&format!("h{hour}"), room, hour, hour + 1).await;
        join(&app, &format!("w{hour}"), room, hour, hour + 1, 1).await;
        clock.advance(Duration::seconds(1));
    }
    clock.advance(Duration::seconds(61));
    let bounds = Bounds { batch: 2, budget: std::time::Duration::from_secs(30) };
    let report = shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), bounds).await.unwrap();
    assert_eq!((report.expired, report.offers), (3, 3), "{report:?}");
}

/// The sweep picks a room from what it sees when it looks; another transaction may
/// write that room's lapsed holds down before the sweep has its lock. Three rooms found
/// so in a row do not end the sweep while a fourth still has lapsed holds, and the
/// holds written down by the other are not written down again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_that_finds_rooms_written_down_since_it_looked_goes_on_to_the_rest() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let mut rooms = Vec::new();
    for _ in 0..4 {
        rooms.push(app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 60})).await);
    }
    rooms.sort(); // the order the sweep claims them in
    for (i, room) in rooms.iter().enumerate() {
        app.hold(&format!("h{i}"), *room, 10, 11).await;
    }
    clock.advance(Duration::seconds(61));

    // The first three rooms' holds written down by transactions still open.
    let mut others = Vec::new();
    for room in &rooms[..3] {
        let db = app.db().await;
        db.batch_execute(&format!("BEGIN; UPDATE reservations SET status = 'EXPIRED' WHERE resource_id = '{room}'"))
            .await
            .unwrap();
        others.push(db);
    }
    let bounds = Bounds { batch: 10, budget: std::time::Duration::from_secs(30) };
    let sweep = shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), bounds);
    let commit_each_once_the_sweep_waits_for_it = async {
        let watch = app.db().await;
        for other in &others {
            let waiting = "SELECT count(*) FROM pg_stat_activity \
                           WHERE datname = current_database() AND wait_event_type = 'Lock'";
            let mut tries = 0;
            while watch.query_one(waiting, &[]).await.unwrap().get::<_, i64>(0) == 0 {
                tries += 1;
                assert!(tries < 1000, "the sweep never waited for the room's holds");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            other.batch_execute("COMMIT").await.unwrap();
        }
    };
    let (report, ()) = tokio::join!(sweep, commit_each_once_the_sweep_waits_for_it);
    let report = report.expect("no error");
    assert_eq!((report.expired, report.batches), (1, 1), "{report:?}");

    let db = app.db().await;
    let held: i64 = db.query_one("SELECT count(*) FROM reservations WHERE status = 'HELD'", &[]).await.unwrap().get(0);
    assert_eq!(held, 0, "the fourth room's lapsed hold was left for the next run");
    let events: i64 =
        db.query_one("SELECT count(*) FROM outbox WHERE kind = 'reservation.expired'", &[]).await.unwrap().get(0);
    assert_eq!(events, 1, "only the fourth room's hold is the sweep's to write down");
}

/// Many sweeps at once, each batch smaller than a room's lapsed holds: a sweep often
/// claims a room whose last holds another sweep wrote down after it looked. That room
/// is not a sign that the work is done; every sweep goes on to the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeps_that_find_a_room_just_swept_by_another_go_on_until_every_lapsed_hold_is_written_down() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let mut holds = 0;
    for i in 0..60 {
        let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 60})).await;
        for h in 0..3 {
            app.hold(&format!("h{i}x{h}"), room, h, h + 1).await;
            holds += 1;
        }
    }
    clock.advance(Duration::seconds(61));
    let bounds = Bounds { batch: 2, budget: std::time::Duration::from_secs(60) };
    let sweep = || shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), bounds);
    let reports = futures::future::join_all((0..6).map(|_| sweep())).await;
    let expired: u64 = reports.into_iter().map(|r| r.expect("no deadlock, no error").expired).sum();
    assert_eq!(expired, holds);
    let db = app.db().await;
    let left: i64 = db.query_one("SELECT count(*) FROM reservations WHERE status = 'HELD'", &[]).await.unwrap().get(0);
    assert_eq!(left, 0, "lapsed holds left for the next run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_waitlist_path_ever_exceeds_the_capacity() {
    const CAPACITY: i64 = 3;
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let hall = app
        .resource_with(json!({"name": "Hall", "capacity": CAPACITY, "hold_ttl_seconds": 60, "offer_ttl_seconds": 60}))
        .await;
    let (day0, day1) = (acceptance::day(), acceptance::day() + Duration::days(1));
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let db = app.db().await;
    for round in 0..6 {
        // A wave of concurrent holds, joins and releases ...
        let mut plans = Vec::new();
        for i in 0..40 {
            let start = next(8) as i64;
            plans.push((format!("r{round}u{i}"), start, start + 1 + next(3) as i64, 1 + next(2) as i32, next(3)));
        }
        let outcomes = futures::future::join_all(plans.iter().map(|(who, s, e, q, kind)| {
            let app = &app;
            async move {
                match kind {
                    0 => {
                        let (s, e) = hours(*s, *e);
                        send(app.post(
                            who,
                            &format!("/v1/resources/{hall}/waitlist"),
                            &json!({"start": s, "end": e, "quantity": q}),
                        ))
                        .await
                    }
                    _ => {
                        let (s, e) = hours(*s, *e);
                        let (status, r) = app.reserve(who, hall, (&s, &e), *q).await;
                        if status == StatusCode::CREATED && *kind == 2 {
                            send(app.delete(who, &reservation_path(&r["id"]))).await
                        } else {
                            (status, r)
                        }
                    }
                }
            }
        }))
        .await;
        for (status, body) in &outcomes {
            assert!(!status.is_server_error(), "{status} {body}");
        }
        assert!(peak_load(day0, day1, &acceptance::active_claims(&db, hall).await) <= CAPACITY);
        // ... then time passes, holds and offers lapse, and the sweep hands them over.
        clock.advance(Duration::seconds(61));
        sweeper::sweep(&app.state, &LogPublisher, Bounds::default()).await;
        assert!(peak_load(day0, day1, &acceptance::active_claims(&db, hall).await) <= CAPACITY);
    }
    let offers: i64 =
        db.query_one("SELECT count(*) FROM reservations WHERE source = 'waitlist_offer'", &[]).await.unwrap().get(0);
    assert!(offers > 0, "the waitlist paths were exercised");
}

async fn active_entries(app: &TestApp, resource: Uuid, who: &str) -> i64 {
    app.count(
        "SELECT count(*) FROM waitlist_entries WHERE resource_id = $1 AND owner = $2 \
             AND status IN ('WAITING', 'OFFERED')",
        &[&resource, &who],
    )
    .await
}

#[tokio::test]
async fn joining_again_for_the_same_range_answers_the_place_already_held() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    app.hold("alice", room, 10, 11).await;
    let first = join(&app, "bob", room, 10, 11, 1).await;
    let carol = join(&app, "carol", room, 10, 11, 1).await;

    let (status, again) = app.join_waitlist("bob", room, 10, 11, 1).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!((&again["id"], &again["position"]), (&first["id"], &json!(1)), "the same place, not a new one");
    assert_eq!(app.waitlist_entry("carol", &carol).await["position"], 2, "nobody was pushed back");
    assert_eq!(active_entries(&app, room, "bob").await, 1);

    // Another range is another place; so is the same range once the first place is left.
    let (status, other) = app.join_waitlist("bob", room, 11, 12, 1).await;
    assert_eq!(status, StatusCode::CREATED, "{other}");
    send(app.delete("bob", &waitlist_entry_path(&first["id"]))).await;
    let (status, rejoined) = app.join_waitlist("bob", room, 10, 11, 1).await;
    assert_eq!(status, StatusCode::CREATED, "{rejoined}");
    assert_ne!(rejoined["id"], first["id"]);
    assert_eq!(rejoined["position"], 2, "a new place is at the end of the queue");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_identical_joins_without_a_key_make_one_entry() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    app.hold("alice", room, 10, 11).await;
    let answers = futures::future::join_all((0..12).map(|_| app.join_waitlist("bob", room, 10, 11, 1))).await;
    let created = answers.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    let found = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    assert_eq!((created, found), (1, 11), "{answers:?}");
    let ids: std::collections::BTreeSet<String> = answers.iter().map(|(_, b)| b["id"].to_string()).collect();
    assert_eq!(ids.len(), 1, "every answer names the one entry: {ids:?}");
    assert_eq!(active_entries(&app, room, "bob").await, 1);
}

#[tokio::test]
async fn the_database_itself_refuses_a_second_active_entry_for_a_range() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    app.hold("alice", room, 10, 11).await;
    join(&app, "bob", room, 10, 11, 1).await;
    let (s, e) = hours(10, 11);
    let insert = "INSERT INTO waitlist_entries (id, resource_id, owner, starts_at, ends_at, quantity, status, \
                  created_at, updated_at) \
                  VALUES ($1, $2, 'bob', $3::text::timestamptz, $4::text::timestamptz, 1, 'WAITING', now(), now())";
    let refused = app.db().await.execute(insert, &[&Uuid::now_v7(), &room, &s, &e]).await.unwrap_err();
    assert_eq!(refused.as_db_error().and_then(|d| d.constraint()), Some("waitlist_entries_one_per_range_key"));
}
