//! The booking operations. Each takes a client or a transaction and the current time;
//! none opens or commits a transaction itself, so a caller can compose several (and an
//! idempotency record) into one.
//!
//! # The lock order
//!
//! One order for the whole codebase: **the principal's row, then the resource rows (in
//! id order), then its intents, then reservation rows (a booking's lead first, then its
//! items in order), then waitlist entries** (and last a seat's poll schedule,
//! `seat_polls`, which a path touches after everything else or alone). A path may skip
//! a level but never goes back up one. The principal's row (`principals`, locked by
//! `principal_holds`) is taken only by the paths that make a hold at its owner's
//! request while the limit of active holds per principal is on (the one-statement
//! hold and booking of several, the general hold, bookings of several and series), so
//! that one principal's holds on different resources are counted one after another
//! (see `limits`); a path takes one principal's row at most.
//!
//! Every path that changes a resource's load takes the resource lock first, so those
//! paths serialize per resource and never deadlock; paths on different resources never
//! contend. A path that changes several resources' loads (a booking of several items, a
//! series) takes all their rows in one statement, in id order, so that two such paths
//! wait for each other instead of deadlocking. Every operation on an existing booking
//! (confirm, extend, release, move, and the scoped ones of a series) takes the lock of
//! every resource the booking holds, then every row of the booking, and only then
//! reads the clock (`release::lock_owned`): a path that wrote down a lapsed row of the
//! booking and gave its capacity away did so under that row's resource lock, so the
//! operation either sees the write-down or is seen by it, never neither.
//!
//! One path takes the resource row shared: the one-statement hold of a capacity-1
//! resource (`FOR SHARE`), whose holds go side by side and are judged by the exclusion
//! constraint; it still waits for, and is waited on by, every path that takes the row
//! exclusively, so those never meet a hold in flight. A transaction never takes the
//! row shared and then exclusively: two doing so deadlock.
//!
//! Within the reservation rows, a booking's lead comes before its items everywhere:
//! every write-down of lapses locks the leads of the bookings it touches first, in id
//! order, before any row (`reservation_expire_lapsed`, which every statement that
//! writes lapses down calls), so the trigger
//! `reservation_booking_lapse`, which writes the rest of a booking down, holds its
//! lead, and two write-downs of one booking from two of its resources wait for each
//! other instead of deadlocking.
//!
//! Each lock is taken in a round trip of its own, never pipelined with the statements
//! after it (`try_join!` on one transaction): on a fresh connection pipelined
//! statements can run out of order, against this order.
//!
//! # Judging what is written
//!
//! A statement that writes every row of a booking (`id = $1 OR booking_id = $1`)
//! writes only when every row is in the state the change starts from
//! (`reservations::SET_STATUS`, `reservations::EXTEND`), and otherwise writes nothing.
//! So no row written down (expired, released, cancelled) is ever written back to an
//! active status, whatever its lead says.

mod availability;
mod calendar;
mod confirm;
mod cursor;
mod extend;
mod feeds;
mod group;
mod handover;
mod hold;
mod limits;
mod lists;
mod pools;
mod release;
mod reschedule;
mod resources;
mod series;
pub mod sweep;
mod waitlist;
pub mod waits;
mod webhooks;

pub use crate::db::hold::Confirmation;
pub use availability::{
    Availability, AvailabilityRequest, MAX_TAKEN, SlotsRequest, Taken, TakenStatus, availability, check_window,
    get_reservation, slots,
};
pub use confirm::{Confirmed, confirm};
pub use cursor::CursorKey;
pub use extend::extend;
pub use feeds::{
    CANCELLED_KEPT_DAYS, FEED_AHEAD_DAYS, FEED_PAST_DAYS, FeedUrl, MAX_EVENTS, create_feed, delete_feed, read_feed,
    rotate_feed,
};
pub use group::{
    GroupAttempt, GroupRequest, ItemRequest, MAX_ITEMS, Refusal, RefusedItem, SlotsTogether, Span, Target,
    hold_items_at_once, reserve_items, slots_together,
};
pub use handover::{hand_over, on_freed};
pub use hold::{Approval, Attempt, ReserveRequest, Reserved, hold_at_once, reserve};
pub use lists::{
    DEFAULT_LIMIT, MAX_LIMIT, OwnWaitlistFilter, Page, PageRequest, ReservationFilter, list_own_waitlist, list_pools,
    list_reservations, list_resources, list_waitlist, list_webhook_deliveries, list_webhooks,
};
pub use pools::{MAX_MEMBERS, NewPool, PoolChange, create_pool, delete_pool, get_pool, update_pool};
pub(crate) use release::request_cancel;
pub use release::{Released, release};
pub use reschedule::{Change, Rescheduled, reschedule};
pub use resources::{
    NewResource, ResourceChange, ResourceDefaults, archive_resource, create_resource, get_resource, update_resource,
};
pub use series::{
    Mode, RefusedOccurrence, Scope, Series, SeriesOccurrence, SeriesRequest, SeriesTarget, create_series, get_series,
    in_scope, reschedule_series, series_after,
};
pub use waitlist::{JoinRequest, Joined, get_entry, join_waitlist, leave_waitlist};
pub use webhooks::{
    KEEP_PREVIOUS_DEFAULT_SECONDS, KEEP_PREVIOUS_MAX_SECONDS, WebhookRequest, create_webhook, delete_webhook,
    get_webhook, recover_webhook, retry_webhook_delivery, rotate_webhook_secret,
};

use crate::db::{self, DbError};
use crate::domain::policies::Closed;
use crate::domain::{FieldError, HoldsReached, LimitReached, Rule, Status};

/// Expected outcomes that are not successes, and the one unexpected kind (`Db`).
#[derive(Debug, thiserror::Error)]
pub enum BookingError {
    #[error("invalid request")]
    Validation(Vec<FieldError>),
    #[error("resource not found")]
    ResourceNotFound,
    #[error("reservation not found")]
    ReservationNotFound,
    #[error("waitlist entry not found")]
    WaitlistEntryNotFound,
    #[error("webhook not found")]
    WebhookNotFound,
    /// No attempt of this id is in the endpoint's log.
    #[error("webhook delivery not found")]
    WebhookDeliveryNotFound,
    /// The endpoint is disabled: it takes no resend until it is recovered.
    #[error("webhook endpoint disabled")]
    WebhookDisabled,
    #[error("pool not found")]
    PoolNotFound(uuid::Uuid),
    #[error("series not found")]
    SeriesNotFound,
    /// No live feed has this token, or no feed of this id is the caller's.
    #[error("feed not found")]
    FeedNotFound,
    /// Occurrences of a series that could not be held: the series was not made, and
    /// the caller rolls its transaction back.
    #[error("occurrences of the series could not be held")]
    OccurrencesRefused(Vec<RefusedOccurrence>),
    /// Items of a booking of several that could not be held: the booking was not made,
    /// and the caller rolls its transaction back.
    #[error("items of the booking could not be held")]
    ItemsRefused(Vec<RefusedItem>),
    /// An upstream resource in a booking of several items (at this place).
    #[error("an upstream resource cannot be booked with others")]
    UpstreamInGroup { index: usize },
    #[error("the requested capacity is taken")]
    SlotUnavailable,
    #[error("the reservation is not held")]
    NotHeld(Status),
    #[error("the reservation is being confirmed upstream")]
    InFlight,
    /// A list cursor this service did not write for this list and these filters.
    #[error("the cursor is not one of this list")]
    InvalidCursor,
    #[error("the system of record is unavailable")]
    UpstreamUnavailable { retry_after_seconds: u64 },
    #[error("the resource is archived")]
    ResourceArchived,
    #[error("an upstream resource's bookings cannot be moved")]
    RescheduleNotSupported,
    #[error("the capacity is in use ahead")]
    CapacityInUse { peak: i64 },
    /// The owner's deadline to cancel or move the booking has passed.
    #[error("the {} deadline has passed", .0.deadline.field())]
    PolicyWindowClosed(Closed),
    /// A booking limit of the resource would be broken for the principal.
    #[error("booking limit reached")]
    LimitExceeded(LimitReached),
    /// The owner already has as many active holds across the service as the limit
    /// allows (`MAX_ACTIVE_HOLDS_PER_PRINCIPAL`).
    #[error("at most {} active holds per principal", .0.max)]
    HoldsExceeded(HoldsReached),
    /// The booking was moved as often as the resource allows.
    #[error("the booking was moved {max} times already")]
    RescheduleLimit { max: i32 },
    /// The hold cannot be kept longer.
    #[error("the hold cannot be extended")]
    HoldExtensionLimit,
    /// The range breaks one of the resource's calendar rules.
    #[error("the range breaks the calendar rule {}", .0.as_str())]
    OutsideSchedule(Rule),
    #[error(transparent)]
    Db(#[from] DbError),
}

fn invalid(field: &str, message: impl Into<String>) -> BookingError {
    BookingError::Validation(vec![FieldError::new(field, message)])
}

/// Whether PostgreSQL answers.
pub async fn health(pool: &deadpool_postgres::Pool) -> Result<(), DbError> {
    db::ping(pool).await
}
