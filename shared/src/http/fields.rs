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

mod readers;
mod strict;

pub(crate) use readers::principal_name;
pub use readers::{Rfc3339, boolean, integer, one_of, principal_id, strings, text, time_zone, timestamp, uuid, uuids};
pub use strict::{ParseError, parse_object};

use super::ApiError;
use crate::domain::policies::MAX_LIMITS;
use crate::domain::{
    BookingLimit, CalendarChange, FieldError, Metadata, Patch, PoliciesChange, Schedule, Window, validate_metadata,
};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
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
}
