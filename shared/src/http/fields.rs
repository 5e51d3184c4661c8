//! Reading a JSON body field by field, in the API's own words, reporting every bad
//! field at once.
//!
//! [`parse_object`] reads the bytes (a key given twice is refused while parsing, not
//! silently overwritten by the last one) and [`Fields`] reads the object: each field
//! is asked for once, by name, with a reader that turns its JSON value into a Rust
//! value or a message. Messages are the API's, never serde's ("must be a UUID", not
//! "UUID parsing failed: invalid character"). A field that was not asked for is an
//! unknown field. Every problem is collected; the caller gets them all together.
//!
//! How a handler reads its body (a new body, such as a PATCH, is read the same way):
//!
//! ```ignore
//! let body = json_body(req, EmptyBody::Refused)?;
//! let input = body.read(|f| {
//!     // Ask for every field first, so that each one's problem is recorded ...
//!     let start = f.required("start", timestamp);
//!     let quantity = f.optional("quantity", integer(1, i32::MAX)).unwrap_or(1);
//!     let note = f.nullable("note", text(0, 500));
//!     // ... then build the value; `?` on a missing or bad field gives `None`,
//!     // and `read` answers the collected errors instead.
//!     Some(Input { start: start?.0, quantity, note })
//! })?;
//! ```
//!
//! `optional` takes an absent field as `None` and a `null` as a bad value; `nullable`
//! takes both as `None` (for fields whose documented type includes `null`).

use super::ApiError;
use super::request::Rfc3339;
use crate::domain::calendar::parse_time_zone;
use crate::domain::policies::MAX_LIMITS;
use crate::domain::{
    BookingLimit, CalendarChange, FieldError, Metadata, Patch, PoliciesChange, Schedule, Window, validate_metadata,
};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;
use uuid::Uuid;

/// Why a body could not be read as a JSON object.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not JSON at all; where the first error is, for a person to find it.
    Syntax { line: usize, column: usize },
    /// JSON, but not an object.
    NotAnObject,
    /// A key given twice in one object; its path (`name`, or `outer.inner`).
    DuplicateKey(String),
}

impl ParseError {
    pub fn into_api_error(self) -> ApiError {
        match self {
            ParseError::Syntax { line, column } => ApiError::validation(
                "body",
                format!("is not valid JSON (the first error is at line {line}, column {column})"),
            ),
            ParseError::NotAnObject => ApiError::validation("body", "must be a JSON object"),
            ParseError::DuplicateKey(path) => ApiError::validation(&path, "is given more than once"),
        }
    }
}

/// Parses `bytes` as one JSON object, refusing a key that appears twice in any object.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ParseError> {
    let duplicate = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = Strict { path: String::new(), duplicate: &duplicate }.deserialize(&mut de).and_then(|v| {
        de.end()?;
        Ok(v)
    });
    if let Some(path) = duplicate.into_inner() {
        return Err(ParseError::DuplicateKey(path));
    }
    match parsed {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ParseError::NotAnObject),
        Err(e) => Err(ParseError::Syntax { line: e.line(), column: e.column() }),
    }
}

/// A JSON value whose objects must not repeat a key. The first repeated key's path is
/// put in `duplicate` (the serde error itself only stops the parse).
struct Strict<'a> {
    path: String,
    duplicate: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, items.len());
            match seq.next_element_seed(Strict { path, duplicate: self.duplicate })? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() { key.clone() } else { format!("{}.{key}", self.path) };
            if out.contains_key(&key) {
                *self.duplicate.borrow_mut() = Some(path);
                return Err(de::Error::custom("duplicate key"));
            }
            let value = map.next_value_seed(Strict { path, duplicate: self.duplicate })?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// The fields of one JSON object, read one by one; see the module's documentation.
pub struct Fields<'a> {
    object: &'a Map<String, Value>,
    asked: BTreeSet<&'a str>,
    errors: Vec<FieldError>,
}

impl<'a> Fields<'a> {
    pub fn new(object: &'a Map<String, Value>) -> Self {
        Fields { object, asked: BTreeSet::new(), errors: Vec::new() }
    }

    /// A field that must be given: `None` when it is missing or bad (and recorded).
    pub fn required<T>(&mut self, name: &'a str, read: impl Fn(&Value) -> Result<T, String>) -> Option<T> {
        match self.take(name) {
            None => {
                self.errors.push(FieldError::new(name, "is required"));
                None
            }
            Some(value) => self.check(name, read(value)),
        }
    }

    /// A field that may be left out (`null` is a bad value): `None` when it is absent
    /// or bad (and recorded).
    pub fn optional<T>(&mut self, name: &'a str, read: impl Fn(&Value) -> Result<T, String>) -> Option<T> {
        let value = self.take(name)?;
        self.check(name, read(value))
    }

    /// A field that may be left out or `null`: `None` for both, or when it is bad (and
    /// recorded).
    pub fn nullable<T>(&mut self, name: &'a str, read: impl Fn(&Value) -> Result<T, String>) -> Option<T> {
        match self.take(name)? {
            Value::Null => None,
            value => self.check(name, read(value)),
        }
    }

    /// A field that may be left out, or `null` to clear it: [`Patch::Keep`] when it is
    /// absent or bad (and recorded), [`Patch::Clear`] for `null`.
    pub fn clearable<T>(&mut self, name: &'a str, read: impl Fn(&Value) -> Result<T, String>) -> Patch<T> {
        match self.take(name) {
            None => Patch::Keep,
            Some(Value::Null) => Patch::Clear,
            Some(value) => self.check(name, read(value)).map_or(Patch::Keep, Patch::Set),
        }
    }

    /// A calendar `schedule` ([`Schedule::from_json`]), `null` clearing it, where
    /// every bad part is an error of its own, named by its path.
    pub fn schedule(&mut self, name: &'a str) -> Patch<Schedule> {
        match self.take(name) {
            None => Patch::Keep,
            Some(Value::Null) => Patch::Clear,
            Some(value) => match Schedule::from_json(value, name) {
                Ok(schedule) => Patch::Set(schedule),
                Err(errors) => {
                    self.errors.extend(errors);
                    Patch::Keep
                }
            },
        }
    }

    /// The calendar rules of a resource's body, each field optional.
    pub fn calendar(&mut self) -> CalendarChange {
        CalendarChange {
            time_zone: self.optional("time_zone", time_zone),
            schedule: self.schedule("schedule"),
            buffer_before_minutes: self.optional("buffer_before_minutes", integer(0, 1440)),
            buffer_after_minutes: self.optional("buffer_after_minutes", integer(0, 1440)),
            min_notice_minutes: self.optional("min_notice_minutes", integer(0, 525_600)),
            max_advance_days: self.clearable("max_advance_days", integer(1, 3660)),
            slot_minutes: self.clearable("slot_minutes", integer(1, 1440)),
        }
    }

    /// An array of 1 to `max` objects, each read with `read` by fields of its own, whose
    /// problems are named by their path (`items[1].quantity`): `None` when it is absent
    /// or any of it is bad (and recorded).
    pub fn objects<T>(
        &mut self,
        name: &'a str,
        max: usize,
        read: impl Fn(&mut Fields<'_>) -> Option<T>,
    ) -> Option<Vec<T>> {
        let value = self.take(name)?;
        let Some(array) = value.as_array().filter(|a| (1..=max).contains(&a.len())) else {
            self.errors.push(FieldError::new(name, format!("must be an array of 1 to {max} objects")));
            return None;
        };
        let mut out = Vec::with_capacity(array.len());
        for (i, item) in array.iter().enumerate() {
            let Some(object) = item.as_object() else {
                self.errors.push(FieldError::new(format!("{name}[{i}]"), "must be an object"));
                continue;
            };
            let mut fields = Fields::new(object);
            let built = read(&mut fields);
            let errors = fields.finish();
            let bad = !errors.is_empty();
            self.errors
                .extend(errors.into_iter().map(|e| FieldError::new(format!("{name}[{i}].{}", e.field), e.message)));
            match built {
                Some(built) if !bad => out.push(built),
                _ => {}
            }
        }
        (out.len() == array.len()).then_some(out)
    }

    /// The booking policies of a resource's body, each field optional, `null` clearing it.
    pub fn policies(&mut self) -> PoliciesChange {
        PoliciesChange {
            cancel_notice_minutes: self.clearable("cancel_notice_minutes", integer(0, 525_600)),
            reschedule_notice_minutes: self.clearable("reschedule_notice_minutes", integer(0, 525_600)),
            max_reschedules: self.clearable("max_reschedules", integer(0, 1000)),
            max_hold_seconds: self.clearable("max_hold_seconds", integer(1, 604_800)),
            limits: self.limits("limits"),
        }
    }

    /// A resource's booking `limits`: `null` or `[]` clears them; each limit's bad
    /// parts are named by their path (`limits[0].rolling_minutes`).
    fn limits(&mut self, name: &'a str) -> Patch<Vec<BookingLimit>> {
        match self.object.get(name) {
            None => return Patch::Keep,
            Some(Value::Null) => {
                self.take(name);
                return Patch::Clear;
            }
            Some(Value::Array(a)) if a.is_empty() => {
                self.take(name);
                return Patch::Clear;
            }
            Some(_) => {}
        }
        let read = |f: &mut Fields<'_>| {
            let max = f.required("max", integer(1, 1000));
            let window = f.required("window", one_of(&["day", "week", "month", "rolling"]));
            let rolling_minutes = match window {
                Some("rolling") => f.required("rolling_minutes", integer(1, 525_600)),
                _ => {
                    if f.take("rolling_minutes").is_some() {
                        f.refuse("rolling_minutes", "is only for a rolling window");
                    }
                    None
                }
            };
            let window = match window? {
                "day" => Window::Day,
                "week" => Window::Week,
                "month" => Window::Month,
                _ => Window::Rolling,
            };
            Some(BookingLimit { max: max?, window, rolling_minutes })
        };
        self.objects(name, MAX_LIMITS, read).map_or(Patch::Keep, Patch::Set)
    }

    /// Every problem found: those of the fields asked for, in the order asked, then
    /// one per field that was not asked for, in name order.
    pub fn finish(mut self) -> Vec<FieldError> {
        for name in self.object.keys() {
            if !self.asked.contains(name.as_str()) {
                self.errors.push(FieldError::new(name.as_str(), "is not a field of this request"));
            }
        }
        self.errors
    }

    /// A `metadata` object ([`validate_metadata`]), where every bad entry is an error
    /// of its own: `None` when it is absent or bad (and recorded).
    pub fn metadata(&mut self, name: &'a str) -> Option<Metadata> {
        let value = self.take(name)?;
        validate_metadata(value).map_err(|errors| self.errors.extend(errors)).ok()
    }

    /// Whether the object has the field `name`, whatever its value: for rules between
    /// fields, after each was read.
    pub fn given(&self, name: &str) -> bool {
        self.object.contains_key(name)
    }

    /// Whether the object has no fields at all (a `PATCH` must change something).
    pub fn is_empty(&self) -> bool {
        self.object.is_empty()
    }

    /// Records a problem that no single reader sees, such as a rule across fields.
    pub fn refuse(&mut self, field: &str, message: &str) {
        self.errors.push(FieldError::new(field, message));
    }

    fn take(&mut self, name: &'a str) -> Option<&'a Value> {
        self.asked.insert(name);
        self.object.get(name)
    }

    fn check<T>(&mut self, name: &str, read: Result<T, String>) -> Option<T> {
        read.map_err(|message| self.errors.push(FieldError::new(name, message))).ok()
    }
}

/// Reads `object` with `read` (see the module's documentation): the value it builds,
/// or every problem found at once.
pub fn read_object<T>(
    object: &Map<String, Value>,
    read: impl FnOnce(&mut Fields<'_>) -> Option<T>,
) -> Result<T, ApiError> {
    let mut fields = Fields::new(object);
    let built = read(&mut fields);
    let errors = fields.finish();
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    // A reader returns `None` only for a field it was refused, which left an error.
    built.ok_or_else(|| ApiError::Internal("a body reader built nothing yet reported no problem".into()))
}

// --- readers: each turns one JSON value into a value or the API's message ----------

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

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_repeated_key_is_refused_by_its_path() {
        assert_eq!(parse_object(br#"{"a":1,"a":2}"#), Err(ParseError::DuplicateKey("a".into())));
        assert_eq!(parse_object(br#"{"a":{"b":1,"b":1}}"#), Err(ParseError::DuplicateKey("a.b".into())));
        assert_eq!(parse_object(br#"{"a":[{"b":1,"b":1}]}"#), Err(ParseError::DuplicateKey("a[0].b".into())));
        assert_eq!(parse_object(br#"{"a":1,"b":{"a":2}}"#).unwrap().len(), 2);
    }

    #[test]
    fn what_is_not_one_json_object_is_refused() {
        assert_eq!(parse_object(b"[1]"), Err(ParseError::NotAnObject));
        assert_eq!(parse_object(b"{\"a\": "), Err(ParseError::Syntax { line: 1, column: 6 }));
        assert_eq!(parse_object(b"{} {}"), Err(ParseError::Syntax { line: 1, column: 4 }));
        assert!(matches!(parse_object(b"{\"q\": 1e999}"), Err(ParseError::Syntax { .. })));
    }

    #[test]
    fn every_bad_field_is_reported_at_once_in_plain_words() {
        let body = object(json!({"id": "x", "when": 7, "n": "2", "extra": true}));
        let result = read_object(&body, |f| {
            let id = f.required("id", uuid);
            let when = f.required("when", timestamp);
            let n = f.optional("n", integer(1, 10));
            let missing = f.required("missing", boolean);
            Some((id?, when?, n, missing?))
        });
        let Err(ApiError::Validation(errors)) = result else { panic!("refused") };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["id", "when", "n", "missing", "extra"]);
        for e in &errors {
            for serde_word in ["expected", "invalid type", "UUID parsing failed"] {
                assert!(!e.message.contains(serde_word), "{e:?}");
            }
        }
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
    fn optional_and_nullable_fields_differ_only_in_null() {
        let body = object(json!({"a": null, "b": null}));
        let result = read_object(&body, |f| Some((f.nullable("a", boolean), f.optional("b", boolean))));
        let Err(ApiError::Validation(errors)) = result else { panic!("b may not be null") };
        assert_eq!(errors, [FieldError::new("b", "must be true or false")]);
        let body = object(json!({}));
        assert_eq!(
            read_object(&body, |f| Some((f.nullable("a", boolean), f.optional("b", boolean)))).ok(),
            Some((None, None))
        );
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
