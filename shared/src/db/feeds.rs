//! SQL for the `calendar_feeds` table, and the reads of the bookings a feed shows.

use super::{DbError, GenericClient};
use crate::domain::Status;
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

statements![INSERT, BY_TOKEN, GET, DELETE, ROTATE, RESOURCE_EVENTS, OWNER_EVENTS];

pub const INSERT: &str = "INSERT INTO calendar_feeds (id, token_hash, owner, resource_id, created_at) \
     VALUES ($1, $2, $3, $4, $5)";

/// The feed whose token hashes to `$1`, with its resource's name and zone.
pub const BY_TOKEN: &str = "SELECT f.id, f.owner, f.resource_id, r.name AS resource_name, r.time_zone \
     FROM calendar_feeds f LEFT JOIN resources r ON r.id = f.resource_id WHERE f.token_hash = $1";

pub const GET: &str = "SELECT id, owner, resource_id, created_at FROM calendar_feeds WHERE id = $1";

pub const DELETE: &str = "DELETE FROM calendar_feeds WHERE id = $1";

/// A new token hash for feed `$1`: the old URL stops at once.
pub const ROTATE: &str = "UPDATE calendar_feeds SET token_hash = $2, rotated_at = $3 WHERE id = $1 \
     RETURNING id, owner, resource_id, created_at";

/// The columns of a booking as a feed shows it, from `r` (reservations) and `res`.
macro_rules! event_columns {
    () => {
        "r.id, r.owner, r.quantity, r.starts_at, r.ends_at, r.status, r.reschedules, r.created_at, r.updated_at, \
         res.name AS resource_name, res.time_zone"
    };
}

/// Resource `$1`'s bookings that meet `[$2, $3)`: the live ones (a hold not lapsed at
/// `$4`) through the partial index of live periods, and those cancelled after `$5`
/// through the partial index of cancelled ones; the first `$6` by start.
pub const RESOURCE_EVENTS: &str = concat!(
    "SELECT ",
    event_columns!(),
    r#"
    FROM (SELECT id, owner, quantity, starts_at, ends_at, status, reschedules, created_at, updated_at, resource_id FROM reservations
          WHERE resource_id = $1 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
            AND period && tstzrange($2, $3, '[)') AND NOT (status = 'HELD' AND expires_at <= $4)
          UNION ALL
          SELECT id, owner, quantity, starts_at, ends_at, status, reschedules, created_at, updated_at, resource_id FROM reservations
          WHERE resource_id = $1 AND status = 'CANCELLED' AND updated_at > $5
            AND period && tstzrange($2, $3, '[)')) r
    JOIN resources res ON res.id = r.resource_id
    ORDER BY r.starts_at, r.id
    LIMIT $6"#
);

/// Principal `$1`'s own bookings that meet `[$2, $3)`, live (a hold not lapsed at
/// `$4`) or cancelled after `$5`; the first `$6` by start. By the owner's index: a
/// principal's bookings, not the table's.
pub const OWNER_EVENTS: &str = concat!(
    "SELECT ",
    event_columns!(),
    r#"
    FROM reservations r JOIN resources res ON res.id = r.resource_id
    WHERE r.owner = $1 AND r.period && tstzrange($2, $3, '[)')
      AND ((r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NOT (r.status = 'HELD' AND r.expires_at <= $4))
           OR (r.status = 'CANCELLED' AND r.updated_at > $5))
    ORDER BY r.starts_at, r.id
    LIMIT $6"#
);

/// A feed's row.
#[derive(Debug, Clone)]
pub struct FeedRow {
    pub id: Uuid,
    pub owner: String,
    pub resource_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
}

/// A feed found by its token, with what its calendar is named after.
#[derive(Debug, Clone)]
pub struct TokenFeed {
    pub id: Uuid,
    pub owner: String,
    /// The resource of a resource's feed, with its name and zone.
    pub resource: Option<(Uuid, String, String)>,
}

/// A booking as a feed reads it.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub id: Uuid,
    pub owner: String,
    pub quantity: i32,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub status: Status,
    pub reschedules: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub resource_name: String,
    pub time_zone: String,
}

/// The window of bookings a feed reads, and its bounds.
#[derive(Debug, Clone, Copy)]
pub struct EventWindow {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub now: DateTime<Utc>,
    /// Cancelled bookings show when cancelled after this.
    pub cancelled_since: DateTime<Utc>,
    pub max_events: i64,
}

fn feed_row(row: &Row) -> Result<FeedRow, DbError> {
    Ok(FeedRow {
        id: row.try_get("id")?,
        owner: row.try_get("owner")?,
        resource_id: row.try_get("resource_id")?,
        created_at: row.try_get("created_at")?,
    })
}

pub async fn insert(c: &impl GenericClient, feed: &FeedRow, token_hash: &[u8]) -> Result<(), DbError> {
    c.exec(INSERT, &[&feed.id, &token_hash, &feed.owner, &feed.resource_id, &feed.created_at]).await?;
    Ok(())
}

pub async fn by_token(c: &impl GenericClient, token_hash: &[u8]) -> Result<Option<TokenFeed>, DbError> {
    let Some(row) = c.opt_row(BY_TOKEN, &[&token_hash]).await? else { return Ok(None) };
    let resource = match row.try_get::<_, Option<Uuid>>("resource_id")? {
        Some(id) => Some((id, row.try_get("resource_name")?, row.try_get("time_zone")?)),
        None => None,
    };
    Ok(Some(TokenFeed { id: row.try_get("id")?, owner: row.try_get("owner")?, resource }))
}

pub async fn get(c: &impl GenericClient, id: Uuid) -> Result<Option<FeedRow>, DbError> {
    c.opt_row(GET, &[&id]).await?.map(|row| feed_row(&row)).transpose()
}

pub async fn delete(c: &impl GenericClient, id: Uuid) -> Result<bool, DbError> {
    Ok(c.exec(DELETE, &[&id]).await? == 1)
}

pub async fn rotate(
    c: &impl GenericClient,
    id: Uuid,
    token_hash: &[u8],
    now: DateTime<Utc>,
) -> Result<Option<FeedRow>, DbError> {
    c.opt_row(ROTATE, &[&id, &token_hash, &now]).await?.map(|row| feed_row(&row)).transpose()
}

/// The bookings of a resource's feed (`Some(resource)`) or of an owner's.
pub async fn events(
    c: &impl GenericClient,
    resource: Option<Uuid>,
    owner: &str,
    w: EventWindow,
) -> Result<Vec<EventRow>, DbError> {
    let rows = match resource {
        Some(id) => c.rows(RESOURCE_EVENTS, &[&id, &w.from, &w.to, &w.now, &w.cancelled_since, &w.max_events]).await?,
        None => c.rows(OWNER_EVENTS, &[&owner, &w.from, &w.to, &w.now, &w.cancelled_since, &w.max_events]).await?,
    };
    rows.iter()
        .map(|row| {
            Ok(EventRow {
                id: row.try_get("id")?,
                owner: row.try_get("owner")?,
                quantity: row.try_get("quantity")?,
                starts_at: row.try_get("starts_at")?,
                ends_at: row.try_get("ends_at")?,
                status: row.try_get::<_, &str>("status")?.parse()?,
                reschedules: row.try_get("reschedules")?,
                created_at: row.try_get("created_at")?,
                updated_at: row.try_get("updated_at")?,
                resource_name: row.try_get("resource_name")?,
                time_zone: row.try_get("time_zone")?,
            })
        })
        .collect()
}
