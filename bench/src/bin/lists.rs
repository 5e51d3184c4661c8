//! `lists-bench`: what fetching a page of a list costs on a million reservations.
//!
//! A throwaway database is filled by SQL alone (the acceptance tests' `bulk` data: a
//! million reservations of 10,000 owners over 2,000 resources, a tenth of them active,
//! and 100,000 waitlist entries), analyzed, and served by the in-process dev server.
//! Then, for each way a client asks for a list, one client fetches pages through HTTP
//! one after the other: walks of several pages from the first, each next page by the
//! cursor the one before gave, for different owners and resources. Every answer must be
//! a 200 with its items; the latency of each fetch (request to whole body) is kept, and
//! the p50, p95, p99 and maximum are printed per list and over all of them.
//!
//! ```text
//! cargo run -p bench --release --bin lists-bench [-- --quick]
//! ```
//!
//! Environment: `BENCH_DATABASE_URL` (admin connection; default
//! `postgres://postgres@127.0.0.1:5432/postgres`).

use acceptance::bulk;
use bench::setup::{self, BoxError, Server};
use bench::stats::{Summary, ms};
use chrono::Duration as Days;
use std::process::ExitCode;
use std::time::Instant;

/// One way of asking: who asks, and the path of the first page of a walk `i`.
struct Shape {
    name: &'static str,
    who: fn(i64) -> String,
    path: fn(i64) -> String,
    walks: i64,
}

/// Walk `i`'s owner: a prime stride spreads the walks over the owners.
fn user(i: i64) -> String {
    bulk::owner((i * 7919) % bulk::OWNERS)
}

/// Walk `i`'s resource, spread as [`user`] spreads the owners.
fn resource(i: i64) -> uuid::Uuid {
    bulk::resource((i * 7919) % bulk::RESOURCES)
}

/// The list of one resource's reservations, for walk `i`.
fn by_resource(i: i64) -> String {
    format!("/v1/reservations?resource_id={}", resource(i))
}

fn admin(_: i64) -> String {
    "admin".into()
}

/// A day of the calendar whose reservations were written among the newest rows.
const RECENT_DAY: i64 = 200;
/// A day whose reservations were written half a million rows back.
const OLD_DAY: i64 = 100;

/// `from=...&to=...` for the whole of the data's day `day`.
fn window(day: i64) -> String {
    let from = bulk::first_day() + Days::days(day);
    format!("from={}&to={}", from.to_rfc3339(), (from + Days::days(1)).to_rfc3339()).replace('+', "%2B")
}

fn shapes(quick: bool) -> Vec<Shape> {
    let walks = if quick { 4 } else { 40 };
    vec![
        Shape { name: "own list", who: user, path: |_| "/v1/reservations".into(), walks },
        Shape { name: "own list by resource", who: user, path: by_resource, walks },
        Shape { name: "own list by status", who: user, path: |_| "/v1/reservations?status=CONFIRMED".into(), walks },
        Shape {
            name: "own list in a window",
            who: user,
            path: |_| {
                format!("/v1/reservations?from={}", (bulk::first_day() + Days::days(100)).to_rfc3339())
                    .replace('+', "%2B")
            },
            walks,
        },
        Shape { name: "admin: everyone's", who: admin, path: |_| "/v1/reservations".into(), walks },
        Shape { name: "admin: by owner", who: admin, path: |i| format!("/v1/reservations?owner={}", user(i)), walks },
        Shape { name: "admin: by resource", who: admin, path: by_resource, walks },
        Shape {
            name: "admin: by status",
            who: admin,
            path: |_| "/v1/reservations?status=HELD&status=CONFIRMED".into(),
            walks,
        },
        Shape {
            name: "admin: in a recent window",
            who: admin,
            path: |_| format!("/v1/reservations?{}", window(RECENT_DAY)),
            walks,
        },
        // The one list whose filter no index bounds: a window whose reservations were
        // written long ago is found by walking everyone's, newest first, to it.
        Shape {
            name: "admin: in an old window",
            who: admin,
            path: |_| format!("/v1/reservations?{}", window(OLD_DAY)),
            walks: if quick { 1 } else { 4 },
        },
        Shape { name: "resources", who: user, path: |_| "/v1/resources".into(), walks },
        Shape {
            name: "a waitlist",
            who: admin,
            path: |i| format!("/v1/resources/{}/waitlist?limit=20", resource(i)),
            walks,
        },
    ]
}

/// Pages per walk: the first and the next four, by their cursors.
const PAGES_PER_WALK: usize = 5;

#[tokio::main]
async fn main() -> ExitCode {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    println!("lists bench ({})", if quick { "quick" } else { "full" });
    println!(
        "machine: {}; data: {} reservations, {} owners, {} resources, {} waitlist entries",
        setup::machine(),
        bulk::RESERVATIONS,
        bulk::OWNERS,
        bulk::RESOURCES,
        bulk::WAITLIST_ENTRIES
    );
    setup::in_fresh_database(move |url| run(url, quick)).await
}

async fn run(database_url: String, quick: bool) -> Result<bool, BoxError> {
    let mut db = setup::connect(&database_url).await?;
    shared::db::migrate(&mut db).await?;
    setup::print_database_settings(&db).await?;
    let started = Instant::now();
    bulk::fill(&db).await?;
    println!("filled and analyzed in {:.1} s", started.elapsed().as_secs_f64());
    let server = Server::start(&database_url, 4).await?;
    let http = setup::http_client(4);
    setup::health(&http, &server).await?;

    println!();
    println!("one client, pages of 50 (the default; 20 for the waitlist), walks of {PAGES_PER_WALK} pages by cursor");
    let mut all = Vec::new();
    let mut correct = true;
    for shape in shapes(quick) {
        let mut latencies = Vec::new();
        let mut items = 0usize;
        for i in 0..shape.walks {
            let (who, first) = ((shape.who)(i), (shape.path)(i));
            let mut cursor: Option<String> = None;
            for _ in 0..PAGES_PER_WALK {
                let path = match &cursor {
                    None => first.clone(),
                    Some(c) => format!("{first}{}cursor={c}", if first.contains('?') { '&' } else { '?' }),
                };
                let request = http.get(server.url(&path)).header("x-principal", &who).build()?;
                let sent = Instant::now();
                let (status, body) = setup::exchange(&http, request).await?;
                latencies.push(sent.elapsed());
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                if status != 200 || !body["items"].is_array() {
                    println!("FAIL: {} {path} as {who}: {status} {body}", shape.name);
                    correct = false;
                    break;
                }
                items += body["items"].as_array().map_or(0, Vec::len);
                match body["next_cursor"].as_str() {
                    Some(next) => cursor = Some(next.to_string()),
                    None => break,
                }
            }
        }
        all.extend(latencies.iter().copied());
        let summary = Summary::of(latencies).map_or_else(|| "no samples".into(), |s| s.to_string());
        println!("  {:<26} {summary}  ({items} items)", shape.name);
    }
    println!();
    let everything = Summary::of(all);
    println!(
        "p95 of fetching a page, every list: {}",
        everything.map_or_else(|| "n/a".into(), |s| format!("{}  ({s})", ms(s.p95)))
    );
    Ok(correct)
}
