//! Booking limits: at most so many live bookings and holds of one principal on a
//! resource per window (`domain::policies::BookingLimit`). Judged under the resource's
//! lock by every path that makes or moves a booking at its owner's request (the
//! general hold, bookings of several items, the reschedule), so that one principal's
//! concurrent requests are counted one after another and a burst cannot pass a limit.
//! The one-statement hold serves no resource with limits. What an admin does is not
//! limited, for themselves or for the owner they book for (the booking's `acted_by`
//! names them): the exemption follows who acts, not who owns. The waitlist's offers
//! are the service's, not limited either.
//!
//! Across the service, at most `MAX_ACTIVE_HOLDS_PER_PRINCIPAL` active holds (held, not
//! lapsed) per owner ([`Limits::max_active_holds`], 0: none): a booking of several is
//! one hold, a booking (confirmed at once) none, and a hold that is confirmed, released
//! or lapses frees its place. A principal's holds on different resources take different
//! resource locks, so they are counted under a lock of the owner's own, taken before
//! any resource lock ([`hold_lock`]; the one-statement holds take the same lock in
//! SQL). Admins are exempt here too.

use super::BookingError;
use crate::db::hold::Confirmation;
use crate::db::{DbError, GenericClient, limits};
use crate::domain::{HoldsReached, Limits, Principal, Resource, judge_limits, limits_reach};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The limit of active holds that a new booking of `actor`'s is judged by: 0 (none)
/// for a booking confirmed at once, which is no hold, and for an admin.
pub(super) fn max_active_holds(actor: &Principal, confirmation: Confirmation, limits: Limits) -> i32 {
    match confirmation {
        Confirmation::Later if !actor.admin => limits.max_active_holds,
        Confirmation::Later | Confirmation::Now => 0,
    }
}

/// Takes `owner`'s lock (the lock order's first level: before any resource lock) and
/// refuses a new hold made by `actor` with [`BookingError::HoldsExceeded`] when the
/// owner already has as many active holds as the limit allows. Takes no lock when no
/// limit applies. In the transaction that makes the hold; taken again in one that
/// holds it already, it is granted at once.
pub(super) async fn hold_lock(
    tx: &impl GenericClient,
    owner: &str,
    actor: &Principal,
    confirmation: Confirmation,
    limits: Limits,
    now: DateTime<Utc>,
) -> Result<(), BookingError> {
    let max = max_active_holds(actor, confirmation, limits);
    if max == 0 {
        return Ok(());
    }
    let held = limits::lock_principal(tx, owner, now).await?;
    if held.active >= i64::from(max) {
        return Err(BookingError::HoldsExceeded(HoldsReached { max, frees_at: held.frees_at }));
    }
    Ok(())
}

/// `owner`'s lock alone, for a path that makes several holds in one transaction (a
/// series) and judges each later with [`hold_lock`]: taken first, before the resource
/// locks that path takes for all of them at once.
pub(super) async fn lock_owner(
    tx: &impl GenericClient,
    owner: &str,
    actor: &Principal,
    confirmation: Confirmation,
    limits: Limits,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    if max_active_holds(actor, confirmation, limits) > 0 {
        limits::lock_principal(tx, owner, now).await?;
    }
    Ok(())
}

/// Refuses a booking of `owner`'s, made or moved by `actor`, starting at `start` on
/// `resource` (whose lock the caller holds) with [`BookingError::LimitExceeded`] when
/// it would break a limit; `except`: the booking being moved, which does not count
/// against itself.
pub(super) async fn judge(
    tx: &impl GenericClient,
    resource: &Resource,
    owner: &str,
    actor: &Principal,
    start: DateTime<Utc>,
    except: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<(), BookingError> {
    let (rules, zone) = (&resource.policies.limits, resource.calendar.time_zone);
    let Some(reach) = limits_reach(rules, start, start, zone).filter(|_| !actor.admin) else { return Ok(()) };
    let others = limits::counted(tx, resource.id, owner, reach, except, now).await?;
    judge_limits(rules, start, zone, &others).map_err(BookingError::LimitExceeded)
}
