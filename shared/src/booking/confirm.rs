//! Confirming a hold: at once for a local resource, through an intent for an upstream one.

use super::BookingError;
use super::get_resource;
use super::hold::{Approval, request_intent, upstream_reachable};
use crate::db::{self, GenericClient, reservations};
use crate::domain::{Authority, Principal, Reservation, Source, Status, WaitlistStatus};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// What a confirm did.
#[derive(Debug)]
pub enum Confirmed {
    /// Confirmed here and now (a local resource).
    Confirmed(Reservation),
    /// `CONFIRMING`: an intent for the worker was queued, to be sent after commit.
    Queued(Reservation),
    /// Found already confirmed (or confirming), and answered as it is.
    AsItWas(Reservation),
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
        Some(r) if r.owner == who.id || who.admin => r,
        _ => return Err(BookingError::ReservationNotFound),
    };
    match r.status {
        Status::Confirmed | Status::Confirming => {
            // As it is, with its intent: no second booking, no second upstream write.
            let r = reservations::get(tx, id).await?.ok_or(BookingError::ReservationNotFound)?;
            Ok(Confirmed::AsItWas(r.as_of(now)))
        }
        Status::Held if !r.is_lapsed(now) => {
            let resource = get_resource(tx, r.resource_id).await?;
            if resource.authority == Authority::Upstream {
                upstream_reachable(tx, now).await?;
                let mut r = reservations::set_status(tx, id, Status::Confirming, None, Some(&who.id), now).await?;
                r.intent = Some(request_intent(tx, &r, &resource, approval, now).await?);
                return Ok(Confirmed::Queued(r.as_of(now)));
            }
            let r = reservations::set_status(tx, id, Status::Confirmed, None, Some(&who.id), now).await?;
            if r.source == Source::WaitlistOffer {
                // Confirming an offer accepts it; the reservation is the owner's already.
                db::waitlist::settle_offers(tx, &[r.id], WaitlistStatus::Accepted, now).await?;
            }
            Ok(Confirmed::Confirmed(r.as_of(now)))
        }
        _ => Err(BookingError::NotHeld(r.as_of(now).status)),
    }
}
