//! Waiting for an upstream seat: a seat someone else holds in the system of record is
//! polled through the shared cache, and when it shows free the first waiter in FIFO
//! order is booked with one write, however many wait; a lost race puts the waiter back
//! in its place; an open breaker pauses every wait.

use acceptance::upstream_mock::{MockUpstream, OnPost};
use acceptance::{Options, TestApp, day, hours, invoke_worker, send, slug, sqs_record, waitlist_entry_path};
use chrono::{Duration, Utc};
use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::ManualClock;
use shared::intents::wait::{WaitReport, poll};
use std::sync::Arc;
use uuid::Uuid;

const SEAT: &str = "seat-42";

/// A system of record, a server on it whose clock the test moves, and the seat
/// [`SEAT`] as a resource of the server's.
async fn a_seat() -> (MockUpstream, TestApp, Arc<ManualClock>, Uuid) {
    let upstream = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with(Options {
        upstream: Some(upstream.base.clone()),
        clock: clock.clone(),
        ..Default::default()
    })
    .await;
    let seat =
        app.resource_with(json!({"name": "Library seat 42", "authority": "upstream", "upstream_ref": SEAT})).await;
    (upstream, app, clock, seat)
}

/// [`a_seat`], which someone else holds from 10:00 to 11:00 in the system of record.
async fn a_seat_taken_upstream() -> (MockUpstream, TestApp, Arc<ManualClock>, Uuid) {
    let (upstream, app, clock, seat) = a_seat().await;
    taken_upstream(&upstream);
    (upstream, app, clock, seat)
}

/// Someone else holds the seat from 10:00 to 11:00 in the system of record.
fn taken_upstream(upstream: &MockUpstream) {
    upstream.with(|s| s.foreign.insert(SEAT.into(), vec![(day() + Duration::hours(10), day() + Duration::hours(11))]));
}

fn freed_upstream(upstream: &MockUpstream) {
    upstream.with(|s| s.foreign.clear());
}

/// A wait for the seat from 10:00 to 11:00 that must be taken: the entry.
async fn join(app: &TestApp, who: &str, seat: Uuid, auto_book: bool) -> Value {
    let (s, e) = hours(10, 11);
    let (status, body) =
        app.join_waitlist_with(who, seat, &json!({"start": s, "end": e, "auto_book": auto_book})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

/// One poll of the due seats, as the sweeper runs it.
async fn poll_once(app: &TestApp) -> WaitReport {
    poll(&app.state, app.state.upstream.as_deref().unwrap(), 100).await.unwrap()
}

/// Past any backoff of the seat's poll.
fn later(app: &TestApp, clock: &ManualClock) {
    clock.advance(app.state.config.upstream.wait_poll_max + Duration::seconds(1));
}

fn posts(upstream: &MockUpstream) -> u64 {
    upstream.with(|s| s.posts)
}

#[tokio::test]
async fn a_seat_taken_upstream_and_freed_later_books_the_first_waiter_with_one_post() {
    let (upstream, app, clock, seat) = a_seat_taken_upstream().await;
    let alice = join(&app, "alice", seat, true).await;
    assert_eq!((alice["status"].as_str(), alice["position"].as_i64()), (Some("WAITING"), Some(1)));
    assert_eq!(
        (alice["auto_book"].as_bool(), alice["intent"]["state"].as_str()),
        (Some(true), Some("WAITING_FOR_SEAT"))
    );
    let bob = join(&app, "bob", seat, true).await;
    let approvals = app
        .count("SELECT count(*) FROM approvals WHERE action = 'wait_for_seat' AND waitlist_entry_id IS NOT NULL", &[])
        .await;
    assert_eq!(approvals, 2, "joining was the consent to the write, and it is on record");

    // Taken: read, nothing written, and the backoff grows.
    let report = poll_once(&app).await;
    assert_eq!((report.seats_read, report.seats_taken, report.writes), (1, 1, 0), "{report:?}");
    assert_eq!(poll_once(&app).await.seats_read, 0, "not due again before its backoff");
    clock.advance(Duration::seconds(3));
    assert_eq!(poll_once(&app).await.seats_taken, 1);
    assert_eq!((posts(&upstream), upstream.with(|s| s.availability_reads)), (0, 2));

    freed_upstream(&upstream);
    later(&app, &clock);
    let report = poll_once(&app).await;
    assert_eq!((report.writes, report.booked), (1, 1), "{report:?}");
    let alice = app.waitlist_entry("alice", &alice).await;
    assert_eq!(alice["status"], "ACCEPTED");
    let booking = app.reservation("alice", &alice["reservation_id"]).await;
    assert_eq!(
        (booking["status"].as_str(), booking["intent"]["state"].as_str(), booking["owner"].as_str()),
        (Some("CONFIRMED"), Some("SUCCEEDED"), Some("alice"))
    );
    let bob = app.waitlist_entry("bob", &bob).await;
    assert_eq!((bob["status"].as_str(), bob["position"].as_i64()), (Some("WAITING"), Some(1)));
    assert_eq!(bob["intent"]["state"], "WAITING_FOR_SEAT");

    // The seat is alice's now: later polls write nothing more.
    for _ in 0..3 {
        later(&app, &clock);
        poll_once(&app).await;
    }
    assert_eq!(posts(&upstream), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_waiters_on_one_seat_cost_one_post_per_free_event_in_fifo_order() {
    let (upstream, app, clock, seat) = a_seat_taken_upstream().await;
    let entries = join_all((0..50).map(|i| {
        let app = &app;
        async move { (format!("u{i}"), join(app, &format!("u{i}"), seat, true).await) }
    }))
    .await;
    let fifo: Vec<String> = app
        .db()
        .await
        .query("SELECT owner FROM waitlist_entries ORDER BY seq", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();

    // While taken, fifty waiters cost one read per poll of the seat, not fifty.
    let mut polls = 0;
    for _ in 0..5 {
        later(&app, &clock);
        let report = poll_once(&app).await;
        assert_eq!((report.seats_read, report.seats_taken), (1, 1), "{report:?}");
        polls += 1;
    }
    assert_eq!(upstream.with(|s| s.availability_reads), polls);

    freed_upstream(&upstream);
    for (event, winner) in fifo.iter().take(3).enumerate() {
        let before = posts(&upstream);
        later(&app, &clock);
        // Two pollers (two sweeper instances) at once.
        let reports = join_all((0..2).map(|_| poll_once(&app))).await;
        assert_eq!(reports.iter().map(|r| r.writes).sum::<u64>(), 1, "free event {event}: {reports:?}");
        assert_eq!(posts(&upstream) - before, 1, "free event {event}");
        let (_, e) = entries.iter().find(|(who, _)| who == winner).unwrap();
        let won = app.waitlist_entry(winner, e).await;
        assert_eq!(won["status"], "ACCEPTED", "free event {event}: the first in FIFO order wins");
        let waiting = app.count("SELECT count(*) FROM waitlist_entries WHERE status = 'WAITING'", &[]).await;
        assert_eq!(waiting, 50 - 1 - event as i64);

        // The winner gives the seat back (the cancel deletes its charge upstream): the
        // next free event.
        let (status, cancelled) = send(app.delete(winner, &acceptance::reservation_path(&won["reservation_id"]))).await;
        assert_eq!((status, cancelled["status"].as_str()), (StatusCode::OK, Some("CANCELLED")), "{cancelled}");
        let messages = app.take_intent_messages().await;
        assert!(
            invoke_worker(&app.state, messages.iter().map(sqs_record).collect()).await.batch_item_failures.is_empty()
        );
        assert_eq!(upstream.with(|s| s.charges.len()), 0);
    }
    assert_eq!(posts(&upstream), 3);
}

#[tokio::test]
async fn a_race_lost_upstream_puts_the_waiter_back_in_its_place() {
    let (upstream, app, clock, seat) = a_seat_taken_upstream().await;
    let alice = join(&app, "alice", seat, true).await;
    let bob = join(&app, "bob", seat, true).await;
    poll_once(&app).await;

    // Free by the read, but someone upstream is faster with the write.
    freed_upstream(&upstream);
    upstream.with(|s| s.on_post = OnPost::Conflict);
    later(&app, &clock);
    let report = poll_once(&app).await;
    assert_eq!((report.writes, report.booked), (1, 0), "{report:?}");
    let alice_now = app.waitlist_entry("alice", &alice).await;
    assert_eq!((alice_now["status"].as_str(), alice_now["position"].as_i64()), (Some("WAITING"), Some(1)));
    assert_eq!(
        (alice_now["intent"]["state"].as_str(), alice_now["intent"]["attempts"].as_i64()),
        (Some("WAITING_FOR_SEAT"), Some(1))
    );
    assert_eq!(app.waitlist_entry("bob", &bob).await["position"], 2);
    let attempt = app
        .db()
        .await
        .query_one("SELECT status, failure_reason FROM reservations WHERE owner = 'alice'", &[])
        .await
        .unwrap();
    assert_eq!((attempt.get::<_, &str>(0), attempt.get::<_, Option<&str>>(1)), ("FAILED", Some("race")));
    // The view that showed the seat free is not believed again within its cache period.
    assert_eq!(poll_once(&app).await.writes, 0);
    assert_eq!(posts(&upstream), 1);

    upstream.with(|s| s.on_post = OnPost::Accept);
    clock.advance(Duration::seconds(2));
    assert_eq!(poll_once(&app).await.booked, 1);
    let alice_now = app.waitlist_entry("alice", &alice).await;
    assert_eq!((alice_now["status"].as_str(), alice_now["intent"]["attempts"].as_i64()), (Some("ACCEPTED"), Some(2)));
    assert_eq!(app.reservation("alice", &alice_now["reservation_id"]).await["status"], "CONFIRMED");
    assert_eq!(posts(&upstream), 2);
}

#[tokio::test]
async fn an_open_breaker_stops_all_polling_and_writes_until_its_probe_closes_it() {
    let (upstream, app, clock, seat) = a_seat_taken_upstream().await;
    let alice = join(&app, "alice", seat, true).await;
    poll_once(&app).await;

    // The upstream fails until the breaker opens (reads of another seat trip it).
    upstream.with(|s| s.down = true);
    let other = app.resource_with(json!({"name": "Seat 7", "authority": "upstream", "upstream_ref": "seat-7"})).await;
    let (from, to) = hours(9, 18);
    for _ in 0..app.state.config.upstream.breaker_failures {
        send(app.get("reader", &format!("/v1/resources/{other}/availability")).query(&[("from", &from), ("to", &to)]))
            .await;
    }
    // Meanwhile the seat frees and the upstream would answer again: nothing goes out
    // while the breaker is open.
    freed_upstream(&upstream);
    upstream.with(|s| s.down = false);
    let calls = upstream.with(|s| s.calls);
    for _ in 0..10 {
        let report = poll_once(&app).await;
        assert!(report.paused && report.seats_read == 0 && report.writes == 0, "{report:?}");
        clock.advance(Duration::milliseconds(400));
    }
    assert_eq!(upstream.with(|s| s.calls), calls, "no read and no write reached the upstream");
    assert_eq!(app.waitlist_entry("alice", &alice).await["intent"]["state"], "WAITING_FOR_SEAT");

    // After the cool-down the seat's read is the probe; it closes the breaker and the
    // wait goes on.
    later(&app, &clock);
    let report = poll_once(&app).await;
    assert_eq!((report.paused, report.booked), (false, 1), "{report:?}");
    assert_eq!(posts(&upstream), 1);
}

#[tokio::test]
async fn auto_book_is_refused_on_a_local_resource() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (s, e) = hours(10, 11);
    let (status, problem) = send(app.post(
        "alice",
        &format!("/v1/resources/{room}/waitlist"),
        &json!({"start": s, "end": e, "auto_book": true}),
    ))
    .await;
    assert_eq!((status, slug(&problem)), (StatusCode::BAD_REQUEST, "validation-error"));
    assert_eq!(problem["errors"][0]["field"], "auto_book");
}

#[tokio::test]
async fn without_auto_book_an_upstream_offer_is_made_only_once_the_upstream_shows_the_seat_free() {
    let (upstream, app, clock, seat) = a_seat_taken_upstream().await;
    // Free locally, taken upstream: no offer.
    let bob = join(&app, "bob", seat, false).await;
    assert_eq!(
        (bob["status"].as_str(), bob["auto_book"].as_bool(), bob["intent"].clone()),
        (Some("WAITING"), Some(false), Value::Null)
    );
    assert_eq!(poll_once(&app).await.offers, 0);
    assert_eq!(app.waitlist_entry("bob", &bob).await["status"], "WAITING");

    freed_upstream(&upstream);
    later(&app, &clock);
    assert_eq!(poll_once(&app).await.offers, 1);
    let bob = app.waitlist_entry("bob", &bob).await;
    assert_eq!(bob["status"], "OFFERED");
    let offer = app.reservation("bob", &bob["reservation_id"]).await;
    assert_eq!((offer["status"].as_str(), offer["source"].as_str()), (Some("HELD"), Some("waitlist_offer")));
    assert_eq!(posts(&upstream), 0, "an offer writes nothing upstream until it is confirmed");
}

#[tokio::test]
async fn a_waiter_leaves_at_any_time_and_a_wait_ends_when_its_range_starts() {
    let (upstream, app, clock, seat) = a_seat_taken_upstream().await;
    let alice = join(&app, "alice", seat, true).await;
    let bob = join(&app, "bob", seat, true).await;
    let (status, left) = send(app.delete("alice", &waitlist_entry_path(&alice["id"]))).await;
    assert_eq!(
        (status, left["status"].as_str(), left["intent"]["state"].as_str()),
        (StatusCode::OK, Some("CANCELLED"), Some("CANCELLED"))
    );

    clock.set(day() + Duration::hours(10) + Duration::seconds(1));
    let report = sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default()).await;
    assert_eq!(report.waits_ended, Some(1), "{report:?}");
    let bob = app.waitlist_entry("bob", &bob).await;
    assert_eq!((bob["status"].as_str(), bob["intent"]["state"].as_str()), (Some("EXPIRED"), Some("CANCELLED")));
    assert_eq!(posts(&upstream), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_who_leaves_mid_write_is_booked_first_then_cancelled_through_a_cancel_intent() {
    let (upstream, app, _clock, seat) = a_seat().await;
    let alice = join(&app, "alice", seat, true).await;
    // The seat's view is in the cache already; the write is slow.
    let (from, to) = hours(10, 11);
    send(app.get("reader", &format!("/v1/resources/{seat}/availability")).query(&[("from", &from), ("to", &to)])).await;
    upstream.with(|s| s.delay = std::time::Duration::from_millis(600));
    let polling = {
        let state = app.state.clone();
        tokio::spawn(async move { poll(&state, state.upstream.as_deref().unwrap(), 10).await.unwrap() })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (status, leaving) = send(app.delete("alice", &waitlist_entry_path(&alice["id"]))).await;
    assert_eq!(
        (status, leaving["status"].as_str(), leaving["intent"]["state"].as_str()),
        (StatusCode::OK, Some("WAITING"), Some("RESERVING")),
        "the write in flight settles first"
    );
    assert_eq!(polling.await.unwrap().writes, 1);
    upstream.with(|s| s.delay = std::time::Duration::ZERO);
    let alice = app.waitlist_entry("alice", &alice).await;
    assert_eq!((alice["status"].as_str(), alice["intent"]["state"].as_str()), (Some("CANCELLED"), Some("SUCCEEDED")));
    let booking: String =
        app.db().await.query_one("SELECT status FROM reservations WHERE owner = 'alice'", &[]).await.unwrap().get(0);
    assert_eq!(booking, "CANCELLED");
    let messages = app.take_intent_messages().await;
    assert_eq!(messages.len(), 1, "the booking it won is cancelled upstream");
    assert!(invoke_worker(&app.state, messages.iter().map(sqs_record).collect()).await.batch_item_failures.is_empty());
    assert_eq!(upstream.with(|s| (s.posts, s.deletes, s.charges.len())), (1, 1, 0));
}

#[tokio::test]
async fn a_wait_outside_the_calendar_rules_now_is_neither_booked_nor_offered_until_they_allow_it() {
    let (upstream, app, clock, seat) = a_seat_taken_upstream().await;
    let alice = join(&app, "alice", seat, true).await;
    let bob = join(&app, "bob", seat, false).await;
    // Bookable a week ahead at most: the waits' range, a month ahead, is out of reach.
    let (status, body) =
        send(app.patch("admin", &format!("/v1/resources/{seat}"), &json!({"max_advance_days": 7}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    freed_upstream(&upstream);
    later(&app, &clock);
    let report = poll_once(&app).await;
    assert_eq!((report.writes, report.offers), (0, 0), "{report:?}");
    assert_eq!(posts(&upstream), 0, "nothing is written upstream for a range the rules refuse");
    assert_eq!(app.waitlist_entry("alice", &alice).await["status"], "WAITING");
    assert_eq!(app.waitlist_entry("bob", &bob).await["status"], "WAITING");

    let (status, body) =
        send(app.patch("admin", &format!("/v1/resources/{seat}"), &json!({"max_advance_days": 60}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    later(&app, &clock);
    let report = poll_once(&app).await;
    assert_eq!((report.writes, report.booked), (1, 1), "{report:?}");
    assert_eq!(app.waitlist_entry("alice", &alice).await["status"], "ACCEPTED");
    assert_eq!(posts(&upstream), 1);
}
