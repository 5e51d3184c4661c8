//! Reading a request: who asks, a strict JSON body (read with [`super::fields`]),
//! query parameters.

use super::ApiError;
use super::fields::{Fields, ParseError, parse_object, read_object};
use crate::config::{AuthMode, Config};
use crate::domain::Principal;
use http::header;
use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};

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
    let unauthenticated = || ApiError::Unauthenticated(config.auth_mode);
    match config.auth_mode {
        AuthMode::Jwt => {
            let Some(RequestContext::ApiGatewayV2(ctx)) = req.request_context_ref() else {
                return Err(unauthenticated());
            };
            let jwt = ctx.authorizer.as_ref().and_then(|a| a.jwt.as_ref()).ok_or_else(unauthenticated)?;
            let sub = jwt.claims.get("sub").filter(|s| !s.is_empty()).ok_or_else(unauthenticated)?;
            let admin = jwt.claims.get("scope").is_some_and(|s| s.split(' ').any(|x| x == ADMIN_SCOPE))
                || jwt.scopes.as_ref().is_some_and(|s| s.iter().any(|x| x == ADMIN_SCOPE));
            Ok(Principal { id: sub.clone(), admin })
        }
        AuthMode::Header => {
            let raw = req.headers().get("x-principal").ok_or_else(unauthenticated)?;
            let id = principal_header(raw.as_bytes()).ok_or_else(unauthenticated)?;
            let admin = config.is_admin(&id);
            Ok(Principal { id, admin })
        }
    }
}

/// The name an `X-Principal` header carries: a header is ASCII, so a name is sent as its
/// UTF-8 bytes percent-encoded (RFC 3986 §2.1; what JavaScript's `encodeURIComponent`
/// writes). Unescaped may stay only `A-Za-z0-9` and `-._~!*'()@:` (the characters the
/// header accepted before, RFC 3986's unreserved ones and those `encodeURIComponent`
/// leaves as they are), so every name valid before means itself. The decoded name is a
/// principal id as an `owner` field takes it (1 to 255 characters, no control
/// character) with no white space at either end, so "Bob Smith " cannot pass for
/// "Bob Smith". `None`: not a name.
fn principal_header(raw: &[u8]) -> Option<String> {
    let hex = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    let mut bytes = Vec::with_capacity(raw.len());
    let mut rest = raw.iter().copied();
    while let Some(b) = rest.next() {
        match b {
            b'%' => bytes.push(hex(rest.next()?)? << 4 | hex(rest.next()?)?),
            b if b.is_ascii_alphanumeric() || b"-._~!*'()@:".contains(&b) => bytes.push(b),
            _ => return None,
        }
    }
    let name = String::from_utf8(bytes).ok()?;
    let trimmed = name.trim() == name;
    super::fields::principal_name(&name).ok().filter(|_| trimmed)
}

/// A strong entity tag (RFC 9110 §8.8.3) for a representation: a hash of its bytes,
/// so equal bytes give the same tag on every instance of every function.
pub fn etag(body: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(body);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Whether the request's `If-None-Match` names `etag` (or is `*`): the client has this
/// representation, and the answer is a 304. The comparison is the weak one the header
/// calls for (RFC 9110 §13.1.2): a `W/` prefix is ignored.
pub fn not_modified(req: &Request, etag: &str) -> bool {
    req.headers().get_all(header::IF_NONE_MATCH).iter().filter_map(|v| v.to_str().ok()).any(|list| {
        list.split(',').map(str::trim).any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
    })
}

/// A request's JSON object and its canonical form (keys sorted, no whitespace), which
/// is what an idempotency fingerprint covers: reordering fields is the same request.
/// Its fields are read with [`JsonBody::read`] (see [`super::fields`]).
pub struct JsonBody {
    pub object: serde_json::Map<String, serde_json::Value>,
    pub canonical: Vec<u8>,
}

impl JsonBody {
    /// Reads the object's fields: the value `read` builds, or every bad field at once.
    pub fn read<T>(&self, read: impl FnOnce(&mut Fields<'_>) -> Option<T>) -> Result<T, ApiError> {
        read_object(&self.object, read)
    }
}

/// Whether a route takes an empty (or whitespace-only) body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyBody {
    /// An empty body is a 400 `validation-error` on field `body`.
    Refused,
    /// An empty body reads as `{}`.
    Allowed,
}

/// Reads a JSON object body; `empty` says what an empty one is. A key given twice is a
/// 400 naming it, not the last one silently winning.
pub fn json_body(req: &Request, empty: EmptyBody) -> Result<JsonBody, ApiError> {
    let bytes: &[u8] = req.body().as_ref();
    if bytes.len() > MAX_BODY {
        return Err(ApiError::PayloadTooLarge);
    }
    let object = if bytes.iter().all(u8::is_ascii_whitespace) {
        if empty == EmptyBody::Refused {
            return Err(ApiError::validation("body", "is required"));
        }
        serde_json::Map::new()
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
        parse_object(bytes).map_err(ParseError::into_api_error)?
    };
    let canonical = serde_json::to_vec(&object).expect("a JSON object always serializes");
    Ok(JsonBody { object, canonical })
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

/// `s` percent-decoded, or `None` when it is not valid UTF-8 once decoded or a `%` is
/// not followed by two hex digits (percent-encoding keeps such a `%` as it is; this API
/// refuses it).
fn percent_decode(s: &str) -> Option<String> {
    let escapes_whole = s
        .split('%')
        .skip(1)
        .all(|after| after.as_bytes().get(..2).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)));
    let decoded = percent_encoding::percent_decode_str(s).decode_utf8().ok()?;
    escapes_whole.then(|| decoded.into_owned())
}

/// The `scope` query parameter of a confirm, cancel or move: which occurrences of the
/// reservation's series it acts on (`one`, the default; `following`; `all`). A query
/// parameter, not a body field, because a `DELETE` has no body and the three should
/// read alike.
pub fn scope(req: &Request) -> Result<crate::booking::Scope, ApiError> {
    use crate::booking::Scope;
    let values = query_params(req, "scope")?;
    match values.as_slice() {
        [] => Ok(Scope::One),
        [one] if one == "one" => Ok(Scope::One),
        [one] if one == "following" => Ok(Scope::Following),
        [one] if one == "all" => Ok(Scope::All),
        _ => Err(ApiError::validation("scope", "must be one of: one, following, all (once)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_header_is_a_percent_encoded_utf8_name() {
        assert_eq!(principal_header(b"alice").as_deref(), Some("alice"));
        assert_eq!(principal_header(b"svc:worker@example.com").as_deref(), Some("svc:worker@example.com"));
        assert_eq!(principal_header(b"Bob%20Smith").as_deref(), Some("Bob Smith"));
        assert_eq!(principal_header(b"Jos%c3%a9").as_deref(), Some("José"), "hex digits in either case");
        assert_eq!(principal_header(b"O'Brien(2)").as_deref(), Some("O'Brien(2)"));
        assert_eq!(principal_header(b"100%25").as_deref(), Some("100%"));
        for refused in [
            &b"Bob Smith"[..],
            b"Jos\xc3\xa9",
            b"Jos%C3",
            b"Jos%E9",
            b"50%",
            b"%G0",
            b"a%0Ab",
            b"%20",
            b"%20bob",
            b"bob%09",
            b"",
        ] {
            assert_eq!(principal_header(refused), None, "{}", String::from_utf8_lossy(refused));
        }
        assert!(principal_header("a".repeat(255).as_bytes()).is_some());
        assert!(principal_header("a".repeat(256).as_bytes()).is_none());
    }

    #[test]
    fn if_none_match_names_the_tag_weakly_or_with_a_star() {
        let tag = etag(b"BEGIN:VCALENDAR");
        assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() == 34, "{tag}");
        let asking = |value: &str| {
            let req: Request =
                http::Request::builder().header("if-none-match", value).body(lambda_http::Body::Empty).unwrap();
            not_modified(&req, &tag)
        };
        assert!(asking(&tag));
        assert!(asking(&format!("\"other\", W/{tag}")));
        assert!(asking("*"));
        assert!(!asking("\"other\""));
        assert!(!not_modified(&http::Request::builder().body(lambda_http::Body::Empty).unwrap(), &tag));
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
