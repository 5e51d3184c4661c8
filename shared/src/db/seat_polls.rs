//! SQL for the `seat_polls` table: when each upstream seat with waiters is read next,
//! and the backoff of a seat that stays taken. Last in the lock order.

use super::{DbError, GenericClient};
use chrono::{DateTime, Utc};
use uuid::Uuid;

statements![SCHEDULE, DEFER, CLAIM_DUE, RESCHEDULE, FORGET];

/// Asks for a poll of the seat at `$2` at the latest (a join, capacity freed locally):
/// an earlier poll already planned stands, and the backoff starts again.
pub const SCHEDULE: &str = r#"
    INSERT INTO seat_polls AS s (resource_id, next_poll_at, idle_polls, updated_at)
    VALUES ($1, $2, 0, $2)
    ON CONFLICT ON CONSTRAINT seat_polls_pkey DO UPDATE
    SET next_poll_at = least(s.next_poll_at, excluded.next_poll_at), idle_polls = 0, updated_at = excluded.updated_at"#;

/// Puts the seat's next poll off to `$2` (a race just lost: the cached view that showed
/// the seat free is stale until then). `$3` is now.
pub const DEFER: &str = r#"
    INSERT INTO seat_polls AS s (resource_id, next_poll_at, idle_polls, updated_at)
    VALUES ($1, $2, 0, $3)
    ON CONFLICT ON CONSTRAINT seat_polls_pkey DO UPDATE
    SET next_poll_at = excluded.next_poll_at, updated_at = excluded.updated_at"#;

/// The poller's claim of due seats: each is leased (its next poll pushed to `$3`), so
/// that a concurrent poller skips it. Rows: the resource, its upstream ref, and the
/// polls in a row that found it taken.
pub const CLAIM_DUE: &str = r#"
    WITH due AS (
        SELECT resource_id FROM seat_polls
        WHERE next_poll_at <= $1
        ORDER BY next_poll_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    )
    UPDATE seat_polls s SET next_poll_at = $3, updated_at = $1
    FROM due, resources r
    WHERE s.resource_id = due.resource_id AND r.id = s.resource_id
    RETURNING s.resource_id, r.upstream_ref, s.idle_polls"#;

/// After a poll: the next one at `$2`, with `$3` idle polls in a row. Fenced by the
/// lease `$4`: a join or a free meanwhile asked for an earlier poll, which stands.
pub const RESCHEDULE: &str = "UPDATE seat_polls SET next_poll_at = $2, idle_polls = $3, updated_at = $5 \
     WHERE resource_id = $1 AND next_poll_at = $4";

/// A seat nobody waits for any more is not polled (a join schedules it again).
pub const FORGET: &str = "DELETE FROM seat_polls WHERE resource_id = $1 AND next_poll_at = $2";

/// A seat leased by [`claim_due`].
#[derive(Debug, Clone)]
pub struct DueSeat {
    pub resource_id: Uuid,
    pub seat: String,
    pub idle_polls: i32,
    pub lease_until: DateTime<Utc>,
}

pub async fn schedule(c: &impl GenericClient, resource_id: Uuid, at: DateTime<Utc>) -> Result<(), DbError> {
    c.exec(SCHEDULE, &[&resource_id, &at]).await?;
    Ok(())
}

pub async fn defer(
    c: &impl GenericClient,
    resource_id: Uuid,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(DEFER, &[&resource_id, &until, &now]).await?;
    Ok(())
}

pub async fn claim_due(
    c: &impl GenericClient,
    now: DateTime<Utc>,
    limit: i64,
    lease_until: DateTime<Utc>,
) -> Result<Vec<DueSeat>, DbError> {
    c.rows(CLAIM_DUE, &[&now, &limit, &lease_until])
        .await?
        .iter()
        .map(|r| {
            Ok(DueSeat {
                resource_id: r.try_get(0)?,
                seat: r
                    .try_get::<_, Option<String>>(1)?
                    .ok_or(DbError::Corrupt("upstream seat without a ref".into()))?,
                idle_polls: r.try_get(2)?,
                lease_until,
            })
        })
        .collect()
}

pub async fn reschedule(
    c: &impl GenericClient,
    seat: &DueSeat,
    at: DateTime<Utc>,
    idle_polls: i32,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(RESCHEDULE, &[&seat.resource_id, &at, &idle_polls, &seat.lease_until, &now]).await?;
    Ok(())
}

pub async fn forget(c: &impl GenericClient, seat: &DueSeat) -> Result<(), DbError> {
    c.exec(FORGET, &[&seat.resource_id, &seat.lease_until]).await?;
    Ok(())
}
