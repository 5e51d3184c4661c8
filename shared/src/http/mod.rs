//! The adapter between `lambda_http` and the booking operations.
//!
//! A handler is `async fn(&AppState, Request) -> Response<Body>`: it matches its route,
//! authenticates, reads a strict body ([`fields`]), runs an operation (inside the idempotency
//! guard for mutations) and answers. Every expected failure is an [`ApiError`] value,
//! turned into problem JSON in exactly one place ([`ApiError::into_reply`]).

pub mod fields;
mod idempotency;
mod lists;
mod problem;
mod problem_types;
mod request;
mod routes;

pub use fields::Rfc3339;
pub use idempotency::{KeyedStatement, carries_key, fingerprint, run_idempotent};
pub use lambda_http::{Body, Request, Response};
pub use lists::{booking_owner, own_waitlist_query, reservations_query, resources_query, waitlist_query};
pub use problem::ApiError;
pub use problem_types::{PROBLEM_BASE, PROBLEM_TYPES, ProblemType, problem_type};
pub use request::{
    EmptyBody, JsonBody, etag, json_body, not_modified, principal, query_names, query_param, query_params, scope,
};
pub use routes::{Function, Matched, Op, ROUTES, RouteSpec, methods_of, route, route_for};

use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use std::future::Future;
use std::time::Instant;
use tracing::Instrument;

pub const JSON: &str = "application/json";
pub const PROBLEM_JSON: &str = "application/problem+json";
pub const HTML: &str = "text/html; charset=utf-8";
/// A calendar feed (RFC 5545 §8.1).
pub const CALENDAR: &str = "text/calendar; charset=utf-8";

/// A response as data: what handlers produce and what idempotency records store.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub location: Option<String>,
    pub retry_after: Option<u64>,
    pub allow: Option<String>,
    /// The challenge of a 401.
    pub www_authenticate: Option<&'static str>,
}

impl Reply {
    pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Reply {
        Reply {
            status,
            content_type: JSON,
            body: serde_json::to_vec(value).expect("response types always serialize"),
            location: None,
            retry_after: None,
            allow: None,
            www_authenticate: None,
        }
    }

    /// A status without a body (a 204).
    pub fn empty(status: StatusCode) -> Reply {
        Reply { body: Vec::new(), ..Reply::json(status, &()) }
    }

    /// A page for a person to read.
    pub fn html(status: StatusCode, page: String) -> Reply {
        Reply { content_type: HTML, body: page.into_bytes(), ..Reply::json(status, &()) }
    }

    pub fn with_location(mut self, location: String) -> Reply {
        self.location = Some(location);
        self
    }

    /// A reservation as the answer to the request that made it (201, or 202 when
    /// queued for the system of record): also how a keyed hold's stored answer is
    /// replayed, so that the replay is the same bytes.
    pub fn reservation_created(status: StatusCode, r: &crate::domain::Reservation) -> Reply {
        Reply::json(status, r).with_location(format!("/v1/reservations/{}", r.id))
    }

    pub fn into_response(self) -> Response<Body> {
        let mut builder = Response::builder().status(self.status).header(header::CONTENT_TYPE, self.content_type);
        if let Some(location) = self.location {
            builder = builder.header(header::LOCATION, location);
        }
        if let Some(secs) = self.retry_after {
            builder = builder.header(header::RETRY_AFTER, secs);
        }
        if let Some(allow) = self.allow {
            builder = builder.header(header::ALLOW, allow);
        }
        if let Some(challenge) = self.www_authenticate {
            builder = builder.header(header::WWW_AUTHENTICATE, challenge);
        }
        builder.body(Body::Binary(self.body)).unwrap_or_else(|_| {
            // Only reachable with a malformed header value, which the fields above rule out.
            let mut r = Response::new(Body::Empty);
            *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            r
        })
    }
}

/// Runs a handler body inside the request's span and turns its `Err` into the problem
/// response. Handlers return `Err` from the Lambda runtime's point of view only for
/// crashes; every failure a client can cause is answered here.
///
/// Every log line of the request carries the span's fields: the route template, the
/// principal (recorded by [`principal`] once known) and the ids the request touched,
/// from its path or from the `Location` of what it created. One line closes it with
/// the status and the duration. In Lambda the runtime's own span around it adds the
/// request id.
///
/// The request's whole time is bounded ([`crate::config::Config::request_timeout`]):
/// past it the answer is 503 `database-unavailable`, so that no request waits on a
/// database peer that went away without closing its connections.
pub async fn respond(
    state: &crate::AppState,
    req: &Request,
    work: impl Future<Output = Result<Response<Body>, ApiError>>,
) -> Response<Body> {
    use tracing::field::Empty;
    let started = Instant::now();
    let span = tracing::info_span!(
        "request",
        method = %req.method(),
        route = Empty,
        principal = Empty,
        resource_id = Empty,
        reservation_id = Empty,
        waitlist_entry_id = Empty,
    );
    if let Ok(matched) = route(req.method(), req.uri().path()) {
        span.record("route", matched.spec.path);
    }
    record_subject(&span, req.uri().path());
    let limit = state.config.request_timeout();
    let outcome = match tokio::time::timeout(limit, work.instrument(span.clone())).await {
        Ok(outcome) => outcome,
        Err(_) => {
            Err(ApiError::DatabaseUnavailable(crate::db::DbError::Unavailable(Box::new(crate::db::TimedOut(limit)))))
        }
    };
    let response = match outcome {
        Ok(response) => response,
        Err(e) => span.in_scope(|| e.into_reply_at(req.uri().path()).into_response()),
    };
    let response = if req.method() == http::Method::HEAD { without_body(response) } else { response };
    if let Some(location) = response.headers().get(header::LOCATION).and_then(|v| v.to_str().ok()) {
        record_subject(&span, location);
    }
    span.in_scope(|| {
        tracing::info!(status = response.status().as_u16(), ms = started.elapsed().as_millis() as u64, "request")
    });
    response
}

/// The answer of a request that may change state, with what it wrote of events.
pub struct Answered {
    pub response: Response<Body>,
    pub written: crate::outbox::Written,
}

/// An answer whose request says nothing of its events: it may have written some, and a
/// claim after it publishes them.
impl From<Response<Body>> for Answered {
    fn from(response: Response<Body>) -> Self {
        Answered { response, written: crate::outbox::Written::MaybeSome }
    }
}

/// [`respond`], for the functions that change state: once the request is done, what it
/// wrote of events is published before the answer, or handed to the relay that
/// publishes it ([`crate::outbox::publish_written`]). A request that failed may have
/// committed (a refusal stored under its key): a claim after it, as after any.
pub async fn respond_publishing(
    state: &crate::AppState,
    req: &Request,
    work: impl Future<Output = Result<Answered, ApiError>>,
) -> Response<Body> {
    let mut written = crate::outbox::Written::MaybeSome;
    let response = respond(state, req, async {
        work.await.map(|answered| {
            written = answered.written;
            answered.response
        })
    })
    .await;
    if !req.method().is_safe() {
        crate::outbox::publish_written(state, written).await;
    }
    response
}

/// The answer to a `HEAD`: the `GET`'s status and headers, its body's length in
/// `Content-Length`, and no body.
pub fn without_body(response: Response<Body>) -> Response<Body> {
    let (mut parts, body) = response.into_parts();
    let length = body.as_ref().len();
    if length > 0 || !parts.headers.contains_key(header::CONTENT_LENGTH) {
        parts.headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    Response::from_parts(parts, Body::Empty)
}

/// Records the id in a path such as `/v1/reservations/{id}/confirm` under its kind.
fn record_subject(span: &tracing::Span, path: &str) {
    let mut segments = path.trim_start_matches('/').split('/');
    let (Some("v1"), Some(collection), Some(id)) = (segments.next(), segments.next(), segments.next()) else {
        return;
    };
    let field = match collection {
        "resources" => "resource_id",
        "reservations" => "reservation_id",
        "waitlist" => "waitlist_entry_id",
        _ => return,
    };
    // Only well-formed ids: the path is the client's text, and a log is no place for it.
    if uuid::Uuid::parse_str(id).is_ok() {
        span.record(field, id);
    }
}

/// Which answer under an idempotency key a response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The operation ran for this request.
    First,
    /// The stored answer of an earlier request with the key.
    Replay,
}

/// Marks a response with `Idempotency-Replayed`: `false` for the first answer, `true`
/// for a replay.
pub(crate) fn mark_replayed(mut response: Response<Body>, answer: Answer) -> Response<Body> {
    let replayed = match answer {
        Answer::First => "false",
        Answer::Replay => "true",
    };
    response.headers_mut().insert("idempotency-replayed", HeaderValue::from_static(replayed));
    response
}
