//! SQL for the `webhook_endpoints` and `webhook_deliveries` tables, and for the
//! delivery log: `webhook_events` (the bodies sent), `webhook_delivery_attempts` and
//! `webhook_resends`.

use super::{DbError, GenericClient};
use crate::domain::EventKind;
use crate::domain::webhooks::{DeliveryAttempt, SigningSecret, Trigger, Webhook};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

statements![
    INSERT,
    GET,
    LIST,
    ROTATE_SECRET,
    DELETE,
    DUE_FOR_EVENT,
    ANY_ENDPOINT,
    RECORD_DELIVERY,
    PURGE_DELIVERIES,
    STORE_EVENT,
    INSERT_ATTEMPT,
    ENDPOINT_SUCCEEDED,
    ENDPOINT_FAILED,
    INSERT_DISABLED_EVENT,
    LIST_ATTEMPTS,
    ATTEMPTED_EVENT,
    QUEUE_RESEND,
    ENABLE,
    QUEUE_FAILED_SINCE,
    CLAIM_RESENDS,
    PURGE_ATTEMPTS,
    PURGE_EVENTS,
];

macro_rules! columns {
    () => {
        "id, url, resource_id, event_types, created_by, created_at, disabled_at, disabled_reason"
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
/// with the secret a rotation left signing until after `$5` (now), if any. A disabled
/// endpoint is listed (as `disabled`) until its log has the event, so that a recovery
/// finds what it missed.
/// Whether any webhook endpoint is registered (enabled or not): without one, no event
/// is due anywhere.
pub const ANY_ENDPOINT: &str = "SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE deleted_at IS NULL)";

pub const DUE_FOR_EVENT: &str = r#"
    SELECT e.id, e.url, e.secret,
           CASE WHEN e.previous_secret_expires_at > $5 THEN e.previous_secret END AS previous_secret,
           e.disabled_at IS NOT NULL AS disabled
    FROM webhook_endpoints e
    WHERE e.deleted_at IS NULL
      AND $2 = ANY (e.event_types)
      AND (e.resource_id IS NULL OR e.resource_id = $3)
      AND e.created_at <= $4
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = $1 AND d.endpoint_id = e.id)
      AND (e.disabled_at IS NULL
           OR NOT EXISTS (SELECT 1 FROM webhook_delivery_attempts a WHERE a.event_id = $1 AND a.endpoint_id = e.id))
    ORDER BY e.id"#;

/// Records an accepted delivery; a second acceptance (the at-least-once window) keeps
/// the first.
pub const RECORD_DELIVERY: &str = "INSERT INTO webhook_deliveries (event_id, endpoint_id, status, delivered_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT ON CONSTRAINT webhook_deliveries_pkey DO NOTHING";

/// Deliveries older than the retention, in bounded batches: by then SQS has long
/// dropped the message (its retention is four days), so no retry can ask.
pub const PURGE_DELIVERIES: &str = "DELETE FROM webhook_deliveries WHERE (event_id, endpoint_id) IN ( \
     SELECT event_id, endpoint_id FROM webhook_deliveries WHERE delivered_at < $1 ORDER BY delivered_at LIMIT $2)";

/// The event as the notifier got it, kept for the log and for resends; a second copy
/// (a redelivered message) keeps the first.
pub const STORE_EVENT: &str = "INSERT INTO webhook_events (id, type, body, received_at) VALUES ($1, $2, $3, $4) \
     ON CONFLICT ON CONSTRAINT webhook_events_pkey DO NOTHING";

/// One attempt, numbered after the attempts of the same event at the same endpoint.
pub const INSERT_ATTEMPT: &str = "INSERT INTO webhook_delivery_attempts \
       (id, endpoint_id, event_id, attempt, trigger, attempted_at, status_code, error, duration_ms, next_attempt_at) \
     SELECT $1::uuid, $2::uuid, $3::uuid, \
            1 + (SELECT count(*) FROM webhook_delivery_attempts WHERE event_id = $3 AND endpoint_id = $2)::integer, \
            $4::text, $5::timestamptz, $6::integer, $7::text, $8::integer, $9::timestamptz \
     RETURNING attempt";

/// An accepted attempt ends the endpoint's run of failures.
pub const ENDPOINT_SUCCEEDED: &str =
    "UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL";

/// A failed attempt at `$2` (now): the run of failures starts now if none was running,
/// and the endpoint is disabled when it answered 410 Gone (`$3`) or has been failing
/// since `$4` or before. Answers the endpoint when this failure disabled it.
pub const ENDPOINT_FAILED: &str = concat!(
    "UPDATE webhook_endpoints SET \
       failing_since = coalesce(failing_since, $2), \
       disabled_at = CASE WHEN $3 OR coalesce(failing_since, $2) <= $4 THEN $2 END, \
       disabled_reason = CASE WHEN $3 THEN 'gone' WHEN coalesce(failing_since, $2) <= $4 THEN 'failing' END \
     WHERE id = $1 AND deleted_at IS NULL AND disabled_at IS NULL RETURNING ",
    columns!()
);

/// The `webhook.endpoint_disabled` event (`$1`), written with the change that disabled
/// the endpoint; its subject is the endpoint.
pub const INSERT_DISABLED_EVENT: &str = "INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at) \
     VALUES ($1::text, $2, $3, $4, $4)";

/// A page of an endpoint's attempts, newest first, after the keyset position
/// `($2, $3)`. By `webhook_delivery_attempts_endpoint_idx`.
pub const LIST_ATTEMPTS: &str = r#"
    SELECT a.id, a.endpoint_id, a.event_id, ev.type AS event_type, a.attempt, a.trigger, a.attempted_at,
           a.status_code, a.error, a.duration_ms, a.next_attempt_at
    FROM webhook_delivery_attempts a
    JOIN webhook_events ev ON ev.id = a.event_id
    WHERE a.endpoint_id = $1
      AND (a.attempted_at, a.id) < (coalesce($2::timestamptz, 'infinity'),
                                    coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
    ORDER BY a.attempted_at DESC, a.id DESC
    LIMIT $4"#;

/// The event of one attempt (`$1`) of the endpoint `$2`.
pub const ATTEMPTED_EVENT: &str = "SELECT event_id FROM webhook_delivery_attempts WHERE id = $1 AND endpoint_id = $2";

/// Queues a resend of an event to an endpoint; a resend already waiting stands, and its
/// request time is answered.
pub const QUEUE_RESEND: &str = "INSERT INTO webhook_resends (endpoint_id, event_id, trigger, requested_by, requested_at) \
     VALUES ($1, $2, $3, $4, $5) \
     ON CONFLICT ON CONSTRAINT webhook_resends_pkey DO UPDATE SET requested_at = webhook_resends.requested_at \
     RETURNING requested_at";

/// Deliveries to a live endpoint start again, with no run of failures behind them.
pub const ENABLE: &str = concat!(
    "UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL \
     WHERE id = $1 AND deleted_at IS NULL RETURNING ",
    columns!()
);

/// Queues a resend (`$4` the trigger) of every event the endpoint `$1` was attempted
/// since `$2` and never accepted. By `webhook_delivery_attempts_endpoint_idx`.
pub const QUEUE_FAILED_SINCE: &str = r#"
    INSERT INTO webhook_resends (endpoint_id, event_id, trigger, requested_by, requested_at)
    SELECT $1::uuid, a.event_id, $4::text, $3::text, $5::timestamptz
    FROM webhook_delivery_attempts a
    WHERE a.endpoint_id = $1 AND a.attempted_at >= $2
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = a.event_id AND d.endpoint_id = $1)
    GROUP BY a.event_id
    HAVING NOT bool_or(coalesce(a.status_code BETWEEN 200 AND 299, false))
    ON CONFLICT ON CONSTRAINT webhook_resends_pkey DO NOTHING"#;

/// Takes the oldest `$1` resends off the queue (another sweep skips them), with what
/// sending needs; a resend to an endpoint since deleted or disabled is dropped.
pub const CLAIM_RESENDS: &str = r#"
    WITH claimed AS (
        DELETE FROM webhook_resends
        WHERE (endpoint_id, event_id) IN (
            SELECT endpoint_id, event_id FROM webhook_resends ORDER BY requested_at LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING endpoint_id, event_id, trigger)
    SELECT c.trigger, ev.id AS event_id, ev.body, e.id, e.url, e.secret,
           CASE WHEN e.previous_secret_expires_at > $2 THEN e.previous_secret END AS previous_secret
    FROM claimed c
    JOIN webhook_events ev ON ev.id = c.event_id
    JOIN webhook_endpoints e ON e.id = c.endpoint_id
    WHERE e.deleted_at IS NULL AND e.disabled_at IS NULL
    ORDER BY ev.id"#;

/// Attempts older than the log's retention, in bounded batches.
pub const PURGE_ATTEMPTS: &str = "DELETE FROM webhook_delivery_attempts WHERE id IN ( \
     SELECT id FROM webhook_delivery_attempts WHERE attempted_at < $1 ORDER BY attempted_at LIMIT $2)";

/// Kept events older than the retention that no attempt names any more.
pub const PURGE_EVENTS: &str = "DELETE FROM webhook_events WHERE id IN ( \
     SELECT id FROM webhook_events ev WHERE received_at < $1 \
       AND NOT EXISTS (SELECT 1 FROM webhook_delivery_attempts a WHERE a.event_id = ev.id) \
     ORDER BY received_at LIMIT $2)";

/// Where to send, and the keys to sign with.
#[derive(Debug, Clone)]
pub struct Target {
    pub id: Uuid,
    pub url: String,
    pub secret: SigningSecret,
    /// The secret before a rotation, while it still signs.
    pub previous_secret: Option<SigningSecret>,
    /// Disabled: the event is logged for it, not sent.
    pub disabled: bool,
}

impl Target {
    /// The keys to sign with: the current one, then the previous one while it lasts.
    pub fn keys(&self) -> Vec<&[u8]> {
        std::iter::once(self.secret.key()).chain(self.previous_secret.as_ref().map(SigningSecret::key)).collect()
    }

    fn from_row(r: &Row, disabled: bool) -> Result<Target, DbError> {
        let key = |k: Vec<u8>| SigningSecret::from_key(k).ok_or(DbError::Corrupt("webhook secret".into()));
        Ok(Target {
            id: r.try_get("id")?,
            url: r.try_get("url")?,
            secret: key(r.try_get("secret")?)?,
            previous_secret: r.try_get::<_, Option<Vec<u8>>>("previous_secret")?.map(key).transpose()?,
            disabled,
        })
    }
}

/// A resend taken off the queue.
#[derive(Debug, Clone)]
pub struct Resend {
    pub trigger: Trigger,
    pub event_id: Uuid,
    pub body: String,
    pub target: Target,
}

/// What one attempt recorded.
pub struct NewAttempt<'a> {
    pub endpoint_id: Uuid,
    pub event_id: Uuid,
    pub trigger: Trigger,
    pub attempted_at: DateTime<Utc>,
    pub status_code: Option<i32>,
    pub error: Option<&'a str>,
    pub duration_ms: i32,
    pub next_attempt_at: Option<DateTime<Utc>>,
}

pub struct NewEndpoint<'a> {
    pub id: Uuid,
    pub url: &'a str,
    pub secret: &'a SigningSecret,
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
        disabled_at: r.try_get("disabled_at")?,
        disabled_reason: r
            .try_get::<_, Option<&str>>("disabled_reason")?
            .map(|t| t.parse().map_err(|_| DbError::Corrupt(format!("webhook disabled reason {t}"))))
            .transpose()?,
    })
}

fn attempt_from_row(r: &Row) -> Result<DeliveryAttempt, DbError> {
    let trigger: &str = r.try_get("trigger")?;
    Ok(DeliveryAttempt {
        id: r.try_get("id")?,
        endpoint_id: r.try_get("endpoint_id")?,
        event_id: r.try_get("event_id")?,
        event_type: r.try_get("event_type")?,
        attempt: r.try_get("attempt")?,
        trigger: trigger.parse().map_err(|_| DbError::Corrupt(format!("delivery trigger {trigger}")))?,
        attempted_at: r.try_get("attempted_at")?,
        status_code: r.try_get("status_code")?,
        error: r.try_get("error")?,
        duration_ms: r.try_get("duration_ms")?,
        next_attempt_at: r.try_get("next_attempt_at")?,
    })
}

pub async fn insert(c: &impl GenericClient, new: &NewEndpoint<'_>) -> Result<Webhook, DbError> {
    let row = c
        .row(
            INSERT,
            &[
                &new.id,
                &new.url,
                &new.secret.key(),
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
    c.opt_row(GET, &[&id]).await?.as_ref().map(from_row).transpose()
}

/// See [`LIST`]; `after` is the `(created_at, id)` of the last row of the page before.
pub async fn list(
    c: &impl GenericClient,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Webhook>, DbError> {
    let (after_at, after_id) = after.unzip();
    c.rows(LIST, &[&after_at, &after_id, &limit]).await?.iter().map(from_row).collect()
}

/// `true` when a live endpoint was deleted.
pub async fn delete(c: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<bool, DbError> {
    Ok(c.exec(DELETE, &[&id, &now]).await? == 1)
}

/// See [`ANY_ENDPOINT`].
pub async fn any_endpoint(pool: &deadpool_postgres::Pool) -> Result<bool, DbError> {
    Ok(pool.get().await?.row(ANY_ENDPOINT, &[]).await?.try_get(0)?)
}

pub async fn due_for_event(
    c: &impl GenericClient,
    event_id: Uuid,
    event_type: &str,
    resource_id: Option<Uuid>,
    occurred_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Target>, DbError> {
    c.rows(DUE_FOR_EVENT, &[&event_id, &event_type, &resource_id, &occurred_at, &now])
        .await?
        .iter()
        .map(|r| Target::from_row(r, r.try_get("disabled")?))
        .collect()
}

/// See [`ROTATE_SECRET`]: the endpoint and when its previous secret stops signing;
/// `None` when no live endpoint has this id.
pub async fn rotate_secret(
    c: &impl GenericClient,
    id: Uuid,
    secret: &SigningSecret,
    previous_until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Option<(Webhook, Option<DateTime<Utc>>)>, DbError> {
    let Some(row) = c.opt_row(ROTATE_SECRET, &[&id, &secret.key(), &previous_until, &now]).await? else {
        return Ok(None);
    };
    Ok(Some((from_row(&row)?, row.try_get("previous_secret_expires_at")?)))
}

pub async fn record_delivery(
    c: &impl GenericClient,
    event_id: Uuid,
    endpoint_id: Uuid,
    status: i32,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(RECORD_DELIVERY, &[&event_id, &endpoint_id, &status, &now]).await?;
    Ok(())
}

pub async fn purge_deliveries(c: &impl GenericClient, before: DateTime<Utc>, limit: i64) -> Result<u64, DbError> {
    Ok(c.exec(PURGE_DELIVERIES, &[&before, &limit]).await?)
}

pub async fn store_event(
    c: &impl GenericClient,
    id: Uuid,
    kind: EventKind,
    body: &str,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    c.exec(STORE_EVENT, &[&id, &kind.as_str(), &body, &now]).await?;
    Ok(())
}

/// Records one attempt; its number.
pub async fn insert_attempt(c: &impl GenericClient, a: &NewAttempt<'_>) -> Result<i32, DbError> {
    let row = c
        .row(
            INSERT_ATTEMPT,
            &[
                &Uuid::now_v7(),
                &a.endpoint_id,
                &a.event_id,
                &a.trigger.as_str(),
                &a.attempted_at,
                &a.status_code,
                &a.error,
                &a.duration_ms,
                &a.next_attempt_at,
            ],
        )
        .await?;
    Ok(row.try_get("attempt")?)
}

pub async fn endpoint_succeeded(c: &impl GenericClient, id: Uuid) -> Result<(), DbError> {
    c.exec(ENDPOINT_SUCCEEDED, &[&id]).await?;
    Ok(())
}

/// See [`ENDPOINT_FAILED`]: the endpoint when this failure disabled it.
pub async fn endpoint_failed(
    c: &impl GenericClient,
    id: Uuid,
    now: DateTime<Utc>,
    gone: bool,
    failing_before: DateTime<Utc>,
) -> Result<Option<Webhook>, DbError> {
    let Some(row) = c.opt_row(ENDPOINT_FAILED, &[&id, &now, &gone, &failing_before]).await? else { return Ok(None) };
    let webhook = from_row(&row)?;
    Ok(webhook.disabled_at.is_some().then_some(webhook))
}

/// Writes the `webhook.endpoint_disabled` event of `webhook`.
pub async fn insert_disabled_event(c: &impl GenericClient, webhook: &Webhook) -> Result<(), DbError> {
    let at = webhook.disabled_at.ok_or(DbError::Corrupt("an endpoint disabled without a time".into()))?;
    let payload = serde_json::json!({
        "endpoint_id": webhook.id,
        "url": webhook.url,
        "resource_id": webhook.resource_id,
        "disabled_at": at,
        "reason": webhook.disabled_reason,
    });
    c.exec(INSERT_DISABLED_EVENT, &[&EventKind::WebhookEndpointDisabled.as_str(), &webhook.id, &payload, &at]).await?;
    Ok(())
}

/// See [`LIST_ATTEMPTS`]; `after` is the `(attempted_at, id)` of the last row of the
/// page before.
pub async fn list_attempts(
    c: &impl GenericClient,
    endpoint_id: Uuid,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<DeliveryAttempt>, DbError> {
    let (after_at, after_id) = after.unzip();
    c.rows(LIST_ATTEMPTS, &[&endpoint_id, &after_at, &after_id, &limit]).await?.iter().map(attempt_from_row).collect()
}

pub async fn attempted_event(
    c: &impl GenericClient,
    attempt_id: Uuid,
    endpoint_id: Uuid,
) -> Result<Option<Uuid>, DbError> {
    Ok(c.opt_row(ATTEMPTED_EVENT, &[&attempt_id, &endpoint_id]).await?.map(|r| r.try_get("event_id")).transpose()?)
}

/// See [`QUEUE_RESEND`]: when the resend waiting now was asked for.
pub async fn queue_resend(
    c: &impl GenericClient,
    endpoint_id: Uuid,
    event_id: Uuid,
    by: &str,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, DbError> {
    let row = c.row(QUEUE_RESEND, &[&endpoint_id, &event_id, &Trigger::Retry.as_str(), &by, &now]).await?;
    Ok(row.try_get("requested_at")?)
}

pub async fn enable(c: &impl GenericClient, id: Uuid) -> Result<Option<Webhook>, DbError> {
    c.opt_row(ENABLE, &[&id]).await?.as_ref().map(from_row).transpose()
}

/// See [`QUEUE_FAILED_SINCE`]: how many resends were queued.
pub async fn queue_failed_since(
    c: &impl GenericClient,
    endpoint_id: Uuid,
    since: DateTime<Utc>,
    by: &str,
    now: DateTime<Utc>,
) -> Result<u64, DbError> {
    Ok(c.exec(QUEUE_FAILED_SINCE, &[&endpoint_id, &since, &by, &Trigger::Recover.as_str(), &now]).await?)
}

pub async fn claim_resends(c: &impl GenericClient, limit: i64, now: DateTime<Utc>) -> Result<Vec<Resend>, DbError> {
    c.rows(CLAIM_RESENDS, &[&limit, &now])
        .await?
        .iter()
        .map(|r| {
            let trigger: &str = r.try_get("trigger")?;
            Ok(Resend {
                trigger: trigger.parse().map_err(|_| DbError::Corrupt(format!("resend trigger {trigger}")))?,
                event_id: r.try_get("event_id")?,
                body: r.try_get("body")?,
                target: Target::from_row(r, false)?,
            })
        })
        .collect()
}

pub async fn purge_attempts(c: &impl GenericClient, before: DateTime<Utc>, limit: i64) -> Result<u64, DbError> {
    Ok(c.exec(PURGE_ATTEMPTS, &[&before, &limit]).await?)
}

pub async fn purge_events(c: &impl GenericClient, before: DateTime<Utc>, limit: i64) -> Result<u64, DbError> {
    Ok(c.exec(PURGE_EVENTS, &[&before, &limit]).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_targets_secrets_sign_but_never_show_in_debug_output() {
        let (new, old) = (SigningSecret::generate(), SigningSecret::generate());
        let target = Target {
            id: Uuid::nil(),
            url: "https://hooks.example.com".into(),
            secret: new.clone(),
            previous_secret: Some(old.clone()),
            disabled: false,
        };
        let debug = format!("{target:?}");
        assert!(!debug.contains(&new.text()[6..]) && !debug.contains(&old.text()[6..]), "{debug}");
        assert_eq!(target.keys(), [new.key(), old.key()]);
    }
}
