//! Calendar feeds as iCalendar text (RFC 5545): one `VCALENDAR` of `VEVENT`s, one per
//! reservation, each with a stable `UID` (the reservation's id) and a `SEQUENCE` that
//! every significant change raises. Times are UTC (`...Z`); the resource's zone is
//! named beside them (`X-WR-TIMEZONE` on a resource's feed, the local times in each
//! event's `DESCRIPTION`). Lines end in CRLF and are folded at 75 octets; text values
//! are escaped. Nothing here reads the clock: the same bookings give the same bytes,
//! which is what the feed's `ETag` stands on.

use super::Status;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// How a reservation shows in a feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventStatus {
    /// A hold, or a confirmation waiting on the system of record.
    Tentative,
    Confirmed,
    /// Cancelled after it was confirmed: kept in the feed for a while, so that a
    /// calendar that copied it removes it.
    Cancelled,
}

impl EventStatus {
    fn as_str(self) -> &'static str {
        match self {
            EventStatus::Tentative => "TENTATIVE",
            EventStatus::Confirmed => "CONFIRMED",
            EventStatus::Cancelled => "CANCELLED",
        }
    }
}

/// What a feed shows of a reservation, or `None` for one it leaves out (a hold that
/// ended without a booking, a failed confirmation).
pub fn shown_as(status: Status) -> Option<EventStatus> {
    match status {
        Status::Held | Status::Confirming => Some(EventStatus::Tentative),
        Status::Confirmed => Some(EventStatus::Confirmed),
        Status::Cancelled => Some(EventStatus::Cancelled),
        Status::Released | Status::Expired | Status::Failed => None,
    }
}

/// The `SEQUENCE` of a reservation: its moves plus how far its status has come. Both
/// only grow (a status never goes back: held, confirming, confirmed, ended), and each
/// significant change (a move, a confirmation, a cancel) raises one of them, so the
/// number rises on every such change with nothing stored for it.
pub fn sequence(reschedules: i32, status: Status) -> i32 {
    let rank = match status {
        Status::Held => 0,
        Status::Confirming => 1,
        Status::Confirmed => 2,
        Status::Released | Status::Expired | Status::Cancelled | Status::Failed => 3,
    };
    reschedules.saturating_add(rank)
}

/// One reservation as a feed shows it.
#[derive(Debug, Clone)]
pub struct FeedEvent {
    pub id: Uuid,
    pub summary: String,
    pub resource_name: String,
    pub time_zone: String,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub status: EventStatus,
    pub sequence: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A whole feed.
#[derive(Debug, Clone)]
pub struct Feed {
    /// `X-WR-CALNAME`, the name a calendar application gives the subscription.
    pub name: String,
    /// `X-WR-TIMEZONE`: the resource's zone, on a resource's feed.
    pub time_zone: Option<String>,
    pub events: Vec<FeedEvent>,
}

/// The feed's identifier of the product that wrote it (`PRODID`).
const PRODID: &str = "-//Reservations//Calendar feed 1.0//EN";
/// How often a calendar application should read the feed again (RFC 7986).
const REFRESH: &str = "PT15M";

impl Feed {
    /// The feed as an iCalendar object, CRLF line ends, folded.
    pub fn to_ics(&self) -> String {
        let mut out = String::new();
        let mut line = |name: &str, value: &str| content_line(&mut out, name, value);
        line("BEGIN", "VCALENDAR");
        line("VERSION", "2.0");
        line("PRODID", PRODID);
        line("CALSCALE", "GREGORIAN");
        line("X-WR-CALNAME", &escape(&self.name));
        line("NAME", &escape(&self.name));
        if let Some(zone) = &self.time_zone {
            line("X-WR-TIMEZONE", &escape(zone));
        }
        line("REFRESH-INTERVAL;VALUE=DURATION", REFRESH);
        line("X-PUBLISHED-TTL", REFRESH);
        for e in &self.events {
            line("BEGIN", "VEVENT");
            line("UID", &e.id.to_string());
            // A feed has no METHOD, so DTSTAMP is when the event was last revised.
            line("DTSTAMP", &utc(e.updated_at));
            line("CREATED", &utc(e.created_at));
            line("LAST-MODIFIED", &utc(e.updated_at));
            line("SEQUENCE", &e.sequence.to_string());
            line("DTSTART", &utc(e.starts_at));
            line("DTEND", &utc(e.ends_at));
            line("STATUS", e.status.as_str());
            line("TRANSP", if e.status == EventStatus::Cancelled { "TRANSPARENT" } else { "OPAQUE" });
            line("SUMMARY", &escape(&e.summary));
            line("LOCATION", &escape(&e.resource_name));
            line("DESCRIPTION", &escape(&local_times(e)));
            line("X-RESERVATIONS-TIME-ZONE", &escape(&e.time_zone));
            line("END", "VEVENT");
        }
        line("END", "VCALENDAR");
        out
    }
}

/// A DATE-TIME in UTC (`19970714T173000Z`), whole seconds.
fn utc(t: DateTime<Utc>) -> String {
    t.format("%Y%m%dT%H%M%SZ").to_string()
}

/// The event's times in its resource's zone, for a person reading the event.
fn local_times(e: &FeedEvent) -> String {
    let zone: chrono_tz::Tz = e.time_zone.parse().unwrap_or(chrono_tz::UTC);
    let (start, end) = (e.starts_at.with_timezone(&zone), e.ends_at.with_timezone(&zone));
    let end_format = if start.date_naive() == end.date_naive() { "%H:%M" } else { "%Y-%m-%d %H:%M" };
    format!("{}: {} to {} ({})", e.resource_name, start.format("%Y-%m-%d %H:%M"), end.format(end_format), e.time_zone)
}

/// A TEXT value (RFC 5545 §3.3.11): backslash, semicolon and comma escaped, line
/// breaks as `\n`, other control characters left out (TEXT admits none).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' => out.push_str("\\n"),
            '\t' => out.push('\t'),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The longest a line may be, in octets, without its CRLF (RFC 5545 §3.1).
const MAX_OCTETS: usize = 75;

/// Writes `name:value` as one content line, folded so that no line is longer than
/// [`MAX_OCTETS`] octets: a fold is CRLF and a space, never inside a UTF-8 character.
fn content_line(out: &mut String, name: &str, value: &str) {
    let mut width = 0;
    for c in name.chars().chain(std::iter::once(':')).chain(value.chars()) {
        let octets = c.len_utf8();
        if width + octets > MAX_OCTETS {
            out.push_str("\r\n ");
            width = 1;
        }
        out.push(c);
        width += octets;
    }
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(summary: &str) -> FeedEvent {
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        FeedEvent {
            id: Uuid::nil(),
            summary: summary.into(),
            resource_name: "Room 101".into(),
            time_zone: "Europe/Paris".into(),
            starts_at: at("2027-03-15T10:00:00.5Z"),
            ends_at: at("2027-03-15T11:00:00Z"),
            status: EventStatus::Confirmed,
            sequence: 2,
            created_at: at("2027-03-01T09:00:00Z"),
            updated_at: at("2027-03-02T09:00:00Z"),
        }
    }

    fn feed(events: Vec<FeedEvent>) -> String {
        Feed { name: "Room 101".into(), time_zone: Some("Europe/Paris".into()), events }.to_ics()
    }

    #[test]
    fn every_line_ends_in_crlf_and_is_at_most_75_octets() {
        let ics = feed(vec![event(&"é, long; text\\ ".repeat(40))]);
        assert!(ics.ends_with("END:VCALENDAR\r\n"));
        assert!(!ics.replace("\r\n", "").contains('\n'), "no bare line feed");
        for line in ics.split("\r\n") {
            assert!(line.len() <= 75, "{} octets: {line}", line.len());
        }
        // Unfolded, the value is whole again.
        let unfolded = ics.replace("\r\n ", "");
        assert!(unfolded.contains(&format!("SUMMARY:{}\r\n", "é\\, long\\; text\\\\ ".repeat(40))));
    }

    #[test]
    fn a_fold_never_splits_a_character() {
        let ics = feed(vec![event(&"€".repeat(60))]);
        for line in ics.split("\r\n") {
            assert!(std::str::from_utf8(line.as_bytes()).is_ok());
            assert!(line.len() <= 75);
        }
    }

    #[test]
    fn text_is_escaped_and_control_characters_are_left_out() {
        assert_eq!(escape("a,b;c\\d\r\ne\nf\u{7}g"), "a\\,b\\;c\\\\d\\ne\\nfg");
    }

    #[test]
    fn times_are_utc_in_whole_seconds_with_the_local_times_described() {
        let ics = feed(vec![event("x")]);
        assert!(ics.contains("\r\nDTSTART:20270315T100000Z\r\n"), "{ics}");
        assert!(ics.contains("\r\nDTEND:20270315T110000Z\r\n"));
        assert!(ics.contains("\r\nDTSTAMP:20270302T090000Z\r\n"));
        assert!(ics.contains("\r\nX-WR-TIMEZONE:Europe/Paris\r\n"));
        assert!(ics.replace("\r\n ", "").contains("DESCRIPTION:Room 101: 2027-03-15 11:00 to 12:00 (Europe/Paris)"));
    }

    #[test]
    fn the_sequence_rises_with_every_move_and_every_step_of_the_status() {
        assert_eq!(sequence(0, Status::Held), 0);
        assert!(sequence(0, Status::Confirmed) > sequence(0, Status::Held));
        assert!(sequence(1, Status::Confirmed) > sequence(0, Status::Confirmed));
        assert!(sequence(1, Status::Cancelled) > sequence(1, Status::Confirmed));
        assert_eq!(shown_as(Status::Expired), None);
        assert_eq!(shown_as(Status::Cancelled), Some(EventStatus::Cancelled));
    }
}
