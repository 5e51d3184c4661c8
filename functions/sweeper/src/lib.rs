//! The `sweeper` function, run by an EventBridge schedule (every minute in AWS, every
//! `SWEEP_INTERVAL_SECONDS` in the dev server): expires lapsed holds and offers and
//! hands their capacity to the waitlist, ends waits for upstream seats whose range has
//! started and polls the upstream seats that have waiters (`shared::intents::wait`:
//! one cached read per seat, a booking or an offer when it shows free), expires
//! waiting entries whose range has passed, settles upstream intents whose worker lease lapsed (the lease reaper: by the
//! current-charge read, never by replaying the write), queues a new message for due
//! intents whose message was lost or dead-lettered, relays unpublished outbox rows
//! (events to the events queue, intent messages to the intents queue), sends the
//! webhook resends admins asked for, and purges idempotency records, published outbox
//! rows and the webhook delivery log past retention. Each task is bounded; the report says what each
//! did, and a task that fails does not stop the others.

use aws_lambda_events::eventbridge::EventBridgeEvent;
use lambda_runtime::{Error, LambdaEvent};
use serde::Serialize;
use shared::AppState;
use shared::booking::sweep::{self, Bounds, ExpiryReport};
use shared::outbox::{EventsRelay, Publisher, RelayReport, Topic, relay};
use std::time::Duration;

#[derive(Debug, Default, Serialize)]
pub struct SweepReport {
    pub expiry: Option<ExpiryReport>,
    pub waiting_expired: Option<u64>,
    /// Waits for upstream seats that ended because their range started.
    pub waits_ended: Option<u64>,
    /// The poll of upstream seats with waiters.
    pub waits: Option<shared::intents::wait::WaitReport>,
    pub reaper: Option<shared::intents::ReaperReport>,
    /// Due intents whose message was lost or dead-lettered, queued again.
    pub intents_requeued: Option<u64>,
    pub events: Option<RelayReport>,
    pub intents: Option<RelayReport>,
    pub idempotency_purged: Option<u64>,
    /// Published outbox rows past `OUTBOX_RETENTION_HOURS`, deleted.
    pub outbox_purged: Option<u64>,
    /// Records of webhook deliveries past their retention, deleted.
    pub webhook_deliveries_purged: Option<u64>,
    /// Webhook resends admins asked for, sent.
    pub webhook_resends: Option<shared::notify::ResendReport>,
    /// Delivery attempts and kept events past the log's retention, deleted.
    pub webhook_log_purged: Option<u64>,
    /// Tasks that failed this run, by name; they run again next time.
    pub failed: Vec<&'static str>,
}

fn note<T>(report: &mut SweepReport, task: &'static str, outcome: Result<T, shared::db::DbError>) -> Option<T> {
    match outcome {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!(task, error = %e, "sweep task failed");
            report.failed.push(task);
            None
        }
    }
}

/// One sweep: every task, each within `bounds`.
pub async fn sweep<P: Publisher>(state: &AppState, publisher: &P, bounds: Bounds) -> SweepReport {
    let clock = state.clock.as_ref();
    let mut report = SweepReport::default();
    report.expiry = note(&mut report, "expiry", sweep::expire_lapsed(&state.pool, clock, bounds).await);
    let ended = shared::intents::wait::end_started(state, bounds.batch, clock.now()).await;
    report.waits_ended = note(&mut report, "waits_ended", ended);
    if let Some(upstream) = state.upstream.as_deref() {
        report.waits = note(&mut report, "waits", shared::intents::wait::poll(state, upstream, bounds.batch).await);
    }
    let waiting = sweep::expire_passed_waiting(&state.pool, clock, bounds).await;
    report.waiting_expired = note(&mut report, "waiting", waiting).map(|(n, _)| n);
    if let Some(upstream) = state.upstream.as_deref() {
        let reaped = shared::intents::reap(state, upstream, bounds.batch, clock.now()).await;
        report.reaper = note(&mut report, "reaper", reaped);
        let requeued = shared::intents::requeue_stale(state, bounds.batch, clock.now()).await;
        report.intents_requeued = note(&mut report, "requeue", requeued);
    }
    report.events = match state.events.as_ref() {
        // The backstop of the functions' relays: what they left (a failed publish, a
        // function that stopped on the way) is due here.
        EventsRelay::Sweep | EventsRelay::AfterRequest(_) => {
            note(&mut report, "events", relay(&state.pool, clock, publisher, Topic::Events, bounds.budget).await)
        }
        // The process's own relay holds the events' publisher: woken, it sends whatever
        // is due, as this sweep would have.
        EventsRelay::Background(wake) => {
            wake.notify_one();
            None
        }
    };
    let intents = relay(&state.pool, clock, state.intents.as_ref(), Topic::Intents, bounds.budget).await;
    report.intents = note(&mut report, "intents", intents);
    let purged = sweep::purge_idempotency(&state.pool, clock, bounds).await;
    report.idempotency_purged = note(&mut report, "idempotency", purged).map(|(n, _)| n);
    let purged = sweep::purge_outbox(&state.pool, clock, bounds, state.config.outbox_retention).await;
    report.outbox_purged = note(&mut report, "outbox", purged).map(|(n, _)| n);
    let purged = sweep::purge_webhook_deliveries(&state.pool, clock, bounds).await;
    report.webhook_deliveries_purged = note(&mut report, "webhook_deliveries", purged).map(|(n, _)| n);
    let sender = shared::notify::Sender::new(shared::notify::Sender::DEFAULT_TIMEOUT);
    let resent = shared::notify::send_resends(&state.pool, clock, &sender, bounds.batch).await;
    report.webhook_resends = note(&mut report, "webhook_resends", resent);
    let purged = sweep::purge_webhook_log(&state.pool, clock, bounds).await;
    report.webhook_log_purged = note(&mut report, "webhook_log", purged).map(|(n, _)| n);
    let (lag, unsettled) = match state.pool.get().await {
        Ok(c) => (
            shared::db::outbox::oldest_pending(&c).await.ok().flatten(),
            shared::db::intents::oldest_unsettled(&c).await.ok().flatten(),
        ),
        Err(_) => (None, None),
    };
    let [lag_seconds, unsettled_seconds] = [lag, unsettled]
        .map(|since| since.map_or(0.0, |t| (clock.now() - t).num_milliseconds().max(0) as f64 / 1000.0));
    let expiry = report.expiry.clone().unwrap_or_default();
    let reaper = report.reaper.clone().unwrap_or_default();
    let waits = report.waits.clone().unwrap_or_default();
    let events = report.events.clone().unwrap_or_default();
    shared::metrics::emit(&[
        ("Expired", expiry.expired as f64, "Count"),
        ("Offers", expiry.offers as f64, "Count"),
        ("WaitingExpired", report.waiting_expired.unwrap_or(0) as f64, "Count"),
        ("WaitsEnded", report.waits_ended.unwrap_or(0) as f64, "Count"),
        ("WaitSeatsRead", waits.seats_read as f64, "Count"),
        ("WaitWrites", waits.writes as f64, "Count"),
        ("IntentsReaped", reaper.reaped as f64, "Count"),
        ("IntentsRequeued", report.intents_requeued.unwrap_or(0) as f64, "Count"),
        ("EventsPublished", events.published as f64, "Count"),
        ("EventsPublishFailures", events.failed as f64, "Count"),
        ("OutboxPurged", report.outbox_purged.unwrap_or(0) as f64, "Count"),
        ("SweepTasksFailed", report.failed.len() as f64, "Count"),
        ("OutboxLagSeconds", lag_seconds, "Seconds"),
        // What the unsettled-intents alarm watches (template.yaml).
        ("OldestUnsettledIntentSeconds", unsettled_seconds, "Seconds"),
    ]);
    tracing::info!(report = %serde_json::to_string(&report).unwrap_or_default(), "sweep done");
    report
}

/// The Lambda handler: the scheduled event carries nothing we need.
pub async fn handler<P: Publisher>(
    state: &AppState,
    publisher: &P,
    _event: LambdaEvent<EventBridgeEvent<serde_json::Value>>,
) -> Result<SweepReport, Error> {
    // Inside the function's timeout (60 s in the template) with room to spare.
    Ok(sweep(state, publisher, Bounds { batch: 200, budget: Duration::from_secs(10) }).await)
}
