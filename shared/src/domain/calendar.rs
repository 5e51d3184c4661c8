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

use super::{Claim, FieldError, FreePiece, Patch, free_pieces, load_segments, peak_load};
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Timelike, Utc, Weekday};
use chrono_tz::Tz;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The day names of `schedule.weekly`, Monday first.
pub const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// At most this many ranges a day, and this many dated exceptions.
const MAX_RANGES: usize = 24;
const MAX_EXCEPTIONS: usize = 1000;

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
/// every range, as before the rules existed.
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

/// The rules as fields of a resource: `time_zone`, `schedule` (`null`: always open),
/// `buffer_before_minutes`, `buffer_after_minutes`, `min_notice_minutes`,
/// `max_advance_days` and `slot_minutes` (`null`: none).
impl Serialize for CalendarRules {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(7))?;
        m.serialize_entry("time_zone", self.time_zone.name())?;
        m.serialize_entry("schedule", &self.schedule.as_ref().map(Schedule::to_json))?;
        m.serialize_entry("buffer_before_minutes", &self.buffer_before_minutes)?;
        m.serialize_entry("buffer_after_minutes", &self.buffer_after_minutes)?;
        m.serialize_entry("min_notice_minutes", &self.min_notice_minutes)?;
        m.serialize_entry("max_advance_days", &self.max_advance_days)?;
        m.serialize_entry("slot_minutes", &self.slot_minutes)?;
        m.end()
    }
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

/// The instant a wall time of `tz` names, by the rule of the module's documentation.
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

    /// Reads a schedule in the API's shape, every problem under `field`.
    pub fn from_json(v: &Value, field: &str) -> Result<Schedule, Vec<FieldError>> {
        let mut errors = Vec::new();
        let Some(object) = v.as_object() else {
            return Err(vec![FieldError::new(field, "must be an object with weekly and exceptions")]);
        };
        let mut schedule = Schedule::default();
        for key in object.keys() {
            if key != "weekly" && key != "exceptions" {
                errors.push(FieldError::new(format!("{field}.{key}"), "is not a field of a schedule"));
            }
        }
        match object.get("weekly") {
            None | Some(Value::Null) => {}
            Some(Value::Object(days)) => {
                for (day, ranges) in days {
                    let path = format!("{field}.weekly.{day}");
                    match DAYS.iter().position(|d| d == day) {
                        None => errors
                            .push(FieldError::new(&path, "is not a day; days are mon, tue, wed, thu, fri, sat, sun")),
                        Some(i) => match read_ranges(ranges) {
                            Ok(hours) => schedule.weekly[i] = hours,
                            Err(message) => errors.push(FieldError::new(&path, message)),
                        },
                    }
                }
            }
            Some(_) => errors.push(FieldError::new(format!("{field}.weekly"), "must be an object of days")),
        }
        match object.get("exceptions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) if items.len() <= MAX_EXCEPTIONS => {
                for (i, item) in items.iter().enumerate() {
                    let path = format!("{field}.exceptions[{i}]");
                    match read_exception(item) {
                        Ok((date, hours)) => {
                            if schedule.exceptions.insert(date, hours).is_some() {
                                errors.push(FieldError::new(&path, "repeats a date given before"));
                            }
                        }
                        Err(message) => errors.push(FieldError::new(&path, message)),
                    }
                }
            }
            Some(_) => errors.push(FieldError::new(
                format!("{field}.exceptions"),
                format!("must be an array of at most {MAX_EXCEPTIONS} {{\"date\", \"hours\"}} objects"),
            )),
        }
        if errors.is_empty() { Ok(schedule) } else { Err(errors) }
    }

    /// The schedule in the API's shape (and as stored).
    pub fn to_json(&self) -> Value {
        let mut weekly = Map::new();
        for (i, hours) in self.weekly.iter().enumerate() {
            if !hours.is_empty() {
                weekly.insert(DAYS[i].to_string(), ranges_json(hours));
            }
        }
        let exceptions: Vec<Value> = self
            .exceptions
            .iter()
            .map(|(date, hours)| json!({"date": date.format("%Y-%m-%d").to_string(), "hours": ranges_json(hours)}))
            .collect();
        json!({"weekly": weekly, "exceptions": exceptions})
    }
}

fn ranges_json(hours: &[Hours]) -> Value {
    hours.iter().map(|h| json!([clock(h.open), clock(h.close)])).collect()
}

fn clock(minutes: u16) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

fn read_exception(v: &Value) -> Result<(NaiveDate, Vec<Hours>), String> {
    let shape = "must be an object {\"date\": \"YYYY-MM-DD\", \"hours\": [[\"HH:MM\", \"HH:MM\"], ...]}";
    let Some(object) = v.as_object() else { return Err(shape.into()) };
    if object.keys().any(|k| k != "date" && k != "hours") {
        return Err(shape.into());
    }
    let date = object
        .get("date")
        .and_then(Value::as_str)
        .and_then(|s| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok().filter(|_| s.len() == 10))
        .ok_or_else(|| "date must be a date such as \"2027-12-24\"".to_string())?;
    let hours = read_ranges(object.get("hours").ok_or(shape)?)?;
    Ok((date, hours))
}

/// `[["09:00","12:00"], ...]`: each range opens before it closes, `24:00` the latest
/// close; sorted here, and refused when two overlap.
fn read_ranges(v: &Value) -> Result<Vec<Hours>, String> {
    let shape = format!("must be an array of at most {MAX_RANGES} [\"HH:MM\", \"HH:MM\"] ranges");
    let Some(items) = v.as_array().filter(|a| a.len() <= MAX_RANGES) else { return Err(shape) };
    let mut hours = Vec::with_capacity(items.len());
    for item in items {
        let pair = item.as_array().filter(|p| p.len() == 2).ok_or_else(|| shape.clone())?;
        let (Some(open), Some(close)) = (pair[0].as_str().and_then(minutes), pair[1].as_str().and_then(minutes)) else {
            return Err("times must be \"HH:MM\" from 00:00 to 24:00".into());
        };
        if open >= close {
            return Err("each range must open before it closes (a range crossing midnight is split in two)".into());
        }
        hours.push(Hours { open, close });
    }
    hours.sort_by_key(|h| h.open);
    if hours.windows(2).any(|w| w[0].close > w[1].open) {
        return Err("ranges must not overlap".into());
    }
    Ok(hours)
}

/// "HH:MM" as minutes after midnight, up to 24:00.
fn minutes(s: &str) -> Option<u16> {
    let (h, m) = s.split_once(':')?;
    if h.len() != 2 || m.len() != 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    match (h, m) {
        (24, 0) => Some(1440),
        (0..=23, 0..=59) => Some(h * 60 + m),
        _ => None,
    }
}

/// An IANA zone name, from the compiled-in database.
pub fn parse_time_zone(name: &str) -> Result<Tz, String> {
    name.parse::<Tz>().map_err(|_| "must be an IANA time zone name, such as \"Europe/Berlin\" or \"UTC\"".into())
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

    /// How far either side of a new range the ranges other bookings keep may lie and
    /// still meet its buffers (a buffer is at most a day).
    pub fn lapsed_reach(&self) -> Duration {
        Duration::days(1) + self.reach()
    }

    /// The weekday of `start` in the zone; for tests and reads.
    pub fn weekday(&self, at: DateTime<Utc>) -> Weekday {
        at.with_timezone(&self.time_zone).weekday()
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
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn rules(zone: &str, schedule: Value) -> CalendarRules {
        CalendarRules {
            time_zone: parse_time_zone(zone).unwrap(),
            schedule: Some(Schedule::from_json(&schedule, "schedule").unwrap()),
            ..CalendarRules::default()
        }
    }

    fn every_day(open: &str, close: &str) -> Value {
        let mut weekly = Map::new();
        for d in DAYS {
            weekly.insert(d.into(), json!([[open, close]]));
        }
        json!({"weekly": weekly, "exceptions": []})
    }

    const NOW: &str = "2027-01-01T00:00:00Z";

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
            now: now,
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
            now: now,
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

    #[test]
    fn a_schedule_reads_back_as_written_and_bad_ones_are_refused_by_path() {
        let written = json!({"weekly": {"mon": [["09:00", "12:00"], ["13:00", "17:00"]]},
                             "exceptions": [{"date": "2027-12-24", "hours": [["09:00", "12:00"]]},
                                            {"date": "2027-12-25", "hours": []}]});
        assert_eq!(Schedule::from_json(&written, "schedule").unwrap().to_json(), written);
        let fields = |v: Value| -> Vec<String> {
            Schedule::from_json(&v, "schedule").unwrap_err().into_iter().map(|e| e.field).collect()
        };
        assert_eq!(fields(json!({"weekly": {"mon": [["17:00", "09:00"]]}})), ["schedule.weekly.mon"]);
        assert_eq!(fields(json!({"weekly": {"monday": []}})), ["schedule.weekly.monday"]);
        assert_eq!(
            fields(json!({"weekly": {"tue": [["09:00", "12:00"], ["11:00", "13:00"]]}})),
            ["schedule.weekly.tue"]
        );
        assert_eq!(fields(json!({"weekly": {"wed": [["9:00", "12:00"]]}})), ["schedule.weekly.wed"]);
        assert_eq!(fields(json!({"exceptions": [{"date": "2027-02-30", "hours": []}]})), ["schedule.exceptions[0]"]);
        assert_eq!(fields(json!({"hours": {}})), ["schedule.hours"]);
        assert!(parse_time_zone("Europe/Berlin").is_ok());
        assert!(parse_time_zone("Mars/Olympus_Mons").is_err());
    }
}
