//! SQL for the `idempotency_keys` table.
//!
//! A key's row is claimed (`processing`, with a lease and an owner token) in a short
//! transaction of its own, then completed with the stored response in the same
//! transaction as the mutation it guards. A retry finds the stored response, or the
//! live lease of its original, or a lapsed lease it may take over.

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

/// Inserts a fresh claim, or takes over a lapsed one for the very same request.
/// Returns a row only when this caller now owns the key; `inserted` tells a new claim
/// from a takeover.
pub const CLAIM: &str = "INSERT INTO idempotency_keys (principal, method, route, key, fingerprint, state, \
     owner_token, locked_until, created_at, expires_at) \
     VALUES ($1, $2, $3, $4, $5, 'processing', $6, $7, $8, $9) \
     ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO UPDATE \
     SET owner_token = EXCLUDED.owner_token, locked_until = EXCLUDED.locked_until \
     WHERE idempotency_keys.state = 'processing' AND idempotency_keys.locked_until <= $8 \
       AND idempotency_keys.fingerprint = EXCLUDED.fingerprint \
     RETURNING (xmax = 0) AS inserted";

pub const READ: &str = "SELECT fingerprint, state, locked_until, response_status, response_headers, response_body \
     FROM idempotency_keys WHERE principal = $1 AND method = $2 AND route = $3 AND key = $4";

/// Stores the response; only the current owner of the claim can.
pub const COMPLETE: &str = "UPDATE idempotency_keys SET state = 'completed', response_status = $6, \
     response_headers = $7, response_body = $8, locked_until = $9 \
     WHERE principal = $1 AND method = $2 AND route = $3 AND key = $4 \
       AND owner_token = $5 AND state = 'processing'";

/// Gives a claim back after a failure that must not be replayed (a 5xx), so that a
/// retry runs the request afresh instead of waiting out the lease.
pub const ABANDON: &str = "DELETE FROM idempotency_keys \
     WHERE principal = $1 AND method = $2 AND route = $3 AND key = $4 \
       AND owner_token = $5 AND state = 'processing'";

/// Bounded retention purge, for the scheduled function.
pub const PURGE_EXPIRED: &str = "DELETE FROM idempotency_keys WHERE ctid IN ( \
     SELECT ctid FROM idempotency_keys WHERE expires_at < $1 ORDER BY expires_at LIMIT $2)";

pub struct Claim {
    pub owner_token: Uuid,
    pub takeover: bool,
}

pub enum Stored {
    Completed { fingerprint: Vec<u8>, status: u16, headers: serde_json::Value, body: Vec<u8> },
    Processing { fingerprint: Vec<u8>, locked_until: DateTime<Utc> },
}

#[allow(clippy::too_many_arguments)]
pub async fn claim(
    c: &impl GenericClient,
    k: &KeyRef<'_>,
    fingerprint: &[u8],
    owner_token: Uuid,
    locked_until: DateTime<Utc>,
    now: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Result<Option<Claim>, DbError> {
    let stmt = c.prepare_cached(CLAIM).await?;
    let row = c
        .query_opt(
            &stmt,
            &[&k.principal, &k.method, &k.route, &k.key, &fingerprint, &owner_token, &locked_until, &now, &expires_at],
        )
        .await?;
    Ok(row.map(|row| Claim { owner_token, takeover: !row.get::<_, bool>("inserted") }))
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

/// `false` when the claim is no longer ours (it lapsed and a retry took it over).
pub async fn complete(
    c: &impl GenericClient,
    k: &KeyRef<'_>,
    owner_token: Uuid,
    status: u16,
    headers: &serde_json::Value,
    body: &[u8],
    now: DateTime<Utc>,
) -> Result<bool, DbError> {
    let stmt = c.prepare_cached(COMPLETE).await?;
    let status = status as i16;
    let n = c
        .execute(&stmt, &[&k.principal, &k.method, &k.route, &k.key, &owner_token, &status, headers, &body, &now])
        .await?;
    Ok(n == 1)
}

pub async fn abandon(c: &impl GenericClient, k: &KeyRef<'_>, owner_token: Uuid) -> Result<(), DbError> {
    let stmt = c.prepare_cached(ABANDON).await?;
    c.execute(&stmt, &[&k.principal, &k.method, &k.route, &k.key, &owner_token]).await?;
    Ok(())
}

pub async fn purge_expired(c: &impl GenericClient, now: DateTime<Utc>, limit: i64) -> Result<u64, DbError> {
    let stmt = c.prepare_cached(PURGE_EXPIRED).await?;
    Ok(c.execute(&stmt, &[&now, &limit]).await?)
}
