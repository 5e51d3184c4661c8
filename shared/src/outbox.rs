//! The outbox relay: events written in the same transaction as the state change they
//! describe are published after commit, at least once, in order of writing, and marked
//! published. A publish that fails is retried with exponential backoff; an event is
//! never dropped. Each event's id is stable, so consumers drop duplicates by it (and a
//! FIFO queue deduplicates by it).

use crate::Clock;
use crate::db::{DbError, outbox};
pub use crate::domain::messages::{Envelope, IntentMessage, Topic};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where events go. One result per event, in order: `Err` means "not delivered, retry".
pub trait Publisher: Send + Sync {
    fn publish(&self, batch: &[Envelope]) -> impl Future<Output = Vec<Result<(), String>>> + Send;
}

/// For a local run without a queue: events go to the log.
pub struct LogPublisher;

impl Publisher for LogPublisher {
    async fn publish(&self, batch: &[Envelope]) -> Vec<Result<(), String>> {
        batch
            .iter()
            .map(|e| {
                tracing::info!(event_id = %e.id, kind = %e.kind, subject_id = %e.subject_id, "event");
                Ok(())
            })
            .collect()
    }
}

/// A queue as the functions see it: SQS in AWS, an in-process channel in the dev
/// server (the worker's own handler reads it), or none (rows wait in the outbox for the
/// scheduled relay).
pub enum Queue {
    None,
    Channel(tokio::sync::mpsc::UnboundedSender<Envelope>),
    #[cfg(feature = "sqs")]
    Sqs(SqsPublisher),
}

impl Queue {
    /// SQS when the variable names a queue URL, else none.
    #[cfg(feature = "sqs")]
    pub fn from_env(variable: &str) -> Queue {
        match std::env::var(variable).ok().filter(|v| !v.is_empty()) {
            Some(url) => Queue::Sqs(SqsPublisher::from_env(url)),
            None => Queue::None,
        }
    }
}

impl Publisher for Queue {
    async fn publish(&self, batch: &[Envelope]) -> Vec<Result<(), String>> {
        match self {
            Queue::None => batch.iter().map(|_| Err("no queue configured".to_string())).collect(),
            Queue::Channel(tx) => batch
                .iter()
                .map(|e| tx.send(e.clone()).map_err(|_| "the in-process queue is closed".to_string()))
                .collect(),
            #[cfg(feature = "sqs")]
            Queue::Sqs(sqs) => sqs.publish(batch).await,
        }
    }
}

/// After a commit that wrote intent messages: send them now rather than at the next
/// sweep. A failure here loses nothing (the rows stay due for the scheduled relay), so
/// it is logged, not answered.
pub async fn publish_intents(state: &crate::AppState) {
    if matches!(*state.intents, Queue::None) {
        return;
    }
    if let Err(e) =
        relay(&state.pool, state.clock.as_ref(), state.intents.as_ref(), Topic::Intents, Duration::from_secs(2)).await
    {
        tracing::warn!(error = %e, "could not publish intent messages; the sweeper will");
    }
}

/// Who publishes the events a request wrote. Relays may run side by side: a claim
/// takes one event per subject and passes over subjects another relay holds, so a
/// subject's events still leave in the order they were written.
pub enum EventsRelay {
    /// The scheduled sweep alone, once a minute in AWS.
    Sweep,
    /// A relay of the process's own (the dev server's, [`run_events_relay`]), woken
    /// after every request that may have written events and by every sweep, which
    /// then leaves the events to it.
    Background(Arc<tokio::sync::Notify>),
    /// The function that committed: it publishes a batch of due events, its own among
    /// them, before it answers (in Lambda, work after the answer is not sure to run),
    /// or, when its event was leased to it at write, that event alone
    /// ([`EventsRelay::lease`]). The sweep stays the backstop.
    AfterRequest(Queue),
}

impl EventsRelay {
    /// [`EventsRelay::AfterRequest`] on the SQS queue the variable names; the sweep's
    /// alone when it names none.
    #[cfg(feature = "sqs")]
    pub fn after_request_from_env(variable: &str) -> EventsRelay {
        match Queue::from_env(variable) {
            Queue::None => EventsRelay::Sweep,
            queue => EventsRelay::AfterRequest(queue),
        }
    }

    /// The lease of an event written now by a request that publishes it itself: with
    /// [`EventsRelay::AfterRequest`], the event is written claimed until then, so no
    /// relay takes it first, and its request publishes and marks it, one statement
    /// beside its write rather than two. Elsewhere `None`: the event waits for a relay.
    ///
    /// Only a write whose event is its request's only one, and the first of its
    /// subject, takes the lease (the hold of `reservation_hold`, whose subject is the
    /// reservation it makes): no earlier event of the subject can be waiting, and
    /// nothing else the request wrote waits for a claim.
    pub fn lease(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        matches!(self, EventsRelay::AfterRequest(_)).then(|| now + LEASE)
    }
}

/// What a request wrote of events: the operation that wrote them says so in what it
/// returns, and the handler passes it on ([`publish_written`]). The default, for an
/// operation that does not know, is the safe one: a claim after the request.
#[must_use = "the request's events are published only when the relay is told what was written"]
#[derive(Debug, Default)]
pub enum Written {
    /// Maybe some: a claim after the request publishes them, or the relay is woken.
    #[default]
    MaybeSome,
    /// None: no claim after the request.
    Nothing,
    /// Its events, written under [`EventsRelay::lease`]: the request publishes them.
    Leased(Vec<outbox::Event>),
}

impl Written {
    /// What two parts of one request wrote together.
    pub fn and(self, other: Written) -> Written {
        match (self, other) {
            (Written::Nothing, written) | (written, Written::Nothing) => written,
            (Written::Leased(mut events), Written::Leased(more)) => {
                events.extend(more);
                Written::Leased(events)
            }
            _ => Written::MaybeSome,
        }
    }
}

/// Once a request that changed state has committed: publishes what it wrote before it
/// answers (in Lambda, work after the answer is not sure to run), or wakes the relay
/// that will. With [`EventsRelay::AfterRequest`], events leased to the request are
/// published alone, with no claim; otherwise a claim takes whatever is due.
pub async fn publish_written(state: &crate::AppState, written: Written) {
    match (state.events.as_ref(), written) {
        (_, Written::Nothing) => {}
        (EventsRelay::Sweep, _) => {}
        (EventsRelay::Background(wake), _) => wake.notify_one(),
        (EventsRelay::AfterRequest(queue), Written::Leased(events)) => {
            let mut report = RelayReport::default();
            let run = publish_claimed(&state.pool, state.clock.as_ref(), queue, &events, &mut report).await;
            // A leased event left unpublished goes with a relay once its lease has passed.
            if let Err(e) = run {
                tracing::warn!(error = %e, "could not publish events; the next relay will");
            }
        }
        (EventsRelay::AfterRequest(queue), Written::MaybeSome) => {
            let run = relay(&state.pool, state.clock.as_ref(), queue, Topic::Events, Duration::ZERO).await;
            // Unpublished rows stay: the next request's relay, or the sweep's, sends them.
            if let Err(e) = run {
                tracing::warn!(error = %e, "could not publish events; the next relay will");
            }
        }
    }
}

/// How long the background relay lets events gather after a wake-up: a batch then
/// carries the events of several requests, so the relay's claims and marks cost the
/// requests less, for a few milliseconds' more delay.
const GATHER: Duration = Duration::from_millis(10);

/// The relay of [`EventsRelay::Background`]: each wake-up publishes everything due,
/// in batches, and a wake-up during a run makes one more run, so an event committed
/// while a batch is out waits for at most the rest of that run.
pub async fn run_events_relay<P: Publisher>(state: crate::AppState, publisher: P, wake: Arc<tokio::sync::Notify>) {
    loop {
        wake.notified().await;
        tokio::time::sleep(GATHER).await;
        let run = relay(&state.pool, state.clock.as_ref(), &publisher, Topic::Events, Duration::from_secs(10)).await;
        match run {
            Ok(report) if report.unfinished => wake.notify_one(),
            Ok(_) => {}
            // The rows stay due: the next wake-up, or the sweep's, tries again.
            Err(e) => tracing::warn!(error = %e, "could not publish events; the next wake-up will"),
        }
    }
}

#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct RelayReport {
    pub published: u64,
    pub failed: u64,
    pub unfinished: bool,
}

/// The backoff after `attempts` failed publishes: 1 s, 2 s, 4 s ... capped at 5 minutes.
pub fn backoff(attempts: i32) -> ChronoDuration {
    let exp = attempts.clamp(1, 20) - 1;
    ChronoDuration::seconds((1i64 << exp).min(300))
}

/// Events a claim takes: a relay's rate is about a claim and a mark per batch
/// (`relay-bench`). A publisher sends a batch in pieces its queue takes (SQS: ten).
const BATCH: i32 = 100;

/// The oldest due events a claim looks over for subjects' first events: room for the
/// batches of ten relays at once, each claim passing over the others' subjects.
const WINDOW: i32 = 1_000;

/// How long a claim keeps other relays off its events (and their subjects' later
/// ones): past any publish, so that a relay that died is the only reason it runs out.
const LEASE: ChronoDuration = ChronoDuration::seconds(30);

/// Publishes the topic's due events in batches, until none are left or the budget is
/// spent; the first batch is always tried, so a budget of zero is one batch. Holds no
/// database connection while the publisher works: the claim and the marks are
/// statements of their own ([`outbox::CLAIM_DUE`]), each on a connection from the pool.
pub async fn relay<P: Publisher>(
    pool: &Pool,
    clock: &dyn Clock,
    publisher: &P,
    topic: Topic,
    budget: Duration,
) -> Result<RelayReport, DbError> {
    let started = Instant::now();
    let mut report = RelayReport::default();
    loop {
        let now = clock.now();
        let events = outbox::claim_due(&pool.get().await?, topic, now, now + LEASE, BATCH, WINDOW).await?;
        if events.is_empty() {
            break;
        }
        let published_before = report.published;
        publish_claimed(pool, clock, publisher, &events, &mut report).await?;
        if report.published == published_before {
            // The queue is refusing everything: leave the rest for the next run.
            break;
        }
        if started.elapsed() >= budget {
            report.unfinished = true;
            break;
        }
    }
    Ok(report)
}

/// Publishes claimed events, at most one per subject (so the whole batch may go out
/// side by side), then marks each published or failed, on a connection taken once the
/// publisher is done, and counts them in `report`.
async fn publish_claimed<P: Publisher>(
    pool: &Pool,
    clock: &dyn Clock,
    publisher: &P,
    events: &[outbox::Event],
    report: &mut RelayReport,
) -> Result<(), DbError> {
    let envelopes: Vec<Envelope> = events.iter().map(Envelope::from).collect();
    let outcomes = publisher.publish(&envelopes).await;
    let client = pool.get().await?;
    let mut delivered = Vec::with_capacity(events.len());
    for (i, event) in events.iter().enumerate() {
        match outcomes.get(i).cloned().unwrap_or_else(|| Err("no outcome reported".into())) {
            Ok(()) => delivered.push(event.id),
            Err(reason) => {
                report.failed += 1;
                let attempts = event.attempts + 1;
                tracing::warn!(event_id = %event.id, attempts, %reason, "publish failed; will retry");
                outbox::mark_failed(&client, event.id, clock.now() + backoff(attempts), &reason).await?;
            }
        }
    }
    if !delivered.is_empty() {
        report.published += outbox::mark_published(&client, &delivered, clock.now()).await?;
    }
    Ok(())
}

#[cfg(feature = "sqs")]
pub use sqs::SqsPublisher;

#[cfg(feature = "sqs")]
mod sqs {
    use super::{Envelope, Publisher};
    use crate::sqs::{Entry, Sqs};

    /// Publishes to an SQS queue with SendMessageBatch. On a FIFO queue the subject is
    /// the message group (one reservation's events stay in order) and the event id is
    /// the deduplication id.
    pub struct SqsPublisher {
        sqs: Sqs,
        queue_url: String,
    }

    impl SqsPublisher {
        pub fn new(sqs: Sqs, queue_url: String) -> Self {
            Self { sqs, queue_url }
        }

        /// A publisher with [`Sqs::from_env`].
        pub fn from_env(queue_url: String) -> Self {
            Self::new(Sqs::from_env(), queue_url)
        }
    }

    /// SendMessageBatch takes at most ten messages.
    const SEND_MAX: usize = 10;

    impl Publisher for SqsPublisher {
        /// Sends of ten at once, side by side: the relay hands over a wave with at most
        /// one event per subject (message group), so no two sends race within a group.
        async fn publish(&self, batch: &[Envelope]) -> Vec<Result<(), String>> {
            let fifo = self.queue_url.ends_with(".fifo");
            let sends = batch.chunks(SEND_MAX).map(|chunk| {
                let entries: Vec<Entry> = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, e)| Entry {
                        id: i.to_string(),
                        message_body: serde_json::to_string(e).expect("envelopes serialize"),
                        group: fifo.then(|| e.subject_id.to_string()),
                        deduplication: fifo.then(|| e.id.to_string()),
                    })
                    .collect();
                async move { (chunk.len(), self.sqs.send_message_batch(&self.queue_url, &entries).await) }
            });
            let mut outcomes = Vec::with_capacity(batch.len());
            for (len, sent) in futures::future::join_all(sends).await {
                match sent {
                    Err(err) => outcomes.extend((0..len).map(|_| Err(err.to_string()))),
                    Ok(refused) => {
                        let mut sent: Vec<Result<(), String>> = vec![Ok(()); len];
                        for r in refused {
                            if let Some(slot) = r.id.parse::<usize>().ok().and_then(|i| sent.get_mut(i)) {
                                *slot = Err(format!("{}: {}", r.code, r.message.unwrap_or_default()));
                            }
                        }
                        outcomes.extend(sent);
                    }
                }
            }
            outcomes
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(1), ChronoDuration::seconds(1));
        assert_eq!(backoff(2), ChronoDuration::seconds(2));
        assert_eq!(backoff(5), ChronoDuration::seconds(16));
        assert_eq!(backoff(12), ChronoDuration::seconds(300));
        assert_eq!(backoff(1000), ChronoDuration::seconds(300));
    }
}
