//! Hand-over, not release-and-race: when capacity frees (a release, a cancel, a lapsed
//! hold or offer, a failed confirm), the transaction that freed it, still holding the
//! resource lock, offers it to the waitlist before anyone else can take it.
//!
//! The rule is first fit in FIFO order: waiting entries whose range overlaps what was
//! freed are taken in sequence order, and each one that now fits gets an offer (a
//! `HELD` reservation in its owner's name). An entry that does not fit keeps its place
//! and does not block later, smaller entries that do fit: capacity is never left idle
//! while someone who could use it waits. The big entry still comes first whenever
//! enough frees at once, because it is always considered before those behind it.
//!
//! Offers go through the same conditional insert as every reservation, so no waitlist
//! path can exceed the capacity.

use crate::db::{DbError, GenericClient, reservations, waitlist};
use crate::domain::{Reservation, Resource, Source, Status, WaitlistStatus};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

/// How many waiting entries one hand-over looks at; the rest wait for the next.
const CANDIDATES: i64 = 100;

/// Settles the offers among `freed` (their entries move on) and hands the freed
/// capacity to the waitlist. Call under the resource lock, after the status change.
/// Returns the number of offers made.
pub async fn on_freed(
    tx: &impl GenericClient,
    resource: &Resource,
    freed: &[Reservation],
    now: DateTime<Utc>,
) -> Result<u64, DbError> {
    let Some(start) = freed.iter().map(|r| r.start).min() else { return Ok(0) };
    let end = freed.iter().map(|r| r.end).max().unwrap_or(start);
    let offers = |status: Status| -> Vec<Uuid> {
        freed.iter().filter(|r| r.source == Source::WaitlistOffer && r.status == status).map(|r| r.id).collect()
    };
    waitlist::settle_offers(tx, &offers(Status::Expired), WaitlistStatus::Expired, now).await?;
    let mut declined = offers(Status::Released);
    declined.extend(offers(Status::Failed));
    waitlist::settle_offers(tx, &declined, WaitlistStatus::Cancelled, now).await?;
    offer_range(tx, resource, start, end, now).await
}

/// Offers capacity in `[start, end)` to the waiting entries that now fit, first come
/// first served.
pub async fn offer_range(
    tx: &impl GenericClient,
    resource: &Resource,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<u64, DbError> {
    let mut offered = 0;
    for entry in waitlist::waiting_overlapping(tx, resource.id, start, end, now, CANDIDATES).await? {
        let offer = reservations::insert_if_fits(
            tx,
            &reservations::NewReservation {
                id: Uuid::now_v7(),
                resource_id: resource.id,
                resource_capacity: resource.capacity,
                owner: &entry.owner,
                start: entry.start,
                end: entry.end,
                quantity: entry.quantity,
                status: Status::Held,
                expires_at: Some(now + Duration::seconds(resource.offer_ttl_seconds.into())),
                source: Source::WaitlistOffer,
                now,
            },
        )
        .await?;
        if let Some(offer) = offer {
            waitlist::mark_offered(tx, entry.id, offer.id, now).await?;
            offered += 1;
        }
    }
    Ok(offered)
}
