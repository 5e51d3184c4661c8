//! Confirming a hold: at once for a local resource, through an intent for an upstream one.

use super::BookingError;
use super::hold::{Approval, request_intent, upstream_reachable};
use super::release::{Owned, lock_owned};
use crate::Clock;
use crate::db::reservations::{Transition, Written};
use crate::db::{self, GenericClient, reservations};
use crate::domain::{Authority, Principal, Reservation, Source, Status, WaitlistStatus};
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

/// Confirms a hold its principal may change: every row of the booking, judged under
/// the lock of every resource it holds ([`lock_owned`]). Confirming adds no load, but
/// a path that wrote down a lapsed row of this booking and gave its capacity away held
/// that row's resource lock to do it: only under the same locks does the confirm see
/// the write-down, or the write-down see the confirm.
pub async fn confirm(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    approval: Approval<'_>,
    clock: &dyn Clock,
) -> Result<Confirmed, BookingError> {
    let Owned { resource, status, now, .. } = lock_owned(tx, who, id, clock).await?;
    match status {
        Status::Confirmed | Status::Confirming => {
            // As it is, with its intent: no second booking, no second upstream write.
            let r = reservations::get(tx, id).await?.ok_or(BookingError::ReservationNotFound)?;
            Ok(Confirmed::AsItWas(r.as_of(now)))
        }
        Status::Held => {
            let upstream = resource.authority == Authority::Upstream;
            if upstream {
                upstream_reachable(tx, now).await?;
            }
            let to = if upstream { Status::Confirming } else { Status::Confirmed };
            let change = Transition { from: Status::Held, to };
            let mut r = match reservations::set_status(tx, id, change, None, Some(&who.id), now).await? {
                Written::Whole(r) => r,
                Written::NotWhole => return Err(BookingError::NotHeld(Status::Expired)),
            };
            if upstream {
                r.intent = Some(request_intent(tx, &r, &resource, approval, now).await?);
                return Ok(Confirmed::Queued(r.as_of(now)));
            }
            if r.source == Source::WaitlistOffer {
                // Confirming an offer accepts it; the reservation is the owner's already.
                db::waitlist::settle_offers(tx, &[r.id], WaitlistStatus::Accepted, now).await?;
            }
            Ok(Confirmed::Confirmed(r.as_of(now)))
        }
        _ => Err(BookingError::NotHeld(status)),
    }
}
