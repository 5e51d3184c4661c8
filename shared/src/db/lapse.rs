//! SQL for the lapse: holds past their expiry that no statement has written down yet.
//! A lapsed hold stops counting for the load at once, but the exclusion constraint's
//! predicate cannot know the time, so a path that needs the range writes the lapse
//! down first (with its `reservation.expired` event) and hands the capacity over to
//! the waitlist; the sweep writes down the rest.

use super::reservations::{columns, from_row};
use super::{DbError, GenericClient};
use crate::domain::Reservation;
use chrono::{DateTime, Utc};
use uuid::Uuid;

statements![
    EXPIRE_LAPSED_IN_WAY,
    EXPIRE_LAPSED_OVERLAPPING,
    EXPIRE_LAPSED_OVERLAPPING_ANY,
    EXPIRE_LAPSED_MEETING_KEPT,
    CLAIM_LAPSED_RESOURCE,
    EXPIRE_LAPSED_BATCH,
    ANY_LAPSED,
    CLAIM_OWED_RESOURCE,
    TAKE_OWED,
];

/// Writes down the lapse of the held rows of resource `$1` lapsed at `$4` that also
/// meet `$cond`, with their `reservation.expired` events (`reservation_expire_lapsed`,
/// the one home of a write-down), and returns them. The last arm takes the placeholder
/// of now, and CTEs to run first (`with:`).
macro_rules! expire_lapsed_where {
    ($cond:literal) => {
        expire_lapsed_where!(resource: "resource_id = $1", $cond)
    };
    (resource: $resource:literal, $cond:literal) => {
        expire_lapsed_where!(with: "", resource: $resource, now: "$4", $cond)
    };
    (with: $with:literal, resource: $resource:literal, now: $now:literal, $cond:literal) => {
        concat!(
            "WITH ",
            $with,
            "lapsed AS (SELECT id FROM reservations WHERE ",
            $resource,
            " AND status = 'HELD' AND expires_at <= ",
            $now,
            " AND ",
            $cond,
            ") SELECT ",
            columns!(),
            ", series_id FROM reservation_expire_lapsed(ARRAY(SELECT id FROM lapsed), ",
            $now,
            ")"
        )
    };
}

/// Writes down the lapse of the holds in the way of a claim of `$4` units of `[$2, $3)`
/// on resource `$1` at `$5` (`reservation_expire_in_way`: on a single unit every one
/// over the range; on capacity N, the oldest over each piece of the load timeline
/// without room for it, until it has room, however many lapsed), and returns them,
/// for the hand-over to the waitlist. Run it under the resource lock.
pub const EXPIRE_LAPSED_IN_WAY: &str =
    concat!("SELECT ", columns!(), ", series_id FROM reservation_expire_in_way($1, $2, $3, $4, $5)");

/// Writes down the lapse of the holds that overlap a range (`$3` NULL: unbounded), so
/// that they stop counting for the exclusion constraint too (its predicate cannot know
/// the time). Run it under the resource lock; it returns what it expired, for the
/// hand-over to the waitlist.
pub const EXPIRE_LAPSED_OVERLAPPING: &str = expire_lapsed_where!("period && tstzrange($2, $3, '[)')");

/// [`EXPIRE_LAPSED_OVERLAPPING`] on every resource of `$1` (an array) at once: a
/// booking of several items, under all their locks.
pub const EXPIRE_LAPSED_OVERLAPPING_ANY: &str =
    expire_lapsed_where!(resource: "resource_id = ANY($1)", "period && tstzrange($2, $3, '[)')");

/// [`EXPIRE_LAPSED_OVERLAPPING`] on a single unit for the lapsed holds whose kept
/// ranges (`buffered`) meet `[$2, $3)`, the range a new booking keeps: exactly those the
/// exclusion constraint would still count against it, and no others, found by the
/// constraint's own index.
pub const EXPIRE_LAPSED_MEETING_KEPT: &str =
    expire_lapsed_where!("resource_capacity = 1 AND buffered && tstzrange($2, $3, '[)')");

/// The sweep's claim: the resource of the oldest lapsed hold whose row no one else
/// holds, locked until the caller's transaction ends (`reservation_claim_lapsed`, which
/// says why it reads the expiry index in order); NULL when none is free. The resource
/// is picked from the function's snapshot, so another sweep may have written its last
/// lapsed holds down by the time the lock is taken: [`EXPIRE_LAPSED_BATCH`], a
/// statement of its own, reads them afresh.
pub const CLAIM_LAPSED_RESOURCE: &str = "SELECT reservation_claim_lapsed($1) AS id";

/// Up to `$3` of the holds of resource `$1` lapsed by `$2`, oldest first, expired with
/// their events; run under the resource lock [`CLAIM_LAPSED_RESOURCE`] took.
pub const EXPIRE_LAPSED_BATCH: &str = expire_lapsed_where!(
    with: "batch AS (
        -- Not locked here (the leads are locked before any row of their bookings): the
        -- write-down re-checks each at its latest version, and a row written down since
        -- this statement's snapshot is passed over for the next batch.
        SELECT r.id AS batch_id FROM reservations r
        WHERE r.resource_id = $1 AND r.status = 'HELD' AND r.expires_at <= $2
        ORDER BY r.expires_at LIMIT $3
    ), ",
    resource: "resource_id = $1",
    now: "$2",
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

/// See [`EXPIRE_LAPSED_IN_WAY`].
pub async fn expire_lapsed_in_way(
    c: &impl GenericClient,
    resource_id: Uuid,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
    quantity: i32,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    c.rows(EXPIRE_LAPSED_IN_WAY, &[&resource_id, &start, &end, &quantity, &now]).await?.iter().map(from_row).collect()
}

/// See [`EXPIRE_LAPSED_OVERLAPPING`].
pub async fn expire_lapsed_overlapping(
    c: &impl GenericClient,
    resource_id: Uuid,
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    c.rows(EXPIRE_LAPSED_OVERLAPPING, &[&resource_id, &start, &end, &now]).await?.iter().map(from_row).collect()
}

/// See [`EXPIRE_LAPSED_OVERLAPPING_ANY`].
pub async fn expire_lapsed_overlapping_any(
    c: &impl GenericClient,
    resource_ids: &[Uuid],
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    c.rows(EXPIRE_LAPSED_OVERLAPPING_ANY, &[&resource_ids, &start, &end, &now]).await?.iter().map(from_row).collect()
}

/// See [`EXPIRE_LAPSED_MEETING_KEPT`].
pub async fn expire_lapsed_meeting_kept(
    c: &impl GenericClient,
    resource_id: Uuid,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Reservation>, DbError> {
    c.rows(EXPIRE_LAPSED_MEETING_KEPT, &[&resource_id, &start, &end, &now]).await?.iter().map(from_row).collect()
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
    c.rows(EXPIRE_LAPSED_BATCH, &[&resource_id, &now, &limit]).await?.iter().map(from_row).collect()
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
