//! The booking operations. Each takes a client or a transaction and the current time;
//! none opens or commits a transaction itself, so a caller can compose several (and an
//! idempotency record) into one.
//!
//! # The lock order
//!
//! One order for the whole codebase: **the resource row, then its intents, then
//! reservation rows, then waitlist entries.** A path may skip a level (a confirm locks
//! only its reservation, then settles its entry) but never goes back up one. Every
//! path that changes a resource's load takes the resource lock first, so those paths
//! serialize per resource and never deadlock; paths on different resources never
//! contend. Each lock is taken in a round trip of its own, never pipelined with the
//! statements after it (`try_join!` on one transaction): on a fresh connection
//! pipelined statements were seen to run out of order, against this order.

mod handover;
pub mod sweep;
mod waitlist;

pub use handover::{hand_over, on_freed};
pub use waitlist::{JoinRequest, get_entry, join_waitlist, leave_waitlist};

use crate::db::{self, DbError, GenericClient, intents, outbox, reservations, resources};
use crate::domain::{
    Authority, Claim, FieldError, FreePiece, Limits, Principal, Reservation, Resource, Source, Status, WaitlistStatus,
    free_pieces, validate_range,
};
use crate::upstream::Block;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use uuid::Uuid;

/// Expected outcomes that are not successes, and the one unexpected kind (`Db`).
#[derive(Debug, thiserror::Error)]
pub enum BookingError {
    #[error("invalid request")]
    Validation(Vec<FieldError>),
    #[error("resource not found")]
    ResourceNotFound,
    #[error("reservation not found")]
    ReservationNotFound,
    #[error("waitlist entry not found")]
    WaitlistEntryNotFound,
    #[error("the requested capacity is taken")]
    SlotUnavailable,
    #[error("the reservation is not held")]
    NotHeld(Status),
    #[error("the reservation is being confirmed upstream")]
    InFlight,
    #[error("the system of record is unavailable")]
    UpstreamUnavailable { retry_after_seconds: u64 },
    #[error(transparent)]
    Db(#[from] DbError),
}

fn invalid(field: &str, message: impl Into<String>) -> BookingError {
    BookingError::Validation(vec![FieldError::new(field, message)])
}

pub struct NewResource {
    pub name: String,
    pub capacity: i32,
    pub authority: Authority,
    pub upstream_ref: Option<String>,
    pub hold_ttl_seconds: Option<i32>,
    pub offer_ttl_seconds: Option<i32>,
}

pub struct ResourceDefaults {
    pub hold_ttl_seconds: i32,
    pub offer_ttl_seconds: i32,
}

pub async fn create_resource(
    c: &impl GenericClient,
    by: &Principal,
    new: NewResource,
    defaults: ResourceDefaults,
    now: DateTime<Utc>,
) -> Result<Resource, BookingError> {
    let mut errors = Vec::new();
    let name_len = new.name.chars().count();
    if !(1..=200).contains(&name_len) {
        errors.push(FieldError::new("name", "must be 1 to 200 characters"));
    }
    // PostgreSQL text cannot hold NUL, and no name needs control characters.
    if new.name.chars().any(char::is_control) {
        errors.push(FieldError::new("name", "must not contain control characters"));
    }
    if new.upstream_ref.as_deref().is_some_and(|r| r.chars().any(char::is_control)) {
        errors.push(FieldError::new("upstream_ref", "must not contain control characters"));
    }
    if !(1..=100_000).contains(&new.capacity) {
        errors.push(FieldError::new("capacity", "must be between 1 and 100000"));
    }
    match (new.authority, new.upstream_ref.as_deref()) {
        (Authority::Upstream, None | Some("")) => {
            errors.push(FieldError::new("upstream_ref", "is required when authority is upstream"))
        }
        (Authority::Upstream, Some(r)) if r.len() > 200 => {
            errors.push(FieldError::new("upstream_ref", "must be at most 200 characters"))
        }
        (Authority::Local, Some(_)) => {
            errors.push(FieldError::new("upstream_ref", "must be null when authority is local"))
        }
        _ => {}
    }
    if new.authority == Authority::Upstream && new.capacity != 1 {
        errors.push(FieldError::new("capacity", "must be 1 when authority is upstream"));
    }
    for (field, ttl) in [("hold_ttl_seconds", new.hold_ttl_seconds), ("offer_ttl_seconds", new.offer_ttl_seconds)] {
        if ttl.is_some_and(|t| t < 1) {
            errors.push(FieldError::new(field, "must be at least 1"));
        }
    }
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    Ok(resources::insert(
        c,
        &resources::NewResource {
            id: Uuid::now_v7(),
            name: &new.name,
            capacity: new.capacity,
            authority: new.authority,
            upstream_ref: new.upstream_ref.as_deref(),
            hold_ttl_seconds: new.hold_ttl_seconds.unwrap_or(defaults.hold_ttl_seconds),
            offer_ttl_seconds: new.offer_ttl_seconds.unwrap_or(defaults.offer_ttl_seconds),
            created_by: &by.id,
            created_at: now,
        },
    )
    .await?)
}

pub async fn get_resource(c: &impl GenericClient, id: Uuid) -> Result<Resource, BookingError> {
    resources::get(c, id).await?.ok_or(BookingError::ResourceNotFound)
}

/// What the user approved, for the audit row an upstream confirm writes: who asked,
/// and the fingerprint of the request that asked.
#[derive(Debug, Clone, Copy)]
pub struct Approval<'a> {
    pub principal: &'a str,
    pub fingerprint: &'a [u8],
}

/// Records an upstream confirmation in the caller's transaction: the approval, the
/// intent (`REQUESTED`) and the intent message in the outbox.
async fn request_intent(
    tx: &impl GenericClient,
    r: &Reservation,
    resource: &Resource,
    approval: Approval<'_>,
    now: DateTime<Utc>,
) -> Result<serde_json::Value, DbError> {
    let id = Uuid::now_v7();
    let seat = resource.upstream_ref.as_deref().ok_or(DbError::Corrupt("upstream resource without a ref".into()))?;
    tokio::try_join!(
        intents::insert_approval(tx, r.id, approval.principal, approval.fingerprint, now),
        intents::insert(tx, id, r.id, seat, now),
        outbox::insert_intent_message(tx, id, r.id, now),
    )?;
    Ok(reservations::intent_json(id, "REQUESTED", 0, now))
}

/// Refuses fast when the system of record cannot be reached (breaker open): the work
/// would only queue up behind it.
async fn upstream_reachable(tx: &impl GenericClient, now: DateTime<Utc>) -> Result<(), BookingError> {
    match crate::upstream::breaker::open_now(tx, now).await? {
        Some(retry_after_seconds) => Err(BookingError::UpstreamUnavailable { retry_after_seconds }),
        None => Ok(()),
    }
}

pub struct ReserveRequest {
    pub resource_id: Uuid,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub confirm: bool,
}

/// A reserve that ran to the end. A lost race is an outcome, not an error: the
/// transaction still commits, because it may have expired lapsed holds and handed them
/// to the waitlist on the way, and that work must not roll back with the refusal.
#[derive(Debug)]
pub enum Reserved {
    Reserved(Reservation),
    Unavailable,
}

/// Holds (or, with `confirm`, books) capacity. Must run inside a transaction: the
/// resource lock it takes is what makes the load check see every committed competitor.
/// Commit the transaction on `Ok`, whichever the outcome.
pub async fn reserve(
    tx: &impl GenericClient,
    owner: &Principal,
    req: &ReserveRequest,
    approval: Approval<'_>,
    limits: Limits,
    now: DateTime<Utc>,
) -> Result<Reserved, BookingError> {
    let errors = validate_range(req.start, req.end, now, limits);
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    if req.quantity < 1 {
        return Err(invalid("quantity", "must be at least 1"));
    }
    // The common case, a local resource with no lapsed hold in the way, in one round
    // trip; the rest (upstream resources, lapsed capacity for the waitlist first) on
    // the general path below, in the same transaction.
    let hold = reservations::NewHold {
        id: Uuid::now_v7(),
        resource_id: req.resource_id,
        owner: &owner.id,
        start: req.start,
        end: req.end,
        quantity: req.quantity,
        confirm: req.confirm,
        now,
    };
    match reservations::hold(tx, &hold).await? {
        (reservations::Hold::General, _) => {}
        (reservations::Hold::NotFound, _) => return Err(BookingError::ResourceNotFound),
        (reservations::Hold::TooMany { capacity }, _) => {
            return Err(invalid("quantity", format!("must not exceed the capacity of {capacity}")));
        }
        (outcome, expired) => {
            if !expired.is_empty() {
                // A hold that lapsed between the look and the lock, written down by the
                // insert: its capacity goes on to the waitlist with what is left.
                let resource = get_resource(tx, req.resource_id).await?;
                on_freed(tx, &resource, &expired, now).await?;
            }
            return Ok(match outcome {
                reservations::Hold::Reserved(r) => Reserved::Reserved(r),
                _ => Reserved::Unavailable,
            });
        }
    }
    let pre = reservations::precheck(tx, req.resource_id, req.start, req.end, now)
        .await?
        .ok_or(BookingError::ResourceNotFound)?;
    let resource = pre.resource;
    if req.quantity > resource.capacity {
        return Err(invalid("quantity", format!("must not exceed the capacity of {}", resource.capacity)));
    }
    let upstream = resource.authority == Authority::Upstream;
    if upstream && req.confirm {
        upstream_reachable(tx, now).await?;
    }
    if pre.peak + i64::from(req.quantity) > i64::from(resource.capacity) && !pre.lapsed {
        // Taken at this instant by live claims: refused without a lock or a write.
        return Ok(Reserved::Unavailable);
    }
    // The lock first, in a round trip of its own: every statement after it reads a
    // snapshot taken after the lock was granted, which includes every committed
    // competitor. (Pipelined with what follows, a statement was seen to run before the
    // lock on a fresh connection: a snapshot from before the wait, or reservation rows
    // locked before the resource, against the lock order.)
    resources::lock(tx, resource.id).await?;
    if pre.lapsed {
        // Capacity that lapsed goes to the waitlist first, not to whoever asks next.
        let lapsed = reservations::expire_lapsed_overlapping(tx, resource.id, req.start, req.end, now).await?;
        on_freed(tx, &resource, &lapsed, now).await?;
    }
    let (status, expires_at) = match (req.confirm, upstream) {
        // The system of record decides: the slot is held locally as CONFIRMING (which
        // is what refuses every competitor here, at once) until the worker settles it.
        (true, true) => (Status::Confirming, None),
        (true, false) => (Status::Confirmed, None),
        (false, _) => (Status::Held, Some(now + Duration::seconds(resource.hold_ttl_seconds.into()))),
    };
    let new = reservations::NewReservation {
        id: Uuid::now_v7(),
        resource_id: resource.id,
        resource_capacity: resource.capacity,
        owner: &owner.id,
        start: req.start,
        end: req.end,
        quantity: req.quantity,
        status,
        expires_at,
        source: Source::Request,
        now,
    };
    let inserted = reservations::insert_if_fits(tx, &new).await;
    let inserted = match inserted {
        Ok(inserted) => inserted,
        // The exclusion constraint fired: some path skipped the lock. Still a loss, and
        // the transaction is aborted, so this one is an error the caller rolls back.
        Err(e) if e.sql_state() == Some(&tokio_postgres::error::SqlState::EXCLUSION_VIOLATION) => {
            tracing::warn!("exclusion constraint refused an overlapping reservation");
            return Err(BookingError::SlotUnavailable);
        }
        Err(e) => return Err(e.into()),
    };
    // A hold that lapsed between the precheck and the lock was written down by the
    // insert itself; its capacity goes on to the waitlist with what is left.
    on_freed(tx, &resource, &inserted.expired, now).await?;
    match inserted.reservation {
        Some(mut r) => {
            if r.status == Status::Confirming {
                r.intent = Some(request_intent(tx, &r, &resource, approval, now).await?);
            }
            Ok(Reserved::Reserved(r))
        }
        None => {
            // Lost under the lock. The transaction still commits (it may have handed
            // lapsed capacity over), but a crash that lost this commit would lose only
            // a refusal, or work the next request or sweep redoes: no need to wait for
            // the disk, and the queue of losers behind the lock moves faster.
            tx.execute("SET LOCAL synchronous_commit TO OFF", &[]).await.map_err(DbError::from)?;
            Ok(Reserved::Unavailable)
        }
    }
}

/// Reads a reservation as of `now`. Others' reservations are not found, except for admins.
pub async fn get_reservation(
    c: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<Reservation, BookingError> {
    match reservations::get(c, id).await? {
        Some(r) if r.owner == who.id || who.admin => Ok(r.as_of(now)),
        _ => Err(BookingError::ReservationNotFound),
    }
}

/// Locks an owned reservation, and its resource first (the lock order), for a change.
async fn lock_owned(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
) -> Result<(Resource, Reservation), BookingError> {
    let resource_id = reservations::resource_of(tx, id).await?.ok_or(BookingError::ReservationNotFound)?;
    let resource = resources::lock(tx, resource_id).await?.ok_or(BookingError::ReservationNotFound)?;
    match reservations::lock(tx, id).await? {
        Some(r) if r.owner == who.id => Ok((resource, r)),
        _ => Err(BookingError::ReservationNotFound),
    }
}

/// What a confirm did: `changed` is false when it found the reservation already
/// confirmed (or confirming) and answered it as it is.
pub struct Confirmed {
    pub reservation: Reservation,
    pub changed: bool,
}

pub async fn confirm(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    approval: Approval<'_>,
    now: DateTime<Utc>,
) -> Result<Confirmed, BookingError> {
    // Confirming does not change the load, so the reservation's own row lock is enough
    // and confirms never queue behind reserves of the same resource.
    let r = match reservations::lock(tx, id).await? {
        Some(r) if r.owner == who.id => r,
        _ => return Err(BookingError::ReservationNotFound),
    };
    match r.status {
        Status::Confirmed | Status::Confirming => {
            // As it is, with its intent: no second booking, no second upstream write.
            let r = reservations::get(tx, id).await?.ok_or(BookingError::ReservationNotFound)?;
            Ok(Confirmed { reservation: r.as_of(now), changed: false })
        }
        Status::Held if !r.is_lapsed(now) => {
            let resource = get_resource(tx, r.resource_id).await?;
            if resource.authority == Authority::Upstream {
                upstream_reachable(tx, now).await?;
                let mut r = reservations::set_status(tx, id, Status::Confirming, None, now).await?;
                r.intent = Some(request_intent(tx, &r, &resource, approval, now).await?);
                return Ok(Confirmed { reservation: r.as_of(now), changed: true });
            }
            let r = reservations::set_status(tx, id, Status::Confirmed, None, now).await?;
            if r.source == Source::WaitlistOffer {
                // Confirming an offer accepts it; the reservation is the owner's already.
                db::waitlist::settle_offers(tx, &[r.id], WaitlistStatus::Accepted, now).await?;
            }
            Ok(Confirmed { reservation: r.as_of(now), changed: true })
        }
        _ => Err(BookingError::NotHeld(r.as_of(now).status)),
    }
}

/// Releases a hold or cancels a booking; deleting again answers the current state.
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
        Status::Confirmed => Status::Cancelled,
        Status::Confirming => return Err(BookingError::InFlight),
        Status::Released | Status::Expired | Status::Cancelled | Status::Failed => {
            return Ok(Released { reservation: r.as_of(now), upstream_cancel: false });
        }
    };
    let r = reservations::set_status(tx, id, next, None, now).await?;
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
async fn request_cancel(tx: &impl GenericClient, reservation_id: Uuid, now: DateTime<Utc>) -> Result<bool, DbError> {
    let Some(id) = intents::insert_cancel(tx, Uuid::now_v7(), reservation_id, now).await? else {
        return Ok(false);
    };
    outbox::insert_intent_message(tx, id, reservation_id, now).await?;
    Ok(true)
}

#[derive(Debug, Serialize)]
pub struct Taken {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub status: TakenStatus,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A local reservation's status, or `EXTERNAL` for the upstream's own claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakenStatus {
    Local(Status),
    External,
}

impl Serialize for TakenStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TakenStatus::Local(status) => status.serialize(s),
            TakenStatus::External => s.serialize_str("EXTERNAL"),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Availability {
    pub resource_id: Uuid,
    pub capacity: i32,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub taken: Vec<Taken>,
    pub free: Vec<FreePiece>,
}

/// Checks an availability window before anything is read.
pub fn check_window(from: DateTime<Utc>, to: DateTime<Utc>, max_window: Duration) -> Result<(), BookingError> {
    if from >= to {
        return Err(invalid("to", "must be after from"));
    }
    if to - from > max_window {
        return Err(invalid("to", format!("the window may span at most {} days", max_window.num_days())));
    }
    Ok(())
}

/// What is taken and what is free in `[from, to)`. For an upstream resource, `external`
/// is the upstream's view (through the cache); without it the answer is refused, as no
/// view of the system of record could be had.
pub async fn availability(
    c: &impl GenericClient,
    resource: &Resource,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    external: Option<&[Block]>,
    now: DateTime<Utc>,
) -> Result<Availability, BookingError> {
    let external = match (resource.authority, external) {
        (Authority::Upstream, None) => return Err(BookingError::UpstreamUnavailable { retry_after_seconds: 5 }),
        (_, e) => e.unwrap_or(&[]),
    };
    let active = reservations::active_in_window(c, resource.id, from, to, now).await?;
    let mut taken: Vec<Taken> = active
        .iter()
        .map(|r| Taken {
            start: r.start,
            end: r.end,
            quantity: r.quantity,
            status: TakenStatus::Local(r.status),
            expires_at: if r.status == Status::Held { r.expires_at } else { None },
        })
        .collect();
    // Our own confirmed bookings are in the upstream's view too: list each claim once.
    let ours = |b: &Block| active.iter().any(|r| r.start == b.start && r.end == b.end && r.status != Status::Held);
    for b in external.iter().filter(|b| b.start < to && b.end > from && !ours(b)) {
        taken.push(Taken { start: b.start, end: b.end, quantity: 1, status: TakenStatus::External, expires_at: None });
    }
    taken.sort_by_key(|t| (t.start, t.end));
    let claims: Vec<Claim> =
        taken.iter().map(|t| Claim { start: t.start, end: t.end, quantity: t.quantity.into() }).collect();
    Ok(Availability {
        resource_id: resource.id,
        capacity: resource.capacity,
        from,
        to,
        free: free_pieces(from, to, resource.capacity.into(), &claims),
        taken,
    })
}

/// Whether PostgreSQL answers.
pub async fn health(pool: &deadpool_postgres::Pool) -> Result<(), DbError> {
    db::ping(pool).await
}
