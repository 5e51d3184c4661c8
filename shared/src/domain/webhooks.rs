//! Webhook endpoints: what an admin registers (a URL, the event types it wants, one
//! resource or all) and the rules for it. Delivery is `crate::notify`'s.

use super::{FieldError, UnknownValue};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

/// The event types an endpoint may ask for: the kinds the outbox writes for consumers
/// (see [`super::EventKind`]).
pub const EVENT_TYPES: &[&str] = super::events::CONSUMER_EVENT_TYPES;

/// An endpoint as the API shows it: never its secret.
#[derive(Debug, Clone, Serialize)]
pub struct Webhook {
    pub id: Uuid,
    pub url: String,
    pub resource_id: Option<Uuid>,
    pub event_types: Vec<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    /// When deliveries stopped because the endpoint answered 410 Gone or failed every
    /// attempt for [`DISABLE_AFTER_FAILING`]; `None` while it receives events.
    pub disabled_at: Option<DateTime<Utc>>,
    pub disabled_reason: Option<DisabledReason>,
}

/// How long an endpoint may fail every attempt before it is disabled.
pub const DISABLE_AFTER_FAILING: chrono::Duration = chrono::Duration::days(5);

text_enum! {
    /// Why deliveries to an endpoint stopped.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum DisabledReason as "disabled reason" {
        /// It answered 410 Gone: the receiver says it is gone for good.
        Gone = "gone",
        /// Every attempt failed for [`DISABLE_AFTER_FAILING`].
        Failing = "failing",
    }
}

text_enum! {
    /// What made a delivery attempt: the notifier's own tries, or an admin's resend.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Trigger as "delivery trigger" {
        Queue = "queue",
        Retry = "retry",
        Recover = "recover",
    }
}

/// One attempt to deliver an event to an endpoint, as its log shows it.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryAttempt {
    pub id: Uuid,
    pub endpoint_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    /// 1 for the event's first attempt at this endpoint, and on.
    pub attempt: i32,
    pub trigger: Trigger,
    pub attempted_at: DateTime<Utc>,
    /// The answer's status; `None` when no answer came (see `error`).
    pub status_code: Option<i32>,
    /// Why the attempt failed without an answer, or how a non-2xx answer failed.
    pub error: Option<String>,
    pub duration_ms: i32,
    /// When the events queue tries this event at this endpoint again; `None` when it
    /// will not (accepted, a resend, the last try, or the endpoint disabled).
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// A resend an admin asked for: the sweeper sends it within a minute, and the log
/// shows the attempt.
#[derive(Debug, Clone, Serialize)]
pub struct QueuedResend {
    pub endpoint_id: Uuid,
    pub event_id: Uuid,
    pub requested_at: DateTime<Utc>,
}

/// The answer to a recovery: the endpoint, enabled again, and how many failed events
/// were queued to be sent again.
#[derive(Debug, Clone, Serialize)]
pub struct Recovery {
    #[serde(flatten)]
    pub webhook: Webhook,
    pub resends_queued: u64,
}

/// A Standard Webhooks signing secret: its key is 32 random bytes from the operating
/// system, and its text `whsec_` and their base64. `Debug` shows neither.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(Vec<u8>);

impl SigningSecret {
    /// The spec's bounds on a key's length, in bytes.
    pub const MIN_BYTES: usize = 24;
    pub const MAX_BYTES: usize = 64;
    pub const PREFIX: &str = "whsec_";

    pub fn generate() -> Self {
        let mut key = vec![0u8; 32];
        getrandom::fill(&mut key).expect("the operating system's random source answers");
        SigningSecret(key)
    }

    /// The key as stored; `None` for a length the spec does not allow.
    pub fn from_key(key: Vec<u8>) -> Option<Self> {
        (Self::MIN_BYTES..=Self::MAX_BYTES).contains(&key.len()).then_some(SigningSecret(key))
    }

    /// A secret's text as a receiver holds it: `whsec_` and the key's base64.
    pub fn parse(text: &str) -> Option<Self> {
        Self::from_key(STANDARD.decode(text.strip_prefix(Self::PREFIX)?).ok()?)
    }

    /// The HMAC key: the bytes, named so that every use stands out in review.
    pub fn key(&self) -> &[u8] {
        &self.0
    }

    /// The text shown once to the admin.
    pub fn text(&self) -> String {
        format!("{}{}", Self::PREFIX, STANDARD.encode(&self.0))
    }
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// The answer to the POST that made an endpoint: the one time its secret is shown.
#[derive(Debug, Clone, Serialize)]
pub struct NewWebhook {
    #[serde(flatten)]
    pub webhook: Webhook,
    #[serde(serialize_with = "shown_once")]
    pub secret: SigningSecret,
}

/// The answer to a rotation: the new secret, shown this once, and until when the
/// previous one still signs beside it (`None`: it stopped at once).
#[derive(Debug, Clone, Serialize)]
pub struct RotatedSecret {
    #[serde(flatten)]
    pub webhook: Webhook,
    #[serde(serialize_with = "shown_once")]
    pub secret: SigningSecret,
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
}

/// A signing secret in the one answer that shows it; everywhere else it stays a
/// [`SigningSecret`], which no `Debug` output (so no log line) shows.
fn shown_once<S: serde::Serializer>(secret: &SigningSecret, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&secret.text())
}

/// A URL the notifier may POST to: `https://`, or `http://` to a loopback host (a
/// receiver on the developer's own machine, the tests' receivers). In AWS a loopback
/// address reaches nothing, so plain HTTP never leaves the function there. No user
/// information (it would be a credential in the clear in every listing), no fragment.
pub fn check_url(url: &str) -> Result<(), String> {
    if url.len() > 2000 {
        return Err("must be at most 2000 characters".into());
    }
    let uri: http::Uri = url.parse().map_err(|_| "must be an absolute http or https URL".to_string())?;
    let host = uri.host().unwrap_or("");
    if host.is_empty() || uri.authority().is_none() {
        return Err("must be an absolute http or https URL".into());
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err("must not contain user information".into());
    }
    if url.contains('#') {
        return Err("must not contain a fragment".into());
    }
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if is_loopback(host) => Ok(()),
        Some("http") => Err("must use https (plain http only to localhost, 127.0.0.1 or [::1])".into()),
        _ => Err("must be an absolute http or https URL".into()),
    }
}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost") || bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The event types of a new endpoint: at least one, each a known type, none twice.
/// Sorted, so that two endpoints that want the same read the same.
pub fn check_event_types(types: Vec<String>, errors: &mut Vec<FieldError>) -> Vec<String> {
    if types.is_empty() {
        errors.push(FieldError::new("event_types", "must name at least one event type"));
    }
    for (i, t) in types.iter().enumerate() {
        if !EVENT_TYPES.contains(&t.as_str()) {
            errors.push(FieldError::new(
                format!("event_types[{i}]"),
                format!("must be one of {}", EVENT_TYPES.join(", ")),
            ));
        } else if types[..i].contains(t) {
            errors.push(FieldError::new(format!("event_types[{i}]"), "is given more than once"));
        }
    }
    let mut sorted = types;
    sorted.sort();
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_urls_are_accepted_and_plain_http_only_to_this_machine() {
        assert!(check_url("https://hooks.example.com/reservations?x=1").is_ok());
        assert!(check_url("http://127.0.0.1:8080/hook").is_ok());
        assert!(check_url("http://localhost/hook").is_ok());
        assert!(check_url("http://[::1]:9000/").is_ok());
        assert!(check_url("http://hooks.example.com/").is_err());
        assert!(check_url("ftp://hooks.example.com/").is_err());
        assert!(check_url("/relative").is_err());
        assert!(check_url("https://user:pw@hooks.example.com/").is_err());
        assert!(check_url("https://hooks.example.com/#part").is_err());
        assert!(check_url("not a url").is_err());
        assert!(check_url(&format!("https://example.com/{}", "a".repeat(2000))).is_err());
    }

    #[test]
    fn event_types_must_be_known_and_distinct() {
        let mut errors = Vec::new();
        let types = check_event_types(vec!["waitlist.offered".into(), "reservation.held".into()], &mut errors);
        assert!(errors.is_empty());
        assert_eq!(types, ["reservation.held", "waitlist.offered"]);
        check_event_types(vec!["reservation.held".into(), "nope".into(), "reservation.held".into()], &mut errors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["event_types[1]", "event_types[2]"]);
        let mut errors = Vec::new();
        check_event_types(vec![], &mut errors);
        assert_eq!(errors.len(), 1);
        let mut errors = Vec::new();
        check_event_types(vec!["intent.requested".into()], &mut errors);
        assert_eq!(errors.len(), 1, "intents are not events for consumers");
    }

    #[test]
    fn a_new_endpoints_secret_is_shown_in_its_answer_and_in_no_debug_output() {
        let webhook = Webhook {
            id: Uuid::nil(),
            url: "https://hooks.example.com".into(),
            resource_id: None,
            event_types: vec![],
            created_by: "admin".into(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            disabled_at: None,
            disabled_reason: None,
        };
        let secret = SigningSecret::generate();
        let text = secret.text();
        let created = NewWebhook { webhook, secret };
        assert!(!format!("{created:?}").contains(&text[6..]));
        assert_eq!(serde_json::to_value(&created).unwrap()["secret"], text.as_str());
    }

    #[test]
    fn a_secret_is_whsec_and_the_base64_of_32_random_bytes_and_reads_back_as_its_key() {
        let (a, b) = (SigningSecret::generate(), SigningSecret::generate());
        assert_ne!(a, b);
        assert_eq!(a.key().len(), 32);
        assert!(a.text().starts_with("whsec_") && a.text().len() == 6 + 44, "{}", a.text());
        assert_eq!(SigningSecret::parse(&a.text()), Some(a.clone()));
        assert_eq!(SigningSecret::parse("whsec_c2hvcnQ="), None, "5 bytes: shorter than the spec allows");
        assert_eq!(SigningSecret::parse("whsec_not base64"), None);
        assert_eq!(SigningSecret::parse(&a.text()[6..]), None, "no prefix");
        // A secret given out before Standard Webhooks (64 hex digits) is valid base64:
        // its key is those digits decoded, 48 bytes.
        let old = format!("whsec_{}", "0a".repeat(32));
        assert_eq!(SigningSecret::parse(&old).map(|s| s.key().len()), Some(48));
        assert_eq!(SigningSecret::parse(&old).unwrap().text(), old);
    }
}
