//! `relay-bench`: the events relay's ceiling, in events published a second.
//!
//! A throwaway database gets N unpublished `reservation.held` events in its outbox
//! (as N holds would leave them, one subject each), written by SQL. Then 1, 2 and 4
//! relays at once (`shared::outbox::relay`, each on a connection of its own, as the
//! sweeper and the dev server run it) publish them to a publisher that accepts every
//! event at once, so that the number is the outbox's side alone: the claim, the lease
//! and the mark of every event. Between runs the events are written anew. Every event
//! must be published exactly once (the reports' sum and the table agree).
//!
//! ```text
//! cargo run -p bench --release --bin relay-bench [-- --quick]
//! ```
//!
//! Environment: `BENCH_DATABASE_URL` (admin connection; default
//! `postgres://postgres@127.0.0.1:5432/postgres`).

use bench::setup::{self, BoxError};
use shared::clock::SystemClock;
use shared::config::{Config, Defaults};
use shared::outbox::Topic;
use shared::outbox::{Envelope, Publisher, relay};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Accepts every event: the relay's own cost, without a queue's.
struct Accepting;

impl Publisher for Accepting {
    async fn publish(&self, batch: &[Envelope]) -> Vec<Result<(), String>> {
        batch.iter().map(|_| Ok(())).collect()
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let quick = std::env::args().skip(1).any(|a| a == "--quick");
    let events: i64 = if quick { 20_000 } else { 100_000 };
    println!("relay bench ({})", if quick { "quick" } else { "full" });
    println!("machine: {}; {events} events per run", setup::machine());
    setup::in_fresh_database(move |url| run(url, events)).await
}

async fn run(database_url: String, events: i64) -> Result<bool, BoxError> {
    let mut db = setup::connect(&database_url).await?;
    shared::db::migrate(&mut db).await?;
    setup::print_database_settings(&db).await?;
    let url = database_url.clone();
    let mut config = Config::from_lookup(Defaults::DevServer, move |k| (k == "DATABASE_URL").then(|| url.clone()))?;
    config.database.pool_size = 4;
    let pool = shared::db::pool(&config.database)?;

    println!();
    let mut correct = true;
    for relays in [1usize, 2, 4] {
        db.batch_execute("TRUNCATE outbox, outbox_stalled_subjects").await?;
        db.execute(
            "INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at) \
             SELECT 'reservation.held', gen_random_uuid(), \
                    jsonb_build_object('id', gen_random_uuid(), 'status', 'HELD', 'quantity', 1), now(), now() \
             FROM generate_series(1, $1::bigint)",
            &[&events],
        )
        .await?;
        db.batch_execute("VACUUM ANALYZE outbox").await?;
        let started = Instant::now();
        let runs = (0..relays).map(|_| relay(&pool, &SystemClock, &Accepting, Topic::Events, Duration::from_secs(600)));
        let reports = futures::future::try_join_all(runs).await?;
        let elapsed = started.elapsed().as_secs_f64();
        let published: u64 = reports.iter().map(|r| r.published).sum();
        let left: i64 = db.query_one("SELECT count(*) FROM outbox WHERE published_at IS NULL", &[]).await?.get(0);
        if published != events as u64 || left != 0 {
            println!("FAIL: {relays} relays published {published} of {events}; {left} left unpublished");
            correct = false;
        }
        println!("  {relays} relay(s): {events} events in {elapsed:.1} s = {:.0} events/s", events as f64 / elapsed);
    }
    Ok(correct)
}
