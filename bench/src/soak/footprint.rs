//! What the run leaves behind: this process's memory, the outbox's rows, the tables'
//! sizes, and whether any resource holds more than its capacity.

use super::load::Resource;
use crate::setup::{BoxError, Server};
use chrono::{DateTime, Utc};
use tokio_postgres::Client;

/// `VmRSS` of `/proc/self/status`, in KiB: the in-process server and the load
/// generator together. `None` off Linux.
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The outbox as a minute ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outbox {
    /// Its rows, published or not (published ones stay for the retention).
    pub rows: i64,
    /// Those not yet published.
    pub pending: i64,
    /// Every event written since the start, purged ones included: the newest `seq`.
    pub written: i64,
}

/// See [`Outbox`].
pub async fn outbox(db: &Client) -> Result<Outbox, BoxError> {
    let row = db
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE published_at IS NULL), coalesce(max(seq), 0) FROM outbox",
            &[],
        )
        .await?;
    Ok(Outbox { rows: row.get(0), pending: row.get(1), written: row.get(2) })
}

/// Resources whose active claims (as the acceptance tests read them: lapsed holds do
/// not count) add up to more than their capacity at some instant of `[from, to)`,
/// with that peak.
pub async fn over_capacity(
    server: &Server,
    resources: &[Resource],
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<(Resource, i64)>, BoxError> {
    let db = server.state.pool.get().await?;
    let mut over = Vec::new();
    for r in resources {
        let peak = shared::domain::peak_load(from, to, &acceptance::active_claims(&db, r.id).await);
        if peak > i64::from(r.capacity) {
            over.push((*r, peak));
        }
    }
    Ok(over)
}

pub const TABLES: [&str; 5] = ["reservations", "waitlist_entries", "outbox", "idempotency_keys", "intents"];

#[derive(Debug, Clone)]
pub struct RelationSize {
    pub table: &'static str,
    pub rows: i64,
    /// `pg_total_relation_size`: heap, indexes and TOAST.
    pub total: i64,
    /// `pg_relation_size`: the heap's main fork.
    pub heap: i64,
    /// `pg_indexes_size`.
    pub indexes: i64,
}

pub async fn relation_sizes(db: &Client) -> Result<Vec<RelationSize>, BoxError> {
    let mut sizes = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        // The names are the constants above, never input.
        let row = db
            .query_one(
                &format!(
                    "SELECT (SELECT count(*) FROM {table}), pg_total_relation_size('{table}'), \
                     pg_relation_size('{table}'), pg_indexes_size('{table}')"
                ),
                &[],
            )
            .await?;
        sizes.push(RelationSize { table, rows: row.get(0), total: row.get(1), heap: row.get(2), indexes: row.get(3) });
    }
    Ok(sizes)
}
