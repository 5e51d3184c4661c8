//! Calendar rules (issue 11): a resource's time zone, opening hours, buffers, notice,
//! advance and grid, set at creation and by PATCH, judged under the resource lock by
//! every path that makes a reservation. The clock is fixed, so that the dates (and
//! their daylight saving) are known.

use acceptance::{TestApp, send};
use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::ManualClock;
use std::sync::Arc;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// A server whose clock reads 2027-01-04T00:00:00Z (a Monday).
async fn app() -> (TestApp, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(at("2027-01-04T00:00:00Z")));
    (TestApp::spawn_with_clock(clock.clone()).await, clock)
}

/// A Berlin office open on weekdays 09:00-12:00 and 13:00-17:00 local time, closed
/// on 2027-12-24 but for the morning, and on Christmas Day.
fn office() -> Value {
    let day = json!([["09:00", "12:00"], ["13:00", "17:00"]]);
    json!({
        "name": "Office",
        "capacity": 1,
        "time_zone": "Europe/Berlin",
        "schedule": {
            "weekly": {"mon": day, "tue": day, "wed": day, "thu": day, "fri": day},
            "exceptions": [{"date": "2027-12-24", "hours": [["09:00", "12:00"]]}, {"date": "2027-12-25", "hours": []}]
        }
    })
}

async fn create(app: &TestApp, body: &Value) -> (StatusCode, Value) {
    send(app.post("admin", "/v1/resources", body)).await
}

#[tokio::test]
async fn a_resource_keeps_the_rules_it_was_created_with_and_a_patch_changes_or_clears_them() {
    let (app, _) = app().await;
    let mut body = office();
    body["buffer_before_minutes"] = json!(10);
    body["slot_minutes"] = json!(30);
    let (status, created) = create(&app, &body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["time_zone"], "Europe/Berlin");
    assert_eq!(created["schedule"], body["schedule"]);
    assert_eq!(
        (created["buffer_before_minutes"].clone(), created["buffer_after_minutes"].clone()),
        (json!(10), json!(0))
    );
    assert_eq!((created["slot_minutes"].clone(), created["max_advance_days"].clone()), (json!(30), Value::Null));

    let path = format!("/v1/resources/{}", created["id"].as_str().unwrap());
    let (status, changed) = send(app.patch(
        "admin",
        &path,
        &json!({"time_zone": "Asia/Kathmandu", "schedule": null, "slot_minutes": null, "max_advance_days": 60}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!((changed["time_zone"].clone(), changed["schedule"].clone()), (json!("Asia/Kathmandu"), Value::Null));
    assert_eq!((changed["slot_minutes"].clone(), changed["max_advance_days"].clone()), (Value::Null, json!(60)));
    assert_eq!(changed["buffer_before_minutes"], 10, "what the patch left out stays");
    let (_, read) = send(app.get("alice", &path)).await;
    assert_eq!(read, changed);

    let (_, plain) = create(&app, &json!({"name": "Plain"})).await;
    assert_eq!((plain["time_zone"].clone(), plain["schedule"].clone()), (json!("UTC"), Value::Null));
}

#[tokio::test]
async fn bad_rules_are_refused_each_by_its_own_field() {
    let (app, _) = app().await;
    let mut body = office();
    body["time_zone"] = json!("Europe/Atlantis");
    body["schedule"]["weekly"]["mon"] = json!([["17:00", "09:00"]]);
    body["schedule"]["weekly"]["someday"] = json!([]);
    body["schedule"]["exceptions"][0]["date"] = json!("2027-02-30");
    body["slot_minutes"] = json!(0);
    body["buffer_after_minutes"] = json!(-5);
    let (status, problem) = create(&app, &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    let mut fields: Vec<&str> =
        problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "buffer_after_minutes",
            "schedule.exceptions[0]",
            "schedule.weekly.mon",
            "schedule.weekly.someday",
            "slot_minutes",
            "time_zone"
        ]
    );
    let (status, _) = create(&app, &json!({"name": "x"})).await;
    assert_eq!(status, StatusCode::CREATED);
}
