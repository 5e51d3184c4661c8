//! SQL for booking limits: what one principal has live on a resource, and what it
//! holds across the service.

use super::{DbError, GenericClient};
use crate::domain::Counted;
use chrono::{DateTime, Utc};
use uuid::Uuid;

statements![COUNTED, PRINCIPAL_HOLDS];

/// The live bookings and holds of principal `$2` on resource `$1` that start in
/// `[$3, $4)`, but those of booking `$5` (the one being moved), as at `$6`: what the
/// resource's limits count. A hold's expiry is read, for when it frees a place. By the
/// active-period index (a start in the span means a period that meets it).
pub const COUNTED: &str = "SELECT starts_at, CASE WHEN status = 'HELD' THEN expires_at END AS expires_at \
     FROM reservations \
     WHERE resource_id = $1 AND owner = $2 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED') \
       AND period && tstzrange($3, $4, '[)') AND starts_at >= $3 AND starts_at < $4 \
       AND NOT (status = 'HELD' AND expires_at <= $6) \
       AND ($5::uuid IS NULL OR (id <> $5 AND booking_id IS DISTINCT FROM $5))";

/// See [`COUNTED`].
pub async fn counted(
    c: &impl GenericClient,
    resource_id: Uuid,
    owner: &str,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    except: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<Vec<Counted>, DbError> {
    let rows = c.rows(COUNTED, &[&resource_id, &owner, &from, &to, &except, &now]).await?;
    rows.iter().map(|r| Ok(Counted { start: r.try_get("starts_at")?, expires_at: r.try_get("expires_at")? })).collect()
}

/// The lock of principal `$1` (its row in `principals`, written first when it is not
/// there yet, locked `FOR NO KEY UPDATE`: the lock order's first level) and, read after
/// it, the principal's active holds as at `$2`, a booking of several counting once, and
/// the earliest of their expiries (`principal_holds`).
pub const PRINCIPAL_HOLDS: &str = "SELECT active, frees_at FROM principal_holds($1, $2)";

/// What [`PRINCIPAL_HOLDS`] read under the principal's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveHolds {
    pub active: i64,
    /// When the earliest of them lapses; `None` when there is none.
    pub frees_at: Option<DateTime<Utc>>,
}

/// See [`PRINCIPAL_HOLDS`]. Run inside the transaction that makes the hold, before any
/// resource lock.
pub async fn lock_principal(c: &impl GenericClient, owner: &str, now: DateTime<Utc>) -> Result<ActiveHolds, DbError> {
    let row = c.row(PRINCIPAL_HOLDS, &[&owner, &now]).await?;
    Ok(ActiveHolds { active: row.try_get("active")?, frees_at: row.try_get("frees_at")? })
}
