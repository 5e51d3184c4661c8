//! The sweeper's side of the intents: the lease reaper settles intents whose worker
//! died by reading the outcome, never by writing again, and the requeue gives a new
//! message to intents whose message was lost.

use super::worker::execute;
use super::{Executed, read_after_uncertainty, settle};
use crate::AppState;
use crate::db::DbError;
use crate::db::intents::{self, Kind};
use crate::upstream::SystemOfRecord;
use crate::upstream::breaker::Failure;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

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
            Kind::Reserve | Kind::Wait => read_after_uncertainty(state, upstream, claim).await?,
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
