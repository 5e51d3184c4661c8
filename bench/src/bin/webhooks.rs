//! `webhook-bench`: how soon a hold's webhook arrives, and what relaying right after
//! each request costs the holds.
//!
//! Against a throwaway database and the in-process dev server, with the events
//! published two ways: by the server's relay, woken after every request that writes,
//! as `scripts/dev` runs it; and by each request after its commit, before its answer,
//! as the functions do in AWS. Both to the in-process notifier.
//!
//! 1. **Cost.** Uncontended holds through HTTP (capacity-1 resources, 32 at once), with
//!    the events left in the outbox, published by the server's relay, and published by
//!    each request, to a consumer that takes them at once, twice each, alternating;
//!    the holds/s of each and the ratios to the first.
//! 2. **Latency.** For each way of publishing, a webhook endpoint (a receiver on
//!    127.0.0.1 that answers 204) for `reservation.held`, and holds sent at a steady 200
//!    a second: for each, the time from the 201 to the receiver having the delivery,
//!    p50, p95, p99 and the maximum. Every hold's delivery must arrive (the run fails
//!    otherwise).
//!
//! ```text
//! cargo run -p bench --release --bin webhook-bench [-- --quick]
//! ```
//!
//! Environment: `BENCH_DATABASE_URL` (admin connection; default
//! `postgres://postgres@127.0.0.1:5432/postgres`).

use bench::setup::{self, BoxError, Events, Server, ServerOptions};
use bench::stats::{Outcome, Summary, ms};
use bench::throughput::{self, HoldMix, Phases, Rules, Shape};
use chrono::{Duration as Span, DurationRound, Utc};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use shared::outbox::Queue;
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

const CONCURRENCY: usize = 32;
const RATE_PER_SECOND: u64 = 200;
/// The goal for the latency phase's p95.
const P95_GOAL: Duration = Duration::from_secs(2);

#[tokio::main]
async fn main() -> ExitCode {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    println!("webhook bench ({})", if quick { "quick" } else { "full" });
    println!("machine: {}", setup::machine());
    setup::in_fresh_database(move |url| run(url, quick)).await
}

async fn run(database_url: String, quick: bool) -> Result<bool, BoxError> {
    let mut db = setup::connect(&database_url).await?;
    shared::db::migrate(&mut db).await?;
    setup::print_database_settings(&db).await?;
    let phases = if quick {
        Phases { warmup: Duration::from_secs(2), measure: Duration::from_secs(5) }
    } else {
        Phases { warmup: Duration::from_secs(3), measure: Duration::from_secs(10) }
    };
    let mut correct = true;

    println!();
    println!(
        "(1) uncontended holds through HTTP, 200 resources, concurrency {CONCURRENCY}, {:.0} s each, alternating",
        phases.measure.as_secs_f64()
    );
    let mix = HoldMix { resources: 200, capacity: 1, keyed: false, rules: Rules::Plain, shape: Shape::Single };
    // Kept first, then each way of publishing.
    let mut rates: [Vec<f64>; 1 + PUBLISHING.len()] = Default::default();
    let label = |path: usize| if path == 0 { "kept in the outbox" } else { PUBLISHING[path - 1].0 };
    for _ in 0..2 {
        for (path, rates) in rates.iter_mut().enumerate() {
            let events = match path {
                0 => Events::Kept,
                _ => {
                    let (tx, mut consumer) = tokio::sync::mpsc::unbounded_channel();
                    tokio::spawn(async move { while consumer.recv().await.is_some() {} });
                    (PUBLISHING[path - 1].1)(Queue::Channel(tx))
                }
            };
            // Each phase starts from an empty outbox: a relaying phase sends only its
            // own events, not those the phase before kept.
            db.batch_execute("DELETE FROM outbox").await?;
            db.batch_execute("VACUUM outbox").await?;
            let options = ServerOptions { pool_size: 16, settings: Vec::new(), sweep_every: None, events };
            let server = Server::start_with(&database_url, options).await?;
            let report = throughput::http_holds(&server, mix, CONCURRENCY, phases, None).await?;
            correct &= report.measured.count(Outcome::Status(201)) > 0 && report.first_error.is_none();
            println!("  events {:<32} {:>8.1} holds/s", label(path), report.per_second());
            rates.push(report.per_second());
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    for path in 1..rates.len() {
        println!(
            "  {} / kept: {:.1} / {:.1} holds/s = {:.1} % (goal: at least 90 %)",
            label(path),
            mean(&rates[path]),
            mean(&rates[0]),
            100.0 * mean(&rates[path]) / mean(&rates[0])
        );
    }

    for (label, publishing) in PUBLISHING {
        correct &= latency(&database_url, phases, label, publishing).await?;
    }
    Ok(correct)
}

/// How a server publishes the events, given the queue they go to.
type Publishing = fn(Queue) -> Events;

/// The ways the bench publishes events, each with its label.
const PUBLISHING: [(&str, Publishing); 2] =
    [("published by the server's relay", Events::Background), ("published by each request", Events::ByRequest)];

/// Holds at [`RATE_PER_SECOND`], each one's webhook timed from its 201, with the events
/// published as `publishing` says.
async fn latency(database_url: &str, phases: Phases, label: &str, publishing: Publishing) -> Result<bool, BoxError> {
    let mut correct = true;
    println!();
    let seconds = phases.measure.as_secs() * 2;
    println!(
        "(2) holds at {RATE_PER_SECOND}/s for {seconds} s, events {label}, each hold's webhook timed from its 201"
    );
    let receiver = Receiver::start().await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let options = ServerOptions {
        pool_size: 16,
        settings: Vec::new(),
        sweep_every: None,
        events: publishing(Queue::Channel(tx)),
    };
    let server = Server::start_with(database_url, options).await?;
    let sender = shared::notify::Sender::new(shared::notify::Sender::DEFAULT_TIMEOUT);
    let notifier = Arc::new(notifier::Notifier { state: server.state.clone(), sender, queue: None });
    let notifying = tokio::spawn(dev_server::run_notifier(notifier, rx));
    let http = setup::http_client(CONCURRENCY);
    let registered = http
        .post(server.url("/v1/webhooks"))
        .header("x-principal", "admin")
        .json(&json!({"url": receiver.url, "event_types": ["reservation.held"]}))
        .send()
        .await?;
    if registered.status() != 201 {
        return Err(format!("registering the endpoint: {}", registered.status()).into());
    }
    let mut rooms = Vec::with_capacity(100);
    for i in 0..100 {
        rooms.push(setup::create_resource(&http, &server, &format!("room {i}")).await?);
    }
    let day = (Utc::now() + Span::days(3)).duration_trunc(Span::days(1))?;
    let answered: Arc<Mutex<HashMap<Uuid, Instant>>> = Arc::default();
    let total = RATE_PER_SECOND * seconds;
    let mut tick = tokio::time::interval(Duration::from_secs(1) / RATE_PER_SECOND as u32);
    let mut sends = Vec::with_capacity(total as usize);
    for i in 0..total {
        tick.tick().await;
        let (room, slot) = (rooms[(i % 100) as usize], (i / 100) as i64);
        let start = day + Span::minutes(10 * slot);
        let body = json!({"resource_id": room, "start": start, "end": start + Span::minutes(10)});
        let who = format!("guest-{i}");
        let request = http.post(server.url("/v1/reservations")).header("x-principal", who).json(&body).build()?;
        let (http, answered) = (http.clone(), answered.clone());
        sends.push(tokio::spawn(async move {
            let (status, body) = setup::exchange(&http, request).await?;
            let at = Instant::now();
            let held: Value = serde_json::from_slice(&body).unwrap_or_default();
            match (status, held["id"].as_str().and_then(|id| id.parse().ok())) {
                (201, Some(id)) => {
                    answered.lock().unwrap().insert(id, at);
                    Ok(())
                }
                _ => Err(format!("hold answered {status}")),
            }
        }));
    }
    for send in sends {
        if let Err(e) = send.await? {
            println!("FAIL: {e}");
            correct = false;
        }
    }
    // The stragglers: every hold's delivery, or ten seconds.
    let waited = Instant::now();
    while receiver.count() < answered.lock().unwrap().len() && waited.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    notifying.abort();
    let answered = answered.lock().unwrap().clone();
    let received = receiver.received.lock().unwrap().clone();
    let latencies: Vec<Duration> =
        answered.iter().filter_map(|(id, at)| received.get(id).map(|got| got.saturating_duration_since(*at))).collect();
    let missing = answered.len() - latencies.len();
    if missing > 0 {
        println!("FAIL: {missing} of {} holds' webhooks never arrived", answered.len());
        correct = false;
    }
    let summary = Summary::of(latencies);
    println!(
        "  {} holds, 201 to delivery: {}",
        answered.len(),
        summary.as_ref().map_or("no samples".into(), |s| s.to_string())
    );
    println!(
        "p95 from a hold's 201 to its webhook: {} (goal: at most {})",
        summary.map_or_else(|| "n/a".into(), |s| ms(s.p95)),
        ms(P95_GOAL)
    );
    Ok(correct)
}

/// A webhook endpoint on 127.0.0.1 that answers 204 and notes when each
/// reservation's event arrived.
struct Receiver {
    url: String,
    received: Arc<Mutex<HashMap<Uuid, Instant>>>,
}

impl Receiver {
    async fn start() -> Result<Receiver, BoxError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        let received: Arc<Mutex<HashMap<Uuid, Instant>>> = Arc::default();
        let noted = received.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let noted = noted.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let noted = noted.clone();
                        async move {
                            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            let event: Value = serde_json::from_slice(&body).unwrap_or_default();
                            if let Some(id) = event["subject_id"].as_str().and_then(|id| id.parse().ok()) {
                                noted.lock().unwrap().entry(id).or_insert_with(Instant::now);
                            }
                            let empty = http_body_util::Empty::<hyper::body::Bytes>::new();
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder().status(204).body(empty).unwrap(),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Receiver { url, received })
    }

    fn count(&self) -> usize {
        self.received.lock().unwrap().len()
    }
}
