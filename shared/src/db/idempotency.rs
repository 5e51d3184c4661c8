//! SQL for the `idempotency_keys` table.
//!
//! A key's row is claimed (`processing`) and completed with the stored response in the
//! transaction of the mutation it guards: one commit per request, so every committed
//! row is `completed`. A retry finds the stored response, or waits on the primary key
//! for its original's transaction to end (see `idempotency_claim`). A failure the
//! client may not retry unchanged (a 4xx) is stored on its own after the rollback. A
//! keyed hold claims, holds and stores in one statement ([`Answering`], `HOLD_KEYED` in
//! hold.rs); its answer is stored as the reservation it made, from which the replay is
//! rendered ([`FROM_SNAPSHOT`]).

use super::reservations::{columns, from_row};
use super::{DbError, GenericClient};
use crate::domain::Reservation;
use chrono::{DateTime, Utc};

statements![CLAIM, READ, COMPLETE, STORE_FAILURE, PURGE_EXPIRED, FROM_SNAPSHOT];

/// The scope a key lives in, plus the key.
#[derive(Debug, Clone)]
pub struct KeyRef<'a> {
    pub principal: &'a str,
    pub method: &'a str,
    pub route: &'a str,
    pub key: &'a str,
}

/// Claims the key in the caller's transaction: true when this request now owns it,
/// false when an answer is stored. Waits at most `$8` for a concurrent original; past
/// that, `lock_not_available`.
pub const CLAIM: &str = "SELECT idempotency_claim($1, $2, $3, $4, $5, $6, $7, $8)";

/// The committed row of a key: its answer ([`read`]).
pub const READ: &str = "SELECT fingerprint, state, response_status, response_headers, response_body, \
     response_reservation FROM idempotency_keys WHERE principal = $1 AND method = $2 AND route = $3 AND key = $4";

/// Stores the response, in the transaction that claimed the key (so the claim is ours).
pub const COMPLETE: &str = "UPDATE idempotency_keys SET state = 'completed', response_status = $5, \
     response_headers = $6, response_body = $7 \
     WHERE principal = $1 AND method = $2 AND route = $3 AND key = $4 AND state = 'processing'";

/// Stores a final failure (a 4xx) on its own, after the mutation's transaction rolled
/// back and took its claim with it. A retry that claimed the key meanwhile keeps its
/// own answer.
pub const STORE_FAILURE: &str = "INSERT INTO idempotency_keys (principal, method, route, key, fingerprint, state, \
     response_status, response_headers, response_body, created_at, expires_at) \
     VALUES ($1, $2, $3, $4, $5, 'completed', $6, $7, $8, $9, $10) \
     ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO NOTHING";

/// A reservation as a keyed hold stored it for its replay (`reservation_snapshot`: the
/// row the hold answered with), read back into the columns of the table: the replay is
/// rendered from the same values as the first answer.
pub const FROM_SNAPSHOT: &str = concat!("SELECT ", columns!(), " FROM jsonb_populate_record(NULL::reservations, $1)");

/// Bounded retention purge, for the scheduled function.
pub const PURGE_EXPIRED: &str = "DELETE FROM idempotency_keys WHERE ctid IN ( \
     SELECT ctid FROM idempotency_keys WHERE expires_at < $1 ORDER BY expires_at LIMIT $2)";

/// A key's stored answer, and the fingerprint of the request it answered.
pub struct Stored {
    pub fingerprint: Vec<u8>,
    pub status: u16,
    pub headers: serde_json::Value,
    pub body: StoredBody,
}

/// What a stored answer's body is made from.
#[allow(clippy::large_enum_variant)]
pub enum StoredBody {
    /// The bytes sent.
    Bytes(Vec<u8>),
    /// The reservation a keyed hold made, as the statement returned it:
    /// its answer is rendered from it, by the code that rendered the first.
    Reservation(Reservation),
}

/// A key and what to store with it, for a mutation that claims the key, runs and
/// stores its answer in one statement (the keyed hold, `reservation_hold` with a key).
pub struct Answering<'a> {
    pub key: KeyRef<'a>,
    pub fingerprint: &'a [u8],
    pub times: ClaimTimes,
    /// How long the claim may wait for a concurrent original (see [`CLAIM`]).
    pub wait: std::time::Duration,
    /// The answer to a refusal, which does not depend on what the statement finds and
    /// is rendered before it.
    pub refused: StoredReply<'a>,
}

/// An answer as the table keeps it.
pub struct StoredReply<'a> {
    pub status: u16,
    pub headers: &'a serde_json::Value,
    pub body: &'a [u8],
}

/// See [`CLAIM`].
pub async fn claim(
    c: &impl GenericClient,
    k: &KeyRef<'_>,
    fingerprint: &[u8],
    times: ClaimTimes,
    wait: std::time::Duration,
) -> Result<bool, DbError> {
    // At least a millisecond: a lock_timeout of 0 would wait forever.
    let wait = format!("{}ms", wait.as_millis().max(1));
    let row = c
        .row(CLAIM, &[&k.principal, &k.method, &k.route, &k.key, &fingerprint, &times.now, &times.expires_at, &wait])
        .await?;
    Ok(row.try_get(0)?)
}

/// The times a claim records: when it was made, and when the record may be purged.
#[derive(Debug, Clone, Copy)]
pub struct ClaimTimes {
    pub now: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// See [`READ`]. A committed row without its answer cannot arise (a claim commits
/// with its answer): it reads as [`DbError::Corrupt`].
pub async fn read(c: &impl GenericClient, k: &KeyRef<'_>) -> Result<Option<Stored>, DbError> {
    let Some(row) = c.opt_row(READ, &[&k.principal, &k.method, &k.route, &k.key]).await? else {
        return Ok(None);
    };
    let state: &str = row.try_get("state")?;
    if state != "completed" {
        return Err(DbError::Corrupt(format!("idempotency key {} committed as {state}", k.key)));
    }
    let status: i16 = row.try_get("response_status")?;
    Ok(Some(Stored {
        fingerprint: row.try_get("fingerprint")?,
        status: u16::try_from(status).map_err(|_| DbError::Corrupt(format!("status {status}")))?,
        headers: row.try_get::<_, Option<serde_json::Value>>("response_headers")?.unwrap_or_default(),
        body: match row.try_get::<_, Option<Vec<u8>>>("response_body")? {
            Some(bytes) => StoredBody::Bytes(bytes),
            None => {
                let snapshot: serde_json::Value = row.try_get("response_reservation")?;
                StoredBody::Reservation(from_snapshot(c, &snapshot).await?)
            }
        },
    }))
}

/// See [`FROM_SNAPSHOT`].
pub async fn from_snapshot(c: &impl GenericClient, snapshot: &serde_json::Value) -> Result<Reservation, DbError> {
    from_row(&c.row(FROM_SNAPSHOT, &[snapshot]).await?)
}

/// See [`COMPLETE`]; call it in the transaction that claimed the key.
pub async fn complete(
    c: &impl GenericClient,
    k: &KeyRef<'_>,
    status: u16,
    headers: &serde_json::Value,
    body: &[u8],
) -> Result<(), DbError> {
    let status = status as i16;
    let n = c.exec(COMPLETE, &[&k.principal, &k.method, &k.route, &k.key, &status, headers, &body]).await?;
    if n != 1 {
        return Err(DbError::Corrupt(format!("idempotency key {} not claimed in this transaction", k.key)));
    }
    Ok(())
}

/// See [`STORE_FAILURE`].
pub async fn store_failure(
    c: &impl GenericClient,
    k: &KeyRef<'_>,
    fingerprint: &[u8],
    reply: (u16, &serde_json::Value, &[u8]),
    times: ClaimTimes,
) -> Result<(), DbError> {
    let (status, headers, body) = reply;
    let status = status as i16;
    c.exec(
        STORE_FAILURE,
        &[
            &k.principal,
            &k.method,
            &k.route,
            &k.key,
            &fingerprint,
            &status,
            headers,
            &body,
            &times.now,
            &times.expires_at,
        ],
    )
    .await?;
    Ok(())
}

pub async fn purge_expired(c: &impl GenericClient, now: DateTime<Utc>, limit: i64) -> Result<u64, DbError> {
    Ok(c.exec(PURGE_EXPIRED, &[&now, &limit]).await?)
}
