//! `fill-bench`: one range of one big resource sold out by many people at once (a
//! concert's standing area, a conference, a webinar): whether a hold's cost stays the
//! same however many holds the range already has, and how fast a sold-out range and a
//! day's slots are read at that size.
//!
//! A resource of capacity N gets N holds of one range, quantity 1, each by a principal
//! of its own, from 32 connections; then N/5 more requests (at least 100), which must
//! all be refused (sold out); then the slots and availability reads of the day. Printed:
//!
//! - the rate of each block of N/10 holds and the last block's over the first's (goal:
//!   at least 80 %: a hold's cost does not grow with the holds already made);
//! - the fill's rate against the serialized baseline (e): lock one row, insert one row,
//!   commit, at the same concurrency (goal: at least 60 %);
//! - the sold-out refusals' rate against the fill's (goal: at least as fast);
//! - the slots read's p95 over 200 reads of the day (goal: at most 20 ms);
//! - the availability read's p95 over 20 reads of the day, and its answer's size (its
//!   first page of claims), then the time to read every page once (which must list as
//!   many claims as there are bookings).
//!
//! Then the same for a resource of a fifth of N with calendar rules (a notice of one
//! minute: the hold then also judges the ranges the bookings keep), and for one of
//! capacity 200 (a class, a small venue).
//!
//! Exit 1 when the service is wrong: not exactly N winners, a 5xx or no answer, a
//! resource over its capacity, or a load timeline that differs from the bookings
//! (`resource_load_mismatches()`, when the server's schema has one).
//!
//! ```text
//! cargo run -p bench --release --bin fill-bench [-- --quick]   (quick: 10,000, 2,000 and 200)
//! ```
//!
//! Where the server runs without autovacuum (this machine's PostgreSQL), the bench
//! analyzes the bookings as autovacuum's defaults would (10 % and 50 rows more): the
//! planner needs the statistics to see that a lapsed hold is rare.
//!
//! Environment: `BENCH_DATABASE_URL` (admin connection; default
//! `postgres://postgres@127.0.0.1:5432/postgres`). To measure another build's server
//! (an older dev server, on a database of its own): `FILL_BENCH_SERVER` (its base URL)
//! and `FILL_BENCH_DATABASE_URL` (its database); the bench then starts no server.

use bench::setup::{self, BoxError, Server};
use bench::stats::{Outcome, Summary, ms};
use bench::throughput::{self, Phases};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const CONNECTIONS: usize = 32;
const BLOCKS: u64 = 10;
const LAST_OVER_FIRST_GOAL: f64 = 0.8;
const OF_SERIALIZED_GOAL: f64 = 0.6;
const SLOTS_P95_GOAL_MS: f64 = 20.0;
const SLOTS_READS: usize = 200;
const AVAILABILITY_READS: usize = 20;

#[tokio::main]
async fn main() -> ExitCode {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    let big: u64 = if quick { 10_000 } else { 50_000 };
    println!("fill bench ({}); machine: {}", if quick { "quick" } else { "full" }, setup::machine());
    match (std::env::var("FILL_BENCH_SERVER"), std::env::var("FILL_BENCH_DATABASE_URL")) {
        (Ok(base), Ok(database_url)) => {
            println!("server: {base} (started elsewhere), database {database_url}");
            match run(Target::Elsewhere { base, database_url }, big).await {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("fill-bench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => setup::in_fresh_database(move |url| run(Target::Here(url), big)).await,
    }
}

/// The server measured: this build's, started here on a fresh database, or another
/// build's, already running.
enum Target {
    Here(String),
    Elsewhere { base: String, database_url: String },
}

async fn run(target: Target, big: u64) -> Result<bool, BoxError> {
    let (base, database_url, _server) = match target {
        Target::Here(url) => {
            let mut db = setup::connect(&url).await?;
            shared::db::migrate(&mut db).await?;
            let server = Server::start(&url, 16).await?;
            (server.base.clone(), url, Some(server))
        }
        Target::Elsewhere { base, database_url } => (base, database_url, None),
    };
    let db = setup::connect(&database_url).await?;
    let http = setup::http_client(CONNECTIONS);

    // The serialized baseline (e), at the same concurrency, for the fill's share.
    let phases = Phases { warmup: Duration::from_secs(1), measure: Duration::from_secs(5) };
    let serialized = throughput::sql_locked_inserts(&database_url, CONNECTIONS, phases, None).await?;
    let serialized_rate = serialized.per_second();
    println!("(e) serialized baseline, {CONNECTIONS} connections: {serialized_rate:.0}/s");

    // The planner judges what is rare (a lapsed hold) by the table's statistics. Where
    // the server runs without autovacuum (this machine's PostgreSQL), the bench analyzes
    // as autovacuum's defaults would: once the table has grown by 10 % and 50 rows.
    let autovacuum: String = db.query_one("SELECT current_setting('autovacuum')", &[]).await?.get(0);
    let _analyzer = (autovacuum == "off").then(|| {
        println!("autovacuum is off on this server: the bench analyzes the bookings as its defaults would");
        let url = database_url.clone();
        tokio::spawn(async move { analyze_as_autovacuum(&url).await })
    });

    let halls = [
        Hall { capacity: big, rules: serde_json::json!({}), what: "" },
        Hall { capacity: big / 5, rules: serde_json::json!({"min_notice_minutes": 1}), what: ", calendar rules" },
        Hall { capacity: 200, rules: serde_json::json!({}), what: "" },
    ];
    let mut correct = true;
    for hall in &halls {
        correct &= fill(&http, &base, &db, hall, serialized_rate).await?;
    }
    Ok(correct)
}

/// One resource to fill: its capacity, the calendar rules it is created with and the
/// words that say so.
struct Hall {
    capacity: u64,
    rules: serde_json::Value,
    what: &'static str,
}

/// Fills one resource, then asks for a fifth more, then reads its slots and availability.
async fn fill(
    http: &reqwest::Client,
    base: &str,
    db: &tokio_postgres::Client,
    hall: &Hall,
    serialized_rate: f64,
) -> Result<bool, BoxError> {
    let capacity = hall.capacity;
    let mut created = serde_json::json!({"name": format!("hall-{capacity}"), "capacity": capacity});
    created.as_object_mut().expect("an object").extend(hall.rules.as_object().expect("an object").clone());
    let resource = setup::create_resource_at(http, base, created).await?;
    let day = chrono::Utc::now().date_naive() + chrono::Days::new(30);
    let start = day.and_hms_opt(18, 0, 0).unwrap().and_utc();
    let end = day.and_hms_opt(22, 0, 0).unwrap().and_utc();
    let body = serde_json::json!({"resource_id": resource, "start": start, "end": end});
    println!();
    println!("(f) one resource of capacity {capacity}{}, one range, quantity 1, {CONNECTIONS} connections", hall.what);

    let block = (capacity / BLOCKS).max(1);
    let url = format!("{base}/v1/reservations");
    let fill = send_holds(http, &url, &body, capacity, "fan", block).await?;
    let won = fill.created;
    let rates: Vec<f64> =
        fill.crossings.windows(2).map(|w| block as f64 / (w[1] - w[0]).as_secs_f64().max(1e-9)).collect();
    let line: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    println!("  holds/s by block of {block}: {}", line.join(", "));
    let fill_rate = won as f64 / fill.took.as_secs_f64();
    println!("  {won} holds in {:.1} s: {fill_rate:.0}/s", fill.took.as_secs_f64());
    if let (Some(first), Some(last)) = (rates.first(), rates.last()) {
        let ratio = last / first;
        println!(
            "  the last block's rate over the first's: {ratio:.2} ({})",
            verdict(ratio >= LAST_OVER_FIRST_GOAL, &format!("goal: at least {LAST_OVER_FIRST_GOAL}"))
        );
    }
    let share = fill_rate / serialized_rate;
    println!(
        "  the fill's rate over the serialized baseline (e): {:.1} % ({})",
        share * 100.0,
        verdict(share >= OF_SERIALIZED_GOAL, &format!("goal: at least {:.0} %", OF_SERIALIZED_GOAL * 100.0))
    );

    // Sold out: every further request refused.
    let extra = (capacity / 5).max(100);
    let late = send_holds(http, &url, &body, extra, "late", u64::MAX).await?;
    let refused_rate = late.refused as f64 / late.took.as_secs_f64();
    println!(
        "  {extra} more requests, sold out: {} refused, {refused_rate:.0}/s, {:.2}x the fill's rate ({})",
        late.refused,
        refused_rate / fill_rate,
        verdict(refused_rate >= fill_rate, "goal: at least as fast as the fill")
    );

    // The reads of the day: its slots, and its availability (the free pieces, and the
    // bookings a page at a time).
    let (midnight, next) = (day.and_hms_opt(0, 0, 0).unwrap().and_utc(), day + chrono::Days::new(1));
    let window = format!(
        "from={}&to={}",
        midnight.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        next.and_hms_opt(0, 0, 0).unwrap().and_utc().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    );
    let slots = read_repeatedly(
        http,
        &format!("{base}/v1/resources/{resource}/slots?{window}&duration=PT4H&quantity=1"),
        SLOTS_READS,
    )
    .await;
    println!(
        "  the day's slots read, {SLOTS_READS} times: p50 {} p95 {} ({})",
        ms(slots.summary.p50),
        ms(slots.summary.p95),
        verdict(
            slots.summary.p95.as_secs_f64() * 1000.0 <= SLOTS_P95_GOAL_MS,
            &format!("goal: at most {SLOTS_P95_GOAL_MS} ms")
        )
    );
    let availability =
        read_repeatedly(http, &format!("{base}/v1/resources/{resource}/availability?{window}"), AVAILABILITY_READS)
            .await;
    println!(
        "  the day's availability read, {AVAILABILITY_READS} times: p50 {} p95 {}, {:.2} MB an answer",
        ms(availability.summary.p50),
        ms(availability.summary.p95),
        availability.bytes as f64 / AVAILABILITY_READS as f64 / 1e6,
    );
    // Every page of the claims, once: as many claims as bookings.
    let (at, mut listed, mut pages, mut cursor) = (Instant::now(), 0u64, 0, None::<String>);
    let claims = format!("{base}/v1/resources/{resource}/availability?{window}");
    let mut page_failures = 0;
    loop {
        let mut ask = http.get(&claims).header("x-principal", "reader");
        if let Some(c) = &cursor {
            ask = ask.query(&[("cursor", c)]);
        }
        let page: serde_json::Value = match ask.send().await {
            Ok(r) if r.status() == 200 => r.json().await?,
            _ => {
                page_failures += 1;
                break;
            }
        };
        pages += 1;
        listed += page["taken"].as_array().map_or(0, |t| t.len() as u64);
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    println!("  every claim by availability's pages: {listed} claims in {pages} answers, {} in all", ms(at.elapsed()));
    if listed != won {
        println!("FAIL: the pages listed {listed} claims of {won}");
        page_failures += 1;
    }
    let read_failures = slots.failures + availability.failures + page_failures;

    let mut correct = true;
    if won != capacity || fill.refused + fill.other > 0 {
        println!("FAIL: {won} winners of {capacity}, {} other answers", fill.refused + fill.other);
        correct = false;
    }
    if late.created + late.other > 0 || read_failures > 0 {
        println!("FAIL: {} sold-out requests not refused, {read_failures} reads failed", late.created + late.other);
        correct = false;
    }
    let check = bench::capacity::check(db).await?;
    if !check.is_correct() {
        println!("FAIL: resources over capacity: {:?}", check.over);
        correct = false;
    }
    let has_timeline: bool =
        db.query_one("SELECT to_regproc('resource_load_mismatches') IS NOT NULL", &[]).await?.get(0);
    if has_timeline {
        let mismatches: i64 = db.query_one("SELECT count(*) FROM resource_load_mismatches()", &[]).await?.get(0);
        println!("  the load timeline against the bookings, recomputed in SQL: {mismatches} differences");
        correct &= mismatches == 0;
    } else {
        println!("  (this server's schema has no load timeline)");
    }
    Ok(correct)
}

/// What [`read_repeatedly`] saw.
struct Reads {
    summary: Summary,
    /// Answers other than a 200 whose body could be read.
    failures: usize,
    /// The bodies' bytes, all reads together.
    bytes: usize,
}

/// Reads `url` `times` times, one after the other, timing each until its body is in.
async fn read_repeatedly(http: &reqwest::Client, url: &str, times: usize) -> Reads {
    let (mut samples, mut failures, mut bytes) = (Vec::with_capacity(times), 0, 0);
    for _ in 0..times {
        let at = Instant::now();
        let body = match http.get(url).header("x-principal", "reader").send().await {
            Ok(r) if r.status() == 200 => r.bytes().await.ok(),
            _ => None,
        };
        samples.push(at.elapsed());
        match body {
            Some(b) => bytes += b.len(),
            None => failures += 1,
        }
    }
    Reads { summary: Summary::of(samples).expect("some reads"), failures, bytes }
}

/// What [`send_holds`] got back.
#[derive(Default)]
struct Answers {
    created: u64,
    refused: u64,
    /// Anything else: another status, an error or no answer.
    other: u64,
    /// When the first hold was sent, then when every `block`-th creation came.
    crossings: Vec<Duration>,
    took: Duration,
}

/// `count` requests of one hold, each by a principal of its own (`{who}-{n}`), from
/// [`CONNECTIONS`] workers at once, each sending its next as soon as its last is
/// answered.
async fn send_holds(
    http: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
    count: u64,
    who: &str,
    block: u64,
) -> Result<Answers, BoxError> {
    let next = Arc::new(AtomicU64::new(0));
    let answers = Arc::new(std::sync::Mutex::new(Answers { crossings: vec![Duration::ZERO], ..Answers::default() }));
    let started = Instant::now();
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let (http, url, body, who) = (http.clone(), url.to_string(), body.clone(), who.to_string());
            let (next, answers) = (next.clone(), answers.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= count {
                        return;
                    }
                    let request = http.post(&url).header("x-principal", format!("{who}-{n}")).json(&body).build();
                    let outcome = setup::send(&http, request.expect("a request with a JSON body builds")).await;
                    let mut answers = answers.lock().unwrap();
                    match outcome {
                        Ok(Outcome::Status(201)) => {
                            answers.created += 1;
                            if answers.created % block == 0 {
                                answers.crossings.push(started.elapsed());
                            }
                        }
                        Ok(Outcome::Status(409)) => answers.refused += 1,
                        _ => answers.other += 1,
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await?;
    }
    let mut answers = std::mem::take(&mut *answers.lock().unwrap());
    answers.took = started.elapsed();
    Ok(answers)
}

/// `ANALYZE reservations` whenever the table has grown by 10 % and 50 rows since the
/// last one (autovacuum's default threshold), checked every second, until dropped.
async fn analyze_as_autovacuum(url: &str) -> Result<(), BoxError> {
    let db = setup::connect(url).await?;
    let mut analyzed_at = 0_i64;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rows: i64 = db.query_one("SELECT count(*) FROM reservations", &[]).await?.get(0);
        if rows - analyzed_at > 50 + analyzed_at / 10 {
            db.batch_execute("ANALYZE reservations").await?;
            analyzed_at = rows;
        }
    }
}

fn verdict(met: bool, goal: &str) -> String {
    format!("{}, {goal}", if met { "met" } else { "MISS" })
}
