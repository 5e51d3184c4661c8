//! Webhook endpoints: what an admin registers (a URL, the event types it wants, one
//! resource or all) and the rules for it. Delivery is `crate::notify`'s.

use super::FieldError;
use crate::config::Secret;
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
}

/// The answer to the POST that made an endpoint: the one time its secret is shown.
#[derive(Debug, Clone, Serialize)]
pub struct NewWebhook {
    #[serde(flatten)]
    pub webhook: Webhook,
    #[serde(serialize_with = "shown_once")]
    pub secret: Secret,
}

/// The answer to a rotation: the new secret, shown this once, and until when the
/// previous one still signs beside it (`None`: it stopped at once).
#[derive(Debug, Clone, Serialize)]
pub struct RotatedSecret {
    #[serde(flatten)]
    pub webhook: Webhook,
    #[serde(serialize_with = "shown_once")]
    pub secret: Secret,
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
}

/// A signing secret in the one answer that shows it; everywhere else it stays a
/// [`Secret`], which no `Debug` output (so no log line) shows.
fn shown_once<S: serde::Serializer>(secret: &Secret, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(secret.expose())
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
        };
        let created = NewWebhook { webhook, secret: Secret::from("whsec_0123") };
        assert!(!format!("{created:?}").contains("whsec_0123"));
        assert_eq!(serde_json::to_value(&created).unwrap()["secret"], "whsec_0123");
    }
}
