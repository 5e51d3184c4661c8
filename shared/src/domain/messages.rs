//! The queues' wire types: the one message body both queues carry ([`Envelope`]), the
//! intents queue's message ([`IntentMessage`]), and which queue an outbox row is for
//! ([`Topic`]). Written by the outbox, read by the notifier and the intent worker.

use super::EventKind;
use serde::Serialize;

/// The queue an outbox row is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    Events,
    Intents,
}

impl Topic {
    pub fn as_str(self) -> &'static str {
        match self {
            Topic::Events => "events",
            Topic::Intents => "intents",
        }
    }
}

/// The message of the intents queue: which intent to execute. The one type the
/// outbox writes (as the envelope's `data`), the worker reads and the tests send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct IntentMessage {
    pub intent_id: uuid::Uuid,
    pub reservation_id: uuid::Uuid,
}

impl IntentMessage {
    /// The message in an SQS body (an [`Envelope`]); `None` when it is not one.
    pub fn from_body(body: &str) -> Option<IntentMessage> {
        Envelope::read(body).and_then(|e| IntentMessage::from_envelope(&e))
    }

    /// The message an envelope of the intents topic carries.
    pub fn from_envelope(envelope: &Envelope) -> Option<IntentMessage> {
        serde_json::from_value(envelope.data.clone()).ok()
    }
}

/// The message body of both queues: what the relay publishes, and what the notifier
/// and the intent worker read.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Envelope {
    pub id: uuid::Uuid,
    #[serde(rename = "type")]
    pub kind: EventKind,
    pub subject_id: uuid::Uuid,
    pub occurred_at: chrono::DateTime<chrono::Utc>,
    pub data: serde_json::Value,
}

impl Envelope {
    /// The envelope in a message body; `None` when the body is not one.
    pub fn read(body: &str) -> Option<Envelope> {
        serde_json::from_str(body).ok()
    }

    /// The resource an event is about: every reservation and waitlist event names it.
    pub fn resource_id(&self) -> Option<uuid::Uuid> {
        self.data.get("resource_id")?.as_str()?.parse().ok()
    }
}
