//! The outbox relay: events written in the same transaction as the state change they
//! describe are published after commit, at least once, in order of writing, and marked
//! published. A publish that fails is retried with exponential backoff; an event is
//! never dropped. Each event's id is stable, so consumers drop duplicates by it (and a
//! FIFO queue deduplicates by it).

use crate::Clock;
pub use crate::db::outbox::Topic;
use crate::db::{DbError, outbox};
use crate::domain::EventKind;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;
use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The message of the intents queue: which intent to execute. The one type the
/// outbox writes (as the envelope's `data`), the worker reads and the tests send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct IntentMessage {
    pub intent_id: uuid::Uuid,
    pub reservation_id: uuid::Uuid,
}

impl IntentMessage {
    /// The message in an SQS body (an [`Envelope`]); `None` when it is not one.
    pub fn from_body(body: &str) -> Option<IntentMessage> {
        Envelope::read(body).and_then(|e| IntentMessage::from_envelope(&e))
    }

    /// The message an envelope of the intents topic carries.
    pub fn from_envelope(envelope: &Envelope) -> Option<IntentMessage> {
        serde_json::from_value(envelope.data.clone()).ok()
    }
}

/// The message body of both queues: what the relay publishes, and what the notifier
/// and the intent worker read.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Envelope {
    pub id: uuid::Uuid,
    #[serde(rename = "type")]
    pub kind: EventKind,
    pub subject_id: uuid::Uuid,
    pub occurred_at: chrono::DateTime<chrono::Utc>,
    pub data: serde_json::Value,
}

impl Envelope {
    /// The envelope in a message body; `None` when the body is not one.
    pub fn read(body: &str) -> Option<Envelope> {
        serde_json::from_str(body).ok()
    }

    /// The resource an event is about: every reservation and waitlist event names it.
    pub fn resource_id(&self) -> Option<uuid::Uuid> {
        self.data.get("resource_id")?.as_str()?.parse().ok()
    }
}

impl From<&outbox::Event> for Envelope {
    fn from(e: &outbox::Event) -> Self {
        Envelope {
            id: e.id,
            kind: e.kind,
            subject_id: e.subject_id,
            occurred_at: e.created_at,
            data: e.payload.clone(),
        }
    }
}

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
    /// ([`lease_for_this_request`]). The sweep stays the backstop.
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
}

/// Runs a request that may write events (any request that changes state) and, once it
/// is done, publishes them before handing back its outcome, or wakes the relay that
/// will ([`events_written`]). With [`EventsRelay::AfterRequest`], a request whose event
/// was leased to it at write publishes just that event, and claims nothing.
pub async fn publishing<T>(state: &crate::AppState, work: impl Future<Output = T>) -> T {
    let EventsRelay::AfterRequest(queue) = state.events.as_ref() else {
        let outcome = work.await;
        events_written(state).await;
        return outcome;
    };
    let (outcome, leased) = LEASED
        .scope(RefCell::new(Vec::new()), async {
            let outcome = work.await;
            (outcome, LEASED.with(RefCell::take))
        })
        .await;
    let run = if leased.is_empty() {
        relay(&state.pool, state.clock.as_ref(), queue, Topic::Events, Duration::ZERO).await
    } else {
        let mut report = RelayReport::default();
        publish_claimed(&state.pool, state.clock.as_ref(), queue, &leased, &mut report).await.map(|_| report)
    };
    // Unpublished rows stay: the next request's relay, or the sweep's, sends them (a
    // claimed one once its lease has passed).
    if let Err(e) = run {
        tracing::warn!(error = %e, "could not publish events; the next relay will");
    }
    outcome
}

tokio::task_local! {
    /// The events written in [`publishing`]'s scope with [`lease_for_this_request`]'s
    /// lease, handed over by [`leased`].
    static LEASED: RefCell<Vec<outbox::Event>>;
}

/// The lease of an event written now that the request writing it publishes itself:
/// `None` outside [`publishing`]'s scope with [`EventsRelay::AfterRequest`], where the
/// event is left for a relay to claim.
///
/// Leased at write, the event needs no claim: its request publishes it and marks it,
/// one statement beside its write rather than two. Only a write whose event is its
/// request's only one, and the first of its subject, takes the lease (the hold of
/// `reservation_hold`, whose subject is the reservation it makes): no earlier event of
/// the subject can be waiting, and nothing else the request wrote waits for a claim.
pub fn lease_for_this_request(now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    LEASED.try_with(|_| now + LEASE).ok()
}

/// Hands the request an event written with [`lease_for_this_request`]'s lease.
pub fn leased(event: outbox::Event) {
    // Outside the scope nothing is leased, so nothing is handed over.
    let _ = LEASED.try_with(|events| events.borrow_mut().push(event));
}

/// After a request that may have written events (any request that changes state),
/// once it has committed: publish them, or wake the relay that will.
pub async fn events_written(state: &crate::AppState) {
    match state.events.as_ref() {
        EventsRelay::Sweep => {}
        EventsRelay::Background(wake) => wake.notify_one(),
        EventsRelay::AfterRequest(queue) => {
            let run = relay(&state.pool, state.clock.as_ref(), queue, Topic::Events, Duration::ZERO).await;
            // As in [`publishing`].
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
const BATCH: i64 = 100;

/// The oldest due events a claim looks over for subjects' first events: room for the
/// batches of ten relays at once, each claim passing over the others' subjects.
const WINDOW: i64 = 1_000;

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
        if publish_claimed(pool, clock, publisher, &events, &mut report).await? == 0 {
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
/// publisher is done. Returns how many were published.
async fn publish_claimed<P: Publisher>(
    pool: &Pool,
    clock: &dyn Clock,
    publisher: &P,
    events: &[outbox::Event],
    report: &mut RelayReport,
) -> Result<u64, DbError> {
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
    if delivered.is_empty() {
        return Ok(0);
    }
    let published = outbox::mark_published(&client, &delivered, clock.now()).await?;
    report.published += published;
    Ok(published)
}

#[cfg(feature = "sqs")]
pub use sqs::{SqsPublisher, client as sqs_client, client_from_env as sqs_client_from_env};

#[cfg(feature = "sqs")]
mod sqs {
    use super::{Envelope, Publisher};
    use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
    use aws_sdk_sqs::types::SendMessageBatchRequestEntry;

    /// Publishes to an SQS queue with SendMessageBatch. On a FIFO queue the subject is
    /// the message group (one reservation's events stay in order) and the event id is
    /// the deduplication id.
    pub struct SqsPublisher {
        client: aws_sdk_sqs::Client,
        queue_url: String,
    }

    impl SqsPublisher {
        pub fn new(client: aws_sdk_sqs::Client, queue_url: String) -> Self {
            Self { client, queue_url }
        }

        /// A publisher with [`client_from_env`].
        pub fn from_env(queue_url: String) -> Self {
            Self::new(client_from_env(), queue_url)
        }
    }

    /// An SQS client from a Lambda's environment, built without I/O: the region from
    /// `AWS_REGION` (or `AWS_DEFAULT_REGION`), the function role's credentials from
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` (which the
    /// Lambda service sets for the life of the execution environment), and
    /// `AWS_ENDPOINT_URL_SQS` (or `AWS_ENDPOINT_URL`) for a local endpoint such as moto.
    /// Built once per process: the intents' and the events' publishers share it.
    pub fn client_from_env() -> aws_sdk_sqs::Client {
        static CLIENT: std::sync::OnceLock<aws_sdk_sqs::Client> = std::sync::OnceLock::new();
        CLIENT.get_or_init(build_client_from_env).clone()
    }

    fn build_client_from_env() -> aws_sdk_sqs::Client {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let credentials = Credentials::new(
            var("AWS_ACCESS_KEY_ID").unwrap_or_default(),
            var("AWS_SECRET_ACCESS_KEY").unwrap_or_default(),
            var("AWS_SESSION_TOKEN"),
            None,
            "environment",
        );
        let region = var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")).unwrap_or_else(|| "us-east-1".into());
        client(region, credentials, var("AWS_ENDPOINT_URL_SQS").or_else(|| var("AWS_ENDPOINT_URL")))
    }

    /// An SQS client over rustls on ring, trusting Mozilla's roots (see [`trust_store`]).
    pub fn client(region: String, credentials: Credentials, endpoint: Option<String>) -> aws_sdk_sqs::Client {
        use aws_smithy_http_client::tls::{Provider, TlsContext, rustls_provider::CryptoMode};
        let tls = TlsContext::builder().with_trust_store(trust_store()).build().expect("a trust store is all it takes");
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .tls_context(tls)
            .build_https();
        let mut config = aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region))
            .credentials_provider(credentials)
            .http_client(http);
        if let Some(url) = endpoint {
            config = config.endpoint_url(url);
        }
        aws_sdk_sqs::Client::from_conf(config.build())
    }

    /// Mozilla's roots, compiled in, as the database and upstream clients trust them
    /// (webpki-roots). The SDK's default store is the system's, which it reads when the
    /// client is built: 146 files of /etc/ssl/certs here, 1-4 ms of a cold start's init,
    /// I/O that init must not do. The SDK takes extra roots as PEM only, so each root's
    /// DER is wrapped in PEM; it parses them back when it makes its TLS configuration.
    fn trust_store() -> aws_smithy_http_client::tls::TrustStore {
        let mut store = aws_smithy_http_client::tls::TrustStore::empty();
        for pem in roots_as_pem() {
            store.add_pem_certificate(pem);
        }
        store
    }

    fn roots_as_pem() -> impl Iterator<Item = String> {
        use base64::Engine;
        webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().map(|root| {
            let body = base64::engine::general_purpose::STANDARD.encode(root.as_ref());
            let mut pem = String::with_capacity(body.len() + body.len() / 64 + 64);
            pem.push_str("-----BEGIN CERTIFICATE-----\n");
            for line in body.as_bytes().chunks(64) {
                pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
                pem.push('\n');
            }
            pem.push_str("-----END CERTIFICATE-----\n");
            pem
        })
    }

    /// SendMessageBatch takes at most ten messages.
    const SEND_MAX: usize = 10;

    impl Publisher for SqsPublisher {
        /// Sends of ten at once, side by side: the relay hands over a wave with at most
        /// one event per subject (message group), so no two sends race within a group.
        async fn publish(&self, batch: &[Envelope]) -> Vec<Result<(), String>> {
            let fifo = self.queue_url.ends_with(".fifo");
            let mut sends = Vec::new();
            for chunk in batch.chunks(SEND_MAX) {
                let mut entries = Vec::with_capacity(chunk.len());
                for (i, e) in chunk.iter().enumerate() {
                    let body = serde_json::to_string(e).expect("envelopes serialize");
                    let mut entry = SendMessageBatchRequestEntry::builder().id(i.to_string()).message_body(body);
                    if fifo {
                        entry =
                            entry.message_group_id(e.subject_id.to_string()).message_deduplication_id(e.id.to_string());
                    }
                    match entry.build() {
                        Ok(entry) => entries.push(entry),
                        Err(err) => return batch.iter().map(|_| Err(err.to_string())).collect(),
                    }
                }
                let send =
                    self.client.send_message_batch().queue_url(&self.queue_url).set_entries(Some(entries)).send();
                sends.push((chunk.len(), tokio::spawn(send)));
            }
            let mut outcomes = Vec::with_capacity(batch.len());
            for (len, send) in sends {
                match send.await {
                    Err(err) => outcomes.extend((0..len).map(|_| Err(err.to_string()))),
                    Ok(Err(err)) => {
                        let reason = aws_sdk_sqs::error::DisplayErrorContext(&err).to_string();
                        outcomes.extend((0..len).map(|_| Err(reason.clone())));
                    }
                    Ok(Ok(out)) => {
                        let mut sent: Vec<Result<(), String>> = vec![Ok(()); len];
                        for failed in out.failed() {
                            if let Some(slot) = failed.id().parse::<usize>().ok().and_then(|i| sent.get_mut(i)) {
                                *slot = Err(format!("{}: {}", failed.code(), failed.message().unwrap_or("")));
                            }
                        }
                        outcomes.extend(sent);
                    }
                }
            }
            outcomes
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The read() calls this thread has made so far (`syscr` of /proc/thread-self/io):
        /// the thread's own, so the other tests running beside it do not count.
        fn reads_so_far() -> u64 {
            let io = std::fs::read_to_string("/proc/thread-self/io").expect("Linux's per-thread I/O counters");
            io.lines().find_map(|l| l.strip_prefix("syscr: ")).and_then(|n| n.parse().ok()).expect("a syscr line")
        }

        #[test]
        fn building_the_sqs_client_reads_no_file() {
            let before = reads_so_far();
            let client = client("eu-west-1".into(), Credentials::new("a", "b", None, None, "test"), None);
            // Reading the counters once takes a read() or two of its own.
            let reads = reads_so_far() - before;
            assert!(reads <= 4, "building the client made {reads} read() calls");
            drop(client);
        }

        #[test]
        fn each_root_reads_back_from_its_pem_as_the_same_certificate() {
            use rustls::pki_types::{CertificateDer, pem::PemObject};
            let pems: Vec<String> = roots_as_pem().collect();
            assert!(pems.len() > 100, "Mozilla's store has well over a hundred roots");
            for (pem, root) in pems.iter().zip(webpki_root_certs::TLS_SERVER_ROOT_CERTS) {
                let read = CertificateDer::from_pem_slice(pem.as_bytes()).expect("a PEM certificate");
                assert_eq!(read.as_ref(), root.as_ref());
            }
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
