//! Keeping a hold longer: each extension adds the resource's hold TTL again, up to
//! `max_hold_seconds` from the hold's creation (without it, a hold cannot be extended).

use super::BookingError;
use super::release::{Owned, lock_owned};
use crate::db::{GenericClient, reservations};
use crate::domain::{Principal, Reservation, Status};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

/// Extends a hold its principal may change (its owner's, or any for an admin). An
/// expired or settled reservation is not held; a hold already at its longest is
/// [`BookingError::HoldExtensionLimit`]. Run inside a transaction.
pub async fn extend(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<Reservation, BookingError> {
    let Owned { resource, reservation: r, .. } = lock_owned(tx, who, id).await?;
    let expires_at = match (r.status, r.expires_at) {
        (Status::Held, Some(at)) if at > now => at,
        _ => return Err(BookingError::NotHeld(r.as_of(now).status)),
    };
    let Some(max) = resource.policies.max_hold_seconds else { return Err(BookingError::HoldExtensionLimit) };
    let longest = r.created_at + Duration::seconds(max.into());
    let until = (expires_at + Duration::seconds(resource.hold_ttl_seconds.into())).min(longest);
    if until <= expires_at {
        return Err(BookingError::HoldExtensionLimit);
    }
    Ok(reservations::extend(tx, id, until, &who.id, now).await?.as_of(now))
}
