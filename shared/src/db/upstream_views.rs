//! SQL for the `upstream_views` table: the shared cache of the upstream's view of a
//! seat, with a refresh lease so that one reader refreshes while the others wait.

use super::{DbError, GenericClient};
use chrono::{DateTime, Utc};
use uuid::Uuid;

statements![READ, TAKE_REFRESH, STORE, GIVE_BACK];

pub const READ: &str = "SELECT taken, fetched_at FROM upstream_views \
     WHERE upstream_ref = $1 AND window_start = $2 AND window_end = $3";

/// Takes the refresh lease if the view is stale and nobody holds a live lease.
pub const TAKE_REFRESH: &str = "INSERT INTO upstream_views AS v (upstream_ref, window_start, window_end, refresh_owner, \
       refreshing_until) VALUES ($1, $2, $3, $4, $6) \
     ON CONFLICT (upstream_ref, window_start, window_end) DO UPDATE SET refresh_owner = $4, refreshing_until = $6 \
     WHERE (v.fetched_at IS NULL OR v.fetched_at <= $5::timestamptz - $7::float8 * interval '1 millisecond') \
       AND (v.refreshing_until IS NULL OR v.refreshing_until <= $5) \
     RETURNING 1";

pub const STORE: &str = "UPDATE upstream_views SET taken = $4, fetched_at = $5, refresh_owner = NULL, \
     refreshing_until = NULL WHERE upstream_ref = $1 AND window_start = $2 AND window_end = $3";

pub const GIVE_BACK: &str = "UPDATE upstream_views SET refresh_owner = NULL, refreshing_until = NULL \
     WHERE upstream_ref = $1 AND window_start = $2 AND window_end = $3 AND refresh_owner = $4";

pub struct Key<'a> {
    pub seat: &'a str,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

pub async fn read(c: &impl GenericClient, k: &Key<'_>) -> Result<Option<(serde_json::Value, DateTime<Utc>)>, DbError> {
    let Some(r) = c.opt_row(READ, &[&k.seat, &k.start, &k.end]).await? else { return Ok(None) };
    let taken: Option<serde_json::Value> = r.try_get(0)?;
    let at: Option<DateTime<Utc>> = r.try_get(1)?;
    Ok(taken.zip(at))
}

pub async fn take_refresh(
    c: &impl GenericClient,
    k: &Key<'_>,
    owner: Uuid,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    ttl_ms: i64,
) -> Result<bool, DbError> {
    let ttl = ttl_ms as f64;
    Ok(c.opt_row(TAKE_REFRESH, &[&k.seat, &k.start, &k.end, &owner, &now, &until, &ttl]).await?.is_some())
}

pub async fn store(
    c: &impl GenericClient,
    k: &Key<'_>,
    taken: &serde_json::Value,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(STORE, &[&k.seat, &k.start, &k.end, taken, &now]).await?;
    Ok(())
}

pub async fn give_back(c: &impl GenericClient, k: &Key<'_>, owner: Uuid) -> Result<(), DbError> {
    c.exec(GIVE_BACK, &[&k.seat, &k.start, &k.end, &owner]).await?;
    Ok(())
}
