//! Booking policies: the owner's deadlines to cancel and move a booking, how often it
//! may be moved, and holds kept longer by extending them. Admins are held to none.

use acceptance::{TestApp, day, hours, reservation_path, send, slug};
use chrono::{DateTime, Duration, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::ManualClock;
use std::sync::Arc;

async fn booked(app: &TestApp, who: &str, room: uuid::Uuid) -> Value {
    let r = app.hold(who, room, 10, 11).await;
    let (status, r) = app.confirm(who, &r["id"]).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    r
}

async fn extend(app: &TestApp, who: &str, r: &Value) -> (StatusCode, Value) {
    send(app.post(who, &format!("{}/extend", reservation_path(&r["id"])), &json!({}))).await
}

fn at(v: &Value, field: &str) -> DateTime<Utc> {
    v[field].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn an_owner_cancels_up_to_the_notice_minute_and_not_after_but_an_admin_still_can() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "cancel_notice_minutes": 60})).await;
    let start = day() + Duration::hours(10);
    let first = booked(&app, "alice", room).await;

    clock.set(start - Duration::minutes(60));
    let (status, cancelled) = send(app.delete("alice", &reservation_path(&first["id"]))).await;
    assert_eq!((status, cancelled["status"].as_str()), (StatusCode::OK, Some("CANCELLED")), "{cancelled}");

    clock.set(Utc::now());
    let second = booked(&app, "alice", room).await;
    clock.set(start - Duration::minutes(59));
    let (status, problem) = send(app.delete("alice", &reservation_path(&second["id"]))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "policy-window-closed"), "{problem}");
    assert_eq!(problem["policy"], "cancel_notice_minutes");
    assert_eq!(at(&problem, "deadline"), start - Duration::minutes(60));
    let status_now = app
        .count(
            "SELECT count(*) FROM reservations WHERE status = 'CONFIRMED' AND id::text = $1",
            &[&second["id"].as_str()],
        )
        .await;
    assert_eq!(status_now, 1, "the refused cancel changed nothing");

    let (status, cancelled) = send(app.delete("admin", &reservation_path(&second["id"]))).await;
    assert_eq!((status, cancelled["status"].as_str()), (StatusCode::OK, Some("CANCELLED")));
    assert_eq!(cancelled["acted_by"], "admin");
}

#[tokio::test]
async fn a_hold_is_released_whatever_the_cancel_notice() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room =
        app.resource_with(json!({"name": "Room", "cancel_notice_minutes": 1440, "hold_ttl_seconds": 86400 * 60})).await;
    let held = app.hold("alice", room, 10, 11).await;
    clock.set(day() + Duration::hours(9));
    let (status, released) = send(app.delete("alice", &reservation_path(&held["id"]))).await;
    assert_eq!((status, released["status"].as_str()), (StatusCode::OK, Some("RELEASED")), "{released}");
}

#[tokio::test]
async fn an_owner_moves_a_booking_until_the_reschedule_notice_and_at_most_max_reschedules_times() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "reschedule_notice_minutes": 120, "max_reschedules": 1})).await;
    let r = booked(&app, "alice", room).await;
    let path = reservation_path(&r["id"]);
    let (s, e) = hours(12, 13);
    let (status, moved) = send(app.patch("alice", &path, &json!({"start": s, "end": e}))).await;
    assert_eq!(status, StatusCode::OK, "{moved}");

    let (s, e) = hours(14, 15);
    let (status, problem) = send(app.patch("alice", &path, &json!({"start": s, "end": e}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "reschedule-limit"), "{problem}");
    let (status, _) = send(app.patch("alice", &path, &json!({"metadata": {"note": "window seat"}}))).await;
    assert_eq!(status, StatusCode::OK, "metadata is not a move");

    // Two hours before its start (now 12:00), moving is closed to the owner.
    clock.set(day() + Duration::hours(10) + Duration::seconds(1));
    let (status, problem) = send(app.patch("alice", &path, &json!({"start": s, "end": e}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "policy-window-closed"), "{problem}");
    assert_eq!(problem["policy"], "reschedule_notice_minutes");
    assert_eq!(at(&problem, "deadline"), day() + Duration::hours(10));

    let (status, moved) = send(app.patch("admin", &path, &json!({"start": s, "end": e}))).await;
    assert_eq!((status, moved["acted_by"].as_str()), (StatusCode::OK, Some("admin")), "{moved}");
    let moves =
        app.count("SELECT reschedules::bigint FROM reservations WHERE id::text = $1", &[&r["id"].as_str()]).await;
    assert_eq!(moves, 2, "every move is counted, the admin's too");
}

#[tokio::test]
async fn a_hold_is_extended_by_its_ttl_up_to_max_hold_seconds_and_then_refused() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 600, "max_hold_seconds": 1500})).await;
    let held = app.hold("alice", room, 10, 11).await;
    let created = at(&held, "created_at");
    assert_eq!(at(&held, "expires_at"), created + Duration::seconds(600));

    let (status, once) = extend(&app, "alice", &held).await;
    assert_eq!(status, StatusCode::OK, "{once}");
    assert_eq!(at(&once, "expires_at"), created + Duration::seconds(1200));
    let (status, twice) = extend(&app, "alice", &held).await;
    assert_eq!(status, StatusCode::OK, "{twice}");
    assert_eq!(at(&twice, "expires_at"), created + Duration::seconds(1500), "up to max_hold_seconds, not past it");
    let (status, problem) = extend(&app, "alice", &held).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "hold-extension-limit"), "{problem}");
    let events = app
        .count(
            "SELECT count(*) FROM outbox WHERE kind = 'reservation.extended' AND subject_id::text = $1",
            &[&held["id"].as_str()],
        )
        .await;
    assert_eq!(events, 2);

    let (status, problem) = extend(&app, "bob", &held).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "reservation-not-found"), "another's hold");
}

#[tokio::test]
async fn an_expired_or_confirmed_hold_cannot_be_extended_nor_one_on_a_resource_without_max_hold() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let plain = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 600})).await;
    let held = app.hold("alice", plain, 10, 11).await;
    let (status, problem) = extend(&app, "alice", &held).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "hold-extension-limit"), "{problem}");

    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 600, "max_hold_seconds": 3600})).await;
    let held = app.hold("alice", room, 10, 11).await;
    clock.advance(Duration::seconds(600));
    let (status, problem) = extend(&app, "alice", &held).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "reservation-not-held"), "{problem}");

    let held = app.hold("alice", room, 12, 13).await;
    app.confirm("alice", &held["id"]).await;
    let (status, problem) = extend(&app, "alice", &held).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "reservation-not-held"), "{problem}");
}

#[tokio::test]
async fn policies_are_set_cleared_and_checked_like_the_other_settings() {
    let app = TestApp::spawn().await;
    let (status, problem) = send(app.post(
        "admin",
        "/v1/resources",
        &json!({"name": "Room", "cancel_notice_minutes": -1, "max_reschedules": "two", "hold_ttl_seconds": 600,
                "max_hold_seconds": 300}),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    let mut fields: Vec<&str> =
        problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    fields.sort();
    assert_eq!(fields, ["cancel_notice_minutes", "max_reschedules"]);

    let (status, problem) = send(app.post(
        "admin",
        "/v1/resources",
        &json!({"name": "Room", "hold_ttl_seconds": 600, "max_hold_seconds": 300}),
    ))
    .await;
    assert_eq!((status, problem["errors"][0]["field"].as_str()), (StatusCode::BAD_REQUEST, Some("max_hold_seconds")));

    let room = app.resource_with(json!({"name": "Room", "cancel_notice_minutes": 30})).await;
    let path = format!("/v1/resources/{room}");
    let (status, r) =
        send(app.patch("admin", &path, &json!({"cancel_notice_minutes": null, "max_reschedules": 3}))).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!((r["cancel_notice_minutes"].clone(), r["max_reschedules"].clone()), (Value::Null, json!(3)));
    let (_, read) = send(app.get("alice", &path)).await;
    assert_eq!((read["max_reschedules"].clone(), read["max_hold_seconds"].clone()), (json!(3), Value::Null));
}
