//! Rules a request must satisfy before any row is touched.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use std::collections::BTreeMap;

/// A client's own labels on a resource or reservation: string keys to string values,
/// returned everywhere and carried in events. Kept small, because every event carries
/// it: at most [`METADATA_MAX_KEYS`] keys of at most [`METADATA_MAX_KEY_CHARS`]
/// characters, values of at most [`METADATA_MAX_VALUE_CHARS`].
pub type Metadata = BTreeMap<String, String>;

pub const METADATA_MAX_KEYS: usize = 20;
pub const METADATA_MAX_KEY_CHARS: usize = 40;
pub const METADATA_MAX_VALUE_CHARS: usize = 500;

/// Reads `metadata` from a request body, naming every problem at once (each under
/// `metadata.<key>` when it is one key's).
pub fn validate_metadata(value: &serde_json::Value) -> Result<Metadata, Vec<FieldError>> {
    let Some(object) = value.as_object() else {
        return Err(vec![FieldError::new("metadata", "must be an object of string values")]);
    };
    let mut errors = Vec::new();
    if object.len() > METADATA_MAX_KEYS {
        errors.push(FieldError::new("metadata", format!("may have at most {METADATA_MAX_KEYS} keys")));
    }
    let mut metadata = Metadata::new();
    for (key, value) in object {
        let field = format!("metadata.{key}");
        let key_chars = key.chars().count();
        if key_chars == 0 || key_chars > METADATA_MAX_KEY_CHARS {
            errors.push(FieldError::new("metadata", format!("keys must be 1 to {METADATA_MAX_KEY_CHARS} characters")));
            continue;
        }
        if key.chars().any(char::is_control) {
            errors.push(FieldError::new("metadata", "keys must not contain control characters"));
            continue;
        }
        match value.as_str() {
            None => errors.push(FieldError::new(field, "must be a string")),
            // PostgreSQL's jsonb cannot hold NUL.
            Some(v) if v.contains('\0') => errors.push(FieldError::new(field, "must not contain NUL")),
            Some(v) if v.chars().count() > METADATA_MAX_VALUE_CHARS => {
                errors.push(FieldError::new(field, format!("must be at most {METADATA_MAX_VALUE_CHARS} characters")))
            }
            Some(v) => {
                metadata.insert(key.clone(), v.to_string());
            }
        }
    }
    if errors.is_empty() { Ok(metadata) } else { Err(errors) }
}

/// One problem with one field, as listed in a `validation-error` problem's `errors`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_duration: Duration,
    pub horizon: Duration,
    pub start_grace: Duration,
    /// The most active holds (held, not lapsed) one principal may have across the
    /// service (`MAX_ACTIVE_HOLDS_PER_PRINCIPAL`); 0: no limit.
    pub max_active_holds: i32,
}

/// Checks a requested `[start, end)` against the booking limits at `now`.
pub fn validate_range(start: DateTime<Utc>, end: DateTime<Utc>, now: DateTime<Utc>, limits: Limits) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if end <= start {
        errors.push(FieldError::new("end", "must be after start"));
    } else if end - start > limits.max_duration {
        errors.push(FieldError::new(
            "end",
            format!("the reservation may last at most {} days", limits.max_duration.num_days()),
        ));
    }
    if start < now - limits.start_grace {
        errors.push(FieldError::new(
            "start",
            format!("must not lie more than {} seconds in the past", limits.start_grace.num_seconds()),
        ));
    }
    if start > now + limits.horizon {
        errors.push(FieldError::new(
            "start",
            format!("must lie within the booking horizon of {} days", limits.horizon.num_days()),
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    const LIMITS: Limits = Limits {
        max_duration: Duration::days(31),
        horizon: Duration::days(730),
        start_grace: Duration::minutes(5),
        max_active_holds: 20,
    };

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()
    }

    fn fields(errors: Vec<FieldError>) -> Vec<String> {
        errors.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn metadata_is_an_object_of_short_strings() {
        let ok = validate_metadata(&serde_json::json!({"team": "blue", "ticket": "T-1"})).unwrap();
        assert_eq!(ok.get("team").map(String::as_str), Some("blue"));
        assert!(validate_metadata(&serde_json::json!(["a"])).is_err());
        let too_many: serde_json::Map<_, _> = (0..21).map(|i| (format!("k{i}"), "v".into())).collect();
        assert_eq!(validate_metadata(&serde_json::Value::Object(too_many)).unwrap_err()[0].field, "metadata");
    }

    #[test]
    fn every_bad_metadata_entry_is_named() {
        let long_key = "k".repeat(41);
        let errors = validate_metadata(&serde_json::json!({
            "n": 1, "v": "x".repeat(501), long_key: "fine", "ok": "fine"
        }))
        .unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["metadata", "metadata.n", "metadata.v"]);
    }

    #[test]
    fn an_ordinary_hour_next_week_is_fine() {
        let s = now() + Duration::days(7);
        assert!(validate_range(s, s + Duration::hours(1), now(), LIMITS).is_empty());
    }

    #[test]
    fn end_must_follow_start() {
        let s = now() + Duration::days(1);
        assert_eq!(fields(validate_range(s, s, now(), LIMITS)), ["end"]);
        assert_eq!(fields(validate_range(s, s - Duration::seconds(1), now(), LIMITS)), ["end"]);
    }

    #[test]
    fn duration_is_capped() {
        let s = now() + Duration::days(1);
        assert!(validate_range(s, s + Duration::days(31), now(), LIMITS).is_empty());
        assert_eq!(fields(validate_range(s, s + Duration::days(31) + Duration::seconds(1), now(), LIMITS)), ["end"]);
    }

    #[test]
    fn start_may_be_a_little_in_the_past_but_not_more() {
        let s = now() - Duration::minutes(4);
        assert!(validate_range(s, s + Duration::hours(1), now(), LIMITS).is_empty());
        let s = now() - Duration::minutes(6);
        assert_eq!(fields(validate_range(s, s + Duration::hours(1), now(), LIMITS)), ["start"]);
    }

    #[test]
    fn start_beyond_the_horizon_is_refused() {
        let s = now() + Duration::days(731);
        assert_eq!(fields(validate_range(s, s + Duration::hours(1), now(), LIMITS)), ["start"]);
    }
}
