//! SQL for the `intents` and `approvals` tables.

use super::{DbError, GenericClient};
use crate::domain::IntentState;
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub const INSERT_APPROVAL: &str = "INSERT INTO approvals (id, reservation_id, principal, action, fingerprint, created_at) \
     VALUES ($1, $2, $3, 'confirm', $4, $5)";

pub const INSERT: &str = "INSERT INTO intents (id, reservation_id, kind, upstream_ref, state, not_before, created_at, \
       updated_at) VALUES ($1, $2, 'reserve', $3, 'REQUESTED', $4, $4, $4)";

/// True for a reserve intent `q` queued after a cancel of the same seat that has not
/// finished: the charge that cancel deletes could still make the seat look taken.
macro_rules! behind_a_cancel {
    () => {
        "(q.kind = 'reserve' AND EXISTS ( \
           SELECT 1 FROM intents p WHERE p.upstream_ref = q.upstream_ref AND p.kind = 'cancel' \
             AND p.state IN ('REQUESTED', 'RESERVING') AND p.created_at < q.created_at))"
    };
}

/// The worker's claim of one intent: only a `REQUESTED` one that is due, skipping a row
/// another worker holds. Moving it to `RESERVING` may hit `intents_one_write_per_seat`
/// (another write to the same seat is in flight): the caller then tries again later. A
/// reserve is not claimed while an earlier cancel of the same seat is unfinished: the
/// charge that cancel deletes could still make the seat look taken.
pub const CLAIM: &str = concat!(
    r#"
    WITH c AS (
        SELECT id FROM intents q
        WHERE id = $1 AND state = 'REQUESTED' AND not_before <= $2 AND NOT "#,
    behind_a_cancel!(),
    r#"
        FOR UPDATE SKIP LOCKED)
    UPDATE intents i
    SET state = 'RESERVING', lease_owner = $3, locked_until = $4, attempts = i.attempts + 1, updated_at = $2
    FROM c, reservations r
    WHERE i.id = c.id AND r.id = i.reservation_id AND i.state = 'REQUESTED'
    RETURNING i.id, i.reservation_id, i.upstream_ref, i.attempts, r.resource_id, r.starts_at, r.ends_at,
              i.kind, i.charge_id"#
);

/// Whether an intent that could not be claimed is waiting to be (not due yet, or a
/// reserve behind an earlier cancel of its seat), as opposed to taken by another
/// worker, settled, or unknown.
pub const WAITING: &str = concat!(
    "SELECT q.state = 'REQUESTED' AND (q.not_before > $2 OR ",
    behind_a_cancel!(),
    ") FROM intents q WHERE q.id = $1"
);

/// Due `REQUESTED` intents that nothing touched since `$2` (their message was lost or
/// dead-lettered), touched now so that the next requeue waits again; their ids and
/// reservations. `SKIP LOCKED`, so a worker claiming one meanwhile is never waited for.
pub const TOUCH_STALE: &str = "WITH stale AS ( \
       SELECT id FROM intents WHERE state = 'REQUESTED' AND not_before <= $1 AND updated_at <= $2 \
       ORDER BY updated_at LIMIT $3 FOR UPDATE SKIP LOCKED) \
     UPDATE intents i SET updated_at = $1 FROM stale WHERE i.id = stale.id RETURNING i.id, i.reservation_id";

/// The reaper's claim: intents whose lease lapsed in `RESERVING` (their worker died or
/// hung), leased anew to the reaper.
pub const CLAIM_LAPSED: &str = "WITH c AS ( \
       SELECT id FROM intents WHERE state = 'RESERVING' AND locked_until <= $1 \
       ORDER BY locked_until LIMIT $2 FOR UPDATE SKIP LOCKED) \
     UPDATE intents i SET lease_owner = $3, locked_until = $4, updated_at = $1 \
     FROM c, reservations r WHERE i.id = c.id AND r.id = i.reservation_id AND i.state = 'RESERVING' \
     RETURNING i.id, i.reservation_id, i.upstream_ref, i.attempts, r.resource_id, r.starts_at, r.ends_at, \
       i.kind, i.charge_id";

/// The cancel of a confirmed booking's charge, from its succeeded reserve intent. No
/// row when there is nothing upstream to cancel (the booking was never written there).
pub const INSERT_CANCEL: &str = "INSERT INTO intents (id, reservation_id, kind, upstream_ref, state, charge_id, \
       not_before, created_at, updated_at) \
     SELECT $1, reservation_id, 'cancel', upstream_ref, 'REQUESTED', charge_id, $3, $3, $3 FROM intents \
     WHERE reservation_id = $2 AND kind = 'reserve' AND state = 'SUCCEEDED' \
     ON CONFLICT ON CONSTRAINT intents_reservation_kind_key DO NOTHING \
     RETURNING id";

/// Gives a claim back unexecuted (the breaker was open): due again at `$3`.
pub const UNCLAIM: &str = "UPDATE intents SET state = 'REQUESTED', lease_owner = NULL, locked_until = NULL, \
     not_before = $3, last_error = $4, updated_at = $5 WHERE id = $1 AND state = 'RESERVING' AND lease_owner = $2";

pub const POSTPONE: &str = "UPDATE intents SET not_before = $2, last_error = $3, updated_at = $4 \
     WHERE id = $1 AND state = 'REQUESTED'";

/// The terminal write, fenced by the lease: a late writer whose lease was taken over
/// changes nothing.
pub const FINISH: &str = "UPDATE intents SET state = $3, charge_id = $4, last_error = $5, lease_owner = NULL, \
     locked_until = NULL, updated_at = $6 WHERE id = $1 AND state = 'RESERVING' AND lease_owner = $2 \
     RETURNING reservation_id";

pub const STATE_OF: &str = "SELECT state, charge_id FROM intents WHERE id = $1";

/// What an intent writes upstream.
pub use crate::domain::IntentKind as Kind;

#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: Uuid,
    pub reservation_id: Uuid,
    pub seat: String,
    pub attempts: i32,
    pub resource_id: Uuid,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub kind: Kind,
    /// The charge a cancel deletes.
    pub charge_id: Option<String>,
    pub lease_owner: Uuid,
}

fn claimed(row: &tokio_postgres::Row, lease_owner: Uuid) -> Result<Claimed, DbError> {
    Ok(Claimed {
        id: row.try_get(0)?,
        reservation_id: row.try_get(1)?,
        seat: row.try_get(2)?,
        attempts: row.try_get(3)?,
        resource_id: row.try_get(4)?,
        start: row.try_get(5)?,
        end: row.try_get(6)?,
        kind: row.try_get::<_, &str>(7)?.parse()?,
        charge_id: row.try_get(8)?,
        lease_owner,
    })
}

pub async fn insert_approval(
    c: &impl GenericClient,
    reservation_id: Uuid,
    principal: &str,
    fingerprint: &[u8],
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    let stmt = c.prepare_cached(INSERT_APPROVAL).await?;
    c.execute(&stmt, &[&Uuid::now_v7(), &reservation_id, &principal, &fingerprint, &now]).await?;
    Ok(())
}

pub async fn insert(
    c: &impl GenericClient,
    id: Uuid,
    reservation_id: Uuid,
    seat: &str,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    let stmt = c.prepare_cached(INSERT).await?;
    c.execute(&stmt, &[&id, &reservation_id, &seat, &now]).await?;
    Ok(())
}

/// Requests the upstream cancel of a confirmed booking; its id, or `None` when nothing
/// was written upstream for it.
pub async fn insert_cancel(
    c: &impl GenericClient,
    id: Uuid,
    reservation_id: Uuid,
    now: DateTime<Utc>,
) -> Result<Option<Uuid>, DbError> {
    let stmt = c.prepare_cached(INSERT_CANCEL).await?;
    Ok(c.query_opt(&stmt, &[&id, &reservation_id, &now]).await?.map(|r| r.try_get(0)).transpose()?)
}

pub async fn claim(
    c: &impl GenericClient,
    id: Uuid,
    now: DateTime<Utc>,
    lease_owner: Uuid,
    lease_until: DateTime<Utc>,
) -> Result<Option<Claimed>, DbError> {
    let stmt = c.prepare_cached(CLAIM).await?;
    match c.query_opt(&stmt, &[&id, &now, &lease_owner, &lease_until]).await?.as_ref() {
        Some(row) => Ok(Some(claimed(row, lease_owner)?)),
        None => Ok(None),
    }
}

pub async fn waiting(c: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<bool, DbError> {
    let stmt = c.prepare_cached(WAITING).await?;
    Ok(c.query_opt(&stmt, &[&id, &now]).await?.map(|r| r.try_get(0)).transpose()?.unwrap_or(false))
}

/// (intent id, reservation id) of each stale intent touched.
pub async fn touch_stale(
    c: &impl GenericClient,
    now: DateTime<Utc>,
    untouched_since: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<(Uuid, Uuid)>, DbError> {
    let stmt = c.prepare_cached(TOUCH_STALE).await?;
    c.query(&stmt, &[&now, &untouched_since, &limit])
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

pub async fn claim_lapsed(
    c: &impl GenericClient,
    now: DateTime<Utc>,
    limit: i64,
    lease_owner: Uuid,
    lease_until: DateTime<Utc>,
) -> Result<Vec<Claimed>, DbError> {
    let stmt = c.prepare_cached(CLAIM_LAPSED).await?;
    let rows = c.query(&stmt, &[&now, &limit, &lease_owner, &lease_until]).await?;
    rows.iter().map(|r| claimed(r, lease_owner)).collect()
}

pub async fn unclaim(
    c: &impl GenericClient,
    claim: &Claimed,
    not_before: DateTime<Utc>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    let stmt = c.prepare_cached(UNCLAIM).await?;
    c.execute(&stmt, &[&claim.id, &claim.lease_owner, &not_before, &reason, &now]).await?;
    Ok(())
}

pub async fn postpone(
    c: &impl GenericClient,
    id: Uuid,
    not_before: DateTime<Utc>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    let stmt = c.prepare_cached(POSTPONE).await?;
    c.execute(&stmt, &[&id, &not_before, &reason, &now]).await?;
    Ok(())
}

/// `None` when the lease is no longer ours.
pub async fn finish(
    c: &impl GenericClient,
    claim: &Claimed,
    state: IntentState,
    charge_id: Option<&str>,
    error: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Option<Uuid>, DbError> {
    let stmt = c.prepare_cached(FINISH).await?;
    Ok(c.query_opt(&stmt, &[&claim.id, &claim.lease_owner, &state.as_str(), &charge_id, &error, &now])
        .await?
        .map(|r| r.try_get(0))
        .transpose()?)
}

pub async fn state_of(c: &impl GenericClient, id: Uuid) -> Result<Option<(IntentState, Option<String>)>, DbError> {
    let stmt = c.prepare_cached(STATE_OF).await?;
    let Some(row) = c.query_opt(&stmt, &[&id]).await? else { return Ok(None) };
    Ok(Some((row.try_get::<_, &str>(0)?.parse()?, row.try_get(1)?)))
}
