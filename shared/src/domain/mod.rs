//! The booking vocabulary and its pure rules. Nothing here does I/O or knows about
//! Lambda; everything here is a value that tests build by hand.

mod load;
mod validate;

pub use load::{Claim, FreePiece, free_pieces, peak_load};
pub use validate::{FieldError, Limits, validate_range};

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Authority {
    /// PostgreSQL decides.
    Local,
    /// An external system of record decides (see upstream.md).
    Upstream,
}

#[derive(Debug, Clone, Serialize)]
pub struct Resource {
    pub id: Uuid,
    pub name: String,
    pub capacity: i32,
    pub authority: Authority,
    pub upstream_ref: Option<String>,
    pub hold_ttl_seconds: i32,
    pub offer_ttl_seconds: i32,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Held,
    Confirming,
    Confirmed,
    Released,
    Expired,
    Cancelled,
    Failed,
}

impl Status {
    /// Statuses that occupy capacity (a lapsed `Held` does not: see [`Reservation::as_of`]).
    pub const ACTIVE: [Status; 3] = [Status::Held, Status::Confirming, Status::Confirmed];

    pub fn is_active(self) -> bool {
        Self::ACTIVE.contains(&self)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureReason {
    Race,
    Auth,
    Upstream,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Request,
    WaitlistOffer,
}

#[derive(Debug, Clone, Serialize)]
pub struct Reservation {
    pub id: Uuid,
    pub resource_id: Uuid,
    pub owner: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub status: Status,
    pub expires_at: Option<DateTime<Utc>>,
    pub failure_reason: Option<FailureReason>,
    pub source: Source,
    /// The upstream confirmation, for upstream-authority resources once asked for.
    pub intent: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Reservation {
    /// A hold past its `expires_at` no longer blocks anything and reads as `EXPIRED`,
    /// whether or not a sweep has written that yet.
    pub fn is_lapsed(&self, now: DateTime<Utc>) -> bool {
        self.status == Status::Held && self.expires_at.is_some_and(|at| at <= now)
    }

    /// The reservation as a client sees it at `now`.
    pub fn as_of(mut self, now: DateTime<Utc>) -> Self {
        if self.is_lapsed(now) {
            self.status = Status::Expired;
        }
        if self.status != Status::Held {
            self.expires_at = None;
        }
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WaitlistStatus {
    Waiting,
    Offered,
    Accepted,
    Expired,
    Cancelled,
}

/// A place in a resource's FIFO queue for a range and quantity.
#[derive(Debug, Clone, Serialize)]
pub struct WaitlistEntry {
    pub id: Uuid,
    pub resource_id: Uuid,
    pub owner: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub status: WaitlistStatus,
    /// 1-based among the resource's waiting entries, while waiting.
    pub position: Option<i64>,
    /// The offer (a `HELD` reservation in the owner's name), once offered.
    pub reservation_id: Option<Uuid>,
    #[serde(skip)]
    pub seq: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Who is asking. The owner of everything created is always the principal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub id: String,
    pub admin: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn hold(expires_at: DateTime<Utc>) -> Reservation {
        let t = Utc.with_ymd_and_hms(2027, 3, 15, 10, 0, 0).unwrap();
        Reservation {
            id: Uuid::nil(),
            resource_id: Uuid::nil(),
            owner: "alice".into(),
            start: t,
            end: t + chrono::Duration::hours(1),
            quantity: 1,
            status: Status::Held,
            expires_at: Some(expires_at),
            failure_reason: None,
            source: Source::Request,
            intent: None,
            created_at: t,
            updated_at: t,
        }
    }

    #[test]
    fn a_hold_reads_as_expired_from_the_instant_it_lapses() {
        let at = Utc.with_ymd_and_hms(2027, 1, 1, 12, 0, 0).unwrap();
        let before = hold(at).as_of(at - chrono::Duration::milliseconds(1));
        assert_eq!(before.status, Status::Held);
        assert_eq!(before.expires_at, Some(at));
        let after = hold(at).as_of(at);
        assert_eq!(after.status, Status::Expired);
        assert_eq!(after.expires_at, None);
    }
}
