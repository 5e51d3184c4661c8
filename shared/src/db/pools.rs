//! SQL for the `pools` and `pool_members` tables: pools of resources that an item of a
//! booking is picked from, and the reads that pick.

use super::{DbError, GenericClient};
use crate::domain::{Pool, PoolStrategy};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

statements![INSERT, CLEAR_MEMBERS, ADD_MEMBERS, GET, LIST, UPDATE, LOCK, DELETE, MEMBERS_OF, LIVE_BOOKINGS];

/// A pool's columns with its members' ids in their order.
macro_rules! pool_row {
    ($p:literal) => {
        concat!(
            $p,
            ".id, ",
            $p,
            ".name, ",
            $p,
            ".strategy, ",
            $p,
            ".created_at, ",
            $p,
            ".updated_at, ",
            "ARRAY(SELECT m.resource_id FROM pool_members m WHERE m.pool_id = ",
            $p,
            ".id ORDER BY m.position) AS resource_ids"
        )
    };
}

pub const INSERT: &str = "INSERT INTO pools (id, name, strategy, created_by, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $5)";

/// Pool `$1`'s members, all of them: before [`ADD_MEMBERS`] replaces them.
pub const CLEAR_MEMBERS: &str = "DELETE FROM pool_members WHERE pool_id = $1";

/// Makes `$2` pool `$1`'s members, in that order.
pub const ADD_MEMBERS: &str = "INSERT INTO pool_members (pool_id, resource_id, position) \
     SELECT $1, m.resource_id, (m.n - 1)::integer FROM unnest($2::uuid[]) WITH ORDINALITY AS m (resource_id, n)";

pub const GET: &str = concat!("SELECT ", pool_row!("p"), " FROM pools p WHERE p.id = $1");

/// Serializes the changes of one pool (its members are replaced as a whole).
pub const LOCK: &str = "SELECT id FROM pools WHERE id = $1 FOR UPDATE";

/// A page of the pools, newest first, after the keyset position `($1, $2)`.
pub const LIST: &str = concat!(
    "SELECT ",
    pool_row!("p"),
    r#"
    FROM pools p
    WHERE (p.created_at, p.id) < (coalesce($1::timestamptz, 'infinity'),
                                  coalesce($2::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
    ORDER BY p.created_at DESC, p.id DESC
    LIMIT $3"#
);

pub const UPDATE: &str = "UPDATE pools SET name = $2, strategy = $3, updated_at = $4 WHERE id = $1";

/// Deletes a pool and its members; bookings picked from it keep its id as history.
pub const DELETE: &str = "DELETE FROM pools WHERE id = $1";

/// The pools `$1` as a booking picks from them: each pool's strategy and its members
/// in their order. A pool without members has no rows.
pub const MEMBERS_OF: &str = r#"
    SELECT p.id AS pool_id, p.strategy, m.resource_id
    FROM pools p JOIN pool_members m ON m.pool_id = p.id
    WHERE p.id = ANY($1)
    ORDER BY p.id, m.position"#;

/// The live bookings (held and not lapsed at `$4`, confirming, confirmed) of each
/// resource `$1` that meet `[$2, $3)`: what `least_booked` compares. Run under the
/// resources' locks, so that the same state always gives the same pick.
pub const LIVE_BOOKINGS: &str = r#"
    SELECT resource_id, count(*) AS live
    FROM reservations
    WHERE resource_id = ANY($1) AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
      AND period && tstzrange($2, $3, '[)') AND NOT (status = 'HELD' AND expires_at <= $4)
    GROUP BY resource_id"#;

pub struct NewPool<'a> {
    pub id: Uuid,
    pub name: &'a str,
    pub strategy: PoolStrategy,
    pub resource_ids: &'a [Uuid],
    pub created_by: &'a str,
    pub now: DateTime<Utc>,
}

/// Writes a new pool and its members (run in a transaction: two statements).
pub async fn insert(c: &impl GenericClient, p: &NewPool<'_>) -> Result<(), DbError> {
    c.exec(INSERT, &[&p.id, &p.name, &p.strategy.as_str(), &p.created_by, &p.now]).await?;
    set_members(c, p.id, p.resource_ids).await
}

/// Replaces a pool's members (two statements, in order: run in a transaction).
pub async fn set_members(c: &impl GenericClient, id: Uuid, resource_ids: &[Uuid]) -> Result<(), DbError> {
    c.exec(CLEAR_MEMBERS, &[&id]).await?;
    c.exec(ADD_MEMBERS, &[&id, &resource_ids]).await?;
    Ok(())
}

pub async fn get(c: &impl GenericClient, id: Uuid) -> Result<Option<Pool>, DbError> {
    c.opt_row(GET, &[&id]).await?.as_ref().map(from_row).transpose()
}

/// Locks a pool for a change; `false` when there is no such pool.
pub async fn lock(c: &impl GenericClient, id: Uuid) -> Result<bool, DbError> {
    Ok(c.opt_row(LOCK, &[&id]).await?.is_some())
}

/// See [`LIST`]; `after` is the `(created_at, id)` of the last row of the page before.
pub async fn list(
    c: &impl GenericClient,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Pool>, DbError> {
    let (after_at, after_id) = after.unzip();
    c.rows(LIST, &[&after_at, &after_id, &limit]).await?.iter().map(from_row).collect()
}

pub async fn update(
    c: &impl GenericClient,
    id: Uuid,
    name: &str,
    strategy: PoolStrategy,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(UPDATE, &[&id, &name, &strategy.as_str(), &now]).await?;
    Ok(())
}

/// Whether a pool was deleted.
pub async fn delete(c: &impl GenericClient, id: Uuid) -> Result<bool, DbError> {
    Ok(c.exec(DELETE, &[&id]).await? == 1)
}

/// A pool as a booking picks from it.
#[derive(Debug, Clone)]
pub struct Members {
    pub pool_id: Uuid,
    pub strategy: PoolStrategy,
    /// In the pool's order.
    pub resource_ids: Vec<Uuid>,
}

/// See [`MEMBERS_OF`]: the pools found (with members), in no particular order.
pub async fn members_of(c: &impl GenericClient, pools: &[Uuid]) -> Result<Vec<Members>, DbError> {
    let mut out: Vec<Members> = Vec::new();
    for row in c.rows(MEMBERS_OF, &[&pools]).await? {
        let pool_id: Uuid = row.try_get("pool_id")?;
        let resource_id: Uuid = row.try_get("resource_id")?;
        match out.last_mut() {
            Some(m) if m.pool_id == pool_id => m.resource_ids.push(resource_id),
            _ => out.push(Members {
                pool_id,
                strategy: row.try_get::<_, &str>("strategy")?.parse()?,
                resource_ids: vec![resource_id],
            }),
        }
    }
    Ok(out)
}

/// See [`LIVE_BOOKINGS`]: `(resource, live bookings)`, only for resources with some.
pub async fn live_bookings(
    c: &impl GenericClient,
    resources: &[Uuid],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<(Uuid, i64)>, DbError> {
    c.rows(LIVE_BOOKINGS, &[&resources, &from, &to, &now])
        .await?
        .iter()
        .map(|row| Ok((row.try_get("resource_id")?, row.try_get("live")?)))
        .collect()
}

fn from_row(row: &Row) -> Result<Pool, DbError> {
    Ok(Pool {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        strategy: row.try_get::<_, &str>("strategy")?.parse()?,
        resource_ids: row.try_get("resource_ids")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}
