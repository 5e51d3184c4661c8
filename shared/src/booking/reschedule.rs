//! Changing a booking: moving it (new `start`, `end` or `quantity`) or relabelling it
//! (new `metadata`), in one transaction under the resource lock, as a reserve would
//! be judged, with the reservation left out of its own conflict check. A hold keeps
//! its expiry and a booking stays confirmed; capacity the move frees goes to the
//! waitlist in the same transaction. An owner's move is held to the resource's
//! `reschedule_notice_minutes` and `max_reschedules`; an admin's is not.

use super::group::{Refusal, RefusedItem, Target};
use super::release::{Owned, lock_owned};
use super::{BookingError, calendar, hand_over, invalid, limits, on_freed};
use crate::Clock;
use crate::db::{GenericClient, reservations};
use crate::domain::policies::Deadline;
use crate::domain::{
    Authority, EventKind, Judge, Limits, Metadata, Principal, Reservation, Resource, Status, validate_range,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// What a `PATCH` asks to change; `None` keeps the current value.
#[derive(Debug, Default)]
pub struct Change {
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
    pub quantity: Option<i32>,
    pub metadata: Option<Metadata>,
}

/// What a reschedule came to. A conflict is an outcome, not an error, for the reason
/// given at [`super::Reserved`]: the transaction may have written down lapsed holds
/// and handed them over on the way, and that must commit.
// One value per request, moved once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Rescheduled {
    Rescheduled(Reservation),
    /// The new range or quantity does not fit; the reservation is unchanged.
    Unavailable,
}

/// Applies `change` to a reservation its principal may change (its owner's, or any
/// for an admin). Run inside a transaction; commit on `Ok`, whichever the outcome.
pub async fn reschedule(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    change: Change,
    limits: Limits,
    clock: &dyn Clock,
) -> Result<Rescheduled, BookingError> {
    let Owned { resource, others, reservation: r, status, now } = lock_owned(tx, who, id, clock).await?;
    let several = r.items.len() > 1 || r.items.iter().any(|i| i.pool_id.is_some());
    match status {
        Status::Held | Status::Confirmed => {}
        Status::Confirming => return Err(BookingError::InFlight),
        _ => return Err(BookingError::NotHeld(status)),
    }
    let (start, end) = (change.start.unwrap_or(r.start), change.end.unwrap_or(r.end));
    let quantity = change.quantity.unwrap_or(r.quantity);
    let moves = (start, end, quantity) != (r.start, r.end, r.quantity);
    if moves {
        if resource.authority == Authority::Upstream {
            // The system of record has no move: it would be a cancel and a new write,
            // which could lose the seat. Refused rather than half done.
            return Err(BookingError::RescheduleNotSupported);
        }
        if resource.archived_at.is_some() {
            return Err(BookingError::ResourceArchived);
        }
        if !who.admin {
            // The owner's deadline and count of moves; an admin is held to neither.
            resource.policies.check(Deadline::Reschedule, r.start, now).map_err(BookingError::PolicyWindowClosed)?;
            if let Some(max) = resource.policies.max_reschedules
                && reservations::reschedules(tx, id).await? >= max
            {
                return Err(BookingError::RescheduleLimit { max });
            }
        }
        let mut errors = validate_range(start, end, now, limits);
        if change.start.is_none() {
            // A booking under way keeps its start; only a new start must lie ahead.
            errors.retain(|e| e.field != "start");
        }
        if quantity < 1 {
            errors.push(crate::domain::FieldError::new("quantity", "must be at least 1"));
        }
        if !errors.is_empty() {
            return Err(BookingError::Validation(errors));
        }
        if several && quantity != r.quantity {
            return Err(invalid("quantity", "a booking of several items moves its range only"));
        }
        if quantity > resource.capacity {
            return Err(invalid("quantity", format!("must not exceed the capacity of {}", resource.capacity)));
        }
        // Judged as a new booking would be, under the lock lock_owned took; a booking
        // that keeps its start is not judged again on notice, advance and grid.
        let judge = if change.start.is_none() { Judge::KeepsStart } else { Judge::Everything };
        if several {
            let to = Moved { start, end, metadata: change.metadata.as_ref().unwrap_or(&r.metadata), judge };
            return move_items(tx, who, &r, resource, others, to, now).await;
        }
        let candidate = calendar::Candidate { start, end, quantity, except: Some(id) };
        calendar::judge(tx, &resource, candidate, judge, now).await?;
        // The booking moved does not count against itself.
        limits::judge(tx, &resource, &r.owner, who, start, Some(id), now).await?;
    }
    let metadata = change.metadata.unwrap_or_else(|| r.metadata.clone());
    if several {
        // Only the metadata changes: on every item, as one booking.
        let to = Moved { start, end, metadata: &metadata, judge: Judge::KeepsStart };
        return move_items(tx, who, &r, resource, others, to, now).await;
    }
    let moved = reservations::move_if_fits(
        tx,
        &reservations::Move {
            id,
            resource_id: resource.id,
            resource_capacity: resource.capacity,
            start,
            end,
            quantity,
            metadata: &metadata,
            acted_by: &who.id,
            event: if moves { EventKind::ReservationRescheduled } else { EventKind::ReservationUpdated },
            now,
        },
    )
    .await?;
    on_freed(tx, &resource, &moved.expired, now).await?;
    let Some(mut updated) = moved.reservation else { return Ok(Rescheduled::Unavailable) };
    // The move's row comes from the function's table, without the series it keeps.
    updated.series_id = r.series_id;
    if moves {
        // Whatever of the old range the move gave up goes to the waitlist now.
        hand_over(tx, &resource, r.start, r.end, now).await?;
    }
    if resource.authority == Authority::Upstream {
        // With its intent, as every read of an upstream booking shows it.
        updated = reservations::get(tx, id).await?.ok_or(BookingError::ReservationNotFound)?;
    }
    Ok(Rescheduled::Rescheduled(updated.as_of(now)))
}

/// Where a booking of several moves, with what metadata, and how its new range is
/// judged.
struct Moved<'a> {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    metadata: &'a Metadata,
    judge: Judge,
}

/// Moves every item of a booking of several to the new range (each keeps its resource,
/// a pool's item too), all or nothing: an item that does not fit there fails the whole
/// move with [`BookingError::ItemsRefused`], and the caller rolls back. Every resource
/// is locked (`lock_owned`). The lead's move records the booking's one event.
async fn move_items(
    tx: &impl GenericClient,
    who: &Principal,
    r: &Reservation,
    resource: Resource,
    others: Vec<Resource>,
    to: Moved<'_>,
    now: DateTime<Utc>,
) -> Result<Rescheduled, BookingError> {
    let moves = (to.start, to.end) != (r.start, r.end);
    let locked: Vec<Resource> = std::iter::once(resource).chain(others).collect();
    let mut refused = Vec::new();
    for (index, (item, pool_id)) in reservations::items_of_booking(tx, r.id).await?.into_iter().enumerate() {
        let resource = locked.iter().find(|l| l.id == item.resource_id).ok_or(BookingError::ReservationNotFound)?;
        let target = pool_id.map_or(Target::Resource(item.resource_id), Target::Pool);
        if moves {
            let candidate =
                calendar::Candidate { start: to.start, end: to.end, quantity: item.quantity, except: Some(item.id) };
            match calendar::judge(tx, resource, candidate, to.judge, now).await {
                Ok(()) => {}
                Err(BookingError::OutsideSchedule(rule)) => {
                    refused.push(RefusedItem { index, target, refusal: Refusal::OutsideSchedule(rule) });
                    continue;
                }
                Err(e) => return Err(e),
            }
            // The booking moved does not count against itself.
            limits::judge(tx, resource, &r.owner, who, to.start, Some(r.id), now).await?;
        }
        let moved = reservations::move_if_fits(
            tx,
            &reservations::Move {
                id: item.id,
                resource_id: resource.id,
                resource_capacity: resource.capacity,
                start: to.start,
                end: to.end,
                quantity: item.quantity,
                metadata: to.metadata,
                acted_by: &who.id,
                event: if moves { EventKind::ReservationRescheduled } else { EventKind::ReservationUpdated },
                now,
            },
        )
        .await?;
        on_freed(tx, resource, &moved.expired, now).await?;
        if moved.reservation.is_none() {
            refused.push(RefusedItem { index, target, refusal: Refusal::Taken });
        }
    }
    if !refused.is_empty() {
        return Err(BookingError::ItemsRefused(refused));
    }
    if moves {
        // Whatever of the old range the move gave up goes to each waitlist now.
        for resource in &locked {
            hand_over(tx, resource, r.start, r.end, now).await?;
        }
    }
    let updated = reservations::get(tx, r.id).await?.ok_or(BookingError::ReservationNotFound)?;
    Ok(Rescheduled::Rescheduled(updated.as_of(now)))
}
