//! Waiting for an upstream seat that someone else holds in the system of record.
//!
//! Joining the waitlist of an upstream resource with `auto_book` is the consent to the
//! write: an approval and a wait intent in `WAITING_FOR_SEAT`. Nothing local can say
//! when that seat frees (someone else holds it in the system of record), so the seat is
//! polled, by the sweeper on every run:
//!
//! 1. due seats are claimed from `seat_polls` (one row per seat, however many wait), so
//!    that concurrent pollers never read or write the same seat;
//! 2. the seat is read through the shared single-flight cache, with no transaction
//!    open (a thousand waiters on one seat cost one read per cache period, and the
//!    seat's backoff doubles while it stays taken, up to `WAIT_POLL_MAX_SECONDS`);
//! 3. the first waiting entry in FIFO order whose range the upstream shows free is
//!    served in a short transaction: an `auto_book` wait goes to `RESERVING` with its
//!    booking `CONFIRMING` (the same per-seat index and lease as a confirm), any other
//!    entry gets an offer;
//! 4. the write goes out like a confirm's and settles in a second short transaction:
//!    success books (`ACCEPTED`, `CONFIRMED`), a lost race puts the wait back to
//!    `WAITING_FOR_SEAT` in its place and the seat's next poll after one cache period
//!    (so the view that showed it free is read again, not believed again).
//!
//! One write per seat per free event, however many wait: only one wait of a seat is
//! ever `RESERVING`, and a seat with a write in flight is not served again until it
//! settles. While the breaker is open, nothing is read or written: the waits pause.

use super::worker::run;
use super::{Resolution, compensate};
use crate::AppState;
use crate::booking::waits::{Started, offer_entry, start_wait};
use crate::booking::{on_freed, request_cancel};
use crate::db::intents::{self, Claimed};
use crate::db::reservations::Transition;
use crate::db::seat_polls::{self, DueSeat};
use crate::db::{DbError, reservations, resources, waitlist};
use crate::domain::{IntentState, Status, WaitlistEntry, WaitlistStatus};
use crate::upstream::{SystemOfRecord, UpstreamError, cache};
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use uuid::Uuid;

/// How many waiting entries of one seat a poll considers, in FIFO order.
const QUEUE: i64 = 200;

/// What one poll of the due seats did.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct WaitReport {
    /// Seats whose view was read (through the cache: most reads stay local).
    pub seats_read: u64,
    /// Of those, seats the upstream showed taken for every waiter.
    pub seats_taken: u64,
    /// Waits that went to `RESERVING`: one upstream write each.
    pub writes: u64,
    /// Waits booked.
    pub booked: u64,
    /// Offers made to entries without `auto_book`.
    pub offers: u64,
    /// The breaker was open: nothing was read or sent.
    pub paused: bool,
}

/// The seat's backoff after `idle_polls` polls in a row found it taken: 1 s, 2 s, 4 s
/// ... at most `max`.
pub fn backoff(idle_polls: i32, max: Duration) -> Duration {
    Duration::seconds(1i64 << idle_polls.clamp(0, 20)).min(max)
}

/// Waits whose range has started end by themselves (entry `EXPIRED`, intent
/// `CANCELLED`); a wait whose write is in flight settles first.
pub async fn end_started(state: &AppState, limit: i64, now: DateTime<Utc>) -> Result<u64, DbError> {
    intents::end_started_waits(&state.pool.get().await?, now, limit).await
}

/// Polls the seats that are due, at most `limit`.
pub async fn poll(state: &AppState, upstream: &dyn SystemOfRecord, limit: i64) -> Result<WaitReport, DbError> {
    let now = state.clock.now();
    let mut report = WaitReport::default();
    let seats = {
        let client = state.pool.get().await?;
        if crate::upstream::breaker::open_now(&client, now).await?.is_some() {
            report.paused = true;
            return Ok(report);
        }
        seat_polls::claim_due(&client, now, limit, now + state.config.upstream.intent_lease).await?
    };
    for seat in &seats {
        poll_seat(state, upstream, seat, &mut report).await?;
    }
    Ok(report)
}

async fn reschedule(state: &AppState, seat: &DueSeat, after: Duration, idle_polls: i32) -> Result<(), DbError> {
    let now = state.clock.now();
    seat_polls::reschedule(&state.pool.get().await?, seat, now + after, idle_polls, now).await
}

fn waits_for_seat(e: &WaitlistEntry) -> bool {
    !e.auto_book || (e.intent.as_ref().is_some_and(|i| i.state == IntentState::WaitingForSeat) && !e.leave_requested)
}

async fn poll_seat(
    state: &AppState,
    upstream: &dyn SystemOfRecord,
    seat: &DueSeat,
    report: &mut WaitReport,
) -> Result<(), DbError> {
    let config = &state.config.upstream;
    let now = state.clock.now();
    let queue = waitlist::upstream_queue(&state.pool.get().await?, seat.resource_id, now, QUEUE).await?;
    if queue.is_empty() {
        return seat_polls::forget(&state.pool.get().await?, seat).await;
    }
    let in_flight = |s: IntentState| queue.iter().find(|e| e.intent.as_ref().is_some_and(|i| i.state == s));
    // A write given back unsent (the breaker opened before it) goes out before anyone
    // else is served: its booking holds the seat locally already.
    if let Some(e) = in_flight(IntentState::Requested) {
        let intent_id = e.intent.as_ref().map(|i| i.id).unwrap_or_default();
        // Boxed: the worker's whole future inside the poller's would be too deep a type.
        Box::pin(super::process(state, upstream, intent_id)).await?;
        return reschedule(state, seat, Duration::seconds(1), 0).await;
    }
    // One write per seat: the one in flight settles before the seat is served again.
    if in_flight(IntentState::Reserving).is_some() {
        return reschedule(state, seat, Duration::seconds(1), seat.idle_polls).await;
    }
    let waiting: Vec<&WaitlistEntry> = queue.iter().filter(|e| waits_for_seat(e)).collect();
    let (Some(from), Some(to)) = (waiting.iter().map(|e| e.start).min(), waiting.iter().map(|e| e.end).max()) else {
        return reschedule(state, seat, backoff(seat.idle_polls, config.wait_poll_max), seat.idle_polls).await;
    };
    report.seats_read += 1;
    let view = cache::fresh_view(&state.pool, state.clock.as_ref(), upstream, config, &seat.seat, from, to).await?;
    let blocks = match view {
        Ok(blocks) => blocks,
        Err(UpstreamError::Unavailable { retry_after_seconds }) => {
            report.paused = true;
            return reschedule(state, seat, Duration::seconds(retry_after_seconds as i64), seat.idle_polls).await;
        }
        Err(e) => {
            tracing::warn!(seat = %seat.seat, error = %e, "could not read a seat with waiters");
            let idle = seat.idle_polls + 1;
            return reschedule(state, seat, backoff(idle, config.wait_poll_max), idle).await;
        }
    };
    let free: Vec<&WaitlistEntry> =
        waiting.into_iter().filter(|e| !blocks.iter().any(|b| b.start < e.end && b.end > e.start)).collect();
    if free.is_empty() {
        report.seats_taken += 1;
        let idle = seat.idle_polls + 1;
        return reschedule(state, seat, backoff(idle, config.wait_poll_max), idle).await;
    }
    for entry in free {
        if !entry.auto_book {
            if offer(state, seat, entry.id).await? {
                report.offers += 1;
            }
            continue;
        }
        match start(state, seat, entry).await? {
            Started::Claimed(claim) => {
                report.writes += 1;
                if Box::pin(run(state, upstream, claim)).await? == super::Processed::Settled {
                    let booked = waitlist::get(&state.pool.get().await?, entry.id, state.clock.now()).await?;
                    report.booked += u64::from(booked.is_some_and(|e| e.status == WaitlistStatus::Accepted));
                }
                // A lost race deferred the seat already (this is then fenced off).
                return reschedule(state, seat, Duration::seconds(1), 0).await;
            }
            Started::SeatBusy => return reschedule(state, seat, Duration::seconds(1), seat.idle_polls).await,
            Started::Passed => {}
        }
    }
    // Taken locally for everyone the upstream would have let in: a hold or an offer
    // there frees through `on_freed`, which asks for a poll again.
    let idle = seat.idle_polls + 1;
    reschedule(state, seat, backoff(idle, config.wait_poll_max), idle).await
}

/// Step 3 for an `auto_book` wait, in a short transaction of its own.
async fn start(state: &AppState, seat: &DueSeat, entry: &WaitlistEntry) -> Result<Started, DbError> {
    let now = state.clock.now();
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let resource = resources::lock(&tx, seat.resource_id).await?.ok_or(DbError::Corrupt("resource".into()))?;
    let lease_until = now + state.config.upstream.intent_lease;
    let started = start_wait(&tx, &resource, entry, Uuid::new_v4(), lease_until, now).await?;
    match started {
        Started::Claimed(_) => tx.commit().await?,
        _ => tx.rollback().await?,
    }
    Ok(started)
}

/// Step 3 for an entry without `auto_book`: an offer, in a short transaction.
async fn offer(state: &AppState, seat: &DueSeat, entry_id: Uuid) -> Result<bool, DbError> {
    let now = state.clock.now();
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let resource = resources::lock(&tx, seat.resource_id).await?.ok_or(DbError::Corrupt("resource".into()))?;
    let offered = offer_entry(&tx, &resource, entry_id, now).await?;
    tx.commit().await?;
    Ok(offered)
}

/// Step 4 for a wait: the intent, its booking and its entry, together, fenced by the
/// lease. Success books it (or, if the waiter left meanwhile, cancels the booking
/// through a cancel intent); a lost race or an unknown outcome without a charge puts it
/// back to waiting in its place; a rejected credential ends it.
pub(super) async fn settle_wait(
    state: &AppState,
    upstream: &dyn SystemOfRecord,
    claim: &Claimed,
    resolution: &Resolution,
) -> Result<bool, DbError> {
    let now = state.clock.now();
    let entry_id = claim.waitlist_entry_id.ok_or(DbError::Corrupt("wait intent without an entry".into()))?;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let resource = resources::lock(&tx, claim.resource_id).await?.ok_or(DbError::Corrupt("resource".into()))?;
    // Leaving takes the resource lock too: this read holds until commit.
    let leaving = waitlist::get(&tx, entry_id, now).await?.is_some_and(|e| e.leave_requested);
    let (charge, error) = match resolution {
        Resolution::Succeeded { charge_id } => (Some(charge_id.as_str()), None),
        other => (None, Some(other.state().as_str())),
    };
    let again = matches!(resolution, Resolution::FailedRace | Resolution::FailedUpstream) && !leaving;
    let kept = if again {
        intents::rewait(&tx, claim, error.unwrap_or_default(), now).await?
    } else {
        intents::finish(&tx, claim, resolution.state(), charge, error, now).await?
    };
    if kept.is_none() {
        tx.rollback().await?;
        drop(client);
        tracing::warn!(intent_id = %claim.id, "lease lost before settling a wait; the other side's outcome stands");
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
    let mut cancel_queued = false;
    match resolution {
        Resolution::Succeeded { .. } if !leaving => {
            waitlist::accept_wait(&tx, entry_id, r.id, now).await?;
        }
        Resolution::Succeeded { .. } => {
            // Booked for a waiter who left meanwhile: cancelled like any booking.
            let change = Transition { from: Status::Confirmed, to: Status::Cancelled };
            let r = reservations::set_status(&tx, r.id, change, None, None, now).await?.expect_whole(r.id)?;
            cancel_queued = request_cancel(&tx, r.id, now).await?;
            waitlist::set_status(&tx, entry_id, WaitlistStatus::Cancelled, now).await?;
            on_freed(&tx, &resource, std::slice::from_ref(&r), now).await?;
        }
        _ if again => {
            // The view that showed the seat free is stale: read it again after one cache
            // period, not before (a second POST into the same race is what this avoids).
            let after = state.config.upstream.cache_ttl.max(Duration::seconds(1));
            seat_polls::defer(&tx, resource.id, now + after, now).await?;
        }
        _ => {
            waitlist::set_status(&tx, entry_id, WaitlistStatus::Cancelled, now).await?;
            on_freed(&tx, &resource, std::slice::from_ref(&r), now).await?;
        }
    }
    tx.commit().await?;
    if cancel_queued {
        crate::outbox::publish_intents(state).await;
    }
    crate::metrics::count(match resolution {
        Resolution::Succeeded { .. } => "WaitsBooked",
        _ if again => "WaitsRaceLost",
        _ => "WaitsFailed",
    });
    tracing::info!(intent_id = %claim.id, reservation_id = %r.id, state = resolution.state().as_str(), again, "wait settled");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::backoff;
    use chrono::Duration;

    #[test]
    fn a_seat_that_stays_taken_is_read_less_and_less_often_up_to_the_ceiling() {
        let max = Duration::seconds(60);
        let steps: Vec<i64> = (0..8).map(|idle| backoff(idle, max).num_seconds()).collect();
        assert_eq!(steps, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff(i32::MAX, max), max);
        assert_eq!(backoff(-1, max), Duration::seconds(1));
    }
}
