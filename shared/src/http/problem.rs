//! The HTTP boundary's error enum and its one mapping to RFC 9457 problem documents.

use super::problem_types::{PROBLEM_BASE, ProblemType, problem_type};
use super::{PROBLEM_JSON, Reply};
use crate::booking::{BookingError, Refusal, RefusedItem, RefusedOccurrence, Target};
use crate::config::AuthMode;
use crate::db::DbError;
use crate::domain::policies::Closed;
use crate::domain::{BookingLimit, FieldError, HoldsReached, LimitReached, Rule, Window};
use chrono::{DateTime, Utc};
use http::StatusCode;
use serde::Serialize;

/// The challenge of a 401 (RFC 6750): what a deployed client sends is a bearer token.
const JWT_CHALLENGE: &str = r#"Bearer realm="reservations""#;
/// Header identity mode keeps the scheme a deployed client will use, and says in the
/// standard parameters what this server reads instead.
const HEADER_CHALLENGE: &str = r#"Bearer realm="reservations", error="invalid_request", error_description="send the principal in the X-Principal header""#;

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
mod tests;
