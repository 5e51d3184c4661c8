//! The HTTP boundary's error enum and its one mapping to RFC 9457 problem documents.

use super::{PROBLEM_JSON, Reply};
use crate::booking::{BookingError, Refusal, RefusedItem, RefusedOccurrence, Target};
use crate::config::AuthMode;
use crate::db::DbError;
use crate::domain::policies::Closed;
use crate::domain::{BookingLimit, FieldError, HoldsReached, LimitReached, Rule, Window};
use chrono::{DateTime, Utc};
use http::StatusCode;
use serde::Serialize;

/// Problem `type`s are this base plus the slug: a relative URI reference (RFC 9457
/// §3.1.1), which resolves against the API's own origin to the page that describes
/// the problem, `GET /v1/problems/{slug}`. Relative, because the origin is the
/// deployment's (an API Gateway URL, a custom domain, the dev server's port) and no
/// build knows it; an absolute base would name a host that serves nothing.
pub const PROBLEM_BASE: &str = "/v1/problems/";

/// The challenge of a 401 (RFC 6750): what a deployed client sends is a bearer token.
const JWT_CHALLENGE: &str = r#"Bearer realm="reservations""#;
/// Header identity mode keeps the scheme a deployed client will use, and says in the
/// standard parameters what this server reads instead.
const HEADER_CHALLENGE: &str = r#"Bearer realm="reservations", error="invalid_request", error_description="send the principal in the X-Principal header""#;

/// A problem type: what its answers carry (slug, status, title) and what its page
/// (`GET /v1/problems/{slug}`) says.
#[derive(Debug)]
pub struct ProblemType {
    pub slug: &'static str,
    pub status: u16,
    pub title: &'static str,
    /// What happened and what a client does about it.
    pub description: &'static str,
}

/// Every problem type this API answers, in status order: what `GET /v1/problems` pages
/// describe and what [`ApiError::problem_type`] answers with.
pub const PROBLEM_TYPES: &[ProblemType] = &[
    ProblemType::VALIDATION_ERROR,
    ProblemType::BAD_REQUEST,
    ProblemType::INVALID_CURSOR,
    ProblemType::UNAUTHENTICATED,
    ProblemType::FORBIDDEN,
    ProblemType::NOT_FOUND,
    ProblemType::RESOURCE_NOT_FOUND,
    ProblemType::RESERVATION_NOT_FOUND,
    ProblemType::WAITLIST_ENTRY_NOT_FOUND,
    ProblemType::WEBHOOK_NOT_FOUND,
    ProblemType::WEBHOOK_DELIVERY_NOT_FOUND,
    ProblemType::POOL_NOT_FOUND,
    ProblemType::SERIES_NOT_FOUND,
    ProblemType::FEED_NOT_FOUND,
    ProblemType::PROBLEM_TYPE_NOT_FOUND,
    ProblemType::METHOD_NOT_ALLOWED,
    ProblemType::SLOT_UNAVAILABLE,
    ProblemType::RESERVATION_NOT_HELD,
    ProblemType::RESERVATION_IN_FLIGHT,
    ProblemType::WEBHOOK_DISABLED,
    ProblemType::RESOURCE_ARCHIVED,
    ProblemType::RESCHEDULE_NOT_SUPPORTED,
    ProblemType::CAPACITY_IN_USE,
    ProblemType::POLICY_WINDOW_CLOSED,
    ProblemType::RESCHEDULE_LIMIT,
    ProblemType::HOLD_EXTENSION_LIMIT,
    ProblemType::LIMIT_EXCEEDED,
    ProblemType::IDEMPOTENCY_KEY_IN_PROGRESS,
    ProblemType::PAYLOAD_TOO_LARGE,
    ProblemType::URI_TOO_LONG,
    ProblemType::UNSUPPORTED_MEDIA_TYPE,
    ProblemType::OUTSIDE_SCHEDULE,
    ProblemType::IDEMPOTENCY_KEY_REUSED,
    ProblemType::UPSTREAM_NOT_GROUPABLE,
    ProblemType::REQUEST_HEADER_FIELDS_TOO_LARGE,
    ProblemType::INTERNAL_ERROR,
    ProblemType::UPSTREAM_UNAVAILABLE,
    ProblemType::DATABASE_UNAVAILABLE,
];

/// The catalogue: each problem type's slug, status, title and page text, written once.
impl ProblemType {
    pub const VALIDATION_ERROR: ProblemType = ProblemType {
        slug: "validation-error",
        status: 400,
        title: "The request is not valid",
        description: "A field of the body, a query parameter or the Idempotency-Key header is missing or not acceptable. `errors` lists every one, each with its field and a message; fix them all and send the request again.",
    };
    pub const BAD_REQUEST: ProblemType = ProblemType {
        slug: "bad-request",
        status: 400,
        title: "Bad request",
        description: "The HTTP layer could not read the request: a malformed request line, header or chunked body, or a body that did not arrive in time.",
    };
    pub const INVALID_CURSOR: ProblemType = ProblemType {
        slug: "invalid-cursor",
        status: 400,
        title: "Invalid cursor",
        description: "The `cursor` is not one this list gave out for this principal and these filters (it was changed, made up, or taken from another list). Start again without a cursor.",
    };
    pub const UNAUTHENTICATED: ProblemType = ProblemType {
        slug: "unauthenticated",
        status: 401,
        title: "Authentication required",
        description: "The request carries no valid principal: a bearer token in AWS, the X-Principal header with the dev server. The WWW-Authenticate header says which.",
    };
    pub const FORBIDDEN: ProblemType = ProblemType {
        slug: "forbidden",
        status: 403,
        title: "Forbidden",
        description: "The operation is for admins, and the principal is not one.",
    };
    pub const NOT_FOUND: ProblemType = ProblemType {
        slug: "not-found",
        status: 404,
        title: "Not found",
        description: "No route matches the request's path.",
    };
    pub const RESOURCE_NOT_FOUND: ProblemType = ProblemType {
        slug: "resource-not-found",
        status: 404,
        title: "Resource not found",
        description: "No resource has this id.",
    };
    pub const RESERVATION_NOT_FOUND: ProblemType = ProblemType {
        slug: "reservation-not-found",
        status: 404,
        title: "Reservation not found",
        description: "No reservation with this id is visible to the principal: it does not exist, or it is another principal's.",
    };
    pub const WAITLIST_ENTRY_NOT_FOUND: ProblemType = ProblemType {
        slug: "waitlist-entry-not-found",
        status: 404,
        title: "Waitlist entry not found",
        description: "No waitlist entry with this id is visible to the principal: it does not exist, or it is another principal's.",
    };
    pub const WEBHOOK_NOT_FOUND: ProblemType = ProblemType {
        slug: "webhook-not-found",
        status: 404,
        title: "Webhook not found",
        description: "No webhook endpoint has this id, or it was deleted.",
    };
    pub const WEBHOOK_DELIVERY_NOT_FOUND: ProblemType = ProblemType {
        slug: "webhook-delivery-not-found",
        status: 404,
        title: "Webhook delivery not found",
        description: "The endpoint's delivery log has no attempt with this id: it never did, or the attempt is older than the log keeps (30 days). List the endpoint's deliveries for the ids it has.",
    };
    pub const POOL_NOT_FOUND: ProblemType = ProblemType {
        slug: "pool-not-found",
        status: 404,
        title: "Pool not found",
        description: "No pool has this id (it may have been deleted). An item `{\"pool_id\"}` of a booking must name a pool that exists.",
    };
    pub const SERIES_NOT_FOUND: ProblemType = ProblemType {
        slug: "series-not-found",
        status: 404,
        title: "Series not found",
        description: "No recurring series with this id is visible to the principal: it does not exist, or it is another principal's.",
    };
    pub const FEED_NOT_FOUND: ProblemType = ProblemType {
        slug: "feed-not-found",
        status: 404,
        title: "Feed not found",
        description: "No calendar feed is at this URL, or no feed with this id is the principal's: the URL was revoked or rotated, or never was one. The answer is the same whichever it is. Make a new feed (`POST /v1/feeds`), or ask its owner for its current URL.",
    };
    pub const UPSTREAM_NOT_GROUPABLE: ProblemType = ProblemType {
        slug: "upstream-not-groupable",
        status: 422,
        title: "Upstream resource in a booking of several",
        description: "A resource whose system of record is upstream is written outside any transaction, so it cannot be held with others all or nothing: in a booking of several items, or as the occurrences of a recurring series. Book it on its own, one reservation at a time; `items` names the item (for a series of one resource, item 0).",
    };
    pub const PROBLEM_TYPE_NOT_FOUND: ProblemType = ProblemType {
        slug: "problem-type-not-found",
        status: 404,
        title: "Problem type not found",
        description: "No problem type of this API has this slug.",
    };
    pub const METHOD_NOT_ALLOWED: ProblemType = ProblemType {
        slug: "method-not-allowed",
        status: 405,
        title: "Method not allowed",
        description: "The path exists, but not with this method. The Allow header lists the methods it takes.",
    };
    pub const SLOT_UNAVAILABLE: ProblemType = ProblemType {
        slug: "slot-unavailable",
        status: 409,
        title: "Slot unavailable",
        description: "The requested capacity is taken for some part of the range. Choose another range or quantity, or join the waitlist. Under an idempotency key this answer is replayed; a new attempt needs a new key.",
    };
    pub const RESERVATION_NOT_HELD: ProblemType = ProblemType {
        slug: "reservation-not-held",
        status: 409,
        title: "Reservation not held",
        description: "The reservation is no longer a hold (it expired, was released or is already settled), so it cannot be confirmed.",
    };
    pub const RESERVATION_IN_FLIGHT: ProblemType = ProblemType {
        slug: "reservation-in-flight",
        status: 409,
        title: "Reservation in flight",
        description: "The reservation is being confirmed with the external system of record. Read it again, or retry, once it settles.",
    };
    pub const WEBHOOK_DISABLED: ProblemType = ProblemType {
        slug: "webhook-disabled",
        status: 409,
        title: "Webhook endpoint disabled",
        description: "Deliveries to the endpoint stopped: it answered 410 Gone, or failed every attempt for five days (`disabled_reason` on the endpoint). Fix the receiver, then `POST /v1/webhooks/{id}/recover`, which enables it and sends again what it failed to take.",
    };
    pub const RESOURCE_ARCHIVED: ProblemType = ProblemType {
        slug: "resource-archived",
        status: 409,
        title: "Resource archived",
        description: "The resource is archived: it takes no new holds, waitlist entries, moves or capacity changes. Its bookings stay readable and can still be cancelled.",
    };
    pub const RESCHEDULE_NOT_SUPPORTED: ProblemType = ProblemType {
        slug: "reschedule-not-supported",
        status: 409,
        title: "Reschedule not supported",
        description: "Bookings of an upstream resource cannot be moved: the system of record has no move, and a cancel plus a new booking could lose the seat. Cancel and book again, or change only the metadata.",
    };
    pub const CAPACITY_IN_USE: ProblemType = ProblemType {
        slug: "capacity-in-use",
        status: 409,
        title: "Capacity in use",
        description: "Some instant from now on holds more than the requested capacity; nothing changed. Move or cancel bookings first, or choose a capacity at least as large as `detail` names.",
    };
    pub const POLICY_WINDOW_CLOSED: ProblemType = ProblemType {
        slug: "policy-window-closed",
        status: 409,
        title: "Policy window closed",
        description: "The resource lets an owner cancel or move a booking only until some time before its start (`policy` names the rule, `deadline` the last instant allowed), and that time has passed; nothing changed. An admin may still do it. Releasing a hold that is not confirmed is never refused.",
    };
    pub const RESCHEDULE_LIMIT: ProblemType = ProblemType {
        slug: "reschedule-limit",
        status: 409,
        title: "Reschedule limit reached",
        description: "The booking was already moved as many times as the resource's `max_reschedules` allows; nothing changed. Its metadata can still be changed, and an admin may still move it.",
    };
    pub const LIMIT_EXCEEDED: ProblemType = ProblemType {
        slug: "limit-exceeded",
        status: 409,
        title: "Booking limit reached",
        description: "The principal already has as many live bookings and holds on this resource in the window as one of its `limits` allows, or as many active holds across the service as the service allows; nothing was held. `limit` names the limit: one of the resource's (`max`, `window`), with `window_start` and `window_end` the window the booking's start falls in, or the service's (`scope`: `principal`, `max`: the most active holds per principal, a booking of several counting as one; confirm or release one). `frees_at`, when present, says when the earliest of the counted holds lapses. Admins are not limited.",
    };
    pub const HOLD_EXTENSION_LIMIT: ProblemType = ProblemType {
        slug: "hold-extension-limit",
        status: 409,
        title: "Hold extension limit reached",
        description: "The hold already lasts as long as the resource's `max_hold_seconds` allows from its creation (or the resource allows no extension); its expiry is unchanged. Confirm it before it expires.",
    };
    pub const IDEMPOTENCY_KEY_IN_PROGRESS: ProblemType = ProblemType {
        slug: "idempotency-key-in-progress",
        status: 409,
        title: "Request in progress",
        description: "A request with this Idempotency-Key is still running. Retry after the Retry-After seconds with the same key to get its answer.",
    };
    pub const PAYLOAD_TOO_LARGE: ProblemType = ProblemType {
        slug: "payload-too-large",
        status: 413,
        title: "Payload too large",
        description: "Request bodies may be at most 64 KiB.",
    };
    pub const URI_TOO_LONG: ProblemType = ProblemType {
        slug: "uri-too-long",
        status: 414,
        title: "URI too long",
        description: "The request's URI is too long.",
    };
    pub const UNSUPPORTED_MEDIA_TYPE: ProblemType = ProblemType {
        slug: "unsupported-media-type",
        status: 415,
        title: "Unsupported media type",
        description: "A request body must be sent as application/json.",
    };
    pub const OUTSIDE_SCHEDULE: ProblemType = ProblemType {
        slug: "outside-schedule",
        status: 422,
        title: "Outside the resource's schedule",
        description: "The range breaks one of the resource's calendar rules, which `rule` names: `closed_day` (no opening hours on the day of the start), `outside_hours` (not inside one stretch of opening hours), `buffer` (the time kept free around bookings overlaps another booking), `notice` (the start is sooner than the minimum notice), `advance` (the start is further ahead than the maximum advance) or `grid` (the start is not on the grid of starts). The resource's fields show its rules, and `GET /v1/resources/{id}/slots` lists the starts that fit.",
    };
    pub const IDEMPOTENCY_KEY_REUSED: ProblemType = ProblemType {
        slug: "idempotency-key-reused",
        status: 422,
        title: "Idempotency key reused",
        description: "This Idempotency-Key was used by the same principal for a different request (another body or path). Use a new key for a new request.",
    };
    pub const REQUEST_HEADER_FIELDS_TOO_LARGE: ProblemType = ProblemType {
        slug: "request-header-fields-too-large",
        status: 431,
        title: "Request header fields too large",
        description: "The request's headers are too many or too large.",
    };
    pub const INTERNAL_ERROR: ProblemType = ProblemType {
        slug: "internal-error",
        status: 500,
        title: "Internal error",
        description: "An unexpected error occurred. Nothing about it is shown to the client; the service logs it.",
    };
    pub const UPSTREAM_UNAVAILABLE: ProblemType = ProblemType {
        slug: "upstream-unavailable",
        status: 503,
        title: "System of record unavailable",
        description: "The external system of record of an upstream resource cannot be reached right now. Retry after the Retry-After seconds.",
    };
    pub const DATABASE_UNAVAILABLE: ProblemType = ProblemType {
        slug: "database-unavailable",
        status: 503,
        title: "Service unavailable",
        description: "The database is briefly unreachable or busy, and the request changed nothing. Retry after the Retry-After seconds.",
    };
}

impl ProblemType {
    /// The page a problem's `type` leads to: what a person reading a problem needs.
    /// The text is this file's own, so nothing in it needs escaping beyond the
    /// backticks that mark code.
    pub fn page(&self) -> String {
        let code = |s: &str| {
            let mut out = String::new();
            for (i, part) in s.split('`').enumerate() {
                out.push_str(if i % 2 == 1 { "<code>" } else { "" });
                out.push_str(part);
                out.push_str(if i % 2 == 1 { "</code>" } else { "" });
            }
            out
        };
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>{title} ({slug})</title></head>\n\
             <body>\n<h1 id=\"{slug}\">{title}</h1>\n<p>Problem type <code>{base}{slug}</code>, answered with HTTP \
             status {status}.</p>\n<p>{description}</p>\n</body>\n</html>\n",
            title = self.title,
            slug = self.slug,
            base = PROBLEM_BASE,
            status = self.status,
            description = code(self.description),
        )
    }
}

/// The problem type of a slug.
pub fn problem_type(slug: &str) -> Option<&'static ProblemType> {
    PROBLEM_TYPES.iter().find(|t| t.slug == slug)
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No principal; the identity mode decides the `WWW-Authenticate` challenge.
    #[error("no principal")]
    Unauthenticated(AuthMode),
    #[error("admin only")]
    Forbidden,
    #[error("no such route")]
    RouteNotFound,
    #[error("no such problem type")]
    ProblemTypeNotFound,
    #[error("method not allowed")]
    MethodNotAllowed { allow: String },
    #[error("invalid request")]
    Validation(Vec<FieldError>),
    /// A list cursor that was altered, forged, or given out by another list or filter set.
    #[error("invalid cursor")]
    InvalidCursor,
    #[error("body too large")]
    PayloadTooLarge,
    /// A request the HTTP layer could not read: a malformed request line, header or
    /// chunked body, or a body that did not arrive in time. The detail says which.
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    #[error("URI too long")]
    UriTooLong,
    #[error("request headers too large")]
    HeadersTooLarge,
    #[error("body is not JSON")]
    UnsupportedMediaType,
    #[error("resource not found")]
    ResourceNotFound,
    #[error("reservation not found")]
    ReservationNotFound,
    #[error("waitlist entry not found")]
    WaitlistEntryNotFound,
    #[error("webhook not found")]
    WebhookNotFound,
    #[error("webhook delivery not found")]
    WebhookDeliveryNotFound,
    #[error("webhook endpoint disabled")]
    WebhookDisabled,
    #[error("slot unavailable")]
    SlotUnavailable,
    #[error("pool not found")]
    PoolNotFound,
    #[error("series not found")]
    SeriesNotFound,
    #[error("feed not found")]
    FeedNotFound,
    /// Occurrences of a series that could not be held, each with its own problem. The
    /// answer takes the status and type of the first one's problem (409
    /// `slot-unavailable`, 422 `outside-schedule`, ...); `occurrences` lists them all.
    #[error("occurrences not held")]
    OccurrencesNotHeld(Vec<RefusedOccurrence>),
    /// Items of a booking of several that could not be held: 409 `slot-unavailable`
    /// when every one was taken, 422 `outside-schedule` when some item's rules refuse
    /// the range; `items` lists them all.
    #[error("items not held")]
    ItemsNotHeld(Vec<RefusedItem>),
    #[error("upstream resource in a booking of several")]
    UpstreamNotGroupable { index: usize },
    #[error("reservation not held")]
    ReservationNotHeld { status: &'static str },
    #[error("reservation in flight")]
    ReservationInFlight,
    #[error("resource archived")]
    ResourceArchived,
    #[error("reschedule not supported")]
    RescheduleNotSupported,
    #[error("capacity in use")]
    CapacityInUse { peak: i64 },
    #[error("policy window closed")]
    PolicyWindowClosed(Closed),
    #[error("reschedule limit reached")]
    RescheduleLimit { max: i32 },
    #[error("hold extension limit reached")]
    HoldExtensionLimit,
    #[error("booking limit reached")]
    LimitExceeded(LimitReached),
    #[error("active holds limit reached")]
    HoldsExceeded(HoldsReached),
    #[error("idempotency key in progress")]
    IdempotencyKeyInProgress { retry_after: u64 },
    #[error("idempotency key reused")]
    IdempotencyKeyReused,
    #[error("outside the schedule")]
    OutsideSchedule { rule: Rule },
    #[error("upstream unavailable")]
    UpstreamUnavailable { retry_after: u64 },
    #[error("database unavailable")]
    DatabaseUnavailable(#[source] DbError),
    /// A lock or statement timeout, a deadlock or a serialization failure: retryable.
    #[error("database busy")]
    DatabaseBusy(#[source] DbError),
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ApiError {
    pub fn validation(field: &str, message: impl Into<String>) -> Self {
        ApiError::Validation(vec![FieldError::new(field, message)])
    }

    /// Outcomes that an idempotency record stores and replays: the request ran and this
    /// is its answer. Server-side trouble (5xx) is not: a retry should run again.
    pub fn is_final(&self) -> bool {
        self.status().is_client_error()
    }

    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.problem_type().status).expect("a problem type's status is a valid HTTP status")
    }

    /// The problem type each variant answers with: the one place a variant meets the
    /// catalogue, so its slug, status and title cannot drift from its page.
    pub fn problem_type(&self) -> &'static ProblemType {
        match self {
            ApiError::Validation(_) => &ProblemType::VALIDATION_ERROR,
            ApiError::BadRequest(_) => &ProblemType::BAD_REQUEST,
            ApiError::InvalidCursor => &ProblemType::INVALID_CURSOR,
            ApiError::Unauthenticated(_) => &ProblemType::UNAUTHENTICATED,
            ApiError::Forbidden => &ProblemType::FORBIDDEN,
            ApiError::RouteNotFound => &ProblemType::NOT_FOUND,
            ApiError::ProblemTypeNotFound => &ProblemType::PROBLEM_TYPE_NOT_FOUND,
            ApiError::ResourceNotFound => &ProblemType::RESOURCE_NOT_FOUND,
            ApiError::ReservationNotFound => &ProblemType::RESERVATION_NOT_FOUND,
            ApiError::WaitlistEntryNotFound => &ProblemType::WAITLIST_ENTRY_NOT_FOUND,
            ApiError::WebhookNotFound => &ProblemType::WEBHOOK_NOT_FOUND,
            ApiError::WebhookDeliveryNotFound => &ProblemType::WEBHOOK_DELIVERY_NOT_FOUND,
            ApiError::WebhookDisabled => &ProblemType::WEBHOOK_DISABLED,
            ApiError::MethodNotAllowed { .. } => &ProblemType::METHOD_NOT_ALLOWED,
            ApiError::SlotUnavailable => &ProblemType::SLOT_UNAVAILABLE,
            ApiError::PoolNotFound => &ProblemType::POOL_NOT_FOUND,
            ApiError::SeriesNotFound => &ProblemType::SERIES_NOT_FOUND,
            ApiError::FeedNotFound => &ProblemType::FEED_NOT_FOUND,
            ApiError::OccurrencesNotHeld(occurrences) => occurrences
                .first()
                .and_then(|o| o.problem["type"].as_str())
                .and_then(|t| t.strip_prefix(PROBLEM_BASE))
                .and_then(problem_type)
                .unwrap_or(&ProblemType::SLOT_UNAVAILABLE),
            ApiError::ItemsNotHeld(items) => match first_rule(items) {
                Some(_) => &ProblemType::OUTSIDE_SCHEDULE,
                None => &ProblemType::SLOT_UNAVAILABLE,
            },
            ApiError::UpstreamNotGroupable { .. } => &ProblemType::UPSTREAM_NOT_GROUPABLE,
            ApiError::ReservationNotHeld { .. } => &ProblemType::RESERVATION_NOT_HELD,
            ApiError::ReservationInFlight => &ProblemType::RESERVATION_IN_FLIGHT,
            ApiError::ResourceArchived => &ProblemType::RESOURCE_ARCHIVED,
            ApiError::RescheduleNotSupported => &ProblemType::RESCHEDULE_NOT_SUPPORTED,
            ApiError::CapacityInUse { .. } => &ProblemType::CAPACITY_IN_USE,
            ApiError::PolicyWindowClosed(_) => &ProblemType::POLICY_WINDOW_CLOSED,
            ApiError::RescheduleLimit { .. } => &ProblemType::RESCHEDULE_LIMIT,
            ApiError::HoldExtensionLimit => &ProblemType::HOLD_EXTENSION_LIMIT,
            ApiError::LimitExceeded(_) | ApiError::HoldsExceeded(_) => &ProblemType::LIMIT_EXCEEDED,
            ApiError::IdempotencyKeyInProgress { .. } => &ProblemType::IDEMPOTENCY_KEY_IN_PROGRESS,
            ApiError::PayloadTooLarge => &ProblemType::PAYLOAD_TOO_LARGE,
            ApiError::UriTooLong => &ProblemType::URI_TOO_LONG,
            ApiError::HeadersTooLarge => &ProblemType::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::UnsupportedMediaType => &ProblemType::UNSUPPORTED_MEDIA_TYPE,
            ApiError::IdempotencyKeyReused => &ProblemType::IDEMPOTENCY_KEY_REUSED,
            ApiError::OutsideSchedule { .. } => &ProblemType::OUTSIDE_SCHEDULE,
            ApiError::UpstreamUnavailable { .. } => &ProblemType::UPSTREAM_UNAVAILABLE,
            // The contract has one type for every retryable database condition.
            ApiError::DatabaseUnavailable(_) | ApiError::DatabaseBusy(_) => &ProblemType::DATABASE_UNAVAILABLE,
            ApiError::Internal(_) => &ProblemType::INTERNAL_ERROR,
        }
    }

    /// What this occurrence of its problem type says: shorter than the page, and
    /// specific where the variant knows more.
    fn detail(&self) -> String {
        match self {
            ApiError::Validation(_) => "See errors for each field.".into(),
            ApiError::Unauthenticated(_) => "The request carries no valid principal.".into(),
            ApiError::Forbidden => "This operation is for admins.".into(),
            ApiError::RouteNotFound => "No route matches this path.".into(),
            ApiError::ProblemTypeNotFound => "No problem type has this slug.".into(),
            ApiError::MethodNotAllowed { allow } => format!("This path allows {allow}."),
            ApiError::PayloadTooLarge => "Request bodies may be at most 64 KiB.".into(),
            ApiError::BadRequest(detail) => (*detail).into(),
            ApiError::InvalidCursor => {
                "The cursor is not one this list gave out for these filters; start again without one.".into()
            }
            ApiError::UriTooLong => "The request's URI is too long.".into(),
            ApiError::HeadersTooLarge => "The request's headers are too many or too large.".into(),
            ApiError::UnsupportedMediaType => "Request bodies must be application/json.".into(),
            ApiError::ResourceNotFound => "No such resource.".into(),
            ApiError::ReservationNotFound => "No such reservation.".into(),
            ApiError::WaitlistEntryNotFound => "No such waitlist entry.".into(),
            ApiError::WebhookNotFound => "No such webhook endpoint.".into(),
            ApiError::WebhookDeliveryNotFound => "No such attempt in the endpoint's delivery log.".into(),
            ApiError::WebhookDisabled => {
                "The endpoint is disabled; recover it (POST /v1/webhooks/{id}/recover) first.".into()
            }
            ApiError::SlotUnavailable => "The requested capacity is taken for some part of the range.".into(),
            ApiError::PoolNotFound => "No such pool.".into(),
            ApiError::SeriesNotFound => "No such series.".into(),
            ApiError::FeedNotFound => "No such feed.".into(),
            ApiError::OccurrencesNotHeld(occurrences) => format!(
                "{} of the series' occurrences could not be held; nothing was booked. See occurrences.",
                occurrences.len()
            ),
            ApiError::ItemsNotHeld(items) => {
                format!("{} of the booking's items could not be held; nothing was booked. See items.", items.len())
            }
            ApiError::UpstreamNotGroupable { index } => {
                format!("Item {index} is an upstream resource, which cannot be booked with others.")
            }
            ApiError::ReservationNotHeld { status } => format!("The reservation is {status}."),
            ApiError::ReservationInFlight => {
                "The reservation is being confirmed with the system of record; try again when it settles.".into()
            }
            ApiError::ResourceArchived => {
                "The resource is archived: it takes no new holds, waitlist entries or reschedules.".into()
            }
            ApiError::RescheduleNotSupported => {
                "Bookings of an upstream resource cannot be moved; cancel and book again.".into()
            }
            ApiError::CapacityInUse { peak } => {
                format!("Up to {peak} places are taken at some instant ahead; the capacity cannot go below that.")
            }
            ApiError::PolicyWindowClosed(closed) => format!(
                "The owner could do this until {} ({}).",
                closed.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                closed.deadline.field()
            ),
            ApiError::RescheduleLimit { max } => {
                format!("The booking was already moved {max} times, the most allowed.")
            }
            ApiError::HoldExtensionLimit => "The hold cannot be kept any longer.".into(),
            ApiError::LimitExceeded(reached) => format!(
                "At most {} bookings per {} ({} to {}).",
                reached.limit.max,
                match reached.limit.window {
                    Window::Day => "day".to_string(),
                    Window::Week => "week".to_string(),
                    Window::Month => "month".to_string(),
                    Window::Rolling => format!("{} minutes", reached.limit.rolling_minutes.unwrap_or(0)),
                },
                reached.window_start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                reached.window_end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
            ApiError::HoldsExceeded(reached) => format!(
                "At most {} active holds per principal across the service; confirm or release one first.",
                reached.max
            ),
            ApiError::IdempotencyKeyInProgress { .. } => {
                "A request with this idempotency key is still being processed.".into()
            }
            ApiError::IdempotencyKeyReused => "This idempotency key was used for a different request.".into(),
            ApiError::OutsideSchedule { rule } => format!("{} (rule: {})", rule.explain(), rule.as_str()),
            ApiError::UpstreamUnavailable { .. } => "The external system of record cannot be reached right now.".into(),
            ApiError::DatabaseUnavailable(_) => "The service is briefly unavailable.".into(),
            ApiError::DatabaseBusy(_) => {
                "The request gave way to concurrent work and changed nothing; try it again.".into()
            }
            ApiError::Internal(_) => "An unexpected error occurred.".into(),
        }
    }

    /// The problem document alone, without `instance`: what an occurrence of a series
    /// that was not held records and answers as its reason.
    pub fn problem_object(self) -> serde_json::Value {
        serde_json::from_slice(&self.into_reply().body).expect("a problem document is JSON")
    }

    /// The problem answer to a request for `instance` (its path, which the problem's
    /// `instance` member names).
    pub fn into_reply_at(self, instance: &str) -> Reply {
        self.reply(Some(instance))
    }

    /// The problem answer where the request's path is unknown (a request line hyper
    /// could not parse): without `instance`.
    pub fn into_reply(self) -> Reply {
        self.reply(None)
    }

    /// The one place an error becomes a response. 5xx causes are logged with their
    /// whole chain here and never shown to the client.
    fn reply(self, instance: Option<&str>) -> Reply {
        let status = self.status();
        if status.is_server_error() {
            let mut chain = String::new();
            let mut source: Option<&dyn std::error::Error> = Some(&self);
            while let Some(e) = source {
                if !chain.is_empty() {
                    chain.push_str(": ");
                }
                chain.push_str(&e.to_string());
                source = e.source();
            }
            tracing::error!(status = status.as_u16(), error = %chain, "request failed");
        }
        let problem_type = self.problem_type();
        let detail = self.detail();
        #[derive(Serialize)]
        struct Problem<'a> {
            #[serde(rename = "type")]
            kind: String,
            title: &'a str,
            status: u16,
            detail: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            instance: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            errors: Option<&'a [FieldError]>,
            /// The calendar rule an `outside-schedule` range breaks.
            #[serde(skip_serializing_if = "Option::is_none")]
            rule: Option<&'static str>,
            /// The items of a booking of several that were not held, or the upstream one.
            #[serde(skip_serializing_if = "Option::is_none")]
            items: Option<Vec<ItemProblem>>,
            /// The occurrences of a series that were not held, each with its problem.
            #[serde(skip_serializing_if = "Option::is_none")]
            occurrences: Option<&'a [RefusedOccurrence]>,
            /// The policy field whose deadline passed (`policy-window-closed`).
            #[serde(skip_serializing_if = "Option::is_none")]
            policy: Option<&'static str>,
            /// The last instant the policy allowed (`policy-window-closed`).
            #[serde(skip_serializing_if = "Option::is_none")]
            deadline: Option<DateTime<Utc>>,
            /// The limit reached, its window, and when it frees (`limit-exceeded`).
            #[serde(flatten, skip_serializing_if = "Option::is_none")]
            reached: Option<Reached>,
        }
        /// One of the resource's limits, with its window, or the service's limit of
        /// active holds per principal.
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Reached {
            Resource {
                limit: BookingLimit,
                window_start: DateTime<Utc>,
                window_end: DateTime<Utc>,
                /// When the earliest counted hold lapses; null: only a cancel frees a place.
                frees_at: Option<DateTime<Utc>>,
            },
            Principal {
                limit: PrincipalLimit,
                /// When the earliest of the principal's active holds lapses.
                frees_at: Option<DateTime<Utc>>,
            },
        }
        #[derive(Serialize)]
        struct PrincipalLimit {
            scope: &'static str,
            max: i32,
        }
        // A series refused for its first occurrence's bad fields is a validation error
        // too: its `errors` name each occurrence's fields (`occurrences[2].end`).
        let occurrence_errors: Vec<FieldError> = match &self {
            ApiError::OccurrencesNotHeld(occurrences) if problem_type.slug == "validation-error" => occurrences
                .iter()
                .flat_map(|o| {
                    o.problem["errors"].as_array().into_iter().flatten().filter_map(move |e| {
                        let (field, message) = (e["field"].as_str()?, e["message"].as_str()?);
                        Some(FieldError::new(format!("occurrences[{}].{field}", o.index), message))
                    })
                })
                .collect(),
            _ => Vec::new(),
        };
        let errors = match &self {
            ApiError::Validation(errors) => Some(errors.as_slice()),
            _ if !occurrence_errors.is_empty() => Some(occurrence_errors.as_slice()),
            _ => None,
        };
        let rule = match &self {
            ApiError::OutsideSchedule { rule } => Some(rule.as_str()),
            ApiError::ItemsNotHeld(items) => first_rule(items).map(Rule::as_str),
            _ => None,
        };
        let items = match &self {
            ApiError::ItemsNotHeld(items) => Some(items.iter().map(ItemProblem::of).collect()),
            ApiError::UpstreamNotGroupable { index } => Some(vec![ItemProblem::upstream(*index)]),
            _ => None,
        };
        let occurrences = match &self {
            ApiError::OccurrencesNotHeld(occurrences) => Some(occurrences.as_slice()),
            _ => None,
        };
        let (policy, deadline) = match &self {
            ApiError::PolicyWindowClosed(closed) => (Some(closed.deadline.field()), Some(closed.at)),
            _ => (None, None),
        };
        let reached = match &self {
            ApiError::LimitExceeded(r) => Some(Reached::Resource {
                limit: r.limit,
                window_start: r.window_start,
                window_end: r.window_end,
                frees_at: r.frees_at,
            }),
            ApiError::HoldsExceeded(r) => Some(Reached::Principal {
                limit: PrincipalLimit { scope: "principal", max: r.max },
                frees_at: r.frees_at,
            }),
            _ => None,
        };
        let kind = format!("{PROBLEM_BASE}{}", problem_type.slug);
        let problem = Problem {
            kind,
            title: problem_type.title,
            status: status.as_u16(),
            detail,
            instance,
            errors,
            rule,
            items,
            occurrences,
            policy,
            deadline,
            reached,
        };
        let mut reply = Reply::json(status, &problem);
        reply.content_type = PROBLEM_JSON;
        reply.retry_after = match &self {
            ApiError::IdempotencyKeyInProgress { retry_after } | ApiError::UpstreamUnavailable { retry_after } => {
                Some(*retry_after)
            }
            ApiError::DatabaseUnavailable(_) | ApiError::DatabaseBusy(_) => Some(1),
            _ => None,
        };
        reply.www_authenticate = match &self {
            ApiError::Unauthenticated(AuthMode::Jwt) => Some(JWT_CHALLENGE),
            ApiError::Unauthenticated(AuthMode::Header) => Some(HEADER_CHALLENGE),
            _ => None,
        };
        if let ApiError::MethodNotAllowed { allow } = self {
            reply.allow = Some(allow);
        }
        reply
    }
}

/// The calendar rule of the first item refused for one: what `rule` names on a
/// booking of several.
fn first_rule(items: &[RefusedItem]) -> Option<Rule> {
    items.iter().find_map(|i| match i.refusal {
        Refusal::OutsideSchedule(rule) => Some(rule),
        Refusal::Taken => None,
    })
}

/// One item of a booking's problem: its place, what it asked for, and why it was not
/// held.
#[derive(Serialize)]
struct ItemProblem {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_id: Option<uuid::Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pool_id: Option<uuid::Uuid>,
    /// `taken`, `outside_schedule` or `upstream`.
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'static str>,
}

impl ItemProblem {
    fn of(item: &RefusedItem) -> Self {
        let (resource_id, pool_id) = match item.target {
            Target::Resource(id) => (Some(id), None),
            Target::Pool(id) => (None, Some(id)),
        };
        let (reason, rule) = match item.refusal {
            Refusal::Taken => ("taken", None),
            Refusal::OutsideSchedule(rule) => ("outside_schedule", Some(rule.as_str())),
        };
        ItemProblem { index: item.index, resource_id, pool_id, reason, rule }
    }

    fn upstream(index: usize) -> Self {
        ItemProblem { index, resource_id: None, pool_id: None, reason: "upstream", rule: None }
    }
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Unavailable(_) => ApiError::DatabaseUnavailable(e),
            DbError::Busy(_) => ApiError::DatabaseBusy(e),
            // The capacity-1 constraint refused an overlap that a path's own judgement
            // let through: still a conflict for the client, never a 500, and a sign
            // that a path skipped its lock.
            _ if e.sql_state() == Some(&tokio_postgres::error::SqlState::EXCLUSION_VIOLATION) => {
                tracing::warn!(error = %e, "the exclusion constraint refused an overlapping reservation");
                ApiError::SlotUnavailable
            }
            other => ApiError::Internal(Box::new(other)),
        }
    }
}

impl From<deadpool_postgres::PoolError> for ApiError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        DbError::from(e).into()
    }
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(e: tokio_postgres::Error) -> Self {
        DbError::from(e).into()
    }
}

impl From<BookingError> for ApiError {
    fn from(e: BookingError) -> Self {
        match e {
            BookingError::Validation(errors) => ApiError::Validation(errors),
            BookingError::ResourceNotFound => ApiError::ResourceNotFound,
            BookingError::ReservationNotFound => ApiError::ReservationNotFound,
            BookingError::WaitlistEntryNotFound => ApiError::WaitlistEntryNotFound,
            BookingError::WebhookNotFound => ApiError::WebhookNotFound,
            BookingError::WebhookDeliveryNotFound => ApiError::WebhookDeliveryNotFound,
            BookingError::WebhookDisabled => ApiError::WebhookDisabled,
            BookingError::SlotUnavailable => ApiError::SlotUnavailable,
            BookingError::PoolNotFound(_) => ApiError::PoolNotFound,
            BookingError::SeriesNotFound => ApiError::SeriesNotFound,
            BookingError::FeedNotFound => ApiError::FeedNotFound,
            BookingError::OccurrencesRefused(occurrences) => ApiError::OccurrencesNotHeld(occurrences),
            BookingError::ItemsRefused(items) => ApiError::ItemsNotHeld(items),
            BookingError::UpstreamInGroup { index } => ApiError::UpstreamNotGroupable { index },
            BookingError::NotHeld(status) => ApiError::ReservationNotHeld { status: status.as_str() },
            BookingError::InFlight => ApiError::ReservationInFlight,
            BookingError::InvalidCursor => ApiError::InvalidCursor,
            BookingError::UpstreamUnavailable { retry_after_seconds } => {
                ApiError::UpstreamUnavailable { retry_after: retry_after_seconds }
            }
            BookingError::ResourceArchived => ApiError::ResourceArchived,
            BookingError::RescheduleNotSupported => ApiError::RescheduleNotSupported,
            BookingError::CapacityInUse { peak } => ApiError::CapacityInUse { peak },
            BookingError::PolicyWindowClosed(closed) => ApiError::PolicyWindowClosed(closed),
            BookingError::RescheduleLimit { max } => ApiError::RescheduleLimit { max },
            BookingError::HoldExtensionLimit => ApiError::HoldExtensionLimit,
            BookingError::LimitExceeded(reached) => ApiError::LimitExceeded(reached),
            BookingError::HoldsExceeded(reached) => ApiError::HoldsExceeded(reached),
            BookingError::OutsideSchedule(rule) => ApiError::OutsideSchedule { rule },
            BookingError::Db(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::policies::Deadline;

    fn problem(e: ApiError) -> (Reply, serde_json::Value) {
        let reply = e.into_reply();
        let body = serde_json::from_slice(&reply.body).unwrap();
        (reply, body)
    }

    #[test]
    fn a_problem_names_its_slug_as_the_last_segment_of_type() {
        let (reply, body) = problem(ApiError::SlotUnavailable);
        assert_eq!(reply.status, StatusCode::CONFLICT);
        assert_eq!(reply.content_type, "application/problem+json");
        assert!(body["type"].as_str().unwrap().ends_with("/problems/slot-unavailable"));
        assert_eq!(body["status"], 409);
    }

    #[test]
    fn validation_problems_list_their_fields() {
        let (_, body) = problem(ApiError::validation("end", "must be after start"));
        assert_eq!(body["errors"][0]["field"], "end");
    }

    #[test]
    fn an_internal_error_tells_the_client_nothing_internal() {
        let (reply, body) = problem(ApiError::Internal("relation \"secret_table\" does not exist".into()));
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!String::from_utf8(reply.body).unwrap().contains("secret_table"));
        assert!(body["type"].as_str().unwrap().ends_with("/internal-error"));
    }

    #[test]
    fn a_request_the_http_layer_cannot_read_is_a_bad_request_problem_without_field_errors() {
        let (reply, body) = problem(ApiError::BadRequest("The request body is malformed."));
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        assert_eq!(reply.content_type, "application/problem+json");
        assert!(body["type"].as_str().unwrap().ends_with("/problems/bad-request"));
        assert_eq!(body["detail"], "The request body is malformed.");
        assert!(body.get("errors").is_none());
    }

    /// One example of each variant, in declaration order: the variant after `e`'s, or
    /// `None` after the last. The match has no wildcard, so a new variant does not
    /// compile until it joins the walk.
    fn next_example(e: Option<&ApiError>) -> Option<ApiError> {
        let Some(e) = e else { return Some(ApiError::Unauthenticated(AuthMode::Jwt)) };
        Some(match e {
            ApiError::Unauthenticated(_) => ApiError::Forbidden,
            ApiError::Forbidden => ApiError::RouteNotFound,
            ApiError::RouteNotFound => ApiError::ProblemTypeNotFound,
            ApiError::ProblemTypeNotFound => ApiError::MethodNotAllowed { allow: "GET".into() },
            ApiError::MethodNotAllowed { .. } => ApiError::Validation(vec![]),
            ApiError::Validation(_) => ApiError::InvalidCursor,
            ApiError::InvalidCursor => ApiError::PayloadTooLarge,
            ApiError::PayloadTooLarge => ApiError::BadRequest("x"),
            ApiError::BadRequest(_) => ApiError::UriTooLong,
            ApiError::UriTooLong => ApiError::HeadersTooLarge,
            ApiError::HeadersTooLarge => ApiError::UnsupportedMediaType,
            ApiError::UnsupportedMediaType => ApiError::ResourceNotFound,
            ApiError::ResourceNotFound => ApiError::ReservationNotFound,
            ApiError::ReservationNotFound => ApiError::WaitlistEntryNotFound,
            ApiError::WaitlistEntryNotFound => ApiError::WebhookNotFound,
            ApiError::WebhookNotFound => ApiError::WebhookDeliveryNotFound,
            ApiError::WebhookDeliveryNotFound => ApiError::WebhookDisabled,
            ApiError::WebhookDisabled => ApiError::SlotUnavailable,
            ApiError::SlotUnavailable => ApiError::PoolNotFound,
            ApiError::PoolNotFound => ApiError::SeriesNotFound,
            ApiError::SeriesNotFound => ApiError::FeedNotFound,
            ApiError::FeedNotFound => ApiError::OccurrencesNotHeld(vec![]),
            ApiError::OccurrencesNotHeld(_) => ApiError::UpstreamNotGroupable { index: 1 },
            ApiError::UpstreamNotGroupable { .. } => ApiError::ItemsNotHeld(vec![]),
            ApiError::ItemsNotHeld(_) => ApiError::ReservationNotHeld { status: "EXPIRED" },
            ApiError::ReservationNotHeld { .. } => ApiError::ReservationInFlight,
            ApiError::ReservationInFlight => ApiError::ResourceArchived,
            ApiError::ResourceArchived => ApiError::RescheduleNotSupported,
            ApiError::RescheduleNotSupported => ApiError::CapacityInUse { peak: 2 },
            ApiError::CapacityInUse { .. } => {
                ApiError::PolicyWindowClosed(Closed { deadline: Deadline::Cancel, at: chrono::DateTime::UNIX_EPOCH })
            }
            ApiError::PolicyWindowClosed(_) => ApiError::RescheduleLimit { max: 1 },
            ApiError::RescheduleLimit { .. } => ApiError::HoldExtensionLimit,
            ApiError::HoldExtensionLimit => ApiError::LimitExceeded(LimitReached {
                limit: BookingLimit { max: 1, window: Window::Day, rolling_minutes: None },
                window_start: chrono::DateTime::UNIX_EPOCH,
                window_end: chrono::DateTime::UNIX_EPOCH,
                frees_at: None,
            }),
            ApiError::LimitExceeded(_) => {
                ApiError::HoldsExceeded(HoldsReached { max: 20, frees_at: Some(chrono::DateTime::UNIX_EPOCH) })
            }
            ApiError::HoldsExceeded(_) => ApiError::IdempotencyKeyInProgress { retry_after: 1 },
            ApiError::IdempotencyKeyInProgress { .. } => ApiError::IdempotencyKeyReused,
            ApiError::IdempotencyKeyReused => ApiError::OutsideSchedule { rule: Rule::Buffer },
            ApiError::OutsideSchedule { .. } => ApiError::UpstreamUnavailable { retry_after: 1 },
            ApiError::UpstreamUnavailable { .. } => ApiError::DatabaseUnavailable(DbError::Unavailable("x".into())),
            ApiError::DatabaseUnavailable(_) => {
                let error = "sslmode=x".parse::<tokio_postgres::Config>().unwrap_err();
                ApiError::DatabaseBusy(DbError::Busy(error))
            }
            ApiError::DatabaseBusy(_) => ApiError::Internal("x".into()),
            ApiError::Internal(_) => return None,
        })
    }

    #[test]
    fn every_problem_answered_is_described_on_its_page_with_its_status_and_title() {
        let mut answered = std::collections::BTreeSet::new();
        let mut variants = 0;
        let mut e = next_example(None);
        while let Some(error) = e {
            variants += 1;
            e = next_example(Some(&error));
            let (reply, body) = problem(error);
            let slug = body["type"].as_str().unwrap().strip_prefix(PROBLEM_BASE).unwrap().to_string();
            let page = problem_type(&slug).unwrap_or_else(|| panic!("{slug} has a page"));
            assert_eq!((page.status, page.title), (reply.status.as_u16(), body["title"].as_str().unwrap()), "{slug}");
            answered.insert(slug);
        }
        assert_eq!(variants, 42, "the walk reaches every variant");
        let pages: std::collections::BTreeSet<_> = PROBLEM_TYPES.iter().map(|t| t.slug.to_string()).collect();
        assert_eq!(answered, pages, "every page describes a problem some variant answers");
    }

    #[test]
    fn the_limit_of_active_holds_per_principal_names_its_scope_and_when_it_frees() {
        let frees_at = Some("2027-03-15T10:05:00Z".parse().unwrap());
        let (reply, body) = problem(ApiError::from(BookingError::HoldsExceeded(HoldsReached { max: 3, frees_at })));
        assert_eq!(reply.status, StatusCode::CONFLICT);
        assert!(body["type"].as_str().unwrap().ends_with("/problems/limit-exceeded"));
        assert_eq!(body["limit"], serde_json::json!({"scope": "principal", "max": 3}));
        assert_eq!(body["frees_at"], "2027-03-15T10:05:00Z");
        assert!(body.get("window_start").is_none() && body.get("window_end").is_none(), "{body}");
    }

    #[test]
    fn a_problem_names_its_request_as_instance_and_a_401_challenges() {
        let reply = ApiError::Unauthenticated(AuthMode::Jwt).into_reply_at("/v1/reservations");
        let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(body["instance"], "/v1/reservations");
        assert_eq!(reply.www_authenticate, Some(r#"Bearer realm="reservations""#));
        let reply = ApiError::Unauthenticated(AuthMode::Header).into_reply();
        assert!(reply.www_authenticate.unwrap().starts_with(r#"Bearer realm="reservations", error="invalid_request""#));
    }

    #[test]
    fn a_cursor_the_list_did_not_give_out_is_a_bad_request_of_its_own_slug() {
        let (reply, body) = problem(ApiError::from(BookingError::InvalidCursor));
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        assert!(body["type"].as_str().unwrap().ends_with("/problems/invalid-cursor"));
        assert!(body.get("errors").is_none());
    }

    #[test]
    fn retryable_problems_say_when() {
        let (reply, _) = problem(ApiError::UpstreamUnavailable { retry_after: 5 });
        assert_eq!(reply.retry_after, Some(5));
        let (reply, _) = problem(ApiError::IdempotencyKeyInProgress { retry_after: 2 });
        assert_eq!(reply.retry_after, Some(2));
    }
}
