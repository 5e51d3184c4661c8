//! Recurrence rules for series: the subset of RFC 5545's RRULE this service takes, and
//! its expansion into occurrences in a resource's time zone.
//!
//! Taken: `FREQ=DAILY|WEEKLY`, `INTERVAL`, `BYDAY` (plain weekdays, no ordinal), and
//! one of `COUNT` or `UNTIL`. Anything else is refused by name, never ignored: a rule
//! read without a part it carries would book other days than the client meant.
//!
//! Occurrences are expanded in wall-clock time: the first occurrence's local start and
//! local end are repeated on each day the rule names, then each is turned into an
//! instant by the zone's rules of that day ([`local_to_utc`]), so that 09:00 stays
//! 09:00 across a change of offset. Weeks start on Monday (RFC 5545's default `WKST`).

use super::FieldError;
use super::calendar::local_to_utc;
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;

/// The most occurrences one series may have.
pub const MAX_OCCURRENCES: usize = 100;

/// The parts this service reads, for the messages that refuse the others.
const TAKEN: &str = "FREQ, INTERVAL, BYDAY, COUNT, UNTIL";

/// Parts of RFC 5545's RRULE that this service does not take: named when refused.
const NOT_TAKEN: &[&str] =
    &["BYSECOND", "BYMINUTE", "BYHOUR", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS", "WKST"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frequency {
    Daily,
    Weekly,
}

/// Where a series stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Count(usize),
    /// The last instant an occurrence may start at.
    Until(Until),
}

/// `UNTIL` as written: an instant (`...Z`), a local date-time, or a local date (the
/// whole day).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    Instant(DateTime<Utc>),
    Local(NaiveDateTime),
    Date(NaiveDate),
}

/// A recurrence rule as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recurrence {
    pub frequency: Frequency,
    pub interval: u32,
    /// The weekdays named by `BYDAY`, Monday first; empty when not given.
    pub by_day: Vec<Weekday>,
    pub end: End,
}

/// One occurrence: its range, as instants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occurrence {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Recurrence {
    /// Reads an RRULE value (`FREQ=WEEKLY;COUNT=4`, with or without a leading `RRULE:`).
    /// Every bad part is reported, each under `field` and the part's name
    /// (`recurrence.BYMONTH`).
    pub fn parse(field: &str, text: &str) -> Result<Recurrence, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut bad = |part: &str, message: String| {
            let name = if part.is_empty() { field.to_string() } else { format!("{field}.{part}") };
            errors.push(FieldError::new(&name, message));
        };
        let body = text.trim();
        let body = body.strip_prefix("RRULE:").or_else(|| body.strip_prefix("rrule:")).unwrap_or(body);
        let (mut frequency, mut interval, mut by_day, mut count, mut until) = (None, None, None, None, None);
        let mut seen: Vec<String> = Vec::new();
        for part in body.split(';').filter(|p| !p.is_empty()) {
            let Some((name, value)) = part.split_once('=') else {
                bad("", format!("`{part}` is not a NAME=VALUE part"));
                continue;
            };
            let name = name.trim().to_ascii_uppercase();
            let value = value.trim();
            if seen.contains(&name) {
                bad(&name, "is given more than once".into());
                continue;
            }
            seen.push(name.clone());
            match name.as_str() {
                "FREQ" => match value.to_ascii_uppercase().as_str() {
                    "DAILY" => frequency = Some(Frequency::Daily),
                    "WEEKLY" => frequency = Some(Frequency::Weekly),
                    "SECONDLY" | "MINUTELY" | "HOURLY" | "MONTHLY" | "YEARLY" => {
                        bad(&name, format!("FREQ={value} is not supported: DAILY or WEEKLY"))
                    }
                    _ => bad(&name, format!("`{value}` is not a frequency: DAILY or WEEKLY")),
                },
                "INTERVAL" => match value.parse::<u32>() {
                    Ok(n) if (1..=366).contains(&n) => interval = Some(n),
                    _ => bad(&name, "must be a whole number from 1 to 366".into()),
                },
                "COUNT" => match value.parse::<usize>() {
                    Ok(n) if (1..=MAX_OCCURRENCES).contains(&n) => count = Some(n),
                    Ok(n) if n > MAX_OCCURRENCES => bad(
                        &name,
                        format!(
                            "must be at most {MAX_OCCURRENCES}: a series has at most {MAX_OCCURRENCES} occurrences"
                        ),
                    ),
                    _ => bad(&name, format!("must be a whole number from 1 to {MAX_OCCURRENCES}")),
                },
                "UNTIL" => match parse_until(value) {
                    Some(u) => until = Some(u),
                    None => bad(&name, "must be a date (20270331) or a date-time (20270331T090000Z)".into()),
                },
                "BYDAY" => {
                    let mut days = Vec::new();
                    let mut ok = true;
                    for word in value.split(',') {
                        match weekday(word.trim()) {
                            Some(d) if !days.contains(&d) => days.push(d),
                            Some(_) => {}
                            None => {
                                ok = false;
                                let msg = if word
                                    .trim()
                                    .chars()
                                    .next()
                                    .is_some_and(|c| c.is_ascii_digit() || c == '-' || c == '+')
                                {
                                    format!(
                                        "`{word}`: a day with an ordinal is not supported; plain days: MO,TU,WE,TH,FR,SA,SU"
                                    )
                                } else {
                                    format!("`{word}` is not a day: MO,TU,WE,TH,FR,SA,SU")
                                };
                                bad(&name, msg);
                            }
                        }
                    }
                    if ok {
                        days.sort_by_key(|d| d.num_days_from_monday());
                        by_day = Some(days);
                    }
                }
                n if NOT_TAKEN.contains(&n) => bad(n, format!("{n} is not supported: this service takes {TAKEN}")),
                n => bad(n, format!("{n} is not a part of an RRULE; this service takes {TAKEN}")),
            }
        }
        if frequency.is_none() && !seen.iter().any(|n| n == "FREQ") {
            bad("FREQ", "is required: DAILY or WEEKLY".into());
        }
        let end = match (count, until) {
            (Some(_), Some(_)) => {
                bad("UNTIL", "must not be given with COUNT (RFC 5545: one or the other)".into());
                None
            }
            (Some(n), None) => Some(End::Count(n)),
            (None, Some(u)) => Some(End::Until(u)),
            (None, None) if seen.iter().any(|n| n == "COUNT" || n == "UNTIL") => None,
            (None, None) => {
                bad("COUNT", format!("COUNT or UNTIL is required: a series has at most {MAX_OCCURRENCES} occurrences"));
                None
            }
        };
        match (frequency, end) {
            (Some(frequency), Some(end)) if errors.is_empty() => {
                Ok(Recurrence { frequency, interval: interval.unwrap_or(1), by_day: by_day.unwrap_or_default(), end })
            }
            _ => Err(errors),
        }
    }

    /// The occurrences of the rule whose first is `[start, end)`, in `tz`'s wall-clock
    /// time, in order. Refused (under `field`): a `BYDAY` that leaves out the first
    /// occurrence's own weekday (RFC 5545 leaves such a series undefined), an `UNTIL`
    /// before the start, and more than [`MAX_OCCURRENCES`] occurrences.
    pub fn expand(
        &self,
        field: &str,
        tz: Tz,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Vec<Occurrence>, Vec<FieldError>> {
        let local_start = start.with_timezone(&tz).naive_local();
        let length = end.with_timezone(&tz).naive_local() - local_start;
        let first_day = local_start.date();
        if !self.by_day.is_empty() && !self.by_day.contains(&first_day.weekday()) {
            return Err(vec![FieldError::new(
                format!("{field}.BYDAY"),
                format!(
                    "must include the first occurrence's own day ({} in {})",
                    day_name(first_day.weekday()),
                    tz.name()
                ),
            )]);
        }
        let until = match self.end {
            End::Until(Until::Instant(t)) => Some(t),
            End::Until(Until::Local(t)) => Some(local_to_utc(tz, t)),
            // Through the whole day: the last instant before the next midnight.
            End::Until(Until::Date(d)) => Some(
                local_to_utc(tz, (d + Duration::days(1)).and_time(chrono::NaiveTime::MIN)) - Duration::microseconds(1),
            ),
            End::Count(_) => None,
        };
        if until.is_some_and(|u| u < start) {
            return Err(vec![FieldError::new(format!("{field}.UNTIL"), "must not be before start")]);
        }
        let count = match self.end {
            End::Count(n) => n,
            End::Until(_) => MAX_OCCURRENCES + 1,
        };
        let mut out = Vec::new();
        for day in self.days(first_day) {
            let at = local_to_utc(tz, day.and_time(local_start.time()));
            if until.is_some_and(|u| at > u) {
                break;
            }
            if out.len() == count {
                break;
            }
            out.push(Occurrence { start: at, end: local_to_utc(tz, day.and_time(local_start.time()) + length) });
        }
        if out.len() > MAX_OCCURRENCES {
            return Err(vec![FieldError::new(
                format!("{field}.UNTIL"),
                format!("gives more than {MAX_OCCURRENCES} occurrences; a series has at most {MAX_OCCURRENCES}"),
            )]);
        }
        Ok(out)
    }

    /// The local days the rule names from `first` on, in order (unbounded: the caller
    /// stops).
    fn days(&self, first: NaiveDate) -> impl Iterator<Item = NaiveDate> + '_ {
        let step = i64::from(self.interval);
        let monday = first - Duration::days(first.weekday().num_days_from_monday().into());
        (0..).flat_map(move |n: i64| -> Vec<NaiveDate> {
            match self.frequency {
                Frequency::Daily => {
                    let d = first + Duration::days(n * step);
                    if self.by_day.is_empty() || self.by_day.contains(&d.weekday()) { vec![d] } else { vec![] }
                }
                Frequency::Weekly => {
                    let week = monday + Duration::weeks(n * step);
                    let days: &[Weekday] = if self.by_day.is_empty() { &[] } else { &self.by_day };
                    if days.is_empty() {
                        vec![week + Duration::days(first.weekday().num_days_from_monday().into())]
                    } else {
                        days.iter()
                            .map(|d| week + Duration::days(d.num_days_from_monday().into()))
                            .filter(|d| *d >= first)
                            .collect()
                    }
                }
            }
        })
    }
}

fn weekday(word: &str) -> Option<Weekday> {
    Some(match word.to_ascii_uppercase().as_str() {
        "MO" => Weekday::Mon,
        "TU" => Weekday::Tue,
        "WE" => Weekday::Wed,
        "TH" => Weekday::Thu,
        "FR" => Weekday::Fri,
        "SA" => Weekday::Sat,
        "SU" => Weekday::Sun,
        _ => return None,
    })
}

fn day_name(d: Weekday) -> &'static str {
    ["MO", "TU", "WE", "TH", "FR", "SA", "SU"][d.num_days_from_monday() as usize]
}

fn parse_until(value: &str) -> Option<Until> {
    if let Some(utc) = value.strip_suffix('Z') {
        let t = NaiveDateTime::parse_from_str(utc, "%Y%m%dT%H%M%S").ok()?;
        return Some(Until::Instant(Utc.from_utc_datetime(&t)));
    }
    if value.contains('T') {
        return NaiveDateTime::parse_from_str(value, "%Y%m%dT%H%M%S").ok().map(Until::Local);
    }
    if value.len() != 8 {
        return None;
    }
    NaiveDate::parse_from_str(value, "%Y%m%d").ok().map(Until::Date)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn fields(errors: Vec<FieldError>) -> Vec<String> {
        errors.into_iter().map(|e| e.field).collect()
    }

    fn expand(rule: &str, zone: &str, start: &str, end: &str) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
        let tz: Tz = zone.parse().unwrap();
        Recurrence::parse("recurrence", rule)
            .unwrap()
            .expand("recurrence", tz, at(start), at(end))
            .unwrap()
            .into_iter()
            .map(|o| (o.start, o.end))
            .collect()
    }

    #[test]
    fn a_weekly_rule_reads_its_parts_and_defaults_to_every_week() {
        let r = Recurrence::parse("recurrence", "FREQ=WEEKLY;COUNT=4").unwrap();
        assert_eq!(r, Recurrence { frequency: Frequency::Weekly, interval: 1, by_day: vec![], end: End::Count(4) });
        let r = Recurrence::parse("recurrence", "RRULE:freq=daily;interval=2;byday=FR,MO;until=20270331").unwrap();
        assert_eq!(r.by_day, vec![Weekday::Mon, Weekday::Fri]);
        assert_eq!((r.frequency, r.interval), (Frequency::Daily, 2));
        assert_eq!(r.end, End::Until(Until::Date(NaiveDate::from_ymd_opt(2027, 3, 31).unwrap())));
    }

    #[test]
    fn parts_not_supported_are_named_each_and_never_ignored() {
        let e = Recurrence::parse("recurrence", "FREQ=MONTHLY;BYMONTH=3;BYSETPOS=1;COUNT=3").unwrap_err();
        assert_eq!(fields(e), ["recurrence.FREQ", "recurrence.BYMONTH", "recurrence.BYSETPOS"]);
        let e = Recurrence::parse("recurrence", "FREQ=WEEKLY;COUNT=2;UNTIL=20270101T000000Z").unwrap_err();
        assert_eq!(fields(e), ["recurrence.UNTIL"]);
        let e = Recurrence::parse("recurrence", "FREQ=WEEKLY").unwrap_err();
        assert_eq!(fields(e), ["recurrence.COUNT"]);
        let e = Recurrence::parse("recurrence", "COUNT=101;BYDAY=1MO;COLOR=red;FREQ=WEEKLY;FREQ=DAILY").unwrap_err();
        assert_eq!(fields(e), ["recurrence.COUNT", "recurrence.BYDAY", "recurrence.COLOR", "recurrence.FREQ"]);
        let e = Recurrence::parse("recurrence", "INTERVAL=0;UNTIL=tomorrow;WKST=SU").unwrap_err();
        assert_eq!(fields(e), ["recurrence.INTERVAL", "recurrence.UNTIL", "recurrence.WKST", "recurrence.FREQ"]);
        let e = Recurrence::parse("recurrence", "weekly").unwrap_err();
        assert_eq!(fields(e), ["recurrence", "recurrence.FREQ", "recurrence.COUNT"]);
    }

    #[test]
    fn weekly_at_nine_in_berlin_stays_at_nine_across_both_changes_of_offset() {
        // 2027-03-28 CET -> CEST, 2027-10-31 CEST -> CET; Mondays at 09:00 local.
        let spring = expand("FREQ=WEEKLY;COUNT=3", "Europe/Berlin", "2027-03-22T08:00:00Z", "2027-03-22T09:00:00Z");
        assert_eq!(
            spring.iter().map(|o| o.0).collect::<Vec<_>>(),
            [at("2027-03-22T08:00:00Z"), at("2027-03-29T07:00:00Z"), at("2027-04-05T07:00:00Z")]
        );
        assert!(spring.iter().all(|(s, e)| *e - *s == Duration::hours(1)));
        let autumn = expand("FREQ=WEEKLY;COUNT=2", "Europe/Berlin", "2027-10-25T07:00:00Z", "2027-10-25T08:00:00Z");
        assert_eq!(autumn[1].0, at("2027-11-01T08:00:00Z"));
    }

    #[test]
    fn weekly_with_days_and_an_interval_walks_weeks_from_monday() {
        // Monday 2027-01-04 09:00 UTC, Mondays and Wednesdays every other week.
        let o =
            expand("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE;COUNT=5", "UTC", "2027-01-04T09:00:00Z", "2027-01-04T10:00:00Z");
        let days: Vec<u32> = o.iter().map(|o| o.0.day()).collect();
        assert_eq!(days, [4, 6, 18, 20, 1]);
        // Starting on a Wednesday: the Monday before it is not an occurrence.
        let o = expand("FREQ=WEEKLY;BYDAY=MO,WE;COUNT=2", "UTC", "2027-01-06T09:00:00Z", "2027-01-06T10:00:00Z");
        assert_eq!(o.iter().map(|o| o.0.day()).collect::<Vec<_>>(), [6, 11]);
    }

    #[test]
    fn daily_with_days_keeps_only_those_days_and_until_includes_its_last_day() {
        // Friday 2027-01-01; weekdays only, through Tuesday the 5th.
        let o = expand(
            "FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR;UNTIL=20270105",
            "America/New_York",
            "2027-01-01T14:00:00Z",
            "2027-01-01T15:00:00Z",
        );
        assert_eq!(o.iter().map(|o| o.0.day()).collect::<Vec<_>>(), [1, 4, 5]);
        let o = expand("FREQ=DAILY;UNTIL=20270103T140000Z", "UTC", "2027-01-01T14:00:00Z", "2027-01-01T15:00:00Z");
        assert_eq!(o.len(), 3);
    }

    #[test]
    fn too_many_occurrences_a_day_left_out_and_an_until_before_the_start_are_refused() {
        let tz: Tz = "UTC".parse().unwrap();
        let (s, e) = (at("2027-01-04T09:00:00Z"), at("2027-01-04T10:00:00Z"));
        let r = Recurrence::parse("recurrence", "FREQ=DAILY;UNTIL=20280101").unwrap();
        assert_eq!(fields(r.expand("recurrence", tz, s, e).unwrap_err()), ["recurrence.UNTIL"]);
        let r = Recurrence::parse("recurrence", "FREQ=DAILY;UNTIL=20270412").unwrap();
        assert_eq!(r.expand("recurrence", tz, s, e).unwrap().len(), 99);
        let r = Recurrence::parse("recurrence", "FREQ=WEEKLY;BYDAY=TU;COUNT=2").unwrap();
        assert_eq!(fields(r.expand("recurrence", tz, s, e).unwrap_err()), ["recurrence.BYDAY"]);
        let r = Recurrence::parse("recurrence", "FREQ=WEEKLY;UNTIL=20270101").unwrap();
        assert_eq!(fields(r.expand("recurrence", tz, s, e).unwrap_err()), ["recurrence.UNTIL"]);
    }

    #[test]
    fn new_york_keeps_nine_across_its_own_changes() {
        // 2027-03-14 EST -> EDT, 2027-11-07 EDT -> EST; Fridays at 09:00 local.
        let o = expand("FREQ=WEEKLY;COUNT=2", "America/New_York", "2027-03-12T14:00:00Z", "2027-03-12T15:00:00Z");
        assert_eq!(o[1].0, at("2027-03-19T13:00:00Z"));
        let o = expand("FREQ=WEEKLY;COUNT=2", "America/New_York", "2027-11-05T13:00:00Z", "2027-11-05T14:00:00Z");
        assert_eq!(o[1].0, at("2027-11-12T14:00:00Z"));
    }
}
