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
use crate::upstream::breaker::{Breaker, Failure};
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

/// Claims, executes and settles one intent. No database connection is held while the
/// upstream is called, so a batch's concurrency is bounded by the pool alone.
pub async fn process(state: &AppState, upstream: &dyn SystemOfRecord, intent_id: Uuid) -> Result<Processed, DbError> {
    let claim = match claim(state, intent_id).await? {
        ClaimOutcome::Claimed(claim) => claim,
        ClaimOutcome::Later => return Ok(Processed::Retry),
        ClaimOutcome::Nothing => return Ok(Processed::Skipped),
    };
    let executed = match execute(state, upstream, &claim).await {
        Ok(executed) => executed,
        Err(Failure::BeforeTheCall(e)) => {
            // Nothing was sent: give the claim back, so the message's next delivery
            // claims it again (a lapsed lease would be settled by the reaper's read as
            // if the write had gone out, and fail a booking the upstream never saw).
            let now = state.clock.now();
            if let Ok(client) = state.pool.get().await
                && let Err(back) = intents::unclaim(&client, &claim, now, "local failure before the call", now).await
            {
                tracing::warn!(intent_id = %claim.id, error = %back, "could not give a claim back; the reaper will");
            }
            return Err(e);
        }
        // Sent, outcome unrecorded: the lease reaper reads the outcome when it lapses.
        Err(Failure::AfterTheCall(e)) => return Err(e),
    };
    match executed {
        Executed::Resolved(resolution) => {
            settle(state, upstream, &claim, &resolution).await?;
            Ok(Processed::Settled)
        }
        Executed::Unknown => Ok(Processed::LeftForReaper),
        Executed::GivenBack => Ok(Processed::Retry),
    }
}

/// Step 1: the claim, in a short transaction of its own.
pub async fn claim(state: &AppState, intent_id: Uuid) -> Result<ClaimOutcome, DbError> {
    let now = state.clock.now();
    let client = state.pool.get().await?;
    let lease = state.config.upstream.intent_lease;
    match intents::claim(&client, intent_id, now, Uuid::new_v4(), now + lease).await {
        Ok(Some(c)) => Ok(ClaimOutcome::Claimed(c)),
        // Not due yet, or a reserve behind an earlier cancel of its seat: the message
        // must come again. Claimed by another worker, settled or unknown: done.
        Ok(None) if intents::waiting(&client, intent_id, now).await? => Ok(ClaimOutcome::Later),
        Ok(None) => Ok(ClaimOutcome::Nothing),
        Err(e) if e.sql_state() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
            intents::postpone(&client, intent_id, now + Duration::seconds(1), "seat busy", now).await?;
            Ok(ClaimOutcome::Later)
        }
        Err(e) => Err(e),
    }
}

/// The breaker around one upstream call of the worker's.
async fn guarded<T>(
    state: &AppState,
    call: impl std::future::Future<Output = Result<T, UpstreamError>>,
) -> Result<Result<T, UpstreamError>, Failure> {
    Breaker::from_config(&state.config.upstream).guard(&state.pool, state.clock.as_ref(), call).await
}

/// Step 2: the upstream write, outside any transaction and holding no connection.
pub async fn execute(state: &AppState, upstream: &dyn SystemOfRecord, claim: &Claimed) -> Result<Executed, Failure> {
    if claim.kind == Kind::Cancel {
        return cancel(state, upstream, claim).await;
    }
    let reference = claim.reservation_id.to_string();
    let written = guarded(state, upstream.reserve(&claim.seat, claim.start, claim.end, &reference)).await?;
    Ok(match written {
        Ok(charge_id) => Executed::Resolved(Resolution::Succeeded { charge_id }),
        Err(UpstreamError::Taken) => Executed::Resolved(Resolution::FailedRace),
        Err(UpstreamError::Unauthorized) => Executed::Resolved(Resolution::FailedAuth),
        Err(UpstreamError::Unavailable { retry_after_seconds }) => {
            let again = Duration::seconds(retry_after_seconds as i64);
            give_back(state, claim, again, "breaker open").await.map_err(Failure::BeforeTheCall)?;
            Executed::GivenBack
        }
        Err(e @ (UpstreamError::Unknown(_) | UpstreamError::Protocol(_))) => {
            tracing::warn!(intent_id = %claim.id, error = %e, "upstream write outcome unknown; reading the current charge");
            read_after_uncertainty(state, upstream, claim).await.map_err(Failure::AfterTheCall)?
        }
    })
}

/// Back to `REQUESTED`, due again after `after`.
async fn give_back(state: &AppState, claim: &Claimed, after: Duration, reason: &str) -> Result<(), DbError> {
    let now = state.clock.now();
    intents::unclaim(&state.pool.get().await?, claim, now + after, reason, now).await
}

/// Step 2 of a cancel: the DELETE of the booking's charge. It is idempotent (a charge
/// already gone answers 404, which the adapter reports as done), so an unknown outcome
/// is simply tried again later, where a reserve's POST must never be.
async fn cancel(state: &AppState, upstream: &dyn SystemOfRecord, claim: &Claimed) -> Result<Executed, Failure> {
    let charge_id = claim
        .charge_id
        .as_deref()
        .ok_or_else(|| Failure::BeforeTheCall(DbError::Corrupt("cancel intent without a charge".into())))?;
    let retry_after_seconds = match guarded(state, upstream.cancel(charge_id)).await? {
        Ok(()) => return Ok(Executed::Resolved(Resolution::Succeeded { charge_id: charge_id.to_string() })),
        Err(UpstreamError::Unauthorized) => return Ok(Executed::Resolved(Resolution::FailedAuth)),
        Err(UpstreamError::Unavailable { retry_after_seconds }) => retry_after_seconds as i64,
        Err(e) => {
            tracing::warn!(intent_id = %claim.id, error = %e, "upstream cancel failed; it will be sent again");
            // Backs off with the attempts: 2 s, 4 s, 8 s ... at most 5 minutes.
            2i64.saturating_pow(claim.attempts.clamp(1, 8) as u32).min(300)
        }
    };
    // Sent again later whatever happened: a DELETE is safe to repeat.
    give_back(state, claim, Duration::seconds(retry_after_seconds), "cancel not done yet")
        .await
        .map_err(Failure::BeforeTheCall)?;
    Ok(Executed::GivenBack)
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
        drop(client);
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
            Kind::Cancel => execute(state, upstream, claim).await.map_err(Failure::into_inner)?,
            Kind::Reserve => read_after_uncertainty(state, upstream, claim).await?,
        };
        match outcome {
            Executed::Resolved(resolution) => {
                if settle(state, upstream, claim, &resolution).await? {
                    report.settled += 1;
                }
            }
            Executed::Unknown | Executed::GivenBack => report.still_unknown += 1,
        }
    }
    Ok(report)
}
