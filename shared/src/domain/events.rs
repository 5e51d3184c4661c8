//! The kinds of event the outbox carries: the one catalogue. The statements that write
//! events bind these texts, the webhooks accept the consumers' share of them, and a
//! test checks that every kind written in SQL (statements, migrations, SQL functions)
//! is one of them.

use super::UnknownValue;

text_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum EventKind as "event kind" {
        ReservationHeld = "reservation.held",
        ReservationConfirmed = "reservation.confirmed",
        ReservationReleased = "reservation.released",
        ReservationExpired = "reservation.expired",
        ReservationCancelled = "reservation.cancelled",
        ReservationFailed = "reservation.failed",
        /// The range or the quantity changed.
        ReservationRescheduled = "reservation.rescheduled",
        /// Only the metadata changed.
        ReservationUpdated = "reservation.updated",
        /// A hold kept longer (`POST /v1/reservations/{id}/extend`).
        ReservationExtended = "reservation.extended",
        WaitlistOffered = "waitlist.offered",
        WaitlistOfferExpired = "waitlist.offer_expired",
        WaitlistCancelled = "waitlist.cancelled",
        /// Deliveries to a webhook endpoint stopped (410 Gone, or failing for days).
        WebhookEndpointDisabled = "webhook.endpoint_disabled",
        /// The intents topic's message for the worker: not an event for consumers.
        IntentRequested = "intent.requested",
    }
}

impl EventKind {
    /// Whether consumers (webhooks, the events queue) receive this kind.
    pub const fn for_consumers(self) -> bool {
        !matches!(self, EventKind::IntentRequested)
    }

    /// The event a reservation's move into `status` records; `None` for `CONFIRMING`,
    /// whose hand-off to the system of record the intent records.
    pub const fn of_status(status: super::Status) -> Option<EventKind> {
        use super::Status;
        match status {
            Status::Held => Some(EventKind::ReservationHeld),
            Status::Confirmed => Some(EventKind::ReservationConfirmed),
            Status::Released => Some(EventKind::ReservationReleased),
            Status::Expired => Some(EventKind::ReservationExpired),
            Status::Cancelled => Some(EventKind::ReservationCancelled),
            Status::Failed => Some(EventKind::ReservationFailed),
            Status::Confirming => None,
        }
    }
}

/// In a message, a kind is its text.
impl serde::Serialize for EventKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for EventKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

const CONSUMER_KINDS: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < EventKind::ALL.len() {
        if EventKind::ALL[i].for_consumers() {
            n += 1;
        }
        i += 1;
    }
    n
};

/// The texts of the kinds consumers receive, in catalogue order.
pub const CONSUMER_EVENT_TYPES: &[&str] = &{
    let mut out = [""; CONSUMER_KINDS];
    let (mut i, mut n) = (0, 0);
    while i < EventKind::ALL.len() {
        if EventKind::ALL[i].for_consumers() {
            out[n] = EventKind::ALL[i].as_str();
            n += 1;
        }
        i += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_as_itself() {
        for kind in EventKind::ALL {
            assert_eq!(kind.as_str().parse::<EventKind>(), Ok(*kind));
        }
        assert!("reservation.moved".parse::<EventKind>().is_err());
    }

    #[test]
    fn consumers_receive_every_kind_but_the_intents_message() {
        assert_eq!(CONSUMER_EVENT_TYPES.len(), EventKind::ALL.len() - 1);
        assert!(!CONSUMER_EVENT_TYPES.contains(&"intent.requested"));
    }

    /// Every `'topic.name'` literal in SQL whose topic is one of the catalogue's, in the
    /// named statements and in the files under `migrations/` and `sql/`.
    #[test]
    fn every_event_kind_written_in_sql_is_in_the_catalogue() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let mut sources: Vec<(String, String)> =
            crate::db::STATEMENTS.iter().map(|(name, sql)| (name.to_string(), sql.to_string())).collect();
        for dir in ["migrations", "sql"] {
            sql_files(&std::path::Path::new(root).join(dir), &mut sources);
        }
        assert!(sources.iter().any(|(name, _)| name.ends_with(".sql")), "no SQL file found under {root}");
        let mut topics: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str().split('.').next().unwrap()).collect();
        topics.dedup();
        let mut unknown = Vec::new();
        for (name, sql) in &sources {
            for topic in &topics {
                let opening = format!("'{topic}.");
                for (at, _) in sql.match_indices(&opening) {
                    let rest = &sql[at + 1..];
                    let len =
                        rest.find(|c: char| !(c.is_ascii_lowercase() || c == '_' || c == '.')).unwrap_or(rest.len());
                    let literal = &rest[..len];
                    if rest[len..].starts_with('\'') && literal.parse::<EventKind>().is_err() {
                        unknown.push(format!("{name}: '{literal}'"));
                    }
                }
            }
        }
        assert!(unknown.is_empty(), "event kinds not in EventKind: {unknown:#?}");
    }

    fn sql_files(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sql_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "sql") {
                out.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
}
