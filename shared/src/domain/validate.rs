//! Rules a request must satisfy before any row is touched.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

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

    const LIMITS: Limits =
        Limits { max_duration: Duration::days(31), horizon: Duration::days(730), start_grace: Duration::minutes(5) };

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()
    }

    fn fields(errors: Vec<FieldError>) -> Vec<String> {
        errors.into_iter().map(|e| e.field).collect()
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
