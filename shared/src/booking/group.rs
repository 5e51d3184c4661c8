//! Bookings of several items: resources, and "any one of" a pool, held over one range
//! all or nothing.
//!
//! One transaction: one statement locks every item's resource and every member of
//! every pool, in id order (the lock order's resource level, taken for several rows at
//! once, so that bookings of A+B and B+A wait for each other and never deadlock); the
//! lapsed holds over the range on all of them are written down and offered to their
//! waitlists first; then each item, in request order, is judged by its resource's
//! calendar rules and inserted if it fits (`reservation_insert_if_fits`, as the general
//! path's hold). A pool item tries its members in its strategy's order and takes the
//! first that fits. Any item that does not fit fails the whole booking: the caller
//! rolls the transaction back, so nothing is left behind. The booking's one event is
//! written last, with every item.
//!
//! The common case is decided in one statement first ([`hold_items_at_once`], in
//! autocommit, as the single hold is): items whose resources and pools' members are
//! plain (local, no calendar rules or limits) with no lapsed hold over the range. It
//! leaves everything else to [`reserve_items`], untouched.

use super::{BookingError, calendar, invalid, limits, on_freed};
use crate::db::hold::{self, Confirmation, HeldItems, HoldItem, NewHoldItems};
use crate::db::pools::{self, Members};
use crate::db::reservations::{self, ItemOf, NewReservation};
use crate::db::{DbError, GenericClient, lapse, resources};
use crate::domain::{
    Authority, EventKind, Judge, Limits, Metadata, PoolStrategy, Principal, Reservation, Resource, Rule, Source,
    Status, validate_range,
};
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;
use uuid::Uuid;

/// The most items one booking may have.
pub const MAX_ITEMS: usize = 10;

/// How far around the range `least_booked` counts a member's live bookings.
const LEAST_BOOKED_REACH: Duration = Duration::days(7);

/// What one item asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Resource(Uuid),
    /// Any one member of the pool.
    Pool(Uuid),
}

#[derive(Debug, Clone, Copy)]
pub struct ItemRequest {
    pub target: Target,
    pub quantity: i32,
}

pub struct GroupRequest {
    /// The principal the booking is for, when an admin books for someone else (the
    /// caller checks that only an admin names one); `None`: the caller.
    pub owner: Option<String>,
    pub items: Vec<ItemRequest>,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub confirmation: Confirmation,
    pub metadata: Metadata,
}

/// Why an item was not held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its resource's capacity is taken for some part of the range; for a pool, no
    /// member had room.
    Taken,
    /// Its resource's calendar rules refuse the range; for a pool, every member's did.
    OutsideSchedule(Rule),
}

/// An item that was not held, by its place in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusedItem {
    pub index: usize,
    pub target: Target,
    pub refusal: Refusal,
}

/// What [`hold_items_at_once`] came to.
// One value per request, matched at once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum GroupAttempt {
    /// Held (or booked) and committed.
    Held(Reservation),
    /// Nothing was done: [`reserve_items`] decides, in a transaction.
    GeneralPath,
}

/// A booking of several items in one statement outside any transaction (autocommit:
/// one round trip, the statement's own commit), for a request without an
/// `Idempotency-Key`: held and committed, refused with every item that did not fit
/// ([`BookingError::ItemsRefused`], nothing written), or left to [`reserve_items`].
pub async fn hold_items_at_once(
    c: &impl GenericClient,
    owner: &Principal,
    req: &GroupRequest,
    limits: Limits,
    now: DateTime<Utc>,
) -> Result<GroupAttempt, BookingError> {
    validate(req, limits, now)?;
    if req.owner.is_some() {
        // An admin acting for an owner: only the general path records who acted.
        return Ok(GroupAttempt::GeneralPath);
    }
    let lead = Uuid::now_v7();
    let new = NewHoldItems {
        ids: (0..req.items.len()).map(|i| if i == 0 { lead } else { Uuid::now_v7() }).collect(),
        items: req
            .items
            .iter()
            .map(|item| match item.target {
                Target::Resource(id) => HoldItem { target: id, pooled: false, quantity: item.quantity },
                Target::Pool(id) => HoldItem { target: id, pooled: true, quantity: item.quantity },
            })
            .collect(),
        event_id: Uuid::now_v7(),
        owner: &owner.id,
        start: req.start,
        end: req.end,
        confirmation: req.confirmation,
        metadata: &req.metadata,
        now,
        max_holds: limits::max_active_holds(owner, req.confirmation, limits),
    };
    match hold::hold_items(c, &new).await? {
        HeldItems::Reserved(r) => Ok(GroupAttempt::Held(r.as_of(now))),
        HeldItems::Unavailable(places) => Err(BookingError::ItemsRefused(
            places
                .into_iter()
                .map(|index| RefusedItem { index, target: req.items[index].target, refusal: Refusal::Taken })
                .collect(),
        )),
        HeldItems::GeneralPath => Ok(GroupAttempt::GeneralPath),
    }
}

fn validate(req: &GroupRequest, limits: Limits, now: DateTime<Utc>) -> Result<(), BookingError> {
    let errors = validate_range(req.start, req.end, now, limits);
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    Ok(())
}

/// Holds (or books) every item of `req`, or fails with the items that could not be:
/// [`BookingError::ItemsRefused`], with nothing of the booking left in the
/// transaction but the lapsed holds it wrote down and handed to their waitlists, which
/// the caller commits (as a lost single hold does). Run inside a transaction; commit on
/// `Ok` and on `ItemsRefused`; roll back on any other error. `who` acts, and is
/// recorded in `acted_by`; the booking is `req.owner`'s when an admin books for
/// someone, else theirs.
pub async fn reserve_items(
    tx: &impl GenericClient,
    who: &Principal,
    req: &GroupRequest,
    limits: Limits,
    now: DateTime<Utc>,
) -> Result<Reservation, BookingError> {
    validate(req, limits, now)?;
    let pool_ids: Vec<Uuid> = targets(req, |t| match t {
        Target::Pool(id) => Some(id),
        Target::Resource(_) => None,
    });
    let pools: BTreeMap<Uuid, Members> =
        pools::members_of(tx, &pool_ids).await?.into_iter().map(|m| (m.pool_id, m)).collect();
    if let Some(&missing) = pool_ids.iter().find(|id| !pools.contains_key(id)) {
        return Err(BookingError::PoolNotFound(missing));
    }
    let mut ids: Vec<Uuid> = targets(req, |t| match t {
        Target::Resource(id) => Some(id),
        Target::Pool(_) => None,
    });
    ids.extend(pools.values().flat_map(|m| m.resource_ids.iter().copied()));
    ids.sort();
    ids.dedup();
    // The look before the locks: an item whose resource (or every member of whose
    // pool) live claims take at this instant is refused without a lock or a write, as
    // the single hold's look refuses, so that a burst of losers never queues on the
    // locks of the winner's resources.
    let loads = hold::precheck_many(tx, &ids, req.start, req.end, now).await?;
    let taken: Vec<RefusedItem> = req
        .items
        .iter()
        .enumerate()
        .filter(|(_, item)| {
            let members = match &item.target {
                Target::Resource(id) => std::slice::from_ref(id),
                Target::Pool(id) => pools[id].resource_ids.as_slice(),
            };
            members.iter().all(|m| loads.get(m).is_some_and(|l| l.refuses(item.quantity)))
        })
        .map(|(index, item)| RefusedItem { index, target: item.target, refusal: Refusal::Taken })
        .collect();
    if !taken.is_empty() {
        return Err(BookingError::ItemsRefused(taken));
    }
    // The owner's lock first (the lock order), when the limit of active holds applies:
    // the booking is one more hold of the owner's.
    let owner = req.owner.as_deref().unwrap_or(&who.id);
    limits::hold_lock(tx, owner, who, req.confirmation, limits, now).await?;
    // The resources' lock, in a round trip of its own (the lock order): every statement
    // after it reads a snapshot that includes every committed competitor.
    let locked: BTreeMap<Uuid, Resource> =
        resources::lock_many(tx, &ids).await?.into_iter().map(|r| (r.id, r)).collect();
    for (index, item) in req.items.iter().enumerate() {
        if let Target::Resource(id) = item.target {
            let resource = locked.get(&id).ok_or(BookingError::ResourceNotFound)?;
            if resource.authority == Authority::Upstream {
                return Err(BookingError::UpstreamInGroup { index });
            }
            if resource.archived_at.is_some() {
                return Err(BookingError::ResourceArchived);
            }
            if item.quantity > resource.capacity {
                return Err(invalid(
                    &format!("items[{index}].quantity"),
                    format!("must not exceed the capacity of {}", resource.capacity),
                ));
            }
        }
    }
    // Capacity that lapsed goes to the waitlists first, not to whoever asks next.
    let lapsed = lapse::expire_lapsed_overlapping_any(tx, &ids, req.start, req.end, now).await?;
    for resource in locked.values() {
        let freed: Vec<Reservation> = lapsed.iter().filter(|r| r.resource_id == resource.id).cloned().collect();
        on_freed(tx, resource, &freed, now).await?;
    }
    let least_booked = if pools.values().any(|m| m.strategy == PoolStrategy::LeastBooked) {
        let members: Vec<Uuid> = pools.values().flat_map(|m| m.resource_ids.iter().copied()).collect();
        let (from, to) = (req.start - LEAST_BOOKED_REACH, req.end + LEAST_BOOKED_REACH);
        pools::live_bookings(tx, &members, from, to, now).await?.into_iter().collect()
    } else {
        BTreeMap::new()
    };

    let lead = Uuid::now_v7();
    // One expiry for the whole booking: the shortest hold time among its resources.
    let ttl = locked.values().map(|r| r.hold_ttl_seconds).min().unwrap_or(1);
    let status = match req.confirmation {
        Confirmation::Now => Status::Confirmed,
        Confirmation::Later => Status::Held,
    };
    // The items are inserted one by one: a refusal takes them back to here, keeping
    // the hand-overs above.
    tx.batch_execute("SAVEPOINT items").await.map_err(DbError::from)?;
    let mut refused = Vec::new();
    for (index, item) in req.items.iter().enumerate() {
        let (candidates, pool_id) = match item.target {
            Target::Resource(id) => (vec![id], None),
            Target::Pool(id) => (pick_order(&pools[&id], &least_booked), Some(id)),
        };
        let mut refusal = Refusal::Taken;
        let mut held = false;
        for id in candidates {
            let resource = &locked[&id];
            if resource.authority == Authority::Upstream
                || resource.archived_at.is_some()
                || item.quantity > resource.capacity
            {
                continue;
            }
            let candidate =
                calendar::Candidate { start: req.start, end: req.end, quantity: item.quantity, except: None };
            match calendar::judge(tx, resource, candidate, Judge::Everything, now).await {
                Ok(()) => {}
                Err(BookingError::OutsideSchedule(rule)) => {
                    // A pool's refusal is the rules' only when no member had them allow it.
                    if refusal == Refusal::Taken && !held {
                        refusal = Refusal::OutsideSchedule(rule);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            }
            match limits::judge(tx, resource, owner, who, req.start, None, now).await {
                Ok(()) => {}
                // A pool moves on to a member the principal may still book.
                Err(BookingError::LimitExceeded(_)) if pool_id.is_some() => continue,
                Err(e) => return Err(e),
            }
            // Every item keeps the lead's expiry: the booking lapses as one.
            let expires_at = (status == Status::Held).then(|| now + Duration::seconds(ttl.into()));
            let row = NewReservation {
                id: if index == 0 { lead } else { Uuid::now_v7() },
                resource_id: id,
                resource_capacity: resource.capacity,
                owner,
                start: req.start,
                end: req.end,
                quantity: item.quantity,
                status,
                expires_at,
                source: Source::Request,
                metadata: &req.metadata,
                acted_by: Some(&who.id),
                now,
                item: Some(ItemOf { booking_id: lead, item: index as i16, pool_id }),
            };
            let inserted = reservations::insert_if_fits(tx, &row).await?;
            on_freed(tx, resource, &inserted.expired, now).await?;
            if inserted.reservation.is_some() {
                held = true;
                break;
            }
            refusal = Refusal::Taken;
        }
        if !held {
            refused.push(RefusedItem { index, target: item.target, refusal });
        }
    }
    if !refused.is_empty() {
        tx.batch_execute("ROLLBACK TO SAVEPOINT items").await.map_err(DbError::from)?;
        return Err(BookingError::ItemsRefused(refused));
    }
    let kind = if status == Status::Held { EventKind::ReservationHeld } else { EventKind::ReservationConfirmed };
    reservations::booking_event(tx, lead, kind, now).await?;
    Ok(reservations::get(tx, lead).await?.ok_or(BookingError::ReservationNotFound)?.as_of(now))
}

/// The distinct ids of the items' targets that `pick` keeps, in request order.
fn targets(req: &GroupRequest, pick: impl Fn(Target) -> Option<Uuid>) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = Vec::new();
    for id in req.items.iter().filter_map(|i| pick(i.target)) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// A pool's members in the order its strategy tries them: the pool's order, or the
/// fewest live bookings near the range first, ties by id. The same state gives the
/// same order.
fn pick_order(pool: &Members, live: &BTreeMap<Uuid, i64>) -> Vec<Uuid> {
    let mut order = pool.resource_ids.clone();
    if pool.strategy == PoolStrategy::LeastBooked {
        order.sort_by_key(|id| (live.get(id).copied().unwrap_or(0), *id));
    }
    order
}

/// The starts of a group's slots read (`GET /v1/slots?together=true`).
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
pub struct SlotsTogether {
    pub slots: Vec<Span>,
}

/// One range at which the whole group is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Span {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// The ranges free for every target at once: each target is one resource's slots, or
/// a pool's members' (free when any member is), each judged under its own rules and
/// grid. In time order.
pub fn slots_together(targets: &[Vec<Vec<crate::domain::calendar::Slot>>]) -> SlotsTogether {
    use std::collections::BTreeSet;
    let free: Vec<BTreeSet<Span>> = targets
        .iter()
        .map(|members| {
            members.iter().flatten().map(|s| Span { start: s.start, end: s.end }).collect::<BTreeSet<Span>>()
        })
        .collect();
    let Some((first, rest)) = free.split_first() else { return SlotsTogether { slots: Vec::new() } };
    let slots = first.iter().filter(|span| rest.iter().all(|other| other.contains(span))).copied().collect();
    SlotsTogether { slots }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::calendar::Slot;
    use chrono::TimeZone;

    fn slot(hour: u32) -> Slot {
        let start = Utc.with_ymd_and_hms(2027, 3, 15, hour, 0, 0).unwrap();
        Slot { start, end: start + Duration::hours(1), remaining: 1 }
    }

    #[test]
    fn a_group_is_free_where_every_resource_and_some_member_of_every_pool_is() {
        let room = vec![vec![slot(9), slot(10), slot(11)]];
        let host = vec![vec![slot(10), slot(11), slot(12)]];
        let barbers = vec![vec![slot(9)], vec![slot(11)]];
        let together = slots_together(&[room, host, barbers]);
        assert_eq!(together.slots, vec![Span { start: slot(11).start, end: slot(11).end }]);
        assert_eq!(slots_together(&[]).slots, vec![]);
    }

    #[test]
    fn a_pool_picks_in_its_order_or_by_fewest_live_bookings_then_id() {
        let ids = [Uuid::from_u128(3), Uuid::from_u128(1), Uuid::from_u128(2)];
        let pool = |strategy| Members { pool_id: Uuid::nil(), strategy, resource_ids: ids.to_vec() };
        let live = BTreeMap::from([(ids[1], 2), (ids[2], 0)]);
        assert_eq!(pick_order(&pool(PoolStrategy::Ordered), &live), ids.to_vec());
        assert_eq!(pick_order(&pool(PoolStrategy::LeastBooked), &live), vec![ids[2], ids[0], ids[1]]);
    }
}
