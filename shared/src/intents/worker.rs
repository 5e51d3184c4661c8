//! The intent worker's steps for one message: claim, execute (the upstream call,
//! holding no connection), then settle (in `super`).

use super::{ClaimOutcome, Executed, Processed, Resolution, give_back, guarded, read_after_uncertainty, settle};
use crate::AppState;
use crate::db::DbError;
use crate::db::intents::{self, Claimed, Kind};
use crate::upstream::breaker::Failure;
use crate::upstream::{SystemOfRecord, UpstreamError};
use chrono::Duration;
use uuid::Uuid;

/// Claims, executes and settles one intent. No database connection is held while the
/// upstream is called, so a batch's concurrency is bounded by the pool alone.
pub async fn process(state: &AppState, upstream: &dyn SystemOfRecord, intent_id: Uuid) -> Result<Processed, DbError> {
    match claim(state, intent_id).await? {
        ClaimOutcome::Claimed(claim) => run(state, upstream, claim).await,
        ClaimOutcome::Later => Ok(Processed::Retry),
        ClaimOutcome::Nothing => Ok(Processed::Skipped),
    }
}

/// Executes and settles an intent claimed under a lease (by [`claim`], or by the wait
/// poller's claim of a wait).
pub async fn run(state: &AppState, upstream: &dyn SystemOfRecord, claim: Claimed) -> Result<Processed, DbError> {
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
