//! The circuit breaker, its state in PostgreSQL so that one instance's failures protect
//! every instance. Closed: calls pass, consecutive failures (5xx, timeout, reset) are
//! counted. At the threshold it opens: nothing reaches the upstream until the cool-down
//! passes. Then exactly one probe goes through (whoever takes it first, across
//! instances); its success closes the breaker, its failure opens it for another
//! cool-down. Everyone else is answered at once with a `Retry-After`.

use super::UpstreamError;
use crate::Clock;
use crate::config::UpstreamConfig;
use crate::db::{DbError, GenericClient, breakers};
use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use std::future::Future;
use uuid::Uuid;

/// The one system of record this deployment talks to.
pub const NAME: &str = "upstream";

#[derive(Debug, Clone, Copy)]
pub struct Breaker {
    pub failures: i32,
    pub open_for: chrono::Duration,
    /// How long a probe may take before another may try.
    pub probe_window: chrono::Duration,
}

impl Breaker {
    pub fn from_config(c: &UpstreamConfig) -> Self {
        Self {
            failures: c.breaker_failures,
            open_for: c.breaker_open,
            probe_window: chrono::Duration::from_std(c.connect_timeout + c.request_timeout)
                .unwrap_or(chrono::Duration::seconds(10))
                + chrono::Duration::seconds(1),
        }
    }
}

/// Permission to call.
#[derive(Debug, Clone, Copy)]
pub enum Pass {
    /// Closed; `clean` when no failure is counted (a success then writes nothing).
    Closed {
        clean: bool,
    },
    Probe(Uuid),
}

fn retry_after(open_until: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
    ((open_until - now).num_milliseconds().max(0) as u64).div_ceil(1000).max(1)
}

/// Is the breaker open now? A read only: for requests that would need the upstream
/// later (a confirm), to refuse them fast instead of queueing work that cannot run.
pub async fn open_now(c: &impl GenericClient, now: DateTime<Utc>) -> Result<Option<u64>, DbError> {
    Ok(match breakers::read(c, NAME).await? {
        Some((_, Some(open_until))) if open_until > now => Some(retry_after(open_until, now)),
        _ => None,
    })
}

impl Breaker {
    pub async fn admit(
        &self,
        c: &impl GenericClient,
        now: DateTime<Utc>,
    ) -> Result<Result<Pass, UpstreamError>, DbError> {
        match breakers::read(c, NAME).await? {
            None => Ok(Ok(Pass::Closed { clean: true })),
            Some((failures, None)) => Ok(Ok(Pass::Closed { clean: failures == 0 })),
            Some((_, Some(open_until))) if open_until > now => {
                Ok(Err(UpstreamError::Unavailable { retry_after_seconds: retry_after(open_until, now) }))
            }
            Some(_) => {
                let owner = Uuid::new_v4();
                if breakers::take_probe(c, NAME, owner, now, now + self.probe_window).await? {
                    tracing::info!("breaker half-open: probing the upstream");
                    Ok(Ok(Pass::Probe(owner)))
                } else {
                    Ok(Err(UpstreamError::Unavailable { retry_after_seconds: 1 }))
                }
            }
        }
    }

    pub async fn record<T>(
        &self,
        c: &impl GenericClient,
        pass: Pass,
        outcome: &Result<T, UpstreamError>,
        now: DateTime<Utc>,
    ) -> Result<(), DbError> {
        let failed = outcome.as_ref().err().is_some_and(UpstreamError::is_failure);
        let probe = match pass {
            Pass::Probe(owner) => Some(owner),
            Pass::Closed { .. } => None,
        };
        if failed {
            let open_until = breakers::failure(c, NAME, now, self.failures, self.open_for, probe).await?;
            if open_until.is_some_and(|t| t > now) {
                crate::metrics::count("BreakerOpen");
                tracing::warn!(?open_until, "breaker open");
            }
        } else if !matches!(pass, Pass::Closed { clean: true }) {
            breakers::success(c, NAME, now).await?;
        }
        Ok(())
    }

    /// Counts an upstream call and whether it failed, for the metrics.
    pub fn note_call<T>(&self, outcome: &Result<T, UpstreamError>) {
        let failed = outcome.as_ref().err().is_some_and(UpstreamError::is_failure);
        crate::metrics::emit(&[
            ("UpstreamCalls", 1.0, "Count"),
            ("UpstreamFailures", f64::from(u8::from(failed)), "Count"),
        ]);
    }

    /// Runs `call` if the breaker lets it, and records how it went. No database
    /// connection is held while the call is out: a slow upstream must not hold the
    /// pool, so a connection is taken from it before and after the call. A failure
    /// says which side of the call it came from: before it nothing was sent.
    pub async fn guard<T, F>(
        &self,
        pool: &Pool,
        clock: &dyn Clock,
        call: F,
    ) -> Result<Result<T, UpstreamError>, Failure>
    where
        F: Future<Output = Result<T, UpstreamError>>,
    {
        let client = pool.get().await.map_err(|e| Failure::BeforeTheCall(e.into()))?;
        let admitted = self.admit(&client, clock.now()).await.map_err(Failure::BeforeTheCall)?;
        drop(client);
        let pass = match admitted {
            Ok(pass) => pass,
            Err(refused) => {
                crate::metrics::count("BreakerRejections");
                return Ok(Err(refused));
            }
        };
        let outcome = call.await;
        let failed = outcome.as_ref().err().is_some_and(UpstreamError::is_failure);
        crate::metrics::emit(&[
            ("UpstreamCalls", 1.0, "Count"),
            ("UpstreamFailures", f64::from(u8::from(failed)), "Count"),
        ]);
        let client = pool.get().await.map_err(|e| Failure::AfterTheCall(e.into()))?;
        self.record(&client, pass, &outcome, clock.now()).await.map_err(Failure::AfterTheCall)?;
        Ok(outcome)
    }
}

/// A local (database) failure around a guarded call, by whether the call went out.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("before the upstream call")]
    BeforeTheCall(#[source] DbError),
    #[error("after the upstream call")]
    AfterTheCall(#[source] DbError),
}

impl Failure {
    pub fn into_inner(self) -> DbError {
        match self {
            Failure::BeforeTheCall(e) | Failure::AfterTheCall(e) => e,
        }
    }
}
