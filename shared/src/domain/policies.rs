//! A resource's booking policies: the deadlines for an owner's cancel and move, how
//! often a booking may be moved, how long a hold may be kept by extending it, and how
//! many bookings one principal may have per window. Admins are not held to them (what
//! they do is recorded in `acted_by`).

use super::Patch;
use super::calendar::local_time::local_to_utc;
use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

/// The most limits one resource may have.
pub const MAX_LIMITS: usize = 5;

/// `None` (and no limits): no such rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Policies {
    /// A confirmed booking may be cancelled by its owner until this long before its start.
    pub cancel_notice_minutes: Option<i32>,
    /// A booking may be moved by its owner until this long before its start.
    pub reschedule_notice_minutes: Option<i32>,
    /// How many times its owner may move a booking.
    pub max_reschedules: Option<i32>,
    /// How long a hold may be kept in all, from its creation, by extending it; without
    /// it a hold cannot be extended.
    pub max_hold_seconds: Option<i32>,
    /// At most so many live bookings and holds per principal per window.
    pub limits: Vec<BookingLimit>,
}

/// At most `max` live bookings and holds of one principal on a resource whose starts
/// fall in one window: a calendar day, ISO week (from Monday) or month in the
/// resource's time zone, or any span of `rolling_minutes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookingLimit {
    pub max: i32,
    pub window: Window,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_minutes: Option<i32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    Day,
    Week,
    Month,
    Rolling,
}

/// A limit a booking would break, and the window it counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitReached {
    pub limit: BookingLimit,
    pub window_start: DateTime<Utc>,
    pub window_end: DateTime<Utc>,
    /// When the earliest of the counted holds lapses and frees a place; `None`: only a
    /// cancel frees one.
    pub frees_at: Option<DateTime<Utc>>,
}

/// The service-wide limit of active holds per principal, reached: a new hold would be
/// one more than `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldsReached {
    pub max: i32,
    /// When the earliest of the principal's active holds lapses and frees a place.
    pub frees_at: Option<DateTime<Utc>>,
}

/// One of the principal's live bookings or holds on the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub start: DateTime<Utc>,
    /// A hold's expiry; `None` for a booking.
    pub expires_at: Option<DateTime<Utc>>,
}

impl BookingLimit {
    /// The calendar window of `start` in `zone`; `None` for a rolling limit.
    fn calendar_window(&self, start: DateTime<Utc>, zone: Tz) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let day = start.with_timezone(&zone).date_naive();
        let (first, next) = match self.window {
            Window::Day => (day, day.succ_opt()?),
            Window::Week => {
                let monday = day - Duration::days(day.weekday().num_days_from_monday().into());
                (monday, monday + Duration::days(7))
            }
            Window::Month => {
                let first = NaiveDate::from_ymd_opt(day.year(), day.month(), 1)?;
                let next = if day.month() == 12 {
                    NaiveDate::from_ymd_opt(day.year() + 1, 1, 1)?
                } else {
                    NaiveDate::from_ymd_opt(day.year(), day.month() + 1, 1)?
                };
                (first, next)
            }
            Window::Rolling => return None,
        };
        let midnight = |d: NaiveDate| local_to_utc(zone, d.and_time(chrono::NaiveTime::MIN));
        Some((midnight(first), midnight(next)))
    }

    fn rolling(&self) -> Duration {
        Duration::minutes(self.rolling_minutes.unwrap_or(0).into())
    }

    /// The span of starts that can share a window with `start`: what to read.
    pub fn reach(&self, start: DateTime<Utc>, zone: Tz) -> (DateTime<Utc>, DateTime<Utc>) {
        match self.calendar_window(start, zone) {
            Some(window) => window,
            None => (start - self.rolling(), start + self.rolling()),
        }
    }

    /// Whether a booking starting at `start` breaks this limit, beside `others` (the
    /// principal's other live bookings and holds on the resource).
    pub fn judge(&self, start: DateTime<Utc>, zone: Tz, others: &[Counted]) -> Result<(), LimitReached> {
        let max = usize::try_from(self.max).unwrap_or(0);
        let reached = |window_start, window_end, counted: Vec<&Counted>| LimitReached {
            limit: *self,
            window_start,
            window_end,
            frees_at: counted.iter().filter_map(|c| c.expires_at).min(),
        };
        if let Some((from, to)) = self.calendar_window(start, zone) {
            let counted: Vec<&Counted> = others.iter().filter(|c| c.start >= from && c.start < to).collect();
            return if counted.len() < max { Ok(()) } else { Err(reached(from, to, counted)) };
        }
        // Every span of `rolling_minutes` that holds `start`: the fullest begins at
        // `start` or at another start before it.
        let span = self.rolling();
        let edges = others.iter().map(|c| c.start).filter(|s| *s > start - span && *s <= start).chain([start]);
        for from in edges {
            let to = from + span;
            let counted: Vec<&Counted> = others.iter().filter(|c| c.start >= from && c.start < to).collect();
            if counted.len() >= max {
                return Err(reached(from, to, counted));
            }
        }
        Ok(())
    }
}

/// The first of `limits` a booking starting at `start` breaks.
/// The span whose bookings `limits` count for bookings starting from `first` to `last`:
/// from the earliest of their windows to the latest. `None` without limits.
pub fn limits_reach(
    limits: &[BookingLimit],
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    zone: Tz,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let from = limits.iter().map(|l| l.reach(first, zone).0).min()?;
    let to = limits.iter().map(|l| l.reach(last, zone).1).max()?;
    Some((from, to))
}

pub fn judge_limits(
    limits: &[BookingLimit],
    start: DateTime<Utc>,
    zone: Tz,
    others: &[Counted],
) -> Result<(), LimitReached> {
    limits.iter().try_for_each(|l| l.judge(start, zone, others))
}

/// Which deadline closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    Cancel,
    Reschedule,
}

impl Deadline {
    /// The resource field that sets it.
    pub fn field(self) -> &'static str {
        match self {
            Deadline::Cancel => "cancel_notice_minutes",
            Deadline::Reschedule => "reschedule_notice_minutes",
        }
    }
}

/// A deadline past which the owner may no longer act: the last instant allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed {
    pub deadline: Deadline,
    pub at: DateTime<Utc>,
}

impl Policies {
    /// Whether the owner may still act on a booking starting at `start`: allowed up to
    /// and including `notice` minutes before it (as `min_notice_minutes` allows a start
    /// exactly that far ahead).
    pub fn check(&self, deadline: Deadline, start: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), Closed> {
        let notice = match deadline {
            Deadline::Cancel => self.cancel_notice_minutes,
            Deadline::Reschedule => self.reschedule_notice_minutes,
        };
        match notice {
            Some(minutes) => {
                let at = start - Duration::minutes(minutes.into());
                if now <= at { Ok(()) } else { Err(Closed { deadline, at }) }
            }
            None => Ok(()),
        }
    }
}

/// What a resource's body asks to change of its policies.
#[derive(Debug, Default)]
pub struct PoliciesChange {
    pub cancel_notice_minutes: Patch<i32>,
    pub reschedule_notice_minutes: Patch<i32>,
    pub max_reschedules: Patch<i32>,
    pub max_hold_seconds: Patch<i32>,
    /// `Clear` (or an empty list): no limits.
    pub limits: Patch<Vec<BookingLimit>>,
}

impl PoliciesChange {
    /// The policies `current` becomes.
    pub fn apply(self, current: &Policies) -> Policies {
        Policies {
            cancel_notice_minutes: self.cancel_notice_minutes.apply(&current.cancel_notice_minutes),
            reschedule_notice_minutes: self.reschedule_notice_minutes.apply(&current.reschedule_notice_minutes),
            max_reschedules: self.max_reschedules.apply(&current.max_reschedules),
            max_hold_seconds: self.max_hold_seconds.apply(&current.max_hold_seconds),
            limits: match self.limits {
                Patch::Keep => current.limits.clone(),
                Patch::Clear => Vec::new(),
                Patch::Set(limits) => limits,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(d: u32, h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 3, d, h, 0, 0).unwrap()
    }

    fn held(start: DateTime<Utc>) -> Counted {
        Counted { start, expires_at: Some(start - Duration::days(1)) }
    }

    #[test]
    fn a_day_limit_counts_the_starts_of_the_resources_local_day() {
        let two_a_day = BookingLimit { max: 2, window: Window::Day, rolling_minutes: None };
        let zone: Tz = "America/New_York".parse().unwrap();
        // 2027-03-15 in New York runs from 04:00 UTC (EDT) to 04:00 UTC the next day.
        let others = [held(at(15, 13)), Counted { start: at(15, 20), expires_at: None }];
        let refused = two_a_day.judge(at(16, 2), zone, &others).unwrap_err();
        assert_eq!((refused.window_start, refused.window_end), (at(15, 4), at(16, 4)));
        assert_eq!(refused.frees_at, Some(at(14, 13)), "the hold's expiry frees a place");
        assert_eq!(two_a_day.judge(at(16, 5), zone, &others), Ok(()), "the next local day");
    }

    #[test]
    fn a_rolling_limit_refuses_a_start_whose_span_is_full_on_either_side() {
        let two_in_4h = BookingLimit { max: 2, window: Window::Rolling, rolling_minutes: Some(240) };
        let others = [held(at(15, 8)), held(at(15, 11))];
        assert!(two_in_4h.judge(at(15, 10), Tz::UTC, &others).is_err(), "08:00-12:00 would hold three");
        assert!(two_in_4h.judge(at(15, 9), Tz::UTC, &others).is_err(), "08:00-12:00 would hold three");
        assert_eq!(two_in_4h.judge(at(15, 6), Tz::UTC, &others), Ok(()), "06:00-10:00 holds two, 08:00-12:00 two");
        assert_eq!(two_in_4h.judge(at(15, 15), Tz::UTC, &others), Ok(()), "11:00-15:00 holds one");
        assert_eq!(two_in_4h.judge(at(15, 4), Tz::UTC, &[held(at(15, 8))]), Ok(()));
    }

    #[test]
    fn week_and_month_windows_start_on_monday_and_the_first() {
        let zone = Tz::Europe__Berlin;
        let week = BookingLimit { max: 1, window: Window::Week, rolling_minutes: None };
        // Wednesday 2027-03-17; its week starts Monday the 15th at 00:00 in Berlin (23:00 UTC the day before).
        let refused = week.judge(at(17, 12), zone, &[held(at(15, 9))]).unwrap_err();
        assert_eq!(refused.window_start, Utc.with_ymd_and_hms(2027, 3, 14, 23, 0, 0).unwrap());
        let month = BookingLimit { max: 1, window: Window::Month, rolling_minutes: None };
        let refused = month.judge(at(17, 12), zone, &[held(at(2, 9))]).unwrap_err();
        assert_eq!(refused.window_end, Utc.with_ymd_and_hms(2027, 3, 31, 22, 0, 0).unwrap(), "April starts in CEST");
    }

    #[test]
    fn an_owner_may_act_until_the_notice_and_not_a_second_after() {
        let start = Utc.with_ymd_and_hms(2027, 3, 15, 10, 0, 0).unwrap();
        let p = Policies { cancel_notice_minutes: Some(60), ..Policies::default() };
        let deadline = start - Duration::minutes(60);
        assert_eq!(p.check(Deadline::Cancel, start, deadline), Ok(()));
        assert_eq!(
            p.check(Deadline::Cancel, start, deadline + Duration::seconds(1)),
            Err(Closed { deadline: Deadline::Cancel, at: deadline })
        );
        assert_eq!(p.check(Deadline::Reschedule, start, start), Ok(()), "no reschedule notice is set");
    }
}
