//! Judging a range by its resource's calendar rules (`domain::calendar`). Called with
//! the resource row as its lock returned it, so that a change of the rules (written
//! under the same lock) and a reserve cannot interleave: the rules judged are those in
//! force when the booking is written. Every path that makes or moves a booking judges
//! here: reserve, reschedule and the hand-over to the waitlist (join judges the rules
//! that do not need the load).

use super::BookingError;
use crate::db::{DbError, GenericClient, reservations};
use crate::domain::{Claim, Judge, Reservation, Resource, Rule, peak_load};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Refuses `[start, end)` for `quantity` with [`BookingError::OutsideSchedule`] when it
/// breaks a rule of `resource`. A range the bookings already take outright passes
/// here: the conditional insert refuses it as taken (`slot-unavailable`); only a
/// range that fits but for the buffers is refused for them. `except` is the booking
/// a reschedule moves, left out of its own buffers.
#[allow(clippy::too_many_arguments)]
pub(super) async fn judge(
    tx: &impl GenericClient,
    resource: &Resource,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    quantity: i32,
    except: Option<Uuid>,
    judge: Judge,
    now: DateTime<Utc>,
) -> Result<(), BookingError> {
    let rules = &resource.calendar;
    rules.judge(start, end, now, judge).map_err(BookingError::OutsideSchedule)?;
    if rules.buffer_before_minutes == 0 && rules.buffer_after_minutes == 0 {
        return Ok(());
    }
    let claims = claims_near(tx, resource, start, end, except, now).await?;
    if peak_load(start, end, &claims) + i64::from(quantity) > i64::from(resource.capacity) {
        return Ok(());
    }
    rules.judge_buffers(start, end, quantity, resource.capacity, &claims).map_err(BookingError::OutsideSchedule)
}

/// The active bookings whose buffers can meet those of `[start, end)`.
pub(super) async fn claims_near(
    tx: &impl GenericClient,
    resource: &Resource,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    except: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<Vec<Claim>, DbError> {
    let reach = resource.calendar.reach();
    Ok(reservations::active_in_window(tx, resource.id, start - reach, end + reach, now)
        .await?
        .iter()
        .filter(|r| Some(r.id) != except)
        .map(Reservation::claim)
        .collect())
}

/// Whether a waiting entry's range may be offered now: the rules that do not need the
/// load, then the buffers against `claims` (the load the hand-over keeps in memory,
/// which covers the entry's range widened by the buffers' reach).
pub(super) fn offerable(
    resource: &Resource,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    quantity: i32,
    claims: &[Claim],
    now: DateTime<Utc>,
) -> Result<(), Rule> {
    let rules = &resource.calendar;
    rules.judge(start, end, now, Judge::Everything)?;
    rules.judge_buffers(start, end, quantity, resource.capacity, claims)
}
