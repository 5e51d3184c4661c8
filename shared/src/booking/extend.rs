//! Keeping a hold longer: each extension adds the resource's hold TTL again, up to
//! `max_hold_seconds` from the hold's creation (without it, a hold cannot be extended).

use super::BookingError;
use super::release::{Owned, lock_owned};
use crate::Clock;
use crate::db::reservations::Written;
use crate::db::{GenericClient, reservations};
use crate::domain::{Principal, Reservation, Status};
use chrono::Duration;
use uuid::Uuid;

/// Extends a hold its principal may change (its owner's, or any for an admin): every
/// row of the booking, judged under the lock of every resource it holds, as a confirm
/// is. An expired or settled booking, or one with an item written down, is not held; a
/// hold already at its longest is [`BookingError::HoldExtensionLimit`]. Run inside a
/// transaction.
pub async fn extend(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    clock: &dyn Clock,
) -> Result<Reservation, BookingError> {
    let Owned { resource, reservation: r, status, now, .. } = lock_owned(tx, who, id, clock).await?;
    let expires_at = match (status, r.expires_at) {
        (Status::Held, Some(at)) => at,
        _ => return Err(BookingError::NotHeld(status)),
    };
    let Some(max) = resource.policies.max_hold_seconds else { return Err(BookingError::HoldExtensionLimit) };
    let longest = r.created_at + Duration::seconds(max.into());
    let until = (expires_at + Duration::seconds(resource.hold_ttl_seconds.into())).min(longest);
    if until <= expires_at {
        return Err(BookingError::HoldExtensionLimit);
    }
    match reservations::extend(tx, id, until, &who.id, now).await? {
        Written::Whole(r) => Ok(r.as_of(now)),
        Written::NotWhole => Err(BookingError::NotHeld(Status::Expired)),
    }
}
