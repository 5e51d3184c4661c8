//! `soak`: a steady mixed load on the dev server for ten minutes, one line per minute.
//!
//! The dev server runs in this process (the very handlers the Lambdas run, behind real
//! HTTP on 127.0.0.1), with the sweeper's sweep every few seconds as the dev server's
//! `run_scheduled` does, against a throwaway database. A fixed number of clients, each
//! a principal in a closed loop, hold, book in one step, confirm and release holds,
//! cancel bookings, join, read and leave the waitlist and accept offers, and read
//! availability (see `bench::soak::load`), over twelve resources of capacity 1, 2 and
//! 5 with holds lapsing after 2-5 s and offers after 3-6 s, in sixteen hours of one day,
//! so that many requests contend and many succeed.
//!
//! Each minute prints the requests, the rate, p50 and p99 of every request answered in
//! that minute, the answers by status class (4xx by problem type), this process's RSS
//! (server and load generator together: the server is in-process, as in `bench`) and
//! the outbox's rows. The end prints the tables' sizes and four goals: p99 of the last
//! minute within 1.5x the first's, RSS within 10 % of the first minute's, the
//! outbox levelling off, and the relay keeping up (at most 5 s of the last minute's
//! events unpublished at the end; the server's relay sends them after each write, as
//! the dev server's does). A missed goal prints MISS; only wrong behaviour fails the run
//! (exit 1): a 5xx, a request without an answer, a replay that answered otherwise than
//! its original, or a resource over its capacity (checked every minute and at the end).
//! The server's error lines, which say why a 5xx happened, go to stderr.
//!
//! ```text
//! cargo run -p bench --release --bin soak [-- --minutes N]
//! ```
//!
//! Environment: `SOAK_MINUTES` (default 10; `--minutes` wins), `SOAK_CLIENTS` (default
//! 32), `SOAK_SWEEP_INTERVAL_SECONDS` (default 2), `BENCH_POOL_SIZE` (the server's pool,
//! default 16), `BENCH_DATABASE_URL` (as for `bench`), and for trying the bench out,
//! `SOAK_MINUTE_SECONDS` (the length of a "minute", default 60).

use bench::setup::{self, BoxError, Events, Server, ServerOptions, env_number};
use bench::soak::footprint::{self, RelationSize};
use bench::soak::load::{Client, Plan, Resource};
use bench::soak::record::{self, Minute, Op, Period, Recorder};
use bench::stats::Outcome;
use chrono::{Duration as Span, DurationRound, Utc};
use serde_json::json;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const P99_DRIFT_LIMIT: f64 = 1.5;
const RSS_GROWTH_LIMIT_PERCENT: f64 = 10.0;
const OUTBOX_GROWTH_LIMIT_PERCENT: f64 = 10.0;
/// At most this many seconds' worth of events left unpublished at the end.
const RELAY_BACKLOG_LIMIT_SECONDS: f64 = 5.0;
/// The resources: this many of each capacity.
const CAPACITIES: [i32; 3] = [1, 2, 5];
const RESOURCES_PER_CAPACITY: usize = 4;
/// Bookable hours of the day, from 08:00 to midnight.
const HOURS: i64 = 16;
/// The outbox retention asked of the server. The minimum is an hour, so within a
/// shorter run the outbox only grows; the per-minute count shows by how much.
const OUTBOX_RETENTION_HOURS: &str = "1";

#[derive(Debug, Clone)]
struct Params {
    minutes: usize,
    minute: Duration,
    clients: usize,
    pool_size: usize,
    sweep_every: Duration,
}

const USAGE: &str = "usage: soak [--minutes N]   (see the binary's docs for SOAK_* variables)";

impl Params {
    fn from_args_and_env() -> Result<Self, String> {
        let mut minutes = env_number("SOAK_MINUTES", 10)?;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let value = match arg.as_str() {
                "--minutes" => args.next().ok_or(USAGE)?,
                other if other.starts_with("--minutes=") => other["--minutes=".len()..].to_string(),
                "-h" | "--help" => return Err(USAGE.into()),
                other => return Err(format!("unknown argument {other:?}; {USAGE}")),
            };
            minutes = match value.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => return Err(format!("--minutes must be a positive integer, not {value:?}")),
            };
        }
        Ok(Self {
            minutes,
            minute: Duration::from_secs(env_number("SOAK_MINUTE_SECONDS", 60)? as u64),
            clients: env_number("SOAK_CLIENTS", 32)?,
            pool_size: env_number("BENCH_POOL_SIZE", 16)?,
            sweep_every: Duration::from_secs(env_number("SOAK_SWEEP_INTERVAL_SECONDS", 2)? as u64),
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let params = setup::parameters_or_exit(Params::from_args_and_env());
    println!("reservation service soak: {} minute(s) of {} s", params.minutes, params.minute.as_secs());
    println!("machine: {}", setup::machine());
    println!(
        "parameters: {} clients (SOAK_CLIENTS), server pool {} (BENCH_POOL_SIZE), sweep every {} s \
         (SOAK_SWEEP_INTERVAL_SECONDS), OUTBOX_RETENTION_HOURS={OUTBOX_RETENTION_HOURS}",
        params.clients,
        params.pool_size,
        params.sweep_every.as_secs()
    );
    // The server's error lines (a 5xx's whole cause chain, in its request's span) on
    // stderr; nothing below ERROR, which would be a line per request.
    lambda_http::tracing::subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(lambda_http::tracing::Level::ERROR)
        .with_target(false)
        .with_ansi(false)
        .init();
    setup::in_fresh_database(move |url| run(params, url)).await
}

/// Twelve resources, TTLs spread over 2-5 s (holds) and 3-6 s (offers).
async fn make_plan(http: &reqwest::Client, server: &Server) -> Result<Plan, BoxError> {
    let mut resources = Vec::new();
    for (i, capacity) in CAPACITIES.iter().flat_map(|&c| std::iter::repeat_n(c, RESOURCES_PER_CAPACITY)).enumerate() {
        let hold_ttl = 2 + (i % 4) as i32;
        let body = json!({
            "name": format!("soak {i} (capacity {capacity})"),
            "capacity": capacity,
            "hold_ttl_seconds": hold_ttl,
            "offer_ttl_seconds": hold_ttl + 1,
        });
        resources.push(Resource { id: setup::create_resource_with(http, server, body).await?, capacity });
    }
    // Well inside the booking horizon, never in the past while the run lasts.
    let day = (Utc::now() + Span::days(40)).duration_trunc(Span::days(1)).expect("a day truncates");
    Ok(Plan { resources, day, first_hour: 8, hours: HOURS })
}

/// The whole run; `Ok(false)` when the service answered or stored something wrong.
async fn run(p: Params, database_url: String) -> Result<bool, BoxError> {
    let mut db = setup::connect(&database_url).await?;
    shared::db::migrate(&mut db).await?;
    setup::print_database_settings(&db).await?;
    // Events as the dev server sends them: its relay right after each request that
    // wrote some, to a consumer that takes them at once (the notifier's own cost is
    // not this bench's).
    let (events, mut consumer) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move { while consumer.recv().await.is_some() {} });
    let options = ServerOptions {
        pool_size: p.pool_size,
        settings: vec![("OUTBOX_RETENTION_HOURS", OUTBOX_RETENTION_HOURS.into())],
        sweep_every: Some(p.sweep_every),
        events: Events::Background(shared::outbox::Queue::Channel(events)),
    };
    let server = Server::start_with(&database_url, options).await?;
    let http = setup::http_client(p.clients);
    let plan = Arc::new(make_plan(&http, &server).await?);
    println!(
        "load: {} resources (capacity {:?}, {RESOURCES_PER_CAPACITY} each; holds lapse after 2-5 s, offers 3-6 s), \
         ranges of 1-2 h in {HOURS} h of {}",
        plan.resources.len(),
        CAPACITIES,
        plan.day.format("%Y-%m-%d")
    );
    println!("RSS is this process's: the in-process server and the load generator together");
    println!();

    let recorder = Arc::new(Recorder::new(Instant::now(), p.minute, p.minutes));
    let until = recorder.end_of(p.minutes - 1);
    let base: Arc<str> = server.base.as_str().into();
    let clients: Vec<_> = (0..p.clients)
        .map(|i| tokio::spawn(Client::new(i, http.clone(), base.clone(), plan.clone(), recorder.clone()).run(until)))
        .collect();

    println!("{}", Minute::HEADER);
    let mut minutes = Vec::with_capacity(p.minutes);
    let mut total = Period::default();
    let mut over_capacity = 0;
    for i in 0..p.minutes {
        tokio::time::sleep_until(recorder.end_of(i).into()).await;
        let rss_kib = footprint::rss_kib();
        let outbox =
            footprint::outbox(&db).await.map_err(|e| format!("reading the outbox after minute {}: {e}", i + 1))?;
        let over = footprint::over_capacity(&server, &plan.resources, plan.window()).await?;
        // Taken after the samples: an answer that came just before the minute's end
        // has been recorded by now.
        let mut period = recorder.take(i);
        let minute = Minute {
            rss_kib,
            outbox_rows: outbox.rows,
            outbox_pending: outbox.pending,
            outbox_written: outbox.written,
            ..Minute::of(i + 1, &mut period, p.minute)
        };
        println!("{}", minute.line());
        for (r, peak) in &over {
            println!("  WRONG: resource {} of capacity {} holds {peak}", r.id, r.capacity);
        }
        over_capacity += over.len();
        total.merge(period);
        minutes.push(minute);
    }
    for client in clients {
        client.await?;
    }
    total.merge(recorder.take(p.minutes));

    println!();
    let over = footprint::over_capacity(&server, &plan.resources, plan.window()).await?;
    for (r, peak) in &over {
        println!("WRONG: at the end, resource {} of capacity {} holds {peak}", r.id, r.capacity);
    }
    over_capacity += over.len();
    print_operations(&total);
    print_sizes(&footprint::relation_sizes(&db).await?);
    print_goals(&minutes, p.minute);
    Ok(print_correctness(&total, &recorder, over_capacity))
}

/// Every operation's answers over the whole run.
fn print_operations(total: &Period) {
    let mut by_op: BTreeMap<Op, Vec<String>> = BTreeMap::new();
    for ((op, outcome), n) in &total.by_op {
        by_op.entry(*op).or_default().push(format!("{outcome} x{n}"));
    }
    println!("answers by operation (whole run, {} requests):", total.outcomes.total());
    for (op, answers) in by_op {
        println!("  {:<22} {}", op.name(), answers.join(", "));
    }
    let kinds: Vec<String> = total.problems.iter().map(|(k, n)| format!("{k} {n}")).collect();
    println!("  4xx by kind: {}", if kinds.is_empty() { "none".into() } else { kinds.join(", ") });
}

fn print_sizes(sizes: &[RelationSize]) {
    let mb = |b: i64| b as f64 / (1024.0 * 1024.0);
    println!();
    println!(
        "tables after the run (MB; total = pg_total_relation_size, heap = pg_relation_size, indexes = pg_indexes_size):"
    );
    println!("  {:<17} {:>9} {:>9} {:>9} {:>9}", "table", "rows", "total", "heap", "indexes");
    for s in sizes {
        println!("  {:<17} {:>9} {:>9.2} {:>9.2} {:>9.2}", s.table, s.rows, mb(s.total), mb(s.heap), mb(s.indexes));
    }
}

/// The four goals; a MISS is printed, never a failure.
fn print_goals(minutes: &[Minute], minute: Duration) {
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    println!();
    println!("goals (a MISS does not fail the run):");
    match record::p99_drift(minutes, P99_DRIFT_LIMIT) {
        Some(d) => println!(
            "  p99 latency, last minute / first: {:.1} ms / {:.1} ms = {:.2}x (<= {P99_DRIFT_LIMIT}x): {}",
            d.last.as_secs_f64() * 1e3,
            d.first.as_secs_f64() * 1e3,
            d.ratio,
            verdict(d.pass)
        ),
        None => println!("  p99 latency: n/a (a minute without answers)"),
    }
    match record::rss_growth(minutes, RSS_GROWTH_LIMIT_PERCENT) {
        Some(g) => println!(
            "  RSS flat, last minute vs first: {:.1} MB -> {:.1} MB, {:+.1} MB ({:+.1} %) (<= {RSS_GROWTH_LIMIT_PERCENT} %): {}",
            g.first_mib,
            g.last_mib,
            g.growth_mib,
            g.percent,
            verdict(g.pass)
        ),
        None => println!("  RSS: n/a (no /proc/self/status)"),
    }
    match record::outbox_trend(minutes, OUTBOX_GROWTH_LIMIT_PERCENT) {
        Some(t) => {
            let counts: Vec<String> = t.counts.iter().map(i64::to_string).collect();
            println!("  outbox rows by minute: {}", counts.join(", "));
            println!(
                "  outbox bounded, end vs half-way: {} -> {} rows, {:+.0} rows/minute over the second half, \
                 purge seen: {} (<= +{OUTBOX_GROWTH_LIMIT_PERCENT} %): {}",
                t.halfway,
                t.last,
                t.per_minute,
                if t.shrank { "yes" } else { "no" },
                verdict(t.pass)
            );
            if !t.pass && !t.shrank {
                println!(
                    "    (expected within the hour: published rows are kept at least OUTBOX_RETENTION_HOURS, minimum 1)"
                );
            }
        }
        None => println!("  outbox bounded: n/a (needs two minutes or more)"),
    }
    match record::relay_backlog(minutes, minute, RELAY_BACKLOG_LIMIT_SECONDS) {
        Some(b) => println!(
            "  relay keeps up, unpublished at the end: {} events = {:.1} s of the last minute's {:.0} events/s \
             (<= {RELAY_BACKLOG_LIMIT_SECONDS} s): {}",
            b.pending,
            b.seconds,
            b.per_second,
            verdict(b.pass)
        ),
        None => println!("  relay keeps up: n/a (needs two minutes with events)"),
    }
}

/// What makes the run fail; `true` when nothing did.
fn print_correctness(total: &Period, recorder: &Recorder, over_capacity: usize) -> bool {
    let (mismatches, first_mismatch) = recorder.mismatches();
    let server_errors = total.class(5);
    let unanswered = total.outcomes.count(Outcome::Error);
    let correct = total.failures() == 0 && mismatches == 0 && over_capacity == 0;
    println!();
    println!(
        "correctness: 5xx {server_errors}, no answer {unanswered}, replays answered otherwise {mismatches}, \
         resources over capacity {over_capacity} (every minute and at the end): {}",
        if correct { "OK" } else { "FAIL" }
    );
    if let Some(e) = &total.first_error {
        println!("  first error: {e}");
    }
    if let Some(m) = first_mismatch {
        println!("  first replay mismatch: {m}");
    }
    correct
}
