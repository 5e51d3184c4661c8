//! The rules as the API writes them (and as they are stored): the resource's fields,
//! a schedule's `weekly` and `exceptions`, `HH:MM` times, IANA zone names.

use super::{CalendarRules, Hours, Schedule};
use crate::domain::FieldError;
use chrono::NaiveDate;
use chrono_tz::Tz;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};

/// The day names of `schedule.weekly`, Monday first.
pub const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// At most this many ranges a day, and this many dated exceptions.
const MAX_RANGES: usize = 24;
const MAX_EXCEPTIONS: usize = 1000;

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

impl Schedule {
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

#[cfg(test)]
mod tests {
    use super::*;

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
