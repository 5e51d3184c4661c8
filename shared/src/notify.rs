//! Signed webhooks: each event of the events queue goes to the endpoints registered for
//! its type and its resource (or for all resources), as a `POST` of the event itself.
//!
//! - **Signature: Standard Webhooks 1.0.** `webhook-id` is the event's id (the same on
//!   every attempt: a receiver drops duplicates by it), `webhook-timestamp` the Unix
//!   seconds of this attempt, and `webhook-signature` is `v1,<base64>` where the base64
//!   is HMAC-SHA256 under the endpoint's key over `"<id>.<timestamp>.<body>"`. A secret
//!   is `whsec_` and the base64 of the key ([`SigningSecret`]). After a rotation the old
//!   key signs too, a second `v1,...` after a space, until it expires. Any receiver
//!   built on the spec's libraries verifies it; [`verify`] is what they do.
//! - **At least once, each endpoint once where possible:** an endpoint that answers
//!   2xx is recorded in `webhook_deliveries`; a message delivered again (because
//!   another endpoint failed, or as an SQS duplicate) goes only to the endpoints
//!   without a record. Between a 2xx and its record (a crash, a lost connection) the
//!   endpoint may get the event again, with the same id.
//! - **The log:** every attempt is recorded (`webhook_delivery_attempts`), with the
//!   event as it was sent (`webhook_events`), so that an admin can read what happened
//!   and have an event sent again ([`send_resends`], run by the sweeper).
//! - **Disabling:** an endpoint that answers 410 Gone, or has failed every attempt for
//!   [`DISABLE_AFTER_FAILING`], is disabled in the transaction that records the
//!   attempt, which also writes the `webhook.endpoint_disabled` event.
//! - **One slow receiver never holds the others:** the endpoints of one event are
//!   called at once, each with its own timeout ([`Sender`]), and no database
//!   connection is held while they answer.
//!
//! A failure of any endpoint makes the message fail ([`Delivery::Retry`]): the queue
//! delivers it again after the next wait of [`RETRY_SCHEDULE`], and after the last one
//! moves it to its dead-letter queue. The function around this (`functions/notifier`)
//! keeps each reservation's events in order.

// Delivery (the `notify` feature) reads the endpoints from the database; signing does not.
#[cfg(feature = "notify")]
use crate::Clock;
#[cfg(feature = "notify")]
use crate::db::{DbError, webhooks};
use crate::domain::webhooks::SigningSecret;
#[cfg(feature = "notify")]
use crate::domain::webhooks::{DISABLE_AFTER_FAILING, Trigger};
#[cfg(feature = "notify")]
use crate::outbox::Envelope;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
#[cfg(feature = "notify")]
use deadpool_postgres::Pool;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

pub const ID_HEADER: &str = "webhook-id";
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
pub const SIGNATURE_HEADER: &str = "webhook-signature";

/// The waits between the tries of an event the queue delivers again, each with up to a
/// tenth more or less of jitter: seven tries over about 18 hours, then the dead-letter
/// queue.
pub const RETRY_SCHEDULE: [chrono::Duration; 6] = [
    chrono::Duration::seconds(5),
    chrono::Duration::minutes(5),
    chrono::Duration::minutes(30),
    chrono::Duration::hours(2),
    chrono::Duration::hours(5),
    chrono::Duration::hours(10),
];

/// How many times the queue hands a message over before its dead-letter queue takes it
/// (the events queue's `maxReceiveCount`).
pub const TRIES: u32 = RETRY_SCHEDULE.len() as u32 + 1;

/// The wait after the `try_number`-th try (from 1) failed, with `jitter` (from -1 to 1)
/// tenths of it added; `None` after the last try.
pub fn retry_wait(try_number: u32, jitter: f64) -> Option<chrono::Duration> {
    let base = RETRY_SCHEDULE.get(usize::try_from(try_number.max(1) - 1).ok()?)?;
    let spread = base.num_milliseconds() as f64 * 0.1 * jitter.clamp(-1.0, 1.0);
    Some(*base + chrono::Duration::milliseconds(spread as i64))
}

/// A jitter from -1 to 1 out of the operating system's random source, so that
/// receivers that came back at once are not all called again at once.
pub fn random_jitter() -> f64 {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).expect("the operating system's random source answers");
    f64::from(u32::from_le_bytes(bytes)) / f64::from(u32::MAX) * 2.0 - 1.0
}

fn tag(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `webhook-signature` value of message `id` with `body` sent at `timestamp` (Unix
/// seconds): one `v1,<base64>` per key, in order, separated by spaces. While a rotated
/// key still signs, a receiver that knows either secret verifies the request.
pub fn sign(keys: &[&[u8]], id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter()
        .map(|key| format!("v1,{}", STANDARD.encode(tag(key, id, timestamp, body).finalize().into_bytes())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a receiver does: `true` when `timestamp` is within `tolerance_seconds` of `now`
/// and one `v1` signature of `signature` is the tag of `id`, `timestamp` and `body`
/// under `secret` (its `whsec_` text). Compared in constant time.
pub fn verify(
    secret: &str,
    id: &str,
    timestamp: &str,
    signature: &str,
    body: &[u8],
    now: DateTime<Utc>,
    tolerance_seconds: i64,
) -> bool {
    let (Some(secret), Ok(t)) = (SigningSecret::parse(secret), timestamp.parse::<i64>()) else { return false };
    if (now.timestamp() - t).abs() > tolerance_seconds {
        return false;
    }
    signature
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .filter_map(|b| STANDARD.decode(b).ok())
        .any(|given| tag(secret.key(), id, t, body).verify_slice(&given).is_ok())
}

/// The outcome of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Every endpoint that wants the event has it (`sent` of them by this attempt; zero
    /// when none wants it or all had it already); `disabled` endpoints were disabled
    /// by this attempt, each with its `webhook.endpoint_disabled` event written.
    Done { sent: usize, disabled: usize },
    /// Some endpoint did not accept it: deliver the message again.
    Retry { sent: usize, failed: usize, disabled: usize },
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

/// How one request went.
#[cfg(feature = "notify")]
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: Option<u16>,
    /// Why it failed: no answer (a timeout, a transport error), or a status that is not 2xx.
    pub error: Option<String>,
    pub duration_ms: i32,
}

#[cfg(feature = "notify")]
impl Answer {
    pub fn accepted(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// 410 Gone: the receiver says it is gone for good.
    pub fn gone(&self) -> bool {
        self.status == Some(410)
    }
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

    /// One signed `POST` of `body` (the event `id`) to `target`, signed at `now`.
    async fn post(&self, target: &webhooks::Target, id: uuid::Uuid, body: &str, now: i64) -> Answer {
        let id = id.to_string();
        let started = std::time::Instant::now();
        let sent = self
            .client
            .post(&target.url)
            .timeout(self.timeout)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(ID_HEADER, &id)
            .header(TIMESTAMP_HEADER, now.to_string())
            .header(SIGNATURE_HEADER, sign(&target.keys(), &id, now, body.as_bytes()))
            .body(body.to_string())
            .send()
            .await;
        let duration_ms = i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX);
        let (status, error) = match sent {
            Ok(r) if r.status().is_success() => (Some(r.status().as_u16()), None),
            Ok(r) => (Some(r.status().as_u16()), Some(format!("status {}", r.status().as_u16()))),
            Err(e) if e.is_timeout() => (None, Some("timeout".into())),
            Err(e) => (None, Some(format!("transport: {e}"))),
        };
        Answer { status, error, duration_ms }
    }
}

/// Records one attempt, in one transaction with what it changes: an accepted event's
/// record and the end of the endpoint's run of failures, or the run going on, and the
/// endpoint disabled (with its event) when the failure calls for it. `true` when this
/// attempt disabled the endpoint.
#[cfg(feature = "notify")]
async fn record(pool: &Pool, attempt: webhooks::NewAttempt<'_>, answer: &Answer) -> Result<bool, DbError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let now = attempt.attempted_at;
    let (endpoint_id, event_id) = (attempt.endpoint_id, attempt.event_id);
    webhooks::insert_attempt(&tx, &attempt).await?;
    let mut disabled_now = false;
    if answer.accepted() {
        let status = i32::from(answer.status.unwrap_or(200));
        webhooks::record_delivery(&tx, event_id, endpoint_id, status, now).await?;
        webhooks::endpoint_succeeded(&tx, endpoint_id).await?;
    } else if let Some(disabled) =
        webhooks::endpoint_failed(&tx, endpoint_id, now, answer.gone(), now - DISABLE_AFTER_FAILING).await?
    {
        tracing::warn!(%endpoint_id, reason = ?disabled.disabled_reason, "webhook endpoint disabled");
        webhooks::insert_disabled_event(&tx, &disabled).await?;
        disabled_now = true;
    }
    tx.commit().await?;
    Ok(disabled_now)
}

/// Delivers one message (an event's JSON) to every endpoint that wants it and has not
/// accepted it yet. `retry_in` is the wait before the queue hands it over again if it
/// fails now (`None` on its last try), which the log shows as the next attempt.
#[cfg(feature = "notify")]
pub async fn deliver(
    pool: &Pool,
    clock: &dyn Clock,
    sender: &Sender,
    body: &str,
    retry_in: Option<chrono::Duration>,
) -> Result<Delivery, DbError> {
    let Some(head) = Envelope::read(body) else {
        return Ok(Delivery::Unreadable);
    };
    // The connection goes back to the pool before any endpoint is called.
    let targets = {
        let client = pool.get().await?;
        let targets = webhooks::due_for_event(
            &client,
            head.id,
            head.kind.as_str(),
            head.resource_id(),
            head.occurred_at,
            clock.now(),
        )
        .await?;
        if !targets.is_empty() {
            webhooks::store_event(&client, head.id, head.kind, body, clock.now()).await?;
        }
        targets
    };
    if targets.is_empty() {
        return Ok(Delivery::Done { sent: 0, disabled: 0 });
    }
    let now = clock.now();
    let outcomes = futures::future::join_all(targets.iter().map(|target| async move {
        if target.disabled {
            Answer { status: None, error: Some("endpoint disabled".into()), duration_ms: 0 }
        } else {
            sender.post(target, head.id, body, now.timestamp()).await
        }
    }))
    .await;
    let (mut sent, mut failed, mut disabled) = (0, 0, 0);
    for (target, answer) in targets.iter().zip(outcomes) {
        let retries = !target.disabled && !answer.accepted();
        let attempt = webhooks::NewAttempt {
            endpoint_id: target.id,
            event_id: head.id,
            trigger: Trigger::Queue,
            attempted_at: now,
            status_code: answer.status.map(i32::from),
            error: answer.error.as_deref(),
            duration_ms: answer.duration_ms,
            next_attempt_at: retry_in.filter(|_| retries).map(|wait| now + wait),
        };
        if target.disabled {
            // Logged for a recovery to find; the message is done with it.
            webhooks::insert_attempt(&pool.get().await?, &attempt).await?;
            continue;
        }
        let disabled_now = record(pool, attempt, &answer).await?;
        if answer.accepted() {
            sent += 1;
        } else if disabled_now {
            // Nothing more goes to it: the message is done with it.
            disabled += 1;
            tracing::warn!(event_id = %head.id, endpoint_id = %target.id, "webhook endpoint disabled by this attempt");
        } else {
            failed += 1;
            let reason = answer.error.as_deref().unwrap_or("");
            tracing::warn!(event_id = %head.id, endpoint_id = %target.id, %reason, "webhook not accepted; will retry");
        }
    }
    crate::metrics::emit(&[("WebhookDeliveries", sent as f64, "Count"), ("WebhookFailures", failed as f64, "Count")]);
    Ok(if failed == 0 { Delivery::Done { sent, disabled } } else { Delivery::Retry { sent, failed, disabled } })
}

/// What [`send_resends`] did.
#[derive(Debug, Default, Clone, serde::Serialize, PartialEq, Eq)]
pub struct ResendReport {
    pub accepted: u64,
    pub failed: u64,
}

/// Sends up to `limit` of the resends admins asked for, the oldest first, each to its
/// one endpoint with the event's kept body and a new signature, and logs each attempt.
/// A resend is taken off its queue before it is sent: one that a crash interrupts is
/// not sent, and the log shows no attempt for it (ask again).
#[cfg(feature = "notify")]
pub async fn send_resends(
    pool: &Pool,
    clock: &dyn Clock,
    sender: &Sender,
    limit: i64,
) -> Result<ResendReport, DbError> {
    let resends = webhooks::claim_resends(&pool.get().await?, limit, clock.now()).await?;
    let mut report = ResendReport::default();
    if resends.is_empty() {
        return Ok(report);
    }
    let now = clock.now();
    let answers =
        futures::future::join_all(resends.iter().map(|r| sender.post(&r.target, r.event_id, &r.body, now.timestamp())))
            .await;
    for (resend, answer) in resends.iter().zip(answers) {
        let attempt = webhooks::NewAttempt {
            endpoint_id: resend.target.id,
            event_id: resend.event_id,
            trigger: resend.trigger,
            attempted_at: now,
            status_code: answer.status.map(i32::from),
            error: answer.error.as_deref(),
            duration_ms: answer.duration_ms,
            next_attempt_at: None,
        };
        record(pool, attempt, &answer).await?;
        if answer.accepted() { report.accepted += 1 } else { report.failed += 1 }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::Envelope;
    use uuid::Uuid;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2027-03-15T10:00:00Z").unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_signature_verifies_with_its_secret_id_time_and_body_and_nothing_else() {
        let secret = SigningSecret::generate();
        let (text, t) = (secret.text(), at().timestamp());
        let header = sign(&[secret.key()], "msg_1", t, b"{\"id\":1}");
        assert!(header.starts_with("v1,") && !header.contains(' '), "{header}");
        let ts = t.to_string();
        assert!(verify(&text, "msg_1", &ts, &header, b"{\"id\":1}", at(), 300));
        assert!(!verify(&SigningSecret::generate().text(), "msg_1", &ts, &header, b"{\"id\":1}", at(), 300));
        assert!(!verify(&text, "msg_2", &ts, &header, b"{\"id\":1}", at(), 300), "another id");
        assert!(!verify(&text, "msg_1", &ts, &header, b"{\"id\":2}", at(), 300), "another body");
        assert!(!verify(&text, "msg_1", &(t + 1).to_string(), &header, b"{\"id\":1}", at(), 300), "another time");
        let later = at() + chrono::Duration::seconds(301);
        assert!(!verify(&text, "msg_1", &ts, &header, b"{\"id\":1}", later, 300), "too old");
    }

    #[test]
    fn a_header_signed_with_two_keys_verifies_with_either_secret() {
        let (new, old) = (SigningSecret::generate(), SigningSecret::generate());
        let t = at().timestamp();
        let header = sign(&[new.key(), old.key()], "msg_1", t, b"{}");
        assert_eq!(header.split(' ').count(), 2, "{header}");
        assert!(header.starts_with(&sign(&[new.key()], "msg_1", t, b"{}")), "the current key first");
        for secret in [&new, &old] {
            assert!(verify(&secret.text(), "msg_1", &t.to_string(), &header, b"{}", at(), 300));
        }
        assert!(!verify(&SigningSecret::generate().text(), "msg_1", &t.to_string(), &header, b"{}", at(), 300));
    }

    /// The example of the Standard Webhooks specification: its secret, id, timestamp
    /// and body give its signature.
    #[test]
    fn the_signature_of_the_specs_example_is_the_specs() {
        let secret = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let header = sign(&[secret.key()], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert_eq!(header, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn retries_wait_5s_5m_30m_2h_5h_and_10h_give_or_take_a_tenth_then_stop() {
        let waits: Vec<i64> = (1..=6).map(|n| retry_wait(n, 0.0).unwrap().num_seconds()).collect();
        assert_eq!(waits, [5, 300, 1800, 7200, 18000, 36000]);
        assert_eq!(retry_wait(7, 0.0), None, "the seventh try is the last");
        assert_eq!(retry_wait(2, 1.0).unwrap().num_seconds(), 330);
        assert_eq!(retry_wait(2, -1.0).unwrap().num_seconds(), 270);
        assert_eq!(retry_wait(0, 0.0).unwrap().num_seconds(), 5, "a missing count is the first try");
        assert_eq!(TRIES, 7);
        for _ in 0..100 {
            assert!((-1.0..=1.0).contains(&random_jitter()));
        }
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
