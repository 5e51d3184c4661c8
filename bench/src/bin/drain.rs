//! `drain-bench`: a sweep that catches up with a backlog of lapsed holds.
//!
//! A throwaway database gets 1,000 capacity-1 resources with 100 lapsed holds each
//! (`--quick`: 200 with 100 each), written by SQL: one hold of every resource lapses
//! before the next of any, the resources in a shuffled order, so that draining oldest
//! first across resources takes them in that order. Then two sweeps at once (the
//! sweeper's `expire_lapsed`, batches of 200, as two overlapping scheduled runs would)
//! drain the backlog while clients hold on 16 other resources, as they did for a
//! while before it. Printed:
//!
//! - the drain's rate in each quarter of the backlog, and the last quarter's over the
//!   first's (goal: at least 80 %: a claim's cost does not grow with the rows written
//!   down before it);
//! - how closely the order in which the resources were drained follows the expiry of
//!   their oldest lapsed hold (Spearman's rank correlation; 1 is oldest first);
//! - the holds' p99 before and during the drain (goal: within 2x).
//!
//! Exit 1 on a 5xx or a request without an answer, a resource over its capacity, or
//! a lapsed hold left after the drain.
//!
//! ```text
//! cargo run -p bench --release --bin drain-bench [-- --quick]
//! ```
//!
//! Environment: `BENCH_DATABASE_URL` (admin connection; default
//! `postgres://postgres@127.0.0.1:5432/postgres`).

use bench::setup::{self, BoxError, Server};
use bench::stats::{Outcome, Summary, Tally, ms};
use chrono::{Duration as Span, DurationRound, Utc};
use shared::booking::sweep::{Bounds, expire_lapsed};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use uuid::Uuid;

const HOLDS_PER_RESOURCE: i64 = 100;
const SWEEPS: usize = 2;
const LIVE_RESOURCES: usize = 16;
const CLIENTS: usize = 8;
const DRAIN_RATE_GOAL: f64 = 0.8;
const P99_GOAL: f64 = 2.0;

#[tokio::main]
async fn main() -> ExitCode {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    let resources: i64 = if quick { 200 } else { 1_000 };
    println!("drain bench ({})", if quick { "quick" } else { "full" });
    println!(
        "machine: {}; backlog: {} lapsed holds over {resources} resources; {SWEEPS} sweeps at once",
        setup::machine(),
        resources * HOLDS_PER_RESOURCE
    );
    setup::in_fresh_database(move |url| run(url, resources)).await
}

async fn run(database_url: String, resources: i64) -> Result<bool, BoxError> {
    let mut db = setup::connect(&database_url).await?;
    shared::db::migrate(&mut db).await?;
    setup::print_database_settings(&db).await?;
    let server = Server::start(&database_url, 8).await?;
    let http = setup::http_client(CLIENTS);
    setup::health(&http, &server).await?;

    let mut live = Vec::new();
    for i in 0..LIVE_RESOURCES {
        live.push(setup::create_resource(&http, &server, &format!("live-{i}")).await?);
    }
    let mut backlog = Vec::new();
    for i in 0..resources {
        backlog.push(setup::create_resource(&http, &server, &format!("backlog-{i}")).await?);
    }
    let total = write_backlog(&db, &backlog).await?;

    let url = server.url("/v1/reservations");
    let before = holds_for(&http, &url, &live, 0, Duration::from_secs(5), None).await?;
    println!();
    println!("holds on {LIVE_RESOURCES} other resources before the drain, {CLIENTS} clients: {}", before.line());

    let written = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(std::sync::Mutex::new(vec![(Duration::ZERO, 0u64)]));
    let started = Instant::now();
    let sweeps: Vec<_> = (0..SWEEPS)
        .map(|_| {
            let (state, written, progress) = (server.state.clone(), written.clone(), progress.clone());
            tokio::spawn(async move {
                let bounds = Bounds { batch: 200, budget: Duration::from_millis(250) };
                loop {
                    let report = expire_lapsed(&state.pool, state.clock.as_ref(), bounds).await?;
                    let sum = written.fetch_add(report.expired, Ordering::SeqCst) + report.expired;
                    progress.lock().unwrap().push((started.elapsed(), sum));
                    if !report.unfinished && report.expired == 0 {
                        return Ok::<_, shared::db::DbError>(());
                    }
                }
            })
        })
        .collect();
    let during = {
        let (http, url, live, done) = (http.clone(), url.clone(), live.clone(), done.clone());
        tokio::spawn(async move { holds_for(&http, &url, &live, 1, Duration::from_secs(3600), Some(done)).await })
    };
    for sweep in sweeps {
        sweep.await??;
    }
    let drained_in = started.elapsed();
    done.store(true, Ordering::SeqCst);
    let during = during.await??;

    let mut correct = true;
    let written = written.load(Ordering::SeqCst);
    println!();
    println!("drained {written} of {total} lapsed holds in {:.1} s", drained_in.as_secs_f64());
    let rates = quarter_rates(&progress.lock().unwrap(), total);
    for (i, rate) in rates.iter().enumerate() {
        println!("  quarter {}: {rate:.0} holds written down a second", i + 1);
    }
    let ratio = rates[3] / rates[0];
    println!(
        "the last quarter's rate over the first's: {ratio:.2} ({})",
        verdict(ratio >= DRAIN_RATE_GOAL, &format!("goal: at least {DRAIN_RATE_GOAL}"))
    );
    let rho = drain_order(&db).await?;
    println!("the order of the drain against the expiry of each resource's oldest lapsed hold: Spearman {rho:.3}");
    println!("holds on the other resources during the drain: {}", during.line());
    let p99 = during.summary.as_ref().map(|s| s.p99).unwrap_or_default().as_secs_f64()
        / before.summary.as_ref().map(|s| s.p99).unwrap_or_default().as_secs_f64().max(1e-9);
    println!(
        "their p99 during the drain over before it: {p99:.2}x ({})",
        verdict(p99 <= P99_GOAL, &format!("goal: at most {P99_GOAL}x"))
    );

    let left: i64 = db
        .query_one("SELECT count(*) FROM reservations WHERE status = 'HELD' AND expires_at <= now()", &[])
        .await?
        .get(0);
    if left > 0 || written < total {
        println!("FAIL: {left} lapsed holds left after the drain, {written} of {total} written down");
        correct = false;
    }
    for tally in [&before.tally, &during.tally] {
        if tally.any_failure() {
            println!("FAIL: a hold answered 5xx or not at all: {tally:?}");
            correct = false;
        }
    }
    let check = bench::capacity::check(&db).await?;
    if !check.is_correct() {
        println!("FAIL: resources over capacity: {:?}", check.over);
        correct = false;
    }
    Ok(correct)
}

/// The backlog: `HOLDS_PER_RESOURCE` lapsed holds of an hour each on every resource,
/// the n-th of every resource lapsing before the (n+1)-th of any, the resources in a
/// shuffled order within each round. Returns how many.
async fn write_backlog(db: &tokio_postgres::Client, resources: &[Uuid]) -> Result<u64, BoxError> {
    let started = Instant::now();
    let first = (Utc::now() + Span::days(2)).duration_trunc(Span::days(1))?;
    let n = resources.len() as i64;
    let written = db
        .execute(
            "WITH shuffled AS (SELECT id, row_number() OVER (ORDER BY md5(id::text)) - 1 AS place \
                               FROM unnest($1::uuid[]) AS r(id)) \
             INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, \
                                       status, expires_at, source, created_at, updated_at) \
             SELECT gen_random_uuid(), s.id, 1, 'owner-' || (i % 50), $2::timestamptz + i * interval '1 hour', \
                    $2::timestamptz + (i + 1) * interval '1 hour', 1, 'HELD', \
                    now() - interval '10 minutes' + (i * $3 + s.place) * interval '1 millisecond', \
                    'request', now() - interval '20 minutes', now() - interval '20 minutes' \
             FROM shuffled s, generate_series(0, $4::bigint - 1) AS i",
            &[&resources, &first, &n, &HOLDS_PER_RESOURCE],
        )
        .await?;
    db.batch_execute("ANALYZE reservations").await?;
    println!("{written} lapsed holds written and analyzed in {:.1} s", started.elapsed().as_secs_f64());
    Ok(written)
}

/// Rows written down a second in each quarter of `total`, from the sweeps' progress
/// (time, rows so far), each crossing found by interpolation.
fn quarter_rates(progress: &[(Duration, u64)], total: u64) -> [f64; 4] {
    let mut points = progress.to_vec();
    points.sort();
    let at = |rows: f64| -> f64 {
        let mut last = (0.0, 0.0);
        for &(t, n) in &points {
            let (t, n) = (t.as_secs_f64(), n as f64);
            if n >= rows {
                return if n == last.1 { t } else { last.0 + (t - last.0) * (rows - last.1) / (n - last.1) };
            }
            last = (t, n);
        }
        last.0
    };
    let quarter = total as f64 / 4.0;
    std::array::from_fn(|q| quarter / (at(quarter * (q as f64 + 1.0)) - at(quarter * q as f64)).max(1e-9))
}

/// Spearman's rank correlation between the order the resources were drained in (the
/// first write-down of each) and the order of their oldest lapsed hold's expiry.
async fn drain_order(db: &tokio_postgres::Client) -> Result<f64, BoxError> {
    let row = db
        .query_one(
            "WITH per AS (SELECT resource_id, min(updated_at) AS drained, min(expires_at) AS oldest \
                          FROM reservations WHERE status = 'EXPIRED' GROUP BY resource_id), \
                  ranked AS (SELECT rank() OVER (ORDER BY drained) AS a, rank() OVER (ORDER BY oldest) AS b FROM per) \
             SELECT corr(a, b) FROM ranked",
            &[],
        )
        .await?;
    Ok(row.get::<_, Option<f64>>(0).unwrap_or(0.0))
}

/// The holds of one window: their latencies and outcomes.
struct Window {
    summary: Option<Summary>,
    tally: Tally,
    seconds: f64,
}

impl Window {
    fn line(&self) -> String {
        let count = self.summary.as_ref().map_or(0, |s| s.count);
        match &self.summary {
            Some(s) => format!("{:.0} holds/s, p50 {}, p99 {}", count as f64 / self.seconds, ms(s.p50), ms(s.p99)),
            None => "no holds".into(),
        }
    }
}

/// `CLIENTS` clients in a closed loop, each hold a slot of its own (`week`: which week
/// ahead, so that two windows never meet), for `length` or until `until` is set.
async fn holds_for(
    http: &reqwest::Client,
    url: &str,
    live: &[Uuid],
    week: i64,
    length: Duration,
    until: Option<Arc<AtomicBool>>,
) -> Result<Window, BoxError> {
    let first = (Utc::now() + Span::days(3 + 7 * week)).duration_trunc(Span::days(1))?;
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let (http, next, until) = (http.clone(), next.clone(), until.clone());
        let (live, url) = (live.to_vec(), url.to_string());
        clients.push(tokio::spawn(async move {
            let (mut latencies, mut tally) = (Vec::new(), Tally::default());
            while started.elapsed() < length && !until.as_ref().is_some_and(|u| u.load(Ordering::SeqCst)) {
                let n = next.fetch_add(1, Ordering::SeqCst) as i64;
                let resource = live[(n % live.len() as i64) as usize];
                let start = first + Span::minutes(n / live.len() as i64);
                let (end, start) = ((start + Span::minutes(1)).to_rfc3339(), start.to_rfc3339());
                let body = serde_json::json!({"resource_id": resource, "start": start, "end": end});
                let request = http.post(&url).header("x-principal", format!("p{}", n % 1000)).json(&body).build()?;
                let sent = Instant::now();
                let outcome = setup::send(&http, request).await.unwrap_or(Outcome::Error);
                latencies.push(sent.elapsed());
                tally.add(outcome);
            }
            Ok::<_, BoxError>((latencies, tally))
        }));
    }
    let (mut latencies, mut tally) = (Vec::new(), Tally::default());
    for client in clients {
        let (l, t) = client.await.map_err(|e| e.to_string())??;
        latencies.extend(l);
        tally.merge(&t);
    }
    Ok(Window { summary: Summary::of(latencies), tally, seconds: started.elapsed().as_secs_f64() })
}

fn verdict(met: bool, goal: &str) -> String {
    format!("{}; {goal}", if met { "met" } else { "MISS" })
}
