//! Confirmations against the system of record, as durable intents.
//!
//! A confirm records, in one transaction, what the user approved (an approval row),
//! the intent (`REQUESTED`), the reservation as `CONFIRMING`, and the intent message
//! in the outbox; it answers 202 at once. The worker then:
//!
//! 1. claims the intent in one short transaction (`REQUESTED -> RESERVING`, with a
//!    lease and an owner token) and commits. The unique index
//!    `intents_one_write_per_seat` lets PostgreSQL refuse a second write in flight to
//!    the same seat, across every worker instance;
//! 2. calls the upstream with no transaction open and no row locked;
//! 3. writes the terminal state, the reservation's final status and its event in a
//!    second short transaction, fenced by the lease token.
//!
//! An outcome that is unknown (5xx, timeout, reset) is settled by the current-charge
//! read, never by sending the write again: charge exists -> `SUCCEEDED`, none ->
//! `FAILED_UPSTREAM`, credential rejected -> `FAILED_AUTH`. If even the read fails, the
//! intent stays `RESERVING` and the lease reaper settles it the same way once the lease
//! lapses. Competing requests for one seat never reach the upstream at all: the
//! reservation's own guard refuses them locally, in milliseconds, before any intent
//! exists; so a burst for one seat costs one upstream write.

use crate::AppState;
use crate::booking::on_freed;
use crate::db::intents::{self, Claimed, Kind};
use crate::db::{DbError, reservations, resources};
use crate::domain::{FailureReason, Status};
use crate::upstream::breaker::Breaker;
use crate::upstream::{SystemOfRecord, UpstreamError};
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use uuid::Uuid;

/// How an intent ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Succeeded { charge_id: String },
    FailedRace,
    FailedAuth,
    FailedUpstream,
}

impl Resolution {
    fn state(&self) -> &'static str {
        match self {
            Resolution::Succeeded { .. } => "SUCCEEDED",
            Resolution::FailedRace => "FAILED_RACE",
            Resolution::FailedAuth => "FAILED_AUTH",
            Resolution::FailedUpstream => "FAILED_UPSTREAM",
        }
    }
}

/// What processing one intent message came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Processed {
    /// Terminal state written.
    Settled,
    /// Nothing to do: already claimed, settled, or unknown (a duplicate delivery).
    Skipped,
    /// Left `RESERVING` for the reaper (the outcome could not be read yet).
    LeftForReaper,
    /// Not done now (seat busy, breaker open): the message should come again.
    Retry,
}

/// The current-charge read after an unknown outcome. `None`: still unknown.
async fn read_after_uncertainty(
    state: &AppState,
    upstream: &dyn SystemOfRecord,
    claim: &Claimed,
) -> Result<Option<Resolution>, DbError> {
    let breaker = Breaker::from_config(&state.config.upstream);
    let reference = claim.reservation_id.to_string();
    let client = state.pool.get().await?;
    let read = breaker.guard(&client, state.clock.as_ref(), upstream.current_charge(&reference)).await?;
    drop(client);
    Ok(match read {
        Ok(Some(charge_id)) => Some(Resolution::Succeeded { charge_id }),
        Ok(None) => Some(Resolution::FailedUpstream),
        Err(UpstreamError::Unauthorized) => Some(Resolution::FailedAuth),
        Err(e) => {
            tracing::warn!(intent_id = %claim.id, error = %e, "current-charge read failed; the reaper will settle it");
            None
        }
    })
}

/// Claims, executes and settles one intent.
pub async fn process(state: &AppState, upstream: &dyn SystemOfRecord, intent_id: Uuid) -> Result<Processed, DbError> {
    let Some(claim) = claim(state, intent_id).await? else { return Ok(Processed::Skipped) };
    let Some(claim) = claim else { return Ok(Processed::Retry) };
    let Some(outcome) = execute(state, upstream, &claim).await? else { return Ok(Processed::Retry) };
    match outcome {
        Some(resolution) => {
            settle(state, upstream, &claim, &resolution).await?;
            Ok(Processed::Settled)
        }
        None => Ok(Processed::LeftForReaper),
    }
}

/// Step 1. `None`: nothing to claim (not due, already claimed or settled, unknown).
/// `Some(None)`: another write to the same seat is in flight; postponed.
pub async fn claim(state: &AppState, intent_id: Uuid) -> Result<Option<Option<Claimed>>, DbError> {
    let now = state.clock.now();
    let client = state.pool.get().await?;
    let lease = state.config.upstream.intent_lease;
    match intents::claim(&client, intent_id, now, Uuid::new_v4(), now + lease).await {
        Ok(Some(c)) => Ok(Some(Some(c))),
        // Not due yet, or a reserve behind an earlier cancel of its seat: the message
        // must come again. Claimed by another worker, settled or unknown: done.
        Ok(None) if intents::waiting(&client, intent_id, now).await? => Ok(Some(None)),
        Ok(None) => Ok(None),
        Err(e) if e.sql_state() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
            intents::postpone(&client, intent_id, now + Duration::seconds(1), "seat busy", now).await?;
            Ok(Some(None))
        }
        Err(e) => Err(e),
    }
}

/// Step 2: the upstream write, outside any transaction. `None`: the breaker refused and
/// the claim was given back. `Some(None)`: outcome still unknown after the read.
pub async fn execute(
    state: &AppState,
    upstream: &dyn SystemOfRecord,
    claim: &Claimed,
) -> Result<Option<Option<Resolution>>, DbError> {
    if claim.kind == Kind::Cancel {
        return cancel(state, upstream, claim).await;
    }
    let breaker = Breaker::from_config(&state.config.upstream);
    let reference = claim.reservation_id.to_string();
    let client = state.pool.get().await?;
    let written = breaker
        .guard(&client, state.clock.as_ref(), upstream.reserve(&claim.seat, claim.start, claim.end, &reference))
        .await?;
    Ok(Some(match written {
        Ok(charge_id) => Some(Resolution::Succeeded { charge_id }),
        Err(UpstreamError::Taken) => Some(Resolution::FailedRace),
        Err(UpstreamError::Unauthorized) => Some(Resolution::FailedAuth),
        Err(UpstreamError::Unavailable { retry_after_seconds }) => {
            let now = state.clock.now();
            let again = now + Duration::seconds(retry_after_seconds as i64);
            intents::unclaim(&client, claim, again, "breaker open", now).await?;
            return Ok(None);
        }
        Err(e @ (UpstreamError::Unknown(_) | UpstreamError::Protocol(_))) => {
            drop(client);
            tracing::warn!(intent_id = %claim.id, error = %e, "upstream write outcome unknown; reading the current charge");
            read_after_uncertainty(state, upstream, claim).await?
        }
    }))
}

/// Step 2 of a cancel: the DELETE of the booking's charge. It is idempotent (a charge
/// already gone answers 404, which the adapter reports as done), so an unknown outcome
/// is simply tried again later, where a reserve's POST must never be.
async fn cancel(
    state: &AppState,
    upstream: &dyn SystemOfRecord,
    claim: &Claimed,
) -> Result<Option<Option<Resolution>>, DbError> {
    let charge_id = claim.charge_id.as_deref().ok_or(DbError::Corrupt("cancel intent without a charge".into()))?;
    let breaker = Breaker::from_config(&state.config.upstream);
    let client = state.pool.get().await?;
    let retry_after_seconds = match breaker.guard(&client, state.clock.as_ref(), upstream.cancel(charge_id)).await? {
        Ok(()) => return Ok(Some(Some(Resolution::Succeeded { charge_id: charge_id.to_string() }))),
        Err(UpstreamError::Unauthorized) => return Ok(Some(Some(Resolution::FailedAuth))),
        Err(UpstreamError::Unavailable { retry_after_seconds }) => retry_after_seconds as i64,
        Err(e) => {
            tracing::warn!(intent_id = %claim.id, error = %e, "upstream cancel failed; it will be sent again");
            // Backs off with the attempts: 2 s, 4 s, 8 s ... at most 5 minutes.
            2i64.saturating_pow(claim.attempts.clamp(1, 8) as u32).min(300)
        }
    };
    let now = state.clock.now();
    intents::unclaim(&client, claim, now + Duration::seconds(retry_after_seconds), "cancel not done yet", now).await?;
    Ok(None)
}

/// Step 3 of a cancel: the booking was already `CANCELLED` locally, and its capacity
/// handed on, in the transaction that asked for the cancel; only the intent ends here.
async fn settle_cancel(state: &AppState, claim: &Claimed, resolution: &Resolution) -> Result<bool, DbError> {
    let now = state.clock.now();
    let client = state.pool.get().await?;
    let charge = match resolution {
        Resolution::Succeeded { charge_id } => Some(charge_id.as_str()),
        _ => claim.charge_id.as_deref(),
    };
    let error = (!matches!(resolution, Resolution::Succeeded { .. })).then(|| resolution.state());
    if intents::finish(&client, claim, resolution.state(), charge, error, now).await?.is_none() {
        tracing::warn!(intent_id = %claim.id, "lease lost before settling a cancel; the other side's outcome stands");
        return Ok(false);
    }
    match resolution {
        Resolution::Succeeded { .. } => {
            crate::metrics::count("UpstreamCancelsSucceeded");
            tracing::info!(intent_id = %claim.id, reservation_id = %claim.reservation_id, "upstream charge cancelled");
        }
        _ => {
            crate::metrics::count("UpstreamCancelsFailed");
            tracing::error!(
                intent_id = %claim.id,
                reservation_id = %claim.reservation_id,
                charge_id = charge,
                state = resolution.state(),
                "upstream refused to cancel a charge; the seat stays taken there until an operator cancels it"
            );
        }
    }
    Ok(true)
}

/// Step 3: the terminal state, the reservation's status and its event, together. A
/// failed intent gives the capacity back (to the waitlist first). Fenced by the lease:
/// if the lease was taken over meanwhile, nothing is written; a charge this writer
/// made that the other side did not keep is cancelled upstream.
pub async fn settle(
    state: &AppState,
    upstream: &dyn SystemOfRecord,
    claim: &Claimed,
    resolution: &Resolution,
) -> Result<bool, DbError> {
    if claim.kind == Kind::Cancel {
        return settle_cancel(state, claim, resolution).await;
    }
    let now = state.clock.now();
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let resource = resources::lock(&tx, claim.resource_id).await?.ok_or(DbError::Corrupt("resource".into()))?;
    let (charge, error) = match resolution {
        Resolution::Succeeded { charge_id } => (Some(charge_id.as_str()), None),
        other => (None, Some(other.state())),
    };
    if intents::finish(&tx, claim, resolution.state(), charge, error, now).await?.is_none() {
        tx.rollback().await?;
        tracing::warn!(intent_id = %claim.id, "lease lost before settling; the other side's outcome stands");
        if let Some(charge_id) = charge {
            compensate(state, upstream, claim.id, charge_id).await?;
        }
        return Ok(false);
    }
    let (status, reason) = match resolution {
        Resolution::Succeeded { .. } => (Status::Confirmed, None),
        Resolution::FailedRace => (Status::Failed, Some(FailureReason::Race)),
        Resolution::FailedAuth => (Status::Failed, Some(FailureReason::Auth)),
        Resolution::FailedUpstream => (Status::Failed, Some(FailureReason::Upstream)),
    };
    let r = reservations::set_status(&tx, claim.reservation_id, status, reason, now).await?;
    if status == Status::Failed {
        on_freed(&tx, &resource, std::slice::from_ref(&r), now).await?;
    } else if r.source == crate::domain::Source::WaitlistOffer {
        crate::db::waitlist::settle_offers(&tx, &[r.id], crate::domain::WaitlistStatus::Accepted, now).await?;
    }
    tx.commit().await?;
    crate::metrics::count(match resolution {
        Resolution::Succeeded { .. } => "IntentsSucceeded",
        Resolution::FailedRace => "IntentsFailedRace",
        Resolution::FailedAuth => "IntentsFailedAuth",
        Resolution::FailedUpstream => "IntentsFailedUpstream",
    });
    tracing::info!(intent_id = %claim.id, reservation_id = %r.id, state = resolution.state(), "intent settled");
    Ok(true)
}

/// A charge made by a writer whose lease lapsed, where the intent was settled without
/// it: cancel it upstream so the seat is not held by nobody's booking.
async fn compensate(
    state: &AppState,
    upstream: &dyn SystemOfRecord,
    intent_id: Uuid,
    charge_id: &str,
) -> Result<(), DbError> {
    let client = state.pool.get().await?;
    let kept = intents::state_of(&client, intent_id).await?;
    if kept.as_ref().and_then(|(_, c)| c.as_deref()) == Some(charge_id) {
        return Ok(());
    }
    let breaker = Breaker::from_config(&state.config.upstream);
    match breaker.guard(&client, state.clock.as_ref(), upstream.cancel(charge_id)).await? {
        Ok(()) => tracing::warn!(%intent_id, charge_id, "cancelled an orphaned upstream charge"),
        Err(e) => tracing::error!(%intent_id, charge_id, error = %e, "could not cancel an orphaned upstream charge"),
    }
    Ok(())
}

/// Queues a new message for every due intent that has waited untouched for longer than
/// `INTENT_REQUEUE_AFTER_SECONDS`: its message was lost, or went to the dead-letter
/// queue after its retries (a long outage, a seat busy for long). Without this, such an
/// intent would wait for an operator; with it, the worst case is a duplicate message,
/// which a claim turns into nothing.
pub async fn requeue_stale(state: &AppState, limit: i64, now: DateTime<Utc>) -> Result<u64, DbError> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let stale = intents::touch_stale(&tx, now, now - state.config.upstream.intent_requeue_after, limit).await?;
    for (intent_id, reservation_id) in &stale {
        crate::db::outbox::insert_intent_message(&tx, *intent_id, *reservation_id, now).await?;
    }
    tx.commit().await?;
    Ok(stale.len() as u64)
}

#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct ReaperReport {
    pub reaped: u64,
    pub settled: u64,
    pub still_unknown: u64,
}

/// The lease reaper: intents whose lease lapsed in `RESERVING` are settled by the
/// current-charge read, never by replaying the write.
pub async fn reap(
    state: &AppState,
    upstream: &dyn SystemOfRecord,
    limit: i64,
    now: DateTime<Utc>,
) -> Result<ReaperReport, DbError> {
    let lease = state.config.upstream.intent_lease;
    let claims = {
        let client = state.pool.get().await?;
        intents::claim_lapsed(&client, now, limit, Uuid::new_v4(), now + lease).await?
    };
    let mut report = ReaperReport { reaped: claims.len() as u64, ..Default::default() };
    for claim in &claims {
        // A lapsed cancel is sent again (the DELETE is idempotent); a lapsed reserve is
        // settled by the current-charge read, never by a second POST.
        let outcome = match claim.kind {
            Kind::Cancel => execute(state, upstream, claim).await?.flatten(),
            Kind::Reserve => read_after_uncertainty(state, upstream, claim).await?,
        };
        match outcome {
            Some(resolution) => {
                if settle(state, upstream, claim, &resolution).await? {
                    report.settled += 1;
                }
            }
            None => report.still_unknown += 1,
        }
    }
    Ok(report)
}
