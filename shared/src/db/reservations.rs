//! SQL for the `reservations` table.

use super::idempotency::Answering;
use super::{DbError, GenericClient};
use crate::domain::{Claim, FailureReason, Intent, Metadata, Reservation, Source, Status};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use tokio_postgres::types::{Json, ToSql};
use uuid::Uuid;

macro_rules! columns {
    () => {
        "id, resource_id, owner, starts_at, ends_at, quantity, status, expires_at, failure_reason, \
         source, created_at, updated_at, metadata, acted_by"
    };
}

/// The outbox payload of a reservation event, built from the row the statement wrote
/// (`reservation_event`, migration V7).
macro_rules! event_payload {
    ($row:literal) => {
        concat!(
            "reservation_event(",
            $row,
            ".id, ",
            $row,
            ".resource_id, ",
            $row,
            ".owner, ",
            $row,
            ".starts_at, ",
            $row,
            ".ends_at, ",
            $row,
            ".quantity, ",
            $row,
            ".status, ",
            $row,
            ".source, ",
            $row,
            ".failure_reason, ",
            $row,
            ".metadata, ",
            $row,
            ".acted_by)"
        )
    };
}

/// The conditional insert: writes down the lapsed holds that overlap the new
/// reservation, then inserts it only if its quantity fits under the capacity at every
/// instant of its range (`reservation_insert_if_fits`, migration V7, which says why in
/// that order). Rows: the inserted one (`inserted`), and the holds it expired. Run it
/// only while holding the resource lock ([`super::resources::lock`]), in a statement
/// after the one that took it.
///
/// Parameters: `$1` id, `$2` resource, `$3` its capacity, `$4` owner, `$5` start,
/// `$6` end, `$7` quantity, `$8` status, `$9` expires_at, `$10` failure reason,
/// `$11` source, `$12` now, `$13` metadata, `$14` acted_by.
pub const INSERT_IF_FITS: &str = concat!(
    "SELECT inserted, ",
    columns!(),
    " FROM reservation_insert_if_fits($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
);

/// The conditional move of a reschedule (`reservation_move_if_fits`, migration V9):
/// writes down the lapsed holds over the new range, then moves the reservation there
/// only if it fits beside everything else (itself left out), recording the event
/// `$10`. Rows: the moved one (`moved`; none when it does not fit), and the holds it
/// expired. Run it under the resource lock, holding the reservation's.
///
/// Parameters: `$1` id, `$2` resource, `$3` its capacity, `$4` start, `$5` end,
/// `$6` quantity, `$7` now, `$8` metadata, `$9` acted_by, `$10` event kind.
pub const MOVE_IF_FITS: &str =
    concat!("SELECT moved, ", columns!(), " FROM reservation_move_if_fits($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)");

/// The peak load from `$2` (now) on, of claims that have not lapsed: what a lower
/// capacity must still hold.
pub const PEAK_AHEAD: &str = "SELECT peak FROM reservation_load($1, $2, NULL, $2)";

/// Detaches the rows that claim nothing ahead of `$2` (now) from their resource's
/// capacity (see migration V9), so that a capacity change cascades only into what it
/// governs. Run under the resource's change lock.
pub const DETACH_SETTLED: &str = r#"
    UPDATE reservations SET resource_capacity = NULL
    WHERE resource_id = $1 AND resource_capacity IS NOT NULL
      AND (status NOT IN ('HELD', 'CONFIRMING', 'CONFIRMED') OR ends_at <= $2)"#;

/// A hold or booking of a local resource in one round trip (`reservation_hold`,
/// migration V7, latest in V27). Capacity 1 (V21): the resource row shared and the
/// insert with its event, the exclusion constraint judging it. Capacity N: the lock
/// when it is free (otherwise the look before waiting for it), the load under it and
/// the insert with its event. One row: the
/// `outcome` (`reserved` with the row, `unavailable`, `not_found`, `archived`,
/// `too_many` with the `capacity`, or `general` when the general path must decide:
/// upstream resources, calendar rules, kept buffers, lapsed holds for the waitlist).
///
/// Parameters: `$1` id, `$2` resource, `$3` owner, `$4` start, `$5` end, `$6` quantity,
/// `$7` confirm, `$8` now, `$9` metadata, `$10` the id of its event in the outbox (V27:
/// made here, as the reservation's is, rather than by `uuidv7()` in SQL).
pub const HOLD: &str = concat!(
    "SELECT outcome, capacity, ",
    columns!(),
    " FROM reservation_hold($1, $2, $3, $4, $5, $6, $7, $8, $9, p_event_id => $10)"
);

/// [`HOLD`] for a request with an `Idempotency-Key`: the same function with the key's
/// arguments after the hold's (migration V22; V17 made the keyed hold one statement),
/// which claims the key first and stores the answer last. One more outcome,
/// `key_taken`, when the key already has a committed row; past `$17` waiting for a
/// concurrent original, lock_not_available. Outcomes other than `reserved` and
/// `unavailable` leave nothing behind, the claim included.
///
/// Parameters: [`HOLD`]'s ten, then `$11`-`$14` the key's scope and key, `$15`
/// fingerprint, `$16` when the record may be purged, `$17` the wait (a `lock_timeout`),
/// `$18`-`$20` the refusal's stored answer (status, headers, body).
pub const HOLD_KEYED: &str = concat!(
    "SELECT outcome, capacity, ",
    columns!(),
    " FROM reservation_hold($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, \
     $20)"
);

/// A reservation as a keyed hold stored it for its replay (`reservation_snapshot`,
/// V22: the row the hold answered with), read back into the columns of the table: the
/// replay is rendered from the same values as the first answer.
pub const FROM_SNAPSHOT: &str = concat!("SELECT ", columns!(), " FROM jsonb_populate_record(NULL::reservations, $1)");

/// The look before the lock: the resource, the peak load over the range now, and
/// whether lapsed holds overlap it, in one read that takes no lock and writes nothing.
/// A request that does not fit by this read is refused at once (the capacity really
/// was taken at that instant), so a burst of losers never queues on the resource lock
/// nor waits for a disk flush; only requests that may fit go on to the locked insert.
pub const PRECHECK: &str = "SELECT r.id, r.name, r.capacity, r.authority, r.upstream_ref, r.hold_ttl_seconds, \
     r.offer_ttl_seconds, r.metadata, r.archived_at, r.created_at, r.updated_at, r.time_zone, r.schedule, \
     r.buffer_before_minutes, r.buffer_after_minutes, r.min_notice_minutes, r.max_advance_days, r.slot_minutes, \
     l.peak AS load, l.lapsed \
     FROM resources r, reservation_load($1, $2, $3, $4) l WHERE r.id = $1";

/// Writes down the lapse of the holds that overlap a range (`$3` NULL: unbounded), so
/// that they stop counting for the exclusion constraint too (its predicate cannot know
/// the time). Run it under the resource lock; it returns what it expired, for the
/// hand-over to the waitlist.
pub const EXPIRE_LAPSED_OVERLAPPING: &str = concat!(
    r#"
    WITH exp AS (
        UPDATE reservations SET status = 'EXPIRED', updated_at = $4, acted_by = NULL
        WHERE resource_id = $1 AND status = 'HELD' AND expires_at <= $4
          AND period && tstzrange($2, $3, '[)')
        RETURNING "#,
    columns!(),
    r#"
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT 'reservation.expired', exp.id, "#,
    event_payload!("exp"),
    r#", $4, $4 FROM exp
    )
    SELECT "#,
    columns!(),
    r#" FROM exp"#
);

/// [`EXPIRE_LAPSED_OVERLAPPING`] for the lapsed holds that keep buffers (`buffered`
/// wider than `period`, V12) and whose kept range meets `[$2, $3)`: those a new
/// booking without buffers of its own could still meet.
pub const EXPIRE_LAPSED_KEEPING_BUFFERS: &str = concat!(
    r#"
    WITH exp AS (
        UPDATE reservations SET status = 'EXPIRED', updated_at = $4, acted_by = NULL
        WHERE resource_id = $1 AND status = 'HELD' AND expires_at <= $4
          AND period && tstzrange($2::timestamptz - interval '1 day', $3::timestamptz + interval '1 day', '[)')
          AND buffered && tstzrange($2, $3, '[)') AND buffered <> period
        RETURNING "#,
    columns!(),
    r#"
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT 'reservation.expired', exp.id, "#,
    event_payload!("exp"),
    r#", $4, $4 FROM exp
    )
    SELECT "#,
    columns!(),
    r#" FROM exp"#
);

/// The sweep's claim: one resource that has lapsed holds and whose row no one else
/// holds (`SKIP LOCKED`: concurrent sweeps take different resources, never wait, never
/// deadlock), and up to `$2` of its lapsed holds, expired in the same statement. The
/// resource lock stays held until the caller's transaction ends, for the hand-over.
/// It can come back empty while lapsed holds remain (their resource was just taken by
/// another sweep, or was held); [`ANY_LAPSED`] tells the caller whether to go on.
pub const CLAIM_LAPSED: &str = concat!(
    r#"
    WITH target AS (
        SELECT res.id FROM resources res
        WHERE res.id IN (SELECT resource_id FROM reservations WHERE status = 'HELD' AND expires_at <= $1)
        ORDER BY res.id LIMIT 1
        FOR NO KEY UPDATE OF res SKIP LOCKED
    ), exp AS (
        UPDATE reservations SET status = 'EXPIRED', updated_at = $1, acted_by = NULL
        WHERE id IN (
            SELECT r.id FROM reservations r JOIN target t ON r.resource_id = t.id
            WHERE r.status = 'HELD' AND r.expires_at <= $1
            ORDER BY r.expires_at LIMIT $2)
          -- Repeated on the target rows themselves: if another sweep expired a row after
          -- this statement's snapshot, the re-check of the latest version skips it.
          AND status = 'HELD' AND expires_at <= $1
        RETURNING "#,
    columns!(),
    r#"
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT 'reservation.expired', exp.id, "#,
    event_payload!("exp"),
    r#", $1, $1 FROM exp
    )
    SELECT "#,
    columns!(),
    r#" FROM exp"#
);

pub const ANY_LAPSED: &str = "SELECT EXISTS (SELECT 1 FROM reservations WHERE status = 'HELD' AND expires_at <= $1)";

/// A reservation with its upstream intent, if one was asked for.
pub const GET: &str = r#"
    SELECT r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
           r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by,
           i.id AS intent_id, i.state AS intent_state, i.attempts AS intent_attempts,
           i.updated_at AS intent_updated_at
    FROM reservations r
    LEFT JOIN intents i ON i.reservation_id = r.id AND i.kind IN ('reserve', 'wait')
    WHERE r.id = $1"#;

pub const LOCK: &str = concat!("SELECT ", columns!(), " FROM reservations WHERE id = $1 FOR UPDATE");

pub const RESOURCE_OF: &str = "SELECT resource_id FROM reservations WHERE id = $1";

/// Changes a reservation's status and records the event (`$5`, when not null) in the
/// same statement; `$6` is who acted (NULL: the service).
pub const SET_STATUS: &str = concat!(
    r#"
    WITH upd AS (
        UPDATE reservations SET status = $2::text, failure_reason = $3::text, updated_at = $4, acted_by = $6
        WHERE id = $1
        RETURNING "#,
    columns!(),
    r#"
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT $5::text, upd.id, "#,
    event_payload!("upd"),
    r#", $4, $4 FROM upd WHERE $5::text IS NOT NULL
    )
    SELECT "#,
    columns!(),
    r#" FROM upd"#
);

/// What occupies a window: active, unlapsed reservations, in calendar order.
pub const ACTIVE_IN_WINDOW: &str = concat!(
    "SELECT ",
    columns!(),
    r#"
    FROM reservations
    WHERE resource_id = $1 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
      AND period && tstzrange($2, $3, '[)')
      AND NOT (status = 'HELD' AND expires_at <= $4)
    ORDER BY starts_at, ends_at, id"#
);

/// The active bookings (lapsed holds left out) whose kept range (`buffered`, V12)
/// meets `[$2, $3)`, with their periods: what a new booking's buffers are judged
/// against. A buffer is at most a day, so their periods lie within a day of the window
/// (which the period's index finds).
pub const KEPT_NEAR: &str = r#"
    SELECT id, starts_at, ends_at, lower(buffered) AS kept_from, upper(buffered) AS kept_to, quantity
    FROM reservations
    WHERE resource_id = $1 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
      AND period && tstzrange($2::timestamptz - interval '1 day', $3::timestamptz + interval '1 day', '[)')
      AND buffered && tstzrange($2, $3, '[)')
      AND NOT (status = 'HELD' AND expires_at <= $4)
    ORDER BY starts_at, id"#;

/// A page of a reservations list, newest first: the rows that `$scope` and the filters
/// keep, after the keyset position `($7, $8)` (none: from the newest), at most `$9` of
/// them, each with its upstream intent as [`GET`] reads it. The page is cut before the
/// join, so the join touches only its rows.
///
/// Parameters, the same for every scope: `$1` owner, `$2` resource (null: any), `$3`
/// now (a hold lapsed by then is `EXPIRED` for the status filter too, as it reads),
/// `$4` statuses (null: any), `$5` from and `$6` to (the reservation overlaps
/// `[from, to)`; null: unbounded), `$7` created_at and `$8` id of the last row of the
/// page before, `$9` the number of rows.
macro_rules! list_page {
    ($scope:literal) => {
        concat!(
            r#"
    SELECT r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
           r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by,
           i.id AS intent_id, i.state AS intent_state, i.attempts AS intent_attempts,
           i.updated_at AS intent_updated_at
    FROM (
        SELECT "#,
            columns!(),
            r#"
        FROM reservations
        WHERE "#,
            $scope,
            r#"
          AND ($4::text[] IS NULL
               OR (CASE WHEN status = 'HELD' AND expires_at <= $3 THEN 'EXPIRED' ELSE status END) = ANY($4))
          AND ($5::timestamptz IS NULL OR ends_at > $5)
          AND ($6::timestamptz IS NULL OR starts_at < $6)
          AND (created_at, id) < (coalesce($7::timestamptz, 'infinity'),
                                  coalesce($8::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
        ORDER BY created_at DESC, id DESC
        LIMIT $9
    ) r
    -- By its unique key, row by row: the LIMIT keeps the planner from hashing the
    -- whole intents table for a page of rows.
    LEFT JOIN LATERAL (
        SELECT id, state, attempts, updated_at FROM intents
        WHERE reservation_id = r.id AND kind = 'reserve'
        LIMIT 1
    ) i ON true
    ORDER BY r.created_at DESC, r.id DESC"#
        )
    };
}

/// `list_page!` of one owner's reservations, by `reservations_owner_created_idx`
/// (the resource, when given, is checked on the owner's rows).
pub const LIST_BY_OWNER: &str = list_page!("owner = $1::text AND ($2::uuid IS NULL OR resource_id = $2)");

/// `list_page!` of one resource's reservations, by `reservations_resource_created_idx`.
pub const LIST_BY_RESOURCE: &str = list_page!("resource_id = $2::uuid AND ($1::text IS NULL OR owner = $1)");

/// `list_page!` of everyone's reservations, by `reservations_created_idx`.
pub const LIST_ALL: &str =
    list_page!("($1::text IS NULL OR owner = $1) AND ($2::uuid IS NULL OR resource_id = $2::uuid)");

pub struct NewReservation<'a> {
    pub id: Uuid,
    pub resource_id: Uuid,
    pub resource_capacity: i32,
    pub owner: &'a str,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub status: Status,
    pub expires_at: Option<DateTime<Utc>>,
    pub source: Source,
    pub metadata: &'a Metadata,
    /// The principal whose request this is; `None` for the service's own (an offer).
    pub acted_by: Option<&'a str>,
    pub now: DateTime<Utc>,
}

/// What a conditional write (the insert, or a reschedule's move) did.
#[derive(Debug)]
pub struct Inserted {
    /// `None`: the capacity is taken (for a move: the reservation is unchanged).
    pub reservation: Option<Reservation>,
    /// Lapsed holds over the range that it wrote down first; the caller hands them over.
    pub expired: Vec<Reservation>,
}

/// The conditional insert (see [`INSERT_IF_FITS`]).
pub async fn insert_if_fits(c: &impl GenericClient, r: &NewReservation<'_>) -> Result<Inserted, DbError> {
    let stmt = c.prepare_cached(INSERT_IF_FITS).await?;
    let status = r.status.as_str();
    let source = r.source.as_str();
    let no_failure: Option<&str> = None;
    let rows = c
        .query(
            &stmt,
            &[
                &r.id,
                &r.resource_id,
                &r.resource_capacity,
                &r.owner,
                &r.start,
                &r.end,
                &r.quantity,
                &status,
                &r.expires_at,
                &no_failure,
                &source,
                &r.now,
                &Json(r.metadata),
                &r.acted_by,
            ],
        )
        .await?;
    written(&rows, "inserted")
}

/// The rows of a conditional write: the one it wrote (where `flag` is true) and the
/// lapsed holds it expired first.
fn written(rows: &[Row], flag: &str) -> Result<Inserted, DbError> {
    let mut out = Inserted { reservation: None, expired: Vec::new() };
    for row in rows {
        let reservation = from_row(row)?;
        if row.try_get(flag)? {
            out.reservation = Some(reservation);
        } else {
            out.expired.push(reservation);
        }
    }
    Ok(out)
}

/// What [`HOLD`] came to.
// One value per request, moved once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Hold {
    Reserved(Reservation),
    Unavailable,
    NotFound,
    TooMany {
        capacity: i32,
    },
    Archived,
    /// Not for the one-round-trip path: take the general one.
    General,
    /// The request's key is taken, by a committed answer or a concurrent original
    /// (keyed holds only): nothing was done; the idempotency guard decides.
    KeyTaken,
}

pub struct NewHold<'a> {
    pub id: Uuid,
    /// The id of the hold's event in the outbox.
    pub event_id: Uuid,
    pub resource_id: Uuid,
    pub owner: &'a str,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub confirm: bool,
    pub metadata: &'a Metadata,
    pub now: DateTime<Utc>,
}

/// [`HOLD`]'s parameters, which [`HOLD_KEYED`] begins with too.
fn hold_params<'a>(h: &'a NewHold<'_>, metadata: &'a Json<&Metadata>) -> [&'a (dyn ToSql + Sync); 10] {
    [&h.id, &h.resource_id, &h.owner, &h.start, &h.end, &h.quantity, &h.confirm, &h.now, metadata, &h.event_id]
}

/// See [`HOLD`].
pub async fn hold(c: &impl GenericClient, h: &NewHold<'_>) -> Result<Hold, DbError> {
    let stmt = c.prepare_cached(HOLD).await?;
    let metadata = Json(h.metadata);
    let row = c.query_one(&stmt, &hold_params(h, &metadata)).await?;
    hold_of(&row)
}

/// See [`HOLD_KEYED`]; for autocommit, where the statement is the transaction.
pub async fn hold_keyed(c: &impl GenericClient, h: &NewHold<'_>, a: &Answering<'_>) -> Result<Hold, DbError> {
    let stmt = c.prepare_cached(HOLD_KEYED).await?;
    let metadata = Json(h.metadata);
    // At least a millisecond: a lock_timeout of 0 would wait forever.
    let wait = format!("{}ms", a.wait.as_millis().max(1));
    let refused_status = a.refused.status as i16;
    let key: [&(dyn ToSql + Sync); 10] = [
        &a.key.principal,
        &a.key.method,
        &a.key.route,
        &a.key.key,
        &a.fingerprint,
        &a.lease.expires_at,
        &wait,
        &refused_status,
        a.refused.headers,
        &a.refused.body,
    ];
    let row = c.query_one(&stmt, &[&hold_params(h, &metadata)[..], &key[..]].concat()).await;
    match row {
        Ok(row) => hold_of(&row),
        // A concurrent original holds the key: nothing was written here.
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => Ok(Hold::KeyTaken),
        Err(e) => Err(e.into()),
    }
}

/// See [`FROM_SNAPSHOT`].
pub async fn from_snapshot(c: &impl GenericClient, snapshot: &serde_json::Value) -> Result<Reservation, DbError> {
    let stmt = c.prepare_cached(FROM_SNAPSHOT).await?;
    from_row(&c.query_one(&stmt, &[snapshot]).await?)
}

fn hold_of(row: &Row) -> Result<Hold, DbError> {
    Ok(match row.try_get::<_, &str>("outcome")? {
        "reserved" => Hold::Reserved(from_row(row)?),
        "unavailable" => Hold::Unavailable,
        "not_found" => Hold::NotFound,
        "too_many" => Hold::TooMany { capacity: row.try_get("capacity")? },
        "general" => Hold::General,
        "archived" => Hold::Archived,
        "key_taken" => Hold::KeyTaken,
        other => return Err(DbError::Corrupt(format!("hold outcome {other}"))),
    })
}

pub struct Precheck {
    pub resource: crate::domain::Resource,
    pub peak: i64,
    pub lapsed: bool,
}

pub async fn precheck(
    c: &impl GenericClient,
    resource_id: Uuid,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Option<Precheck>, DbError> {
    let stmt = c.prepare_cached(PRECHECK).await?;
    let Some(row) = c.query_opt(&stmt, &[&resource_id, &start, &end, &now]).await? else { return Ok(None) };
    Ok(Some(Precheck {
        resource: super::resources::from_row(&row)?,
        peak: row.try_get::<_, Option<i64>>("load")?.unwrap_or(0),
        lapsed: row.try_get("lapsed")?,
    }))
}

pub async fn expire_lapsed_overlapping(
    c: &impl GenericClient,
    resource_id: Uuid,
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    let stmt = c.prepare_cached(EXPIRE_LAPSED_OVERLAPPING).await?;
    c.query(&stmt, &[&resource_id, &start, &end, &now]).await?.iter().map(from_row).collect()
}

/// See [`EXPIRE_LAPSED_KEEPING_BUFFERS`].
pub async fn expire_lapsed_keeping_buffers(
    c: &impl GenericClient,
    resource_id: Uuid,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    let stmt = c.prepare_cached(EXPIRE_LAPSED_KEEPING_BUFFERS).await?;
    c.query(&stmt, &[&resource_id, &start, &end, &now]).await?.iter().map(from_row).collect()
}

/// See [`CLAIM_LAPSED`]: the expired holds of one resource, all of one resource.
pub async fn claim_lapsed(c: &impl GenericClient, now: DateTime<Utc>, limit: i64) -> Result<Vec<Reservation>, DbError> {
    let stmt = c.prepare_cached(CLAIM_LAPSED).await?;
    c.query(&stmt, &[&now, &limit]).await?.iter().map(from_row).collect()
}

pub async fn any_lapsed(c: &impl GenericClient, now: DateTime<Utc>) -> Result<bool, DbError> {
    let stmt = c.prepare_cached(ANY_LAPSED).await?;
    Ok(c.query_one(&stmt, &[&now]).await?.try_get(0)?)
}

pub async fn get(c: &impl GenericClient, id: Uuid) -> Result<Option<Reservation>, DbError> {
    let stmt = c.prepare_cached(GET).await?;
    c.query_opt(&stmt, &[&id]).await?.as_ref().map(from_row).transpose()
}

/// Locks the reservation row until the end of the caller's transaction.
pub async fn lock(c: &impl GenericClient, id: Uuid) -> Result<Option<Reservation>, DbError> {
    let stmt = c.prepare_cached(LOCK).await?;
    c.query_opt(&stmt, &[&id]).await?.as_ref().map(from_row).transpose()
}

pub async fn resource_of(c: &impl GenericClient, id: Uuid) -> Result<Option<Uuid>, DbError> {
    let stmt = c.prepare_cached(RESOURCE_OF).await?;
    Ok(c.query_opt(&stmt, &[&id]).await?.map(|row| row.try_get(0)).transpose()?)
}

pub async fn set_status(
    c: &impl GenericClient,
    id: Uuid,
    status: Status,
    failure: Option<FailureReason>,
    acted_by: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Reservation, DbError> {
    let stmt = c.prepare_cached(SET_STATUS).await?;
    let failure = failure.map(FailureReason::as_str);
    let event = event_kind(status);
    let row = c.query_one(&stmt, &[&id, &status.as_str(), &failure, &now, &event, &acted_by]).await?;
    from_row(&row)
}

/// A reschedule's new range, quantity and metadata (see [`MOVE_IF_FITS`]).
pub struct Move<'a> {
    pub id: Uuid,
    pub resource_id: Uuid,
    pub resource_capacity: i32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub metadata: &'a Metadata,
    pub acted_by: &'a str,
    /// Whether the range or quantity changes (`reservation.rescheduled`), or only the
    /// metadata (`reservation.updated`).
    pub rescheduled: bool,
    pub now: DateTime<Utc>,
}

/// The conditional move (see [`MOVE_IF_FITS`]): the moved reservation, `None` when it
/// does not fit there (it is unchanged), and the lapsed holds it wrote down first.
pub async fn move_if_fits(c: &impl GenericClient, m: &Move<'_>) -> Result<Inserted, DbError> {
    let stmt = c.prepare_cached(MOVE_IF_FITS).await?;
    let rows = c
        .query(
            &stmt,
            &[
                &m.id,
                &m.resource_id,
                &m.resource_capacity,
                &m.start,
                &m.end,
                &m.quantity,
                &m.now,
                &Json(m.metadata),
                &m.acted_by,
                &if m.rescheduled { "reservation.rescheduled" } else { "reservation.updated" },
            ],
        )
        .await?;
    written(&rows, "moved")
}

pub async fn peak_ahead(c: &impl GenericClient, resource_id: Uuid, now: DateTime<Utc>) -> Result<i64, DbError> {
    let stmt = c.prepare_cached(PEAK_AHEAD).await?;
    Ok(c.query_one(&stmt, &[&resource_id, &now]).await?.try_get::<_, Option<i64>>(0)?.unwrap_or(0))
}

pub async fn detach_settled(c: &impl GenericClient, resource_id: Uuid, now: DateTime<Utc>) -> Result<u64, DbError> {
    let stmt = c.prepare_cached(DETACH_SETTLED).await?;
    Ok(c.execute(&stmt, &[&resource_id, &now]).await?)
}

/// The outbox event a move into `status` records.
fn event_kind(status: Status) -> Option<&'static str> {
    match status {
        Status::Held => Some("reservation.held"),
        Status::Confirmed => Some("reservation.confirmed"),
        Status::Released => Some("reservation.released"),
        Status::Expired => Some("reservation.expired"),
        Status::Cancelled => Some("reservation.cancelled"),
        Status::Failed => Some("reservation.failed"),
        // The intent records the hand-off to the system of record.
        Status::Confirming => None,
    }
}

/// An active booking as buffers see it: its own range and the range it keeps.
#[derive(Debug, Clone, Copy)]
pub struct Kept {
    pub id: Uuid,
    pub claim: Claim,
    pub kept: Claim,
}

/// See [`KEPT_NEAR`].
pub async fn kept_near(
    c: &impl GenericClient,
    resource_id: Uuid,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Kept>, DbError> {
    let stmt = c.prepare_cached(KEPT_NEAR).await?;
    let rows = c.query(&stmt, &[&resource_id, &from, &to, &now]).await?;
    rows.iter()
        .map(|row| {
            let quantity = i64::from(row.try_get::<_, i32>("quantity")?);
            Ok(Kept {
                id: row.try_get("id")?,
                claim: Claim { start: row.try_get("starts_at")?, end: row.try_get("ends_at")?, quantity },
                kept: Claim { start: row.try_get("kept_from")?, end: row.try_get("kept_to")?, quantity },
            })
        })
        .collect()
}

pub async fn active_in_window(
    c: &impl GenericClient,
    resource_id: Uuid,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    let stmt = c.prepare_cached(ACTIVE_IN_WINDOW).await?;
    c.query(&stmt, &[&resource_id, &from, &to, &now]).await?.iter().map(from_row).collect()
}

/// What a page of a reservations list keeps (see `list_page!`).
#[derive(Debug, Clone, Copy)]
pub struct ListFilter<'a> {
    pub owner: Option<&'a str>,
    pub resource_id: Option<Uuid>,
    /// Empty: every status.
    pub statuses: &'a [Status],
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// The `(created_at, id)` of the last row of the page before.
    pub after: Option<(DateTime<Utc>, Uuid)>,
    pub limit: i64,
    pub now: DateTime<Utc>,
}

/// The statement of a page: the one whose index leads to it, the owner's when an owner
/// is named, else the resource's, else the one of everyone's.
pub fn list_statement(f: &ListFilter<'_>) -> &'static str {
    match (f.owner, f.resource_id) {
        (Some(_), _) => LIST_BY_OWNER,
        (None, Some(_)) => LIST_BY_RESOURCE,
        (None, None) => LIST_ALL,
    }
}

/// A page of a reservations list (see [`list_statement`]).
pub async fn list(c: &impl GenericClient, f: &ListFilter<'_>) -> Result<Vec<Reservation>, DbError> {
    let stmt = c.prepare_cached(list_statement(f)).await?;
    let statuses: Option<Vec<&str>> = (!f.statuses.is_empty()).then(|| f.statuses.iter().map(|s| s.as_str()).collect());
    let (after_at, after_id) = f.after.unzip();
    c.query(&stmt, &[&f.owner, &f.resource_id, &f.now, &statuses, &f.from, &f.to, &after_at, &after_id, &f.limit])
        .await?
        .iter()
        .map(from_row)
        .collect()
}

impl Reservation {
    pub fn claim(&self) -> Claim {
        Claim { start: self.start, end: self.end, quantity: self.quantity.into() }
    }
}

/// The `intent` of a row read with [`GET`] (absent from other statements' rows).
fn intent_of(row: &Row) -> Result<Option<Intent>, DbError> {
    if !row.columns().iter().any(|c| c.name() == "intent_id") {
        return Ok(None);
    }
    let Some(id) = row.try_get::<_, Option<Uuid>>("intent_id")? else { return Ok(None) };
    Ok(Some(Intent {
        id,
        state: row.try_get::<_, &str>("intent_state")?.parse()?,
        attempts: row.try_get("intent_attempts")?,
        updated_at: row.try_get("intent_updated_at")?,
    }))
}

fn from_row(row: &Row) -> Result<Reservation, DbError> {
    let failure: Option<&str> = row.try_get("failure_reason")?;
    Ok(Reservation {
        id: row.try_get("id")?,
        resource_id: row.try_get("resource_id")?,
        owner: row.try_get("owner")?,
        start: row.try_get("starts_at")?,
        end: row.try_get("ends_at")?,
        quantity: row.try_get("quantity")?,
        status: row.try_get::<_, &str>("status")?.parse()?,
        expires_at: row.try_get("expires_at")?,
        failure_reason: failure.map(str::parse).transpose()?,
        source: row.try_get::<_, &str>("source")?.parse()?,
        intent: intent_of(row)?,
        metadata: row.try_get::<_, Json<Metadata>>("metadata")?.0,
        acted_by: row.try_get("acted_by")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}
