//! SQL for the `reservations` table.

use super::{DbError, GenericClient};
use crate::domain::{Claim, FailureReason, Reservation, Source, Status};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

macro_rules! columns {
    () => {
        "id, resource_id, owner, starts_at, ends_at, quantity, status, expires_at, failure_reason, \
         source, created_at, updated_at"
    };
}

/// Inserts the reservation only if, at every instant of its range, the load of the
/// active, unlapsed reservations plus its quantity stays within the capacity.
///
/// The load is a sweep over the overlapping claims: +quantity at each (clipped) start,
/// -quantity at each end, ends first at one instant so that ranges are half-open; the
/// running sum's maximum is the peak. Run it only while holding the resource lock
/// ([`super::resources::lock`]), so the snapshot it reads includes every committed
/// competitor.
pub const INSERT_IF_FITS: &str = concat!(
    "WITH claims AS (",
    "  SELECT starts_at, ends_at, quantity FROM reservations",
    "  WHERE resource_id = $2 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')",
    "    AND period && tstzrange($5, $6, '[)')",
    "    AND NOT (status = 'HELD' AND expires_at <= $12)",
    "), events AS (",
    "  SELECT greatest(starts_at, $5) AS at, quantity AS delta FROM claims",
    "  UNION ALL SELECT least(ends_at, $6), -quantity FROM claims",
    "), peak AS (",
    "  SELECT coalesce(max(load), 0) AS load FROM (",
    "    SELECT sum(delta) OVER (ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS load FROM events",
    "  ) running",
    ") ",
    "INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, ",
    "quantity, status, expires_at, failure_reason, source, created_at, updated_at) ",
    "SELECT $1, $2, $3::int4, $4, $5, $6, $7::int4, $8, $9, $10, $11, $12, $12 FROM peak ",
    "WHERE peak.load + $7::int4 <= $3::int4 ",
    "RETURNING ",
    columns!()
);

/// Writes down the lapse of the holds that overlap a range, so that they stop counting
/// for the exclusion constraint too (its predicate cannot know the time).
pub const EXPIRE_LAPSED_OVERLAPPING: &str = "UPDATE reservations SET status = 'EXPIRED', updated_at = $4 \
     WHERE resource_id = $1 AND status = 'HELD' AND expires_at <= $4 \
     AND period && tstzrange($2, $3, '[)')";

pub const GET: &str = concat!("SELECT ", columns!(), " FROM reservations WHERE id = $1");

pub const LOCK: &str = concat!("SELECT ", columns!(), " FROM reservations WHERE id = $1 FOR UPDATE");

pub const RESOURCE_OF: &str = "SELECT resource_id FROM reservations WHERE id = $1";

pub const SET_STATUS: &str = concat!(
    "UPDATE reservations SET status = $2, failure_reason = $3, updated_at = $4 WHERE id = $1 RETURNING ",
    columns!()
);

/// What occupies a window: active, unlapsed reservations, in calendar order.
pub const ACTIVE_IN_WINDOW: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM reservations WHERE resource_id = $1 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED') ",
    "AND period && tstzrange($2, $3, '[)') AND NOT (status = 'HELD' AND expires_at <= $4) ",
    "ORDER BY starts_at, ends_at, id"
);

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
    pub now: DateTime<Utc>,
}

/// Inline expiry and the conditional insert, pipelined on one connection: one round
/// trip while the resource lock is held. `None` means the capacity is taken.
pub async fn expire_lapsed_and_insert_if_fits(
    c: &impl GenericClient,
    r: &NewReservation<'_>,
) -> Result<Option<Reservation>, DbError> {
    let (expire, insert) =
        tokio::try_join!(c.prepare_cached(EXPIRE_LAPSED_OVERLAPPING), c.prepare_cached(INSERT_IF_FITS))?;
    let status = status_str(r.status);
    let source = source_str(r.source);
    let no_failure: Option<&str> = None;
    let expire_params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] = [&r.resource_id, &r.start, &r.end, &r.now];
    let insert_params: [&(dyn tokio_postgres::types::ToSql + Sync); 12] = [
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
    ];
    let (_, row) = tokio::try_join!(c.execute(&expire, &expire_params), c.query_opt(&insert, &insert_params))?;
    row.as_ref().map(from_row).transpose()
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
    Ok(c.query_opt(&stmt, &[&id]).await?.map(|row| row.get(0)))
}

pub async fn set_status(
    c: &impl GenericClient,
    id: Uuid,
    status: Status,
    failure: Option<FailureReason>,
    now: DateTime<Utc>,
) -> Result<Reservation, DbError> {
    let stmt = c.prepare_cached(SET_STATUS).await?;
    let failure = failure.map(failure_str);
    let row = c.query_one(&stmt, &[&id, &status_str(status), &failure, &now]).await?;
    from_row(&row)
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

impl Reservation {
    pub fn claim(&self) -> Claim {
        Claim { start: self.start, end: self.end, quantity: self.quantity.into() }
    }
}

pub fn status_str(s: Status) -> &'static str {
    match s {
        Status::Held => "HELD",
        Status::Confirming => "CONFIRMING",
        Status::Confirmed => "CONFIRMED",
        Status::Released => "RELEASED",
        Status::Expired => "EXPIRED",
        Status::Cancelled => "CANCELLED",
        Status::Failed => "FAILED",
    }
}

fn parse_status(s: &str) -> Result<Status, DbError> {
    Ok(match s {
        "HELD" => Status::Held,
        "CONFIRMING" => Status::Confirming,
        "CONFIRMED" => Status::Confirmed,
        "RELEASED" => Status::Released,
        "EXPIRED" => Status::Expired,
        "CANCELLED" => Status::Cancelled,
        "FAILED" => Status::Failed,
        other => return Err(DbError::Corrupt(format!("reservation status {other}"))),
    })
}

fn source_str(s: Source) -> &'static str {
    match s {
        Source::Request => "request",
        Source::WaitlistOffer => "waitlist_offer",
    }
}

fn failure_str(f: FailureReason) -> &'static str {
    match f {
        FailureReason::Race => "race",
        FailureReason::Auth => "auth",
        FailureReason::Upstream => "upstream",
    }
}

fn from_row(row: &Row) -> Result<Reservation, DbError> {
    let source: &str = row.try_get("source")?;
    let failure: Option<&str> = row.try_get("failure_reason")?;
    Ok(Reservation {
        id: row.try_get("id")?,
        resource_id: row.try_get("resource_id")?,
        owner: row.try_get("owner")?,
        start: row.try_get("starts_at")?,
        end: row.try_get("ends_at")?,
        quantity: row.try_get("quantity")?,
        status: parse_status(row.try_get("status")?)?,
        expires_at: row.try_get("expires_at")?,
        failure_reason: match failure {
            None => None,
            Some("race") => Some(FailureReason::Race),
            Some("auth") => Some(FailureReason::Auth),
            Some("upstream") => Some(FailureReason::Upstream),
            Some(other) => return Err(DbError::Corrupt(format!("failure reason {other}"))),
        },
        source: match source {
            "request" => Source::Request,
            "waitlist_offer" => Source::WaitlistOffer,
            other => return Err(DbError::Corrupt(format!("source {other}"))),
        },
        intent: None,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}
