//! SQL for the `upstream_breakers` table: the circuit breaker shared by every instance.

use super::{DbError, GenericClient};
use chrono::{DateTime, Utc};
use uuid::Uuid;

statements![READ, TAKE_PROBE, FAILURE, SUCCESS];

pub const READ: &str = "SELECT consecutive_failures, open_until FROM upstream_breakers WHERE name = $1";

/// One probe may pass once the cool-down is over; whoever sets `probe_owner` first is it.
pub const TAKE_PROBE: &str = "UPDATE upstream_breakers SET probe_owner = $2, probe_until = $4, updated_at = $3 \
     WHERE name = $1 AND open_until IS NOT NULL AND open_until <= $3 AND (probe_until IS NULL OR probe_until <= $3) \
     RETURNING 1";

/// A failure: count it; at the threshold, or when the probe failed, open (again) for
/// the cool-down.
pub const FAILURE: &str = "INSERT INTO upstream_breakers AS b (name, consecutive_failures, open_until, updated_at) \
     VALUES ($1, 1, CASE WHEN $3::int4 <= 1 THEN $2::timestamptz + $4::float8 * interval '1 millisecond' END, $2) \
     ON CONFLICT (name) DO UPDATE SET consecutive_failures = b.consecutive_failures + 1, \
       open_until = CASE WHEN b.probe_owner = $5 OR b.consecutive_failures + 1 >= $3 \
         THEN $2 + $4 * interval '1 millisecond' ELSE b.open_until END, \
       probe_owner = CASE WHEN b.probe_owner = $5 THEN NULL ELSE b.probe_owner END, \
       probe_until = CASE WHEN b.probe_owner = $5 THEN NULL ELSE b.probe_until END, \
       updated_at = $2 \
     RETURNING open_until";

pub const SUCCESS: &str = "UPDATE upstream_breakers SET consecutive_failures = 0, open_until = NULL, probe_owner = NULL, \
     probe_until = NULL, updated_at = $2 WHERE name = $1 AND (consecutive_failures > 0 OR open_until IS NOT NULL)";

pub async fn read(c: &impl GenericClient, name: &str) -> Result<Option<(i32, Option<DateTime<Utc>>)>, DbError> {
    c.opt_row(READ, &[&name]).await?.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
}

pub async fn take_probe(
    c: &impl GenericClient,
    name: &str,
    owner: Uuid,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<bool, DbError> {
    Ok(c.opt_row(TAKE_PROBE, &[&name, &owner, &now, &until]).await?.is_some())
}

pub async fn failure(
    c: &impl GenericClient,
    name: &str,
    now: DateTime<Utc>,
    threshold: i32,
    open_for: chrono::Duration,
    probe_owner: Option<Uuid>,
) -> Result<Option<DateTime<Utc>>, DbError> {
    let open_ms = open_for.num_milliseconds() as f64;
    Ok(c.row(FAILURE, &[&name, &now, &threshold, &open_ms, &probe_owner]).await?.try_get(0)?)
}

pub async fn success(c: &impl GenericClient, name: &str, now: DateTime<Utc>) -> Result<(), DbError> {
    c.exec(SUCCESS, &[&name, &now]).await?;
    Ok(())
}
