//! The readers of [`super::Fields`]: each turns one JSON value into a value or the
//! API's message.

use crate::domain::calendar::parse_time_zone;
use chrono::{DateTime, Timelike, Utc};
use serde_json::Value;
use uuid::Uuid;

/// An RFC 3339 timestamp that must carry an offset (`Z` or `+02:00`); kept in UTC, at
/// the microsecond precision PostgreSQL stores, so that every later check (such as
/// `end` after `start`) judges the value that will be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rfc3339(pub DateTime<Utc>);

impl Rfc3339 {
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = DateTime::parse_from_rfc3339(s)
            .map_err(|_| "must be an RFC 3339 timestamp with an offset, such as 2027-03-15T10:00:00Z".to_string())?;
        // chrono keeps a leap second as a 60th second; PostgreSQL and this calendar
        // have none.
        if t.timestamp_subsec_nanos() >= 1_000_000_000 {
            return Err("must not be a leap second (:60)".to_string());
        }
        let t = t.with_timezone(&Utc);
        let micros = t.timestamp_subsec_nanos() / 1_000 * 1_000;
        Ok(Rfc3339(t.with_nanosecond(micros).unwrap_or(t)))
    }
}

/// A UUID in its usual hyphenated form.
pub fn uuid(v: &Value) -> Result<Uuid, String> {
    let bad = || "must be a UUID, such as 0190f5a2-7c1d-7a4e-9b3f-2d6c8e1a5b47".to_string();
    let s = v.as_str().ok_or_else(bad)?;
    // `Uuid::parse_str` also takes the braced, URN and unhyphenated forms; ids are
    // written one way everywhere in this API.
    if s.len() != 36 {
        return Err(bad());
    }
    Uuid::parse_str(s).map_err(|_| bad())
}

/// An RFC 3339 timestamp with an offset ([`Rfc3339::parse`]).
pub fn timestamp(v: &Value) -> Result<Rfc3339, String> {
    match v.as_str() {
        Some(s) => Rfc3339::parse(s),
        None => Err("must be an RFC 3339 timestamp in a string, such as \"2027-03-15T10:00:00Z\"".into()),
    }
}

/// An IANA time zone name, such as `Europe/Berlin`.
pub fn time_zone(v: &Value) -> Result<chrono_tz::Tz, String> {
    parse_time_zone(v.as_str().unwrap_or(""))
}

/// `true` or `false`.
pub fn boolean(v: &Value) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| "must be true or false".into())
}

/// A whole number from `min` to `max`.
pub fn integer(min: i32, max: i32) -> impl Fn(&Value) -> Result<i32, String> {
    move |v| {
        let range = || format!("must be a whole number from {min} to {max}");
        let Some(n) = v.as_number() else { return Err(range()) };
        let whole = match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Some(i),
            // 3.0 is three; 1.5 is not a whole number; 1e20 is whole but out of range.
            (None, Some(f)) if f.fract() == 0.0 => {
                return if f < min.into() || f > max.into() { Err(range()) } else { Ok(f as i32) };
            }
            _ => None,
        };
        match whole {
            Some(i) if (i64::from(min)..=i64::from(max)).contains(&i) => Ok(i as i32),
            _ => Err(range()),
        }
    }
}

/// A string of `min` to `max` characters.
pub fn text(min: usize, max: usize) -> impl Fn(&Value) -> Result<String, String> {
    move |v| {
        let Some(s) = v.as_str() else { return Err("must be a string".into()) };
        let n = s.chars().count();
        if (min..=max).contains(&n) {
            Ok(s.to_string())
        } else if min == max {
            Err(format!("must be {min} characters"))
        } else {
            Err(format!("must be {min} to {max} characters"))
        }
    }
}

/// A principal's id, as a body names one (`owner`): the rule of the lists' `owner`
/// filter ([`principal_name`]).
pub fn principal_id(v: &Value) -> Result<String, String> {
    v.as_str().ok_or_else(|| "must be a string".to_string()).and_then(principal_name)
}

/// A principal's id: 1 to 255 characters, none of them control characters (a token's
/// `sub` may be any such string).
pub(crate) fn principal_name(v: &str) -> Result<String, String> {
    let ok = (1..=255).contains(&v.chars().count()) && !v.chars().any(char::is_control);
    if ok { Ok(v.to_string()) } else { Err("must be 1 to 255 characters, none of them control characters".into()) }
}

/// An array of at most `max` strings (which strings are allowed is the caller's rule,
/// reported per item).
pub fn strings(max: usize) -> impl Fn(&Value) -> Result<Vec<String>, String> {
    move |v| {
        let bad = || format!("must be an array of at most {max} strings");
        let items = v.as_array().ok_or_else(bad)?;
        if items.len() > max {
            return Err(bad());
        }
        items.iter().map(|i| i.as_str().map(str::to_string).ok_or_else(bad)).collect()
    }
}

/// An array of 1 to `max` UUIDs.
pub fn uuids(max: usize) -> impl Fn(&Value) -> Result<Vec<Uuid>, String> {
    move |v| {
        let bad = || format!("must be an array of 1 to {max} UUIDs");
        let items = v.as_array().filter(|a| (1..=max).contains(&a.len())).ok_or_else(bad)?;
        items.iter().map(|i| uuid(i).map_err(|_| bad())).collect()
    }
}

/// One of the given words.
pub fn one_of(words: &'static [&'static str]) -> impl Fn(&Value) -> Result<&'static str, String> {
    move |v| {
        v.as_str()
            .and_then(|s| words.iter().find(|w| **w == s).copied())
            .ok_or_else(|| format!("must be one of: {}", words.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_need_an_offset() {
        assert!(Rfc3339::parse("2027-03-15T10:00:00Z").is_ok());
        let t = Rfc3339::parse("2027-03-15T12:00:00+02:00").unwrap();
        assert_eq!(t, Rfc3339::parse("2027-03-15T10:00:00Z").unwrap());
        assert!(Rfc3339::parse("2027-03-15T10:00:00").is_err());
        assert!(Rfc3339::parse("2027-03-15").is_err());
        assert!(Rfc3339::parse("yesterday").is_err());
    }

    #[test]
    fn timestamps_keep_the_microseconds_that_postgresql_stores() {
        let t = Rfc3339::parse("2027-03-15T15:00:00.1234569Z").unwrap();
        assert_eq!(t, Rfc3339::parse("2027-03-15T15:00:00.123456Z").unwrap());
        let (a, b) = (Rfc3339::parse("2027-03-15T15:00:00.0000001Z"), Rfc3339::parse("2027-03-15T15:00:00.0000009Z"));
        assert_eq!(a.unwrap(), b.unwrap());
    }

    #[test]
    fn a_leap_second_is_refused() {
        assert!(Rfc3339::parse("2027-06-30T23:59:60Z").is_err());
        assert!(Rfc3339::parse("2027-06-30T23:59:59.999999Z").is_ok());
    }

    #[test]
    fn integers_are_whole_and_in_range() {
        let read = integer(1, 100);
        assert_eq!(read(&json!(3)), Ok(3));
        assert_eq!(read(&json!(3.0)), Ok(3));
        for bad in [json!(0), json!(101), json!(1.5), json!(1e20), json!(-1), json!("2"), json!(null)] {
            assert_eq!(read(&bad), Err("must be a whole number from 1 to 100".into()), "{bad}");
        }
    }

    #[test]
    fn ids_are_hyphenated_uuids_and_words_are_from_their_list() {
        assert!(uuid(&json!("0190f5a2-7c1d-7a4e-9b3f-2d6c8e1a5b47")).is_ok());
        assert!(uuid(&json!("0190f5a27c1d7a4e9b3f2d6c8e1a5b47")).is_err());
        assert!(uuid(&json!(7)).is_err());
        assert_eq!(one_of(&["local", "upstream"])(&json!("oracle")), Err("must be one of: local, upstream".into()));
        assert_eq!(text(1, 3)(&json!("abcd")), Err("must be 1 to 3 characters".into()));
    }
}
