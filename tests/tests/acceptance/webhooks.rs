//! Webhooks: endpoints registered through the admin routes, and the notifier's handler
//! delivering events to real HTTP receivers on this machine, driven with the SQS
//! messages the events queue would hand it; signatures checked with the reference
//! implementation of Standard Webhooks; the delivery log, resends and disabling.

use acceptance::{TestApp, hours, python_json, reservation_path, send, slug};
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use chrono::Utc;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use notifier::Notifier;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::ManualClock;
use shared::notify::{Sender, verify};
use shared::outbox::{Envelope, Queue};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Seen {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
}

impl Seen {
    fn event(&self) -> Value {
        serde_json::from_str(&self.body).expect("the body is the event's JSON")
    }

    /// Whether `secret` verifies this request at `now`, as [`shared::notify::verify`] does.
    fn verifies(&self, secret: &str, now: chrono::DateTime<Utc>) -> bool {
        verify(secret, &self.id, &self.timestamp, &self.signature, self.body.as_bytes(), now, 300)
    }
}

/// What a receiver answers to its n-th request (from 0) carrying this event: a status,
/// and how long it waits first.
type Answer = dyn Fn(usize, &Value) -> (u16, Duration) + Send + Sync;

/// A webhook receiver: a hyper server on 127.0.0.1 that records every request.
struct Receiver {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    async fn answering(answer: impl Fn(usize, &Value) -> (u16, Duration) + Send + Sync + 'static) -> Receiver {
        let answer: Arc<Answer> = Arc::new(answer);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let (answer_, seen_) = (answer.clone(), seen.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (answer, seen) = (answer_.clone(), seen_.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let (answer, seen) = (answer.clone(), seen.clone());
                        async move {
                            let header = |name: &str| {
                                req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
                            };
                            let (id, timestamp, signature) =
                                (header("webhook-id"), header("webhook-timestamp"), header("webhook-signature"));
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let body = String::from_utf8(body.to_vec()).unwrap();
                            let n = {
                                let mut seen = seen.lock().unwrap();
                                seen.push(Seen { id, timestamp, signature, body: body.clone() });
                                seen.len() - 1
                            };
                            let (status, wait) = answer(n, &serde_json::from_str(&body).unwrap_or(Value::Null));
                            tokio::time::sleep(wait).await;
                            let response =
                                hyper::Response::builder().status(status).body(Full::new(Bytes::new())).unwrap();
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Receiver { url, seen, task }
    }

    /// A receiver that accepts everything at once.
    async fn accepting() -> Receiver {
        Receiver::answering(|_, _| (200, Duration::ZERO)).await
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Registers an endpoint as the admin; the 201's body (with the secret).
async fn register(app: &TestApp, url: &str, types: &[&str], resource: Option<Uuid>) -> Value {
    let (status, body) =
        send(app.post("admin", "/v1/webhooks", &json!({"url": url, "event_types": types, "resource_id": resource})))
            .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

/// The events waiting in the outbox, taken out as the relay sends them.
async fn take_events(app: &TestApp) -> Vec<Envelope> {
    app.take_messages(shared::outbox::Topic::Events).await
}

/// The SQS message of an event on the FIFO events queue.
fn message(e: &Envelope) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(format!("msg-{}", e.id));
    m.body = Some(serde_json::to_string(e).unwrap());
    m.attributes.insert("MessageGroupId".into(), e.subject_id.to_string());
    m
}

fn notifier(app: &TestApp, timeout: Duration) -> Notifier {
    Notifier { state: app.state.clone(), sender: Sender::new(timeout), queue: None }
}

async fn handle(notifier: &Notifier, messages: Vec<SqsMessage>) -> Vec<String> {
    let mut event = SqsEvent::default();
    event.records = messages;
    let response: SqsBatchResponse =
        notifier::handler(notifier, lambda_runtime::LambdaEvent::new(event, Default::default())).await.unwrap();
    response.batch_item_failures.into_iter().map(|f| f.item_identifier).collect()
}

async fn deliveries_of(app: &TestApp, event: Uuid) -> i64 {
    let client = app.db().await;
    client.query_one("SELECT count(*) FROM webhook_deliveries WHERE event_id = $1", &[&event]).await.unwrap().get(0)
}

/// A hold on a new resource; its `reservation.held` event.
async fn held_event(app: &TestApp, resource: Uuid) -> Envelope {
    app.hold("alice", resource, 10, 11).await;
    let events = take_events(app).await;
    assert_eq!(events.len(), 1);
    events.into_iter().next().unwrap()
}

#[tokio::test]
async fn an_event_arrives_signed_with_the_secret_the_endpoint_was_given() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(1).await;
    let secret =
        register(&app, &receiver.url, &["reservation.held"], None).await["secret"].as_str().unwrap().to_string();
    let event = held_event(&app, resource).await;

    let failures = handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), vec![message(&event)]).await;

    assert!(failures.is_empty(), "{failures:?}");
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1);
    let now = app.state.clock.now();
    assert!(seen[0].verifies(&secret, now), "{}", seen[0].signature);
    assert!(!seen[0].verifies(&shared::domain::webhooks::SigningSecret::generate().text(), now));
    assert_eq!(seen[0].id, event.id.to_string());
    let body = seen[0].event();
    assert_eq!((body["id"].as_str(), body["type"].as_str()), (Some(&*event.id.to_string()), Some("reservation.held")));
    assert_eq!(body["data"]["resource_id"], json!(resource));
    assert_eq!(deliveries_of(&app, event.id).await, 1);
}

#[tokio::test]
async fn a_refused_event_is_retried_until_accepted_and_never_sent_again_to_an_endpoint_that_took_it() {
    let app = TestApp::spawn().await;
    let flaky = Receiver::answering(|n, _| (if n < 2 { 500 } else { 200 }, Duration::ZERO)).await;
    let steady = Receiver::accepting().await;
    let resource = app.resource(1).await;
    register(&app, &flaky.url, &["reservation.held"], None).await;
    register(&app, &steady.url, &["reservation.held"], Some(resource)).await;
    let event = held_event(&app, resource).await;
    let notifier = notifier(&app, Sender::DEFAULT_TIMEOUT);
    let msg = message(&event);

    // SQS delivers the message again for as long as the handler reports it failed.
    assert_eq!(handle(&notifier, vec![msg.clone()]).await, [msg.message_id.clone().unwrap()]);
    assert_eq!(handle(&notifier, vec![msg.clone()]).await, [msg.message_id.clone().unwrap()]);
    assert!(handle(&notifier, vec![msg.clone()]).await.is_empty());
    // A duplicate after success calls nobody.
    assert!(handle(&notifier, vec![msg.clone()]).await.is_empty());

    assert_eq!(flaky.seen().len(), 3);
    assert_eq!(steady.seen().len(), 1, "the endpoint that accepted at once is not called again");
    assert!(flaky.seen().iter().all(|s| s.id == event.id.to_string() && s.body == flaky.seen()[0].body));
    assert_eq!(deliveries_of(&app, event.id).await, 2);
}

#[tokio::test]
async fn an_event_sent_twice_carries_the_same_id_both_times() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(1).await;
    register(&app, &receiver.url, &["reservation.held"], None).await;
    let event = held_event(&app, resource).await;
    let notifier = notifier(&app, Sender::DEFAULT_TIMEOUT);
    assert!(handle(&notifier, vec![message(&event)]).await.is_empty());
    // The at-least-once window: the receiver accepted, but the record of it was lost
    // (the function died between the 2xx and the insert).
    let client = app.db().await;
    client.execute("DELETE FROM webhook_deliveries WHERE event_id = $1", &[&event.id]).await.unwrap();

    assert!(handle(&notifier, vec![message(&event)]).await.is_empty());

    let seen = receiver.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].id.as_str(), seen[1].id.as_str()), (&*event.id.to_string(), &*event.id.to_string()));
    assert_eq!(seen[0].event()["id"], seen[1].event()["id"]);
}

#[tokio::test]
async fn only_endpoints_that_asked_for_the_events_type_and_resource_get_it() {
    let app = TestApp::spawn().await;
    let (other_type, other_resource, this_resource, every_resource) = (
        Receiver::accepting().await,
        Receiver::accepting().await,
        Receiver::accepting().await,
        Receiver::accepting().await,
    );
    let resource = app.resource(1).await;
    let elsewhere = app.resource(1).await;
    register(&app, &other_type.url, &["reservation.confirmed", "waitlist.offered"], None).await;
    register(&app, &other_resource.url, &["reservation.held"], Some(elsewhere)).await;
    register(&app, &this_resource.url, &["reservation.held"], Some(resource)).await;
    register(&app, &every_resource.url, &["reservation.released", "reservation.held"], None).await;
    let event = held_event(&app, resource).await;

    assert!(handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), vec![message(&event)]).await.is_empty());

    assert_eq!(other_type.seen().len(), 0, "an unregistered type is not sent");
    assert_eq!(other_resource.seen().len(), 0, "an endpoint for another resource is not called");
    assert_eq!(this_resource.seen().len(), 1);
    assert_eq!(every_resource.seen().len(), 1);
}

#[tokio::test]
async fn a_deleted_endpoint_gets_nothing_more() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(1).await;
    let id = register(&app, &receiver.url, &["reservation.held"], None).await["id"].as_str().unwrap().to_string();
    let (status, _) = send(app.delete("admin", &format!("/v1/webhooks/{id}"))).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let event = held_event(&app, resource).await;

    assert!(handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), vec![message(&event)]).await.is_empty());

    assert_eq!(receiver.seen().len(), 0);
}

#[tokio::test]
async fn a_receiver_slower_than_the_timeout_does_not_keep_the_event_from_a_fast_one() {
    let app = TestApp::spawn().await;
    let slow = Receiver::answering(|_, _| (200, Duration::from_secs(30))).await;
    let fast = Receiver::accepting().await;
    let resource = app.resource(1).await;
    let slow_id = register(&app, &slow.url, &["reservation.held"], None).await["id"].as_str().unwrap().to_string();
    let fast_id = register(&app, &fast.url, &["reservation.held"], None).await["id"].as_str().unwrap().to_string();
    let event = held_event(&app, resource).await;

    // The slow receiver's answer would come long after this timeout.
    let failures = handle(&notifier(&app, Duration::from_millis(300)), vec![message(&event)]).await;

    assert_eq!(failures.len(), 1, "the message waits for the slow endpoint's retry");
    assert_eq!(fast.seen().len(), 1);
    let client = app.db().await;
    let delivered: Vec<Uuid> = client
        .query("SELECT endpoint_id FROM webhook_deliveries WHERE event_id = $1", &[&event.id])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(delivered, [fast_id.parse::<Uuid>().unwrap()]);
    assert_ne!(slow_id, fast_id);
}

#[tokio::test]
async fn when_a_reservations_event_fails_its_later_events_in_the_batch_wait_and_others_go_on() {
    let app = TestApp::spawn().await;
    let resource = app.resource(2).await;
    // The receiver refuses alice's hold and takes everything else.
    let receiver = Receiver::answering(|_, event| {
        let refuse = event["type"] == "reservation.held" && event["data"]["owner"] == "alice";
        (if refuse { 500 } else { 200 }, Duration::ZERO)
    })
    .await;
    register(&app, &receiver.url, &["reservation.held", "reservation.confirmed"], None).await;
    let first = app.hold("alice", resource, 10, 11).await;
    let (status, _) = app.confirm("alice", &first["id"]).await;
    assert_eq!(status, StatusCode::OK);
    let second = app.hold("bob", resource, 12, 13).await;
    let first_id = first["id"].as_str().unwrap().to_string();
    let mut events = take_events(&app).await;
    // The relay keeps each subject's order, not the order across subjects (it sends a
    // subject's events one per batch); the notifier gets them as the queue would.
    events.sort_by_key(|e| e.occurred_at);
    let kinds: Vec<(String, String)> = events.iter().map(|e| (e.kind.to_string(), e.subject_id.to_string())).collect();
    assert_eq!(
        kinds,
        [
            ("reservation.held".to_string(), first_id.clone()),
            ("reservation.confirmed".to_string(), first_id.clone()),
            ("reservation.held".to_string(), second["id"].as_str().unwrap().to_string()),
        ]
    );

    let failures = handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), events.iter().map(message).collect()).await;

    assert_eq!(failures, [message(&events[0]).message_id.unwrap(), message(&events[1]).message_id.unwrap()]);
    let seen: Vec<(String, String)> = receiver
        .seen()
        .iter()
        .map(|s| {
            (s.event()["type"].as_str().unwrap().to_string(), s.event()["subject_id"].as_str().unwrap().to_string())
        })
        .collect();
    assert!(!seen.iter().any(|(kind, _)| kind == "reservation.confirmed"), "no confirm before its hold: {seen:?}");
    assert!(seen.contains(&("reservation.held".to_string(), second["id"].as_str().unwrap().to_string())));
}

#[tokio::test]
async fn an_unreadable_message_is_left_for_the_dead_letter_queue() {
    let app = TestApp::spawn().await;
    let mut m = SqsMessage::default();
    m.message_id = Some("garbage".into());
    m.body = Some("not an event".into());
    assert_eq!(handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), vec![m]).await, ["garbage"]);
}

#[tokio::test]
async fn webhook_routes_are_for_admins_and_never_show_the_secret_again() {
    let app = TestApp::spawn().await;
    let body = json!({"url": "https://hooks.example.com/r", "event_types": ["reservation.held"]});
    let (status, problem) = send(app.post("alice", "/v1/webhooks", &body)).await;
    assert_eq!((status, problem["type"].as_str()), (StatusCode::FORBIDDEN, Some("/v1/problems/forbidden")));
    for path in ["/v1/webhooks", &format!("/v1/webhooks/{}", Uuid::now_v7())] {
        assert_eq!(send(app.get("alice", path)).await.0, StatusCode::FORBIDDEN, "{path}");
    }
    assert_eq!(send(app.delete("alice", &format!("/v1/webhooks/{}", Uuid::now_v7()))).await.0, StatusCode::FORBIDDEN);

    let resp = app.post("admin", "/v1/webhooks", &body).header("idempotency-key", "w1").send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let location = resp.headers()["location"].to_str().unwrap().to_string();
    let created: Value = resp.json().await.unwrap();
    let secret = created["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_") && secret.len() >= 32, "{secret}");
    assert_eq!(location, format!("/v1/webhooks/{}", created["id"].as_str().unwrap()));
    assert_eq!(created["resource_id"], Value::Null);

    let (status, one) = send(app.get("admin", &location)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one["url"], "https://hooks.example.com/r");
    assert!(one.get("secret").is_none(), "{one}");
    let (status, list) = send(app.get("admin", "/v1/webhooks")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert!(list["items"][0].get("secret").is_none(), "{list}");
    assert!(!list.to_string().contains(secret));

    assert_eq!(send(app.delete("admin", &location)).await.0, StatusCode::NO_CONTENT);
    let (status, problem) = send(app.get("admin", &location)).await;
    assert_eq!((status, problem["type"].as_str()), (StatusCode::NOT_FOUND, Some("/v1/problems/webhook-not-found")));
    assert_eq!(send(app.delete("admin", &location)).await.0, StatusCode::NOT_FOUND);
    assert_eq!(send(app.get("admin", "/v1/webhooks")).await.1["items"], json!([]));
}

#[tokio::test]
async fn a_bad_endpoint_is_a_validation_error_naming_every_bad_field() {
    let app = TestApp::spawn().await;
    let fields_of = |problem: &Value| -> Vec<String> {
        problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap().to_string()).collect()
    };
    for (body, fields) in [
        (json!({"url": "http://hooks.example.com/r", "event_types": ["reservation.held"]}), vec!["url"]),
        (json!({"url": "ftp://x/", "event_types": ["nope", "reservation.held"]}), vec!["url", "event_types[0]"]),
        (json!({"url": "https://x.example/", "event_types": []}), vec!["event_types"]),
        (json!({"url": "https://x.example/", "event_types": ["intent.requested"]}), vec!["event_types[0]"]),
        (json!({"url": "https://x.example/", "event_types": "reservation.held"}), vec!["event_types"]),
        (
            json!({"url": "https://x.example/", "event_types": ["reservation.held"], "resource_id": Uuid::now_v7()}),
            vec!["resource_id"],
        ),
        (json!({"event_types": ["reservation.held"], "secret": "mine"}), vec!["url", "secret"]),
    ] {
        let (status, problem) = send(app.post("admin", "/v1/webhooks", &body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {problem}");
        assert_eq!(problem["type"], "/v1/problems/validation-error");
        let mut got = fields_of(&problem);
        got.sort();
        let mut want: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        want.sort();
        assert_eq!(got, want, "{body}: {problem}");
    }
}

#[tokio::test]
async fn the_event_types_an_endpoint_may_ask_for_are_the_ones_the_outbox_writes() {
    let app = TestApp::spawn().await;
    let client = app.db().await;
    let check: String = client
        .query_one("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'outbox_kind_known'", &[])
        .await
        .unwrap()
        .get(0);
    // `kind = ANY ('{reservation.held,...}'::text[])` : the list inside the braces.
    let list = check.split_once("'{").and_then(|(_, rest)| rest.split_once("}'")).map(|(list, _)| list);
    let list = list.unwrap_or_else(|| panic!("no array constant in {check}"));
    let mut written: Vec<&str> = list.split(',').filter(|kind| *kind != "intent.requested").collect();
    written.sort();
    let mut known = shared::domain::webhooks::EVENT_TYPES.to_vec();
    known.sort();
    assert_eq!(written, known, "{check}");
}

#[tokio::test]
async fn the_notifier_reads_the_events_queues_batch_fixture_as_lambda_hands_it_over() {
    let app = TestApp::spawn().await;
    let raw = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/events/sqs_events_batch.json")).unwrap();
    let event: SqsEvent = serde_json::from_str(&raw).expect("an SQS event as Lambda sends it");
    assert_eq!(
        event.records[0].attributes.get("MessageGroupId").map(String::as_str),
        Some("00000000-0000-0000-0000-000000000002")
    );

    // No endpoint wants the event, so it is done; the second message is no event.
    let failures = handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), event.records.clone()).await;

    assert_eq!(failures, [event.records[1].message_id.clone().unwrap()]);
}

#[tokio::test]
async fn the_sweep_forgets_deliveries_only_once_the_queue_can_no_longer_deliver_the_event_again() {
    let clock = Arc::new(shared::clock::ManualClock::new(chrono::Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(1).await;
    register(&app, &receiver.url, &["reservation.held"], None).await;
    let event = held_event(&app, resource).await;
    assert!(handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), vec![message(&event)]).await.is_empty());
    let sweep = || sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default());

    // The events queue keeps a message 4 days; the record outlives that.
    clock.advance(chrono::Duration::days(6));
    assert_eq!(sweep().await.webhook_deliveries_purged, Some(0));
    assert_eq!(deliveries_of(&app, event.id).await, 1);
    clock.advance(chrono::Duration::days(2));
    assert_eq!(sweep().await.webhook_deliveries_purged, Some(1));
    assert_eq!(deliveries_of(&app, event.id).await, 0);
}

#[tokio::test]
async fn the_dev_servers_in_process_notifier_delivers_what_the_relay_publishes() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(1).await;
    register(&app, &receiver.url, &["reservation.held"], None).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let loop_task = tokio::spawn(dev_server::run_notifier(Arc::new(notifier(&app, Sender::DEFAULT_TIMEOUT)), rx));
    let reservation = app.hold("alice", resource, 10, 11).await;

    let sweep = sweeper::sweep(&app.state, &shared::outbox::Queue::Channel(tx), Default::default()).await;

    assert_eq!(sweep.events.map(|r| r.published), Some(1));
    // The loop runs on its own task: wait for the receiver to have the event.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while receiver.seen().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    loop_task.abort();
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].event()["subject_id"], reservation["id"]);
}

/// The in-process notifier looks once per batch whether any endpoint is registered: a
/// batch that finds none is passed over, and an endpoint registered afterwards still
/// gets every event written after it.
#[tokio::test]
async fn the_dev_servers_notifier_passes_over_events_no_endpoint_wants_and_delivers_those_after_one_is_registered() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(1).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let loop_task = tokio::spawn(dev_server::run_notifier(Arc::new(notifier(&app, Sender::DEFAULT_TIMEOUT)), rx));
    let queue = shared::outbox::Queue::Channel(tx);
    app.hold("alice", resource, 8, 9).await;
    let first = sweeper::sweep(&app.state, &queue, Default::default()).await;
    assert_eq!(first.events.map(|r| r.published), Some(1), "published to a notifier with no endpoint");

    register(&app, &receiver.url, &["reservation.held"], None).await;
    let later = app.hold("bob", resource, 10, 11).await;
    let second = sweeper::sweep(&app.state, &queue, Default::default()).await;
    assert_eq!(second.events.map(|r| r.published), Some(1));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while receiver.seen().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    loop_task.abort();
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1, "the event written after the endpoint, and only it");
    assert_eq!(seen[0].event()["subject_id"], later["id"]);
}

/// In the dev server no sweep is needed: each request that writes events wakes the
/// server's relay after its commit, and the one relay keeps each reservation's events
/// in the order they were written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dev_servers_relay_sends_each_event_right_after_the_request_that_wrote_it_in_order() {
    let wake = Arc::new(tokio::sync::Notify::new());
    let events = shared::outbox::EventsRelay::Background(wake.clone());
    let app = TestApp::spawn_with(acceptance::Options { events, ..Default::default() }).await;
    let receiver = Receiver::accepting().await;
    register(&app, &receiver.url, &["reservation.held", "reservation.confirmed", "reservation.rescheduled"], None)
        .await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let notifier = tokio::spawn(dev_server::run_notifier(Arc::new(notifier(&app, Sender::DEFAULT_TIMEOUT)), rx));
    let relay = tokio::spawn(shared::outbox::run_events_relay(app.state.clone(), Queue::Channel(tx), wake));

    let rooms: Vec<Uuid> = futures::future::join_all((0..10).map(|_| app.resource(1))).await;
    let each = rooms.iter().enumerate().map(|(i, room)| {
        let app = &app;
        async move {
            let r = app.hold(&format!("u{i}"), *room, 10, 11).await;
            assert_eq!(app.confirm(&format!("u{i}"), &r["id"]).await.0, StatusCode::OK);
            let (start, end) = hours(12, 13);
            let moved =
                send(app.patch(&format!("u{i}"), &reservation_path(&r["id"]), &json!({"start": start, "end": end})));
            assert_eq!(moved.await.0, StatusCode::OK);
            r["id"].as_str().unwrap().to_string()
        }
    });
    let ids = futures::future::join_all(each).await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while receiver.seen().len() < 30 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    notifier.abort();
    relay.abort();
    let seen: Vec<Value> = receiver.seen().iter().map(Seen::event).collect();
    assert_eq!(seen.len(), 30, "every event delivered with no sweep");
    for id in ids {
        let kinds: Vec<&str> =
            seen.iter().filter(|e| e["subject_id"] == id.as_str()).map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["reservation.held", "reservation.confirmed", "reservation.rescheduled"], "{id}");
    }
}

#[tokio::test]
async fn a_refused_message_is_hidden_on_the_events_queue_for_its_backoff_instead_of_coming_straight_back() {
    let app = TestApp::spawn().await;
    let down = Receiver::answering(|_, _| (503, Duration::ZERO)).await;
    let resource = app.resource(1).await;
    register(&app, &down.url, &["reservation.held"], None).await;
    let event = held_event(&app, resource).await;
    // A queue that would hand a failed message back at once: only the notifier's own
    // backoff keeps it away.
    let moto = acceptance::Moto::start().await;
    let sqs = moto.sqs().await;
    let url = sqs.create_queue("events.fifo", &[("FifoQueue", "true"), ("VisibilityTimeout", "0")]).await.unwrap();
    shared::outbox::Publisher::publish(
        &shared::outbox::SqsPublisher::new(sqs.clone(), url.clone()),
        std::slice::from_ref(&event),
    )
    .await
    .into_iter()
    .for_each(|sent| sent.unwrap());
    let receive = || async { sqs.receive_message(&url, 10, 0).await.unwrap() };
    let received = receive().await;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].attributes.get("ApproximateReceiveCount").map(String::as_str), Some("1"));
    let mut msg = message(&event);
    msg.message_id = Some(received[0].message_id.clone());
    msg.receipt_handle = Some(received[0].receipt_handle.clone());
    msg.attributes.insert("ApproximateReceiveCount".into(), "1".into());
    let notifier = Notifier {
        queue: Some(notifier::EventsQueue { sqs: sqs.clone(), url: url.clone() }),
        ..notifier(&app, Sender::DEFAULT_TIMEOUT)
    };

    let failures = handle(&notifier, vec![msg]).await;

    assert_eq!(failures, [received[0].message_id.clone()], "the refused message is a failure");
    assert_eq!(down.seen().len(), 1);
    assert!(
        receive().await.is_empty(),
        "hidden for {} s after its first try, not handed back at once",
        shared::notify::RETRY_SCHEDULE[0].num_seconds()
    );
}

/// A rotation answers a new secret once; the old one signs beside it (a second `v1`)
/// until it expires, so a receiver that still knows only the old one accepts the
/// deliveries in between, and after that only the new one verifies.
#[tokio::test]
async fn a_rotated_secret_signs_beside_the_new_one_until_it_expires() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(5).await;
    let endpoint = register(&app, &receiver.url, &["reservation.held"], None).await;
    let old = endpoint["secret"].as_str().unwrap().to_string();
    let path = format!("/v1/webhooks/{}/rotate-secret", endpoint["id"].as_str().unwrap());
    assert_eq!(send(app.post("alice", &path, &json!({}))).await.0, StatusCode::FORBIDDEN);
    let (status, problem) = send(app.post("admin", &path, &json!({"keep_previous_seconds": 604801}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::BAD_REQUEST, "validation-error"));
    let unknown = format!("/v1/webhooks/{}/rotate-secret", Uuid::now_v7());
    let (status, problem) = send(app.post("admin", &unknown, &json!({}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "webhook-not-found"));

    let rotated_at = app.state.clock.now();
    let (status, rotated) = send(app.post("admin", &path, &json!({"keep_previous_seconds": 3600}))).await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let new = rotated["secret"].as_str().unwrap().to_string();
    assert!(new.starts_with("whsec_") && new != old, "{rotated}");
    let until: chrono::DateTime<Utc> = rotated["previous_secret_expires_at"].as_str().unwrap().parse().unwrap();
    let off = until - (rotated_at + chrono::Duration::seconds(3600));
    assert!(off.num_microseconds().unwrap().abs() <= 1, "an hour from the rotation, as stored: {until}");
    let (_, one) = send(app.get("admin", &format!("/v1/webhooks/{}", endpoint["id"].as_str().unwrap()))).await;
    assert!(!one.to_string().contains(&new), "the new secret is shown once: {one}");

    let deliver_one = async |who: &str, from: i64| {
        app.hold(who, resource, from, from + 1).await;
        let events = take_events(&app).await;
        assert!(
            handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), events.iter().map(message).collect()).await.is_empty()
        );
        let seen = receiver.seen();
        seen.last().cloned().unwrap()
    };
    let during = deliver_one("alice", 10).await;
    let now = app.state.clock.now();
    for (secret, name) in [(&new, "new"), (&old, "old")] {
        assert!(during.verifies(secret, now), "{name}: {}", during.signature);
    }

    clock.advance(chrono::Duration::seconds(3601));
    let after = deliver_one("bob", 12).await;
    let now = app.state.clock.now();
    assert!(after.verifies(&new, now), "{}", after.signature);
    assert!(!after.verifies(&old, now), "the old secret has expired");

    // Rotating with no overlap stops the current secret at once.
    let (status, again) = send(app.post("admin", &path, &json!({"keep_previous_seconds": 0}))).await;
    assert_eq!((status, &again["previous_secret_expires_at"]), (StatusCode::OK, &Value::Null));
    let last = deliver_one("carol", 14).await;
    let newest = again["secret"].as_str().unwrap();
    let now = app.state.clock.now();
    assert!(last.verifies(newest, now));
    assert!(!last.verifies(&new, now));
}

/// Runs the reference implementation of Standard Webhooks (the `standardwebhooks`
/// package from PyPI, which scripts/test installs) on each `(secret, request, body)`:
/// whether it accepts the request, at the machine's time, with its own 5-minute
/// tolerance.
fn reference_verifies(cases: &[(&str, &Seen, &str)]) -> Vec<bool> {
    const SCRIPT: &str = r#"
import json, sys
from standardwebhooks.webhooks import Webhook
out = []
for case in json.load(sys.stdin):
    try:
        Webhook(case["secret"]).verify(case["body"], case["headers"])
        out.append(True)
    except Exception:
        out.append(False)
print(json.dumps(out))
"#;
    let input: Vec<Value> = cases
        .iter()
        .map(|(secret, seen, body)| {
            json!({"secret": secret, "body": body, "headers": {
                "webhook-id": seen.id, "webhook-timestamp": seen.timestamp, "webhook-signature": seen.signature}})
        })
        .collect();
    let verdicts =
        python_json(SCRIPT, serde_json::to_string(&input).unwrap().as_bytes(), "pip install standardwebhooks");
    serde_json::from_value(verdicts).expect("a list of verdicts")
}

#[tokio::test]
async fn real_deliveries_verify_with_the_standard_webhooks_reference_implementation_and_forgeries_do_not() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(5).await;
    let endpoint = register(&app, &receiver.url, &["reservation.held"], None).await;
    let first = endpoint["secret"].as_str().unwrap().to_string();
    let notifier = notifier(&app, Sender::DEFAULT_TIMEOUT);
    let deliver_one = async |who: &str, from: i64, signed_back: chrono::Duration| {
        app.hold(who, resource, from, from + 1).await;
        let events = take_events(&app).await;
        clock.advance(-signed_back);
        assert!(handle(&notifier, events.iter().map(message).collect()).await.is_empty());
        clock.advance(signed_back);
        receiver.seen().last().cloned().unwrap()
    };
    let plain = deliver_one("alice", 10, chrono::Duration::zero()).await;
    let path = format!("/v1/webhooks/{}/rotate-secret", endpoint["id"].as_str().unwrap());
    let (_, rotated) = send(app.post("admin", &path, &json!({"keep_previous_seconds": 3600}))).await;
    let second = rotated["secret"].as_str().unwrap().to_string();
    let both = deliver_one("bob", 11, chrono::Duration::zero()).await;
    // Signed ten minutes ago: the notifier's clock is set back, the receiver's is not.
    let stale = deliver_one("carol", 12, chrono::Duration::minutes(10)).await;

    assert_eq!(receiver.seen().len(), 3, "three events, three deliveries");
    let tampered = plain.body.replace("alice", "mallory");
    assert_ne!(tampered, plain.body);
    let verdicts = reference_verifies(&[
        (&first, &plain, &plain.body),
        (&first, &plain, &tampered),
        (&second, &plain, &plain.body),
        (&second, &both, &both.body),
        (&first, &both, &both.body),
        (&second, &stale, &stale.body),
    ]);

    assert_eq!(verdicts, [true, false, false, true, true, false], "signed, tampered, wrong secret, new, old, stale");
    assert!(first.starts_with("whsec_") && second.starts_with("whsec_"));
    assert_eq!(both.signature.split(' ').count(), 2, "{}", both.signature);
    assert!(plain.signature.starts_with("v1,"), "{}", plain.signature);
}

/// The attempts of one endpoint's log, newest first, as its owner reads them.
async fn log_of(app: &TestApp, endpoint: &Value) -> Vec<Value> {
    let path = format!("/v1/webhooks/{}/deliveries", endpoint["id"].as_str().unwrap());
    let (status, page) = send(app.get("admin", &path)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn every_attempt_is_logged_with_its_answer_and_next_try_and_the_log_pages_newest_first() {
    let app = TestApp::spawn().await;
    let flaky = Receiver::answering(|n, _| (if n == 0 { 500 } else { 200 }, Duration::ZERO)).await;
    let resource = app.resource(1).await;
    let endpoint = register(&app, &flaky.url, &["reservation.held"], None).await;
    let event = held_event(&app, resource).await;
    let notifier = notifier(&app, Sender::DEFAULT_TIMEOUT);
    let mut msg = message(&event);
    msg.attributes.insert("ApproximateReceiveCount".into(), "1".into());
    assert_eq!(handle(&notifier, vec![msg.clone()]).await.len(), 1);
    msg.attributes.insert("ApproximateReceiveCount".into(), "2".into());
    assert!(handle(&notifier, vec![msg]).await.is_empty());

    let log = log_of(&app, &endpoint).await;

    assert_eq!(log.len(), 2, "{log:?}");
    let (accepted, refused) = (&log[0], &log[1]);
    assert_eq!((accepted["attempt"].as_i64(), accepted["status_code"].as_i64()), (Some(2), Some(200)));
    assert_eq!((&accepted["error"], &accepted["next_attempt_at"]), (&Value::Null, &Value::Null));
    assert_eq!((refused["attempt"].as_i64(), refused["status_code"].as_i64()), (Some(1), Some(500)));
    assert_eq!(refused["error"], "status 500");
    assert_eq!(
        (refused["event_id"].as_str(), refused["event_type"].as_str()),
        (Some(&*event.id.to_string()), Some("reservation.held"))
    );
    assert_eq!(refused["trigger"], "queue");
    let at: chrono::DateTime<Utc> = refused["attempted_at"].as_str().unwrap().parse().unwrap();
    let next: chrono::DateTime<Utc> = refused["next_attempt_at"].as_str().unwrap().parse().unwrap();
    let wait = (next - at).num_milliseconds();
    assert!((4_500..=5_500).contains(&wait), "5 s give or take a tenth: {wait} ms");
    // Page by page, with the cursor of the page before.
    let path = format!("/v1/webhooks/{}/deliveries", endpoint["id"].as_str().unwrap());
    let (_, page) = send(app.get("admin", &format!("{path}?limit=1"))).await;
    assert_eq!(page["items"][0]["id"], accepted["id"]);
    let cursor = page["next_cursor"].as_str().unwrap();
    let (_, page) = send(app.get("admin", &format!("{path}?limit=1&cursor={cursor}"))).await;
    assert_eq!((&page["items"][0]["id"], &page["next_cursor"]), (&refused["id"], &Value::Null));
    // Not for other principals, whether or not the endpoint exists.
    assert_eq!(send(app.get("alice", &path)).await.0, StatusCode::FORBIDDEN);
    let unknown = format!("/v1/webhooks/{}/deliveries", Uuid::now_v7());
    assert_eq!(send(app.get("alice", &unknown)).await.0, StatusCode::FORBIDDEN);
    let (status, problem) = send(app.get("admin", &unknown)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "webhook-not-found"));
}

#[tokio::test]
async fn a_logged_event_is_sent_again_on_request_with_its_id_and_body_and_the_resend_is_logged() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(1).await;
    let endpoint = register(&app, &receiver.url, &["reservation.held"], None).await;
    let event = held_event(&app, resource).await;
    assert!(handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), vec![message(&event)]).await.is_empty());
    let delivery = log_of(&app, &endpoint).await[0]["id"].as_str().unwrap().to_string();
    let webhook = endpoint["id"].as_str().unwrap();

    let path = format!("/v1/webhooks/{webhook}/deliveries/{delivery}/retry");
    let (status, queued) = send(app.post("admin", &path, &json!({}))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    assert_eq!(queued["event_id"], json!(event.id));
    let report = sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default()).await;

    assert_eq!(report.webhook_resends, Some(shared::notify::ResendReport { accepted: 1, failed: 0 }));
    let seen = receiver.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!((&seen[1].id, &seen[1].body), (&seen[0].id, &seen[0].body), "the same event, byte for byte");
    assert!(seen[1].verifies(endpoint["secret"].as_str().unwrap(), app.state.clock.now()));
    let log = log_of(&app, &endpoint).await;
    assert_eq!((log[0]["attempt"].as_i64(), log[0]["trigger"].as_str()), (Some(2), Some("retry")));
    let unknown = format!("/v1/webhooks/{webhook}/deliveries/{}/retry", Uuid::now_v7());
    let (status, problem) = send(app.post("admin", &unknown, &json!({}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "webhook-delivery-not-found"));
    let elsewhere = format!("/v1/webhooks/{webhook}/deliveries/not-a-uuid/retry");
    assert_eq!(slug(&send(app.post("admin", &elsewhere, &json!({}))).await.1), "webhook-delivery-not-found");
    assert_eq!(send(app.post("alice", &path, &json!({}))).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn an_endpoint_that_answers_410_gone_is_disabled_with_an_event_and_recovered_gets_what_it_missed() {
    let app = TestApp::spawn().await;
    let back = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let back_ = back.clone();
    let receiver = Receiver::answering(move |_, _| {
        (if back_.load(std::sync::atomic::Ordering::SeqCst) { 200 } else { 410 }, Duration::ZERO)
    })
    .await;
    let watcher = Receiver::accepting().await;
    let resource = app.resource(5).await;
    let since = app.state.clock.now();
    let endpoint = register(&app, &receiver.url, &["reservation.held"], None).await;
    register(&app, &watcher.url, &["webhook.endpoint_disabled"], None).await;
    let notifier = notifier(&app, Sender::DEFAULT_TIMEOUT);
    let first = held_event(&app, resource).await;

    assert!(handle(&notifier, vec![message(&first)]).await.is_empty(), "nothing more goes to a gone endpoint");

    let (_, read) = send(app.get("admin", &format!("/v1/webhooks/{}", endpoint["id"].as_str().unwrap()))).await;
    assert_eq!(read["disabled_reason"], "gone", "{read}");
    assert!(read["disabled_at"].is_string());
    let disabled = take_events(&app).await;
    assert_eq!(disabled.len(), 1);
    assert_eq!((disabled[0].kind.as_str(), disabled[0].subject_id), ("webhook.endpoint_disabled", first_id(&endpoint)));
    assert_eq!(disabled[0].data["reason"], "gone");
    assert!(handle(&notifier, vec![message(&disabled[0])]).await.is_empty());
    assert_eq!(watcher.seen().len(), 1, "an endpoint that asked for it hears of it");
    // While disabled, nothing is sent, and what it misses is logged for a recovery.
    app.hold("bob", resource, 12, 13).await;
    let missed = take_events(&app).await;
    assert!(handle(&notifier, missed.iter().map(message).collect()).await.is_empty());
    assert!(handle(&notifier, vec![message(&first)]).await.is_empty(), "a redelivery of the first event sends nothing");
    assert_eq!(receiver.seen().len(), 1);
    let log = log_of(&app, &endpoint).await;
    assert_eq!(log[0]["error"], "endpoint disabled");
    let retry = format!(
        "/v1/webhooks/{}/deliveries/{}/retry",
        endpoint["id"].as_str().unwrap(),
        log[0]["id"].as_str().unwrap()
    );
    let (status, problem) = send(app.post("admin", &retry, &json!({}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "webhook-disabled"));

    back.store(true, std::sync::atomic::Ordering::SeqCst);
    let recover = format!("/v1/webhooks/{}/recover", endpoint["id"].as_str().unwrap());
    let (status, recovered) = send(app.post("admin", &recover, &json!({"since": acceptance::rfc3339(since)}))).await;
    assert_eq!(status, StatusCode::OK, "{recovered}");
    assert_eq!((recovered["resends_queued"].as_i64(), &recovered["disabled_at"]), (Some(2), &Value::Null));
    sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default()).await;

    let ids: Vec<String> = receiver.seen().iter().skip(1).map(|s| s.id.clone()).collect();
    let mut want = vec![first.id.to_string(), missed[0].id.to_string()];
    want.sort();
    let mut got = ids.clone();
    got.sort();
    assert_eq!(got, want, "both missed events, each with its own id");
    assert!(log_of(&app, &endpoint).await.iter().take(2).all(|a| a["trigger"] == "recover" && a["status_code"] == 200));
    let (status, problem) = send(app.post("admin", &recover, &json!({"since": "2999-01-01T00:00:00Z"}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::BAD_REQUEST, "validation-error"));
}

fn first_id(endpoint: &Value) -> Uuid {
    endpoint["id"].as_str().unwrap().parse().unwrap()
}

/// In AWS the notifier publishes the `webhook.endpoint_disabled` its batch wrote before
/// it answers.
#[tokio::test]
async fn the_notifier_has_published_the_event_of_an_endpoint_it_disabled_when_it_answers() {
    let (app, mut queue) = acceptance::publishing_after_each_request(acceptance::Options::default()).await;
    let gone = Receiver::answering(|_, _| (410, Duration::ZERO)).await;
    let resource = app.resource(5).await;
    let endpoint = register(&app, &gone.url, &["reservation.held"], None).await;
    app.hold("alice", resource, 10, 11).await;
    let held = queue.try_recv().expect("the hold published its event");

    assert!(handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), vec![message(&held)]).await.is_empty());

    let disabled = queue.try_recv().expect("the endpoint's event is on the queue when the batch answers");
    assert_eq!((disabled.kind.as_str(), disabled.subject_id), ("webhook.endpoint_disabled", first_id(&endpoint)));
}

/// A batch that disabled no endpoint wrote no event: the notifier claims nothing after
/// it, and other due events wait for the next relay that claims.
#[tokio::test]
async fn a_notifier_batch_that_disabled_no_endpoint_claims_nothing_after_it() {
    let (app, mut queue) = acceptance::publishing_after_each_request(acceptance::Options::default()).await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(5).await;
    register(&app, &receiver.url, &["reservation.held"], None).await;
    app.hold("alice", resource, 10, 11).await;
    let held = queue.try_recv().expect("the hold published its event");
    let waiting = Uuid::now_v7();
    acceptance::write_events(&app, &[waiting], 1, Utc::now()).await;

    assert!(handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), vec![message(&held)]).await.is_empty());

    assert_eq!(receiver.seen().len(), 1, "delivered");
    assert!(queue.try_recv().is_err(), "the batch published nothing");
    let unclaimed =
        app.count("SELECT count(*) FROM outbox WHERE subject_id = $1 AND claimed_until IS NULL", &[&waiting]).await;
    assert_eq!(unclaimed, 1, "the waiting event was not claimed");
}

#[tokio::test]
async fn an_endpoint_that_fails_every_attempt_for_five_days_is_disabled() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let down = Receiver::answering(|_, _| (503, Duration::ZERO)).await;
    let resource = app.resource(5).await;
    let endpoint = register(&app, &down.url, &["reservation.held"], None).await;
    let notifier = notifier(&app, Sender::DEFAULT_TIMEOUT);
    let read = async || send(app.get("admin", &format!("/v1/webhooks/{}", endpoint["id"].as_str().unwrap()))).await.1;
    let first = held_event(&app, resource).await;
    assert_eq!(handle(&notifier, vec![message(&first)]).await.len(), 1);
    clock.advance(chrono::Duration::days(5) - chrono::Duration::minutes(1));
    app.hold("bob", resource, 12, 13).await;
    let events = take_events(&app).await;
    assert_eq!(handle(&notifier, events.iter().map(message).collect()).await.len(), 1);
    assert_eq!(read().await["disabled_at"], Value::Null, "not quite five days");

    clock.advance(chrono::Duration::minutes(2));
    assert!(handle(&notifier, events.iter().map(message).collect()).await.is_empty(), "disabled, so done with");

    assert_eq!(read().await["disabled_reason"], "failing");
    let disabled = take_events(&app).await;
    assert_eq!(disabled.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(), ["webhook.endpoint_disabled"]);
}

#[tokio::test]
async fn the_sweep_purges_the_delivery_log_after_its_retention() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(1).await;
    let endpoint = register(&app, &receiver.url, &["reservation.held"], None).await;
    let event = held_event(&app, resource).await;
    assert!(handle(&notifier(&app, Sender::DEFAULT_TIMEOUT), vec![message(&event)]).await.is_empty());
    let sweep = || sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default());

    clock.advance(chrono::Duration::days(29));
    assert_eq!(sweep().await.webhook_log_purged, Some(0));
    assert_eq!(log_of(&app, &endpoint).await.len(), 1);
    clock.advance(chrono::Duration::days(2));
    assert_eq!(sweep().await.webhook_log_purged, Some(2), "the attempt, then its event");
    assert!(log_of(&app, &endpoint).await.is_empty());
}

/// The dev server keeps each subject's events in order, as the FIFO events queue does
/// with one message group per subject: a reservation's `reservation.rescheduled` never
/// reaches a receiver before its `reservation.confirmed`, while other reservations'
/// events go out beside them.
#[tokio::test]
async fn the_dev_servers_in_process_notifier_keeps_each_reservations_events_in_order() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::accepting().await;
    let resource = app.resource(1).await;
    register(&app, &receiver.url, &["reservation.confirmed", "reservation.rescheduled"], None).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let loop_task = tokio::spawn(dev_server::run_notifier(Arc::new(notifier(&app, Sender::DEFAULT_TIMEOUT)), rx));
    const BOOKINGS: i64 = 50;
    for i in 0..BOOKINGS {
        let r = app.hold("alice", resource, 2 * i, 2 * i + 1).await;
        assert_eq!(app.confirm("alice", &r["id"]).await.0, StatusCode::OK);
        let (s, e) = acceptance::hours(2 * i + 1, 2 * i + 2);
        let (status, moved) =
            send(app.patch("alice", &acceptance::reservation_path(&r["id"]), &json!({"start": s, "end": e}))).await;
        assert_eq!(status, StatusCode::OK, "{moved}");
    }

    let queue = shared::outbox::Queue::Channel(tx);
    while sweeper::sweep(&app.state, &queue, Default::default()).await.events.is_some_and(|r| r.published > 0) {}

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while receiver.seen().len() < 2 * BOOKINGS as usize && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    loop_task.abort();
    let mut kinds: std::collections::HashMap<String, Vec<String>> = std::collections::HashMap::new();
    for seen in receiver.seen() {
        let event = seen.event();
        kinds.entry(event["subject_id"].as_str().unwrap().to_string()).or_default().push(event["type"].to_string());
    }
    assert_eq!(kinds.len(), BOOKINGS as usize);
    for (subject, kinds) in kinds {
        assert_eq!(kinds, [r#""reservation.confirmed""#, r#""reservation.rescheduled""#], "{subject}");
    }
}
