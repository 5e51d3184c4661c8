//! `fanout`: Lambda's scale-out against a small PostgreSQL, with and without a pooler.
//!
//! Every simulated function instance is what a warm Lambda instance is: an `AppState`
//! of its own with its own pool (`DB_POOL_SIZE`, 2 as in Lambda), answering through the
//! same dispatch the dev server and the functions use. Requests are holds of random
//! hour slots on 200 capacity-1 resources, 32 in flight, each sent to the next instance
//! in turn, so every instance is warm (it answered once, its connection open) before
//! the measured window. Three runs:
//!
//! 1. **pooled**: 1,000 instances through PgBouncer in transaction mode (pool size 20),
//!    statements unnamed. Every hold must be answered 201 or 409.
//! 2. **direct**: the same load from 20 instances straight to PostgreSQL (at most 40
//!    connections), for the rate beside it.
//! 3. **overload**: 200 instances straight to PostgreSQL, more connections than it
//!    allows: the requests that get no connection must be answered 503 with
//!    `Retry-After`, never 500, and none may hang (each has 30 s).
//!
//! ```text
//! scripts/fanout [--quick]
//! ```
//!
//! scripts/fanout starts the throwaway cluster (`max_connections = 50`) and PgBouncer
//! and passes them as `BENCH_DATABASE_URL` (the direct admin connection) and
//! `FANOUT_POOLER_URL` (PgBouncer, reaching every database of the cluster by name).
//! The bench exits non-zero when an answer is wrong.

use bench::setup::{self, BoxError};
use bench::stats::{Outcome, Summary, Tally};
use chrono::{DateTime, Duration as Span, TimeZone, Utc};
use lambda_http::Body;
use serde_json::json;
use shared::AppState;
use shared::config::{Config, Defaults};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use uuid::Uuid;

const IN_FLIGHT: usize = 32;
const RESOURCES: usize = 200;
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy)]
struct Params {
    measure: Duration,
    pooled: usize,
    direct: usize,
    overload: usize,
    pool_size: usize,
}

impl Params {
    fn from_args() -> Result<Self, String> {
        let mut quick = false;
        for arg in std::env::args().skip(1) {
            match arg.as_str() {
                "--quick" => quick = true,
                other => return Err(format!("unknown argument {other:?}; usage: fanout [--quick]")),
            }
        }
        Ok(Self {
            measure: Duration::from_secs(if quick { 3 } else { 10 }),
            pooled: setup::env_number("FANOUT_INSTANCES", 1_000)?,
            direct: setup::env_number("FANOUT_DIRECT_INSTANCES", 20)?,
            overload: setup::env_number("FANOUT_OVERLOAD_INSTANCES", 200)?,
            pool_size: setup::env_number("FANOUT_POOL_SIZE", 2)?,
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let params = setup::parameters_or_exit(Params::from_args());
    let Ok(pooler) = std::env::var("FANOUT_POOLER_URL") else {
        eprintln!("FANOUT_POOLER_URL is not set: run scripts/fanout");
        return ExitCode::from(2);
    };
    println!("fanout: simulated Lambda instances, each with its own pool, against one small PostgreSQL");
    println!("machine: {}", setup::machine());
    println!(
        "parameters: {} requests in flight, {} resources, pool of {} per instance, measure {:.1} s",
        IN_FLIGHT,
        RESOURCES,
        params.pool_size,
        params.measure.as_secs_f64()
    );
    setup::in_fresh_database(move |url| run(params, url, pooler)).await
}

async fn run(p: Params, direct_url: String, pooler_admin: String) -> Result<bool, BoxError> {
    let mut db = setup::connect(&direct_url).await?;
    shared::db::migrate(&mut db).await?;
    setup::print_database_settings(&db).await?;
    let name = direct_url.rsplit('/').next().expect("a URL with a database").to_string();
    let pooled_url = acceptance::url_with_database(&pooler_admin, &name);
    let admin = instance(&direct_url, 1);
    let resources = make_resources(&admin).await?;
    drop(admin);
    let mut correct = true;

    println!();
    println!(
        "(1) pooled: {} instances through PgBouncer (transaction mode, pool size 20), unnamed statements",
        p.pooled
    );
    let pooled = drive(&instances(&pooled_url, p.pooled, p.pool_size), &resources, p.measure, 0).await;
    correct &= pooled.print(&[201, 409]);

    println!();
    println!("(2) direct: {} instances straight to PostgreSQL, the same load", p.direct);
    settle(&db).await?;
    let direct = drive(&instances(&direct_url, p.direct, p.pool_size), &resources, p.measure, 1).await;
    correct &= direct.print(&[201, 409]);

    println!();
    println!("(3) overload: {} instances straight to PostgreSQL, more connections than it allows", p.overload);
    settle(&db).await?;
    let overload = drive(&instances(&direct_url, p.overload, p.pool_size), &resources, p.measure, 2).await;
    correct &= overload.print(&[201, 409, 503]);
    let refused = overload.tally.count(Outcome::Status(503));
    if refused == 0 {
        println!("  note: no request was refused; the server's max_connections was not reached");
    }
    if overload.refusals_without_retry_after > 0 {
        println!("FAIL: {} answers of 503 came without Retry-After", overload.refusals_without_retry_after);
        correct = false;
    }

    println!();
    println!("summary");
    println!(
        "  pooled {} instances: {:.1} holds/s, {:.1} answers/s; direct {} instances: {:.1} holds/s, {:.1} answers/s \
         ({:.0} % of direct)",
        p.pooled,
        pooled.holds_per_second(),
        pooled.answers_per_second(),
        p.direct,
        direct.holds_per_second(),
        direct.answers_per_second(),
        100.0 * pooled.answers_per_second() / direct.answers_per_second().max(f64::MIN_POSITIVE)
    );
    println!(
        "  overload {} instances direct: {} of {} answers were 503 with Retry-After, {} server faults",
        p.overload,
        refused,
        overload.tally.total(),
        overload
            .tally
            .0
            .iter()
            .filter(|(o, _)| o.is_failure() && **o != Outcome::Status(503))
            .map(|(_, n)| n)
            .sum::<u64>()
    );
    println!("  verdict: {}", if correct { "every answer right" } else { "WRONG answers (see FAIL above)" });
    Ok(correct)
}

/// Waits (up to 30 s) until no other connection is open to the bench database: the
/// pooler's server connections of a run before close when idle (`server_idle_timeout`),
/// and a direct run must not count them against `max_connections`.
async fn settle(db: &tokio_postgres::Client) -> Result<(), BoxError> {
    let started = Instant::now();
    loop {
        let others: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .await?
            .get(0);
        if others == 0 {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(30) {
            println!("  note: {others} other connections still open after 30 s");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One simulated function instance: its own configuration and its own lazily
/// connecting pool, as `AppState::from_env` builds in a Lambda.
fn instance(url: &str, pool_size: usize) -> AppState {
    let url = url.to_string();
    let mut config = Config::from_lookup(Defaults::DevServer, move |k| match k {
        "DATABASE_URL" => Some(url.clone()),
        _ => std::env::var(k).ok().filter(|_| k == "DB_STATEMENTS"),
    })
    .expect("the fanout's configuration");
    config.database.pool_size = pool_size;
    AppState::new(shared::db::pool(&config.database).expect("a pool"), config)
}

fn instances(url: &str, n: usize, pool_size: usize) -> Vec<AppState> {
    (0..n).map(|_| instance(url, pool_size)).collect()
}

async fn make_resources(admin: &AppState) -> Result<Vec<Uuid>, BoxError> {
    let mut ids = Vec::with_capacity(RESOURCES);
    for i in 0..RESOURCES {
        let body = json!({"name": format!("fanout {i}"), "capacity": 1});
        let (status, _, body) = send(admin, "admin", "/v1/resources", body).await?;
        if status != 201 {
            return Err(format!("POST /v1/resources answered {status}: {}", String::from_utf8_lossy(&body)).into());
        }
        let created: serde_json::Value = serde_json::from_slice(&body)?;
        ids.push(created["id"].as_str().and_then(|s| s.parse().ok()).ok_or("a resource without an id")?);
    }
    Ok(ids)
}

/// POSTs `body` as `principal` through the instance's dispatch: the status, whether a
/// `Retry-After` came with it, and the body.
async fn send(
    state: &AppState,
    principal: &str,
    path: &str,
    body: serde_json::Value,
) -> Result<(u16, bool, Vec<u8>), BoxError> {
    let req = lambda_http::http::Request::builder()
        .method("POST")
        .uri(format!("http://fanout{path}"))
        .header("x-principal", principal)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))?;
    let resp = dev_server::dispatch(state, req).await;
    let retry_after = resp.headers().contains_key("retry-after");
    Ok((resp.status().as_u16(), retry_after, resp.body().to_vec()))
}

/// A random hour of 2027 (past any booking horizon's start, within the default one).
fn slot(seed: u64) -> (DateTime<Utc>, DateTime<Utc>) {
    let base = Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap();
    let start = base + Span::hours((seed % (300 * 24)) as i64);
    (start, start + Span::hours(1))
}

#[derive(Debug, Default)]
struct Report {
    tally: Tally,
    warmup: Tally,
    latencies: Vec<Duration>,
    window: Duration,
    refusals_without_retry_after: u64,
}

impl Report {
    fn holds_per_second(&self) -> f64 {
        self.tally.count(Outcome::Status(201)) as f64 / self.window.as_secs_f64()
    }

    fn answers_per_second(&self) -> f64 {
        self.tally.total() as f64 / self.window.as_secs_f64()
    }

    /// Prints the run; `false` when an answer was not one of `allowed`.
    fn print(&self, allowed: &[u16]) -> bool {
        println!("  warm-up (each instance once): {}", self.warmup);
        println!(
            "  measured: {}  ({:.1} holds/s, {:.1} answers/s in {:.1} s)",
            self.tally,
            self.holds_per_second(),
            self.answers_per_second(),
            self.window.as_secs_f64()
        );
        if let Some(l) = Summary::of(self.latencies.clone()) {
            println!("  latency: {l}");
        }
        let wrong: Vec<String> = self
            .warmup
            .0
            .iter()
            .chain(self.tally.0.iter())
            .filter(|(o, _)| !matches!(o, Outcome::Status(s) if allowed.contains(s)))
            .map(|(o, n)| format!("{o} x{n}"))
            .collect();
        if !wrong.is_empty() {
            println!("FAIL: answers other than {allowed:?}: {}", wrong.join(", "));
        }
        wrong.is_empty()
    }
}

/// Warms every instance with one hold (IN_FLIGHT at a time), then sends holds for
/// `measure`, IN_FLIGHT in flight, each to the next instance in turn. Each run takes
/// its own sequence of slots (`run`), so that a run's answers are not the 409s of
/// slots an earlier run took.
async fn drive(instances: &[AppState], resources: &[Uuid], measure: Duration, run: usize) -> Report {
    let instances: Arc<Vec<AppState>> = Arc::new(instances.to_vec());
    let resources: Arc<Vec<Uuid>> = Arc::new(resources.to_vec());
    let next = Arc::new(AtomicUsize::new(run * 10_000_000));
    let mut report = Report::default();

    let warm = workers(instances.clone(), resources.clone(), next.clone(), None, instances.len()).await;
    for (outcome, _, retry) in warm {
        report.warmup.add(outcome);
        report.refusals_without_retry_after += u64::from(outcome == Outcome::Status(503) && !retry);
    }
    let started = Instant::now();
    let answers = workers(instances, resources, next, Some(started + measure), usize::MAX).await;
    report.window = started.elapsed();
    for (outcome, latency, retry) in answers {
        report.tally.add(outcome);
        report.latencies.push(latency);
        report.refusals_without_retry_after += u64::from(outcome == Outcome::Status(503) && !retry);
    }
    report
}

/// IN_FLIGHT workers sending holds until `until` or `count` requests in all: each
/// answer's outcome, latency and whether it carried `Retry-After`.
async fn workers(
    instances: Arc<Vec<AppState>>,
    resources: Arc<Vec<Uuid>>,
    next: Arc<AtomicUsize>,
    until: Option<Instant>,
    count: usize,
) -> Vec<(Outcome, Duration, bool)> {
    let sent = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (instances, resources, next, sent) = (instances.clone(), resources.clone(), next.clone(), sent.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                while until.is_none_or(|u| Instant::now() < u) && sent.fetch_add(1, Ordering::Relaxed) < count {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let state = &instances[n % instances.len()];
                    let seed = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let resource = resources[(seed >> 32) as usize % resources.len()];
                    let (start, end) = slot(seed >> 8);
                    let body = json!({"resource_id": resource, "start": start, "end": end});
                    let began = Instant::now();
                    let answer = tokio::time::timeout(
                        ANSWER_WITHIN,
                        send(state, &format!("fanout-{}", n % 997), "/v1/reservations", body),
                    )
                    .await;
                    out.push(match answer {
                        Ok(Ok((status, retry, _))) => (Outcome::Status(status), began.elapsed(), retry),
                        Ok(Err(_)) | Err(_) => (Outcome::Error, began.elapsed(), false),
                    });
                }
                out
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap_or_default());
    }
    all
}
