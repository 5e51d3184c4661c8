//! The steps of waiting for an upstream seat that run in the poller's transactions
//! (`intents::wait`), once the upstream showed the seat free for an entry: an
//! `auto_book` wait goes to `RESERVING` with its booking `CONFIRMING`; any other entry
//! gets an offer. Both under the resource lock and through the conditional insert, so
//! that what is taken locally (a hold, a confirm in flight) is never offered or written,
//! and after the resource's calendar rules in force now, as the hand-over judges them.

use super::calendar;
use super::handover::{offer, on_freed};
use crate::db::intents::{self, Claimed};
use crate::db::{DbError, GenericClient, reservations, waitlist};
use crate::domain::{Metadata, Resource, Source, Status, WaitlistEntry, WaitlistStatus};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// What starting the write of a wait came to.
#[derive(Debug)]
pub enum Started {
    /// `RESERVING` under this lease, its booking `CONFIRMING`: commit, then write.
    Claimed(Claimed),
    /// Another write to the seat is in flight (`intents_one_write_per_seat`): roll back.
    SeatBusy,
    /// Not this one: taken locally, outside the rules now, no longer waiting, or its
    /// waiter is leaving. Roll back.
    Passed,
}

/// Claims `entry`'s wait and inserts its booking. Call under the resource lock; commit
/// only on [`Started::Claimed`].
pub async fn start_wait(
    tx: &impl GenericClient,
    resource: &Resource,
    entry: &WaitlistEntry,
    lease_owner: Uuid,
    lease_until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Started, DbError> {
    let (within_rules, lapsed) = calendar::entry_within_rules(tx, resource, entry, now).await?;
    if !within_rules {
        return Ok(Started::Passed);
    }
    let reservation_id = Uuid::now_v7();
    intents::defer_reservation_check(tx).await?;
    let claim = match intents::start_wait(tx, entry.id, reservation_id, lease_owner, lease_until, now).await {
        Ok(Some(claim)) => claim,
        Ok(None) => return Ok(Started::Passed),
        Err(e) if e.sql_state() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
            return Ok(Started::SeatBusy);
        }
        Err(e) => return Err(e),
    };
    let inserted = reservations::insert_if_fits(
        tx,
        &reservations::NewReservation {
            id: reservation_id,
            resource_id: resource.id,
            resource_capacity: resource.capacity,
            owner: &entry.owner,
            start: entry.start,
            end: entry.end,
            quantity: entry.quantity,
            status: Status::Confirming,
            expires_at: None,
            source: Source::WaitlistOffer,
            metadata: &Metadata::new(),
            acted_by: None,
            now,
            item: None,
        },
    )
    .await?;
    if inserted.reservation.is_none() {
        return Ok(Started::Passed);
    }
    on_freed(tx, resource, &[lapsed, inserted.expired].concat(), now).await?;
    Ok(Started::Claimed(claim))
}

/// Offers a waiting entry its range (an entry without `auto_book`). `false` when it
/// does not fit locally or no longer waits. Call under the resource lock.
pub async fn offer_entry(
    tx: &impl GenericClient,
    resource: &Resource,
    entry_id: Uuid,
    now: DateTime<Utc>,
) -> Result<bool, DbError> {
    // Leaving takes the resource lock too, so this read stays true until commit.
    let Some(entry) = waitlist::get(tx, entry_id, now).await? else { return Ok(false) };
    if entry.status != WaitlistStatus::Waiting {
        return Ok(false);
    }
    let (within_rules, mut freed) = calendar::entry_within_rules(tx, resource, &entry, now).await?;
    let mut offered = false;
    if within_rules {
        let inserted = offer(tx, resource, &entry, now).await?;
        offered = inserted.reservation.is_some();
        freed.extend(inserted.expired);
    }
    on_freed(tx, resource, &freed, now).await?;
    Ok(offered)
}
