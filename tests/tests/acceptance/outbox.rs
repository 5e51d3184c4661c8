//! Events are recorded with the state changes they describe, and delivered at least
//! once, with stable ids, however often the publisher fails.

use acceptance::{Moto, TestApp, hours, send, write_events};
use chrono::{Duration, Utc};
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::{Clock, ManualClock};
use shared::outbox::{Envelope, Publisher, SqsPublisher, Topic};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use uuid::Uuid;

async fn kinds_of(app: &TestApp, subject: &Value) -> Vec<String> {
    let id = Uuid::parse_str(subject.as_str().unwrap()).unwrap();
    app.db()
        .await
        .query("SELECT kind FROM outbox WHERE subject_id = $1 ORDER BY seq", &[&id])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test]
async fn every_state_change_records_its_event_in_the_same_transaction() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 60})).await;
    let (s, e) = hours(10, 11);
    let (_, a) = app.reserve("alice", room, (&s, &e), 1).await;
    send(
        app.http
            .post(app.url(&format!("/v1/reservations/{}/confirm", a["id"].as_str().unwrap())))
            .header("x-principal", "alice"),
    )
    .await;
    let (_, bob) = app.join_waitlist_with("bob", room, &json!({"start": s, "end": e})).await;
    send(app.delete("alice", &format!("/v1/reservations/{}", a["id"].as_str().unwrap()))).await;
    assert_eq!(kinds_of(&app, &a["id"]).await, ["reservation.held", "reservation.confirmed", "reservation.cancelled"]);
    let bob = app.waitlist_entry("bob", &bob).await;
    assert_eq!(kinds_of(&app, &bob["id"]).await, ["waitlist.offered"]);
    clock.advance(Duration::seconds(901));
    sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default()).await;
    assert_eq!(kinds_of(&app, &bob["reservation_id"]).await, ["reservation.held", "reservation.expired"]);
    assert_eq!(kinds_of(&app, &bob["id"]).await, ["waitlist.offered", "waitlist.offer_expired"]);
    // A refused request changes nothing and records nothing.
    let (_, _) = app.reserve("carol", room, (&s, &e), 1).await;
    let (status, _) = app.reserve("dave", room, (&s, &e), 1).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let n = app.count("SELECT count(*) FROM outbox WHERE payload->>'owner' = 'dave'", &[]).await;
    assert_eq!(n, 0);
}

/// `n` holds of one slot of a hall big enough for them all, 32 at a time, each by a
/// principal of its own; the number answered 201.
async fn holds_at_once(app: &TestApp, n: usize) -> usize {
    let hall = app.resource(n as i32).await;
    let (s, e) = hours(10, 11);
    futures::stream::iter(0..n)
        .map(|i| {
            let (s, e) = (&s, &e);
            async move { app.reserve(&format!("u{i}"), hall, (s, e), 1).await.0 }
        })
        .buffer_unordered(32)
        .filter(|s| futures::future::ready(*s == StatusCode::CREATED))
        .count()
        .await
}

/// Fails now and then: sometimes nothing gets through, sometimes a message gets
/// through but its acknowledgement is lost (so it will be sent again).
struct Flaky {
    calls: AtomicU64,
    delivered: Mutex<Vec<Envelope>>,
}

impl Publisher for Flaky {
    async fn publish(&self, batch: &[Envelope]) -> Vec<Result<(), String>> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        if call.is_multiple_of(5) {
            return batch.iter().map(|_| Err("throttled".to_string())).collect();
        }
        self.delivered.lock().unwrap().extend(batch.iter().cloned());
        batch
            .iter()
            .enumerate()
            .map(|(i, _)| if call.is_multiple_of(7) && i % 2 == 0 { Err("ack lost".to_string()) } else { Ok(()) })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_events_through_a_flaky_publisher_are_all_delivered_with_stable_ids() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    assert_eq!(holds_at_once(&app, 1000).await, 1000);

    let flaky = Flaky { calls: AtomicU64::new(0), delivered: Mutex::new(Vec::new()) };
    let mut runs = 0;
    loop {
        let report = app.relay_to(&flaky, Topic::Events).await;
        runs += 1;
        let pending = shared::db::outbox::pending(&app.db().await).await.unwrap();
        if pending == 0 {
            break;
        }
        assert!(runs < 100, "the relay never drained: {report:?}, {pending} pending");
        // Past every backoff, so the failed ones come due.
        clock.advance(Duration::minutes(10));
    }
    assert!(runs > 1, "the publisher failed at least once, so more than one run was needed");

    let delivered = flaky.delivered.lock().unwrap().clone();
    let written: HashSet<Uuid> =
        app.db().await.query("SELECT id FROM outbox", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(written.len(), 1000);
    let mut by_id: HashMap<Uuid, Vec<String>> = HashMap::new();
    for envelope in delivered.iter() {
        by_id.entry(envelope.id).or_default().push(serde_json::to_string(envelope).unwrap());
    }
    let ids: HashSet<Uuid> = by_id.keys().copied().collect();
    assert_eq!(ids, written, "every event was delivered, none was lost or invented");
    let duplicated = by_id.values().filter(|copies| copies.len() > 1).count();
    assert!(duplicated > 0, "lost acknowledgements made duplicates");
    assert!(by_id.values().all(|copies| copies.iter().all(|c| c == &copies[0])), "a duplicate is the same event");
}

/// Takes every event, slowly enough that two relays' batches are out at once.
struct Slow(Mutex<Vec<Uuid>>);

impl Publisher for Slow {
    async fn publish(&self, batch: &[Envelope]) -> Vec<Result<(), String>> {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        self.0.lock().unwrap().extend(batch.iter().map(|e| e.id));
        batch.iter().map(|_| Ok(())).collect()
    }
}

/// A relay's batch stays locked while it is out: a second relay running at once takes
/// other events, and every event is published once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_at_once_publish_each_event_once() {
    let app = TestApp::spawn().await;
    assert_eq!(holds_at_once(&app, 600).await, 600);

    let publisher = Slow(Mutex::new(Vec::new()));
    let (a, b) = tokio::join!(app.relay_to(&publisher, Topic::Events), app.relay_to(&publisher, Topic::Events));
    assert!(a.published > 0 && b.published > 0, "both relays worked: {a:?} {b:?}");
    assert_eq!(a.published + b.published, 600);
    let sent = publisher.0.lock().unwrap().clone();
    assert_eq!((sent.len(), sent.iter().collect::<HashSet<_>>().len()), (600, 600), "each event once");
    assert_eq!(shared::db::outbox::pending(&app.db().await).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_delivers_to_sqs_and_deduplicates_on_a_fifo_queue() {
    let moto = Moto::start().await;
    let app = TestApp::spawn().await;
    let room = app.resource(50).await;
    for i in 0..25 {
        let (s, e) = hours(10, 11);
        assert_eq!(app.reserve(&format!("u{i}"), room, (&s, &e), 1).await.0, StatusCode::CREATED);
    }
    for name in ["events", "events.fifo"] {
        let url = moto.queue(name).await;
        let publisher = SqsPublisher::new(moto.sqs().await, url.clone());
        // Mark everything due again for the second queue.
        app.mark_messages_unsent(Topic::Events).await;
        let report = app.relay_to(&publisher, Topic::Events).await;
        assert_eq!((report.published, report.failed), (25, 0), "{name}");
        if name.ends_with(".fifo") {
            // A relay that died before marking its batch sends it again: the FIFO queue
            // drops the copies by the event id.
            app.mark_messages_unsent(Topic::Events).await;
            app.relay_to(&publisher, Topic::Events).await;
        }
        let messages = moto.drain(&url).await;
        let ids: HashSet<&str> = messages.iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!((messages.len(), ids.len()), (25, 25), "{name}");
        assert!(messages.iter().all(|m| m["type"] == "reservation.held" && m["data"]["resource_id"] == json!(room)));
    }
}

#[tokio::test]
async fn an_unreachable_queue_loses_nothing() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (s, e) = hours(10, 11);
    app.reserve("alice", room, (&s, &e), 1).await;
    let sqs = acceptance::sqs_at("http://127.0.0.1:1".into());
    let publisher = SqsPublisher::new(sqs, "http://127.0.0.1:1/000000000000/events".into());
    let report = app.relay_to(&publisher, Topic::Events).await;
    assert_eq!((report.published, report.failed), (0, 1));
    let row = app
        .db()
        .await
        .query_one("SELECT attempts, last_error IS NOT NULL, published_at IS NULL FROM outbox", &[])
        .await
        .unwrap();
    assert_eq!((row.get::<_, i32>(0), row.get::<_, bool>(1), row.get::<_, bool>(2)), (1, true, true));
}

#[tokio::test]
async fn a_queue_sqs_does_not_know_fails_the_publish_with_the_reason_sqs_gave() {
    let moto = Moto::start().await;
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (s, e) = hours(10, 11);
    app.reserve("alice", room, (&s, &e), 1).await;
    let missing = format!("{}/000000000000/no-such-queue", moto.endpoint);
    let report = app.relay_to(&SqsPublisher::new(moto.sqs().await, missing), Topic::Events).await;
    assert_eq!((report.published, report.failed), (0, 1));
    let error: String = app.db().await.query_one("SELECT last_error FROM outbox", &[]).await.unwrap().get("last_error");
    assert!(error.contains("QueueDoesNotExist"), "{error}");
}

#[tokio::test]
async fn reservations_and_their_events_get_time_ordered_ids() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (s, e) = hours(10, 11);
    let (_, held) = app.reserve("alice", room, (&s, &e), 1).await;
    let id = Uuid::parse_str(held["id"].as_str().unwrap()).unwrap();
    assert_eq!(id.get_version_num(), 7, "{id}");
    let (s, e) = hours(12, 13);
    app.reserve("alice", room, (&s, &e), 1).await;
    let rows = app.db().await.query("SELECT id FROM outbox ORDER BY seq", &[]).await.unwrap();
    let ids: Vec<Uuid> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(|i| i.get_version_num() == 7), "{ids:?}");
    // The first 48 bits are the milliseconds of creation: later events never sort before.
    assert!(ids[0].as_bytes()[..6] <= ids[1].as_bytes()[..6], "{ids:?}");
}

/// Refuses each named event the first time it is offered, and records the events it
/// accepted, in the order it accepted them.
struct RefusesOnce {
    refuse: Mutex<HashSet<Uuid>>,
    accepted: Mutex<Vec<Envelope>>,
}

impl Publisher for RefusesOnce {
    async fn publish(&self, batch: &[Envelope]) -> Vec<Result<(), String>> {
        // SQS refuses an empty batch (`EmptyBatchRequest`): the relay must not send one.
        assert!(!batch.is_empty(), "the relay sent an empty batch");
        batch
            .iter()
            .map(|e| {
                if self.refuse.lock().unwrap().remove(&e.id) {
                    return Err("internal error".to_string());
                }
                self.accepted.lock().unwrap().push(e.clone());
                Ok(())
            })
            .collect()
    }
}

impl RefusesOnce {
    fn kinds_accepted_for(&self, subject: &Value) -> Vec<String> {
        let id = Uuid::parse_str(subject.as_str().unwrap()).unwrap();
        self.accepted.lock().unwrap().iter().filter(|e| e.subject_id == id).map(|e| e.kind.to_string()).collect()
    }
}

/// The events queue is FIFO by subject; one event of a subject refused by the queue
/// (an entry of a batch failing alone, as SQS reports it) must hold back that subject's
/// later events, in the same batch, in later batches and those written after the
/// failure, until it is through. Other subjects go on.
#[tokio::test]
async fn a_refused_event_holds_back_its_subjects_later_events_and_no_one_elses() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource(5).await;
    let (s, e) = hours(10, 11);
    let (_, a) = app.reserve("alice", room, (&s, &e), 1).await;
    let (_, b) = app.reserve("bob", room, (&s, &e), 1).await;
    let (status, _) = app.confirm("alice", &a["id"]).await;
    assert_eq!(status, StatusCode::OK);
    let a_id = Uuid::parse_str(a["id"].as_str().unwrap()).unwrap();
    let held: Uuid = app
        .db()
        .await
        .query_one("SELECT id FROM outbox WHERE subject_id = $1 AND kind = 'reservation.held'", &[&a_id])
        .await
        .unwrap()
        .get(0);
    let publisher = RefusesOnce { refuse: Mutex::new(HashSet::from([held])), accepted: Mutex::new(Vec::new()) };
    let run = || app.relay_to(&publisher, Topic::Events);

    let report = run().await;
    assert_eq!(report.failed, 1, "{report:?}");
    assert_eq!(publisher.kinds_accepted_for(&a["id"]), Vec::<String>::new(), "alice's confirm waits for her hold");
    assert_eq!(publisher.kinds_accepted_for(&b["id"]), ["reservation.held"], "bob's events go on");

    // An event written after the failure waits too, even once its own turn comes.
    send(app.delete("alice", &format!("/v1/reservations/{}", a["id"].as_str().unwrap()))).await;
    run().await;
    assert_eq!(publisher.kinds_accepted_for(&a["id"]), Vec::<String>::new());

    clock.advance(Duration::minutes(10));
    run().await;
    assert_eq!(
        publisher.kinds_accepted_for(&a["id"]),
        ["reservation.held", "reservation.confirmed", "reservation.cancelled"],
        "in the order they happened"
    );
    assert_eq!(shared::db::outbox::pending(&app.db().await).await.unwrap(), 0);
}

/// Writes `per_subject` events for each subject, round by round (every subject's first,
/// then every subject's second ...), as `reservation.updated` with `n` its round.
/// A claim reads its window from the index in order of writing, with a plain index
/// scan, whose reads mark the entries of published events dead so that later claims
/// skip them, even on a table nothing has analyzed. The planner without statistics
/// preferred a bitmap scan, which reads every entry at every claim and marks none
/// (docs/design.md, "The claim reads the index in order"). Whether an entry can be
/// marked also depends on every other transaction of the database (it must be dead to
/// all of them), so the test checks the plan's kind: a bitmap scan fetches no row
/// through the index's own counter.
#[tokio::test]
async fn a_claim_reads_the_index_in_order_even_on_a_table_never_analyzed() {
    // 200,000 events (without statistics, the planner's choice depends on the table's
    // size), all but one per subject published.
    const PER_SUBJECT: i32 = 20_000;
    let app = TestApp::spawn().await;
    let subjects: Vec<Uuid> = (0..10).map(|_| Uuid::now_v7()).collect();
    let now = Utc::now();
    write_events(&app, &subjects, PER_SUBJECT, now).await;
    let db = app.db().await;
    let last_of_each = "SELECT max(seq) FROM outbox GROUP BY subject_id";
    let sql = format!("UPDATE outbox SET published_at = $1 WHERE seq NOT IN ({last_of_each})");
    assert_eq!(db.execute(&sql, &[&now]).await.unwrap(), 10 * (PER_SUBJECT as u64 - 1));
    let sql = "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL FROM pg_stat_user_tables \
               WHERE relname = 'outbox'";
    assert!(db.query_one(sql, &[]).await.unwrap().get::<_, bool>(0), "never analyzed");
    // The rows fetched by plain scans of the index (flushed when a statement ends).
    let fetched = || async {
        db.query_one("SELECT pg_stat_force_next_flush()", &[]).await.unwrap();
        let sql = "SELECT idx_tup_fetch FROM pg_stat_user_indexes WHERE indexrelname = 'outbox_unpublished_idx'";
        db.query_one(sql, &[]).await.unwrap().get::<_, i64>(0)
    };
    let claim = || shared::db::outbox::claim_due(&db, Topic::Events, now, now + Duration::seconds(30), 100, 1000);

    let before = fetched().await;
    assert_eq!(claim().await.unwrap().len(), 10, "each subject's last event");
    let after_first = fetched().await;
    assert!(after_first - before >= 10, "the claim read the index in order, not by a bitmap");
    assert_eq!(claim().await.unwrap().len(), 0, "leased to the first claim");
    assert!(fetched().await - after_first >= 10, "so did the next");
}

/// Each subject's rounds, in the order they were published.
fn rounds_by_subject(sent: &[Envelope]) -> HashMap<Uuid, Vec<i64>> {
    let mut by_subject: HashMap<Uuid, Vec<i64>> = HashMap::new();
    for e in sent {
        by_subject.entry(e.subject_id).or_default().push(e.data["n"].as_i64().unwrap());
    }
    by_subject
}

/// Takes every event after a pause of 0-15 ms that differs from batch to batch, so
/// that relays running side by side overtake one another.
struct Jittery {
    calls: AtomicU64,
    sent: Mutex<Vec<Envelope>>,
}

impl Publisher for Jittery {
    async fn publish(&self, batch: &[Envelope]) -> Vec<Result<(), String>> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        // Later calls tend to pause less, and so to finish first.
        tokio::time::sleep(std::time::Duration::from_millis(15 - call * 7 % 16)).await;
        self.sent.lock().unwrap().extend(batch.iter().cloned());
        batch.iter().map(|_| Ok(())).collect()
    }
}

/// Relays may run side by side (each function that commits runs one): a claim passes
/// over a subject whose earlier event another relay has out, so each subject's events
/// still leave one after another, in the order they were written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_side_by_side_send_each_subjects_events_in_the_order_they_were_written() {
    let app = TestApp::spawn().await;
    let subjects: Vec<Uuid> = (0..20).map(|_| Uuid::now_v7()).collect();
    write_events(&app, &subjects, 15, Utc::now()).await;

    let publisher = Jittery { calls: AtomicU64::new(0), sent: Mutex::new(Vec::new()) };
    let mut rounds = 0;
    while shared::db::outbox::pending(&app.db().await).await.unwrap() > 0 {
        rounds += 1;
        assert!(rounds < 50, "the relays never drained the outbox");
        futures::future::join_all((0..6).map(|_| app.relay_to(&publisher, Topic::Events))).await;
    }

    let sent = publisher.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 300, "each event once");
    let in_order: Vec<i64> = (0..15).collect();
    for (subject, rounds) in rounds_by_subject(&sent) {
        assert_eq!(rounds, in_order, "subject {subject}'s events in the order they were written");
    }
}

/// A relay that claimed events and died before marking them holds them, and their
/// subjects' later events, for its lease; then the next claim sends them, in order.
#[tokio::test]
async fn the_events_a_dead_relay_claimed_go_out_after_its_lease_ahead_of_their_subjects_later_ones() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let subjects = [Uuid::now_v7(), Uuid::now_v7()];
    write_events(&app, &subjects, 3, clock.now()).await;
    let now = clock.now();
    let claimed =
        shared::db::outbox::claim_due(&app.db().await, Topic::Events, now, now + Duration::seconds(30), 100, 1000)
            .await
            .unwrap();
    assert_eq!(claimed.len(), 2, "one event a subject: {claimed:?}");

    let publisher = Jittery { calls: AtomicU64::new(0), sent: Mutex::new(Vec::new()) };
    clock.advance(Duration::seconds(29));
    assert_eq!(app.relay_to(&publisher, Topic::Events).await.published, 0, "both subjects wait for the lease");

    clock.advance(Duration::seconds(2));
    while app.relay_to(&publisher, Topic::Events).await.published > 0 {}
    let sent = publisher.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 6);
    for subject in subjects {
        assert_eq!(rounds_by_subject(&sent)[&subject], [0, 1, 2]);
    }
}

/// Publishes after fetching a connection of its own from the pool, as another request
/// would while the relay's batch is out; records whether it got one within a second.
struct NeedsTheConnection {
    pool: deadpool_postgres::Pool,
    got_one: Mutex<Vec<bool>>,
}

impl Publisher for NeedsTheConnection {
    async fn publish(&self, batch: &[Envelope]) -> Vec<Result<(), String>> {
        let got = tokio::time::timeout(std::time::Duration::from_secs(1), self.pool.get()).await;
        self.got_one.lock().unwrap().push(matches!(got, Ok(Ok(_))));
        batch.iter().map(|_| Ok(())).collect()
    }
}

/// Behind a transaction-mode pooler a transaction open across a call to SQS holds a
/// server connection as long: the relay claims in one statement, publishes with no
/// connection taken from the pool, then marks.
#[tokio::test]
async fn the_relay_holds_no_database_connection_while_it_publishes() {
    let app = TestApp::spawn_with(acceptance::Options {
        tweak: Box::new(|c| c.database.pool_size = 1),
        ..Default::default()
    })
    .await;
    let room = app.resource(1).await;
    app.hold("alice", room, 10, 11).await;

    let publisher = NeedsTheConnection { pool: app.state.pool.clone(), got_one: Mutex::new(Vec::new()) };
    assert_eq!(app.relay_to(&publisher, Topic::Events).await.published, 1);
    assert_eq!(*publisher.got_one.lock().unwrap(), [true], "the pool's one connection was free during the publish");
}

/// In AWS the function that committed publishes its events before it answers: by the
/// time the client has the 201, the event is on the queue, with no sweep and no relay
/// of the process's own.
#[tokio::test]
async fn a_function_that_wrote_events_has_published_them_when_it_answers() {
    let (app, mut queue) = acceptance::publishing_after_each_request(acceptance::Options::default()).await;
    let room = app.resource(1).await;

    let held = app.hold("alice", room, 10, 11).await;
    let event = queue.try_recv().expect("the hold's event is on the queue when the 201 arrives");
    assert_eq!(
        (event.kind.as_str(), event.subject_id.to_string()),
        ("reservation.held", held["id"].as_str().unwrap().into())
    );
    assert_eq!(app.confirm("alice", &held["id"]).await.0, StatusCode::OK);
    assert_eq!(queue.try_recv().expect("the confirm's too").kind.as_str(), "reservation.confirmed");
    assert_eq!(shared::db::outbox::pending(&app.db().await).await.unwrap(), 0);
}

/// A hold's event is leased to the function as the hold writes it, and the row carries
/// it back: the function publishes it and marks it, and claims nothing, so other due
/// events wait for the next relay that claims (a confirm's here).
#[tokio::test]
async fn a_hold_publishes_the_event_it_wrote_without_claiming_any() {
    let (app, mut queue) = acceptance::publishing_after_each_request(acceptance::Options::default()).await;
    let room = app.resource(1).await;
    let waiting = Uuid::now_v7();
    write_events(&app, &[waiting], 1, Utc::now()).await;

    let held = app.hold("alice", room, 10, 11).await;
    let event = queue.try_recv().expect("the hold's event is on the queue when the 201 arrives");
    assert!(queue.try_recv().is_err(), "the hold published its own event alone");
    let id = Uuid::parse_str(held["id"].as_str().unwrap()).unwrap();
    let db = app.db().await;
    let stored = db
        .query_one(
            "SELECT id, payload, published_at IS NOT NULL AS published, claimed_until FROM outbox WHERE subject_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(event.id, stored.get::<_, Uuid>("id"));
    assert_eq!(event.data, stored.get::<_, Value>("payload"), "the event as the relay would have sent it");
    assert!(stored.get::<_, bool>("published"), "marked published");
    assert_eq!(stored.get::<_, Option<chrono::DateTime<Utc>>>("claimed_until"), None, "its lease let go");
    let unclaimed =
        app.count("SELECT count(*) FROM outbox WHERE subject_id = $1 AND claimed_until IS NULL", &[&waiting]).await;
    assert_eq!(unclaimed, 1, "the other subject's event was not claimed");

    assert_eq!(app.confirm("alice", &held["id"]).await.0, StatusCode::OK);
    let relayed: HashSet<Uuid> = std::iter::from_fn(|| queue.try_recv().ok()).map(|e| e.subject_id).collect();
    assert_eq!(relayed, HashSet::from([waiting, id]), "the confirm's relay sends the waiting event with its own");
    assert_eq!(shared::db::outbox::pending(&db).await.unwrap(), 0);
}

/// A hold the one statement refuses writes no event: its request publishes nothing and
/// claims nothing, and other due events wait for the next relay that claims.
#[tokio::test]
async fn a_refused_hold_claims_nothing_after_it() {
    let (app, mut queue) = acceptance::publishing_after_each_request(acceptance::Options::default()).await;
    let room = app.resource(1).await;
    app.hold("alice", room, 10, 11).await;
    queue.try_recv().expect("alice's hold published its event");
    let waiting = Uuid::now_v7();
    write_events(&app, &[waiting], 1, Utc::now()).await;

    let (s, e) = hours(10, 11);
    assert_eq!(app.reserve("bob", room, (&s, &e), 1).await.0, StatusCode::CONFLICT);

    assert!(queue.try_recv().is_err(), "bob's refusal published nothing");
    let unclaimed =
        app.count("SELECT count(*) FROM outbox WHERE subject_id = $1 AND claimed_until IS NULL", &[&waiting]).await;
    assert_eq!(unclaimed, 1, "bob's request claimed nothing");
}

/// A hold whose function cannot publish its event still answers 201; the event, let go
/// with its backoff, goes out with the next relay once it is due.
#[tokio::test]
async fn a_held_event_its_function_could_not_publish_goes_out_with_a_later_relay() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let (app, queue) =
        acceptance::publishing_after_each_request(acceptance::Options { clock: clock.clone(), ..Default::default() })
            .await;
    drop(queue);
    let room = app.resource(1).await;

    let held = app.hold("alice", room, 10, 11).await;
    let id = Uuid::parse_str(held["id"].as_str().unwrap()).unwrap();
    let failed = app
        .count("SELECT count(*) FROM outbox WHERE subject_id = $1 AND attempts = 1 AND claimed_until IS NULL", &[&id])
        .await;
    assert_eq!(failed, 1, "one failed attempt, and the lease let go");

    let publisher = Jittery { calls: AtomicU64::new(0), sent: Mutex::new(Vec::new()) };
    assert_eq!(app.relay_to(&publisher, Topic::Events).await.published, 0, "not before its backoff");
    clock.advance(Duration::seconds(2));
    assert_eq!(app.relay_to(&publisher, Topic::Events).await.published, 1);
    assert_eq!(publisher.sent.lock().unwrap()[0].subject_id, id);
}
