//! SQL for the `webhook_endpoints` and `webhook_deliveries` tables.

use super::{DbError, GenericClient};
use crate::config::Secret;
use crate::domain::webhooks::Webhook;
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

statements![INSERT, GET, LIST, ROTATE_SECRET, DELETE, DUE_FOR_EVENT, RECORD_DELIVERY, PURGE_DELIVERIES];

macro_rules! columns {
    () => {
        "id, url, resource_id, event_types, created_by, created_at"
    };
}

pub const INSERT: &str = concat!(
    "INSERT INTO webhook_endpoints (id, url, secret, resource_id, event_types, created_by, created_at) ",
    "VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ",
    columns!()
);

pub const GET: &str = concat!("SELECT ", columns!(), " FROM webhook_endpoints WHERE id = $1 AND deleted_at IS NULL");

/// A page of the live endpoints, newest first, after the keyset position `($1, $2)`.
/// By `webhook_endpoints_created_idx`.
pub const LIST: &str = concat!(
    "SELECT ",
    columns!(),
    r#"
    FROM webhook_endpoints
    WHERE deleted_at IS NULL
      AND (created_at, id) < (coalesce($1::timestamptz, 'infinity'),
                              coalesce($2::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
    ORDER BY created_at DESC, id DESC
    LIMIT $3"#
);

/// A new secret for a live endpoint (`$2`); the current one signs beside it until `$3`,
/// or stops at once when `$3` is not after `$4` (now). The answer's `previous_secret_expires_at`
/// is when the old secret stops.
pub const ROTATE_SECRET: &str = concat!(
    "UPDATE webhook_endpoints SET \
       previous_secret = CASE WHEN $3::timestamptz > $4::timestamptz THEN secret END, \
       previous_secret_expires_at = CASE WHEN $3::timestamptz > $4::timestamptz THEN $3::timestamptz END, \
       secret = $2 \
     WHERE id = $1 AND deleted_at IS NULL RETURNING ",
    columns!(),
    ", previous_secret_expires_at"
);

/// Deleting keeps the row (its deliveries refer to it) and stops every delivery to it.
pub const DELETE: &str = "UPDATE webhook_endpoints SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL";

/// The endpoints an event still has to reach: live, wanting its type, for its resource
/// or for all, registered by the time the event happened, and without a delivery of it;
/// with the secret a rotation left signing until after `$5` (now), if any.
pub const DUE_FOR_EVENT: &str = r#"
    SELECT e.id, e.url, e.secret,
           CASE WHEN e.previous_secret_expires_at > $5 THEN e.previous_secret END AS previous_secret
    FROM webhook_endpoints e
    WHERE e.deleted_at IS NULL
      AND $2 = ANY (e.event_types)
      AND (e.resource_id IS NULL OR e.resource_id = $3)
      AND e.created_at <= $4
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = $1 AND d.endpoint_id = e.id)
    ORDER BY e.id"#;

/// Records an accepted delivery; a second acceptance (the at-least-once window) keeps
/// the first.
pub const RECORD_DELIVERY: &str = "INSERT INTO webhook_deliveries (event_id, endpoint_id, status, delivered_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT ON CONSTRAINT webhook_deliveries_pkey DO NOTHING";

/// Deliveries older than the retention, in bounded batches: by then SQS has long
/// dropped the message (its retention is four days), so no retry can ask.
pub const PURGE_DELIVERIES: &str = "DELETE FROM webhook_deliveries WHERE (event_id, endpoint_id) IN ( \
     SELECT event_id, endpoint_id FROM webhook_deliveries WHERE delivered_at < $1 ORDER BY delivered_at LIMIT $2)";

/// Where to send, and the keys to sign with.
#[derive(Debug, Clone)]
pub struct Target {
    pub id: Uuid,
    pub url: String,
    pub secret: Secret,
    /// The secret before a rotation, while it still signs.
    pub previous_secret: Option<Secret>,
}

impl Target {
    /// The secrets to sign with: the current one, then the previous one while it lasts.
    pub fn secrets(&self) -> Vec<&str> {
        std::iter::once(self.secret.expose()).chain(self.previous_secret.as_ref().map(Secret::expose)).collect()
    }
}

pub struct NewEndpoint<'a> {
    pub id: Uuid,
    pub url: &'a str,
    pub secret: &'a Secret,
    pub resource_id: Option<Uuid>,
    pub event_types: &'a [String],
    pub created_by: &'a str,
    pub created_at: DateTime<Utc>,
}

fn from_row(r: &Row) -> Result<Webhook, DbError> {
    Ok(Webhook {
        id: r.try_get("id")?,
        url: r.try_get("url")?,
        resource_id: r.try_get("resource_id")?,
        event_types: r.try_get("event_types")?,
        created_by: r.try_get("created_by")?,
        created_at: r.try_get("created_at")?,
    })
}

pub async fn insert(c: &impl GenericClient, new: &NewEndpoint<'_>) -> Result<Webhook, DbError> {
    let stmt = c.prepare_cached(INSERT).await?;
    let row = c
        .query_one(
            &stmt,
            &[
                &new.id,
                &new.url,
                &new.secret.expose(),
                &new.resource_id,
                &new.event_types,
                &new.created_by,
                &new.created_at,
            ],
        )
        .await?;
    from_row(&row)
}

pub async fn get(c: &impl GenericClient, id: Uuid) -> Result<Option<Webhook>, DbError> {
    let stmt = c.prepare_cached(GET).await?;
    c.query_opt(&stmt, &[&id]).await?.as_ref().map(from_row).transpose()
}

/// See [`LIST`]; `after` is the `(created_at, id)` of the last row of the page before.
pub async fn list(
    c: &impl GenericClient,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Webhook>, DbError> {
    let stmt = c.prepare_cached(LIST).await?;
    let (after_at, after_id) = after.unzip();
    c.query(&stmt, &[&after_at, &after_id, &limit]).await?.iter().map(from_row).collect()
}

/// `true` when a live endpoint was deleted.
pub async fn delete(c: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<bool, DbError> {
    let stmt = c.prepare_cached(DELETE).await?;
    Ok(c.execute(&stmt, &[&id, &now]).await? == 1)
}

pub async fn due_for_event(
    c: &impl GenericClient,
    event_id: Uuid,
    event_type: &str,
    resource_id: Option<Uuid>,
    occurred_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Target>, DbError> {
    let stmt = c.prepare_cached(DUE_FOR_EVENT).await?;
    c.query(&stmt, &[&event_id, &event_type, &resource_id, &occurred_at, &now])
        .await?
        .iter()
        .map(|r| {
            Ok(Target {
                id: r.try_get("id")?,
                url: r.try_get("url")?,
                secret: Secret(r.try_get("secret")?),
                previous_secret: r.try_get::<_, Option<String>>("previous_secret")?.map(Secret),
            })
        })
        .collect()
}

/// See [`ROTATE_SECRET`]: the endpoint and when its previous secret stops signing;
/// `None` when no live endpoint has this id.
pub async fn rotate_secret(
    c: &impl GenericClient,
    id: Uuid,
    secret: &Secret,
    previous_until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Option<(Webhook, Option<DateTime<Utc>>)>, DbError> {
    let stmt = c.prepare_cached(ROTATE_SECRET).await?;
    let Some(row) = c.query_opt(&stmt, &[&id, &secret.expose(), &previous_until, &now]).await? else { return Ok(None) };
    Ok(Some((from_row(&row)?, row.try_get("previous_secret_expires_at")?)))
}

pub async fn record_delivery(
    c: &impl GenericClient,
    event_id: Uuid,
    endpoint_id: Uuid,
    status: i32,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    let stmt = c.prepare_cached(RECORD_DELIVERY).await?;
    c.execute(&stmt, &[&event_id, &endpoint_id, &status, &now]).await?;
    Ok(())
}

pub async fn purge_deliveries(c: &impl GenericClient, before: DateTime<Utc>, limit: i64) -> Result<u64, DbError> {
    let stmt = c.prepare_cached(PURGE_DELIVERIES).await?;
    Ok(c.execute(&stmt, &[&before, &limit]).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_targets_secrets_sign_but_never_show_in_debug_output() {
        let target = Target {
            id: Uuid::nil(),
            url: "https://hooks.example.com".into(),
            secret: Secret::from("whsec_new"),
            previous_secret: Some(Secret::from("whsec_old")),
        };
        let debug = format!("{target:?}");
        assert!(!debug.contains("whsec_new") && !debug.contains("whsec_old"), "{debug}");
        assert_eq!(target.secrets(), ["whsec_new", "whsec_old"]);
    }
}
