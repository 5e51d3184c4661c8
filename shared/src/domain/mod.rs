//! The booking vocabulary and its pure rules. Nothing here does I/O or knows about
//! Lambda; everything here is a value that tests build by hand.

pub mod calendar;
pub mod ical;
mod load;
pub mod messages;
mod patch;
pub mod policies;
pub mod recurrence;
mod validate;

pub use calendar::{CalendarChange, CalendarRules, Judge, Rule, Schedule};
pub use load::{Claim, FreePiece, free_pieces, load_segments, peak_load};
pub use patch::Patch;
pub use policies::{
    BookingLimit, Counted, HoldsReached, LimitReached, Policies, PoliciesChange, Window, judge_limits, limits_reach,
};
pub use validate::{FieldError, Limits, Metadata, validate_metadata, validate_range};

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

/// A stored or sent text that names no variant of the enum it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a known {kind}")]
pub struct UnknownValue {
    pub kind: &'static str,
    pub value: String,
}

/// An enum stored and sent as text: `as_str` and `FromStr` from one table, so the two
/// directions cannot drift apart and an unknown text is an error, never a default.
macro_rules! text_enum {
    ($(#[$meta:meta])* pub enum $name:ident as $kind:literal { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownValue;

            fn from_str(s: &str) -> Result<Self, UnknownValue> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(UnknownValue { kind: $kind, value: other.to_string() }),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub mod events;
pub use events::EventKind;
// After `text_enum!`, which it uses.
pub mod webhooks;

text_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Authority as "authority" {
        /// PostgreSQL decides.
        Local = "local",
        /// An external system of record decides (`upstream::SystemOfRecord`).
        Upstream = "upstream",
    }
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
    pub metadata: Metadata,
    /// Set once the resource is archived: no new holds, joins or reschedules.
    pub archived_at: Option<DateTime<Utc>>,
    /// Its time zone, hours, buffers, notice, advance and grid, as fields of its own.
    #[serde(flatten)]
    pub calendar: CalendarRules,
    /// Its deadlines for cancels and moves, and how long a hold may be kept.
    #[serde(flatten)]
    pub policies: Policies,
    /// The length a booking page offers first, in minutes; `None`: the grid's step, or
    /// an hour. A hint for clients: no booking is judged by it.
    pub default_duration_minutes: Option<i32>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

text_enum! {
    /// How an item of a booking picks a member of its pool: the first free in the
    /// order of fewest live bookings near the range (ties by id), or in the pool's order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum PoolStrategy as "pool strategy" {
        LeastBooked = "least_booked",
        Ordered = "ordered",
    }
}

/// Resources that can stand in for one another: an item `{"pool_id"}` of a booking is
/// any one member free for the whole range under its own rules.
#[derive(Debug, Clone, Serialize)]
pub struct Pool {
    pub id: Uuid,
    pub name: String,
    pub strategy: PoolStrategy,
    /// The members, in the pool's order.
    pub resource_ids: Vec<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

text_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum Status as "reservation status" {
        Held = "HELD",
        Confirming = "CONFIRMING",
        Confirmed = "CONFIRMED",
        Released = "RELEASED",
        Expired = "EXPIRED",
        Cancelled = "CANCELLED",
        Failed = "FAILED",
    }
}

impl Status {
    /// Whether a row in this status claims capacity (held, confirming or confirmed).
    pub fn is_active(self) -> bool {
        matches!(self, Status::Held | Status::Confirming | Status::Confirmed)
    }
}

text_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum FailureReason as "failure reason" {
        Race = "race",
        Auth = "auth",
        Upstream = "upstream",
    }
}

text_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Source as "reservation source" {
        Request = "request",
        WaitlistOffer = "waitlist_offer",
    }
}

text_enum! {
    /// Where an upstream write stands (see `intents`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum IntentState as "intent state" {
        Requested = "REQUESTED",
        /// A wait for an upstream seat, backing off while the upstream shows it taken.
        WaitingForSeat = "WAITING_FOR_SEAT",
        Reserving = "RESERVING",
        Succeeded = "SUCCEEDED",
        FailedRace = "FAILED_RACE",
        FailedAuth = "FAILED_AUTH",
        FailedUpstream = "FAILED_UPSTREAM",
        /// A wait that ended without a booking: the waiter left, or its range started.
        Cancelled = "CANCELLED",
    }
}

text_enum! {
    /// What an intent writes upstream.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum IntentKind as "intent kind" {
        /// `POST /seats/{ref}/reservations`: not idempotent, never replayed.
        Reserve = "reserve",
        /// `DELETE /charges/{charge_id}`: idempotent, retried after an unknown outcome.
        Cancel = "cancel",
        /// A wait for an upstream seat (`auto_book`): the same POST as a reserve once the
        /// seat shows free, and back to waiting when the race is lost.
        Wait = "wait",
    }
}

/// A reservation's upstream confirmation, as the reservation document shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Intent {
    pub id: Uuid,
    pub state: IntentState,
    pub attempts: i32,
    pub updated_at: DateTime<Utc>,
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
    pub intent: Option<Intent>,
    /// What the booking holds: its one resource, or each item of a booking of several
    /// in request order (the reservation's own `resource_id` and `quantity` are the
    /// first item's).
    pub items: Vec<Item>,
    /// The recurring series this reservation is an occurrence of, if any.
    pub series_id: Option<Uuid>,
    pub metadata: Metadata,
    /// The principal whose request made the latest change (the owner, or an admin
    /// acting for them); `None` when the service made it (an expiry, a waitlist
    /// offer, the upstream worker's verdict).
    pub acted_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One item of a booking: a resource, the pool it was picked from (if any) and the
/// quantity held of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Item {
    pub resource_id: Uuid,
    pub pool_id: Option<Uuid>,
    pub quantity: i32,
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

text_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum WaitlistStatus as "waitlist status" {
        Waiting = "WAITING",
        Offered = "OFFERED",
        Accepted = "ACCEPTED",
        Expired = "EXPIRED",
        Cancelled = "CANCELLED",
    }
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
    /// The offer (a `HELD` reservation in the owner's name), once offered; the booking
    /// of an `auto_book` wait, once accepted.
    pub reservation_id: Option<Uuid>,
    /// Booked by the worker when the upstream seat frees (upstream resources only).
    pub auto_book: bool,
    /// The wait intent of an `auto_book` entry.
    pub intent: Option<Intent>,
    /// The waiter left while a write was in flight; the wait ends once it settles.
    #[serde(skip)]
    pub leave_requested: bool,
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
            items: vec![Item { resource_id: Uuid::nil(), pool_id: None, quantity: 1 }],
            series_id: None,
            metadata: Metadata::new(),
            acted_by: None,
            created_at: t,
            updated_at: t,
        }
    }

    /// The text of every variant is what serde sends, and parses back to it.
    fn round_trips<T>(all: &[T])
    where
        T: Copy + PartialEq + std::fmt::Debug + Serialize + std::str::FromStr + std::fmt::Display,
    {
        for v in all {
            assert_eq!(serde_json::to_value(v).unwrap(), serde_json::Value::String(v.to_string()));
            assert_eq!(v.to_string().parse::<T>().ok(), Some(*v));
        }
    }

    #[test]
    fn every_stored_enum_reads_back_what_it_writes_and_sends_the_same_text() {
        round_trips(Authority::ALL);
        round_trips(Status::ALL);
        round_trips(FailureReason::ALL);
        round_trips(Source::ALL);
        round_trips(WaitlistStatus::ALL);
        round_trips(IntentState::ALL);
        round_trips(IntentKind::ALL);
    }

    #[test]
    fn an_unknown_text_is_an_error_not_a_default() {
        let e = "PENDING".parse::<Status>().unwrap_err();
        assert_eq!(e.to_string(), "\"PENDING\" is not a known reservation status");
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
