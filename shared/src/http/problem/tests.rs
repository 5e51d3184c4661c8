use super::*;
use crate::domain::policies::Deadline;
use crate::http::problem_types::PROBLEM_TYPES;

fn problem(e: ApiError) -> (Reply, serde_json::Value) {
    let reply = e.into_reply();
    let body = serde_json::from_slice(&reply.body).unwrap();
    (reply, body)
}

#[test]
fn a_problem_names_its_slug_as_the_last_segment_of_type() {
    let (reply, body) = problem(ApiError::SlotUnavailable);
    assert_eq!(reply.status, StatusCode::CONFLICT);
    assert_eq!(reply.content_type, "application/problem+json");
    assert!(body["type"].as_str().unwrap().ends_with("/problems/slot-unavailable"));
    assert_eq!(body["status"], 409);
}

#[test]
fn validation_problems_list_their_fields() {
    let (_, body) = problem(ApiError::validation("end", "must be after start"));
    assert_eq!(body["errors"][0]["field"], "end");
}

#[test]
fn an_internal_error_tells_the_client_nothing_internal() {
    let (reply, body) = problem(ApiError::Internal("relation \"secret_table\" does not exist".into()));
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!String::from_utf8(reply.body).unwrap().contains("secret_table"));
    assert!(body["type"].as_str().unwrap().ends_with("/internal-error"));
}

#[test]
fn a_request_the_http_layer_cannot_read_is_a_bad_request_problem_without_field_errors() {
    let (reply, body) = problem(ApiError::BadRequest("The request body is malformed."));
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.content_type, "application/problem+json");
    assert!(body["type"].as_str().unwrap().ends_with("/problems/bad-request"));
    assert_eq!(body["detail"], "The request body is malformed.");
    assert!(body.get("errors").is_none());
}

/// One example of each variant, in declaration order: the variant after `e`'s, or
/// `None` after the last. The match has no wildcard, so a new variant does not
/// compile until it joins the walk.
fn next_example(e: Option<&ApiError>) -> Option<ApiError> {
    let Some(e) = e else { return Some(ApiError::Unauthenticated(AuthMode::Jwt)) };
    Some(match e {
        ApiError::Unauthenticated(_) => ApiError::Forbidden,
        ApiError::Forbidden => ApiError::RouteNotFound,
        ApiError::RouteNotFound => ApiError::ProblemTypeNotFound,
        ApiError::ProblemTypeNotFound => ApiError::MethodNotAllowed { allow: "GET".into() },
        ApiError::MethodNotAllowed { .. } => ApiError::Validation(vec![]),
        ApiError::Validation(_) => ApiError::InvalidCursor,
        ApiError::InvalidCursor => ApiError::PayloadTooLarge,
        ApiError::PayloadTooLarge => ApiError::BadRequest("x"),
        ApiError::BadRequest(_) => ApiError::UriTooLong,
        ApiError::UriTooLong => ApiError::HeadersTooLarge,
        ApiError::HeadersTooLarge => ApiError::UnsupportedMediaType,
        ApiError::UnsupportedMediaType => ApiError::ResourceNotFound,
        ApiError::ResourceNotFound => ApiError::ReservationNotFound,
        ApiError::ReservationNotFound => ApiError::WaitlistEntryNotFound,
        ApiError::WaitlistEntryNotFound => ApiError::WebhookNotFound,
        ApiError::WebhookNotFound => ApiError::WebhookDeliveryNotFound,
        ApiError::WebhookDeliveryNotFound => ApiError::WebhookDisabled,
        ApiError::WebhookDisabled => ApiError::SlotUnavailable,
        ApiError::SlotUnavailable => ApiError::PoolNotFound,
        ApiError::PoolNotFound => ApiError::SeriesNotFound,
        ApiError::SeriesNotFound => ApiError::FeedNotFound,
        ApiError::FeedNotFound => ApiError::OccurrencesNotHeld(vec![]),
        ApiError::OccurrencesNotHeld(_) => ApiError::UpstreamNotGroupable { index: 1 },
        ApiError::UpstreamNotGroupable { .. } => ApiError::ItemsNotHeld(vec![]),
        ApiError::ItemsNotHeld(_) => ApiError::ReservationNotHeld { status: "EXPIRED" },
        ApiError::ReservationNotHeld { .. } => ApiError::ReservationInFlight,
        ApiError::ReservationInFlight => ApiError::ResourceArchived,
        ApiError::ResourceArchived => ApiError::RescheduleNotSupported,
        ApiError::RescheduleNotSupported => ApiError::CapacityInUse { peak: 2 },
        ApiError::CapacityInUse { .. } => {
            ApiError::PolicyWindowClosed(Closed { deadline: Deadline::Cancel, at: chrono::DateTime::UNIX_EPOCH })
        }
        ApiError::PolicyWindowClosed(_) => ApiError::RescheduleLimit { max: 1 },
        ApiError::RescheduleLimit { .. } => ApiError::HoldExtensionLimit,
        ApiError::HoldExtensionLimit => ApiError::LimitExceeded(LimitReached {
            limit: BookingLimit { max: 1, window: Window::Day, rolling_minutes: None },
            window_start: chrono::DateTime::UNIX_EPOCH,
            window_end: chrono::DateTime::UNIX_EPOCH,
            frees_at: None,
        }),
        ApiError::LimitExceeded(_) => {
            ApiError::HoldsExceeded(HoldsReached { max: 20, frees_at: Some(chrono::DateTime::UNIX_EPOCH) })
        }
        ApiError::HoldsExceeded(_) => ApiError::IdempotencyKeyInProgress { retry_after: 1 },
        ApiError::IdempotencyKeyInProgress { .. } => ApiError::IdempotencyKeyReused,
        ApiError::IdempotencyKeyReused => ApiError::OutsideSchedule { rule: Rule::Buffer },
        ApiError::OutsideSchedule { .. } => ApiError::UpstreamUnavailable { retry_after: 1 },
        ApiError::UpstreamUnavailable { .. } => ApiError::DatabaseUnavailable(DbError::Unavailable("x".into())),
        ApiError::DatabaseUnavailable(_) => {
            let error = "sslmode=x".parse::<tokio_postgres::Config>().unwrap_err();
            ApiError::DatabaseBusy(DbError::Busy(error))
        }
        ApiError::DatabaseBusy(_) => ApiError::Internal("x".into()),
        ApiError::Internal(_) => return None,
    })
}

#[test]
fn every_problem_answered_is_described_on_its_page_with_its_status_and_title() {
    let mut answered = std::collections::BTreeSet::new();
    let mut variants = 0;
    let mut e = next_example(None);
    while let Some(error) = e {
        variants += 1;
        e = next_example(Some(&error));
        let (reply, body) = problem(error);
        let slug = body["type"].as_str().unwrap().strip_prefix(PROBLEM_BASE).unwrap().to_string();
        let page = problem_type(&slug).unwrap_or_else(|| panic!("{slug} has a page"));
        assert_eq!((page.status, page.title), (reply.status.as_u16(), body["title"].as_str().unwrap()), "{slug}");
        answered.insert(slug);
    }
    assert_eq!(variants, 42, "the walk reaches every variant");
    let pages: std::collections::BTreeSet<_> = PROBLEM_TYPES.iter().map(|t| t.slug.to_string()).collect();
    assert_eq!(answered, pages, "every page describes a problem some variant answers");
}

#[test]
fn the_limit_of_active_holds_per_principal_names_its_scope_and_when_it_frees() {
    let frees_at = Some("2027-03-15T10:05:00Z".parse().unwrap());
    let (reply, body) = problem(ApiError::from(BookingError::HoldsExceeded(HoldsReached { max: 3, frees_at })));
    assert_eq!(reply.status, StatusCode::CONFLICT);
    assert!(body["type"].as_str().unwrap().ends_with("/problems/limit-exceeded"));
    assert_eq!(body["limit"], serde_json::json!({"scope": "principal", "max": 3}));
    assert_eq!(body["frees_at"], "2027-03-15T10:05:00Z");
    assert!(body.get("window_start").is_none() && body.get("window_end").is_none(), "{body}");
}

#[test]
fn a_problem_names_its_request_as_instance_and_a_401_challenges() {
    let reply = ApiError::Unauthenticated(AuthMode::Jwt).into_reply_at("/v1/reservations");
    let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(body["instance"], "/v1/reservations");
    assert_eq!(reply.www_authenticate, Some(r#"Bearer realm="reservations""#));
    let reply = ApiError::Unauthenticated(AuthMode::Header).into_reply();
    assert!(reply.www_authenticate.unwrap().starts_with(r#"Bearer realm="reservations", error="invalid_request""#));
}

#[test]
fn a_cursor_the_list_did_not_give_out_is_a_bad_request_of_its_own_slug() {
    let (reply, body) = problem(ApiError::from(BookingError::InvalidCursor));
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(body["type"].as_str().unwrap().ends_with("/problems/invalid-cursor"));
    assert!(body.get("errors").is_none());
}

#[test]
fn retryable_problems_say_when() {
    let (reply, _) = problem(ApiError::UpstreamUnavailable { retry_after: 5 });
    assert_eq!(reply.retry_after, Some(5));
    let (reply, _) = problem(ApiError::IdempotencyKeyInProgress { retry_after: 2 });
    assert_eq!(reply.retry_after, Some(2));
}
