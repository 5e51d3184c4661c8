//! Recurring series: occurrences expanded in the resource's own time zone, each held
//! by the hold paths every other hold takes, all or nothing or skipping conflicts, and
//! confirms, cancels and moves scoped to one occurrence, the following ones or all.
//! Outcomes checked in SQL.

use acceptance::{TestApp, send, slug};
use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::ManualClock;
use std::sync::Arc;
use uuid::Uuid;

/// Monday 2027-01-04: every series below lies ahead of it, inside the horizon.
fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Utc.with_ymd_and_hms(2027, 1, 4, 0, 0, 0).unwrap()))
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn series_body(resource: Uuid, start: &str, end: &str, rule: &str, mode: &str) -> Value {
    json!({"resource_id": resource, "start": start, "end": end, "recurrence": rule, "mode": mode})
}

async fn series(app: &TestApp, who: &str, body: &Value) -> (StatusCode, Value) {
    send(app.post(who, "/v1/series", body)).await
}

fn starts(s: &Value) -> Vec<DateTime<Utc>> {
    s["occurrences"].as_array().unwrap().iter().map(|o| at(o["start"].as_str().unwrap())).collect()
}

fn reservation_ids(s: &Value) -> Vec<Value> {
    s["occurrences"].as_array().unwrap().iter().map(|o| o["reservation_id"].clone()).collect()
}

fn statuses(s: &Value) -> Vec<String> {
    s["occurrences"].as_array().unwrap().iter().map(|o| o["status"].as_str().unwrap_or("-").to_string()).collect()
}

async fn read_series(app: &TestApp, who: &str, id: &Value) -> Value {
    let (status, s) = send(app.get(who, &format!("/v1/series/{}", id.as_str().unwrap()))).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    s
}

/// Instants where a capacity-1 resource holds two live reservations: must be 0.
async fn overbooked(app: &TestApp) -> i64 {
    app.count(
        "SELECT count(*) FROM reservations a JOIN reservations b
           ON a.resource_id = b.resource_id AND a.id < b.id AND a.period && b.period
         WHERE a.status IN ('HELD', 'CONFIRMED') AND b.status IN ('HELD', 'CONFIRMED')",
        &[],
    )
    .await
}

#[tokio::test]
async fn a_weekly_series_keeps_nine_oclock_local_across_the_march_and_october_changes_in_berlin_and_new_york() {
    let app = TestApp::spawn_with_clock(clock()).await;
    let berlin = app.resource_with(json!({"name": "Berlin room", "time_zone": "Europe/Berlin"})).await;
    let new_york = app.resource_with(json!({"name": "New York room", "time_zone": "America/New_York"})).await;
    // Mondays 09:00-10:00 in Berlin from 2027-03-22 to 2027-11-01: CET, CEST from
    // 03-28, CET again from 10-31.
    let (status, s) = series(
        &app,
        "alice",
        &series_body(berlin, "2027-03-22T08:00:00Z", "2027-03-22T09:00:00Z", "FREQ=WEEKLY;COUNT=33", "all_or_nothing"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{s}");
    assert_eq!((s["time_zone"].as_str(), s["time_zone_resource_id"].clone()), (Some("Europe/Berlin"), json!(berlin)));
    let got = starts(&s);
    assert_eq!(got.len(), 33);
    for t in &got {
        let summer = *t >= at("2027-03-28T01:00:00Z") && *t < at("2027-10-31T01:00:00Z");
        assert_eq!((t.weekday(), t.hour()), (chrono::Weekday::Mon, if summer { 7 } else { 8 }), "{t}");
    }
    assert_eq!((got[1], got[32]), (at("2027-03-29T07:00:00Z"), at("2027-11-01T08:00:00Z")));
    // Fridays 09:00-10:00 in New York from 2027-03-12 to 2027-11-12: EST, EDT from
    // 03-14, EST again from 11-07.
    let (status, s) = series(
        &app,
        "alice",
        &series_body(
            new_york,
            "2027-03-12T14:00:00Z",
            "2027-03-12T15:00:00Z",
            "FREQ=WEEKLY;UNTIL=20271112",
            "skip_conflicts",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{s}");
    let got = starts(&s);
    assert_eq!(got.len(), 36);
    for t in &got {
        let summer = *t >= at("2027-03-14T07:00:00Z") && *t < at("2027-11-07T06:00:00Z");
        assert_eq!((t.weekday(), t.hour()), (chrono::Weekday::Fri, if summer { 13 } else { 14 }), "{t}");
    }
    // Every occurrence is a reservation of the series, each an hour long, in SQL too.
    let id: Uuid = s["id"].as_str().unwrap().parse().unwrap();
    let hour_long = app
        .count(
            "SELECT count(*) FROM reservations WHERE series_id = $1 AND status = 'HELD'
               AND ends_at - starts_at = interval '1 hour'
               AND (starts_at AT TIME ZONE 'America/New_York')::time = '09:00'",
            &[&id],
        )
        .await;
    assert_eq!(hour_long, 36);
}

#[tokio::test]
async fn an_all_or_nothing_series_with_one_conflict_leaves_nothing_behind_and_names_the_occurrence() {
    let app = TestApp::spawn_with_clock(clock()).await;
    let room = app.resource(1).await;
    let (status, taken) = app.reserve("bob", room, ("2027-02-15T10:00:00Z", "2027-02-15T11:00:00Z"), 1).await;
    assert_eq!(status, StatusCode::CREATED, "{taken}");
    let events_before = app.count("SELECT count(*) FROM outbox", &[]).await;
    let body =
        series_body(room, "2027-02-01T10:00:00Z", "2027-02-01T11:00:00Z", "FREQ=WEEKLY;COUNT=4", "all_or_nothing");
    let (status, problem) = series(&app, "alice", &body).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "slot-unavailable"), "{problem}");
    let failed = problem["occurrences"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{problem}");
    assert_eq!((failed[0]["index"].clone(), failed[0]["start"].clone()), (json!(2), json!("2027-02-15T10:00:00Z")));
    assert_eq!(slug(&failed[0]["problem"]), "slot-unavailable");
    for (what, sql) in [
        ("reservations", "SELECT count(*) FROM reservations WHERE owner = 'alice'"),
        ("series", "SELECT count(*) FROM series"),
        ("occurrences", "SELECT count(*) FROM series_occurrences"),
    ] {
        assert_eq!(app.count(sql, &[]).await, 0, "no {what} left behind");
    }
    assert_eq!(app.count("SELECT count(*) FROM outbox", &[]).await, events_before, "no event either");
}

#[tokio::test]
async fn skip_conflicts_holds_exactly_what_fits_and_says_why_each_other_occurrence_was_not_held() {
    let app = TestApp::spawn_with_clock(clock()).await;
    // Open Monday to Friday, 08:00-18:00 UTC: a daily series meets the weekend.
    let hours = json!(["08:00", "18:00"]);
    let room = app
        .resource_with(json!({"name": "Weekdays", "schedule": {"weekly":
            {"mon": [hours], "tue": [hours], "wed": [hours], "thu": [hours], "fri": [hours]}}}))
        .await;
    let (status, _) = app.reserve("bob", room, ("2027-02-03T10:00:00Z", "2027-02-03T11:00:00Z"), 1).await;
    assert_eq!(status, StatusCode::CREATED);
    // Monday 2027-02-01 to Sunday 02-07, daily.
    let body =
        series_body(room, "2027-02-01T10:00:00Z", "2027-02-01T11:00:00Z", "FREQ=DAILY;COUNT=7", "skip_conflicts");
    let (status, s) = series(&app, "alice", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{s}");
    let held: Vec<bool> = reservation_ids(&s).iter().map(|r| !r.is_null()).collect();
    assert_eq!(held, [true, true, false, true, true, false, false]);
    let reasons: Vec<(String, Option<String>)> = s["occurrences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["reservation_id"].is_null())
        .map(|o| (slug(&o["problem"]).to_string(), o["problem"]["rule"].as_str().map(String::from)))
        .collect();
    assert_eq!(
        reasons,
        [
            ("slot-unavailable".into(), None),
            ("outside-schedule".into(), Some("closed_day".into())),
            ("outside-schedule".into(), Some("closed_day".into())),
        ]
    );
    let id: Uuid = s["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(app.count("SELECT count(*) FROM reservations WHERE owner = 'alice'", &[]).await, 4);
    assert_eq!(app.count("SELECT count(*) FROM reservations WHERE series_id = $1", &[&id]).await, 4);
    // The series reads the same for its owner and an admin, and not at all for others;
    // each reservation says its series.
    let read = read_series(&app, "alice", &s["id"]).await;
    assert_eq!(read["occurrences"], s["occurrences"]);
    assert_eq!(read_series(&app, "admin", &s["id"]).await["id"], s["id"]);
    let (status, problem) = send(app.get("bob", &format!("/v1/series/{id}"))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "series-not-found"));
    let first = app.reservation("alice", &s["occurrences"][0]["reservation_id"]).await;
    assert_eq!(first["series_id"], s["id"]);
    let (_, list) = send(app.get("alice", "/v1/reservations")).await;
    assert!(list["items"].as_array().unwrap().iter().all(|r| r["series_id"] == s["id"]));
    let (_, bobs) = send(app.get("bob", "/v1/reservations")).await;
    assert_eq!(bobs["items"][0]["series_id"], Value::Null);
}

#[tokio::test]
async fn confirm_and_cancel_act_on_one_occurrence_the_following_ones_or_all_of_them() {
    let app = TestApp::spawn_with_clock(clock()).await;
    let room = app.resource(1).await;
    let body =
        series_body(room, "2027-02-01T10:00:00Z", "2027-02-01T11:00:00Z", "FREQ=WEEKLY;COUNT=4", "all_or_nothing");
    let (status, s) = series(&app, "alice", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{s}");
    let ids = reservation_ids(&s);
    let path = |i: usize| format!("/v1/reservations/{}", ids[i].as_str().unwrap());
    // Confirm the second and those after it.
    let (status, after) = send(app.post("alice", &format!("{}/confirm?scope=following", path(1)), &json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(statuses(&after), ["HELD", "CONFIRMED", "CONFIRMED", "CONFIRMED"]);
    // Confirm only the first.
    let (status, one) = send(app.post("alice", &format!("{}/confirm?scope=one", path(0)), &json!({}))).await;
    assert_eq!(
        (status, one["status"].as_str(), one["series_id"].clone()),
        (StatusCode::OK, Some("CONFIRMED"), s["id"].clone())
    );
    // Cancel only the third.
    let (status, cancelled) = send(app.delete("alice", &path(2))).await;
    assert_eq!((status, cancelled["status"].as_str()), (StatusCode::OK, Some("CANCELLED")));
    assert_eq!(
        statuses(&read_series(&app, "alice", &s["id"]).await),
        ["CONFIRMED", "CONFIRMED", "CANCELLED", "CONFIRMED"]
    );
    // Cancel from the second on: the third is cancelled already and stays so.
    let (status, after) = send(app.delete("alice", &format!("{}?scope=following", path(1)))).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(statuses(&after), ["CONFIRMED", "CANCELLED", "CANCELLED", "CANCELLED"]);
    // And all: what is left.
    let (status, after) = send(app.delete("alice", &format!("{}?scope=all", path(3)))).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(statuses(&after), ["CANCELLED"; 4]);
    let id: Uuid = s["id"].as_str().unwrap().parse().unwrap();
    let live = "SELECT count(*) FROM reservations WHERE series_id = $1 AND status IN ('HELD', 'CONFIRMED')";
    assert_eq!(app.count(live, &[&id]).await, 0);
    // A second series of holds, released at once with scope=all.
    let body =
        series_body(room, "2027-02-02T10:00:00Z", "2027-02-02T11:00:00Z", "FREQ=DAILY;COUNT=3", "all_or_nothing");
    let (_, s2) = series(&app, "alice", &body).await;
    let last = reservation_ids(&s2)[2].as_str().unwrap().to_string();
    let (status, after) = send(app.delete("alice", &format!("/v1/reservations/{last}?scope=all"))).await;
    assert_eq!((status, statuses(&after)), (StatusCode::OK, vec!["RELEASED".to_string(); 3]));
    // Someone else's occurrences are not found, whatever the scope; a bad scope is named.
    let (status, _) = send(app.delete("bob", &format!("{}?scope=all", path(0)))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, problem) = send(app.delete("alice", &format!("{}?scope=some", path(0)))).await;
    assert_eq!((status, problem["errors"][0]["field"].as_str()), (StatusCode::BAD_REQUEST, Some("scope")));
}

#[tokio::test]
async fn a_move_of_one_occurrence_moves_it_alone_and_a_move_of_all_keeps_each_at_the_same_local_time() {
    let app = TestApp::spawn_with_clock(clock()).await;
    let berlin = app.resource_with(json!({"name": "Berlin room", "time_zone": "Europe/Berlin"})).await;
    // Mondays 09:00 local: 03-22 (CET), 03-29 and 04-05 (CEST).
    let body =
        series_body(berlin, "2027-03-22T08:00:00Z", "2027-03-22T09:00:00Z", "FREQ=WEEKLY;COUNT=3", "all_or_nothing");
    let (status, s) = series(&app, "alice", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{s}");
    let ids = reservation_ids(&s);
    let path = |i: usize| format!("/v1/reservations/{}", ids[i].as_str().unwrap());
    // One: the second to 11:00 local.
    let moved = json!({"start": "2027-03-29T09:00:00Z", "end": "2027-03-29T10:00:00Z"});
    let (status, r) = send(app.patch("alice", &format!("{}?scope=one", path(1)), &moved)).await;
    assert_eq!(
        (status, r["start"].as_str(), r["series_id"].clone()),
        (StatusCode::OK, Some("2027-03-29T09:00:00Z"), s["id"].clone()),
        "{r}"
    );
    assert_eq!(
        starts(&read_series(&app, "alice", &s["id"]).await),
        [at("2027-03-22T08:00:00Z"), at("2027-03-29T09:00:00Z"), at("2027-04-05T07:00:00Z")]
    );
    // All, from the first: 09:00 to 10:00 local, each at 10:00 in its own offset (the
    // second, at 11:00, moves by the same hour to 12:00).
    let later = json!({"start": "2027-03-22T09:00:00Z", "end": "2027-03-22T10:00:00Z"});
    let (status, after) = send(app.patch("alice", &format!("{}?scope=all", path(0)), &later)).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(starts(&after), [at("2027-03-22T09:00:00Z"), at("2027-03-29T10:00:00Z"), at("2027-04-05T08:00:00Z")]);
    let id: Uuid = s["id"].as_str().unwrap().parse().unwrap();
    let hour_long =
        "SELECT count(*) FROM reservations WHERE series_id = $1 AND ends_at - starts_at = interval '1 hour'";
    assert_eq!(app.count(hour_long, &[&id]).await, 3);
}

#[tokio::test]
async fn bad_recurrences_name_every_bad_part_and_nothing_is_held() {
    let app = TestApp::spawn_with_clock(clock()).await;
    let room = app.resource(1).await;
    let fields = |problem: &Value| -> Vec<String> {
        problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap().to_string()).collect()
    };
    let (s, e) = ("2027-02-01T10:00:00Z", "2027-02-01T11:00:00Z");
    for (rule, mode, named) in [
        ("FREQ=MONTHLY;BYMONTH=3;COUNT=2", "all_or_nothing", vec!["recurrence.FREQ", "recurrence.BYMONTH"]),
        ("FREQ=WEEKLY;BYSETPOS=1;COUNT=2", "skip_conflicts", vec!["recurrence.BYSETPOS"]),
        ("FREQ=WEEKLY;COUNT=2;UNTIL=20270301", "all_or_nothing", vec!["recurrence.UNTIL"]),
        ("FREQ=WEEKLY;COUNT=101", "all_or_nothing", vec!["recurrence.COUNT"]),
        ("FREQ=WEEKLY", "all_or_nothing", vec!["recurrence.COUNT"]),
        ("FREQ=DAILY;COUNT=3", "sometimes", vec!["mode"]),
        ("FREQ=DAILY;UNTIL=20271231", "all_or_nothing", vec!["recurrence.UNTIL"]),
        ("FREQ=WEEKLY;BYDAY=TU;COUNT=2", "all_or_nothing", vec!["recurrence.BYDAY"]),
    ] {
        let (status, problem) = series(&app, "alice", &series_body(room, s, e, rule, mode)).await;
        assert_eq!((status, slug(&problem)), (StatusCode::BAD_REQUEST, "validation-error"), "{rule}: {problem}");
        assert_eq!(fields(&problem), named, "{rule}");
    }
    let (status, problem) =
        series(&app, "alice", &json!({"start": s, "end": "x", "recurrence": 7, "colour": "red"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(fields(&problem), ["end", "recurrence", "colour"]);
    assert_eq!(app.count("SELECT count(*) FROM reservations", &[]).await, 0);
}

#[tokio::test]
async fn a_series_is_made_once_under_an_idempotency_key() {
    let app = TestApp::spawn_with_clock(clock()).await;
    let room = app.resource(1).await;
    let body =
        series_body(room, "2027-02-01T10:00:00Z", "2027-02-01T11:00:00Z", "FREQ=WEEKLY;COUNT=3", "all_or_nothing");
    let post = || app.post("alice", "/v1/series", &body).header("idempotency-key", "weekly-1");
    let first = post().send().await.unwrap();
    assert_eq!(
        (first.status(), first.headers()["idempotency-replayed"].to_str().unwrap()),
        (StatusCode::CREATED, "false")
    );
    let first: Value = first.json().await.unwrap();
    let again = post().send().await.unwrap();
    assert_eq!(
        (again.status(), again.headers()["idempotency-replayed"].to_str().unwrap()),
        (StatusCode::CREATED, "true")
    );
    assert_eq!(again.json::<Value>().await.unwrap(), first);
    assert_eq!(app.count("SELECT count(*) FROM series", &[]).await, 1);
    assert_eq!(app.count("SELECT count(*) FROM reservations", &[]).await, 3);
    let other =
        series_body(room, "2027-02-02T10:00:00Z", "2027-02-02T11:00:00Z", "FREQ=WEEKLY;COUNT=3", "all_or_nothing");
    let (status, problem) = send(app.post("alice", "/v1/series", &other).header("idempotency-key", "weekly-1")).await;
    assert_eq!((status, slug(&problem)), (StatusCode::UNPROCESSABLE_ENTITY, "idempotency-key-reused"));
    // A scope is part of what a key stands for: the same confirm with another scope is
    // another request.
    let confirm = format!("/v1/reservations/{}/confirm", first["occurrences"][0]["reservation_id"].as_str().unwrap());
    let keyed = |path: String| app.post("alice", &path, &json!({})).header("idempotency-key", "confirm-1");
    let (status, one) = send(keyed(format!("{confirm}?scope=one"))).await;
    assert_eq!((status, one["status"].as_str()), (StatusCode::OK, Some("CONFIRMED")));
    let (status, problem) = send(keyed(format!("{confirm}?scope=all"))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::UNPROCESSABLE_ENTITY, "idempotency-key-reused"));
    let confirmed = "SELECT count(*) FROM reservations WHERE status = 'CONFIRMED'";
    assert_eq!(app.count(confirmed, &[]).await, 1, "the other weeks are still held");
}

#[tokio::test]
async fn two_all_or_nothing_series_racing_for_overlapping_occurrences_end_with_one_whole_and_no_double_booking() {
    let app = TestApp::spawn_with_clock(clock()).await;
    for round in 0..6 {
        let room = app.resource(1).await;
        // Weeks 0-3 against weeks 2-5: they meet on two occurrences.
        let a =
            series_body(room, "2027-02-01T10:00:00Z", "2027-02-01T11:00:00Z", "FREQ=WEEKLY;COUNT=4", "all_or_nothing");
        let b =
            series_body(room, "2027-02-15T10:30:00Z", "2027-02-15T11:30:00Z", "FREQ=WEEKLY;COUNT=4", "all_or_nothing");
        let answers = join_all([series(&app, "alice", &a), series(&app, "bob", &b)]).await;
        let won: Vec<&(StatusCode, Value)> = answers.iter().filter(|(s, _)| *s == StatusCode::CREATED).collect();
        assert_eq!(won.len(), 1, "round {round}: {answers:?}");
        let lost = answers.iter().find(|(s, _)| *s != StatusCode::CREATED).unwrap();
        assert_eq!((lost.0, slug(&lost.1)), (StatusCode::CONFLICT, "slot-unavailable"), "{}", lost.1);
        let whole = "SELECT count(*) FROM reservations WHERE resource_id = $1 AND status = 'HELD'";
        assert_eq!(app.count(whole, &[&room]).await, 4, "round {round}: the winner whole, the loser nothing");
        let owners = "SELECT count(DISTINCT owner) FROM reservations WHERE resource_id = $1";
        assert_eq!(app.count(owners, &[&room]).await, 1);
    }
    assert_eq!(overbooked(&app).await, 0);
}

#[tokio::test]
async fn a_series_of_several_items_takes_the_first_items_zone_and_holds_every_item_each_week() {
    let app = TestApp::spawn_with_clock(clock()).await;
    let room = app.resource_with(json!({"name": "Room", "time_zone": "America/New_York"})).await;
    let host = app.resource_with(json!({"name": "Host", "time_zone": "Europe/Berlin"})).await;
    // Fridays 09:00 in New York (the first item's zone), across its March change.
    let body = json!({"items": [{"resource_id": room}, {"resource_id": host}],
                      "start": "2027-03-12T14:00:00Z", "end": "2027-03-12T15:00:00Z",
                      "recurrence": "FREQ=WEEKLY;COUNT=2"});
    let (status, s) = series(&app, "alice", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{s}");
    assert_eq!((s["time_zone"].as_str(), s["time_zone_resource_id"].clone()), (Some("America/New_York"), json!(room)));
    assert_eq!(starts(&s), [at("2027-03-12T14:00:00Z"), at("2027-03-19T13:00:00Z")]);
    let id: Uuid = s["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        app.count("SELECT count(*) FROM reservations WHERE series_id = $1", &[&id]).await,
        4,
        "two items a week"
    );
    let lead = app.reservation("alice", &s["occurrences"][1]["reservation_id"]).await;
    assert_eq!((lead["items"].as_array().unwrap().len(), lead["series_id"].clone()), (2, s["id"].clone()));
    // Bob takes the host in the second week: an all-or-nothing series of the pair fails
    // there, naming the occurrence, with the item in its problem.
    let (status, _) = app.reserve("bob", host, ("2027-04-02T13:00:00Z", "2027-04-02T14:00:00Z"), 1).await;
    assert_eq!(status, StatusCode::CREATED);
    let body = json!({"items": [{"resource_id": room}, {"resource_id": host}],
                      "start": "2027-03-26T13:00:00Z", "end": "2027-03-26T14:00:00Z",
                      "recurrence": "FREQ=WEEKLY;COUNT=2", "mode": "all_or_nothing"});
    let (status, problem) = series(&app, "alice", &body).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "slot-unavailable"), "{problem}");
    assert_eq!(problem["occurrences"][0]["index"], 1);
    assert_eq!(
        problem["occurrences"][0]["problem"]["items"],
        json!([{"index": 1, "resource_id": host, "reason": "taken"}])
    );
    // Cancelling the first series whole frees every item of every week.
    let first = s["occurrences"][0]["reservation_id"].as_str().unwrap();
    let (status, after) = send(app.delete("alice", &format!("/v1/reservations/{first}?scope=all"))).await;
    assert_eq!((status, statuses(&after)), (StatusCode::OK, vec!["RELEASED".to_string(); 2]));
    let live = "SELECT count(*) FROM reservations WHERE series_id = $1 AND status = 'HELD'";
    assert_eq!(app.count(live, &[&id]).await, 0);
}

#[tokio::test]
async fn a_series_whose_occurrences_have_bad_fields_is_a_validation_error_naming_them() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (end, start) = acceptance::hours(9, 10);
    let body = serde_json::json!({"resource_id": room, "start": start, "end": end,
                                  "recurrence": "FREQ=WEEKLY;COUNT=3", "mode": "all_or_nothing"});
    let (status, problem) = acceptance::send(app.post("alice", "/v1/series", &body)).await;
    assert_eq!(
        (status, acceptance::slug(&problem)),
        (reqwest::StatusCode::BAD_REQUEST, "validation-error"),
        "{problem}"
    );
    let fields: Vec<&str> =
        problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    assert!(!fields.is_empty(), "every bad field is named: {problem}");
    assert_eq!(app.count("SELECT count(*) FROM reservations", &[]).await, 0, "nothing was held");
}

/// Every event of an occurrence names its series, whoever writes it: the occurrence's
/// own hold, the lapse another principal's hold writes down (on a capacity-1 resource
/// and on a capacity-N one), and the lapse the sweep writes down.
#[tokio::test]
async fn every_event_of_an_occurrence_names_its_series_the_lapses_others_write_down_included() {
    let clock = clock();
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(json!({"name": "Room", "hold_ttl_seconds": 60})).await;
    let hall = app.resource_with(json!({"name": "Hall", "capacity": 2, "hold_ttl_seconds": 60})).await;
    let mut series_ids = Vec::new();
    for resource in [room, hall] {
        let quantity_body = |mut b: Value| {
            if resource == hall {
                b["quantity"] = json!(2);
            }
            b
        };
        let body = quantity_body(series_body(
            resource,
            "2027-02-01T10:00:00Z",
            "2027-02-01T11:00:00Z",
            "FREQ=WEEKLY;COUNT=2",
            "all_or_nothing",
        ));
        let (status, s) = series(&app, "alice", &body).await;
        assert_eq!(status, StatusCode::CREATED, "{s}");
        series_ids.push(s["id"].as_str().unwrap().to_string());
    }
    clock.advance(chrono::Duration::seconds(61));
    for resource in [room, hall] {
        let (status, held) = app.reserve("bob", resource, ("2027-02-01T10:00:00Z", "2027-02-01T11:00:00Z"), 1).await;
        assert_eq!(status, StatusCode::CREATED, "{held}");
    }
    sweeper::sweep(&app.state, &shared::outbox::LogPublisher, Default::default()).await;

    let db = app.db().await;
    let events: Vec<(String, Option<String>)> = db
        .query(
            "SELECT o.kind::text, o.payload->>'series_id' FROM outbox o JOIN reservations r ON r.id = o.subject_id \
             WHERE r.owner = 'alice' ORDER BY o.seq",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let expired = events.iter().filter(|(kind, _)| kind == "reservation.expired").count();
    assert_eq!(expired, 4, "each occurrence lapsed: {events:?}");
    for (kind, series) in &events {
        assert!(
            series.as_ref().is_some_and(|s| series_ids.contains(s)),
            "a {kind} event of an occurrence without its series: {events:?}"
        );
    }
}
