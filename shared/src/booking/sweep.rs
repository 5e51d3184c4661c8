//! The scheduled work: expire what lapsed (and hand it over), expire waiting entries
//! whose range has passed, purge idempotency records and published outbox rows past
//! retention. Each task is
//! bounded in rows and in time and reports what it did; what is left is the next
//! run's.

use super::{hand_over, on_freed};
use crate::Clock;
use crate::db::{DbError, idempotency, lapse, outbox, resources, waitlist, webhooks};
use deadpool_postgres::Pool;
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Rows one transaction touches at most.
    pub batch: i64,
    /// Wall time one task may take; it stops between batches.
    pub budget: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self { batch: 200, budget: Duration::from_secs(10) }
    }
}

#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct ExpiryReport {
    /// Holds written down, those its offers' inserts wrote down on the way included.
    pub expired: u64,
    /// Transactions that wrote some down: one resource's batch each.
    pub batches: u64,
    pub offers: u64,
    /// Resources whose waitlist was owed the capacity of a booking of several written
    /// down from another of its resources, and was offered it.
    pub owed_handed_over: u64,
    /// True when the budget ran out with lapsed holds or owed hand-overs left over.
    pub unfinished: bool,
}

/// Expires lapsed holds and offers, one resource per transaction. The claim skips
/// resources another transaction holds, so concurrent sweeps share the work, never
/// process one hold twice and never deadlock. A sweep stops when its budget ends or
/// when no resource with lapsed holds is free to claim: each one left is then held by
/// another sweep, which claims it again after each batch until it is done, or by a
/// booking, which writes down the lapses in its way itself.
pub async fn expire_lapsed(pool: &Pool, clock: &dyn Clock, bounds: Bounds) -> Result<ExpiryReport, DbError> {
    let started = Instant::now();
    let mut report = ExpiryReport::default();
    let mut client = pool.get().await?;
    let mut all_taken = 0;
    loop {
        if started.elapsed() >= bounds.budget {
            report.unfinished = true;
            break;
        }
        let now = clock.now();
        let tx = client.transaction().await?;
        let Some(resource_id) = lapse::claim_lapsed_resource(&tx, now).await? else {
            tx.commit().await?;
            // A booking's lock is short: a few tries, then what it holds is the
            // next run's.
            all_taken += 1;
            if all_taken >= 3 || !lapse::any_lapsed(&client, now).await? {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        all_taken = 0;
        let expired = lapse::expire_lapsed_batch(&tx, resource_id, now, bounds.batch).await?;
        if expired.is_empty() {
            // Another sweep wrote them down after the claim looked: on to the next.
            tx.commit().await?;
            continue;
        }
        let resource = resources::get(&tx, resource_id).await?.ok_or(DbError::Corrupt("resource".into()))?;
        let handed = on_freed(&tx, &resource, &expired, now).await?;
        tx.commit().await?;
        report.offers += handed.offers;
        report.expired += expired.len() as u64 + handed.expired;
        report.batches += 1;
    }
    if !report.unfinished {
        hand_over_owed(&mut client, clock, started, bounds, &mut report).await?;
    }
    Ok(report)
}

/// Offers each resource's waitlist the capacity owed to it (`handovers_owed`), one
/// resource per transaction under its lock; resources held by another transaction are
/// the next run's.
async fn hand_over_owed(
    client: &mut deadpool_postgres::Object,
    clock: &dyn Clock,
    started: Instant,
    bounds: Bounds,
    report: &mut ExpiryReport,
) -> Result<(), DbError> {
    loop {
        if started.elapsed() >= bounds.budget {
            report.unfinished = true;
            return Ok(());
        }
        let now = clock.now();
        let tx = client.transaction().await?;
        let Some(resource_id) = lapse::claim_owed_resource(&tx).await? else {
            tx.commit().await?;
            return Ok(());
        };
        let span = lapse::take_owed(&tx, resource_id).await?;
        let resource = resources::get(&tx, resource_id).await?.ok_or(DbError::Corrupt("resource".into()))?;
        if let Some((start, end)) = span {
            let handed = hand_over(&tx, &resource, start, end, now).await?;
            report.offers += handed.offers;
            report.expired += handed.expired;
        }
        tx.commit().await?;
        report.owed_handed_over += 1;
    }
}

/// Bounded batches of a single-statement task until it runs dry or out of time.
async fn drain<F, Fut>(bounds: Bounds, mut step: F) -> Result<(u64, bool), DbError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64, DbError>>,
{
    let started = Instant::now();
    let mut total = 0;
    loop {
        if started.elapsed() >= bounds.budget {
            return Ok((total, true));
        }
        let n = step().await?;
        total += n;
        if n < bounds.batch as u64 {
            return Ok((total, false));
        }
    }
}

/// Waiting entries whose range has ended can never be offered: they expire.
pub async fn expire_passed_waiting(pool: &Pool, clock: &dyn Clock, bounds: Bounds) -> Result<(u64, bool), DbError> {
    let client = pool.get().await?;
    drain(bounds, || waitlist::expire_passed(&client, clock.now(), bounds.batch)).await
}

/// Idempotency records past their retention are deleted.
pub async fn purge_idempotency(pool: &Pool, clock: &dyn Clock, bounds: Bounds) -> Result<(u64, bool), DbError> {
    let client = pool.get().await?;
    drain(bounds, || idempotency::purge_expired(&client, clock.now(), bounds.batch)).await
}

/// Published outbox rows older than `retention` are deleted: consumers have them, and
/// the table would otherwise grow with every state change forever.
pub async fn purge_outbox(
    pool: &Pool,
    clock: &dyn Clock,
    bounds: Bounds,
    retention: chrono::Duration,
) -> Result<(u64, bool), DbError> {
    let client = pool.get().await?;
    drain(bounds, || outbox::purge_published(&client, clock.now() - retention, bounds.batch)).await
}

/// How long a webhook delivery is remembered: longer than the events queue keeps a
/// message (4 days, template.yaml), so no redelivery can come after its record is gone.
pub const WEBHOOK_DELIVERY_RETENTION: chrono::Duration = chrono::Duration::days(7);

/// Records of webhook deliveries past [`WEBHOOK_DELIVERY_RETENTION`] are deleted.
pub async fn purge_webhook_deliveries(pool: &Pool, clock: &dyn Clock, bounds: Bounds) -> Result<(u64, bool), DbError> {
    let client = pool.get().await?;
    let before = clock.now() - WEBHOOK_DELIVERY_RETENTION;
    drain(bounds, || webhooks::purge_deliveries(&client, before, bounds.batch)).await
}

/// How long the delivery log (each attempt, and the events it sent) is kept: long
/// enough to recover an endpoint that was disabled after five days of failures, weeks
/// later.
pub const WEBHOOK_LOG_RETENTION: chrono::Duration = chrono::Duration::days(30);

/// Delivery attempts past [`WEBHOOK_LOG_RETENTION`] are deleted, then the kept events
/// no attempt names any more.
pub async fn purge_webhook_log(pool: &Pool, clock: &dyn Clock, bounds: Bounds) -> Result<(u64, bool), DbError> {
    let client = pool.get().await?;
    let before = clock.now() - WEBHOOK_LOG_RETENTION;
    let (attempts, unfinished) = drain(bounds, || webhooks::purge_attempts(&client, before, bounds.batch)).await?;
    if unfinished {
        return Ok((attempts, true));
    }
    let (events, unfinished) = drain(bounds, || webhooks::purge_events(&client, before, bounds.batch)).await?;
    Ok((attempts + events, unfinished))
}
