//! Judging a range by the rules: notice, advance, hours, grid, and the buffers
//! against the ranges other bookings keep.

use super::CalendarRules;
use crate::domain::{Claim, FreePiece, free_pieces, peak_load};
use chrono::{DateTime, Duration, Timelike, Utc};
use serde::Serialize;

/// The rule a range breaks, named in the `outside-schedule` problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The start falls on a day without opening hours.
    ClosedDay,
    /// The range is not inside one stretch of opening hours.
    OutsideHours,
    /// The time kept free around a booking overlaps another booking.
    Buffer,
    /// The start is sooner than the minimum notice.
    Notice,
    /// The start is further ahead than the maximum advance.
    Advance,
    /// The start is not on the grid of starts.
    Grid,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::ClosedDay => "closed_day",
            Rule::OutsideHours => "outside_hours",
            Rule::Buffer => "buffer",
            Rule::Notice => "notice",
            Rule::Advance => "advance",
            Rule::Grid => "grid",
        }
    }

    /// A sentence for the problem's `detail`.
    pub fn explain(self) -> &'static str {
        match self {
            Rule::ClosedDay => "The resource is closed on the day of the start.",
            Rule::OutsideHours => "The range is not inside the resource's opening hours.",
            Rule::Buffer => "The time kept free around bookings overlaps another booking.",
            Rule::Notice => "The start is sooner than the resource's minimum notice.",
            Rule::Advance => "The start is further ahead than the resource's maximum advance.",
            Rule::Grid => "The start is not on the resource's grid of starts.",
        }
    }
}

/// Which rules a judgement applies: a reschedule that keeps its start is not judged
/// again on notice, advance and grid, which concern only the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judge {
    Everything,
    KeepsStart,
}

impl CalendarRules {
    /// Whether any rule constrains a booking (the time zone alone does not).
    pub fn any(&self) -> bool {
        self.schedule.is_some()
            || self.buffer_before_minutes > 0
            || self.buffer_after_minutes > 0
            || self.min_notice_minutes > 0
            || self.max_advance_days.is_some()
            || self.slot_minutes.is_some()
    }

    /// The time a booking of `[start, end)` keeps for itself, buffers included.
    pub fn buffered(&self, start: DateTime<Utc>, end: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        (
            start - Duration::minutes(self.buffer_before_minutes.into()),
            end + Duration::minutes(self.buffer_after_minutes.into()),
        )
    }

    /// How far either side of a range other bookings can reach into its buffers.
    pub fn reach(&self) -> Duration {
        Duration::minutes(i64::from(self.buffer_before_minutes) + i64::from(self.buffer_after_minutes))
    }

    /// The first rule `[start, end)` breaks at `now`, leaving the buffers (which need
    /// the other bookings: [`CalendarRules::judge_buffers`]).
    pub fn judge(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        now: DateTime<Utc>,
        judge: Judge,
    ) -> Result<(), Rule> {
        if judge == Judge::Everything {
            if start < now + Duration::minutes(self.min_notice_minutes.into()) {
                return Err(Rule::Notice);
            }
            if self.max_advance_days.is_some_and(|days| start > now + Duration::days(days.into())) {
                return Err(Rule::Advance);
            }
        }
        if let Some(schedule) = &self.schedule {
            let local_start = start.with_timezone(&self.time_zone);
            let fits = schedule
                .open_stretches(self.time_zone, start, end)
                .iter()
                .any(|&(open, close)| open <= start && end <= close);
            if !fits {
                if schedule.hours_on(local_start.date_naive()).is_empty() {
                    return Err(Rule::ClosedDay);
                }
                return Err(Rule::OutsideHours);
            }
        }
        if judge == Judge::Everything && !self.on_grid(start) {
            return Err(Rule::Grid);
        }
        Ok(())
    }

    /// Whether `start` is on the grid: whole minutes after local midnight that the
    /// grid divides (no grid: every start).
    pub fn on_grid(&self, start: DateTime<Utc>) -> bool {
        let Some(step) = self.slot_minutes else { return true };
        let local = start.with_timezone(&self.time_zone);
        local.second() == 0
            && local.nanosecond() == 0
            && (local.hour() * 60 + local.minute()).is_multiple_of(u32::try_from(step).unwrap_or(1))
    }

    /// Whether `quantity` more over `[start, end)`, with its buffers, fits beside
    /// `kept`: the ranges the active bookings near it keep (each its own widened by
    /// the buffers in force when it was made). With buffers, every booking claims its
    /// kept range.
    pub fn judge_buffers(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        quantity: i32,
        capacity: i32,
        kept: &[Claim],
    ) -> Result<(), Rule> {
        let (from, to) = self.buffered(start, end);
        if peak_load(from, to, kept) + i64::from(quantity) > i64::from(capacity) {
            return Err(Rule::Buffer);
        }
        Ok(())
    }

    /// The kept ranges of other bookings as a new booking's own range sees them: its
    /// buffers must stay off them too, so each reaches its buffer after further back
    /// and its buffer before further on.
    pub fn widened(&self, kept: &[Claim]) -> Vec<Claim> {
        let (before, after) =
            (Duration::minutes(self.buffer_before_minutes.into()), Duration::minutes(self.buffer_after_minutes.into()));
        kept.iter().map(|c| Claim { start: c.start - after, end: c.end + before, quantity: c.quantity }).collect()
    }

    /// Where a new booking could lie in `[from, to)`: beside the ranges the bookings
    /// keep (`claims`, [`CalendarRules::judge_buffers`]) with its own buffers, and,
    /// with a schedule, inside the opening hours.
    pub fn free(&self, from: DateTime<Utc>, to: DateTime<Utc>, capacity: i64, claims: &[Claim]) -> Vec<FreePiece> {
        let pieces = free_pieces(from, to, capacity, &self.widened(claims));
        let Some(schedule) = &self.schedule else { return pieces };
        let stretches = schedule.open_stretches(self.time_zone, from, to);
        let mut out = Vec::new();
        for p in pieces {
            for &(open, close) in &stretches {
                let (start, end) = (p.start.max(open), p.end.min(close));
                if start < end {
                    out.push(FreePiece { start, end, remaining: p.remaining });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{NOW, at, every_day, rules};
    use super::*;
    use serde_json::json;

    #[test]
    fn a_berlin_nine_oclock_opening_is_eight_utc_in_winter_and_seven_in_summer() {
        let r = rules("Europe/Berlin", every_day("09:00", "17:00"));
        let now = at(NOW);
        assert_eq!(r.judge(at("2027-01-12T08:00:00Z"), at("2027-01-12T09:00:00Z"), now, Judge::Everything), Ok(()));
        assert_eq!(
            r.judge(at("2027-01-12T07:00:00Z"), at("2027-01-12T08:00:00Z"), now, Judge::Everything),
            Err(Rule::OutsideHours)
        );
        assert_eq!(r.judge(at("2027-07-13T07:00:00Z"), at("2027-07-13T08:00:00Z"), now, Judge::Everything), Ok(()));
        assert_eq!(
            r.judge(at("2027-07-13T15:00:00Z"), at("2027-07-13T16:00:00Z"), now, Judge::Everything),
            Err(Rule::OutsideHours),
            "17:00 CEST is 15:00Z: closing time"
        );
    }

    #[test]
    fn zones_with_quarter_and_half_hour_offsets_open_at_their_own_wall_time() {
        let now = at(NOW);
        // Kathmandu is +05:45: 09:00 is 03:15Z.
        let r = rules("Asia/Kathmandu", every_day("09:00", "10:00"));
        assert_eq!(r.judge(at("2027-02-01T03:15:00Z"), at("2027-02-01T04:15:00Z"), now, Judge::Everything), Ok(()));
        assert_eq!(
            r.judge(at("2027-02-01T03:00:00Z"), at("2027-02-01T04:00:00Z"), now, Judge::Everything),
            Err(Rule::OutsideHours)
        );
        // Kolkata is +05:30, and a 30-minute grid there is on :00 and :30 local.
        let mut r = rules("Asia/Kolkata", every_day("09:00", "18:00"));
        r.slot_minutes = Some(30);
        assert_eq!(r.judge(at("2027-02-01T03:30:00Z"), at("2027-02-01T04:30:00Z"), now, Judge::Everything), Ok(()));
        assert_eq!(
            r.judge(at("2027-02-01T03:45:00Z"), at("2027-02-01T04:45:00Z"), now, Judge::Everything),
            Err(Rule::Grid)
        );
    }

    #[test]
    fn a_day_without_hours_is_closed_and_an_exception_replaces_the_weekday() {
        let r = rules(
            "UTC",
            json!({"weekly": {"fri": [["09:00", "17:00"]]},
                   "exceptions": [{"date": "2027-12-24", "hours": [["09:00", "12:00"]]},
                                  {"date": "2027-12-31", "hours": []}]}),
        );
        let now = at(NOW);
        // 2027-12-24 and 2027-12-31 are Fridays; 2027-12-25 a Saturday.
        assert_eq!(
            r.judge(at("2027-12-25T10:00:00Z"), at("2027-12-25T11:00:00Z"), now, Judge::Everything),
            Err(Rule::ClosedDay)
        );
        assert_eq!(
            r.judge(at("2027-12-31T10:00:00Z"), at("2027-12-31T11:00:00Z"), now, Judge::Everything),
            Err(Rule::ClosedDay)
        );
        assert_eq!(r.judge(at("2027-12-24T10:00:00Z"), at("2027-12-24T11:00:00Z"), now, Judge::Everything), Ok(()));
        assert_eq!(
            r.judge(at("2027-12-24T11:00:00Z"), at("2027-12-24T13:00:00Z"), now, Judge::Everything),
            Err(Rule::OutsideHours)
        );
        assert_eq!(r.judge(at("2027-12-17T11:00:00Z"), at("2027-12-17T13:00:00Z"), now, Judge::Everything), Ok(()));
    }

    #[test]
    fn touching_ranges_are_one_stretch_even_across_midnight() {
        let r = rules(
            "UTC",
            json!({"weekly": {"mon": [["09:00", "12:00"], ["12:00", "13:00"], ["22:00", "24:00"]],
                              "tue": [["00:00", "02:00"]]}, "exceptions": []}),
        );
        let now = at(NOW);
        // 2027-02-01 is a Monday.
        assert_eq!(r.judge(at("2027-02-01T11:00:00Z"), at("2027-02-01T12:30:00Z"), now, Judge::Everything), Ok(()));
        assert_eq!(r.judge(at("2027-02-01T23:00:00Z"), at("2027-02-02T01:00:00Z"), now, Judge::Everything), Ok(()));
        assert_eq!(
            r.judge(at("2027-02-01T12:30:00Z"), at("2027-02-01T13:30:00Z"), now, Judge::Everything),
            Err(Rule::OutsideHours)
        );
    }

    #[test]
    fn notice_advance_and_grid_judge_the_start() {
        let r = CalendarRules {
            min_notice_minutes: 60,
            max_advance_days: Some(30),
            slot_minutes: Some(15),
            ..CalendarRules::default()
        };
        let now = at("2027-01-01T10:00:00Z");
        let hour = Duration::hours(1);
        assert_eq!(r.judge(now + Duration::minutes(45), now + hour * 2, now, Judge::Everything), Err(Rule::Notice));
        assert_eq!(r.judge(now + hour, now + hour * 2, now, Judge::Everything), Ok(()));
        assert_eq!(
            r.judge(now + Duration::days(31), now + Duration::days(32), now, Judge::Everything),
            Err(Rule::Advance)
        );
        assert_eq!(r.judge(now + Duration::minutes(70), now + hour * 2, now, Judge::Everything), Err(Rule::Grid));
        // A booking under way keeps its start: only the hours are judged again.
        assert_eq!(r.judge(now - hour, now + hour, now, Judge::KeepsStart), Ok(()));
    }

    #[test]
    fn buffers_keep_time_free_around_every_booking() {
        let r = CalendarRules { buffer_before_minutes: 10, buffer_after_minutes: 15, ..CalendarRules::default() };
        // Booked 10:00-11:00 under these buffers: it keeps 09:50-11:15.
        let booked = [Claim { start: at("2027-02-01T09:50:00Z"), end: at("2027-02-01T11:15:00Z"), quantity: 1 }];
        // Ends 11:00 plus 15 after; a new one needs 10 before: starts at 11:25 at the earliest.
        assert_eq!(
            r.judge_buffers(at("2027-02-01T11:20:00Z"), at("2027-02-01T12:00:00Z"), 1, 1, &booked),
            Err(Rule::Buffer)
        );
        assert_eq!(r.judge_buffers(at("2027-02-01T11:25:00Z"), at("2027-02-01T12:00:00Z"), 1, 1, &booked), Ok(()));
        assert_eq!(r.judge_buffers(at("2027-02-01T11:20:00Z"), at("2027-02-01T12:00:00Z"), 1, 2, &booked), Ok(()));
    }
}
