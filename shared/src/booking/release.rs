//! Releasing a hold or cancelling a booking; the freed capacity goes to the waitlist
//! first, in the same transaction.

use super::BookingError;
use super::on_freed;
use crate::db::{DbError, GenericClient, intents, outbox, reservations, resources};
use crate::domain::policies::Deadline;
use crate::domain::{Authority, Principal, Reservation, Resource, Status};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Locks a reservation its principal may change (its own, or any for an admin), and
/// its resource first (the lock order). Others' reservations are not found.
pub(super) async fn lock_owned(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
) -> Result<(Resource, Reservation), BookingError> {
    let resource_id = reservations::resource_of(tx, id).await?.ok_or(BookingError::ReservationNotFound)?;
    let resource = resources::lock(tx, resource_id).await?.ok_or(BookingError::ReservationNotFound)?;
    match reservations::lock(tx, id).await? {
        Some(r) if r.owner == who.id || who.admin => Ok((resource, r)),
        _ => Err(BookingError::ReservationNotFound),
    }
}

/// Releases a hold or cancels a booking; deleting again answers the current state. An
/// owner's cancel is refused past the resource's `cancel_notice_minutes`; a hold's
/// release never is.
pub async fn release(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<Released, BookingError> {
    let (resource, r) = lock_owned(tx, who, id).await?;
    let next = match r.status {
        Status::Held if r.is_lapsed(now) => Status::Expired,
        Status::Held => Status::Released,
        Status::Confirmed => {
            // An owner cancels within the resource's notice; an admin at any time.
            if !who.admin {
                resource.policies.check(Deadline::Cancel, r.start, now).map_err(BookingError::PolicyWindowClosed)?;
            }
            Status::Cancelled
        }
        Status::Confirming => return Err(BookingError::InFlight),
        Status::Released | Status::Expired | Status::Cancelled | Status::Failed => {
            return Ok(Released { reservation: r.as_of(now), upstream_cancel: false });
        }
    };
    let r = reservations::set_status(tx, id, next, None, Some(&who.id), now).await?;
    // A booking written to the system of record is deleted there too, by the worker,
    // after this commits; locally the capacity is free at once.
    let upstream_cancel =
        next == Status::Cancelled && resource.authority == Authority::Upstream && request_cancel(tx, r.id, now).await?;
    // The freed capacity goes first to the waitlist, in this same transaction.
    on_freed(tx, &resource, std::slice::from_ref(&r), now).await?;
    Ok(Released { reservation: r.as_of(now), upstream_cancel })
}

/// A release or cancel, and whether it queued an upstream cancel (whose message the
/// caller publishes after commit).
#[derive(Debug)]
pub struct Released {
    pub reservation: Reservation,
    pub upstream_cancel: bool,
}

/// Records the upstream cancel of a confirmed booking in the caller's transaction: the
/// cancel intent and its message. `false` when nothing was written upstream for it.
pub(crate) async fn request_cancel(
    tx: &impl GenericClient,
    reservation_id: Uuid,
    now: DateTime<Utc>,
) -> Result<bool, DbError> {
    let Some(id) = intents::insert_cancel(tx, Uuid::now_v7(), reservation_id, now).await? else {
        return Ok(false);
    };
    outbox::insert_intent_message(tx, id, reservation_id, now).await?;
    Ok(true)
}
