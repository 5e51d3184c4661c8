//! The booking operations. Each takes a client or a transaction and the current time;
//! none opens or commits a transaction itself, so a caller can compose several (and an
//! idempotency record) into one.
//!
//! Lock order, everywhere: the resource row first, then reservation rows. Every path
//! that changes a resource's load takes the resource lock, so those paths serialize per
//! resource and never deadlock; paths on different resources never contend.

mod handover;
pub mod sweep;
mod waitlist;

pub use handover::on_freed;
pub use waitlist::{JoinRequest, get_entry, join_waitlist, leave_waitlist};

use crate::db::{self, DbError, GenericClient, reservations, resources};
use crate::domain::{
    Authority, Claim, FieldError, FreePiece, Limits, Principal, Reservation, Resource, Source, Status, WaitlistStatus,
    free_pieces, validate_range,
};
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
            id: Uuid::new_v4(),
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
    // The lock and the inline expiry go out together; the expiry runs once the lock is
    // held, so it and everything after it see every committed competitor.
    let (resource, lapsed) = tokio::try_join!(
        resources::lock(tx, req.resource_id),
        reservations::expire_lapsed_overlapping(tx, req.resource_id, req.start, req.end, now),
    )?;
    let resource = resource.ok_or(BookingError::ResourceNotFound)?;
    if req.quantity > resource.capacity {
        return Err(invalid("quantity", format!("must not exceed the capacity of {}", resource.capacity)));
    }
    if resource.authority == Authority::Upstream && req.confirm {
        // Confirming against the system of record goes through the intent worker,
        // which is not part of this build yet: say so, never pretend.
        return Err(BookingError::UpstreamUnavailable { retry_after_seconds: 30 });
    }
    // Capacity that lapsed goes to the waitlist first, not to whoever asks next.
    on_freed(tx, &resource, &lapsed, now).await?;
    let (status, expires_at) = if req.confirm {
        (Status::Confirmed, None)
    } else {
        (Status::Held, Some(now + Duration::seconds(resource.hold_ttl_seconds.into())))
    };
    let inserted = reservations::insert_if_fits(
        tx,
        &reservations::NewReservation {
            id: Uuid::new_v4(),
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
        },
    )
    .await;
    match inserted {
        Ok(Some(r)) => Ok(Reserved::Reserved(r)),
        Ok(None) => Ok(Reserved::Unavailable),
        // The exclusion constraint fired: some path skipped the lock. Still a loss, and
        // the transaction is aborted, so this one is an error the caller rolls back.
        Err(e) if e.sql_state() == Some(&tokio_postgres::error::SqlState::EXCLUSION_VIOLATION) => {
            tracing::warn!("exclusion constraint refused an overlapping reservation");
            Err(BookingError::SlotUnavailable)
        }
        Err(e) => Err(e.into()),
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
    now: DateTime<Utc>,
) -> Result<Confirmed, BookingError> {
    // Confirming does not change the load, so the reservation's own row lock is enough
    // and confirms never queue behind reserves of the same resource.
    let r = match reservations::lock(tx, id).await? {
        Some(r) if r.owner == who.id => r,
        _ => return Err(BookingError::ReservationNotFound),
    };
    match r.status {
        Status::Confirmed | Status::Confirming => Ok(Confirmed { reservation: r.as_of(now), changed: false }),
        Status::Held if !r.is_lapsed(now) => {
            let resource = get_resource(tx, r.resource_id).await?;
            if resource.authority == Authority::Upstream {
                return Err(BookingError::UpstreamUnavailable { retry_after_seconds: 30 });
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
) -> Result<Reservation, BookingError> {
    let (resource, r) = lock_owned(tx, who, id).await?;
    let next = match r.status {
        Status::Held if r.is_lapsed(now) => Status::Expired,
        Status::Held => Status::Released,
        Status::Confirmed => Status::Cancelled,
        Status::Confirming => return Err(BookingError::InFlight),
        Status::Released | Status::Expired | Status::Cancelled | Status::Failed => return Ok(r.as_of(now)),
    };
    let r = reservations::set_status(tx, id, next, None, now).await?;
    // The freed capacity goes first to the waitlist, in this same transaction.
    on_freed(tx, &resource, std::slice::from_ref(&r), now).await?;
    Ok(r.as_of(now))
}

#[derive(Debug, Serialize)]
pub struct Taken {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub status: Status,
    pub expires_at: Option<DateTime<Utc>>,
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

pub async fn availability(
    c: &impl GenericClient,
    resource_id: Uuid,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    max_window: Duration,
    now: DateTime<Utc>,
) -> Result<Availability, BookingError> {
    if from >= to {
        return Err(invalid("to", "must be after from"));
    }
    if to - from > max_window {
        return Err(invalid("to", format!("the window may span at most {} days", max_window.num_days())));
    }
    let resource = get_resource(c, resource_id).await?;
    if resource.authority == Authority::Upstream {
        // No view of the system of record can be had in this build.
        return Err(BookingError::UpstreamUnavailable { retry_after_seconds: 30 });
    }
    let active = reservations::active_in_window(c, resource.id, from, to, now).await?;
    let claims: Vec<Claim> = active.iter().map(Reservation::claim).collect();
    Ok(Availability {
        resource_id: resource.id,
        capacity: resource.capacity,
        from,
        to,
        free: free_pieces(from, to, resource.capacity.into(), &claims),
        taken: active
            .into_iter()
            .map(|r| Taken {
                start: r.start,
                end: r.end,
                quantity: r.quantity,
                status: r.status,
                expires_at: if r.status == Status::Held { r.expires_at } else { None },
            })
            .collect(),
    })
}

/// Whether PostgreSQL answers.
pub async fn health(pool: &deadpool_postgres::Pool) -> Result<(), DbError> {
    db::ping(pool).await
}
