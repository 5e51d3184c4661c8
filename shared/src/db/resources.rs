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
