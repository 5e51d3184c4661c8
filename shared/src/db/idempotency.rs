//! SQL for the `idempotency_keys` table.
//!
//! A key is claimed in the transaction of the mutation it guards, by a transaction
//! lock on the key (`idempotency_lock_and_look`, migration V13), and its row is written
//! once, with the answer, in that same transaction: one commit and one write per
//! request. A retry finds the stored answer, or waits on the lock for its original's
//! transaction to end. A failure the client may not retry unchanged (a 4xx) is stored
//! on its own after the rollback, under the same lock.

use super::{DbError, GenericClient};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The scope a key lives in, plus the key.
#[derive(Debug, Clone)]
pub struct KeyRef<'a> {
    pub principal: &'a str,
    pub method: &'a str,
    pub route: &'a str,
    pub key: &'a str,
}

/// Claims the key in the caller's transaction: true when this request now owns it,
/// false when an answer is stored (or a claim committed by the scheme before V6 is
/// live). Waits at most `$7` for a concurrent original; past that,
/// `lock_not_available`. `$5` fingerprint, `$6` now.
pub const CLAIM: &str = "SELECT idempotency_lock_and_look($1, $2, $3, $4, $5, $6, $7)";

pub const READ: &str = "SELECT fingerprint, state, locked_until, response_status, response_headers, response_body \
     FROM idempotency_keys WHERE principal = $1 AND method = $2 AND route = $3 AND key = $4";

/// Stores the response, in the transaction that claimed the key (so the lock is ours):
/// the key's one write. A row left `processing` by the scheme before V6, taken over,
/// is completed in place.
pub const COMPLETE: &str = "INSERT INTO idempotency_keys AS k (principal, method, route, key, fingerprint, state, \
     owner_token, locked_until, response_status, response_headers, response_body, created_at, expires_at) \
     VALUES ($1, $2, $3, $4, $5, 'completed', $6, $7, $8, $9, $10, $7, $11) \
     ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO UPDATE \
     SET state = 'completed', response_status = EXCLUDED.response_status, \
         response_headers = EXCLUDED.response_headers, response_body = EXCLUDED.response_body, \
         locked_until = EXCLUDED.locked_until \
     WHERE k.state = 'processing'";

/// Stores a final failure (a 4xx) on its own, after the mutation's transaction rolled
/// back and released its claim. It takes the key's lock first, as a claim does, so a
/// retry that claimed the key meanwhile either finishes first and keeps its own answer,
/// or waits for this one and replays it.
pub const STORE_FAILURE: &str = "WITH claim AS (SELECT pg_advisory_xact_lock(idempotency_lock_key($1, $2, $3, $4))) \
     INSERT INTO idempotency_keys (principal, method, route, key, fingerprint, state, \
     owner_token, locked_until, response_status, response_headers, response_body, created_at, expires_at) \
     SELECT $1, $2, $3, $4, $5, 'completed', $6, $7, $8, $9, $10, $7, $11 FROM claim \
     ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO NOTHING";

/// Bounded retention purge, for the scheduled function.
pub const PURGE_EXPIRED: &str = "DELETE FROM idempotency_keys WHERE ctid IN ( \
     SELECT ctid FROM idempotency_keys WHERE expires_at < $1 ORDER BY expires_at LIMIT $2)";

pub enum Stored {
    Completed { fingerprint: Vec<u8>, status: u16, headers: serde_json::Value, body: Vec<u8> },
    Processing { fingerprint: Vec<u8>, locked_until: DateTime<Utc> },
}

/// See [`CLAIM`].
pub async fn claim(
    c: &impl GenericClient,
    k: &KeyRef<'_>,
    fingerprint: &[u8],
    now: DateTime<Utc>,
    wait: std::time::Duration,
) -> Result<bool, DbError> {
    let stmt = c.prepare_cached(CLAIM).await?;
    // At least a millisecond: a lock_timeout of 0 would wait forever.
    let wait = format!("{}ms", wait.as_millis().max(1));
    let row = c.query_one(&stmt, &[&k.principal, &k.method, &k.route, &k.key, &fingerprint, &now, &wait]).await?;
    Ok(row.try_get(0)?)
}

/// The times a stored answer records: now, and when the record may be purged. Its
/// `locked_until` is now too: only claims committed by the scheme before V6 wait for
/// it.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    pub now: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

pub async fn read(c: &impl GenericClient, k: &KeyRef<'_>) -> Result<Option<Stored>, DbError> {
    let stmt = c.prepare_cached(READ).await?;
    let Some(row) = c.query_opt(&stmt, &[&k.principal, &k.method, &k.route, &k.key]).await? else {
        return Ok(None);
    };
    let fingerprint: Vec<u8> = row.try_get("fingerprint")?;
    let state: &str = row.try_get("state")?;
    Ok(Some(match state {
        "completed" => {
            let status: i16 = row.try_get("response_status")?;
            Stored::Completed {
                fingerprint,
                status: u16::try_from(status).map_err(|_| DbError::Corrupt(format!("status {status}")))?,
                headers: row.try_get::<_, Option<serde_json::Value>>("response_headers")?.unwrap_or_default(),
                body: row.try_get("response_body")?,
            }
        }
        "processing" => Stored::Processing { fingerprint, locked_until: row.try_get("locked_until")? },
        other => return Err(DbError::Corrupt(format!("idempotency state {other}"))),
    }))
}

/// See [`COMPLETE`]; call it in the transaction that claimed the key.
pub async fn complete(
    c: &impl GenericClient,
    k: &KeyRef<'_>,
    fingerprint: &[u8],
    reply: (u16, &serde_json::Value, &[u8]),
    times: Times,
) -> Result<(), DbError> {
    let stmt = c.prepare_cached(COMPLETE).await?;
    let (status, headers, body) = reply;
    let status = status as i16;
    let n = c
        .execute(
            &stmt,
            &[
                &k.principal,
                &k.method,
                &k.route,
                &k.key,
                &fingerprint,
                &Uuid::new_v4(),
                &times.now,
                &status,
                headers,
                &body,
                &times.expires_at,
            ],
        )
        .await?;
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
    times: Times,
) -> Result<(), DbError> {
    let stmt = c.prepare_cached(STORE_FAILURE).await?;
    let (status, headers, body) = reply;
    let status = status as i16;
    c.execute(
        &stmt,
        &[
            &k.principal,
            &k.method,
            &k.route,
            &k.key,
            &fingerprint,
            &Uuid::new_v4(),
            &times.now,
            &status,
            headers,
            &body,
            &times.expires_at,
        ],
    )
    .await?;
    Ok(())
}

pub async fn purge_expired(c: &impl GenericClient, now: DateTime<Utc>, limit: i64) -> Result<u64, DbError> {
    let stmt = c.prepare_cached(PURGE_EXPIRED).await?;
    Ok(c.execute(&stmt, &[&now, &limit]).await?)
}
