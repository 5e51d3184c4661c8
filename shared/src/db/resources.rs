//! SQL for the `resources` table.

use super::{DbError, GenericClient};
use crate::domain::calendar::{CalendarRules, Schedule, parse_time_zone};
use crate::domain::{Authority, BookingLimit, Metadata, Policies, Resource};
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::types::Json;
use uuid::Uuid;

statements![INSERT, GET, LOCK, LOCK_MANY, LOCK_FOR_CHANGE, UPDATE_SETTINGS, ARCHIVE, LIST];

macro_rules! columns {
    () => {
        "id, name, capacity, authority, upstream_ref, hold_ttl_seconds, offer_ttl_seconds, metadata, archived_at, \
         created_at, updated_at, time_zone, schedule, buffer_before_minutes, buffer_after_minutes, \
         min_notice_minutes, max_advance_days, slot_minutes, cancel_notice_minutes, reschedule_notice_minutes, \
         max_reschedules, max_hold_seconds, default_duration_minutes, booking_limits"
    };
}

pub const INSERT: &str = concat!(
    "INSERT INTO resources (id, name, capacity, authority, upstream_ref, hold_ttl_seconds, ",
    "offer_ttl_seconds, metadata, created_by, created_at, updated_at, time_zone, schedule, ",
    "buffer_before_minutes, buffer_after_minutes, min_notice_minutes, max_advance_days, slot_minutes, ",
    "cancel_notice_minutes, reschedule_notice_minutes, max_reschedules, max_hold_seconds, default_duration_minutes, ",
    "booking_limits) ",
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, ",
    "$23) ",
    "RETURNING ",
    columns!()
);

pub const GET: &str = concat!("SELECT ", columns!(), " FROM resources WHERE id = $1");

/// Serializes every writer that changes a resource's load. `NO KEY UPDATE` does not
/// block the `KEY SHARE` lock that inserting a reservation takes for its foreign key.
pub const LOCK: &str = concat!("SELECT ", columns!(), " FROM resources WHERE id = $1 FOR NO KEY UPDATE");

/// [`LOCK`] of several resources at once, in the one order of the lock order (by id):
/// two transactions locking overlapping sets wait for each other, never deadlock.
pub const LOCK_MANY: &str =
    concat!("SELECT ", columns!(), " FROM resources WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE");

/// The lock of a change to the resource row itself (its settings, its capacity):
/// `FOR UPDATE`, because a new capacity changes the key the reservations' foreign key
/// refers to, which `FOR NO KEY UPDATE` does not allow.
pub const LOCK_FOR_CHANGE: &str = concat!("SELECT ", columns!(), " FROM resources WHERE id = $1 FOR UPDATE");

/// Writes a resource's changeable settings; a new capacity cascades into the attached
/// reservations (their foreign key on `(resource_id, capacity)`). Run under [`LOCK_FOR_CHANGE`], which also keeps a
/// change of the calendar rules from interleaving with a reserve that judges them.
pub const UPDATE_SETTINGS: &str = concat!(
    "UPDATE resources SET name = $2, capacity = $3, hold_ttl_seconds = $4, offer_ttl_seconds = $5, ",
    "metadata = $6, updated_at = $7, time_zone = $8, schedule = $9, buffer_before_minutes = $10, ",
    "buffer_after_minutes = $11, min_notice_minutes = $12, max_advance_days = $13, slot_minutes = $14, ",
    "cancel_notice_minutes = $15, reschedule_notice_minutes = $16, max_reschedules = $17, max_hold_seconds = $18, ",
    "default_duration_minutes = $19, booking_limits = $20 ",
    "WHERE id = $1 RETURNING ",
    columns!()
);

/// Archives a resource; archiving again keeps the first time.
pub const ARCHIVE: &str = concat!(
    "UPDATE resources SET archived_at = coalesce(archived_at, $2), ",
    "updated_at = CASE WHEN archived_at IS NULL THEN $2 ELSE updated_at END ",
    "WHERE id = $1 RETURNING ",
    columns!()
);

/// A page of the resources, newest first: after the keyset position `($2, $3)` (none:
/// from the newest), at most `$4` rows, archived ones only when `$1`. By
/// `resources_created_idx`.
pub const LIST: &str = concat!(
    "SELECT ",
    columns!(),
    r#"
    FROM resources
    WHERE ($1::boolean OR archived_at IS NULL)
      AND (created_at, id) < (coalesce($2::timestamptz, 'infinity'),
                              coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
    ORDER BY created_at DESC, id DESC
    LIMIT $4"#
);

pub struct NewResource<'a> {
    pub id: Uuid,
    pub name: &'a str,
    pub capacity: i32,
    pub authority: Authority,
    pub upstream_ref: Option<&'a str>,
    pub hold_ttl_seconds: i32,
    pub offer_ttl_seconds: i32,
    pub metadata: &'a Metadata,
    pub created_by: &'a str,
    pub created_at: DateTime<Utc>,
    pub calendar: &'a CalendarRules,
    pub policies: &'a Policies,
    pub default_duration_minutes: Option<i32>,
}

pub async fn insert(c: &impl GenericClient, r: &NewResource<'_>) -> Result<Resource, DbError> {
    let row = c
        .row(
            INSERT,
            &[
                &r.id,
                &r.name,
                &r.capacity,
                &r.authority.as_str(),
                &r.upstream_ref,
                &r.hold_ttl_seconds,
                &r.offer_ttl_seconds,
                &Json(r.metadata),
                &r.created_by,
                &r.created_at,
                &r.calendar.time_zone.name(),
                &schedule_json(r.calendar),
                &r.calendar.buffer_before_minutes,
                &r.calendar.buffer_after_minutes,
                &r.calendar.min_notice_minutes,
                &r.calendar.max_advance_days,
                &r.calendar.slot_minutes,
                &r.policies.cancel_notice_minutes,
                &r.policies.reschedule_notice_minutes,
                &r.policies.max_reschedules,
                &r.policies.max_hold_seconds,
                &r.default_duration_minutes,
                &limits_json(r.policies),
            ],
        )
        .await?;
    from_row(&row)
}

pub async fn get(c: &impl GenericClient, id: Uuid) -> Result<Option<Resource>, DbError> {
    c.opt_row(GET, &[&id]).await?.as_ref().map(from_row).transpose()
}

/// See [`LIST`]; `after` is the `(created_at, id)` of the last row of the page before.
pub async fn list(
    c: &impl GenericClient,
    include_archived: bool,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Resource>, DbError> {
    let (after_at, after_id) = after.unzip();
    c.rows(LIST, &[&include_archived, &after_at, &after_id, &limit]).await?.iter().map(from_row).collect()
}

/// Locks the resource row until the end of the caller's transaction.
pub async fn lock(c: &impl GenericClient, id: Uuid) -> Result<Option<Resource>, DbError> {
    c.opt_row(LOCK, &[&id]).await?.as_ref().map(from_row).transpose()
}

/// Locks the resources `ids` ([`LOCK_MANY`]): those found, by id.
pub async fn lock_many(c: &impl GenericClient, ids: &[Uuid]) -> Result<Vec<Resource>, DbError> {
    c.rows(LOCK_MANY, &[&ids]).await?.iter().map(from_row).collect()
}

/// Locks the resource row for a change of the row itself ([`LOCK_FOR_CHANGE`]).
pub async fn lock_for_change(c: &impl GenericClient, id: Uuid) -> Result<Option<Resource>, DbError> {
    c.opt_row(LOCK_FOR_CHANGE, &[&id]).await?.as_ref().map(from_row).transpose()
}

/// A resource's changeable settings, as [`UPDATE_SETTINGS`] writes them.
pub struct Settings<'a> {
    pub name: &'a str,
    pub capacity: i32,
    pub hold_ttl_seconds: i32,
    pub offer_ttl_seconds: i32,
    pub metadata: &'a Metadata,
    pub calendar: &'a CalendarRules,
    pub policies: &'a Policies,
    pub default_duration_minutes: Option<i32>,
}

pub async fn update_settings(
    c: &impl GenericClient,
    id: Uuid,
    s: &Settings<'_>,
    now: DateTime<Utc>,
) -> Result<Resource, DbError> {
    let row = c
        .row(
            UPDATE_SETTINGS,
            &[
                &id,
                &s.name,
                &s.capacity,
                &s.hold_ttl_seconds,
                &s.offer_ttl_seconds,
                &Json(s.metadata),
                &now,
                &s.calendar.time_zone.name(),
                &schedule_json(s.calendar),
                &s.calendar.buffer_before_minutes,
                &s.calendar.buffer_after_minutes,
                &s.calendar.min_notice_minutes,
                &s.calendar.max_advance_days,
                &s.calendar.slot_minutes,
                &s.policies.cancel_notice_minutes,
                &s.policies.reschedule_notice_minutes,
                &s.policies.max_reschedules,
                &s.policies.max_hold_seconds,
                &s.default_duration_minutes,
                &limits_json(s.policies),
            ],
        )
        .await?;
    from_row(&row)
}

pub async fn archive(c: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<Resource, DbError> {
    from_row(&c.row(ARCHIVE, &[&id, &now]).await?)
}

pub(crate) fn from_row(row: &Row) -> Result<Resource, DbError> {
    Ok(Resource {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        capacity: row.try_get("capacity")?,
        authority: row.try_get::<_, &str>("authority")?.parse()?,
        upstream_ref: row.try_get("upstream_ref")?,
        hold_ttl_seconds: row.try_get("hold_ttl_seconds")?,
        offer_ttl_seconds: row.try_get("offer_ttl_seconds")?,
        metadata: row.try_get::<_, Json<Metadata>>("metadata")?.0,
        archived_at: row.try_get("archived_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        calendar: calendar_from_row(row)?,
        policies: Policies {
            cancel_notice_minutes: row.try_get("cancel_notice_minutes")?,
            reschedule_notice_minutes: row.try_get("reschedule_notice_minutes")?,
            max_reschedules: row.try_get("max_reschedules")?,
            max_hold_seconds: row.try_get("max_hold_seconds")?,
            limits: limits_from_row(row)?,
        },
        default_duration_minutes: row.try_get("default_duration_minutes")?,
    })
}

/// The limits as stored: none is NULL.
fn limits_json(p: &Policies) -> Option<Json<&[BookingLimit]>> {
    (!p.limits.is_empty()).then_some(Json(p.limits.as_slice()))
}

pub(crate) fn limits_from_row(row: &Row) -> Result<Vec<BookingLimit>, DbError> {
    match row.try_get::<_, Option<Json<Vec<BookingLimit>>>>("booking_limits")? {
        None => Ok(Vec::new()),
        Some(Json(limits)) => Ok(limits),
    }
}

fn schedule_json(c: &CalendarRules) -> Option<Json<Value>> {
    c.schedule.as_ref().map(|s| Json(s.to_json()))
}

pub(crate) fn calendar_from_row(row: &Row) -> Result<CalendarRules, DbError> {
    let zone: &str = row.try_get("time_zone")?;
    let schedule = match row.try_get::<_, Option<Json<Value>>>("schedule")? {
        None => None,
        Some(Json(v)) => Some(
            Schedule::from_json(&v, "schedule")
                .map_err(|e| DbError::Corrupt(format!("a stored schedule does not read: {e:?}")))?,
        ),
    };
    Ok(CalendarRules {
        time_zone: parse_time_zone(zone).map_err(|_| DbError::Corrupt(format!("unknown stored time zone {zone:?}")))?,
        schedule,
        buffer_before_minutes: row.try_get("buffer_before_minutes")?,
        buffer_after_minutes: row.try_get("buffer_after_minutes")?,
        min_notice_minutes: row.try_get("min_notice_minutes")?,
        max_advance_days: row.try_get("max_advance_days")?,
        slot_minutes: row.try_get("slot_minutes")?,
    })
}
