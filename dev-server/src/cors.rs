//! CORS for browsers on the origins of `CORS_ALLOWED_ORIGINS`, as the HTTP API's CORS
//! configuration does it in AWS (template.yaml, `CorsAllowedOrigins`).
//!
//! A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) from an
//! allowed origin, for a path of the API, is answered here with 204: the methods that
//! path takes, the request headers the API reads, and how long a browser may cache
//! that. Every other answer to an allowed origin names the origin and exposes the
//! headers a client reads. An origin that is not allowed gets no CORS header at all,
//! so the browser keeps the answer from its script; `Vary: Origin` tells caches that
//! the answer depends on it.

use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use lambda_http::{Body, Request, Response};
use shared::config::{AuthMode, Config};

/// How long a browser may reuse a preflight's answer, in seconds.
pub const MAX_AGE: u32 = 600;
/// The response headers a script may read besides the CORS-safelisted ones.
pub const EXPOSED: &str = "Location, Retry-After, Idempotency-Replayed";

/// The request headers the API reads besides the CORS-safelisted ones.
pub const API_HEADERS: &str = "Authorization, Content-Type, Idempotency-Key";

/// The request headers a script may send: the API's, and `X-Principal` where it is the
/// identity.
pub fn allowed_headers(config: &Config) -> &'static str {
    match config.auth_mode {
        AuthMode::Jwt => API_HEADERS,
        AuthMode::Header => "Authorization, Content-Type, Idempotency-Key, X-Principal",
    }
}

/// The request's origin, if CORS allows it.
pub fn allowed_origin<'a>(config: &Config, req: &'a Request) -> Option<&'a HeaderValue> {
    let origin = req.headers().get(header::ORIGIN)?;
    config.cors_allows(origin.to_str().ok()?).then_some(origin)
}

/// The answer to a preflight from an allowed origin for a path of the API; `None` when
/// the request is no such preflight (it is then routed as any request).
pub fn preflight(config: &Config, req: &Request) -> Option<Response<Body>> {
    if req.method() != Method::OPTIONS || !req.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD) {
        return None;
    }
    let origin = allowed_origin(config, req)?.clone();
    let methods = shared::http::methods_of(req.uri().path());
    if methods.is_empty() {
        return None;
    }
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = StatusCode::NO_CONTENT;
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, value(&methods.join(", ")));
    h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(allowed_headers(config)));
    h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(MAX_AGE));
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    Some(response)
}

/// Adds the CORS headers of an actual answer to `origin` (an allowed one).
pub fn decorate(headers: &mut HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED));
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

fn value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).expect("method names are header-safe")
}
