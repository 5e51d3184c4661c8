//! The adapter between `lambda_http` and the booking operations.
//!
//! A handler is `async fn(&AppState, Request) -> Response<Body>`: it matches its route,
//! authenticates, parses a strict body, runs an operation (inside the idempotency
//! guard for mutations) and answers. Every expected failure is an [`ApiError`] value,
//! turned into problem JSON in exactly one place ([`ApiError::into_reply`]).

mod idempotency;
mod problem;
mod request;
mod routes;

pub use idempotency::{fingerprint, run_idempotent};
pub use lambda_http::{Body, Request, Response};
pub use problem::{ApiError, PROBLEM_BASE};
pub use request::{JsonBody, Rfc3339, json_body, principal, query_param};
pub use routes::{Function, Matched, Op, ROUTES, RouteSpec, route, route_for};

use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use std::future::Future;

pub const JSON: &str = "application/json";
pub const PROBLEM_JSON: &str = "application/problem+json";

/// A response as data: what handlers produce and what idempotency records store.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub location: Option<String>,
    pub retry_after: Option<u64>,
    pub allow: Option<String>,
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
        }
    }

    pub fn with_location(mut self, location: String) -> Reply {
        self.location = Some(location);
        self
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
        builder.body(Body::Binary(self.body)).unwrap_or_else(|_| {
            // Only reachable with a malformed header value, which the fields above rule out.
            let mut r = Response::new(Body::Empty);
            *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            r
        })
    }
}

/// Runs a handler body and turns its `Err` into the problem response. Handlers return
/// `Err` from the Lambda runtime's point of view only for crashes; every failure a
/// client can cause is answered here.
pub async fn respond(work: impl Future<Output = Result<Response<Body>, ApiError>>) -> Response<Body> {
    match work.await {
        Ok(response) => response,
        Err(e) => e.into_reply().into_response(),
    }
}

/// Marks a response as the first answer (`false`) or a replay (`true`) for a key.
pub(crate) fn mark_replayed(mut response: Response<Body>, replayed: bool) -> Response<Body> {
    response
        .headers_mut()
        .insert("idempotency-replayed", HeaderValue::from_static(if replayed { "true" } else { "false" }));
    response
}
