//! The grid of bookable starts: every start of a window that the rules and the load
//! leave open.

use super::{CalendarRules, local_to_utc};
use crate::domain::{Claim, load_segments};
use chrono::{DateTime, Duration, NaiveDate, NaiveTime, TimeZone, Utc};
use serde::Serialize;

impl CalendarRules {
    /// The bookable starts the query asks for ([`SlotQuery`]): on the grid (or,
    /// without one, every `duration` from local midnight), after hours, notice,
    /// advance, buffers and the load of the bookings.
    pub fn slots(&self, query: &SlotQuery<'_>) -> Vec<Slot> {
        let SlotQuery { from, to, duration, quantity, capacity, claims, now, latest_end } = *query;
        let step = self.slot_minutes.map_or(duration, |m| Duration::minutes(m.into()));
        if step <= Duration::zero() || duration <= Duration::zero() {
            return Vec::new();
        }
        let earliest = from.max(now + Duration::minutes(self.min_notice_minutes.into()));
        let latest_start = self.max_advance_days.map(|d| now + Duration::days(d.into()));
        let stretches = self.schedule.as_ref().map(|s| s.open_stretches(self.time_zone, from, to));
        let segments = load_segments(from, to, &self.widened(claims));
        let (capacity, quantity) = (i64::from(capacity), i64::from(quantity));
        let mut out = Vec::new();
        let (mut seg, mut stretch) = (0, 0);
        let mut last: Option<DateTime<Utc>> = None;
        let mut date = from.with_timezone(&self.time_zone).date_naive();
        let last_date = to.with_timezone(&self.time_zone).date_naive();
        while date <= last_date {
            for start in self.grid_of_day(date, step) {
                let end = start + duration;
                // A skipped wall time lands on a later start, perhaps one already listed.
                if last.is_some_and(|l| start <= l) || start < earliest || end > to || end > latest_end {
                    continue;
                }
                if latest_start.is_some_and(|l| start > l) {
                    continue;
                }
                if let Some(stretches) = &stretches {
                    while stretch < stretches.len() && stretches[stretch].1 <= start {
                        stretch += 1;
                    }
                    if !stretches.get(stretch).is_some_and(|&(open, close)| open <= start && end <= close) {
                        continue;
                    }
                }
                while seg < segments.len() && segments[seg].1 <= start {
                    seg += 1;
                }
                let load = segments[seg..].iter().take_while(|s| s.0 < end).map(|s| s.2).max().unwrap_or(0);
                if load + quantity <= capacity {
                    out.push(Slot { start, end, remaining: capacity - load });
                    last = Some(start);
                }
            }
            date += Duration::days(1);
        }
        out
    }

    /// The instants of one local day's grid, in order: every `step` from local
    /// midnight. A wall time seen twice (the fall-back night) is both of its instants,
    /// since both are on the grid; a skipped one is read by [`local_to_utc`], which
    /// may land on a start listed already.
    fn grid_of_day(&self, date: NaiveDate, step: Duration) -> Vec<DateTime<Utc>> {
        let midnight = date.and_time(NaiveTime::MIN);
        let mut starts = Vec::new();
        let mut wall = Duration::zero();
        while wall < Duration::days(1) {
            let local = midnight + wall;
            match self.time_zone.from_local_datetime(&local) {
                chrono::LocalResult::Ambiguous(earlier, later) => {
                    starts.extend([earlier.with_timezone(&Utc), later.with_timezone(&Utc)]);
                }
                _ => starts.push(local_to_utc(self.time_zone, local)),
            }
            wall += step;
        }
        starts.sort_unstable();
        starts.dedup();
        starts
    }
}

/// What a list of bookable starts asks: starts of `duration` for `quantity` inside
/// `[from, to)`, beside `claims` (the ranges the bookings keep) on a resource of
/// `capacity`; none before `now` (and its notice) nor ending after `latest_end` (the
/// global horizon).
#[derive(Debug, Clone, Copy)]
pub struct SlotQuery<'a> {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub duration: Duration,
    pub quantity: i32,
    pub capacity: i32,
    pub claims: &'a [Claim],
    pub now: DateTime<Utc>,
    pub latest_end: DateTime<Utc>,
}

/// A bookable start: `remaining` units are free over the whole of `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Slot {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub remaining: i64,
}

#[cfg(test)]
mod tests {
    use super::super::testing::{NOW, at, every_day, rules};
    use super::*;

    #[test]
    fn slots_follow_the_grid_in_local_time_the_hours_the_buffers_and_the_load() {
        let mut r = rules("Europe/Berlin", every_day("09:00", "12:00"));
        r.slot_minutes = Some(60);
        r.buffer_after_minutes = 30;
        // Booked 09:00Z-10:00Z under these buffers: it keeps 09:00Z-10:30Z.
        let kept = [Claim { start: at("2027-01-12T09:00:00Z"), end: at("2027-01-12T10:30:00Z"), quantity: 1 }];
        let now = at(NOW);
        let slots = r.slots(&SlotQuery {
            from: at("2027-01-12T00:00:00Z"),
            to: at("2027-01-13T00:00:00Z"),
            duration: Duration::hours(1),
            quantity: 1,
            capacity: 1,
            claims: &kept,
            now,
            latest_end: at("2030-01-01T00:00:00Z"),
        });
        // Open 08:00Z-11:00Z. 09:00Z is taken; 08:00Z would end its buffer over the
        // booking, and 10:00Z starts inside the booking's buffer: nothing is left.
        let starts: Vec<String> = slots.iter().map(|s| s.start.to_rfc3339()).collect();
        assert!(starts.is_empty(), "{starts:?}");
        // Without buffers (and a booking made without them).
        r.buffer_after_minutes = 0;
        let booked = [Claim { start: at("2027-01-12T09:00:00Z"), end: at("2027-01-12T10:00:00Z"), quantity: 1 }];
        let slots = r.slots(&SlotQuery {
            from: at("2027-01-12T00:00:00Z"),
            to: at("2027-01-13T00:00:00Z"),
            duration: Duration::hours(1),
            quantity: 1,
            capacity: 1,
            claims: &booked,
            now,
            latest_end: at("2030-01-01T00:00:00Z"),
        });
        let starts: Vec<String> = slots.iter().map(|s| s.start.to_rfc3339()).collect();
        assert_eq!(starts, ["2027-01-12T08:00:00+00:00", "2027-01-12T10:00:00+00:00"]);
        // The free time of that day is the same, in pieces.
        let free = r.free(at("2027-01-12T00:00:00Z"), at("2027-01-13T00:00:00Z"), 1, &booked);
        let pieces: Vec<(String, String)> = free.iter().map(|p| (p.start.to_rfc3339(), p.end.to_rfc3339())).collect();
        assert_eq!(
            pieces,
            [
                ("2027-01-12T08:00:00+00:00".into(), "2027-01-12T09:00:00+00:00".into()),
                ("2027-01-12T10:00:00+00:00".into(), "2027-01-12T11:00:00+00:00".into())
            ]
        );
    }

    #[test]
    fn on_the_spring_forward_night_a_half_hour_grid_skips_the_missing_hour_once() {
        let mut r = rules("Europe/Berlin", every_day("00:00", "24:00"));
        r.slot_minutes = Some(30);
        let slots = r.slots(&SlotQuery {
            from: at("2027-03-28T00:30:00Z"),
            to: at("2027-03-28T02:00:00Z"),
            duration: Duration::minutes(30),
            quantity: 1,
            capacity: 1,
            claims: &[],
            now: at(NOW),
            latest_end: at("2030-01-01T00:00:00Z"),
        });
        let starts: Vec<String> = slots.iter().map(|s| s.start.to_rfc3339()).collect();
        // 01:30 CET, then 03:00 and 03:30 CEST (01:00Z, 01:30Z): 02:00 and 02:30 do
        // not exist, and land on 03:00 and 03:30, listed once.
        assert_eq!(starts, ["2027-03-28T00:30:00+00:00", "2027-03-28T01:00:00+00:00", "2027-03-28T01:30:00+00:00"]);
    }

    #[test]
    fn on_the_fall_back_night_a_half_hour_grid_lists_both_occurrences_of_the_repeated_hour() {
        let mut r = rules("Europe/Berlin", every_day("00:00", "24:00"));
        r.slot_minutes = Some(30);
        let slots = r.slots(&SlotQuery {
            from: at("2027-10-31T00:00:00Z"),
            to: at("2027-10-31T02:00:00Z"),
            duration: Duration::minutes(30),
            quantity: 1,
            capacity: 1,
            claims: &[],
            now: at(NOW),
            latest_end: at("2030-01-01T00:00:00Z"),
        });
        let starts: Vec<String> = slots.iter().map(|s| s.start.to_rfc3339()).collect();
        // 02:00 and 02:30 CEST (00:00Z, 00:30Z), then the same wall times again in CET
        // (01:00Z, 01:30Z): four half hours of real time, four starts.
        assert_eq!(
            starts,
            [
                "2027-10-31T00:00:00+00:00",
                "2027-10-31T00:30:00+00:00",
                "2027-10-31T01:00:00+00:00",
                "2027-10-31T01:30:00+00:00"
            ]
        );
        assert!(slots.iter().all(|s| r.on_grid(s.start)), "each is a grid start a reserve accepts");
    }
}
