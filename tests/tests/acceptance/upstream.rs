//! Resources whose system of record is upstream: one write per seat per burst, read
//! after uncertainty instead of write replay, a shared breaker, cached reads.

use acceptance::upstream_mock::{MockUpstream, OnPost};
use acceptance::{Moto, Options, TestApp, hours, invoke_worker, send, slug, sqs_record};
use chrono::{Duration, Utc};
use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::ManualClock;
use shared::intents::{ClaimOutcome, Executed};
use shared::outbox::{SqsPublisher, Topic};
use std::sync::Arc;
use uuid::Uuid;

async fn app_with(upstream: &MockUpstream, clock: Option<Arc<ManualClock>>) -> TestApp {
    let mut options = Options { upstream: Some(upstream.base.clone()), ..Default::default() };
    if let Some(c) = clock {
        options.clock = c;
    }
    TestApp::spawn_with(options).await
}

async fn seat(app: &TestApp) -> Uuid {
    app.resource_with(json!({"name": "Library seat 42", "authority": "upstream", "upstream_ref": "seat-42"})).await
}

async fn book(app: &TestApp, who: &str, seat: Uuid, from: i64, to: i64) -> (StatusCode, Value) {
    let (s, e) = hours(from, to);
    send(app.post(who, "/v1/reservations", &json!({"resource_id": seat, "start": s, "end": e, "confirm": true}))).await
}

/// Books one seat in one step and runs the worker on its message.
async fn book_and_work(app: &TestApp, from: i64, to: i64) -> Value {
    let s = seat(app).await;
    let (status, r) = book(app, "alice", s, from, to).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{r}");
    let messages = app.take_intent_messages().await;
    let response = invoke_worker(&app.state, messages.iter().map(sqs_record).collect()).await;
    assert!(response.batch_item_failures.is_empty());
    app.reservation("alice", &r["id"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_one_hundred_bookings_of_one_seat_costs_one_upstream_write() {
    let upstream = MockUpstream::start().await;
    let moto = Moto::start().await;
    let app = app_with(&upstream, None).await;
    let seat = seat(&app).await;
    let (s, e) = hours(10, 11);
    let barrier = Arc::new(tokio::sync::Barrier::new(100));
    let results = join_all((0..100).map(|i| {
        let req = app.post(
            &format!("u{i}"),
            "/v1/reservations",
            &json!({"resource_id": seat, "start": s, "end": e, "confirm": true}),
        );
        let barrier = barrier.clone();
        async move {
            barrier.wait().await;
            send(req).await
        }
    }))
    .await;
    let accepted: Vec<&Value> = results.iter().filter(|(s, _)| *s == StatusCode::ACCEPTED).map(|(_, b)| b).collect();
    let refused = results.iter().filter(|(s, b)| *s == StatusCode::CONFLICT && slug(b) == "slot-unavailable").count();
    assert_eq!((accepted.len(), refused), (1, 99), "losers are told at once, before any worker runs");
    assert_eq!(accepted[0]["status"], "CONFIRMING");
    assert_eq!(accepted[0]["intent"]["state"], "REQUESTED");

    // The intent message goes to the queue, three times over (a relay that died before
    // marking it sent, twice), and several workers consume it concurrently.
    let queue = moto.queue("intents").await;
    let publisher = SqsPublisher::new(moto.sqs().await, queue.clone());
    for _ in 0..3 {
        app.mark_messages_unsent(Topic::Intents).await;
        app.relay_to(&publisher, Topic::Intents).await;
    }
    let sqs = moto.sqs().await;
    let workers = join_all((0..4).map(|_| {
        let (sqs, queue, state) = (sqs.clone(), queue.clone(), app.state.clone());
        async move {
            let mut handled = 0;
            for _ in 0..3 {
                let messages = sqs.receive_message(&queue, 2, 0).await.unwrap();
                if messages.is_empty() {
                    continue;
                }
                let records = messages
                    .iter()
                    .map(|m| {
                        let mut r = aws_lambda_events::sqs::SqsMessage::default();
                        r.message_id = Some(m.message_id.clone());
                        r.body = Some(m.body.clone());
                        r
                    })
                    .collect();
                let response = invoke_worker(&state, records).await;
                assert!(response.batch_item_failures.is_empty());
                for m in &messages {
                    sqs.delete_message(&queue, &m.receipt_handle).await.unwrap();
                }
                handled += messages.len();
            }
            handled
        }
    }))
    .await;
    assert_eq!(workers.iter().sum::<usize>(), 3, "every copy was delivered and handled");
    assert_eq!(upstream.with(|s| s.posts), 1);
    let r = app.reservation(accepted[0]["owner"].as_str().unwrap(), &accepted[0]["id"]).await;
    assert_eq!(r["status"], "CONFIRMED");
    assert_eq!(r["intent"]["state"], "SUCCEEDED");
    let rows = app.count("SELECT count(*) FROM reservations", &[]).await;
    assert_eq!(rows, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_message_delivered_three_times_writes_once() {
    let upstream = MockUpstream::start().await;
    let app = app_with(&upstream, None).await;
    let seat = seat(&app).await;
    let (_, r) = book(&app, "alice", seat, 10, 11).await;
    let message = app.take_intent_messages().await.pop().unwrap();
    let results = join_all((0..3).map(|_| invoke_worker(&app.state, vec![sqs_record(&message)]))).await;
    assert!(results.iter().all(|r| r.batch_item_failures.is_empty()));
    assert_eq!(upstream.with(|s| s.posts), 1);
    let r = app.reservation("alice", &r["id"]).await;
    assert_eq!((r["status"].as_str(), r["intent"]["attempts"].as_i64()), (Some("CONFIRMED"), Some(1)));
}

#[tokio::test]
async fn a_worker_that_dies_after_the_upstream_accepted_is_settled_by_the_reaper_from_the_charge_read() {
    let upstream = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = app_with(&upstream, Some(clock.clone())).await;
    let seat = seat(&app).await;
    let (_, r) = book(&app, "alice", seat, 10, 11).await;
    let message = app.take_intent_messages().await.pop().unwrap();
    let intent_id = shared::outbox::IntentMessage::from_envelope(&message).unwrap().intent_id;
    // The worker claims, writes upstream (accepted), and dies before settling.
    let ClaimOutcome::Claimed(claim) = shared::intents::claim(&app.state, intent_id).await.unwrap() else {
        panic!("the intent is claimable");
    };
    let outcome = shared::intents::execute(&app.state, app.state.upstream.as_deref().unwrap(), &claim).await.unwrap();
    assert!(matches!(outcome, Executed::Resolved(shared::intents::Resolution::Succeeded { .. })));
    drop(claim);
    assert_eq!(app.reservation("alice", &r["id"]).await["intent"]["state"], "RESERVING");

    // A redelivery finds it leased and does nothing.
    invoke_worker(&app.state, vec![sqs_record(&message)]).await;
    assert_eq!(upstream.with(|s| s.posts), 1);
    // The lease lapses; the reaper reads the current charge instead of writing again.
    clock.advance(app.state.config.upstream.intent_lease + Duration::seconds(1));
    let report = sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default()).await;
    assert_eq!(report.reaper.as_ref().map(|r| (r.reaped, r.settled)), Some((1, 1)), "{report:?}");
    let r = app.reservation("alice", &r["id"]).await;
    assert_eq!((r["status"].as_str(), r["intent"]["state"].as_str()), (Some("CONFIRMED"), Some("SUCCEEDED")));
    assert_eq!(upstream.with(|s| (s.posts, s.charge_reads)), (1, 1));
}

#[tokio::test]
async fn a_lost_upstream_race_fails_the_booking_and_gives_the_capacity_back() {
    let upstream = MockUpstream::start().await;
    let app = app_with(&upstream, None).await;
    upstream.with(|s| s.on_post = OnPost::Conflict);
    let r = book_and_work(&app, 10, 11).await;
    assert_eq!((r["status"].as_str(), r["failure_reason"].as_str()), (Some("FAILED"), Some("race")));
    assert_eq!(r["intent"]["state"], "FAILED_RACE");
    let seat = Uuid::parse_str(r["resource_id"].as_str().unwrap()).unwrap();
    let (s, e) = hours(10, 11);
    assert_eq!(app.reserve("bob", seat, (&s, &e), 1).await.0, StatusCode::CREATED, "the capacity is back");
}

#[tokio::test]
async fn a_rejected_credential_fails_the_booking_for_auth() {
    let upstream = MockUpstream::start().await;
    let app = app_with(&upstream, None).await;
    upstream.with(|s| s.on_post = OnPost::Unauthorized);
    let r = book_and_work(&app, 10, 11).await;
    assert_eq!((r["failure_reason"].as_str(), r["intent"]["state"].as_str()), (Some("auth"), Some("FAILED_AUTH")));
}

#[tokio::test]
async fn an_unknown_outcome_with_no_charge_fails_the_booking_without_writing_again() {
    let upstream = MockUpstream::start().await;
    let app = app_with(&upstream, None).await;
    upstream.with(|s| s.on_post = OnPost::FailWithoutCharge);
    let r = book_and_work(&app, 10, 11).await;
    assert_eq!(
        (r["failure_reason"].as_str(), r["intent"]["state"].as_str()),
        (Some("upstream"), Some("FAILED_UPSTREAM"))
    );
    assert_eq!(upstream.with(|s| (s.posts, s.charge_reads)), (1, 1));
}

#[tokio::test]
async fn an_unknown_outcome_with_a_charge_is_a_success() {
    let upstream = MockUpstream::start().await;
    let app = app_with(&upstream, None).await;
    upstream.with(|s| s.on_post = OnPost::FailWithCharge);
    let r = book_and_work(&app, 10, 11).await;
    assert_eq!((r["status"].as_str(), r["intent"]["state"].as_str()), (Some("CONFIRMED"), Some("SUCCEEDED")));
    assert_eq!(upstream.with(|s| (s.posts, s.charge_reads)), (1, 1));
}

#[tokio::test]
async fn a_two_step_confirm_answers_202_and_confirming_again_writes_nothing_more() {
    let upstream = MockUpstream::start().await;
    let app = app_with(&upstream, None).await;
    let seat = seat(&app).await;
    let (s, e) = hours(10, 11);
    let (status, held) = app.reserve("alice", seat, (&s, &e), 1).await;
    assert_eq!((status, held["status"].as_str()), (StatusCode::CREATED, Some("HELD")));
    let confirm = || {
        send(
            app.http
                .post(app.url(&format!("/v1/reservations/{}/confirm", held["id"].as_str().unwrap())))
                .header("x-principal", "alice"),
        )
    };
    let (status, first) = confirm().await;
    assert_eq!((status, first["status"].as_str()), (StatusCode::ACCEPTED, Some("CONFIRMING")));
    let (status, again) = confirm().await;
    assert_eq!((status, again["intent"]["id"].clone()), (StatusCode::OK, first["intent"]["id"].clone()));
    assert_eq!(
        send(app.delete("alice", &format!("/v1/reservations/{}", held["id"].as_str().unwrap()))).await.0,
        StatusCode::CONFLICT
    );
    let messages = app.take_intent_messages().await;
    assert_eq!(messages.len(), 1);
    invoke_worker(&app.state, messages.iter().map(sqs_record).collect()).await;
    assert_eq!(app.reservation("alice", &held["id"]).await["status"], "CONFIRMED");
    assert_eq!(upstream.with(|s| s.posts), 1);
    let approvals = app.count("SELECT count(*) FROM approvals WHERE principal = 'alice'", &[]).await;
    assert_eq!(approvals, 1, "what the user approved is on record");
}

#[tokio::test]
async fn while_the_upstream_is_down_the_breaker_keeps_calls_at_the_threshold_plus_one_probe_per_cool_down() {
    let upstream = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = app_with(&upstream, Some(clock.clone())).await;
    let seat = seat(&app).await;
    upstream.with(|s| s.down = true);
    // 25 requests a second for 10 seconds, in the test's own time.
    let (from, to) = hours(9, 18);
    let mut answers = Vec::new();
    for _ in 0..250 {
        let resp = app
            .get("reader", &format!("/v1/resources/{seat}/availability"))
            .query(&[("from", &from), ("to", &to)])
            .send()
            .await
            .unwrap();
        let retry_after = resp.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
        let status = resp.status();
        let body: Value = resp.json().await.unwrap();
        answers.push((status, slug(&body).to_string(), retry_after));
        clock.advance(Duration::milliseconds(40));
    }
    assert!(
        answers.iter().all(|(s, slug, ra)| *s == StatusCode::SERVICE_UNAVAILABLE
            && slug == "upstream-unavailable"
            && ra.is_some())
    );
    let threshold = app.state.config.upstream.breaker_failures as u64;
    let cool_downs = 10_000 / app.state.config.upstream.breaker_open.num_milliseconds() as u64;
    let calls = upstream.with(|s| s.calls);
    assert!(calls >= threshold && calls <= threshold + cool_downs, "{calls} calls reached the upstream");
    // A booking that needs the upstream is refused at once too, and nothing is queued.
    let (status, problem) = book(&app, "alice", seat, 10, 11).await;
    assert_eq!((status, slug(&problem)), (StatusCode::SERVICE_UNAVAILABLE, "upstream-unavailable"));
    assert!(app.take_intent_messages().await.is_empty());

    // The upstream recovers; after the cool-down one probe closes the breaker.
    upstream.with(|s| s.down = false);
    clock.advance(app.state.config.upstream.breaker_open);
    let (status, _) =
        send(app.get("reader", &format!("/v1/resources/{seat}/availability")).query(&[("from", &from), ("to", &to)]))
            .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(book(&app, "alice", seat, 10, 11).await.0, StatusCode::ACCEPTED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_readers_of_one_seat_cost_about_one_upstream_read_per_cache_period() {
    let upstream = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = app_with(&upstream, Some(clock.clone())).await;
    let seat = seat(&app).await;
    let (block_start, block_end) = (acceptance::day() + Duration::hours(12), acceptance::day() + Duration::hours(13));
    upstream.with(|s| s.foreign.insert("seat-42".into(), vec![(block_start, block_end)]));
    let (from, to) = hours(9, 18);
    let mut reads = 0;
    // 32 readers for 10 cache periods of 1 s.
    for _ in 0..10 {
        let answers = join_all((0..32).map(|_| {
            send(
                app.get("reader", &format!("/v1/resources/{seat}/availability")).query(&[("from", &from), ("to", &to)]),
            )
        }))
        .await;
        for (status, a) in &answers {
            assert_eq!(*status, StatusCode::OK, "{a}");
            assert_eq!(
                a["taken"],
                json!([{"start": acceptance::rfc3339(block_start), "end": acceptance::rfc3339(block_end), "quantity": 1, "status": "EXTERNAL", "expires_at": null}])
            );
        }
        reads += answers.len();
        clock.advance(Duration::milliseconds(1000));
    }
    let upstream_reads = upstream.with(|s| s.availability_reads);
    assert_eq!(reads, 320);
    assert!((10..=11).contains(&upstream_reads), "{upstream_reads} upstream reads for {reads} reads");
}

#[tokio::test]
async fn availability_pages_list_the_upstreams_claims_and_ours_in_one_calendar_order_each_once() {
    let upstream = MockUpstream::start().await;
    let app = app_with(&upstream, None).await;
    let seat = seat(&app).await;
    let at = |h: i64| acceptance::day() + Duration::hours(h);
    // The upstream's own claims at 9, 11 and 13 (the one at 13 reported twice); ours at
    // 10 and 12.
    let foreign = vec![(at(9), at(10)), (at(11), at(12)), (at(13), at(14)), (at(13), at(14))];
    upstream.with(|s| s.foreign.insert("seat-42".into(), foreign));
    app.hold("alice", seat, 10, 11).await;
    app.hold("bob", seat, 12, 13).await;
    let (from, to) = hours(9, 14);
    let read = |cursor: Option<String>| {
        let mut query = vec![("from", from.clone()), ("to", to.clone()), ("limit", "1".to_string())];
        query.extend(cursor.map(|c| ("cursor", c)));
        send(app.get("reader", &format!("/v1/resources/{seat}/availability")).query(&query))
    };
    let mut listed = Vec::new();
    let mut cursor = None;
    loop {
        let (status, page) = read(cursor).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(page["taken"].as_array().unwrap().len(), 1, "{page}");
        let t = &page["taken"][0];
        listed.push((t["start"].as_str().unwrap().to_string(), t["status"].as_str().unwrap().to_string()));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let claim = |h: i64, status: &str| (acceptance::rfc3339(at(h)), status.to_string());
    assert_eq!(
        listed,
        [claim(9, "EXTERNAL"), claim(10, "HELD"), claim(11, "EXTERNAL"), claim(12, "HELD"), claim(13, "EXTERNAL")]
    );
}

#[tokio::test]
async fn the_dev_servers_in_process_queue_runs_the_same_worker_to_the_end() {
    let upstream = MockUpstream::start().await;
    let mut app = app_with(&upstream, None).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    app.state = app.state.clone().with_intents(shared::outbox::Queue::Channel(tx.clone()));
    let worker = tokio::spawn(dev_server::run_intent_worker(app.state.clone(), rx, tx));
    let seat = seat(&app).await;
    // Calls the reserve handler directly with the queue-carrying state.
    let (s, e) = hours(10, 11);
    let req = acceptance::lambda_request(
        "POST",
        "/v1/reservations",
        Some("alice"),
        Some(&json!({"resource_id": seat, "start": s, "end": e, "confirm": true})),
    );
    let resp = reserve::handler(&app.state, req).await.unwrap();
    assert_eq!(resp.status(), 202);
    let r: Value = serde_json::from_slice(resp.body().as_ref()).unwrap();
    let mut status = Value::Null;
    for _ in 0..200 {
        status = app.reservation("alice", &r["id"]).await["status"].clone();
        if status == "CONFIRMED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(status, "CONFIRMED");
    worker.abort();
}

/// Cancels alice's confirmed booking through the API.
async fn cancel(app: &TestApp, r: &Value) {
    let (status, cancelled) =
        send(app.delete("alice", &format!("/v1/reservations/{}", r["id"].as_str().unwrap()))).await;
    assert_eq!((status, cancelled["status"].as_str()), (StatusCode::OK, Some("CANCELLED")), "{cancelled}");
}

#[tokio::test]
async fn cancelling_a_confirmed_booking_deletes_its_charge_upstream_and_the_seat_can_be_booked_again() {
    let upstream = MockUpstream::start().await;
    let app = app_with(&upstream, None).await;
    let r = book_and_work(&app, 10, 11).await;
    assert_eq!(upstream.with(|s| s.charges.len()), 1);
    cancel(&app, &r).await;
    let messages = app.take_intent_messages().await;
    assert_eq!(messages.len(), 1, "one cancel intent, queued by the cancel itself");
    let response = invoke_worker(&app.state, messages.iter().map(sqs_record).collect()).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(upstream.with(|s| (s.deletes, s.charges.len())), (1, 0));
    // The reservation still shows its booking's intent, not the cancel.
    assert_eq!(app.reservation("alice", &r["id"]).await["intent"]["state"], "SUCCEEDED");
    // A redelivered cancel message sends nothing more.
    invoke_worker(&app.state, messages.iter().map(sqs_record).collect()).await;
    assert_eq!(upstream.with(|s| s.deletes), 1);

    let seat = Uuid::parse_str(r["resource_id"].as_str().unwrap()).unwrap();
    let (status, b) = book(&app, "bob", seat, 10, 11).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let messages = app.take_intent_messages().await;
    invoke_worker(&app.state, messages.iter().map(sqs_record).collect()).await;
    assert_eq!(
        send(app.get("bob", &format!("/v1/reservations/{}", b["id"].as_str().unwrap()))).await.1["status"],
        "CONFIRMED"
    );
    assert_eq!(upstream.with(|s| s.posts), 2);
}

/// Alice's confirmed booking, cancelled: the app on a clock the test moves, and the
/// message of the cancel intent, not yet processed.
async fn cancelled_booking(upstream: &MockUpstream) -> (TestApp, Arc<ManualClock>, shared::outbox::Envelope) {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = app_with(upstream, Some(clock.clone())).await;
    let r = book_and_work(&app, 10, 11).await;
    cancel(&app, &r).await;
    let message = app.take_intent_messages().await.pop().unwrap();
    (app, clock, message)
}

#[tokio::test]
async fn a_cancel_that_meets_an_upstream_outage_is_sent_again_until_it_lands() {
    let upstream = MockUpstream::start().await;
    let (app, clock, message) = cancelled_booking(&upstream).await;
    upstream.with(|s| s.down = true);
    let response = invoke_worker(&app.state, vec![sqs_record(&message)]).await;
    assert_eq!(response.batch_item_failures.len(), 1, "SQS must deliver it again");
    assert_eq!(upstream.with(|s| (s.deletes, s.charges.len())), (1, 1));

    // The DELETE is idempotent, so unlike a POST it is simply sent again once due.
    upstream.with(|s| s.down = false);
    clock.advance(Duration::seconds(5));
    let response = invoke_worker(&app.state, vec![sqs_record(&message)]).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(upstream.with(|s| (s.deletes, s.charges.len())), (2, 0));
}

#[tokio::test]
async fn a_cancel_whose_worker_died_is_sent_again_by_the_reaper() {
    let upstream = MockUpstream::start().await;
    let (app, clock, message) = cancelled_booking(&upstream).await;
    let intent_id = shared::outbox::IntentMessage::from_envelope(&message).unwrap().intent_id;
    // Claimed, then its worker vanished before calling the upstream.
    let claimed = shared::intents::claim(&app.state, intent_id).await.unwrap();
    assert!(matches!(claimed, ClaimOutcome::Claimed(_)), "{claimed:?}");
    clock.advance(app.state.config.upstream.intent_lease + Duration::seconds(1));
    let report = sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default()).await;
    assert_eq!(report.reaper.as_ref().map(|r| (r.reaped, r.settled)), Some((1, 1)), "{report:?}");
    assert_eq!(upstream.with(|s| (s.deletes, s.charges.len(), s.charge_reads)), (1, 0, 0));
}

#[tokio::test]
async fn a_new_booking_of_the_seat_waits_for_the_earlier_cancel_before_writing_upstream() {
    let upstream = MockUpstream::start().await;
    let app = app_with(&upstream, None).await;
    let r = book_and_work(&app, 10, 11).await;
    cancel(&app, &r).await;
    let cancel_message = app.take_intent_messages().await.pop().unwrap();
    let seat = Uuid::parse_str(r["resource_id"].as_str().unwrap()).unwrap();
    let (status, b) = book(&app, "bob", seat, 10, 11).await;
    assert_eq!(status, StatusCode::ACCEPTED, "locally the capacity was freed by the cancel");
    let booking_message = app.take_intent_messages().await.pop().unwrap();

    // Bob's message arrives first: his POST would meet alice's charge, so it waits.
    let response = invoke_worker(&app.state, vec![sqs_record(&booking_message)]).await;
    assert_eq!(response.batch_item_failures.len(), 1);
    assert_eq!(upstream.with(|s| s.posts), 1);
    invoke_worker(&app.state, vec![sqs_record(&cancel_message)]).await;
    let response = invoke_worker(&app.state, vec![sqs_record(&booking_message)]).await;
    assert!(response.batch_item_failures.is_empty());
    let b = send(app.get("bob", &format!("/v1/reservations/{}", b["id"].as_str().unwrap()))).await.1;
    assert_eq!((b["status"].as_str(), b["intent"]["state"].as_str()), (Some("CONFIRMED"), Some("SUCCEEDED")));
    assert_eq!(upstream.with(|s| (s.posts, s.deletes)), (2, 1));
}

#[tokio::test]
async fn a_cancel_whose_message_was_lost_is_queued_again_by_the_sweeper() {
    let upstream = MockUpstream::start().await;
    let (app, clock, _lost) = cancelled_booking(&upstream).await;
    let sweep = || sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default());
    // Not yet: a message may still be on its way.
    assert_eq!(sweep().await.intents_requeued, Some(0));
    assert!(app.take_intent_messages().await.is_empty());

    clock.advance(app.state.config.upstream.intent_requeue_after + Duration::seconds(1));
    assert_eq!(sweep().await.intents_requeued, Some(1));
    // This app has no intents queue, so the sweep's own relay failed and backed off.
    clock.advance(Duration::seconds(2));
    let messages = app.take_intent_messages().await;
    assert_eq!(messages.len(), 1, "one new message for the stale cancel");
    let response = invoke_worker(&app.state, messages.iter().map(sqs_record).collect()).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(upstream.with(|s| (s.deletes, s.charges.len())), (1, 0));
    // Settled intents are never queued again.
    clock.advance(app.state.config.upstream.intent_requeue_after + Duration::seconds(1));
    assert_eq!(sweep().await.intents_requeued, Some(0));
}
