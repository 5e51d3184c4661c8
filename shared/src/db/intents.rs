//! SQL for the `intents` and `approvals` tables.

use super::{DbError, GenericClient};
use crate::domain::IntentState;
use chrono::{DateTime, Utc};
use uuid::Uuid;

statements![
    INSERT_APPROVAL,
    INSERT,
    INSERT_WAIT_APPROVAL,
    INSERT_WAIT,
    START_WAIT,
    REWAIT,
    LOCK_WAIT,
    END_WAIT,
    END_STARTED_WAITS,
    CLAIM,
    WAITING,
    TOUCH_STALE,
    CLAIM_LAPSED,
    INSERT_CANCEL,
    UNCLAIM,
    POSTPONE,
    FINISH,
    OLDEST_UNSETTLED,
    STATE_OF,
];

pub const INSERT_APPROVAL: &str = "INSERT INTO approvals (id, reservation_id, principal, action, fingerprint, created_at) \
     VALUES ($1, $2, $3, 'confirm', $4, $5)";

pub const INSERT: &str = "INSERT INTO intents (id, reservation_id, kind, upstream_ref, state, not_before, created_at, \
       updated_at) VALUES ($1, $2, 'reserve', $3, 'REQUESTED', $4, $4, $4)";

/// True for a reserve (or wait) intent `q` queued after a cancel of the same seat that has not
/// finished: the charge that cancel deletes could still make the seat look taken.
macro_rules! behind_a_cancel {
    () => {
        "(q.kind IN ('reserve', 'wait') AND EXISTS ( \
           SELECT 1 FROM intents p WHERE p.upstream_ref = q.upstream_ref AND p.kind = 'cancel' \
             AND p.state IN ('REQUESTED', 'RESERVING') AND p.created_at < q.created_at))"
    };
}

/// A wait's consent: who joined, and the fingerprint of the request that joined.
pub const INSERT_WAIT_APPROVAL: &str = "INSERT INTO approvals (id, waitlist_entry_id, principal, action, fingerprint, \
       created_at) VALUES ($1, $2, $3, 'wait_for_seat', $4, $5)";

/// A wait intent, waiting from the start: it has no reservation until the seat frees.
pub const INSERT_WAIT: &str = "INSERT INTO intents (id, waitlist_entry_id, kind, upstream_ref, state, not_before, \
       created_at, updated_at) VALUES ($1, $2, 'wait', $3, 'WAITING_FOR_SEAT', $4, $4, $4)";

/// The claim of a wait whose seat shows free: `WAITING_FOR_SEAT -> RESERVING` under a
/// lease, naming the reservation (`$2`) that the same transaction inserts next (the
/// reference is deferred, so it is checked at commit). Skips a wait another transaction
/// holds, one whose waiter is leaving, and one behind an unfinished cancel of its seat.
/// A second write in flight to the seat hits `intents_one_write_per_seat`, as a confirm
/// would. `$1` the entry, `$3`-`$4` the lease, `$5` now.
pub const START_WAIT: &str = concat!(
    r#"
    WITH c AS (
        SELECT q.id FROM intents q
        WHERE q.waitlist_entry_id = $1 AND q.state = 'WAITING_FOR_SEAT' AND NOT "#,
    behind_a_cancel!(),
    r#"
        FOR UPDATE SKIP LOCKED)
    UPDATE intents i
    SET state = 'RESERVING', reservation_id = $2, lease_owner = $3, locked_until = $4, attempts = i.attempts + 1,
        updated_at = $5
    FROM c, waitlist_entries w
    WHERE i.id = c.id AND w.id = i.waitlist_entry_id AND i.state = 'WAITING_FOR_SEAT'
      AND w.status = 'WAITING' AND w.leave_requested_at IS NULL
    RETURNING i.id, i.reservation_id, i.upstream_ref, i.attempts, w.resource_id, w.starts_at, w.ends_at,
              i.kind, i.charge_id, i.waitlist_entry_id"#
);

/// A wait whose write lost (409, or an unknown outcome with no charge) goes back to
/// waiting; fenced by the lease like [`FINISH`].
pub const REWAIT: &str = "UPDATE intents SET state = 'WAITING_FOR_SEAT', lease_owner = NULL, locked_until = NULL, \
     last_error = $3, updated_at = $4 WHERE id = $1 AND state = 'RESERVING' AND lease_owner = $2 \
     RETURNING reservation_id";

/// The wait intent of an entry, locked (the lock order: after the resource, before
/// reservations and entries): its id and state.
pub const LOCK_WAIT: &str = "SELECT id, state FROM intents WHERE waitlist_entry_id = $1 FOR UPDATE";

/// Ends a wait that has not reached the write: the waiter left.
pub const END_WAIT: &str = "UPDATE intents SET state = 'CANCELLED', last_error = $2, updated_at = $3 \
     WHERE id = $1 AND state = 'WAITING_FOR_SEAT'";

/// Waits whose range has started end by themselves, with their entries (`EXPIRED`):
/// the intents are locked first (the lock order), skipping any another transaction
/// holds, and a wait whose write is in flight settles first.
pub const END_STARTED_WAITS: &str = r#"
    WITH ended AS (
        SELECT i.id, i.waitlist_entry_id FROM intents i
        JOIN waitlist_entries w ON w.id = i.waitlist_entry_id
        WHERE i.state = 'WAITING_FOR_SEAT' AND w.status = 'WAITING' AND w.starts_at <= $1
        ORDER BY w.starts_at
        LIMIT $2
        FOR UPDATE OF i SKIP LOCKED
    ), i AS (
        UPDATE intents SET state = 'CANCELLED', last_error = 'range started', updated_at = $1
        FROM ended WHERE intents.id = ended.id
        RETURNING intents.waitlist_entry_id
    )
    UPDATE waitlist_entries w SET status = 'EXPIRED', updated_at = $1
    FROM i WHERE w.id = i.waitlist_entry_id AND w.status = 'WAITING'"#;

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
              i.kind, i.charge_id, i.waitlist_entry_id"#
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
       i.kind, i.charge_id, i.waitlist_entry_id";

/// The cancel of a confirmed booking's charge, from its succeeded reserve intent. No
/// row when there is nothing upstream to cancel (the booking was never written there).
pub const INSERT_CANCEL: &str = "INSERT INTO intents (id, reservation_id, kind, upstream_ref, state, charge_id, \
       not_before, created_at, updated_at) \
     SELECT $1, reservation_id, 'cancel', upstream_ref, 'REQUESTED', charge_id, $3, $3, $3 FROM intents \
     WHERE reservation_id = $2 AND kind IN ('reserve', 'wait') AND state = 'SUCCEEDED' \
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

/// When the oldest upstream write still unsettled was asked for (`REQUESTED` or
/// `RESERVING`; a wait for a seat is not a write yet): what the unsettled-intents
/// alarm watches, through the sweeper's `OldestUnsettledIntentSeconds`.
pub const OLDEST_UNSETTLED: &str = "SELECT min(created_at) FROM intents WHERE state IN ('REQUESTED', 'RESERVING')";

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
    /// The waitlist entry of a wait.
    pub waitlist_entry_id: Option<Uuid>,
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
        waitlist_entry_id: row.try_get(9)?,
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
    c.exec(INSERT_APPROVAL, &[&Uuid::now_v7(), &reservation_id, &principal, &fingerprint, &now]).await?;
    Ok(())
}

pub async fn insert_wait_approval(
    c: &impl GenericClient,
    entry_id: Uuid,
    principal: &str,
    fingerprint: &[u8],
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(INSERT_WAIT_APPROVAL, &[&Uuid::now_v7(), &entry_id, &principal, &fingerprint, &now]).await?;
    Ok(())
}

pub async fn insert_wait(
    c: &impl GenericClient,
    id: Uuid,
    entry_id: Uuid,
    seat: &str,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(INSERT_WAIT, &[&id, &entry_id, &seat, &now]).await?;
    Ok(())
}

/// See [`START_WAIT`]. Call under the resource lock, after
/// [`defer_reservation_check`], and insert `reservation_id` next.
pub async fn start_wait(
    c: &impl GenericClient,
    entry_id: Uuid,
    reservation_id: Uuid,
    lease_owner: Uuid,
    lease_until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Option<Claimed>, DbError> {
    match c.opt_row(START_WAIT, &[&entry_id, &reservation_id, &lease_owner, &lease_until, &now]).await?.as_ref() {
        Some(row) => Ok(Some(claimed(row, lease_owner)?)),
        None => Ok(None),
    }
}

/// Lets a claim name a reservation the same transaction inserts after it.
pub async fn defer_reservation_check(c: &impl GenericClient) -> Result<(), DbError> {
    c.batch_execute("SET CONSTRAINTS intents_reservation_fkey DEFERRED").await?;
    Ok(())
}

/// `None` when the lease is no longer ours.
pub async fn rewait(
    c: &impl GenericClient,
    claim: &Claimed,
    error: &str,
    now: DateTime<Utc>,
) -> Result<Option<Uuid>, DbError> {
    Ok(c.opt_row(REWAIT, &[&claim.id, &claim.lease_owner, &error, &now]).await?.map(|r| r.try_get(0)).transpose()?)
}

/// The entry's wait intent, locked: its id and state.
pub async fn lock_wait(c: &impl GenericClient, entry_id: Uuid) -> Result<Option<(Uuid, IntentState)>, DbError> {
    let Some(row) = c.opt_row(LOCK_WAIT, &[&entry_id]).await? else { return Ok(None) };
    Ok(Some((row.try_get(0)?, row.try_get::<_, &str>(1)?.parse()?)))
}

pub async fn end_wait(c: &impl GenericClient, id: Uuid, reason: &str, now: DateTime<Utc>) -> Result<bool, DbError> {
    Ok(c.exec(END_WAIT, &[&id, &reason, &now]).await? == 1)
}

/// The number of waits (and entries) ended because their range started.
pub async fn end_started_waits(c: &impl GenericClient, now: DateTime<Utc>, limit: i64) -> Result<u64, DbError> {
    Ok(c.exec(END_STARTED_WAITS, &[&now, &limit]).await?)
}

pub async fn insert(
    c: &impl GenericClient,
    id: Uuid,
    reservation_id: Uuid,
    seat: &str,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(INSERT, &[&id, &reservation_id, &seat, &now]).await?;
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
    Ok(c.opt_row(INSERT_CANCEL, &[&id, &reservation_id, &now]).await?.map(|r| r.try_get(0)).transpose()?)
}

pub async fn claim(
    c: &impl GenericClient,
    id: Uuid,
    now: DateTime<Utc>,
    lease_owner: Uuid,
    lease_until: DateTime<Utc>,
) -> Result<Option<Claimed>, DbError> {
    match c.opt_row(CLAIM, &[&id, &now, &lease_owner, &lease_until]).await?.as_ref() {
        Some(row) => Ok(Some(claimed(row, lease_owner)?)),
        None => Ok(None),
    }
}

pub async fn waiting(c: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<bool, DbError> {
    Ok(c.opt_row(WAITING, &[&id, &now]).await?.map(|r| r.try_get(0)).transpose()?.unwrap_or(false))
}

/// (intent id, reservation id) of each stale intent touched.
pub async fn touch_stale(
    c: &impl GenericClient,
    now: DateTime<Utc>,
    untouched_since: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<(Uuid, Uuid)>, DbError> {
    c.rows(TOUCH_STALE, &[&now, &untouched_since, &limit])
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
    let rows = c.rows(CLAIM_LAPSED, &[&now, &limit, &lease_owner, &lease_until]).await?;
    rows.iter().map(|r| claimed(r, lease_owner)).collect()
}

pub async fn unclaim(
    c: &impl GenericClient,
    claim: &Claimed,
    not_before: DateTime<Utc>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(UNCLAIM, &[&claim.id, &claim.lease_owner, &not_before, &reason, &now]).await?;
    Ok(())
}

pub async fn postpone(
    c: &impl GenericClient,
    id: Uuid,
    not_before: DateTime<Utc>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(POSTPONE, &[&id, &not_before, &reason, &now]).await?;
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
    Ok(c.opt_row(FINISH, &[&claim.id, &claim.lease_owner, &state.as_str(), &charge_id, &error, &now])
        .await?
        .map(|r| r.try_get(0))
        .transpose()?)
}

pub async fn oldest_unsettled(c: &impl GenericClient) -> Result<Option<DateTime<Utc>>, DbError> {
    Ok(c.row(OLDEST_UNSETTLED, &[]).await?.try_get(0)?)
}

pub async fn state_of(c: &impl GenericClient, id: Uuid) -> Result<Option<(IntentState, Option<String>)>, DbError> {
    let Some(row) = c.opt_row(STATE_OF, &[&id]).await? else { return Ok(None) };
    Ok(Some((row.try_get::<_, &str>(0)?.parse()?, row.try_get(1)?)))
}
