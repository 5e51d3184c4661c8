//! The external system of record for `authority: upstream` resources.
//!
//! [`SystemOfRecord`] is the small trait a vendor adapter implements (one file);
//! [`HttpSystemOfRecord`] speaks the generic HTTP protocol (the four calls of
//! [`SystemOfRecord`], bearer-token auth, JSON bodies). Around every
//! call sit the shared circuit breaker ([`breaker`]) and, for reads, the shared
//! single-flight cache ([`cache`]). No call is ever made inside a database
//! transaction.

pub mod breaker;
pub mod cache;
#[cfg(feature = "upstream")]
mod http;

#[cfg(feature = "upstream")]
pub use http::HttpSystemOfRecord;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::pin::Pin;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A claim the upstream holds on a seat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Block {
    /// The claim it makes: one unit of its range.
    pub fn claim(&self) -> crate::domain::Claim {
        crate::domain::Claim { start: self.start, end: self.end, quantity: 1 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// 409: the seat is taken (someone upstream won).
    #[error("the seat is taken upstream")]
    Taken,
    /// 401/403: our credential was rejected.
    #[error("the upstream rejected our credential")]
    Unauthorized,
    /// 5xx, a timeout, a reset: the outcome of a write is unknown. Counts against the
    /// breaker. A write that ends here must never be sent again blindly.
    #[error("the upstream failed: {0}")]
    Unknown(String),
    /// An answer outside the protocol.
    #[error("the upstream answered outside the protocol: {0}")]
    Protocol(String),
    /// The breaker is open: nothing was sent.
    #[error("the upstream is unavailable (breaker open)")]
    Unavailable { retry_after_seconds: u64 },
}

impl UpstreamError {
    /// Whether this answer says the upstream is unhealthy (for the breaker).
    pub fn is_failure(&self) -> bool {
        matches!(self, UpstreamError::Unknown(_))
    }
}

/// The system of record's protocol, one method per call: `GET /seats/{seat}/availability`
/// (what is taken), `POST /seats/{seat}/reservations` (a write that is not idempotent:
/// 201 with a charge id, 409 when taken), `GET /charges/current?reference=` (the read
/// after an unknown outcome) and `DELETE /charges/{id}` (idempotent). `seat` is a
/// resource's `upstream_ref`; `reference` is our reservation id.
pub trait SystemOfRecord: Send + Sync {
    fn taken(
        &self,
        seat: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> BoxFuture<'_, Result<Vec<Block>, UpstreamError>>;
    /// Returns the charge id.
    fn reserve(
        &self,
        seat: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        reference: &str,
    ) -> BoxFuture<'_, Result<String, UpstreamError>>;
    /// The "current charge" read: the charge for a reference, if one exists.
    fn current_charge(&self, reference: &str) -> BoxFuture<'_, Result<Option<String>, UpstreamError>>;
    fn cancel(&self, charge_id: &str) -> BoxFuture<'_, Result<(), UpstreamError>>;
}
