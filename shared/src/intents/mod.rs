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

//!
//! A wait for an upstream seat (`wait`) is an intent too: see [`wait`].

mod reaper;
pub mod wait;
mod worker;

pub use reaper::{ReaperReport, reap, requeue_stale};
pub use worker::{claim, execute, process, run};

use crate::AppState;
use crate::booking::on_freed;
use crate::db::intents::{self, Claimed, Kind};
use crate::db::reservations::Transition;
use crate::db::{DbError, reservations, resources};
use crate::domain::{FailureReason, IntentState, Status};
use crate::upstream::breaker::{Breaker, Failure};
use crate::upstream::{SystemOfRecord, UpstreamError};
use chrono::Duration;
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
    pub fn state(&self) -> IntentState {
        match self {
            Resolution::Succeeded { .. } => IntentState::Succeeded,
            Resolution::FailedRace => IntentState::FailedRace,
            Resolution::FailedAuth => IntentState::FailedAuth,
            Resolution::FailedUpstream => IntentState::FailedUpstream,
        }
    }

    /// What the reservation becomes: booked, or failed for the reason the write failed.
    pub fn reservation_status(&self) -> (Status, Option<FailureReason>) {
        match self {
            Resolution::Succeeded { .. } => (Status::Confirmed, None),
            Resolution::FailedRace => (Status::Failed, Some(FailureReason::Race)),
            Resolution::FailedAuth => (Status::Failed, Some(FailureReason::Auth)),
            Resolution::FailedUpstream => (Status::Failed, Some(FailureReason::Upstream)),
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

/// What the claim of one intent came to.
#[derive(Debug)]
pub enum ClaimOutcome {
    /// Ours, under a lease: execute it.
    Claimed(Claimed),
    /// Not now (not due, the seat busy, behind an earlier cancel): the message must
    /// come again.
    Later,
    /// Nothing to do: claimed by another worker, settled already, or unknown.
    Nothing,
}

/// What the upstream call of a claimed intent came to.
#[derive(Debug)]
pub enum Executed {
    /// The upstream's answer, or the current-charge read after an unknown one.
    Resolved(Resolution),
    /// Still unknown after the read: left `RESERVING`, for the lease reaper.
    Unknown,
    /// Not sent (the breaker refused it, or a cancel to be tried again): the claim
    /// was given back, due again later.
    GivenBack,
}

/// The current-charge read after an unknown outcome.
async fn read_after_uncertainty(
    state: &AppState,
    upstream: &dyn SystemOfRecord,
    claim: &Claimed,
) -> Result<Executed, DbError> {
    let breaker = Breaker::from_config(&state.config.upstream);
    let reference = claim.reservation_id.to_string();
    let read = breaker
        .guard(&state.pool, state.clock.as_ref(), upstream.current_charge(&reference))
        .await
        .map_err(Failure::into_inner)?;
    Ok(match read {
        Ok(Some(charge_id)) => Executed::Resolved(Resolution::Succeeded { charge_id }),
        Ok(None) => Executed::Resolved(Resolution::FailedUpstream),
        Err(UpstreamError::Unauthorized) => Executed::Resolved(Resolution::FailedAuth),
        Err(e) => {
            tracing::warn!(intent_id = %claim.id, error = %e, "current-charge read failed; the reaper will settle it");
            Executed::Unknown
        }
    })
}

/// The breaker around one upstream call of the worker's.
async fn guarded<T>(
    state: &AppState,
    call: impl std::future::Future<Output = Result<T, UpstreamError>>,
) -> Result<Result<T, UpstreamError>, Failure> {
    Breaker::from_config(&state.config.upstream).guard(&state.pool, state.clock.as_ref(), call).await
}

/// Back to `REQUESTED`, due again after `after`.
async fn give_back(state: &AppState, claim: &Claimed, after: Duration, reason: &str) -> Result<(), DbError> {
    let now = state.clock.now();
    intents::unclaim(&state.pool.get().await?, claim, now + after, reason, now).await
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
    let error = (!matches!(resolution, Resolution::Succeeded { .. })).then(|| resolution.state().as_str());
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
                state = resolution.state().as_str(),
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
    match claim.kind {
        Kind::Cancel => return settle_cancel(state, claim, resolution).await,
        Kind::Wait => return Box::pin(wait::settle_wait(state, upstream, claim, resolution)).await,
        Kind::Reserve => {}
    }
    let now = state.clock.now();
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let resource = resources::lock(&tx, claim.resource_id).await?.ok_or(DbError::Corrupt("resource".into()))?;
    let (charge, error) = match resolution {
        Resolution::Succeeded { charge_id } => (Some(charge_id.as_str()), None),
        other => (None, Some(other.state().as_str())),
    };
    if intents::finish(&tx, claim, resolution.state(), charge, error, now).await?.is_none() {
        tx.rollback().await?;
        drop(client);
        tracing::warn!(intent_id = %claim.id, "lease lost before settling; the other side's outcome stands");
        if let Some(charge_id) = charge {
            compensate(state, upstream, claim.id, charge_id).await?;
        }
        return Ok(false);
    }
    let (status, reason) = resolution.reservation_status();
    let change = Transition { from: Status::Confirming, to: status };
    let r = reservations::set_status(&tx, claim.reservation_id, change, reason, None, now)
        .await?
        .expect_whole(claim.reservation_id)?;
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
    tracing::info!(intent_id = %claim.id, reservation_id = %r.id, state = resolution.state().as_str(), "intent settled");
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
    let kept = intents::state_of(&state.pool.get().await?, intent_id).await?;
    if kept.as_ref().and_then(|(_, c)| c.as_deref()) == Some(charge_id) {
        return Ok(());
    }
    let breaker = Breaker::from_config(&state.config.upstream);
    match breaker
        .guard(&state.pool, state.clock.as_ref(), upstream.cancel(charge_id))
        .await
        .map_err(Failure::into_inner)?
    {
        Ok(()) => tracing::warn!(%intent_id, charge_id, "cancelled an orphaned upstream charge"),
        Err(e) => tracing::error!(%intent_id, charge_id, error = %e, "could not cancel an orphaned upstream charge"),
    }
    Ok(())
}
