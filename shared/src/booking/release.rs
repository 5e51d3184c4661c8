//! Releasing a hold or cancelling a booking; the freed capacity goes to the waitlist
//! first, in the same transaction.

use super::BookingError;
use super::{hand_over, on_freed};
use crate::Clock;
use crate::db::reservations::{Transition, Written};
use crate::db::{DbError, GenericClient, intents, outbox, reservations, resources};
use crate::domain::policies::Deadline;
use crate::domain::{Authority, Principal, Reservation, Resource, Status};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A booking its principal may change, locked with its resources, and judged whole
/// at the time read after the locks.
pub(super) struct Owned {
    /// The reservation's resource (a booking of several: its first item's).
    pub resource: Resource,
    /// The other resources of a booking of several, by id; empty otherwise.
    pub others: Vec<Resource>,
    /// The lead row (a booking of one: the reservation), with the booking's items.
    pub reservation: Reservation,
    /// The booking's status judged from every one of its rows at `now`
    /// ([`whole_status`]): what the operation acts on, never the lead's alone.
    pub status: Status,
    /// The time read once every lock was granted: what the operation judges with.
    pub now: DateTime<Utc>,
}

/// Locks a booking its principal may change (its own, or any for an admin): first its
/// resources, every item's, by id, then every row of the booking, lead first (the lock
/// order), and only then reads the clock, so that no path that took one of these locks
/// before this one (another principal's hold, the sweep) judged the booking at a later
/// instant than this one does. Others' reservations are not found.
pub(super) async fn lock_owned(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    clock: &dyn Clock,
) -> Result<Owned, BookingError> {
    let ids = reservations::resources_of_booking(tx, id).await?;
    let mut locked = match ids.as_slice() {
        [] => return Err(BookingError::ReservationNotFound),
        [one] => resources::lock(tx, *one).await?.into_iter().collect(),
        several => resources::lock_many(tx, several).await?,
    };
    let (reservation, rows) = match reservations::lock_booking(tx, id).await? {
        Some(b) if b.lead.owner == who.id || who.admin => (b.lead, b.rows),
        _ => return Err(BookingError::ReservationNotFound),
    };
    let now = clock.now();
    let at = locked.iter().position(|r| r.id == reservation.resource_id).ok_or(BookingError::ReservationNotFound)?;
    let resource = locked.remove(at);
    let status = whole_status(&rows, now).ok_or(BookingError::ReservationNotFound)?;
    Ok(Owned { resource, others: locked, reservation, status, now })
}

/// A booking's status from all its rows at `now`: a hold lapsed by `now` is expired;
/// rows that agree give their status; rows that do not (an item written down on its
/// own) give the status of one that is no longer active, so that nothing acts on the
/// booking as if it were live. `None` for no rows.
pub(super) fn whole_status(rows: &[reservations::RowState], now: DateTime<Utc>) -> Option<Status> {
    let of = |row: &reservations::RowState| match (row.status, row.expires_at) {
        (Status::Held, Some(at)) if at <= now => Status::Expired,
        (status, _) => status,
    };
    let first = of(rows.first()?);
    if rows.iter().all(|row| of(row) == first) {
        return Some(first);
    }
    Some(rows.iter().map(of).find(|s| !s.is_active()).unwrap_or(Status::Expired))
}

/// Releases a hold or cancels a booking; deleting again answers the current state. An
/// owner's cancel is refused past the resource's `cancel_notice_minutes`; a hold's
/// release never is.
pub async fn release(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    clock: &dyn Clock,
) -> Result<Released, BookingError> {
    let Owned { resource, others, reservation: r, status, now } = lock_owned(tx, who, id, clock).await?;
    let change = match status {
        Status::Held => Transition { from: Status::Held, to: Status::Released },
        // Lapsed: written down whole, as the sweep would.
        Status::Expired if r.status == Status::Held => Transition { from: Status::Held, to: Status::Expired },
        Status::Confirmed => {
            // An owner cancels within the resource's notice; an admin at any time.
            if !who.admin {
                resource.policies.check(Deadline::Cancel, r.start, now).map_err(BookingError::PolicyWindowClosed)?;
            }
            Transition { from: Status::Confirmed, to: Status::Cancelled }
        }
        Status::Confirming => return Err(BookingError::InFlight),
        Status::Released | Status::Expired | Status::Cancelled | Status::Failed => {
            return Ok(Released { reservation: as_judged(r, status, now), upstream_cancel: false });
        }
    };
    let r = match reservations::set_status(tx, id, change, None, Some(&who.id), now).await? {
        Written::Whole(r) => r,
        // Some item was written down on its own: answered as the booking stands.
        Written::NotWhole => return Ok(Released { reservation: as_judged(r, status, now), upstream_cancel: false }),
    };
    // A booking written to the system of record is deleted there too, by the worker,
    // after this commits; locally the capacity is free at once.
    let upstream_cancel = change.to == Status::Cancelled
        && resource.authority == Authority::Upstream
        && request_cancel(tx, r.id, now).await?;
    // The freed capacity goes first to the waitlist, in this same transaction: on each
    // resource of a booking of several.
    on_freed(tx, &resource, std::slice::from_ref(&r), now).await?;
    for other in &others {
        hand_over(tx, other, r.start, r.end, now).await?;
    }
    Ok(Released { reservation: r.as_of(now), upstream_cancel })
}

/// The lead row as a client sees the booking: in the status judged from all its rows.
pub(super) fn as_judged(mut r: Reservation, status: Status, now: DateTime<Utc>) -> Reservation {
    r.status = status;
    r.as_of(now)
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
