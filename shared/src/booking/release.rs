//! Releasing a hold or cancelling a booking; the freed capacity goes to the waitlist
//! first, in the same transaction.

use super::BookingError;
use super::{hand_over, on_freed};
use crate::db::{DbError, GenericClient, intents, outbox, reservations, resources};
use crate::domain::policies::Deadline;
use crate::domain::{Authority, Principal, Reservation, Resource, Status};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A reservation its principal may change, locked with its resources.
pub(super) struct Owned {
    /// The reservation's resource (a booking of several: its first item's).
    pub resource: Resource,
    /// The other resources of a booking of several, by id; empty otherwise.
    pub others: Vec<Resource>,
    pub reservation: Reservation,
}

/// Locks a reservation its principal may change (its own, or any for an admin), and
/// first its resources (the lock order): every item's, by id, for a booking of several.
/// Others' reservations are not found.
pub(super) async fn lock_owned(tx: &impl GenericClient, who: &Principal, id: Uuid) -> Result<Owned, BookingError> {
    let ids = reservations::resources_of_booking(tx, id).await?;
    let mut locked = match ids.as_slice() {
        [] => return Err(BookingError::ReservationNotFound),
        [one] => resources::lock(tx, *one).await?.into_iter().collect(),
        several => resources::lock_many(tx, several).await?,
    };
    let reservation = match reservations::lock(tx, id).await? {
        Some(r) if r.owner == who.id || who.admin => r,
        _ => return Err(BookingError::ReservationNotFound),
    };
    let at = locked.iter().position(|r| r.id == reservation.resource_id).ok_or(BookingError::ReservationNotFound)?;
    let resource = locked.remove(at);
    Ok(Owned { resource, others: locked, reservation })
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
    let Owned { resource, others, reservation: r } = lock_owned(tx, who, id).await?;
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
    // The freed capacity goes first to the waitlist, in this same transaction: on each
    // resource of a booking of several.
    on_freed(tx, &resource, std::slice::from_ref(&r), now).await?;
    for other in &others {
        hand_over(tx, other, r.start, r.end, now).await?;
    }
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
