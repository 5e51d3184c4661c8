//! SQL for the lapse: holds past their expiry that no statement has written down yet.
//! A lapsed hold stops counting for the load at once, but the exclusion constraint's
//! predicate cannot know the time, so a path that needs the range writes the lapse
//! down first (with its `reservation.expired` event) and hands the capacity over to
//! the waitlist; the sweep writes down the rest.

use super::reservations::{columns, event_payload, from_row};
use super::{DbError, GenericClient};
use crate::domain::{EventKind, Reservation};
use chrono::{DateTime, Utc};
use uuid::Uuid;

statements![
    EXPIRE_LAPSED_OVERLAPPING,
    EXPIRE_LAPSED_OVERLAPPING_ANY,
    EXPIRE_LAPSED_KEEPING_BUFFERS,
    CLAIM_LAPSED_RESOURCE,
    EXPIRE_LAPSED_BATCH,
    ANY_LAPSED,
    CLAIM_OWED_RESOURCE,
    TAKE_OWED,
];

/// Writes down the lapse of the held rows of resource `$1` lapsed at `$4` that also
/// meet `$cond`, with their `$5` (`reservation.expired`) events (none for the items of a
/// booking of several but its lead), and returns them. The last arm takes the
/// placeholders of now and of the kind, and CTEs to run first (`with:`).
macro_rules! expire_lapsed_where {
    ($cond:literal) => {
        expire_lapsed_where!(resource: "resource_id = $1", $cond)
    };
    (resource: $resource:literal, $cond:literal) => {
        expire_lapsed_where!(with: "", resource: $resource, now: "$4", kind: "$5", $cond)
    };
    (with: $with:literal, resource: $resource:literal, now: $now:literal, kind: $kind:literal, $cond:literal) => {
        concat!(
            r#"
    WITH "#,
            $with,
            // The leads of the bookings of several it writes down, locked first and in
            // id order (the lock order: a booking's lead before its items): two
            // write-downs of one booking from two of its resources then wait for each
            // other, and the first writes the whole booking down (the trigger
            // `reservation_booking_lapse`) before the second looks.
            r#"leads AS (
        SELECT l.id FROM reservations l
        WHERE l.id IN (SELECT booking_id FROM reservations
                       WHERE "#,
            $resource,
            r#" AND status = 'HELD' AND expires_at <= "#,
            $now,
            r#" AND "#,
            $cond,
            r#" AND booking_id IS NOT NULL)
        ORDER BY l.id
        FOR UPDATE OF l
    ), exp AS (
        UPDATE reservations SET status = 'EXPIRED', updated_at = "#,
            $now,
            r#", acted_by = NULL
        WHERE "#,
            $resource,
            r#" AND status = 'HELD' AND expires_at <= "#,
            $now,
            r#" AND "#,
            $cond,
            r#" AND (SELECT count(*) FROM leads) >= 0
        RETURNING "#,
            columns!(),
            r#", series_id
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT "#,
            $kind,
            r#"::text, exp.id, "#,
            event_payload!("exp"),
            ", ",
            $now,
            ", ",
            $now,
            r#" FROM exp WHERE NOT reservation_is_item(exp.id)
    )
    SELECT "#,
            columns!(),
            r#" FROM exp"#
        )
    };
}

/// Writes down the lapse of the holds that overlap a range (`$3` NULL: unbounded), so
/// that they stop counting for the exclusion constraint too (its predicate cannot know
/// the time). Run it under the resource lock; it returns what it expired, for the
/// hand-over to the waitlist. `$5` is the event kind, `reservation.expired`.
pub const EXPIRE_LAPSED_OVERLAPPING: &str = expire_lapsed_where!("period && tstzrange($2, $3, '[)')");

/// [`EXPIRE_LAPSED_OVERLAPPING`] on every resource of `$1` (an array) at once: a
/// booking of several items, under all their locks.
pub const EXPIRE_LAPSED_OVERLAPPING_ANY: &str =
    expire_lapsed_where!(resource: "resource_id = ANY($1)", "period && tstzrange($2, $3, '[)')");

/// [`EXPIRE_LAPSED_OVERLAPPING`] for the lapsed holds that keep buffers (`buffered`
/// wider than `period`) and whose kept range meets `[$2, $3)`: those a new
/// booking without buffers of its own could still meet.
pub const EXPIRE_LAPSED_KEEPING_BUFFERS: &str = expire_lapsed_where!(
    "period && tstzrange($2::timestamptz - interval '1 day', $3::timestamptz + interval '1 day', '[)') \
     AND buffered && tstzrange($2, $3, '[)') AND buffered <> period"
);

/// The sweep's claim: the resource of the oldest lapsed hold whose row no one else
/// holds, locked until the caller's transaction ends (`reservation_claim_lapsed`, which
/// says why it reads the expiry index in order); NULL when none is free. The resource
/// is picked from the function's snapshot, so another sweep may have written its last
/// lapsed holds down by the time the lock is taken: [`EXPIRE_LAPSED_BATCH`], a
/// statement of its own, reads them afresh.
pub const CLAIM_LAPSED_RESOURCE: &str = "SELECT reservation_claim_lapsed($1) AS id";

/// Up to `$3` of the holds of resource `$1` lapsed by `$2`, expired with their `$4`
/// (`reservation.expired`) events (none for the items of a booking of several but its
/// lead); run under the resource lock [`CLAIM_LAPSED_RESOURCE`] took.
pub const EXPIRE_LAPSED_BATCH: &str = expire_lapsed_where!(
    with: "batch AS (
        -- A CTE, run once: as an `IN` sub-select it could be run again for each row,
        -- each run passing over the rows already updated and bringing the next ones.
        -- Not locked here (the leads are locked before any row of their bookings): the
        -- update re-checks each at its latest version, and a row written down since
        -- this statement's snapshot is passed over for the next batch.
        SELECT r.id AS batch_id FROM reservations r
        WHERE r.resource_id = $1 AND r.status = 'HELD' AND r.expires_at <= $2
        ORDER BY r.expires_at LIMIT $3
    ), ",
    resource: "resource_id = $1",
    now: "$2",
    kind: "$4",
    "id IN (SELECT batch_id FROM batch)"
);

/// Whether any hold has lapsed by `$1` and is not written down yet.
pub const ANY_LAPSED: &str = "SELECT EXISTS (SELECT 1 FROM reservations WHERE status = 'HELD' AND expires_at <= $1)";

/// The sweep's claim of a hand-over owed: one resource whose waitlist is owed freed
/// capacity (`handovers_owed`, written when a booking of several was written down whole
/// from another of its resources) and whose row no one else holds. The lock stays held
/// until the caller's transaction ends, for the hand-over.
pub const CLAIM_OWED_RESOURCE: &str = "SELECT res.id FROM resources res \
    WHERE res.id IN (SELECT resource_id FROM handovers_owed) \
    ORDER BY res.id LIMIT 1 \
    FOR NO KEY UPDATE OF res SKIP LOCKED";

/// Takes the ranges owed to resource `$1`'s waitlist; run under the lock
/// [`CLAIM_OWED_RESOURCE`] took.
pub const TAKE_OWED: &str = "DELETE FROM handovers_owed WHERE resource_id = $1 RETURNING starts_at, ends_at";

/// See [`EXPIRE_LAPSED_OVERLAPPING`].
pub async fn expire_lapsed_overlapping(
    c: &impl GenericClient,
    resource_id: Uuid,
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    let kind = EventKind::ReservationExpired.as_str();
    c.rows(EXPIRE_LAPSED_OVERLAPPING, &[&resource_id, &start, &end, &now, &kind]).await?.iter().map(from_row).collect()
}

/// See [`EXPIRE_LAPSED_OVERLAPPING_ANY`].
pub async fn expire_lapsed_overlapping_any(
    c: &impl GenericClient,
    resource_ids: &[Uuid],
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    let kind = EventKind::ReservationExpired.as_str();
    c.rows(EXPIRE_LAPSED_OVERLAPPING_ANY, &[&resource_ids, &start, &end, &now, &kind])
        .await?
        .iter()
        .map(from_row)
        .collect()
}

/// See [`EXPIRE_LAPSED_KEEPING_BUFFERS`].
pub async fn expire_lapsed_keeping_buffers(
    c: &impl GenericClient,
    resource_id: Uuid,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    let kind = EventKind::ReservationExpired.as_str();
    c.rows(EXPIRE_LAPSED_KEEPING_BUFFERS, &[&resource_id, &start, &end, &now, &kind])
        .await?
        .iter()
        .map(from_row)
        .collect()
}

/// See [`CLAIM_LAPSED_RESOURCE`].
pub async fn claim_lapsed_resource(c: &impl GenericClient, now: DateTime<Utc>) -> Result<Option<Uuid>, DbError> {
    Ok(c.row(CLAIM_LAPSED_RESOURCE, &[&now]).await?.try_get(0)?)
}

/// See [`EXPIRE_LAPSED_BATCH`].
pub async fn expire_lapsed_batch(
    c: &impl GenericClient,
    resource_id: Uuid,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Reservation>, DbError> {
    let kind = EventKind::ReservationExpired.as_str();
    c.rows(EXPIRE_LAPSED_BATCH, &[&resource_id, &now, &limit, &kind]).await?.iter().map(from_row).collect()
}

/// See [`ANY_LAPSED`].
pub async fn any_lapsed(c: &impl GenericClient, now: DateTime<Utc>) -> Result<bool, DbError> {
    Ok(c.row(ANY_LAPSED, &[&now]).await?.try_get(0)?)
}

/// See [`CLAIM_OWED_RESOURCE`].
pub async fn claim_owed_resource(c: &impl GenericClient) -> Result<Option<Uuid>, DbError> {
    Ok(c.opt_row(CLAIM_OWED_RESOURCE, &[]).await?.map(|r| r.try_get(0)).transpose()?)
}

/// See [`TAKE_OWED`]: the span of every range owed, `None` when none is.
pub async fn take_owed(
    c: &impl GenericClient,
    resource_id: Uuid,
) -> Result<Option<(DateTime<Utc>, DateTime<Utc>)>, DbError> {
    let rows = c.rows(TAKE_OWED, &[&resource_id]).await?;
    let mut span: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
    for row in &rows {
        let (start, end): (DateTime<Utc>, DateTime<Utc>) = (row.try_get(0)?, row.try_get(1)?);
        span = Some(span.map_or((start, end), |(s, e)| (s.min(start), e.max(end))));
    }
    Ok(span)
}
