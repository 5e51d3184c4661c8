//! Calendar rules of a resource: its time zone, weekly opening hours with dated
//! exceptions, buffers, notice, advance and the grid of starts. Pure: the booking
//! layer reads the rules under the resource lock and asks [`CalendarRules::judge`].
//!
//! # Local time and daylight saving
//!
//! Hours are wall-clock times in the resource's zone, turned into instants with the
//! IANA database that chrono-tz compiles in. A wall time the zone skips (02:30 on the
//! spring-forward night in `Europe/Berlin`) is read with the offset in force before
//! the gap, which lands it as far after the gap's start as it was written (02:30 is
//! 01:30Z, that is 03:30 CEST); a wall time the zone has twice (02:30 on the fall-back
//! night) is its earlier occurrence. This is RFC 5545's rule and Temporal's
//! `compatible` disambiguation: an opening never vanishes and never happens twice.
//! The slot grid is real time, not a rule's reading: on the fall-back night both
//! instants of a repeated grid time are listed, and both are on the grid.
//!
//! # Hours
//!
//! A booking fits when it lies inside one stretch of opening time. Ranges that touch
//! (`09:00-12:00` and `12:00-17:00`, or `22:00-24:00` on one day and `00:00-02:00` on
//! the next) are one stretch: that is how opening hours cross midnight.

pub mod local_time;
mod rules;
mod slots;
mod wire;

pub use local_time::local_to_utc;
pub use rules::{Judge, Rule};
pub use slots::{Reason, Slot, SlotQuery, Starts, Unavailable};
pub use wire::{DAYS, parse_time_zone};

use super::Patch;
use chrono::NaiveDate;
use chrono_tz::Tz;
use std::collections::BTreeMap;

/// One opening range of a day, in minutes after local midnight: `open < close <= 1440`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hours {
    pub open: u16,
    pub close: u16,
}

/// Weekly hours and dated exceptions. A day without hours is closed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Schedule {
    /// Monday first; each day's ranges sorted and not overlapping.
    pub weekly: [Vec<Hours>; 7],
    /// Hours that replace the weekly ones on a date (none: closed that day).
    pub exceptions: BTreeMap<NaiveDate, Vec<Hours>>,
}

/// A resource's calendar rules. The default (UTC, no schedule, no buffers...) allows
/// every range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarRules {
    pub time_zone: Tz,
    pub schedule: Option<Schedule>,
    pub buffer_before_minutes: i32,
    pub buffer_after_minutes: i32,
    pub min_notice_minutes: i32,
    pub max_advance_days: Option<i32>,
    pub slot_minutes: Option<i32>,
}

impl Default for CalendarRules {
    fn default() -> Self {
        CalendarRules {
            time_zone: Tz::UTC,
            schedule: None,
            buffer_before_minutes: 0,
            buffer_after_minutes: 0,
            min_notice_minutes: 0,
            max_advance_days: None,
            slot_minutes: None,
        }
    }
}

/// What a request asks of the rules; `None` (or [`Patch::Keep`]) keeps the current
/// value (at creation: the default), [`Patch::Clear`] clears a rule that may be absent.
#[derive(Debug, Clone, Default)]
pub struct CalendarChange {
    pub time_zone: Option<Tz>,
    pub schedule: Patch<Schedule>,
    pub buffer_before_minutes: Option<i32>,
    pub buffer_after_minutes: Option<i32>,
    pub min_notice_minutes: Option<i32>,
    pub max_advance_days: Patch<i32>,
    pub slot_minutes: Patch<i32>,
}

impl CalendarChange {
    /// The rules `current` becomes.
    pub fn apply(self, current: &CalendarRules) -> CalendarRules {
        CalendarRules {
            time_zone: self.time_zone.unwrap_or(current.time_zone),
            schedule: self.schedule.apply(&current.schedule),
            buffer_before_minutes: self.buffer_before_minutes.unwrap_or(current.buffer_before_minutes),
            buffer_after_minutes: self.buffer_after_minutes.unwrap_or(current.buffer_after_minutes),
            min_notice_minutes: self.min_notice_minutes.unwrap_or(current.min_notice_minutes),
            max_advance_days: self.max_advance_days.apply(&current.max_advance_days),
            slot_minutes: self.slot_minutes.apply(&current.slot_minutes),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.time_zone.is_none()
            && self.schedule.is_keep()
            && self.buffer_before_minutes.is_none()
            && self.buffer_after_minutes.is_none()
            && self.min_notice_minutes.is_none()
            && self.max_advance_days.is_keep()
            && self.slot_minutes.is_keep()
    }
}

/// What the tests of each part build their rules and instants from.
#[cfg(test)]
mod testing {
    use super::*;
    use chrono::{DateTime, Utc};
    use serde_json::{Map, Value, json};

    pub(super) fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    pub(super) fn rules(zone: &str, schedule: Value) -> CalendarRules {
        CalendarRules {
            time_zone: parse_time_zone(zone).unwrap(),
            schedule: Some(Schedule::from_json(&schedule, "schedule").unwrap()),
            ..CalendarRules::default()
        }
    }

    pub(super) fn every_day(open: &str, close: &str) -> Value {
        let mut weekly = Map::new();
        for d in DAYS {
            weekly.insert(d.into(), json!([[open, close]]));
        }
        json!({"weekly": weekly, "exceptions": []})
    }

    pub(super) const NOW: &str = "2027-01-01T00:00:00Z";
}
