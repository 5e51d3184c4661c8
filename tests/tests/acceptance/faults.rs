//! Faults and races that once answered 500: lapsed holds in the way of a hand-over,
//! opposite lock orders, pipelined statements on fresh connections, a long waitlist,
//! timestamps finer than PostgreSQL keeps, retries that held the pool, lock timeouts,
//! an intent worker that held connections across HTTP, and an outbox never purged.

use acceptance::upstream_mock::MockUpstream;
use acceptance::{Options, TestApp, hours, invoke_worker, send, slug, sqs_record, waitlist_entry_path};
use chrono::{Duration, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::ManualClock;
use std::sync::Arc;
use uuid::Uuid;

fn id(v: &Value) -> &str {
    v["id"].as_str().unwrap_or_else(|| panic!("an id in {v}"))
}

async fn book(app: &TestApp, who: &str, resource: Uuid, from: i64, to: i64, confirm: bool) -> (StatusCode, Value) {
    let (s, e) = hours(from, to);
    send(app.post(who, "/v1/reservations", &json!({"resource_id": resource, "start": s, "end": e, "confirm": confirm})))
        .await
}

/// Pairs of active (unlapsed or not) reservations of one capacity-1 resource that
/// overlap, read from the database.
async fn overlapping_active_pairs(app: &TestApp, resource: Uuid) -> i64 {
    // A connection of its own: the pool's may have been terminated by the test.
    let (db, conn) = tokio_postgres::connect(&app.database_url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    db.query_one(
        "SELECT count(*) FROM reservations a JOIN reservations b ON a.resource_id = b.resource_id AND a.id < b.id \
             AND a.period && b.period WHERE a.resource_id = $1 \
             AND a.status IN ('HELD','CONFIRMING','CONFIRMED') AND b.status IN ('HELD','CONFIRMING','CONFIRMED')",
        &[&resource],
    )
    .await
    .unwrap()
    .get(0)
}

/// alice's hold 10-11 (1 s TTL), bob's booking 11-12, carol waiting for 10-12; then
/// alice's hold lapses and no sweep writes it down.
async fn lapsed_hold_beside_a_booking() -> (TestApp, Arc<ManualClock>, Uuid, Value, Value, Value) {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "capacity": 1, "hold_ttl_seconds": 1})).await;
    let (status, alice) = book(&app, "alice", room, 10, 11, false).await;
    assert_eq!(status, StatusCode::CREATED, "{alice}");
    let (status, bob) = book(&app, "bob", room, 11, 12, true).await;
    assert_eq!(status, StatusCode::CREATED, "{bob}");
    let (status, carol) = app.join_waitlist("carol", room, 10, 12, 1).await;
    assert_eq!((status, carol["status"].as_str()), (StatusCode::CREATED, Some("WAITING")), "{carol}");
    clock.advance(Duration::seconds(2));
    (app, clock, room, alice, bob, carol)
}

#[tokio::test]
async fn cancelling_beside_a_lapsed_unswept_hold_offers_the_whole_range_to_the_waiter() {
    let (app, _clock, room, alice, bob, carol) = lapsed_hold_beside_a_booking().await;
    let (status, body) = send(app.delete("bob", &format!("/v1/reservations/{}", id(&bob)))).await;
    assert_eq!((status, body["status"].as_str()), (StatusCode::OK, Some("CANCELLED")), "{body}");
    let carol = app.waitlist_entry("carol", &carol).await;
    assert_eq!(carol["status"], "OFFERED", "{carol}");
    let (_, alice) = send(app.get("alice", &format!("/v1/reservations/{}", id(&alice)))).await;
    assert_eq!(alice["status"], "EXPIRED");
    assert_eq!(overlapping_active_pairs(&app, room).await, 0);
}

#[tokio::test]
async fn leaving_an_offer_beside_a_lapsed_unswept_hold_passes_it_on() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "capacity": 1, "hold_ttl_seconds": 1})).await;
    // dave holds an offer for 11-12 ...
    let (_, erin) = book(&app, "erin", room, 11, 12, false).await;
    let (_, dave) = app.join_waitlist("dave", room, 11, 12, 1).await;
    send(app.delete("erin", &format!("/v1/reservations/{}", id(&erin)))).await;
    assert_eq!(app.waitlist_entry("dave", &dave).await["status"], "OFFERED");
    // ... alice holds 10-11 for a second, carol waits for 10-12.
    let (status, _) = book(&app, "alice", room, 10, 11, false).await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, carol) = app.join_waitlist("carol", room, 10, 12, 1).await;
    clock.advance(Duration::seconds(2));

    let (status, body) = send(app.delete("dave", &waitlist_entry_path(&dave["id"]))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(app.waitlist_entry("carol", &carol).await["status"], "OFFERED");
    assert_eq!(overlapping_active_pairs(&app, room).await, 0);
}

#[tokio::test]
async fn reserving_and_joining_beside_a_lapsed_unswept_hold_answer_without_error() {
    let (app, _clock, room, _alice, _bob, _carol) = lapsed_hold_beside_a_booking().await;
    let (status, body) = app.join_waitlist("dave", room, 9, 11, 1).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = book(&app, "erin", room, 10, 11, false).await;
    assert!(matches!(status, StatusCode::CREATED | StatusCode::CONFLICT), "{status} {body}");
    assert_eq!(overlapping_active_pairs(&app, room).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn confirming_an_offer_while_its_entry_is_left_never_deadlocks() {
    let app = TestApp::spawn_with(Options {
        tweak: Box::new(|c| {
            c.database.pool_size = 40;
        }),
        ..Default::default()
    })
    .await;
    let trial = |n: usize| {
        let app = &app;
        async move {
            let room = app.resource(1).await;
            let (_, alice) = book(app, "alice", room, 10, 11, false).await;
            let bob = format!("bob{n}");
            let (_, e) = app.join_waitlist(&bob, room, 10, 11, 1).await;
            send(app.delete("alice", &format!("/v1/reservations/{}", id(&alice)))).await;
            let offered = app.waitlist_entry(&bob, &e).await;
            let offer = offered["reservation_id"].as_str().expect("an offer").to_string();
            let confirm =
                send(app.http.post(app.url(&format!("/v1/reservations/{offer}/confirm"))).header("x-principal", &bob));
            let leave = send(app.delete(&bob, &waitlist_entry_path(&e["id"])));
            let ((c, cbody), (l, lbody)) = tokio::join!(confirm, leave);
            assert!(matches!(c, StatusCode::OK | StatusCode::CONFLICT), "confirm {c} {cbody}");
            assert_eq!(l, StatusCode::OK, "leave {lbody}");
            // Either the confirm came first (accepted, booked) or the leave did.
            let (_, r) = send(app.get(&bob, &format!("/v1/reservations/{offer}"))).await;
            let after = app.waitlist_entry(&bob, &e).await;
            let outcome = (r["status"].as_str().unwrap().to_string(), after["status"].as_str().unwrap().to_string());
            assert!(
                outcome == ("CONFIRMED".into(), "ACCEPTED".into())
                    || outcome == ("RELEASED".into(), "CANCELLED".into()),
                "{outcome:?}"
            );
        }
    };
    futures::future::join_all((0..60).map(trial)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reserves_and_joins_on_fresh_connections_under_backend_kills_never_answer_500() {
    let app = TestApp::spawn_with(Options {
        tweak: Box::new(|c| {
            c.database.pool_size = 40;
            c.hold_ttl_seconds = 1;
        }),
        ..Default::default()
    })
    .await;
    let mut rooms = Vec::new();
    for _ in 0..3 {
        rooms.push(app.resource_with(json!({"name": "Room", "capacity": 1, "hold_ttl_seconds": 1})).await);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(6);
    let killer = {
        let url = app.database_url.clone();
        tokio::spawn(async move {
            let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
            tokio::spawn(conn);
            while std::time::Instant::now() < deadline {
                tokio::time::sleep(std::time::Duration::from_millis(400)).await;
                db.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                    &[],
                )
                .await
                .unwrap();
            }
        })
    };
    let client = |n: usize| {
        let (app, rooms) = (&app, &rooms);
        async move {
            let mut statuses = Vec::new();
            let mut i = 0;
            while std::time::Instant::now() < deadline {
                i += 1;
                let room = rooms[(n + i) % rooms.len()];
                let from = ((n + i) % 4) as i64;
                let (status, body) = if i % 2 == 0 {
                    book(app, &format!("u{n}"), room, from, from + 2, false).await
                } else {
                    app.join_waitlist(&format!("u{n}"), room, from, from + 1, 1).await
                };
                assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
                statuses.push(status);
            }
            statuses
        }
    };
    let statuses: Vec<StatusCode> = futures::future::join_all((0..40).map(client)).await.concat();
    killer.await.unwrap();
    assert!(statuses.contains(&StatusCode::CREATED), "{statuses:?}");
    for room in rooms {
        assert_eq!(overlapping_active_pairs(&app, room).await, 0);
    }
}

#[tokio::test]
async fn the_hand_over_finds_the_first_entry_that_fits_behind_a_thousand_that_do_not() {
    let app = TestApp::spawn().await;
    let room = app.resource(2).await;
    let (status, _) = book(&app, "bob", room, 11, 12, true).await;
    assert_eq!(status, StatusCode::CREATED);
    let (s, e) = hours(10, 11);
    let (status, alice) = app.reserve("alice", room, (&s, &e), 2).await;
    assert_eq!(status, StatusCode::CREATED, "{alice}");
    // A thousand entries ahead want both units for 10-12, where bob keeps one.
    let (s12, e12) = hours(10, 12);
    let (s12, e12): (chrono::DateTime<Utc>, chrono::DateTime<Utc>) = (s12.parse().unwrap(), e12.parse().unwrap());
    app.db()
        .await
        .execute(
            "INSERT INTO waitlist_entries (id, resource_id, owner, starts_at, ends_at, quantity, status, created_at, \
             updated_at) SELECT gen_random_uuid(), $1, 'w' || n, $2, $3, 2, 'WAITING', now(), now() \
             FROM generate_series(1, 1000) n",
            &[&room, &s12, &e12],
        )
        .await
        .unwrap();
    let (status, carol) = app.join_waitlist("carol", room, 10, 11, 2).await;
    assert_eq!((status, carol["status"].as_str()), (StatusCode::CREATED, Some("WAITING")), "{carol}");

    send(app.delete("alice", &format!("/v1/reservations/{}", id(&alice)))).await;
    assert_eq!(app.waitlist_entry("carol", &carol).await["status"], "OFFERED");
    // The freed units went to carol, not to whoever asks next.
    assert_eq!(app.reserve("dave", room, (&s, &e), 1).await.0, StatusCode::CONFLICT);
    let waiting = app
        .count("SELECT count(*) FROM waitlist_entries WHERE resource_id = $1 AND status = 'WAITING'", &[&room])
        .await;
    assert_eq!(waiting, 1000);
}

#[tokio::test]
async fn timestamps_finer_than_a_microsecond_or_on_a_leap_second_are_refused_by_field() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let day = acceptance::day().format("%Y-%m-%d").to_string();
    let cases = [
        (format!("{day}T15:00:00.0000001Z"), format!("{day}T15:00:00.0000009Z"), "end"),
        (format!("{day}T23:59:60Z"), format!("{day}T23:59:59Z"), "start"),
        (format!("{day}T22:00:00Z"), format!("{day}T23:59:60Z"), "end"),
    ];
    for (start, end, field) in cases {
        let (status, body) =
            send(app.post("alice", "/v1/reservations", &json!({"resource_id": room, "start": start, "end": end})))
                .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{start} {end}: {body}");
        assert_eq!(slug(&body), "validation-error");
        assert!(body["errors"].as_array().unwrap().iter().any(|e| e["field"] == field), "{body}");
        let (status, body) = app.join_waitlist_with("alice", room, &json!({"start": start, "end": end})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    let (status, body) = send(app.get(
        "alice",
        &format!("/v1/resources/{room}/availability?from={day}T15:00:00.0000001Z&to={day}T15:00:00.0000009Z"),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retries_waiting_for_their_original_leave_the_pool_to_everyone_else() {
    let app = TestApp::spawn_with(Options {
        tweak: Box::new(|c| {
            c.database.pool_size = 4;
            c.database.statement_timeout = std::time::Duration::from_secs(15);
            c.idempotency_wait = std::time::Duration::from_secs(12);
        }),
        ..Default::default()
    })
    .await;
    let room = app.resource(1).await;
    let other = app.resource(1).await;
    // The original waits on the resource lock that this test holds for 7 s, longer
    // than anyone waits for a pooled connection (5 s).
    let mut locker = app.db().await;
    let tx = locker.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM resources WHERE id = $1 FOR UPDATE", &[&room]).await.unwrap();
    let (s, e) = hours(10, 11);
    let body = json!({"resource_id": room, "start": s, "end": e});
    let keyed = || app.post("alice", "/v1/reservations", &body).header("idempotency-key", "k-1");
    let original = tokio::spawn(send(keyed()));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let retries = futures::future::join_all((0..20).map(|_| send(keyed())));
    let others = async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let path = format!("/v1/resources/{other}/availability?from={s}&to={e}");
        futures::future::join_all((0..10).map(|_| send(app.get("bob", &path)))).await
    };
    let release = async {
        tokio::time::sleep(std::time::Duration::from_secs(7)).await;
        tx.commit().await.unwrap();
    };
    let (retries, others, ()) = tokio::join!(retries, others, release);
    for (status, body) in others {
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, first) = original.await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{first}");
    for (status, body) in retries {
        // Replayed, or told to come back when more retries wait than are let wait.
        match status {
            StatusCode::CREATED => assert_eq!(body["id"], first["id"]),
            StatusCode::CONFLICT => assert_eq!(slug(&body), "idempotency-key-in-progress"),
            other => panic!("{other} {body}"),
        }
    }
}

/// PostgreSQL refusing a connection for too many clients (53300: here for a role whose
/// connection limit is 0, as a full `max_connections` answers) is a 503 with
/// `Retry-After`, at once: never a 500, never a hang.
#[tokio::test]
async fn a_request_that_gets_no_connection_for_too_many_clients_is_told_to_come_back() {
    let role = format!("rsv_noconn_{}", Uuid::new_v4().simple());
    let as_role = role.clone();
    let app = TestApp::spawn_with(Options {
        tweak: Box::new(move |c| {
            let url = c.database.url.expose().replacen("://postgres@", &format!("://{as_role}@"), 1);
            c.database.url = shared::config::Secret::from(url.as_str());
        }),
        ..Default::default()
    })
    .await;
    assert!(app.state.config.database.url.expose().contains(&role), "the test server connects as postgres");
    let db = app.db().await;
    db.batch_execute(&format!("CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")).await.unwrap();
    let (s, e) = hours(10, 11);
    let started = std::time::Instant::now();
    let resp = app
        .post("alice", "/v1/reservations", &json!({"resource_id": Uuid::now_v7(), "start": s, "end": e}))
        .send()
        .await
        .unwrap();
    let (status, retry_after) = (resp.status(), resp.headers().get("retry-after").cloned());
    let body: Value = resp.json().await.unwrap();
    db.batch_execute(&format!("DROP ROLE {role}")).await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(retry_after.expect("a Retry-After"), "1");
    assert_eq!(slug(&body), "database-unavailable");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "answered at once, not after a wait");
}

#[tokio::test]
async fn a_lock_timeout_answers_503_with_retry_after() {
    let app = TestApp::spawn_with(Options {
        tweak: Box::new(|c| c.database.statement_timeout = std::time::Duration::from_millis(300)),
        ..Default::default()
    })
    .await;
    let room = app.resource(1).await;
    let mut locker = app.db().await;
    let tx = locker.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM resources WHERE id = $1 FOR UPDATE", &[&room]).await.unwrap();
    let (s, e) = hours(10, 11);
    let resp = app
        .post("alice", "/v1/reservations", &json!({"resource_id": room, "start": s, "end": e}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()["retry-after"], "1");
    assert_eq!(resp.headers()["content-type"], "application/problem+json");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(slug(&body), "database-unavailable");
    tx.rollback().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_intents_in_one_batch_settle_as_a_slow_upstream_decided_with_a_pool_of_two() {
    let upstream = MockUpstream::start().await;
    upstream.with(|s| s.delay = std::time::Duration::from_millis(1500));
    let app = TestApp::spawn_with(Options { upstream: Some(upstream.base.clone()), ..Default::default() }).await;
    let mut bookings = Vec::new();
    for n in 0..10 {
        let seat = app
            .resource_with(json!({"name": "Seat", "authority": "upstream", "upstream_ref": format!("seat-{n}")}))
            .await;
        let (status, r) = book(&app, "alice", seat, 10, 11, true).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{r}");
        bookings.push(r);
    }
    // The upstream already holds seats 0-2 for someone else: those ten answers differ.
    upstream.with(|s| {
        for n in 0..3 {
            let (a, b) = hours(10, 11);
            s.foreign.insert(format!("seat-{n}"), vec![(a.parse().unwrap(), b.parse().unwrap())]);
        }
    });
    let messages = app.take_intent_messages().await;
    assert_eq!(messages.len(), 10);
    // The worker as deployed: a pool of two connections, the batch of ten at once.
    let mut config = (*app.state.config).clone();
    config.database.pool_size = 2;
    let pool = shared::db::pool(&config.database).unwrap();
    let mut worker = shared::AppState::new(pool, config).with_upstream_from_config();
    worker.clock = app.state.clock.clone();
    let response = invoke_worker(&worker, messages.iter().map(sqs_record).collect()).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures.len());
    let mut statuses = Vec::new();
    for r in &bookings {
        let (_, r) = send(app.get("alice", &format!("/v1/reservations/{}", id(r)))).await;
        statuses.push((r["status"].as_str().unwrap().to_string(), r["intent"]["state"].as_str().unwrap().to_string()));
    }
    let expected: Vec<(String, String)> = (0..10)
        .map(|n| if n < 3 { ("FAILED", "FAILED_RACE") } else { ("CONFIRMED", "SUCCEEDED") })
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(statuses, expected);
    assert_eq!(upstream.with(|s| s.posts), 10);
}

#[tokio::test]
async fn the_sweeper_purges_published_events_past_retention_and_keeps_the_rest() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource(1).await;
    for h in 0..5 {
        assert_eq!(book(&app, "alice", room, h, h + 1, true).await.0, StatusCode::CREATED);
    }
    let count = |sql: &'static str| {
        let app = &app;
        async move { app.db().await.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    let report = sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default()).await;
    assert_eq!(report.outbox_purged, Some(0));
    assert_eq!(count("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL").await, 5);
    // Newer, unpublished events stay however old the published ones grow.
    clock.advance(app.state.config.outbox_retention + Duration::seconds(1));
    assert_eq!(book(&app, "alice", room, 6, 7, true).await.0, StatusCode::CREATED);
    let bounds = shared::booking::sweep::Bounds { batch: 2, budget: std::time::Duration::from_secs(10) };
    let purged = shared::booking::sweep::purge_outbox(
        &app.state.pool,
        clock.as_ref(),
        bounds,
        app.state.config.outbox_retention,
    )
    .await
    .unwrap();
    assert_eq!(purged, (5, false));
    assert_eq!(count("SELECT count(*) FROM outbox").await, 1);
    assert_eq!(count("SELECT count(*) FROM outbox WHERE published_at IS NULL").await, 1);
}
