//! `slots-bench`: what listing a month of bookable starts costs on a busy resource.
//!
//! A throwaway database gets one resource with a full weekly schedule (every day
//! 08:00-20:00 in `Europe/Berlin`), 10-minute buffers either side and a 30-minute
//! grid, and 10,000 confirmed bookings of 30 minutes, one every 2 hours, written by
//! SQL (a trigger keeps their buffered ranges) and analyzed. Then one client
//! asks the in-process dev server, one request after the other, for the slots of a
//! month (`GET /v1/resources/{id}/slots?duration=PT30M`) at different months among
//! the bookings. Every answer must be a 200 with slots; the latency of each request
//! (request to whole body) is kept, and p50, p95, p99 and the maximum are printed.
//!
//! ```text
//! cargo run -p bench --release --bin slots-bench [-- --quick]
//! ```
//!
//! Environment: `BENCH_DATABASE_URL` (admin connection; default
//! `postgres://postgres@127.0.0.1:5432/postgres`).

use bench::setup::{self, BoxError, Server};
use bench::stats::{Summary, ms};
use chrono::{Duration, DurationRound, Utc};
use serde_json::json;
use std::process::ExitCode;
use std::time::Instant;

const BOOKINGS: i64 = 10_000;

#[tokio::main]
async fn main() -> ExitCode {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    println!("slots bench ({})", if quick { "quick" } else { "full" });
    println!("machine: {}; data: one resource, {BOOKINGS} bookings, a full weekly schedule", setup::machine());
    setup::in_fresh_database(move |url| run(url, quick)).await
}

async fn run(database_url: String, quick: bool) -> Result<bool, BoxError> {
    let mut db = setup::connect(&database_url).await?;
    shared::db::migrate(&mut db).await?;
    setup::print_database_settings(&db).await?;
    let server = Server::start(&database_url, 4).await?;
    let http = setup::http_client(4);
    setup::health(&http, &server).await?;

    let day = json!([["08:00", "20:00"]]);
    let resource = setup::create_resource_with(
        &http,
        &server,
        json!({
            "name": "Busy room",
            "capacity": 1,
            "time_zone": "Europe/Berlin",
            "schedule": {"weekly": {"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day},
                         "exceptions": []},
            "buffer_before_minutes": 10,
            "buffer_after_minutes": 10,
            "slot_minutes": 30
        }),
    )
    .await?;
    let first = (Utc::now() + Duration::days(1)).duration_trunc(Duration::days(1))?;
    let started = Instant::now();
    db.execute(
        "INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, status, \
         expires_at, source, created_at, updated_at) \
         SELECT gen_random_uuid(), $1, 1, 'owner-' || (i % 100), $2::timestamptz + i * interval '120 minutes', \
                $2::timestamptz + i * interval '120 minutes' + interval '30 minutes', 1, 'CONFIRMED', NULL, \
                'request', now(), now() \
         FROM generate_series(0, $3::bigint - 1) AS i",
        &[&resource, &first, &BOOKINGS],
    )
    .await?;
    db.batch_execute("ANALYZE reservations").await?;
    println!("{BOOKINGS} bookings written and analyzed in {:.1} s", started.elapsed().as_secs_f64());

    // The bookings span 833 days (beyond the horizon of 730); months are asked among them.
    let requests = if quick { 20 } else { 200 };
    let mut latencies = Vec::with_capacity(requests);
    let mut slots_seen = 0usize;
    let mut correct = true;
    for i in 0..requests {
        let from = first + Duration::days(10 + (i as i64 * 37) % 560);
        let to = from + Duration::days(30);
        let path = format!(
            "/v1/resources/{resource}/slots?from={}&to={}&duration=PT30M",
            from.to_rfc3339().replace('+', "%2B"),
            to.to_rfc3339().replace('+', "%2B")
        );
        let request = http.get(server.url(&path)).header("x-principal", "bench").build()?;
        let sent = Instant::now();
        let (status, body) = setup::exchange(&http, request).await?;
        latencies.push(sent.elapsed());
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let n = body["slots"].as_array().map_or(0, Vec::len);
        if status != 200 || n == 0 {
            println!("FAIL: {path}: {status} {body}");
            correct = false;
            break;
        }
        slots_seen += n;
    }
    println!();
    println!(
        "one client, a month of 30-minute slots per request ({} slots per answer on average)",
        slots_seen / requests
    );
    let summary = Summary::of(latencies);
    println!("  {}", summary.as_ref().map_or_else(|| "no samples".into(), |s| s.to_string()));
    println!(
        "p95 of a month of slots on {BOOKINGS} bookings: {} (target: at most 20 ms)",
        summary.map_or_else(|| "n/a".into(), |s| ms(s.p95))
    );
    Ok(correct)
}
