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

statements![EXPIRE_LAPSED_OVERLAPPING, EXPIRE_LAPSED_OVERLAPPING_ANY, EXPIRE_LAPSED_KEEPING_BUFFERS, CLAIM_LAPSED, ANY_LAPSED];

/// Writes down the lapse of the held rows of resource `$1` lapsed at `$4` that also
/// meet `$cond`, with their `$5` (`reservation.expired`) events (none for the items of a
/// booking of several but its lead), and returns them.
macro_rules! expire_lapsed_where {
    ($cond:literal) => {
        expire_lapsed_where!(resource: "resource_id = $1", $cond)
    };
    (resource: $resource:literal, $cond:literal) => {
        concat!(
            r#"
    WITH exp AS (
        UPDATE reservations SET status = 'EXPIRED', updated_at = $4, acted_by = NULL
        WHERE "#,
            $resource,
            r#" AND status = 'HELD' AND expires_at <= $4 AND "#,
            $cond,
            r#"
        RETURNING "#,
            columns!(),
            r#", series_id
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT $5::text, exp.id, "#,
            event_payload!("exp"),
            r#", $4, $4 FROM exp WHERE NOT reservation_is_item(exp.id)
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

/// The sweep's claim: one resource that has lapsed holds and whose row no one else
/// holds (`SKIP LOCKED`: concurrent sweeps take different resources, never wait, never
/// deadlock), and up to `$2` of its lapsed holds, expired in the same statement. The
/// resource lock stays held until the caller's transaction ends, for the hand-over.
/// It can come back empty while lapsed holds remain (their resource was just taken by
/// another sweep, or was held); [`ANY_LAPSED`] tells the caller whether to go on.
/// `$3` is the event kind, `reservation.expired`.
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
            ORDER BY r.expires_at LIMIT $2
            -- Locked as they are read, each re-checked at its latest version: a row
            -- another sweep expired after this statement's snapshot is passed over for
            -- the next one, so a batch is never emptied by rows already gone.
            FOR UPDATE OF r)
          AND status = 'HELD' AND expires_at <= $1
        RETURNING "#,
    columns!(),
    r#", series_id
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT $3::text, exp.id, "#,
    event_payload!("exp"),
    r#", $1, $1 FROM exp WHERE NOT reservation_is_item(exp.id)
    )
    SELECT "#,
    columns!(),
    r#" FROM exp"#
);

/// Whether any hold has lapsed by `$1` and is not written down yet.
pub const ANY_LAPSED: &str = "SELECT EXISTS (SELECT 1 FROM reservations WHERE status = 'HELD' AND expires_at <= $1)";

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
    c.rows(EXPIRE_LAPSED_OVERLAPPING_ANY, &[&resource_ids, &start, &end, &now, &kind]).await?.iter().map(from_row).collect()
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
    c.rows(EXPIRE_LAPSED_KEEPING_BUFFERS, &[&resource_id, &start, &end, &now, &kind]).await?.iter().map(from_row).collect()
}

/// See [`CLAIM_LAPSED`]: the expired holds of one resource, all of one resource.
pub async fn claim_lapsed(c: &impl GenericClient, now: DateTime<Utc>, limit: i64) -> Result<Vec<Reservation>, DbError> {
    let kind = EventKind::ReservationExpired.as_str();
    c.rows(CLAIM_LAPSED, &[&now, &limit, &kind]).await?.iter().map(from_row).collect()
}

/// See [`ANY_LAPSED`].
pub async fn any_lapsed(c: &impl GenericClient, now: DateTime<Utc>) -> Result<bool, DbError> {
    Ok(c.row(ANY_LAPSED, &[&now]).await?.try_get(0)?)
}

