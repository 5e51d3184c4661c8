//! Joining, reading and leaving a resource's waitlist.
//!
//! On an upstream resource an entry may ask to be booked by itself (`auto_book`): the
//! join is then the consent to the upstream write (an approval, as a confirm records),
//! and a wait intent waits for the seat (`intents::wait` serves it).

use super::handover::{hand_over, on_freed};
use super::hold::Approval;
use super::{BookingError, invalid};
use crate::db::reservations::Transition;
use crate::db::{GenericClient, intents, lapse, reservations, resources, waitlist};
use crate::domain::{
    Authority, IntentState, Judge, Limits, Principal, Status, WaitlistEntry, WaitlistStatus, validate_range,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub struct JoinRequest {
    pub resource_id: Uuid,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    /// Book the seat when the upstream shows it free, without an offer to confirm.
    pub auto_book: bool,
}

/// What joining the queue did.
#[derive(Debug)]
pub enum Joined {
    /// A new place at the end of the queue (or an offer at once).
    New(WaitlistEntry),
    /// The principal already waits (or holds an offer) for exactly this range: that
    /// entry, unchanged. One principal has one place per range, so asking again, by a
    /// retry without an idempotency key or a second tab, never queues twice.
    Existing(WaitlistEntry),
}

/// Joins the queue; if the capacity is free now (and nobody ahead wants it), the entry
/// is offered at once (on an upstream resource: once the upstream shows it free). Run
/// inside a transaction. `approval` is recorded for an `auto_book` entry.
pub async fn join_waitlist(
    tx: &impl GenericClient,
    who: &Principal,
    req: &JoinRequest,
    approval: Approval<'_>,
    limits: Limits,
    now: DateTime<Utc>,
) -> Result<Joined, BookingError> {
    let errors = validate_range(req.start, req.end, now, limits);
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    if req.quantity < 1 {
        return Err(invalid("quantity", "must be at least 1"));
    }
    // The lock in a round trip of its own, before any reservation row is touched (the
    // lock order, and a snapshot that follows the lock).
    let resource = resources::lock(tx, req.resource_id).await?.ok_or(BookingError::ResourceNotFound)?;
    if resource.archived_at.is_some() {
        return Err(BookingError::ResourceArchived);
    }
    if req.quantity > resource.capacity {
        return Err(invalid("quantity", format!("must not exceed the capacity of {}", resource.capacity)));
    }
    // Waiting for a range no rule allows would wait for ever; the buffers are judged
    // when capacity is handed over.
    resource.calendar.judge(req.start, req.end, now, Judge::Everything).map_err(BookingError::OutsideSchedule)?;
    if req.auto_book && resource.authority != Authority::Upstream {
        return Err(invalid("auto_book", "is only for resources whose authority is upstream"));
    }
    // Under the resource lock a concurrent join of the same range has committed or not
    // started, so this read sees it; the unique index stands behind it regardless.
    if let Some(existing) = existing_entry(tx, who, req, now).await? {
        return Ok(Joined::Existing(existing));
    }
    // Whoever was already waiting gets the lapsed capacity before this newcomer.
    let lapsed = lapse::expire_lapsed_in_way(tx, resource.id, (req.start, req.end), req.quantity, now).await?;
    on_freed(tx, &resource, &lapsed, now).await?;
    let inserted = waitlist::insert(
        tx,
        &waitlist::NewEntry {
            id: Uuid::now_v7(),
            resource_id: resource.id,
            owner: &who.id,
            start: req.start,
            end: req.end,
            quantity: req.quantity,
            auto_book: req.auto_book,
            now,
        },
    )
    .await?;
    let Some(entry) = inserted else {
        let existing = existing_entry(tx, who, req, now).await?;
        return existing.map(Joined::Existing).ok_or(BookingError::WaitlistEntryNotFound);
    };
    if req.auto_book {
        let seat = resource
            .upstream_ref
            .as_deref()
            .ok_or(crate::db::DbError::Corrupt("upstream resource without a ref".into()))?;
        intents::insert_wait_approval(tx, entry.id, approval.principal, approval.fingerprint, now).await?;
        intents::insert_wait(tx, Uuid::now_v7(), entry.id, seat, now).await?;
    }
    hand_over(tx, &resource, req.start, req.end, now).await?;
    Ok(Joined::New(waitlist::get(tx, entry.id, now).await?.ok_or(BookingError::WaitlistEntryNotFound)?))
}

/// The principal's waiting or offered entry for exactly the requested range.
async fn existing_entry(
    tx: &impl GenericClient,
    who: &Principal,
    req: &JoinRequest,
    now: DateTime<Utc>,
) -> Result<Option<WaitlistEntry>, BookingError> {
    match waitlist::active_for_range(tx, req.resource_id, &who.id, (req.start, req.end)).await? {
        Some(id) => Ok(waitlist::get(tx, id, now).await?),
        None => Ok(None),
    }
}

/// Reads an entry; others' entries are not found, except for admins.
pub async fn get_entry(
    c: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<WaitlistEntry, BookingError> {
    match waitlist::get(c, id, now).await? {
        Some(e) if e.owner == who.id || who.admin => Ok(e),
        _ => Err(BookingError::WaitlistEntryNotFound),
    }
}

/// Leaves the queue (or, for an admin, removes anyone's entry). An offered entry's hold
/// is released and passed on to the next waiter; an accepted entry stays accepted (its
/// booking is cancelled through the reservation). A wait ends at once, unless its write
/// is in flight: then the write settles first, and the wait ends after it (a booking it
/// won is cancelled through a cancel intent). Leaving again answers the entry as it is.
pub async fn leave_waitlist(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<WaitlistEntry, BookingError> {
    // The lock order: resource, then the offer's reservation, then the entry. Under the
    // resource lock the entry's offer cannot change (hand-overs take that lock), so
    // the unlocked read names the reservation to lock before the entry.
    let resource_id = waitlist::resource_of(tx, id).await?.ok_or(BookingError::WaitlistEntryNotFound)?;
    let resource = resources::lock(tx, resource_id).await?.ok_or(BookingError::WaitlistEntryNotFound)?;
    let (offer_id, auto_book) = match waitlist::get(tx, id, now).await? {
        Some(e) if e.owner == who.id || who.admin => (e.reservation_id, e.auto_book),
        _ => return Err(BookingError::WaitlistEntryNotFound),
    };
    if auto_book {
        // The lock order: the intent before the entry.
        match intents::lock_wait(tx, id).await? {
            Some((intent_id, IntentState::WaitingForSeat)) => {
                intents::end_wait(tx, intent_id, "the waiter left", now).await?;
                waitlist::set_status(tx, id, WaitlistStatus::Cancelled, now).await?;
            }
            Some((_, IntentState::Requested | IntentState::Reserving)) => {
                waitlist::request_leave(tx, id, now).await?;
            }
            _ => {}
        }
        return waitlist::get(tx, id, now).await?.ok_or(BookingError::WaitlistEntryNotFound);
    }
    let offer = match offer_id {
        Some(offer_id) => reservations::lock(tx, offer_id).await?,
        None => None,
    };
    let entry = waitlist::lock(tx, id).await?.ok_or(BookingError::WaitlistEntryNotFound)?;
    match (entry.status, offer) {
        (WaitlistStatus::Waiting, _) => {
            waitlist::set_status(tx, id, WaitlistStatus::Cancelled, now).await?;
        }
        (WaitlistStatus::Offered, Some(offer)) => {
            let offer_id = offer.id;
            if offer.status == Status::Held {
                let to = if offer.is_lapsed(now) { Status::Expired } else { Status::Released };
                let change = Transition { from: Status::Held, to };
                let offer = reservations::set_status(tx, offer_id, change, None, Some(&who.id), now)
                    .await?
                    .expect_whole(offer_id)?;
                on_freed(tx, &resource, std::slice::from_ref(&offer), now).await?;
            }
        }
        _ => {}
    }
    waitlist::get(tx, id, now).await?.ok_or(BookingError::WaitlistEntryNotFound)
}
