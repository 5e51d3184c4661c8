//! The idempotency guard around a mutation.
//!
//! Outcomes for a request that carries `Idempotency-Key` (scoped to principal, method
//! and route; the fingerprint covers method, path and canonical body):
//! - New: claim the key, run the mutation, store the response in the mutation's own
//!   transaction; the answer says `Idempotency-Replayed: false`.
//! - Replay: the stored status and body, with `Idempotency-Replayed: true`.
//! - Reused: 422 when the key belongs to a different request.
//! - In progress: a retry that arrives while its original runs waits for it (bounded
//!   by `IDEMPOTENCY_WAIT_MS`) and gets the replay; past that bound, 409 with
//!   `Retry-After`. It never loses a race against itself.
//! - Takeover: a claim whose lease lapsed (its function died) goes to the retry.

use super::{ApiError, JSON, PROBLEM_JSON, Reply, mark_replayed};
use crate::AppState;
use crate::db::idempotency::{self, KeyRef, Stored};
use crate::domain::Principal;
use deadpool_postgres::Transaction;
use lambda_http::{Body, Request, Response};
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};
use uuid::Uuid;

const HEADER: &str = "idempotency-key";

fn key_of(req: &Request) -> Result<Option<&str>, ApiError> {
    let Some(raw) = req.headers().get(HEADER) else {
        return Ok(None);
    };
    let bad = || ApiError::validation("Idempotency-Key", "must be 1 to 255 visible ASCII characters");
    let key = raw.to_str().map_err(|_| bad())?;
    if !(1..=255).contains(&key.len()) || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad());
    }
    Ok(Some(key))
}

/// What identifies a request for its key, and for the approval an upstream confirm
/// records: method, path and canonical body.
pub fn fingerprint(req: &Request, canonical_body: &[u8]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(req.method().as_str().as_bytes());
    h.update(b"\n");
    h.update(req.uri().path().as_bytes());
    h.update(b"\n");
    h.update(canonical_body);
    h.finalize().to_vec()
}

fn stored_reply(status: u16, headers: &serde_json::Value, body: Vec<u8>) -> Reply {
    let content_type = match headers.get("content-type").and_then(|v| v.as_str()) {
        Some(PROBLEM_JSON) => PROBLEM_JSON,
        _ => JSON,
    };
    Reply {
        status: http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK),
        content_type,
        body,
        location: headers.get("location").and_then(|v| v.as_str()).map(String::from),
        retry_after: None,
        allow: None,
    }
}

fn stored_headers(reply: &Reply) -> serde_json::Value {
    let mut h = serde_json::Map::new();
    h.insert("content-type".into(), reply.content_type.into());
    if let Some(l) = &reply.location {
        h.insert("location".into(), l.clone().into());
    }
    serde_json::Value::Object(h)
}

/// Runs `op` in a transaction, at most once per idempotency key.
pub async fn run_idempotent(
    state: &AppState,
    who: &Principal,
    req: &Request,
    route: &'static str,
    canonical_body: &[u8],
    op: impl AsyncFnOnce(&Transaction<'_>) -> Result<Reply, ApiError>,
) -> Result<Response<Body>, ApiError> {
    let Some(key) = key_of(req)? else {
        let mut client = state.pool.get().await?;
        let tx = client.transaction().await?;
        let reply = op(&tx).await?;
        tx.commit().await?;
        return Ok(reply.into_response());
    };
    let k = KeyRef { principal: &who.id, method: req.method().as_str(), route, key };
    let fp = fingerprint(req, canonical_body);
    match claim_or_replay(state, &k, &fp).await? {
        Claimed::Replay(response) => Ok(response),
        Claimed::Ours(claim, client) => finish(state, &k, claim, client, op).await,
    }
}

/// What a key's claim came to.
enum Claimed {
    /// The key is ours now: run the request, on the connection that claimed it.
    Ours(idempotency::Claim, deadpool_postgres::Object),
    /// The original answered already: its stored response.
    Replay(Response<Body>),
}

/// Claims the key, or waits for its original and replays that one's answer.
///
/// A retry that finds its original still running polls for it, and holds no database
/// connection between polls: waiting retries must not starve everyone else's requests
/// of the pool. How many may wait at once is bounded too (`IDEMPOTENCY_MAX_WAITERS`);
/// the rest are told at once to come back.
async fn claim_or_replay(state: &AppState, k: &KeyRef<'_>, fp: &[u8]) -> Result<Claimed, ApiError> {
    let cfg = &state.config;
    let token = Uuid::new_v4();
    let started = Instant::now();
    let mut pause = Duration::from_millis(5);
    let mut waiting: Option<tokio::sync::SemaphorePermit<'_>> = None;
    loop {
        let now = state.clock.now();
        let mut client = state.pool.get().await?;
        // The claim commits on its own, without waiting for the disk: if it were lost
        // in a crash, nothing that depends on it could have committed (the mutation's
        // synchronous commit flushes the claim's WAL first).
        let tx = client.transaction().await?;
        tx.batch_execute("SET LOCAL synchronous_commit TO OFF").await?;
        let claimed =
            idempotency::claim(&tx, k, fp, token, now + cfg.idempotency_lease, now, now + cfg.idempotency_retention)
                .await?;
        tx.commit().await?;
        if let Some(claim) = claimed {
            if claim.takeover {
                tracing::info!(key = k.key, "took over an idempotency key whose lease lapsed");
            }
            return Ok(Claimed::Ours(claim, client));
        }
        let stored = idempotency::read(&client, k).await?;
        drop(client);
        match stored {
            // Given back by a failed original between our two statements: claim again.
            None => continue,
            Some(Stored::Completed { fingerprint, status, headers, body }) => {
                if fingerprint != fp {
                    return Err(ApiError::IdempotencyKeyReused);
                }
                return Ok(Claimed::Replay(mark_replayed(stored_reply(status, &headers, body).into_response(), true)));
            }
            Some(Stored::Processing { fingerprint, locked_until }) => {
                if fingerprint != fp {
                    return Err(ApiError::IdempotencyKeyReused);
                }
                if locked_until <= now {
                    continue;
                }
                let in_progress = || {
                    let secs = (locked_until - now).num_milliseconds().max(0) as u64;
                    ApiError::IdempotencyKeyInProgress { retry_after: secs.div_ceil(1000).max(1) }
                };
                if started.elapsed() >= cfg.idempotency_wait {
                    return Err(in_progress());
                }
                if waiting.is_none() {
                    waiting = Some(state.idempotency_waiters.try_acquire().map_err(|_| in_progress())?);
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
        }
    }
}

/// Runs the request under its claim and stores its answer: in the mutation's own
/// transaction when it succeeds, on its own when it fails finally (a 4xx is replayed
/// too). Server trouble gives the key back, so that a retry runs afresh.
async fn finish(
    state: &AppState,
    k: &KeyRef<'_>,
    claim: idempotency::Claim,
    mut client: deadpool_postgres::Object,
    op: impl AsyncFnOnce(&Transaction<'_>) -> Result<Reply, ApiError>,
) -> Result<Response<Body>, ApiError> {
    let tx = client.transaction().await?;
    match op(&tx).await {
        Ok(reply) => {
            let now = state.clock.now();
            let ours = idempotency::complete(
                &tx,
                k,
                claim.owner_token,
                reply.status.as_u16(),
                &stored_headers(&reply),
                &reply.body,
                now,
            )
            .await?;
            if !ours {
                // Our lease lapsed and a retry took the key over: it answers, not us.
                tx.rollback().await?;
                return Err(ApiError::IdempotencyKeyInProgress { retry_after: 1 });
            }
            if let Err(e) = tx.commit().await {
                let _ = idempotency::abandon(&client, k, claim.owner_token).await;
                return Err(e.into());
            }
            Ok(mark_replayed(reply.into_response(), false))
        }
        Err(e) if e.is_final() => {
            tx.rollback().await?;
            let reply = e.into_reply();
            let now = state.clock.now();
            idempotency::complete(
                &client,
                k,
                claim.owner_token,
                reply.status.as_u16(),
                &stored_headers(&reply),
                &reply.body,
                now,
            )
            .await?;
            Ok(mark_replayed(reply.into_response(), false))
        }
        Err(e) => {
            drop(tx);
            if let Err(abandon) = idempotency::abandon(&client, k, claim.owner_token).await {
                tracing::warn!(error = %abandon, "could not give an idempotency key back; its lease will lapse");
            }
            Err(e)
        }
    }
}
