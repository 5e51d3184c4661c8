//! SQL for the `outbox` table. Events are written by the statements that change state
//! (see reservations.rs, lapse.rs and waitlist.rs), in the same transaction, each with
//! a kind of [`EventKind`]; this module is the relay's side: claim what is due, mark it
//! published or failed.

use super::{DbError, GenericClient};
use crate::domain::EventKind;
use crate::domain::messages::{Envelope, Topic};
use chrono::{DateTime, Utc};
use uuid::Uuid;

statements![CLAIM_DUE, MARK_PUBLISHED, MARK_FAILED, PURGE_PUBLISHED, PENDING, OLDEST_PENDING, INSERT_INTENT_MESSAGE,];

/// Claims up to `$3` events of topic `$1` due at `$2` for a relay, leased until `$5`, at
/// most one per subject, in order of writing (`$4`: the window of oldest events it looks
/// at).
/// The rules, and why the claim is a function, are in
/// `sql/functions/outbox_claim_due.sql`.
///
/// The claim is a statement of its own: the relay publishes with no transaction open,
/// then marks. A relay that dies on the way leaves its events to the next claim after
/// the lease, which sends them again with the same ids (at least once).
pub const CLAIM_DUE: &str = "SELECT id, kind, subject_id, payload, created_at, attempts \
     FROM outbox_claim_due($1, $2, $3, $4, $5)";

/// Marks events published, and lets go of the subjects they stalled.
pub const MARK_PUBLISHED: &str = "WITH published AS ( \
       UPDATE outbox SET published_at = $2, last_error = NULL, claimed_until = NULL WHERE id = ANY($1) RETURNING topic, subject_id, seq), \
     released AS ( \
       DELETE FROM outbox_stalled_subjects s USING published p \
       WHERE s.topic = p.topic AND s.subject_id = p.subject_id AND s.head_seq = p.seq) \
     SELECT count(*) FROM published";

/// A failed attempt at event `$1`: due again at `$2`, after its backoff, and its
/// subject stalled, in the same statement: no claim takes the subject's later events
/// until this one is published. An earlier stall of the subject stands.
pub const MARK_FAILED: &str = "WITH failed AS ( \
       UPDATE outbox SET next_attempt_at = $2, last_error = $3, attempts = attempts + 1, claimed_until = NULL \
       WHERE id = $1 RETURNING topic, subject_id, seq) \
     INSERT INTO outbox_stalled_subjects (topic, subject_id, head_seq) \
     SELECT topic::text, subject_id, seq FROM failed \
     ON CONFLICT ON CONSTRAINT outbox_stalled_subjects_pkey \
     DO UPDATE SET head_seq = least(outbox_stalled_subjects.head_seq, EXCLUDED.head_seq)";

pub const PURGE_PUBLISHED: &str = "DELETE FROM outbox WHERE id IN ( \
     SELECT id FROM outbox WHERE published_at < $1 ORDER BY published_at LIMIT $2)";

pub const PENDING: &str = "SELECT count(*) FROM outbox WHERE published_at IS NULL";

/// How long the oldest unpublished row has waited: the queue lag an operator watches.
pub const OLDEST_PENDING: &str = "SELECT min(created_at) FROM outbox WHERE published_at IS NULL";

/// An intent message for the worker, written with the intent; `$4` is its kind,
/// `intent.requested`.
pub const INSERT_INTENT_MESSAGE: &str = "INSERT INTO outbox (topic, kind, subject_id, payload, created_at, next_attempt_at) \
     VALUES ('intents', $4::text, $1, $2, $3, $3) RETURNING id";

/// An event a relay, or the request that wrote it, has claimed and publishes.
#[derive(Debug, Clone)]
pub struct Event {
    pub id: Uuid,
    pub kind: EventKind,
    pub subject_id: Uuid,
    pub payload: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub attempts: i32,
}

/// See [`CLAIM_DUE`]: the claimed events in order of writing.
pub async fn claim_due(
    c: &impl GenericClient,
    topic: Topic,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
    limit: i32,
    window: i32,
) -> Result<Vec<Event>, DbError> {
    c.rows(CLAIM_DUE, &[&topic.as_str(), &now, &limit, &window, &lease_until])
        .await?
        .iter()
        .map(|r| {
            Ok(Event {
                id: r.try_get("id")?,
                kind: r.try_get::<_, &str>("kind")?.parse()?,
                subject_id: r.try_get("subject_id")?,
                payload: r.try_get("payload")?,
                created_at: r.try_get("created_at")?,
                attempts: r.try_get("attempts")?,
            })
        })
        .collect()
}

pub async fn mark_published(c: &impl GenericClient, ids: &[Uuid], now: DateTime<Utc>) -> Result<u64, DbError> {
    let n: i64 = c.row(MARK_PUBLISHED, &[&ids, &now]).await?.try_get(0)?;
    Ok(n as u64)
}

/// See [`MARK_FAILED`].
pub async fn mark_failed(
    c: &impl GenericClient,
    id: Uuid,
    retry_at: DateTime<Utc>,
    error: &str,
) -> Result<(), DbError> {
    c.exec(MARK_FAILED, &[&id, &retry_at, &error]).await?;
    Ok(())
}

pub async fn purge_published(c: &impl GenericClient, before: DateTime<Utc>, limit: i64) -> Result<u64, DbError> {
    Ok(c.exec(PURGE_PUBLISHED, &[&before, &limit]).await?)
}

pub async fn insert_intent_message(
    c: &impl GenericClient,
    intent_id: Uuid,
    reservation_id: Uuid,
    now: DateTime<Utc>,
) -> Result<Uuid, DbError> {
    let message = serde_json::to_value(crate::domain::messages::IntentMessage { intent_id, reservation_id })
        .map_err(|e| DbError::Corrupt(format!("intent message: {e}")))?;
    let kind = EventKind::IntentRequested.as_str();
    Ok(c.row(INSERT_INTENT_MESSAGE, &[&intent_id, &message, &now, &kind]).await?.try_get(0)?)
}

pub async fn pending(c: &impl GenericClient) -> Result<i64, DbError> {
    Ok(c.row(PENDING, &[]).await?.try_get(0)?)
}

pub async fn oldest_pending(c: &impl GenericClient) -> Result<Option<DateTime<Utc>>, DbError> {
    Ok(c.row(OLDEST_PENDING, &[]).await?.try_get(0)?)
}

impl From<&Event> for Envelope {
    fn from(e: &Event) -> Self {
        Envelope {
            id: e.id,
            kind: e.kind,
            subject_id: e.subject_id,
            occurred_at: e.created_at,
            data: e.payload.clone(),
        }
    }
}
