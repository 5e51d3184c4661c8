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
//! Every waiting entry is considered, however long the queue: the walk goes through
//! it in pages by sequence number, and stops early only once no instant of the freed
//! range has any capacity left. Whether an entry fits is first judged in memory,
//! against the load read once per page, so that a long queue of entries that do not
//! fit costs two reads a page, not a write each; the conditional insert still decides.
//!
//! On an upstream resource the system of record decides whether the seat is free, and
//! no transaction may ask it: freed capacity there only asks for a poll of the seat
//! (`seat_polls`), and the poller (`intents::wait`) makes the offer, or books an
//! `auto_book` wait, once the upstream shows the seat free.
//!
//! Offers go through the same conditional insert as every reservation, so no waitlist
//! path can exceed the capacity. That insert writes down the lapsed holds it overlaps
//! first; what it expired on the way is handed over in turn, until nothing is left.

use crate::db::{DbError, GenericClient, reservations, seat_polls, waitlist};
use crate::domain::{
    Authority, Claim, Metadata, Reservation, Resource, Source, Status, WaitlistEntry, WaitlistStatus, free_pieces,
    peak_load,
};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

/// How many waiting entries one read of the queue brings.
const PAGE: i64 = 200;

/// What a hand-over did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HandedOver {
    /// Offers made.
    pub offers: u64,
    /// Lapsed holds the offers' inserts wrote down on the way (and handed over in turn).
    pub expired: u64,
}

/// Settles the offers among `freed` (their entries move on) and hands the freed
/// capacity to the waitlist. Call under the resource lock, after the status change.
pub async fn on_freed(
    tx: &impl GenericClient,
    resource: &Resource,
    freed: &[Reservation],
    now: DateTime<Utc>,
) -> Result<HandedOver, DbError> {
    let Some((start, end)) = span(freed) else { return Ok(HandedOver::default()) };
    settle_freed_offers(tx, freed, now).await?;
    hand_over(tx, resource, start, end, now).await
}

/// Offers `[start, end)` to the waitlist, and then, in turn, whatever the offers'
/// inserts expired on the way, until nothing more frees. Call under the resource lock.
pub async fn hand_over(
    tx: &impl GenericClient,
    resource: &Resource,
    mut start: DateTime<Utc>,
    mut end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<HandedOver, DbError> {
    let mut done = HandedOver::default();
    if resource.archived_at.is_some() {
        // An archived resource makes no new holds, offers included.
        return Ok(done);
    }
    if resource.authority == Authority::Upstream {
        seat_polls::schedule(tx, resource.id, now).await?;
        return Ok(done);
    }
    loop {
        // Freed time frees its buffers too: entries beside it may fit now.
        let reach = resource.calendar.reach();
        let step = offer_range(tx, resource, start - reach, end + reach, now).await?;
        done.offers += step.offered;
        done.expired += step.expired.len() as u64;
        // Each round expires holds the rounds before did not: the loop ends.
        let Some(next) = span(&step.expired) else { return Ok(done) };
        settle_freed_offers(tx, &step.expired, now).await?;
        (start, end) = next;
    }
}

fn span(rs: &[Reservation]) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    Some((rs.iter().map(|r| r.start).min()?, rs.iter().map(|r| r.end).max()?))
}

/// The entries behind offers that ended without being taken: a lapsed offer's entry
/// expires, a declined (released) or failed one's is cancelled.
async fn settle_freed_offers(
    tx: &impl GenericClient,
    freed: &[Reservation],
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    let offers = |statuses: &[Status]| -> Vec<Uuid> {
        freed
            .iter()
            .filter(|r| r.source == Source::WaitlistOffer && statuses.contains(&r.status))
            .map(|r| r.id)
            .collect()
    };
    waitlist::settle_offers(tx, &offers(&[Status::Expired]), WaitlistStatus::Expired, now).await?;
    waitlist::settle_offers(tx, &offers(&[Status::Released, Status::Failed]), WaitlistStatus::Cancelled, now).await?;
    Ok(())
}

/// What one walk of the queue did.
struct OfferStep {
    offered: u64,
    /// Lapsed holds that the offers' inserts wrote down on the way: freed capacity too.
    expired: Vec<Reservation>,
}

/// Offers capacity in `[start, end)` to the waiting entries that now fit, first come
/// first served. Call under the resource lock.
async fn offer_range(
    tx: &impl GenericClient,
    resource: &Resource,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<OfferStep, DbError> {
    let capacity = i64::from(resource.capacity);
    let mut step = OfferStep { offered: 0, expired: Vec::new() };
    let mut after = 0;
    loop {
        let page = waitlist::waiting_overlapping(tx, resource.id, (start, end), now, after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        // The load over every entry of this page, as this transaction sees it now
        // (lapsed holds do not count: the insert writes them down).
        let window = (
            page.iter().map(|e| e.start).min().unwrap_or(start).min(start),
            page.iter().map(|e| e.end).max().unwrap_or(end).max(end),
        );
        // With calendar rules, the ranges the bookings around keep, for the buffers;
        // on capacity 1 the lapsed holds whose buffers could meet an offer are written
        // down first (see `calendar::judge`).
        let rules = super::calendar::applies(resource);
        if rules && resource.capacity == 1 {
            step.expired.extend(super::calendar::expire_lapsed_near(tx, resource, window.0, window.1, now).await?);
        }
        let mut kept =
            if rules { super::calendar::kept_around(tx, resource, window.0, window.1, now).await? } else { Vec::new() };
        let mut claims: Vec<Claim> = reservations::active_in_window(tx, resource.id, window.0, window.1, now)
            .await?
            .iter()
            .map(Reservation::claim)
            .collect();
        for entry in &page {
            if free_pieces(start, end, capacity, &claims).is_empty() {
                // Not one instant of the freed range has room left: nobody else fits.
                return Ok(step);
            }
            let quantity = i64::from(entry.quantity);
            if peak_load(entry.start, entry.end, &claims) + quantity > capacity {
                continue;
            }
            if rules
                && super::calendar::offerable(resource, entry.start, entry.end, entry.quantity, &kept, now).is_err()
            {
                // Outside the rules in force now (a changed schedule, notice that ran
                // out, a neighbour's buffer): it keeps its place, and is not offered.
                continue;
            }
            let inserted = offer(tx, resource, entry, now).await?;
            step.expired.extend(inserted.expired);
            if let Some(offer) = inserted.reservation {
                claims.push(offer.claim());
                let (from, to) = resource.calendar.buffered(offer.start, offer.end);
                kept.push(Claim { start: from, end: to, quantity: offer.quantity.into() });
                step.offered += 1;
            }
        }
        if (page.len() as i64) < PAGE {
            break;
        }
    }
    Ok(step)
}

/// Offers `entry` its range, if it fits: a `HELD` reservation in its owner's name,
/// through the conditional insert, and the entry `OFFERED`. Call under the resource
/// lock; the holds the insert expired on the way are the caller's to hand over.
pub(crate) async fn offer(
    tx: &impl GenericClient,
    resource: &Resource,
    entry: &WaitlistEntry,
    now: DateTime<Utc>,
) -> Result<reservations::Inserted, DbError> {
    let inserted = reservations::insert_if_fits(
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
            metadata: &Metadata::new(),
            acted_by: None,
            now,
            item: None,
        },
    )
    .await?;
    if let Some(offer) = &inserted.reservation {
        waitlist::mark_offered(tx, entry.id, offer.id, now).await?;
    }
    Ok(inserted)
}
