//! The idempotency guard around a mutation.
//!
//! Outcomes for a request that carries `Idempotency-Key` (scoped to principal, method
//! and route; the fingerprint covers method, path and canonical body):
//! - New: claim the key, run the mutation and store the response, all in the
//!   mutation's own transaction: one commit. The answer says `Idempotency-Replayed:
//!   false`.
//! - Replay: the stored status and body, with `Idempotency-Replayed: true`.
//! - Reused: 422 when the key belongs to a different request.
//! - In progress: a retry that arrives while its original runs waits for it (bounded
//!   by `IDEMPOTENCY_WAIT_MS`, and holding no connection between polls) and gets the
//!   replay; past that bound, 409 with `Retry-After`. It never loses a race against
//!   itself: the original's uncommitted claim holds the key's primary key.
//! - Takeover: an original that dies takes its claim with it (its transaction
//!   aborts), so the retry runs at once.
//!
//! A mutation that settles in one statement (the keyed hold) claims, runs and stores
//! in that statement, in autocommit ([`KeyedStatement`]); when it cannot settle there
//! (the key is taken, or the general path must decide) it leaves nothing behind and the
//! request goes through [`run_idempotent`].

use super::{Answer, ApiError, JSON, PROBLEM_JSON, Reply, RouteSpec, mark_replayed};
use crate::AppState;
use crate::db::idempotency::{self, Answering, KeyRef, Stored, StoredBody, StoredReply};
use crate::domain::Principal;
use deadpool_postgres::Transaction;
use lambda_http::{Body, Request, Response};
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

const HEADER: &str = "idempotency-key";

/// How long one claim may wait on the original's row: a short slice, so that a retry
/// arriving just before its original commits replays it at once, while a long wait
/// happens between polls, without a connection.
const CLAIM_WAIT: Duration = Duration::from_millis(10);

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

/// Whether the request carries an `Idempotency-Key` (a bad one is refused).
pub fn carries_key(req: &Request) -> Result<bool, ApiError> {
    key_of(req).map(|key| key.is_some())
}

/// What identifies a request for its key, and for the approval an upstream confirm
/// records: method, path and canonical body, and the `scope` query parameter of a
/// change to a series' occurrences when one is given (so that a key sent again with
/// another scope is a reused key, not a replay; a request without one hashes as
/// before).
pub fn fingerprint(req: &Request, canonical_body: &[u8]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(req.method().as_str().as_bytes());
    h.update(b"\n");
    h.update(req.uri().path().as_bytes());
    h.update(b"\n");
    h.update(canonical_body);
    if let Some(scope) = super::query_param(req, "scope") {
        h.update(b"\nscope=");
        h.update(scope.as_bytes());
    }
    h.finalize().to_vec()
}

fn stored_reply(status: u16, headers: &serde_json::Value, body: StoredBody) -> Reply {
    let status = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
    let body = match body {
        StoredBody::Bytes(bytes) => bytes,
        StoredBody::Reservation(r) => return Reply::reservation_created(status, &r),
    };
    let content_type = match headers.get("content-type").and_then(|v| v.as_str()) {
        Some(PROBLEM_JSON) => PROBLEM_JSON,
        _ => JSON,
    };
    Reply {
        status,
        content_type,
        body,
        location: headers.get("location").and_then(|v| v.as_str()).map(String::from),
        retry_after: None,
        allow: None,
        www_authenticate: None,
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

/// What a keyed request stores with a mutation that settles in one statement (the
/// keyed hold, [`crate::db::hold::HOLD_KEYED`]): its key in its scope, the claim's
/// times, and the answer to a refusal, rendered before the statement runs. The statement's
/// own answer is the row it returns, stored by the statement.
pub struct KeyedStatement<'r> {
    principal: &'r str,
    method: &'static str,
    scope: String,
    key: &'r str,
    fingerprint: &'r [u8],
    times: idempotency::ClaimTimes,
    refused: Reply,
    refused_headers: serde_json::Value,
}

impl<'r> KeyedStatement<'r> {
    /// `None` for a request without a key: it has no answer to store.
    pub fn of(
        state: &AppState,
        who: &'r Principal,
        req: &'r Request,
        route: &RouteSpec,
        fp: &'r [u8],
        refused: Reply,
    ) -> Result<Option<Self>, ApiError> {
        let Some(key) = key_of(req)? else { return Ok(None) };
        let refused_headers = stored_headers(&refused);
        Ok(Some(KeyedStatement {
            principal: &who.id,
            method: route.method,
            scope: scope_of(route),
            key,
            fingerprint: fp,
            times: claim_times(state),
            refused,
            refused_headers,
        }))
    }

    pub fn answering(&self) -> Answering<'_> {
        Answering {
            key: KeyRef { principal: self.principal, method: self.method, route: &self.scope, key: self.key },
            fingerprint: self.fingerprint,
            times: self.times,
            wait: CLAIM_WAIT,
            refused: StoredReply {
                status: self.refused.status.as_u16(),
                headers: &self.refused_headers,
                body: &self.refused.body,
            },
        }
    }

    /// The first answer of a request the statement settled.
    pub fn first_answer(&self, reply: Reply) -> Response<Body> {
        mark_replayed(reply.into_response(), Answer::First)
    }
}

/// The scope a key lives in: the principal (in the row's own column), the method and
/// the route's template.
fn scope_of(route: &RouteSpec) -> String {
    format!("{} {}", route.method, route.path)
}

/// Runs `op` in a transaction, at most once per idempotency key.
///
/// A key lives in the scope of the principal and the matched route (method and path
/// template); `fingerprint` ([`fingerprint`]) tells its request from another one.
pub async fn run_idempotent(
    state: &AppState,
    who: &Principal,
    req: &Request,
    route: &RouteSpec,
    fp: &[u8],
    op: impl AsyncFnOnce(&Transaction<'_>) -> Result<Reply, ApiError>,
) -> Result<Response<Body>, ApiError> {
    let Some(key) = key_of(req)? else {
        let mut client = state.pool.get().await?;
        let tx = client.transaction().await?;
        let reply = op(&tx).await?;
        tx.commit().await?;
        return Ok(reply.into_response());
    };
    let scope = scope_of(route);
    let k = KeyRef { principal: &who.id, method: route.method, route: &scope, key };
    let mut op = Some(op);
    let mut poll = Poll::new(state);
    loop {
        let mut client = state.pool.get().await?;
        let tx = client.transaction().await?;
        let in_flight = match idempotency::claim(&tx, &k, fp, claim_times(state), CLAIM_WAIT).await {
            Ok(true) => {
                let op = op.take().expect("the request runs once: it returns right after");
                return match run_claimed(&k, tx, op).await? {
                    Ran::Answered(response) => Ok(response),
                    Ran::Refused(e) => {
                        // Stored on this connection: a second one, awaited while holding
                        // it, could wait for ever once every connection is held so.
                        let reply = e.into_reply_at(req.uri().path());
                        let stored = (reply.status.as_u16(), &stored_headers(&reply), reply.body.as_slice());
                        idempotency::store_failure(&client, &k, fp, stored, claim_times(state)).await?;
                        Ok(mark_replayed(reply.into_response(), Answer::First))
                    }
                };
            }
            Ok(false) => false,
            Err(e) if e.sql_state() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => true,
            Err(e) => return Err(e.into()),
        };
        tx.rollback().await?;
        let stored = idempotency::read(&client, &k).await?;
        drop(client);
        match stored {
            Some(Stored { fingerprint, status, headers, body }) => {
                if fingerprint != fp {
                    return Err(ApiError::IdempotencyKeyReused);
                }
                return Ok(mark_replayed(stored_reply(status, &headers, body).into_response(), Answer::Replay));
            }
            // The original's claim is not committed yet: it is running.
            None if in_flight => poll.wait().await?,
            // The original failed and gave the key back in between: claim it now.
            None => {}
        }
    }
}

/// The times of a claim made now.
fn claim_times(state: &AppState) -> idempotency::ClaimTimes {
    let now = state.clock.now();
    idempotency::ClaimTimes { now, expires_at: now + state.config.idempotency_retention }
}

/// How a request run under its claim ended.
enum Ran {
    /// Committed with its stored answer.
    Answered(Response<Body>),
    /// A final failure (4xx): rolled back, its answer still to be stored on its own.
    Refused(ApiError),
}

/// Runs the request under its claim. Its answer is stored in its own transaction when
/// it succeeds (one commit for both); a final failure (4xx) rolls the transaction back,
/// and the caller stores it on its own, to be replayed too; server trouble (5xx) rolls
/// back the claim with everything else, so that a retry runs afresh.
async fn run_claimed(
    k: &KeyRef<'_>,
    tx: Transaction<'_>,
    op: impl AsyncFnOnce(&Transaction<'_>) -> Result<Reply, ApiError>,
) -> Result<Ran, ApiError> {
    match op(&tx).await {
        Ok(reply) => {
            let headers = stored_headers(&reply);
            idempotency::complete(&tx, k, reply.status.as_u16(), &headers, &reply.body).await?;
            // Should the commit's answer be lost, the retry finds the stored answer or
            // nothing, exactly as the transaction went: both or neither.
            tx.commit().await?;
            Ok(Ran::Answered(mark_replayed(reply.into_response(), Answer::First)))
        }
        Err(e) if e.is_final() => {
            tx.rollback().await?;
            Ok(Ran::Refused(e))
        }
        Err(e) => Err(e),
    }
}

/// A retry's wait for its original: bounded in time (`IDEMPOTENCY_WAIT_MS`) and in how
/// many retries may wait at once (`IDEMPOTENCY_MAX_WAITERS`); between its polls it
/// holds no database connection, so waiting retries never starve other requests.
struct Poll<'a> {
    state: &'a AppState,
    started: Instant,
    pause: Duration,
    place: Option<tokio::sync::SemaphorePermit<'a>>,
}

impl<'a> Poll<'a> {
    fn new(state: &'a AppState) -> Self {
        Self { state, started: Instant::now(), pause: Duration::from_millis(5), place: None }
    }

    /// Sleeps before the next poll, or answers 409 when the retry may wait no longer
    /// (or no place to wait is free). The original's end cannot be foreseen: the
    /// retry is told to come back in a second.
    async fn wait(&mut self) -> Result<(), ApiError> {
        let in_progress = || ApiError::IdempotencyKeyInProgress { retry_after: 1 };
        if self.started.elapsed() >= self.state.config.idempotency_wait {
            return Err(in_progress());
        }
        if self.place.is_none() {
            self.place = Some(self.state.idempotency_waiters.try_acquire().map_err(|_| in_progress())?);
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(Duration::from_millis(50));
        Ok(())
    }
}
