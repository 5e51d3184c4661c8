//! The crate every reservation function shares: the domain, the database code and the
//! adapters. Where each mechanism lives:
//!
//! - [`domain`]: the vocabulary (resources, reservations, statuses, intents, the
//!   waitlist, the event kinds in `events`, `Patch` for clearable fields) and the pure
//!   rules: range validation (`validate`), the load profile behind `free` (`load`),
//!   calendar rules (`calendar`: the rules as written, local time, judging a range, the
//!   grid of slots), booking policies (`policies`: deadlines, extension, limits and
//!   their windows), `recurrence` (the RRULE subset of series, expanded in a zone's
//!   wall-clock time), `ical` (calendar feeds as RFC 5545 text: folding, escaping,
//!   the derived `SEQUENCE`) and `webhooks` (what an admin registers, and its rules).
//!   No I/O, no Lambda types.
//! - [`db`]: its own settings (`settings`), the pool (`pool`), the migration step
//!   (`migrate`), its errors (`error`), and one module of named SQL per table
//!   (`resources`, `reservations`, `waitlist`, `idempotency`, `outbox`, `intents`,
//!   `breakers`, `upstream_views`, `seat_polls`, `webhooks`, `series`, `feeds`, `pools`,
//!   `cursor_key`), plus `hold` (the one-statement hold), `lapse` (holds past their
//!   expiry), `limits` (what a principal has live on a resource), `reservation_lists`,
//!   and `run` (the one way every named statement reaches PostgreSQL, `DB_STATEMENTS`).
//!   The rules that make double-booking impossible are SQL: the exclusion constraint on
//!   the kept ranges of capacity-1 resources (`migrations/`), the load check and the
//!   hold (`sql/functions/`).
//! - [`booking`]: the operations, one file each: `resources`, `hold` (where the race is
//!   settled: one statement when it can, the general path otherwise), `confirm`,
//!   `release`, `reschedule`, `extend` (a hold kept longer), `availability`, `calendar` (the rules judged against the
//!   bookings around a range), `limits` (booking limits judged under the lock),
//!   `waitlist`, `handover` (freed capacity to the waitlist, first fit in FIFO order),
//!   `group` (bookings of several items), `pools`, `series` (recurring series, each
//!   occurrence held by `hold`'s general path or `group`, and the scope of a change to
//!   them), `feeds` (calendar feeds: tokens stored as hashes, the bookings a feed
//!   shows), `waits`, `webhooks` (endpoints and their delivery log, for admins), `sweep`
//!   (the scheduled expiry and purges) and
//!   `lists` (keyset pages with signed cursors, `cursor`). The lock order is written in
//!   `booking`'s overview. Each takes a client or a transaction and the current time,
//!   so a caller composes them into one transaction and a test moves the clock.
//! - [`intents`]: upstream writes as durable intents: the worker's steps (`worker`),
//!   the lease reaper and requeue (`reaper`), and waits for upstream seats (`wait`:
//!   the per-seat poll that books an `auto_book` waiter when the seat frees).
//! - [`upstream`]: the system-of-record adapter, the shared circuit breaker
//!   (`breaker`) and the shared single-flight read cache (`cache`).
//! - [`outbox`]: the relay (after commit and from the sweeper) to SQS, with its
//!   publishers and the one message type of both queues (`Envelope`).
//! - `sqs` (the `sqs` feature): the SQS client the publishers and the notifier call,
//!   the AWS SDK's, built from a Lambda's environment without I/O.
//! - [`notify`]: signed webhooks (Standard Webhooks 1.0): the signature, the retry
//!   schedule, delivery of one event to the endpoints that want it, the delivery log and
//!   disabling (`webhook_endpoints`, `webhook_deliveries`, `webhook_delivery_attempts`,
//!   `webhook_events`), and the resends admins ask for (`webhook_resends`).
//! - [`http`]: the adapter from `lambda_http` requests to those operations: routing
//!   (`routes`), identity, strict JSON bodies and query strings (`request`; `fields`,
//!   with its `strict` parser and its value `readers`; `lists` for the lists'
//!   parameters), idempotency keys (`idempotency`), the catalogue of problem types
//!   (`problem_types`) and the one mapping of every failure to RFC 9457 problem JSON
//!   (`problem`).
//! - [`config`], [`secret`] (a value kept out of logs), [`clock`], [`metrics`]
//!   (CloudWatch EMF lines): the process around it.
//!
//! PostgreSQL is the only authority: the guarantees live in constraints, row locks and
//! short transactions, never in this process's memory.

pub mod booking;
pub mod clock;
pub mod config;
pub mod db;
pub mod domain;
pub mod http;
pub mod intents;
pub mod metrics;
pub mod notify;
pub mod outbox;
pub mod secret;
#[cfg(feature = "sqs")]
pub mod sqs;
pub mod upstream;

pub use clock::{Clock, SystemClock};
pub use config::Config;

use std::sync::Arc;

/// What a handler needs, built once at cold start and shared by every invocation.
#[derive(Clone)]
pub struct AppState {
    pub pool: deadpool_postgres::Pool,
    pub config: Arc<Config>,
    pub clock: Arc<dyn Clock>,
    /// The system of record, where this function calls it.
    pub upstream: Option<Arc<dyn upstream::SystemOfRecord>>,
    /// Where intent messages go after commit.
    pub intents: Arc<outbox::Queue>,
    /// Who publishes the events a request wrote (see [`outbox::EventsRelay`]).
    pub events: Arc<outbox::EventsRelay>,
    /// Places for retries waiting on an in-progress idempotency key (see `http`).
    pub idempotency_waiters: Arc<tokio::sync::Semaphore>,
    /// The lists' cursor key, read from the database on first use (see
    /// [`AppState::cursor_key`]).
    cursor_key: Arc<tokio::sync::OnceCell<booking::CursorKey>>,
}

impl AppState {
    pub fn new(pool: deadpool_postgres::Pool, config: Config) -> Self {
        Self {
            idempotency_waiters: Arc::new(tokio::sync::Semaphore::new(config.idempotency_max_waiters)),
            pool,
            config: Arc::new(config),
            clock: Arc::new(SystemClock),
            upstream: None,
            intents: Arc::new(outbox::Queue::None),
            events: Arc::new(outbox::EventsRelay::Sweep),
            cursor_key: Arc::new(tokio::sync::OnceCell::new()),
        }
    }

    /// The key that signs the lists' cursors: read once per process, on the first list
    /// request (cold start does no I/O), and kept.
    pub async fn cursor_key(&self, c: &impl db::GenericClient) -> Result<&booking::CursorKey, db::DbError> {
        self.cursor_key.get_or_try_init(|| async { Ok(booking::CursorKey::new(db::cursor_key::read(c).await?)) }).await
    }

    pub fn with_intents(mut self, queue: outbox::Queue) -> Self {
        self.intents = Arc::new(queue);
        self
    }

    pub fn with_events_relay(mut self, relay: outbox::EventsRelay) -> Self {
        self.events = Arc::new(relay);
        self
    }

    pub fn with_upstream(mut self, upstream: Option<Arc<dyn upstream::SystemOfRecord>>) -> Self {
        self.upstream = upstream;
        self
    }

    /// The HTTP adapter of the system of record, when `UPSTREAM_BASE_URL` is set.
    #[cfg(feature = "upstream")]
    pub fn with_upstream_from_config(self) -> Self {
        let sor = upstream::HttpSystemOfRecord::from_config(&self.config.upstream)
            .map(|u| Arc::new(u) as Arc<dyn upstream::SystemOfRecord>);
        self.with_upstream(sor)
    }

    /// Built once in every `main.rs`: configuration from the environment and a pool
    /// that connects lazily, so cold start does no network I/O.
    pub fn from_env(mode: config::Defaults) -> Result<Self, config::ConfigError> {
        let config = Config::from_env(mode)?;
        let pool = db::pool(&config.database)?;
        Ok(Self::new(pool, config))
    }
}
