//! SQL for the `resources` table.

use super::{DbError, GenericClient};
use crate::domain::{Authority, Resource};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

macro_rules! columns {
    () => {
        "id, name, capacity, authority, upstream_ref, hold_ttl_seconds, offer_ttl_seconds, created_at"
    };
}

pub const INSERT: &str = concat!(
    "INSERT INTO resources (id, name, capacity, authority, upstream_ref, hold_ttl_seconds, ",
    "offer_ttl_seconds, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ",
    "RETURNING ",
    columns!()
);

pub const GET: &str = concat!("SELECT ", columns!(), " FROM resources WHERE id = $1");

/// Serializes every writer that changes a resource's load. `NO KEY UPDATE` does not
/// block the `KEY SHARE` lock that inserting a reservation takes for its foreign key.
pub const LOCK: &str = concat!("SELECT ", columns!(), " FROM resources WHERE id = $1 FOR NO KEY UPDATE");

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
    pub created_by: &'a str,
    pub created_at: DateTime<Utc>,
}

pub async fn insert(c: &impl GenericClient, r: &NewResource<'_>) -> Result<Resource, DbError> {
    let stmt = c.prepare_cached(INSERT).await?;
    let row = c
        .query_one(
            &stmt,
            &[
                &r.id,
                &r.name,
                &r.capacity,
                &r.authority.as_str(),
                &r.upstream_ref,
                &r.hold_ttl_seconds,
                &r.offer_ttl_seconds,
                &r.created_by,
                &r.created_at,
            ],
        )
        .await?;
    from_row(&row)
}

pub async fn get(c: &impl GenericClient, id: Uuid) -> Result<Option<Resource>, DbError> {
    let stmt = c.prepare_cached(GET).await?;
    c.query_opt(&stmt, &[&id]).await?.as_ref().map(from_row).transpose()
}

/// See [`LIST`]; `after` is the `(created_at, id)` of the last row of the page before.
pub async fn list(
    c: &impl GenericClient,
    include_archived: bool,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Resource>, DbError> {
    let stmt = c.prepare_cached(LIST).await?;
    let (after_at, after_id) = after.unzip();
    c.query(&stmt, &[&include_archived, &after_at, &after_id, &limit]).await?.iter().map(from_row).collect()
}

/// Locks the resource row until the end of the caller's transaction.
pub async fn lock(c: &impl GenericClient, id: Uuid) -> Result<Option<Resource>, DbError> {
    let stmt = c.prepare_cached(LOCK).await?;
    c.query_opt(&stmt, &[&id]).await?.as_ref().map(from_row).transpose()
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
        created_at: row.try_get("created_at")?,
    })
}
