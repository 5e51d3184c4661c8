//! Reading a request: who asks, a strict JSON body, query parameters.

use super::ApiError;
use crate::config::{AuthMode, Config};
use crate::domain::{FieldError, Principal};
use chrono::{DateTime, Timelike, Utc};
use http::header;
use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

pub const MAX_BODY: usize = 64 * 1024;
const ADMIN_SCOPE: &str = "reservations/admin";

/// The principal of a request, by the configured identity mode. It is recorded on the
/// request's span (see [`super::respond`]), so every later log line names it.
pub fn principal(req: &Request, config: &Config) -> Result<Principal, ApiError> {
    let who = identify(req, config)?;
    tracing::Span::current().record("principal", who.id.as_str());
    Ok(who)
}

fn identify(req: &Request, config: &Config) -> Result<Principal, ApiError> {
    match config.auth_mode {
        AuthMode::Jwt => {
            let Some(RequestContext::ApiGatewayV2(ctx)) = req.request_context_ref() else {
                return Err(ApiError::Unauthenticated);
            };
            let jwt = ctx.authorizer.as_ref().and_then(|a| a.jwt.as_ref()).ok_or(ApiError::Unauthenticated)?;
            let sub = jwt.claims.get("sub").filter(|s| !s.is_empty()).ok_or(ApiError::Unauthenticated)?;
            let admin = jwt.claims.get("scope").is_some_and(|s| s.split(' ').any(|x| x == ADMIN_SCOPE))
                || jwt.scopes.as_ref().is_some_and(|s| s.iter().any(|x| x == ADMIN_SCOPE));
            Ok(Principal { id: sub.clone(), admin })
        }
        AuthMode::Header => {
            let raw = req.headers().get("x-principal").ok_or(ApiError::Unauthenticated)?;
            let id = raw.to_str().map_err(|_| ApiError::Unauthenticated)?;
            let valid =
                (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._@:-".contains(&b));
            if !valid {
                return Err(ApiError::Unauthenticated);
            }
            Ok(Principal { id: id.to_string(), admin: config.is_admin(id) })
        }
    }
}

/// A parsed body and its canonical form (keys sorted, no whitespace), which is what
/// an idempotency fingerprint covers: reordering fields is the same request.
pub struct JsonBody<T> {
    pub value: T,
    pub canonical: Vec<u8>,
}

/// Parses a strict JSON object body. `empty_ok` lets a route take no body as `{}`.
pub fn json_body<T: DeserializeOwned>(req: &Request, empty_ok: bool) -> Result<JsonBody<T>, ApiError> {
    let bytes: &[u8] = req.body().as_ref();
    if bytes.len() > MAX_BODY {
        return Err(ApiError::PayloadTooLarge);
    }
    let value: serde_json::Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        if !empty_ok {
            return Err(ApiError::validation("body", "is required"));
        }
        serde_json::Value::Object(Default::default())
    } else {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        if !is_json {
            return Err(ApiError::UnsupportedMediaType);
        }
        serde_json::from_slice(bytes)
            .map_err(|e| ApiError::validation("body", format!("is not valid JSON: {}", strip_position(&e))))?
    };
    if !value.is_object() {
        return Err(ApiError::validation("body", "must be a JSON object"));
    }
    let canonical = serde_json::to_vec(&value).expect("a JSON value always serializes");
    let parsed = serde_path_to_error::deserialize(&value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "body".to_string() } else { path };
        ApiError::Validation(vec![FieldError::new(field, strip_position(e.inner()))])
    })?;
    Ok(JsonBody { value: parsed, canonical })
}

/// serde_json appends " at line 1 column 7"; the field name says more to a client.
fn strip_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// A query parameter, percent-decoded. A literal `+` stays a `+` (it is the offset
/// sign of a timestamp far more often than an encoded space here).
pub fn query_param(req: &Request, name: &str) -> Option<String> {
    let query = req.uri().query()?;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k)? == name).then(|| percent_decode(v)).flatten()
    })
}

/// Every value of a repeatable query parameter (`status=HELD&status=CONFIRMED`), in
/// order, percent-decoded as [`query_param`] does. A value that does not decode is a
/// 400 naming the parameter, not a value silently skipped.
pub fn query_params(req: &Request, name: &str) -> Result<Vec<String>, ApiError> {
    let mut values = Vec::new();
    for (k, v) in query_pairs(req) {
        if k.as_deref() == Some(name) {
            values.push(v.ok_or_else(|| ApiError::validation(name, "is not valid percent-encoded UTF-8"))?);
        }
    }
    Ok(values)
}

/// The names of the query's parameters, in order, for refusing the unknown ones; a
/// name that does not decode is given as it was sent.
pub fn query_names(req: &Request) -> Vec<String> {
    let raw = req.uri().query().unwrap_or("").split('&').filter(|p| !p.is_empty());
    raw.map(|pair| {
        let k = pair.split_once('=').map_or(pair, |(k, _)| k);
        percent_decode(k).unwrap_or_else(|| k.to_string())
    })
    .collect()
}

fn query_pairs(req: &Request) -> impl Iterator<Item = (Option<String>, Option<String>)> + '_ {
    req.uri().query().unwrap_or("").split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k), percent_decode(v))
    })
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// An RFC 3339 timestamp that must carry an offset (`Z` or `+02:00`); kept in UTC, at
/// the microsecond precision PostgreSQL stores, so that every later check (such as
/// `end` after `start`) judges the value that will be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rfc3339(pub DateTime<Utc>);

impl Rfc3339 {
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = DateTime::parse_from_rfc3339(s)
            .map_err(|_| "must be an RFC 3339 timestamp with an offset, such as 2027-03-15T10:00:00Z".to_string())?;
        // chrono keeps a leap second as a 60th second; PostgreSQL and this calendar
        // have none.
        if t.timestamp_subsec_nanos() >= 1_000_000_000 {
            return Err("must not be a leap second (:60)".to_string());
        }
        let t = t.with_timezone(&Utc);
        let micros = t.timestamp_subsec_nanos() / 1_000 * 1_000;
        Ok(Rfc3339(t.with_nanosecond(micros).unwrap_or(t)))
    }
}

impl<'de> Deserialize<'de> for Rfc3339 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Rfc3339::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_need_an_offset() {
        assert!(Rfc3339::parse("2027-03-15T10:00:00Z").is_ok());
        let t = Rfc3339::parse("2027-03-15T12:00:00+02:00").unwrap();
        assert_eq!(t, Rfc3339::parse("2027-03-15T10:00:00Z").unwrap());
        assert!(Rfc3339::parse("2027-03-15T10:00:00").is_err());
        assert!(Rfc3339::parse("2027-03-15").is_err());
        assert!(Rfc3339::parse("yesterday").is_err());
    }

    #[test]
    fn timestamps_keep_the_microseconds_that_postgresql_stores() {
        let t = Rfc3339::parse("2027-03-15T15:00:00.1234569Z").unwrap();
        assert_eq!(t, Rfc3339::parse("2027-03-15T15:00:00.123456Z").unwrap());
        let (a, b) = (Rfc3339::parse("2027-03-15T15:00:00.0000001Z"), Rfc3339::parse("2027-03-15T15:00:00.0000009Z"));
        assert_eq!(a.unwrap(), b.unwrap());
    }

    #[test]
    fn a_leap_second_is_refused() {
        assert!(Rfc3339::parse("2027-06-30T23:59:60Z").is_err());
        assert!(Rfc3339::parse("2027-06-30T23:59:59.999999Z").is_ok());
    }

    #[test]
    fn query_values_are_percent_decoded_and_keep_plus_signs() {
        let req: Request = http::Request::builder()
            .uri("/x?from=2027-03-15T10%3A00%3A00%2B02%3A00&to=2027-03-15T12:00:00+02:00&bad=%zz")
            .body(lambda_http::Body::Empty)
            .unwrap();
        assert_eq!(query_param(&req, "from").as_deref(), Some("2027-03-15T10:00:00+02:00"));
        assert_eq!(query_param(&req, "to").as_deref(), Some("2027-03-15T12:00:00+02:00"));
        assert_eq!(query_param(&req, "bad"), None);
        assert_eq!(query_param(&req, "missing"), None);
    }

    #[test]
    fn a_repeatable_parameter_gives_every_value_in_order() {
        let req: Request = http::Request::builder()
            .uri("/x?status=HELD&limit=3&status=CONFIRMED&st%61tus=EXPIRED&other")
            .body(lambda_http::Body::Empty)
            .unwrap();
        assert_eq!(query_params(&req, "status").unwrap(), ["HELD", "CONFIRMED", "EXPIRED"]);
        assert!(query_params(&req, "missing").unwrap().is_empty());
        assert_eq!(query_names(&req), ["status", "limit", "status", "status", "other"]);
        let bad: Request = http::Request::builder().uri("/x?status=%zz").body(lambda_http::Body::Empty).unwrap();
        let Err(ApiError::Validation(errors)) = query_params(&bad, "status") else { panic!("refused") };
        assert_eq!(errors[0].field, "status");
    }
}
