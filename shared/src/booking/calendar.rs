//! Judging a range by its resource's calendar rules (`domain::calendar`). Called with
//! the resource row as its lock returned it, so that a change of the rules (written
//! under the same lock) and a reserve cannot interleave: the rules judged are those in
//! force when the booking is written. Every path that makes or moves a booking judges
//! here: reserve, reschedule and the hand-over to the waitlist (join judges the rules
//! that do not need the load).
//!
//! The one-statement hold judges from [`Known`] rules instead: the rules the process
//! last read of each resource, with their version. The statement serves the hold only
//! when the version is still the row's under its lock, so a rule changed since is never
//! trusted: the general path decides, here.

use super::{BookingError, on_freed};
use crate::db::hold::{self, VersionedRules};
use crate::db::reservations::Kept;
use crate::db::{DbError, GenericClient, lapse, reservations};
use crate::domain::{Authority, Claim, Judge, Reservation, Resource, Rule, WaitlistEntry, peak_load};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use uuid::Uuid;

/// The calendar rules this process last read of each resource, by id, with their
/// version. Bounded: past [`Known::LIMIT`] resources it starts again empty.
pub(super) struct Known {
    rules: Mutex<HashMap<Uuid, Arc<VersionedRules>>>,
}

/// The rules every one-statement hold of this process judges by.
pub(super) static KNOWN: std::sync::LazyLock<Known> = std::sync::LazyLock::new(|| Known { rules: Mutex::default() });

impl Known {
    const LIMIT: usize = 10_000;

    /// The rules of `resource` as last read, if this process read them.
    pub(super) fn get(&self, resource: Uuid) -> Option<Arc<VersionedRules>> {
        self.rules.lock().unwrap_or_else(PoisonError::into_inner).get(&resource).cloned()
    }

    /// Reads the rules of `resource` (one round trip) and keeps them; `None` when the
    /// resource does not exist.
    pub(super) async fn learn(
        &self,
        c: &impl GenericClient,
        resource: Uuid,
    ) -> Result<Option<Arc<VersionedRules>>, DbError> {
        let read = hold::rules(c, resource).await?.map(Arc::new);
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        match &read {
            Some(read) => {
                if rules.len() >= Self::LIMIT {
                    rules.clear();
                }
                rules.insert(resource, read.clone());
            }
            None => {
                rules.remove(&resource);
            }
        }
        Ok(read)
    }
}

/// A booking to judge: `quantity` over `[start, end)`; `except` is the booking a
/// reschedule moves, left out of its own buffers.
pub(super) struct Candidate {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub except: Option<Uuid>,
}

/// Refuses `candidate` with [`BookingError::OutsideSchedule`] when it breaks a rule of
/// `resource`. A range the bookings already take outright passes here: the
/// conditional insert refuses it as taken (`slot-unavailable`); only a range that
/// fits but for the buffers is refused for them.
///
/// On capacity 1 the database keeps the kept ranges apart, and counts a lapsed hold
/// until it is written down, which the insert does only for the holds its own range
/// meets: the lapsed holds near enough for their buffers to meet this range are
/// written down here first, and handed over.
pub(super) async fn judge(
    tx: &impl GenericClient,
    resource: &Resource,
    candidate: Candidate,
    judge: Judge,
    now: DateTime<Utc>,
) -> Result<(), BookingError> {
    let Candidate { start, end, quantity, except } = candidate;
    let rules = &resource.calendar;
    if !applies(resource) {
        return Ok(());
    }
    rules.judge(start, end, now, judge).map_err(BookingError::OutsideSchedule)?;
    if resource.capacity == 1 {
        let lapsed = expire_lapsed_near(tx, resource, start, end, now).await?;
        on_freed(tx, resource, &lapsed, now).await?;
    }
    let (from, to) = rules.buffered(start, end);
    let near: Vec<Kept> = reservations::kept_near(tx, resource.id, from, to, now)
        .await?
        .into_iter()
        .filter(|k| Some(k.id) != except)
        .collect();
    let claims: Vec<Claim> = near.iter().map(|k| k.claim).collect();
    if peak_load(start, end, &claims) + i64::from(quantity) > i64::from(resource.capacity) {
        return Ok(());
    }
    let kept: Vec<Claim> = near.iter().map(|k| k.kept).collect();
    rules.judge_buffers(start, end, quantity, resource.capacity, &kept).map_err(BookingError::OutsideSchedule)
}

/// Whether a resource's bookings are judged here at all: with rules, or, without,
/// for the buffers that bookings of a single local unit kept from earlier rules (the
/// database keeps those apart). Any other resource without rules (upstream, or
/// capacity N) has nothing to judge: every range passes.
pub(super) fn applies(resource: &Resource) -> bool {
    resource.calendar.any() || (resource.capacity == 1 && resource.authority == Authority::Local)
}

/// Writes down the lapsed holds of a single unit that the database would still count
/// against a new booking over `[start, end)`: those whose kept ranges meet the range it
/// keeps with its buffers, and only those (the sweep takes the rest). Returns them, for
/// the hand-over.
pub(super) async fn expire_lapsed_near(
    tx: &impl GenericClient,
    resource: &Resource,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<crate::domain::Reservation>, DbError> {
    let (from, to) = resource.calendar.buffered(start, end);
    lapse::expire_lapsed_meeting_kept(tx, resource.id, from, to, now).await
}

/// The ranges kept by the active bookings that can meet the buffers of a new booking
/// inside `[from, to)`.
pub(super) async fn kept_around(
    c: &impl GenericClient,
    resource: &Resource,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Claim>, DbError> {
    Ok(bookings_around(c, resource, from, to, now).await?.iter().map(|k| k.kept).collect())
}

/// The active bookings whose kept ranges can reach into `[from, to)`, each with its
/// own range and the range it keeps.
async fn bookings_around(
    c: &impl GenericClient,
    resource: &Resource,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<Kept>, DbError> {
    let reach = resource.calendar.reach();
    reservations::kept_near(c, resource.id, from - reach, to + reach, now).await
}

/// The claims on `[from, to)` a read of the free starts judges by: `kept`, the ranges
/// the bookings keep (with their buffers), and `booked`, their own ranges.
pub(super) struct Around {
    pub kept: Vec<Claim>,
    pub booked: Vec<Claim>,
}

/// The claims around `[from, to)` as of `now`. On a capacity-N resource whose bookings
/// keep nothing there beyond their own ranges (no buffers now, none kept from before,
/// found by a partial index), the live load timeline answers, so that the read of a big
/// event costs the same whatever number of bookings it has; otherwise the bookings do.
pub(super) async fn claims_around(
    c: &impl GenericClient,
    resource: &Resource,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Around, DbError> {
    if resource.capacity > 1
        && resource.calendar.reach().is_zero()
        && !reservations::kept_wider_near(c, resource.id, from, to, now).await?
    {
        let pieces = reservations::live_load(c, resource.id, from, to, now).await?;
        return Ok(Around { kept: pieces.clone(), booked: pieces });
    }
    let bookings = bookings_around(c, resource, from, to, now).await?;
    Ok(Around { kept: bookings.iter().map(|k| k.kept).collect(), booked: bookings.iter().map(|k| k.claim).collect() })
}

/// Whether `entry` may be offered or booked now by its resource's rules: the
/// hand-over's test for one entry, for the upstream seat poller. On a single unit the
/// lapsed holds whose buffers could meet it are written down first, as the hand-over
/// does; they are returned for the caller to hand over.
pub(super) async fn entry_within_rules(
    tx: &impl GenericClient,
    resource: &Resource,
    entry: &WaitlistEntry,
    now: DateTime<Utc>,
) -> Result<(bool, Vec<Reservation>), DbError> {
    if !resource.calendar.any() {
        return Ok((true, Vec::new()));
    }
    let lapsed = if resource.capacity == 1 {
        expire_lapsed_near(tx, resource, entry.start, entry.end, now).await?
    } else {
        Vec::new()
    };
    let kept = kept_around(tx, resource, entry.start, entry.end, now).await?;
    Ok((offerable(resource, entry.start, entry.end, entry.quantity, &kept, now).is_ok(), lapsed))
}

/// Whether a waiting entry's range may be offered now: the rules that do not need the
/// load, then the buffers against `kept` (the ranges the bookings around it keep).
pub(super) fn offerable(
    resource: &Resource,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    quantity: i32,
    kept: &[Claim],
    now: DateTime<Utc>,
) -> Result<(), Rule> {
    let rules = &resource.calendar;
    rules.judge(start, end, now, Judge::Everything)?;
    rules.judge_buffers(start, end, quantity, resource.capacity, kept)
}
