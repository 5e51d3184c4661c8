//! Signed webhooks: each event of the events queue goes to the endpoints registered for
//! its type and its resource (or for all resources), as a `POST` of the event itself.
//!
//! - **Signature** (the way Stripe signs): `Webhook-Signature: t=<unix>,v1=<hex>`,
//!   where the hex is HMAC-SHA256 under the endpoint's secret over `"<t>.<body>"`. The
//!   timestamp is signed with the body, so a receiver that refuses old timestamps
//!   refuses a replayed request. `Webhook-Id` is the event's id (the same on every
//!   attempt: a receiver drops duplicates by it) and `Webhook-Timestamp` is `t` again.
//!   After a rotation the old secret signs too, as a second `v1`, until it expires.
//! - **At least once, each endpoint once where possible:** an endpoint that answers
//!   2xx is recorded in `webhook_deliveries`; a message delivered again (because
//!   another endpoint failed, or as an SQS duplicate) goes only to the endpoints
//!   without a record. Between a 2xx and its record (a crash, a lost connection) the
//!   endpoint may get the event again, with the same id.
//! - **One slow receiver never holds the others:** the endpoints of one event are
//!   called at once, each with its own timeout ([`Sender`]), and no database
//!   connection is held while they answer.
//!
//! A failure of any endpoint makes the message fail ([`Delivery::Retry`]): the queue
//! delivers it again later, and in the end moves it to its dead-letter queue. The
//! function around this (`functions/notifier`) keeps each reservation's events in
//! order.

// Delivery (the `notify` feature) reads the endpoints from the database; signing does not.
#[cfg(feature = "notify")]
use crate::Clock;
#[cfg(feature = "notify")]
use crate::db::{DbError, webhooks};
#[cfg(feature = "notify")]
use crate::outbox::Envelope;
use chrono::{DateTime, Utc};
#[cfg(feature = "notify")]
use deadpool_postgres::Pool;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

pub const ID_HEADER: &str = "webhook-id";
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
pub const SIGNATURE_HEADER: &str = "webhook-signature";

fn mac(secret: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `Webhook-Signature` value of `body` sent at `timestamp` (Unix seconds).
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    sign_with_all(&[secret], timestamp, body)
}

/// The `Webhook-Signature` value with one `v1` per secret, in order: while a rotated
/// secret still signs, a receiver that knows either one verifies the request.
pub fn sign_with_all(secrets: &[&str], timestamp: i64, body: &[u8]) -> String {
    let mut header = format!("t={timestamp}");
    for secret in secrets {
        let tag = mac(secret, timestamp, body).finalize().into_bytes();
        header.push_str(",v1=");
        header.extend(tag.iter().map(|b| format!("{b:02x}")));
    }
    header
}

/// What a receiver does: `true` when one `v1` of `header` is the signature of `body` at
/// its `t`, and `t` is within `tolerance_seconds` of `now`. Compared in constant time.
pub fn verify(secret: &str, header: &str, body: &[u8], now: DateTime<Utc>, tolerance_seconds: i64) -> bool {
    let mut timestamp = None;
    let mut tags = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", v)) => tags.extend(unhex(v)),
            _ => {}
        }
    }
    let Some(t) = timestamp else { return false };
    if (now.timestamp() - t).abs() > tolerance_seconds {
        return false;
    }
    tags.iter().any(|tag| mac(secret, t, body).verify_slice(tag).is_ok())
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// The outcome of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Every endpoint that wants the event has it (`sent` of them by this attempt; zero
    /// when none wants it or all had it already).
    Done { sent: usize },
    /// Some endpoint did not accept it: deliver the message again.
    Retry { sent: usize, failed: usize },
    /// Not an event at all; only the dead-letter queue can take it.
    Unreadable,
}

/// Posts events to endpoints over HTTPS: rustls on ring with the public roots of
/// webpki-roots (reqwest's `rustls-tls`, as the upstream adapter uses), no redirects (a
/// 3xx is a failure, not a hop to a URL nobody registered), and one timeout per
/// request.
#[cfg(feature = "notify")]
#[derive(Clone)]
pub struct Sender {
    client: reqwest::Client,
    timeout: std::time::Duration,
}

#[cfg(feature = "notify")]
impl Sender {
    pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

    pub fn new(timeout: std::time::Duration) -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .user_agent("reservations-notifier/1")
            .build()
            .expect("a client without custom TLS settings builds");
        Self { client, timeout }
    }

    /// `Ok(status)` for a 2xx, else why not.
    async fn post(&self, target: &webhooks::Target, head: &Envelope, body: &str, now: i64) -> Result<u16, String> {
        let sent = self
            .client
            .post(&target.url)
            .timeout(self.timeout)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(ID_HEADER, head.id.to_string())
            .header(TIMESTAMP_HEADER, now.to_string())
            .header(SIGNATURE_HEADER, sign_with_all(&target.secrets(), now, body.as_bytes()))
            .body(body.to_string())
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => Ok(r.status().as_u16()),
            Ok(r) => Err(format!("status {}", r.status().as_u16())),
            Err(e) if e.is_timeout() => Err("timeout".into()),
            Err(e) => Err(format!("transport: {e}")),
        }
    }
}

/// Delivers one message (an event's JSON) to every endpoint that wants it and has not
/// accepted it yet.
#[cfg(feature = "notify")]
pub async fn deliver(pool: &Pool, clock: &dyn Clock, sender: &Sender, body: &str) -> Result<Delivery, DbError> {
    let Some(head) = Envelope::read(body) else {
        return Ok(Delivery::Unreadable);
    };
    // The connection goes back to the pool before any endpoint is called.
    let targets = {
        let client = pool.get().await?;
        webhooks::due_for_event(&client, head.id, head.kind.as_str(), head.resource_id(), head.occurred_at, clock.now())
            .await?
    };
    if targets.is_empty() {
        return Ok(Delivery::Done { sent: 0 });
    }
    let now = clock.now().timestamp();
    let outcomes = futures::future::join_all(targets.iter().map(|target| sender.post(target, &head, body, now))).await;
    let client = pool.get().await?;
    let (mut sent, mut failed) = (0, 0);
    for (target, outcome) in targets.iter().zip(outcomes) {
        match outcome {
            Ok(status) => {
                sent += 1;
                webhooks::record_delivery(&client, head.id, target.id, i32::from(status), clock.now()).await?;
            }
            Err(reason) => {
                failed += 1;
                tracing::warn!(event_id = %head.id, endpoint_id = %target.id, %reason, "webhook not accepted; will retry");
            }
        }
    }
    crate::metrics::emit(&[("WebhookDeliveries", sent as f64, "Count"), ("WebhookFailures", failed as f64, "Count")]);
    Ok(if failed == 0 { Delivery::Done { sent } } else { Delivery::Retry { sent, failed } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::Envelope;
    use uuid::Uuid;

    #[test]
    fn a_signature_verifies_with_its_secret_and_time_and_nothing_else() {
        let at = DateTime::parse_from_rfc3339("2027-03-15T10:00:00Z").unwrap().with_timezone(&Utc);
        let header = sign("whsec_a", at.timestamp(), b"{\"id\":1}");
        assert!(header.starts_with(&format!("t={},v1=", at.timestamp())));
        assert!(verify("whsec_a", &header, b"{\"id\":1}", at, 300));
        assert!(!verify("whsec_b", &header, b"{\"id\":1}", at, 300), "another secret");
        assert!(!verify("whsec_a", &header, b"{\"id\":2}", at, 300), "another body");
        assert!(!verify("whsec_a", &header, b"{\"id\":1}", at + chrono::Duration::seconds(301), 300), "too old");
        assert!(!verify("whsec_a", "v1=00", b"{\"id\":1}", at, 300), "no timestamp");
    }

    #[test]
    fn a_header_signed_with_two_secrets_verifies_with_either() {
        let at = DateTime::parse_from_rfc3339("2027-03-15T10:00:00Z").unwrap().with_timezone(&Utc);
        let header = sign_with_all(&["whsec_new", "whsec_old"], at.timestamp(), b"{}");
        assert_eq!(header.matches(",v1=").count(), 2, "{header}");
        assert!(header.starts_with(&sign("whsec_new", at.timestamp(), b"{}")), "the current secret first");
        for secret in ["whsec_new", "whsec_old"] {
            assert!(verify(secret, &header, b"{}", at, 300), "{secret}");
        }
        assert!(!verify("whsec_other", &header, b"{}", at, 300));
    }

    #[test]
    fn the_signature_is_the_hmac_of_timestamp_dot_body() {
        // RFC 4231 test case 2 ("Jefe"), with the message split as "<t>.<body>".
        let header = sign("Jefe", 0, b"what do ya want for nothing?");
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"0.what do ya want for nothing?");
        let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(header, format!("t=0,v1={hex}"));
    }

    #[test]
    fn an_event_names_its_resource_and_anything_else_is_unreadable() {
        let (id, resource) = (Uuid::now_v7(), Uuid::now_v7());
        let body = format!(
            r#"{{"id":"{id}","type":"reservation.held","subject_id":"{id}","occurred_at":"2027-01-01T00:00:00Z",
                "data":{{"reservation_id":"{id}","resource_id":"{resource}"}}}}"#
        );
        let head = Envelope::read(&body).unwrap();
        assert_eq!((head.id, head.kind.as_str(), head.resource_id()), (id, "reservation.held", Some(resource)));
        assert_eq!(Envelope::read("{}"), None);
        assert_eq!(Envelope::read("not json"), None);
    }
}
