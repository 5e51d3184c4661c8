//! Wall-clock time in a resource's zone, read as the `calendar` documentation says: the
//! instants of a wall time, the hours of a date, the stretches of opening time.

use super::{CalendarRules, Hours, Schedule};
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;

/// The instant a wall time of `tz` names, by the rule of the `calendar` documentation.
pub fn local_to_utc(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    match tz.from_local_datetime(&local) {
        chrono::LocalResult::Single(t) => t.with_timezone(&Utc),
        chrono::LocalResult::Ambiguous(earlier, _) => earlier.with_timezone(&Utc),
        chrono::LocalResult::None => {
            // In a gap: the offset before it. A day earlier is before the gap (zones
            // do not change offset twice in a day).
            let before = tz.offset_from_utc_datetime(&(local - Duration::days(1)));
            let offset = chrono::Offset::fix(&before).local_minus_utc();
            (local - Duration::seconds(offset.into())).and_utc()
        }
    }
}

impl Schedule {
    /// The hours of a local date: its exception, or its weekday's.
    pub fn hours_on(&self, date: NaiveDate) -> &[Hours] {
        match self.exceptions.get(&date) {
            Some(hours) => hours,
            None => &self.weekly[date.weekday().num_days_from_monday() as usize],
        }
    }

    /// The stretches of opening time that meet `[from, to)`, as instants, touching
    /// ranges joined (across midnight too), in order.
    pub fn open_stretches(
        &self,
        tz: Tz,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
        // A day either side: a stretch that starts the day before may reach in.
        let first = from.with_timezone(&tz).date_naive() - Duration::days(1);
        let last = to.with_timezone(&tz).date_naive() + Duration::days(1);
        let mut stretches: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
        let mut date = first;
        while date <= last {
            let midnight = date.and_time(NaiveTime::MIN);
            for h in self.hours_on(date) {
                let open = local_to_utc(tz, midnight + Duration::minutes(h.open.into()));
                let close = local_to_utc(tz, midnight + Duration::minutes(h.close.into()));
                if open >= close {
                    // Wholly inside a skipped hour: no time at all.
                    continue;
                }
                match stretches.last_mut() {
                    Some(last) if last.1 >= open => last.1 = last.1.max(close),
                    _ => stretches.push((open, close)),
                }
            }
            date += Duration::days(1);
        }
        stretches.retain(|&(open, close)| open < to && close > from);
        stretches
    }
}

impl CalendarRules {
    /// The weekday of `start` in the zone; for tests and reads.
    pub fn weekday(&self, at: DateTime<Utc>) -> Weekday {
        at.with_timezone(&self.time_zone).weekday()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{NOW, at, rules};
    use super::super::{Judge, Rule, parse_time_zone};
    use super::*;
    use serde_json::json;

    #[test]
    fn a_wall_time_skipped_on_the_spring_forward_night_is_read_with_the_offset_before_the_gap() {
        let berlin = parse_time_zone("Europe/Berlin").unwrap();
        // 2027-03-28: 02:00 CET jumps to 03:00 CEST.
        let skipped = NaiveDate::from_ymd_opt(2027, 3, 28).unwrap().and_hms_opt(2, 30, 0).unwrap();
        assert_eq!(local_to_utc(berlin, skipped), at("2027-03-28T01:30:00Z"));
        // An opening at 02:30 that night opens at 03:30 CEST, and 01:00-03:00 is one
        // hour long.
        let r = rules(
            "Europe/Berlin",
            json!({"weekly": {}, "exceptions": [{"date": "2027-03-28", "hours": [["01:00", "03:00"]]}]}),
        );
        let stretches =
            r.schedule.as_ref().unwrap().open_stretches(berlin, at("2027-03-28T00:00:00Z"), at("2027-03-29T00:00:00Z"));
        assert_eq!(stretches, vec![(at("2027-03-28T00:00:00Z"), at("2027-03-28T01:00:00Z"))]);
    }

    #[test]
    fn a_wall_time_seen_twice_on_the_fall_back_night_is_its_earlier_occurrence() {
        let berlin = parse_time_zone("Europe/Berlin").unwrap();
        // 2027-10-31: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
        let twice = NaiveDate::from_ymd_opt(2027, 10, 31).unwrap().and_hms_opt(2, 30, 0).unwrap();
        assert_eq!(local_to_utc(berlin, twice), at("2027-10-31T00:30:00Z"));
        // Open 02:00-04:00 that night: from the first 02:00 (00:00Z) to 04:00 CET
        // (03:00Z), three hours.
        let r = rules(
            "Europe/Berlin",
            json!({"weekly": {}, "exceptions": [{"date": "2027-10-31", "hours": [["02:00", "04:00"]]}]}),
        );
        let now = at(NOW);
        assert_eq!(r.judge(at("2027-10-31T00:00:00Z"), at("2027-10-31T03:00:00Z"), now, Judge::Everything), Ok(()));
        assert_eq!(
            r.judge(at("2027-10-30T23:30:00Z"), at("2027-10-31T00:30:00Z"), now, Judge::Everything),
            Err(Rule::OutsideHours)
        );
    }
}
