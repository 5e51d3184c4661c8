//! The check after each phase of the core bench: no resource holds more than its
//! capacity at any instant. A fast answer is worth nothing if it double-booked, so the
//! table itself is read, not the answers.
//!
//! The load is computed here on its own, in one query over every resource, and not by
//! the service's `reservation_load`: the function under test does not judge itself.
//! Active claims count as the acceptance tests count them: a hold past its expiry does
//! not, whether or not it has been written down yet.

use crate::setup::BoxError;
use tokio_postgres::Client;

/// The peak load of every resource over its active claims, ends before starts at one
/// instant (half-open ranges), where it exceeds the capacity.
const OVER_CAPACITY: &str = r#"
    WITH live AS (
        SELECT r.resource_id, r.starts_at, r.ends_at, r.quantity
        FROM reservations r
        WHERE r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NOT (r.status = 'HELD' AND r.expires_at <= now())
    ), events AS (
        SELECT resource_id, starts_at AS at, quantity AS delta FROM live
        UNION ALL SELECT resource_id, ends_at, -quantity FROM live
    ), running AS (
        SELECT resource_id, sum(delta) OVER (PARTITION BY resource_id ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS load
        FROM events
    )
    SELECT res.id::text, res.capacity, max(running.load)::bigint AS peak
    FROM running JOIN resources res ON res.id = running.resource_id
    GROUP BY res.id, res.capacity
    HAVING max(running.load) > res.capacity"#;

pub struct Check {
    /// Active claims read, over how many resources.
    pub claims: i64,
    pub resources: i64,
    /// Each resource over its capacity: (id, capacity, peak).
    pub over: Vec<(String, i32, i64)>,
}

impl Check {
    pub fn is_correct(&self) -> bool {
        self.over.is_empty()
    }
}

pub async fn check(db: &Client) -> Result<Check, BoxError> {
    let over = db.query(OVER_CAPACITY, &[]).await?.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    let counts = db
        .query_one(
            "SELECT count(*), count(DISTINCT resource_id) FROM reservations \
             WHERE status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NOT (status = 'HELD' AND expires_at <= now())",
            &[],
        )
        .await?;
    Ok(Check { claims: counts.get(0), resources: counts.get(1), over })
}
