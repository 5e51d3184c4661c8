//! SQL for the `reservations` table: a reservation read, locked, written if it fits,
//! moved and settled, and the row mapping every module of reservations uses. The hold
//! is in hold.rs, the lapse in lapse.rs, the lists in reservation_lists.rs.

use super::{DbError, GenericClient};
use crate::domain::{Claim, EventKind, FailureReason, Intent, Item, Metadata, Reservation, Source, Status};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use tokio_postgres::types::Json;
use uuid::Uuid;

statements![
    INSERT_IF_FITS,
    MOVE_IF_FITS,
    PEAK_AHEAD,
    DETACH_SETTLED,
    GET,
    LOCK,
    LOCK_BOOKING,
    RESOURCE_OF,
    SET_STATUS,
    EXTEND,
    RESCHEDULES,
    BOOKING_EVENT,
    RESOURCES_OF_BOOKING,
    ITEMS_OF_BOOKING,
    ACTIVE_IN_WINDOW,
    KEPT_NEAR,
    KEPT_WIDER_NEAR,
    LIVE_LOAD,
];

/// The columns of a reservation row, in the order [`from_row`] reads.
macro_rules! columns {
    () => {
        "id, resource_id, owner, starts_at, ends_at, quantity, status, expires_at, failure_reason, \
         source, created_at, updated_at, metadata, acted_by"
    };
}
pub(super) use columns;

/// The booking's items as a column `items` ([`from_row`] reads it where a statement
/// selects it; without it, a row reads as a booking of its one resource).
macro_rules! items {
    ($row:literal) => {
        concat!("reservation_items(", $row, ".id, ", $row, ".resource_id, ", $row, ".quantity) AS items")
    };
}

/// The outbox payload of a reservation event, built from the row the statement wrote
/// (`reservation_event`), which must select `series_id`: an occurrence of a series
/// names it (`series_id`), other reservations carry no such field.
macro_rules! event_payload {
    ($row:literal) => {
        concat!(
            "(reservation_event(",
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
            ".acted_by, reservation_items(",
            $row,
            ".id, ",
            $row,
            ".resource_id, ",
            $row,
            ".quantity)) || jsonb_strip_nulls(jsonb_build_object('series_id', ",
            $row,
            ".series_id)))"
        )
    };
}

/// The conditional insert: writes down the lapsed holds that overlap the new
/// reservation, then inserts it only if its quantity fits under the capacity at every
/// instant of its range (`reservation_insert_if_fits`, which says why in that
/// order). Rows: the inserted one (`inserted`), and the holds it expired. Run it
/// only while holding the resource lock ([`super::resources::lock`]), in a statement
/// after the one that took it.
///
/// Parameters: `$1` id, `$2` resource, `$3` its capacity, `$4` owner, `$5` start,
/// `$6` end, `$7` quantity, `$8` status, `$9` expires_at, `$10` failure reason,
/// `$11` source, `$12` now, `$13` metadata, `$14` acted_by, and for an item of a
/// booking of several `$15` the booking (its lead row's id), `$16` the item's place and
/// `$17` the pool it was picked from (all NULL otherwise).
pub const INSERT_IF_FITS: &str = concat!(
    "SELECT inserted, ",
    columns!(),
    " FROM reservation_insert_if_fits($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"
);

/// The conditional move of a reschedule (`reservation_move_if_fits`):
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
/// capacity, so that a capacity change cascades only into what it
/// governs. Run under the resource's change lock.
pub const DETACH_SETTLED: &str = r#"
    UPDATE reservations SET resource_capacity = NULL
    WHERE resource_id = $1 AND resource_capacity IS NOT NULL
      AND (status NOT IN ('HELD', 'CONFIRMING', 'CONFIRMED') OR ends_at <= $2)"#;

/// A reservation with its upstream intent, if one was asked for.
pub const GET: &str = r#"
    SELECT r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
           r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by,
           i.id AS intent_id, i.state AS intent_state, i.attempts AS intent_attempts,
           i.updated_at AS intent_updated_at, reservation_items(r.id, r.resource_id, r.quantity) AS items,
           r.series_id
    FROM reservations r
    LEFT JOIN intents i ON i.reservation_id = r.id AND i.kind IN ('reserve', 'wait')
    WHERE r.id = $1"#;

pub const LOCK: &str = concat!(
    "SELECT ",
    columns!(),
    ", ",
    items!("reservations"),
    ", series_id FROM reservations WHERE id = $1 FOR UPDATE"
);

/// Locks every row of booking `$1` (the reservation, or the lead and each item of a
/// booking of several), the lead first, then the items in order: the one order in which
/// a whole booking's rows are taken. Every row comes back as locked (the newest
/// version, whatever committed while the lock was awaited): the lead for the
/// operation, every row for the judgement of the whole ([`LockedBooking`]).
pub const LOCK_BOOKING: &str = concat!(
    "SELECT ",
    columns!(),
    ", series_id, pool_id, item FROM reservations \
    WHERE id = $1 OR booking_id = $1 ORDER BY item NULLS FIRST, id FOR UPDATE"
);

pub const RESOURCE_OF: &str = "SELECT resource_id FROM reservations WHERE id = $1";

/// An update of booking `$1` that records its event in the same statement: `$set`
/// (the columns it writes, on every row of the booking: the reservation, or each item
/// of a booking of several, whose lead is `$1`), the event kind `$kind` (none when
/// NULL) and the time `$now` of the event, built from the lead row as updated, which
/// the statement returns. It judges what it writes: it writes only when every row of
/// the booking meets `$whole` (the state the change starts from), and otherwise writes
/// nothing and returns no row, so a row written down on its own is never written back.
macro_rules! update_with_event {
    (set: $set:literal, whole: $whole:literal, kind: $kind:literal, now: $now:literal) => {
        concat!(
            "WITH upd AS (UPDATE reservations SET ",
            $set,
            " WHERE (id = $1 OR booking_id = $1) AND NOT EXISTS (SELECT 1 FROM reservations o ",
            "WHERE (o.id = $1 OR o.booking_id = $1) AND NOT (",
            $whole,
            ")) RETURNING ",
            columns!(),
            ", series_id), lead AS (SELECT * FROM upd WHERE upd.id = $1), ",
            "ev AS (INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at) SELECT ",
            $kind,
            ", lead.id, ",
            event_payload!("lead"),
            ", ",
            $now,
            ", ",
            $now,
            " FROM lead WHERE ",
            $kind,
            " IS NOT NULL) SELECT ",
            columns!(),
            ", ",
            items!("lead"),
            ", series_id FROM lead"
        )
    };
}

/// Changes a booking's status from `$7` and records the event (`$5`, when not null) in
/// the same statement; `$6` is who acted (NULL: the service). Every row must be in `$7`,
/// and a hold must not have lapsed by `$4` unless it is being written down (`$2`
/// EXPIRED): otherwise nothing is written.
pub const SET_STATUS: &str = update_with_event!(
    set: "status = $2::text, failure_reason = $3::text, updated_at = $4, acted_by = $6",
    whole: "o.status = $7::text AND (o.status <> 'HELD' OR $2::text = 'EXPIRED' OR o.expires_at > $4)",
    kind: "$5::text",
    now: "$4"
);

/// Keeps a hold until `$2` and records its `reservation.extended` event (`$5`) in the
/// same statement; `$3` is now, `$4` who acted. Every row must be held and not lapsed
/// by `$3`. Run holding the booking's locks.
pub const EXTEND: &str = update_with_event!(
    set: "expires_at = $2, updated_at = $3, acted_by = $4",
    whole: "o.status = 'HELD' AND o.expires_at > $3",
    kind: "$5::text",
    now: "$3"
);

/// How many times a reservation was moved (`reservation_move_if_fits` counts them).
pub const RESCHEDULES: &str = "SELECT reschedules FROM reservations WHERE id = $1";

/// The one event of a booking of several (`$2`, at `$3`), once all its items are in:
/// the lead row `$1`'s, which carries every item.
pub const BOOKING_EVENT: &str = concat!(
    "INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at) SELECT $2::text, r.id, ",
    event_payload!("r"),
    ", $3, $3 FROM reservations r WHERE r.id = $1"
);

/// The resources a booking holds: its one resource, or every item's (`$1` the lead),
/// by id.
pub const RESOURCES_OF_BOOKING: &str =
    "SELECT DISTINCT resource_id FROM reservations WHERE id = $1 OR booking_id = $1 ORDER BY resource_id";

/// The rows of a booking of several (`$1` the lead), in item order.
pub const ITEMS_OF_BOOKING: &str =
    concat!("SELECT ", columns!(), ", pool_id FROM reservations WHERE booking_id = $1 ORDER BY item");

/// What occupies a window: active, unlapsed reservations, in calendar order; those
/// after `($5, $6, $7)` in that order when it is given, at most `$8` (none: all).
pub const ACTIVE_IN_WINDOW: &str = concat!(
    "SELECT ",
    columns!(),
    r#"
    FROM reservations
    WHERE resource_id = $1 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
      AND period && tstzrange($2, $3, '[)')
      AND NOT (status = 'HELD' AND expires_at <= $4)
      AND ($5::timestamptz IS NULL OR (starts_at, ends_at, id) > ($5, $6::timestamptz, $7::uuid))
    ORDER BY starts_at, ends_at, id
    LIMIT $8"#
);

/// The active bookings (lapsed holds left out) whose kept range (`buffered`)
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

/// Whether an active booking whose kept range is wider than its own period
/// (buffers in force when it was made) keeps any of `[$2, $3)`: by the partial index of
/// such bookings (`reservations_kept_wider_idx`), without reading the others. Written
/// `IS TRUE`, as the index's predicate is, so that the planner judges by the
/// expression's statistics.
pub const KEPT_WIDER_NEAR: &str = r#"
    SELECT EXISTS (
        SELECT 1 FROM reservations
        WHERE resource_id = $1 AND (buffered <> period) IS TRUE AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
          AND buffered && tstzrange($2, $3, '[)')
          AND NOT (status = 'HELD' AND expires_at <= $4)) AS kept_wider"#;

/// A capacity-N resource's live load over `[$2, $3)` from its load timeline, one row per
/// piece that holds some (sql/functions/resource_live_load.sql).
pub const LIVE_LOAD: &str = r#"
    SELECT starts_at, ends_at, load FROM resource_live_load($1, $2, $3, $4)"#;

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
    /// Which item of a booking of several the row is; `None` for a booking of one.
    pub item: Option<ItemOf>,
}

/// A row's place in a booking of several items.
#[derive(Debug, Clone, Copy)]
pub struct ItemOf {
    /// The booking: its lead row's id (the lead names itself).
    pub booking_id: Uuid,
    /// Its place in the request, from 0 (the lead).
    pub item: i16,
    /// The pool it was picked from.
    pub pool_id: Option<Uuid>,
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
    let status = r.status.as_str();
    let source = r.source.as_str();
    let no_failure: Option<&str> = None;
    let rows = c
        .rows(
            INSERT_IF_FITS,
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
                &r.item.map(|i| i.booking_id),
                &r.item.map(|i| i.item),
                &r.item.and_then(|i| i.pool_id),
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

pub async fn get(c: &impl GenericClient, id: Uuid) -> Result<Option<Reservation>, DbError> {
    c.opt_row(GET, &[&id]).await?.as_ref().map(from_row).transpose()
}

/// Locks the reservation row until the end of the caller's transaction.
pub async fn lock(c: &impl GenericClient, id: Uuid) -> Result<Option<Reservation>, DbError> {
    c.opt_row(LOCK, &[&id]).await?.as_ref().map(from_row).transpose()
}

pub async fn resource_of(c: &impl GenericClient, id: Uuid) -> Result<Option<Uuid>, DbError> {
    Ok(c.opt_row(RESOURCE_OF, &[&id]).await?.map(|row| row.try_get(0)).transpose()?)
}

/// A status change of a whole booking ([`SET_STATUS`]): from `from` to `to`.
#[derive(Debug, Clone, Copy)]
pub struct Transition {
    pub from: Status,
    pub to: Status,
}

/// Changes a booking's status ([`SET_STATUS`]). [`Written::NotWhole`] when some row of
/// the booking is no longer in `from` (or, held, has lapsed): nothing was written.
pub async fn set_status(
    c: &impl GenericClient,
    id: Uuid,
    change: Transition,
    failure: Option<FailureReason>,
    acted_by: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Written, DbError> {
    let failure = failure.map(FailureReason::as_str);
    let event = EventKind::of_status(change.to).map(EventKind::as_str);
    let (to, from) = (change.to.as_str(), change.from.as_str());
    let row = c.opt_row(SET_STATUS, &[&id, &to, &failure, &now, &event, &acted_by, &from]).await?;
    Ok(row.as_ref().map(from_row).transpose()?.map_or(Written::NotWhole, Written::Whole))
}

/// What a change of a whole booking wrote.
// One value per statement, matched at once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Written {
    /// Every row: the lead as written.
    Whole(Reservation),
    /// Nothing: some row was not in the state the change starts from.
    NotWhole,
}

impl Written {
    /// The lead as written, or [`DbError::Corrupt`] for a booking that its caller
    /// judged whole under its locks and that the statement found otherwise.
    pub fn expect_whole(self, id: Uuid) -> Result<Reservation, DbError> {
        match self {
            Written::Whole(r) => Ok(r),
            Written::NotWhole => Err(DbError::Corrupt(format!("booking {id} changed under its locks"))),
        }
    }
}

/// Keeps a hold until `until` ([`EXTEND`]).
pub async fn extend(
    c: &impl GenericClient,
    id: Uuid,
    until: DateTime<Utc>,
    acted_by: &str,
    now: DateTime<Utc>,
) -> Result<Written, DbError> {
    let event = EventKind::ReservationExtended.as_str();
    let row = c.opt_row(EXTEND, &[&id, &until, &now, &acted_by, &event]).await?;
    Ok(row.as_ref().map(from_row).transpose()?.map_or(Written::NotWhole, Written::Whole))
}

/// One row of a booking as [`LOCK_BOOKING`] reads it.
#[derive(Debug, Clone, Copy)]
pub struct RowState {
    pub status: Status,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A booking locked whole ([`LOCK_BOOKING`]).
pub struct LockedBooking {
    /// The lead row (a booking of one: the reservation), with the booking's items.
    pub lead: Reservation,
    /// Every row of the booking, the lead first.
    pub rows: Vec<RowState>,
}

/// Locks every row of a booking ([`LOCK_BOOKING`]); `None` when there is none.
pub async fn lock_booking(c: &impl GenericClient, id: Uuid) -> Result<Option<LockedBooking>, DbError> {
    let rows = c.rows(LOCK_BOOKING, &[&id]).await?;
    let Some(lead) = rows.first() else { return Ok(None) };
    let mut lead = from_row(lead)?;
    if lead.id != id {
        return Err(DbError::Corrupt(format!("booking {id} has items but no lead row")));
    }
    let states = rows
        .iter()
        .map(|row| {
            Ok(RowState { status: row.try_get::<_, &str>("status")?.parse()?, expires_at: row.try_get("expires_at")? })
        })
        .collect::<Result<Vec<_>, DbError>>()?;
    // A booking of several: its items are its rows, in order (`from_row` alone reads
    // a row as a booking of its one resource).
    if rows[0].try_get::<_, Option<i16>>("item")?.is_some() {
        lead.items = rows
            .iter()
            .map(|row| {
                Ok(Item {
                    resource_id: row.try_get("resource_id")?,
                    pool_id: row.try_get("pool_id")?,
                    quantity: row.try_get("quantity")?,
                })
            })
            .collect::<Result<_, DbError>>()?;
    }
    Ok(Some(LockedBooking { lead, rows: states }))
}

/// Records a booking's event ([`BOOKING_EVENT`]).
pub async fn booking_event(
    c: &impl GenericClient,
    lead: Uuid,
    kind: EventKind,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(BOOKING_EVENT, &[&lead, &kind.as_str(), &now]).await?;
    Ok(())
}

/// See [`RESOURCES_OF_BOOKING`]; empty when there is no such reservation.
pub async fn resources_of_booking(c: &impl GenericClient, id: Uuid) -> Result<Vec<Uuid>, DbError> {
    c.rows(RESOURCES_OF_BOOKING, &[&id]).await?.iter().map(|row| Ok(row.try_get(0)?)).collect()
}

/// See [`ITEMS_OF_BOOKING`]: each row with the pool it was picked from.
pub async fn items_of_booking(c: &impl GenericClient, id: Uuid) -> Result<Vec<(Reservation, Option<Uuid>)>, DbError> {
    c.rows(ITEMS_OF_BOOKING, &[&id]).await?.iter().map(|row| Ok((from_row(row)?, row.try_get("pool_id")?))).collect()
}

/// See [`RESCHEDULES`]; 0 for a reservation that does not exist.
pub async fn reschedules(c: &impl GenericClient, id: Uuid) -> Result<i32, DbError> {
    Ok(c.opt_row(RESCHEDULES, &[&id]).await?.map(|row| row.try_get(0)).transpose()?.unwrap_or(0))
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
    /// The event the move records: [`EventKind::ReservationRescheduled`] when the range
    /// or quantity changes, [`EventKind::ReservationUpdated`] when only the metadata does.
    pub event: EventKind,
    pub now: DateTime<Utc>,
}

/// The conditional move (see [`MOVE_IF_FITS`]): the moved reservation, `None` when it
/// does not fit there (it is unchanged), and the lapsed holds it wrote down first.
pub async fn move_if_fits(c: &impl GenericClient, m: &Move<'_>) -> Result<Inserted, DbError> {
    let rows = c
        .rows(
            MOVE_IF_FITS,
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
                &m.event.as_str(),
            ],
        )
        .await?;
    written(&rows, "moved")
}

pub async fn peak_ahead(c: &impl GenericClient, resource_id: Uuid, now: DateTime<Utc>) -> Result<i64, DbError> {
    Ok(c.row(PEAK_AHEAD, &[&resource_id, &now]).await?.try_get::<_, Option<i64>>(0)?.unwrap_or(0))
}

pub async fn detach_settled(c: &impl GenericClient, resource_id: Uuid, now: DateTime<Utc>) -> Result<u64, DbError> {
    Ok(c.exec(DETACH_SETTLED, &[&resource_id, &now]).await?)
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
    let rows = c.rows(KEPT_NEAR, &[&resource_id, &from, &to, &now]).await?;
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

/// See [`KEPT_WIDER_NEAR`].
pub async fn kept_wider_near(
    c: &impl GenericClient,
    resource_id: Uuid,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<bool, DbError> {
    Ok(c.row(KEPT_WIDER_NEAR, &[&resource_id, &from, &to, &now]).await?.try_get("kept_wider")?)
}

/// See [`LIVE_LOAD`]: each piece as a claim of its load, the pieces apart.
pub async fn live_load(
    c: &impl GenericClient,
    resource_id: Uuid,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Claim>, DbError> {
    let rows = c.rows(LIVE_LOAD, &[&resource_id, &from, &to, &now]).await?;
    rows.iter()
        .map(|row| {
            Ok(Claim { start: row.try_get("starts_at")?, end: row.try_get("ends_at")?, quantity: row.try_get("load")? })
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
    active_in_window_after(c, resource_id, (from, to), None, None, now).await
}

/// Where a page of [`active_in_window_after`] goes on from: the last row's start, end
/// and id.
pub type CalendarPosition = (DateTime<Utc>, DateTime<Utc>, Uuid);

/// The active reservations of a window after `after` in calendar order, at most
/// `limit` of them.
pub async fn active_in_window_after(
    c: &impl GenericClient,
    resource_id: Uuid,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    after: Option<CalendarPosition>,
    limit: Option<i64>,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    let (start, end, id) = (after.map(|a| a.0), after.map(|a| a.1), after.map(|a| a.2));
    c.rows(ACTIVE_IN_WINDOW, &[&resource_id, &from, &to, &now, &start, &end, &id, &limit])
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
fn items_of(row: &Row) -> Result<Vec<Item>, DbError> {
    if row.columns().iter().any(|c| c.name() == "items") {
        return Ok(row.try_get::<_, Json<Vec<Item>>>("items")?.0);
    }
    Ok(vec![Item { resource_id: row.try_get("resource_id")?, pool_id: None, quantity: row.try_get("quantity")? }])
}

/// The `series_id` of a row whose statement selects it; the statements that return a
/// row from a function's table (the hold, the insert, the move) do not, because a row
/// they make or move keeps the series it had (none, for a new one).
fn series_of(row: &Row) -> Result<Option<Uuid>, DbError> {
    if !row.columns().iter().any(|c| c.name() == "series_id") {
        return Ok(None);
    }
    Ok(row.try_get("series_id")?)
}

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

pub(super) fn from_row(row: &Row) -> Result<Reservation, DbError> {
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
        items: items_of(row)?,
        series_id: series_of(row)?,
        metadata: row.try_get::<_, Json<Metadata>>("metadata")?.0,
        acted_by: row.try_get("acted_by")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}
