//! The HTTP boundary's error enum and its one mapping to RFC 9457 problem documents.

use super::{PROBLEM_JSON, Reply};
use crate::booking::BookingError;
use crate::db::DbError;
use crate::domain::FieldError;
use http::StatusCode;
use serde::Serialize;

/// Problem `type`s are this base plus the slug.
pub const PROBLEM_BASE: &str = "https://reservations.example.com/problems/";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("no principal")]
    Unauthenticated,
    #[error("admin only")]
    Forbidden,
    #[error("no such route")]
    RouteNotFound,
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
    #[error("slot unavailable")]
    SlotUnavailable,
    #[error("reservation not held")]
    ReservationNotHeld { status: &'static str },
    #[error("reservation in flight")]
    ReservationInFlight,
    #[error("idempotency key in progress")]
    IdempotencyKeyInProgress { retry_after: u64 },
    #[error("idempotency key reused")]
    IdempotencyKeyReused,
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
        match self {
            ApiError::Validation(_) | ApiError::BadRequest(_) | ApiError::InvalidCursor => StatusCode::BAD_REQUEST,
            ApiError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden => StatusCode::FORBIDDEN,
            ApiError::RouteNotFound
            | ApiError::ResourceNotFound
            | ApiError::ReservationNotFound
            | ApiError::WaitlistEntryNotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::SlotUnavailable
            | ApiError::ReservationNotHeld { .. }
            | ApiError::ReservationInFlight
            | ApiError::IdempotencyKeyInProgress { .. } => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UriTooLong => StatusCode::URI_TOO_LONG,
            ApiError::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::UpstreamUnavailable { .. } | ApiError::DatabaseUnavailable(_) | ApiError::DatabaseBusy(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn slug_title_detail(&self) -> (&'static str, &'static str, String) {
        match self {
            ApiError::Validation(_) => {
                ("validation-error", "The request is not valid", "See errors for each field.".into())
            }
            ApiError::Unauthenticated => {
                ("unauthenticated", "Authentication required", "The request carries no valid principal.".into())
            }
            ApiError::Forbidden => ("forbidden", "Forbidden", "This operation is for admins.".into()),
            ApiError::RouteNotFound => ("not-found", "Not found", "No route matches this path.".into()),
            ApiError::MethodNotAllowed { allow } => {
                ("method-not-allowed", "Method not allowed", format!("This path allows {allow}."))
            }
            ApiError::PayloadTooLarge => {
                ("payload-too-large", "Payload too large", "Request bodies may be at most 64 KiB.".into())
            }
            ApiError::BadRequest(detail) => ("bad-request", "Bad request", (*detail).into()),
            ApiError::InvalidCursor => (
                "invalid-cursor",
                "Invalid cursor",
                "The cursor is not one this list gave out for these filters; start again without one.".into(),
            ),
            ApiError::UriTooLong => ("uri-too-long", "URI too long", "The request's URI is too long.".into()),
            ApiError::HeadersTooLarge => (
                "request-header-fields-too-large",
                "Request header fields too large",
                "The request's headers are too many or too large.".into(),
            ),
            ApiError::UnsupportedMediaType => {
                ("unsupported-media-type", "Unsupported media type", "Request bodies must be application/json.".into())
            }
            ApiError::ResourceNotFound => ("resource-not-found", "Resource not found", "No such resource.".into()),
            ApiError::ReservationNotFound => {
                ("reservation-not-found", "Reservation not found", "No such reservation.".into())
            }
            ApiError::WaitlistEntryNotFound => {
                ("waitlist-entry-not-found", "Waitlist entry not found", "No such waitlist entry.".into())
            }
            ApiError::SlotUnavailable => (
                "slot-unavailable",
                "Slot unavailable",
                "The requested capacity is taken for some part of the range.".into(),
            ),
            ApiError::ReservationNotHeld { status } => {
                ("reservation-not-held", "Reservation not held", format!("The reservation is {status}."))
            }
            ApiError::ReservationInFlight => (
                "reservation-in-flight",
                "Reservation in flight",
                "The reservation is being confirmed with the system of record; try again when it settles.".into(),
            ),
            ApiError::IdempotencyKeyInProgress { .. } => (
                "idempotency-key-in-progress",
                "Request in progress",
                "A request with this idempotency key is still being processed.".into(),
            ),
            ApiError::IdempotencyKeyReused => (
                "idempotency-key-reused",
                "Idempotency key reused",
                "This idempotency key was used for a different request.".into(),
            ),
            ApiError::UpstreamUnavailable { .. } => (
                "upstream-unavailable",
                "System of record unavailable",
                "The external system of record cannot be reached right now.".into(),
            ),
            ApiError::DatabaseUnavailable(_) => {
                ("database-unavailable", "Service unavailable", "The service is briefly unavailable.".into())
            }
            // The contract's slug for every retryable database condition.
            ApiError::DatabaseBusy(_) => (
                "database-unavailable",
                "Service busy",
                "The request gave way to concurrent work and changed nothing; try it again.".into(),
            ),
            ApiError::Internal(_) => ("internal-error", "Internal error", "An unexpected error occurred.".into()),
        }
    }

    /// The one place an error becomes a response. 5xx causes are logged with their
    /// whole chain here and never shown to the client.
    pub fn into_reply(self) -> Reply {
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
        let (slug, title, detail) = self.slug_title_detail();
        #[derive(Serialize)]
        struct Problem<'a> {
            #[serde(rename = "type")]
            kind: String,
            title: &'a str,
            status: u16,
            detail: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            errors: Option<&'a [FieldError]>,
        }
        let errors = match &self {
            ApiError::Validation(errors) => Some(errors.as_slice()),
            _ => None,
        };
        let problem = Problem { kind: format!("{PROBLEM_BASE}{slug}"), title, status: status.as_u16(), detail, errors };
        let mut reply = Reply::json(status, &problem);
        reply.content_type = PROBLEM_JSON;
        reply.retry_after = match &self {
            ApiError::IdempotencyKeyInProgress { retry_after } | ApiError::UpstreamUnavailable { retry_after } => {
                Some(*retry_after)
            }
            ApiError::DatabaseUnavailable(_) | ApiError::DatabaseBusy(_) => Some(1),
            _ => None,
        };
        if let ApiError::MethodNotAllowed { allow } = self {
            reply.allow = Some(allow);
        }
        reply
    }
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Unavailable(_) => ApiError::DatabaseUnavailable(e),
            DbError::Busy(_) => ApiError::DatabaseBusy(e),
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
            BookingError::SlotUnavailable => ApiError::SlotUnavailable,
            BookingError::NotHeld(status) => ApiError::ReservationNotHeld { status: status.as_str() },
            BookingError::InFlight => ApiError::ReservationInFlight,
            BookingError::InvalidCursor => ApiError::InvalidCursor,
            BookingError::UpstreamUnavailable { retry_after_seconds } => {
                ApiError::UpstreamUnavailable { retry_after: retry_after_seconds }
            }
            BookingError::Db(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
