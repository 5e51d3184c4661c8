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
        self.starts(query).slots
    }

    /// Every start of the grid inside the window, each either bookable or with the
    /// one reason it is not ([`Reason`]), judged in the order a person reads them: a
    /// past start is past before it is closed, a closed one closed before it is taken.
    pub fn starts(&self, query: &SlotQuery<'_>) -> Starts {
        let SlotQuery { from, to, duration, quantity, capacity, claims, booked, now, latest_end } = *query;
        let mut out = Starts::default();
        let step = self.slot_minutes.map_or(duration, |m| Duration::minutes(m.into()));
        if step <= Duration::zero() || duration <= Duration::zero() {
            return out;
        }
        let earliest = now + Duration::minutes(self.min_notice_minutes.into());
        let latest_start = self.max_advance_days.map(|d| now + Duration::days(d.into()));
        let stretches = self.schedule.as_ref().map(|s| s.open_stretches(self.time_zone, from, to));
        let segments = load_segments(from, to, &self.widened(claims));
        let bare = load_segments(from, to, booked);
        let (capacity, quantity) = (i64::from(capacity), i64::from(quantity));
        let (mut seg, mut bare_seg, mut stretch) = (0, 0, 0);
        let mut last: Option<DateTime<Utc>> = None;
        let mut date = from.with_timezone(&self.time_zone).date_naive();
        let last_date = to.with_timezone(&self.time_zone).date_naive();
        while date <= last_date {
            for start in self.grid_of_day(date, step) {
                let end = start + duration;
                // A skipped wall time lands on a later start, perhaps one already listed.
                if last.is_some_and(|l| start <= l) || start < from || end > to {
                    continue;
                }
                last = Some(start);
                let closed = stretches.as_ref().is_some_and(|stretches| {
                    while stretch < stretches.len() && stretches[stretch].1 <= start {
                        stretch += 1;
                    }
                    !stretches.get(stretch).is_some_and(|&(open, close)| open <= start && end <= close)
                });
                let load = peak(&segments, &mut seg, start, end);
                let reason = if start < now {
                    Some(Reason::Past)
                } else if closed {
                    Some(Reason::Closed)
                } else if start < earliest {
                    Some(Reason::Notice)
                } else if end > latest_end || latest_start.is_some_and(|l| start > l) {
                    Some(Reason::Advance)
                } else if load + quantity <= capacity {
                    None
                } else if peak(&bare, &mut bare_seg, start, end) + quantity > capacity {
                    Some(Reason::Taken)
                } else {
                    Some(Reason::Buffer)
                };
                match reason {
                    None => out.slots.push(Slot { start, end, remaining: capacity - load }),
                    Some(reason) => out.unavailable.push(Unavailable { start, end, reason }),
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

/// The highest load of `segments` over `[start, end)`, with `seg` the first segment
/// not yet wholly before `start` (starts come in order, so it only moves on).
fn peak(
    segments: &[(DateTime<Utc>, DateTime<Utc>, i64)],
    seg: &mut usize,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> i64 {
    while *seg < segments.len() && segments[*seg].1 <= start {
        *seg += 1;
    }
    segments[*seg..].iter().take_while(|s| s.0 < end).map(|s| s.2).max().unwrap_or(0)
}

/// What a list of bookable starts asks: starts of `duration` for `quantity` inside
/// `[from, to)`, beside `claims` (the ranges the bookings keep) on a resource of
/// `capacity`; none before `now` (and its notice) nor ending after `latest_end` (the
/// global horizon). `booked` are the bookings' own ranges, without their buffers: a
/// start they leave room for but `claims` do not is kept free, not taken.
#[derive(Debug, Clone, Copy)]
pub struct SlotQuery<'a> {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub duration: Duration,
    pub quantity: i32,
    pub capacity: i32,
    pub claims: &'a [Claim],
    pub booked: &'a [Claim],
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

/// Why a start of the grid cannot be booked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// It has begun already.
    Past,
    /// Outside the opening hours, or on a day an exception closes.
    Closed,
    /// Sooner than the minimum notice.
    Notice,
    /// Further ahead than the maximum advance or the service's horizon.
    Advance,
    /// The bookings themselves leave no room for the quantity.
    Taken,
    /// The bookings leave room, but not the time kept free around them (their
    /// buffers or its own).
    Buffer,
    /// The asking principal's own bookings fill a booking limit's window.
    Limit,
}

/// A start of the grid that cannot be booked, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unavailable {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub reason: Reason,
}

/// Every start of a window's grid: the bookable ones and the others with their reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Starts {
    pub slots: Vec<Slot>,
    pub unavailable: Vec<Unavailable>,
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
            booked: &[],
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
            booked: &booked,
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
            booked: &[],
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
            booked: &[],
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

    #[test]
    fn each_start_that_cannot_be_booked_says_why() {
        // Open 09:00-12:00 UTC, a 30-minute grid, 10 minutes kept free after each
        // booking, an hour's notice, at most a day ahead.
        let mut r = rules("UTC", every_day("09:00", "12:00"));
        r.slot_minutes = Some(30);
        r.buffer_after_minutes = 10;
        r.min_notice_minutes = 60;
        r.max_advance_days = Some(1);
        let now = at("2027-01-12T08:20:00Z");
        // Booked 10:00-10:30: it keeps 10:00-10:40.
        let booked = [Claim { start: at("2027-01-12T10:00:00Z"), end: at("2027-01-12T10:30:00Z"), quantity: 1 }];
        let kept = [Claim { start: at("2027-01-12T10:00:00Z"), end: at("2027-01-12T10:40:00Z"), quantity: 1 }];
        let starts = r.starts(&SlotQuery {
            from: at("2027-01-12T08:00:00Z"),
            to: at("2027-01-13T12:00:00Z"),
            duration: Duration::minutes(30),
            quantity: 1,
            capacity: 1,
            claims: &kept,
            booked: &booked,
            now,
            latest_end: at("2030-01-01T00:00:00Z"),
        });
        let reason_at = |t: &str| starts.unavailable.iter().find(|u| u.start == at(t)).map(|u| u.reason);
        assert_eq!(reason_at("2027-01-12T08:00:00Z"), Some(Reason::Past));
        assert_eq!(reason_at("2027-01-12T12:00:00Z"), Some(Reason::Closed));
        assert_eq!(reason_at("2027-01-12T09:00:00Z"), Some(Reason::Notice));
        // 09:30-10:00 would keep 10:00-10:10 free, over the booking.
        assert_eq!(reason_at("2027-01-12T09:30:00Z"), Some(Reason::Buffer));
        assert_eq!(reason_at("2027-01-12T10:00:00Z"), Some(Reason::Taken));
        // 10:30 lies in the ten minutes the booking keeps after it.
        assert_eq!(reason_at("2027-01-12T10:30:00Z"), Some(Reason::Buffer));
        assert_eq!(reason_at("2027-01-13T09:00:00Z"), Some(Reason::Advance));
        let open: Vec<String> = starts.slots.iter().map(|s| s.start.to_rfc3339()).collect();
        assert_eq!(open, ["2027-01-12T11:00:00+00:00", "2027-01-12T11:30:00+00:00"]);
    }
}
