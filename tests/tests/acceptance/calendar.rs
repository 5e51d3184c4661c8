//! Calendar rules: a resource's time zone, opening hours, buffers, notice,
//! advance and grid, set at creation and by PATCH, judged under the resource lock by
//! every path that makes a reservation. The clock is fixed, so that the dates (and
//! their daylight saving) are known.

use acceptance::{TestApp, reservation_path, send, slug};
use chrono::{DateTime, Utc};
use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::ManualClock;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use uuid::Uuid;

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

async fn reserve(app: &TestApp, who: &str, resource: Uuid, start: &str, end: &str) -> (StatusCode, Value) {
    app.reserve(who, resource, (start, end), 1).await
}

fn id(v: &Value) -> Uuid {
    v["id"].as_str().unwrap().parse().unwrap()
}

/// The status and the rule of a refusal (`-` when it names none).
fn refusal(answer: &(StatusCode, Value)) -> (StatusCode, String, String) {
    let (status, problem) = answer;
    (*status, slug(problem).to_string(), problem["rule"].as_str().unwrap_or("-").to_string())
}

fn outside(rule: &str) -> (StatusCode, String, String) {
    (StatusCode::UNPROCESSABLE_ENTITY, "outside-schedule".into(), rule.into())
}

async fn patch_resource(app: &TestApp, resource: Uuid, body: Value) {
    let (status, r) = send(app.patch("admin", &format!("/v1/resources/{resource}"), &body)).await;
    assert_eq!(status, StatusCode::OK, "{r}");
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

#[tokio::test]
async fn reserving_keeps_to_local_opening_hours_in_winter_and_in_summer_and_to_the_exceptions() {
    let (app, _) = app().await;
    let (_, office) = create(&app, &office()).await;
    let office = id(&office);
    // Tuesday 2027-01-12: 09:00 in Berlin is 08:00Z (CET).
    let ok = reserve(&app, "alice", office, "2027-01-12T08:00:00Z", "2027-01-12T09:00:00Z").await;
    assert_eq!(ok.0, StatusCode::CREATED, "{}", ok.1);
    let early = reserve(&app, "alice", office, "2027-01-12T07:30:00Z", "2027-01-12T08:30:00Z").await;
    assert_eq!(refusal(&early), outside("outside_hours"));
    // Across the lunch break: inside the day, but not inside one stretch of hours.
    let lunch = reserve(&app, "alice", office, "2027-01-12T10:30:00Z", "2027-01-12T12:30:00Z").await;
    assert_eq!(refusal(&lunch), outside("outside_hours"));
    // Tuesday 2027-07-13: 09:00 in Berlin is 07:00Z (CEST).
    let summer = reserve(&app, "alice", office, "2027-07-13T07:00:00Z", "2027-07-13T08:00:00Z").await;
    assert_eq!(summer.0, StatusCode::CREATED, "{}", summer.1);
    // A Saturday, Christmas Day (a Saturday too) and the afternoon of Christmas Eve.
    let saturday = reserve(&app, "alice", office, "2027-01-16T09:00:00Z", "2027-01-16T10:00:00Z").await;
    assert_eq!(refusal(&saturday), outside("closed_day"));
    let eve_morning = reserve(&app, "alice", office, "2027-12-24T08:00:00Z", "2027-12-24T09:00:00Z").await;
    assert_eq!(eve_morning.0, StatusCode::CREATED, "{}", eve_morning.1);
    let eve_afternoon = reserve(&app, "alice", office, "2027-12-24T13:00:00Z", "2027-12-24T14:00:00Z").await;
    assert_eq!(refusal(&eve_afternoon), outside("outside_hours"));
    // A refusal wrote nothing.
    let rows = app.count("SELECT count(*) FROM reservations", &[]).await;
    assert_eq!(rows, 3);
}

#[tokio::test]
async fn notice_advance_and_grid_set_by_a_patch_judge_new_reservations_and_leave_the_old_ones() {
    let (app, _) = app().await;
    let room = app.resource(1).await;
    let before = reserve(&app, "alice", room, "2027-01-04T00:30:00Z", "2027-01-04T01:00:00Z").await;
    assert_eq!(before.0, StatusCode::CREATED, "{}", before.1);
    patch_resource(&app, room, json!({"min_notice_minutes": 120, "max_advance_days": 30, "slot_minutes": 30})).await;
    let soon = reserve(&app, "bob", room, "2027-01-04T01:30:00Z", "2027-01-04T02:00:00Z").await;
    assert_eq!(refusal(&soon), outside("notice"));
    let far = reserve(&app, "bob", room, "2027-02-04T01:00:00Z", "2027-02-04T02:00:00Z").await;
    assert_eq!(refusal(&far), outside("advance"));
    let off_grid = reserve(&app, "bob", room, "2027-01-05T10:15:00Z", "2027-01-05T11:00:00Z").await;
    assert_eq!(refusal(&off_grid), outside("grid"));
    let on_grid = reserve(&app, "bob", room, "2027-01-05T10:30:00Z", "2027-01-05T11:00:00Z").await;
    assert_eq!(on_grid.0, StatusCode::CREATED, "{}", on_grid.1);
    let (_, old) = send(app.get("alice", &reservation_path(&before.1["id"]))).await;
    assert_eq!(old["status"], "HELD", "the rule change left the earlier hold alone");
}

#[tokio::test]
async fn buffers_keep_time_free_around_a_booking_and_a_range_taken_outright_is_still_a_conflict() {
    let (app, _) = app().await;
    let room = app.resource_with(json!({"name": "Lab", "buffer_before_minutes": 10, "buffer_after_minutes": 15})).await;
    let first = reserve(&app, "alice", room, "2027-01-05T10:00:00Z", "2027-01-05T11:00:00Z").await;
    assert_eq!(first.0, StatusCode::CREATED, "{}", first.1);
    // 11:00 + 15 after, and 10 before the next: 11:25 at the earliest.
    let close = reserve(&app, "bob", room, "2027-01-05T11:20:00Z", "2027-01-05T12:00:00Z").await;
    assert_eq!(refusal(&close), outside("buffer"));
    let before = reserve(&app, "bob", room, "2027-01-05T09:00:00Z", "2027-01-05T09:40:00Z").await;
    assert_eq!(refusal(&before), outside("buffer"));
    let taken = reserve(&app, "bob", room, "2027-01-05T10:30:00Z", "2027-01-05T11:30:00Z").await;
    assert_eq!(refusal(&taken), (StatusCode::CONFLICT, "slot-unavailable".into(), "-".into()));
    let after = reserve(&app, "bob", room, "2027-01-05T11:25:00Z", "2027-01-05T12:00:00Z").await;
    assert_eq!(after.0, StatusCode::CREATED, "{}", after.1);
}

#[tokio::test]
async fn a_move_and_a_join_outside_the_rules_are_refused_and_change_nothing() {
    let (app, _) = app().await;
    let (_, office) = create(&app, &office()).await;
    let office = id(&office);
    let (status, r) = reserve(&app, "alice", office, "2027-01-12T08:00:00Z", "2027-01-12T09:00:00Z").await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    let moved = send(app.patch(
        "alice",
        &reservation_path(&r["id"]),
        &json!({"start": "2027-01-16T08:00:00Z", "end": "2027-01-16T09:00:00Z"}),
    ))
    .await;
    assert_eq!(refusal(&moved), outside("closed_day"));
    let longer = send(app.patch("alice", &reservation_path(&r["id"]), &json!({"end": "2027-01-12T11:30:00Z"}))).await;
    assert_eq!(refusal(&longer), outside("outside_hours"));
    let (_, still) = send(app.get("alice", &reservation_path(&r["id"]))).await;
    assert_eq!((still["start"].clone(), still["end"].clone()), (r["start"].clone(), r["end"].clone()));

    let joined = send(app.post(
        "bob",
        &format!("/v1/resources/{office}/waitlist"),
        &json!({"start": "2027-01-12T06:00:00Z", "end": "2027-01-12T07:00:00Z"}),
    ))
    .await;
    assert_eq!(refusal(&joined), outside("outside_hours"));
}

#[tokio::test]
async fn freed_capacity_is_not_handed_to_a_waiting_range_the_rules_now_refuse() {
    let (app, _) = app().await;
    let room = app.resource(1).await;
    let (_, alice) = reserve(&app, "alice", room, "2027-01-05T10:00:00Z", "2027-01-05T11:00:00Z").await;
    let (status, bob) = send(app.post(
        "bob",
        &format!("/v1/resources/{room}/waitlist"),
        &json!({"start": "2027-01-05T10:00:00Z", "end": "2027-01-05T11:00:00Z"}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{bob}");
    // The room now opens at noon on Tuesdays: bob's range is outside the hours.
    patch_resource(&app, room, json!({"schedule": {"weekly": {"tue": [["12:00", "18:00"]]}, "exceptions": []}})).await;
    let (status, _) = send(app.delete("alice", &reservation_path(&alice["id"]))).await;
    assert_eq!(status, StatusCode::OK);
    let entry = app.waitlist_entry("bob", &bob).await;
    assert_eq!(entry["status"], "WAITING", "{entry}");
    let offers = app.count("SELECT count(*) FROM reservations WHERE source = 'waitlist_offer'", &[]).await;
    assert_eq!(offers, 0);
}

async fn slots(app: &TestApp, resource: Uuid, query: &str) -> Vec<(String, i64)> {
    let (status, body) = send(app.get("bob", &format!("/v1/resources/{resource}/slots?{query}"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["start"].as_str().unwrap().to_string(), s["remaining"].as_i64().unwrap()))
        .collect()
}

#[tokio::test]
async fn slots_list_the_starts_that_fit_the_hours_the_buffers_and_the_load_and_a_reserve_takes_one() {
    let (app, _) = app().await;
    let mut body = office();
    body["capacity"] = json!(2);
    body["buffer_after_minutes"] = json!(30);
    let (_, office) = create(&app, &body).await;
    let office = id(&office);
    let (status, _) = reserve(&app, "alice", office, "2027-01-12T08:00:00Z", "2027-01-12T09:00:00Z").await;
    assert_eq!(status, StatusCode::CREATED);
    // Tuesday 2027-01-12, hourly, in CET: 09, 10, 11 (morning), 13, 14, 15, 16.
    let day = "from=2027-01-12T00:00:00Z&to=2027-01-13T00:00:00Z&duration=PT1H";
    let listed = slots(&app, office, day).await;
    let expected: Vec<(String, i64)> = [
        ("2027-01-12T08:00:00Z", 1),
        ("2027-01-12T09:00:00Z", 1),
        ("2027-01-12T10:00:00Z", 2),
        ("2027-01-12T12:00:00Z", 2),
        ("2027-01-12T13:00:00Z", 2),
        ("2027-01-12T14:00:00Z", 2),
        ("2027-01-12T15:00:00Z", 2),
    ]
    .iter()
    .map(|(s, r)| (s.to_string(), *r))
    .collect();
    assert_eq!(listed, expected);
    // Two units fit only where the booking and its buffer do not reach.
    let two = slots(&app, office, &format!("{day}&quantity=2")).await;
    assert_eq!(two.first().map(|s| s.0.as_str()), Some("2027-01-12T10:00:00Z"));
    // A listed start is one a reserve accepts, and is then listed no more (the next,
    // after the lunch break, is beyond its buffer).
    let (start, _) = &two[0];
    let end = (DateTime::parse_from_rfc3339(start).unwrap() + chrono::Duration::hours(1)).to_rfc3339();
    let (status, r) = app.reserve("carol", office, (start, &end), 2).await;
    assert_eq!(status, StatusCode::CREATED, "{start}: {r}");
    let after = slots(&app, office, &format!("{day}&quantity=2")).await;
    assert_eq!(after, two[1..].to_vec());
    // A weekend day has none; several resources are answered each for itself.
    let room = app.resource(1).await;
    let (status, found) = send(app.get(
        "bob",
        &format!(
            "/v1/slots?resource_id={office}&resource_id={room}&from=2027-01-16T10:00:00Z&to=2027-01-16T12:00:00Z&duration=PT1H"
        ),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(found["resources"][0]["free"], false);
    assert_eq!(found["resources"][1]["free"], true);
    assert_eq!(found["resources"][1]["slots"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn availability_free_time_keeps_to_the_hours_and_leaves_the_buffers_out() {
    let (app, _) = app().await;
    let mut body = office();
    body["buffer_before_minutes"] = json!(15);
    let (_, office) = create(&app, &body).await;
    let office = id(&office);
    let (status, _) = reserve(&app, "alice", office, "2027-01-12T09:00:00Z", "2027-01-12T10:00:00Z").await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, a) =
        send(app.get(
            "bob",
            &format!("/v1/resources/{office}/availability?from=2027-01-12T00:00:00Z&to=2027-01-13T00:00:00Z"),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{a}");
    let free: Vec<(&str, &str)> = a["free"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["start"].as_str().unwrap(), p["end"].as_str().unwrap()))
        .collect();
    // Open 08-11Z and 12-16Z; the booking 09-10Z keeps 15 minutes free either side of
    // it for a new one (its own buffer before, the new one's before it).
    assert_eq!(
        free,
        [
            ("2027-01-12T08:00:00Z", "2027-01-12T08:45:00Z"),
            ("2027-01-12T10:15:00Z", "2027-01-12T11:00:00Z"),
            ("2027-01-12T12:00:00Z", "2027-01-12T16:00:00Z"),
        ]
    );
    assert_eq!(a["taken"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn the_database_keeps_the_buffered_ranges_of_a_single_unit_apart_even_for_a_writer_that_skips_the_rules() {
    let (app, _) = app().await;
    let room = app.resource_with(json!({"name": "Lab", "buffer_after_minutes": 30})).await;
    let (status, _) = reserve(&app, "alice", room, "2027-01-05T10:00:00Z", "2027-01-05T11:00:00Z").await;
    assert_eq!(status, StatusCode::CREATED);
    let db = app.db().await;
    let kept: String =
        db.query_one("SELECT buffered::text FROM reservations WHERE resource_id = $1", &[&room]).await.unwrap().get(0);
    assert_eq!(kept, r#"["2027-01-05 10:00:00+00","2027-01-05 11:30:00+00")"#);
    // A row written past the application, inside the buffer: the constraint refuses it.
    let inserted = db
        .execute(
            "INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, status, \
             expires_at, source, created_at, updated_at) VALUES (gen_random_uuid(), $1, 1, 'mallory', \
             '2027-01-05T11:15:00Z', '2027-01-05T12:00:00Z', 1, 'CONFIRMED', NULL, 'request', now(), now())",
            &[&room],
        )
        .await;
    let e = inserted.expect_err("the exclusion constraint refuses it");
    assert_eq!(e.as_db_error().map(|d| d.constraint()), Some(Some("reservations_single_unit_buffers_apart")));
    // A change of the buffers applies to new bookings only: the old one keeps its own.
    patch_resource(&app, room, json!({"buffer_after_minutes": 0})).await;
    let kept_after: String =
        db.query_one("SELECT buffered::text FROM reservations WHERE resource_id = $1", &[&room]).await.unwrap().get(0);
    assert_eq!(kept_after, kept);
    let close = reserve(&app, "bob", room, "2027-01-05T11:15:00Z", "2027-01-05T12:00:00Z").await;
    assert_eq!(refusal(&close), outside("buffer"));
    let later = reserve(&app, "bob", room, "2027-01-05T11:30:00Z", "2027-01-05T12:00:00Z").await;
    assert_eq!(later.0, StatusCode::CREATED, "{}", later.1);
}

#[tokio::test]
async fn a_lapsed_hold_whose_buffer_meets_a_new_booking_is_written_down_rather_than_refusing_it() {
    let (app, clock) = app().await;
    let room = app.resource_with(json!({"name": "Lab", "buffer_after_minutes": 30, "hold_ttl_seconds": 60})).await;
    let (status, held) = reserve(&app, "alice", room, "2027-01-05T10:00:00Z", "2027-01-05T11:00:00Z").await;
    assert_eq!(status, StatusCode::CREATED);
    clock.advance(chrono::Duration::minutes(5));
    // 11:10 is outside alice's range but inside her (lapsed) hold's buffer.
    let next = reserve(&app, "bob", room, "2027-01-05T11:10:00Z", "2027-01-05T12:00:00Z").await;
    assert_eq!(next.0, StatusCode::CREATED, "{}", next.1);
    let (_, old) = send(app.get("alice", &reservation_path(&held["id"]))).await;
    assert_eq!(old["status"], "EXPIRED");
}

#[tokio::test]
async fn a_public_calendar_answers_availability_and_slots_without_a_principal_and_shows_no_owner_or_metadata() {
    let clock = Arc::new(ManualClock::new(at("2027-01-04T00:00:00Z")));
    let app = TestApp::spawn_with(acceptance::Options {
        clock,
        tweak: Box::new(|c| c.public_calendar = true),
        ..Default::default()
    })
    .await;
    let (_, office) = create(&app, &office()).await;
    let office = id(&office);
    let (status, _) = send(app.post(
        "alice",
        "/v1/reservations",
        &json!({"resource_id": office, "start": "2027-01-12T08:00:00Z", "end": "2027-01-12T09:00:00Z",
                "metadata": {"patient": "Jane Roe"}}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let anonymous = reqwest::Client::new();
    let window = "from=2027-01-12T00:00:00Z&to=2027-01-13T00:00:00Z";
    for path in [
        format!("/v1/resources/{office}/availability?{window}"),
        format!("/v1/resources/{office}/slots?{window}&duration=PT1H"),
        format!("/v1/slots?resource_id={office}&{window}&duration=PT1H"),
    ] {
        let answer = anonymous.get(app.url(&path)).send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK, "{path}");
        let text = answer.text().await.unwrap();
        assert!(!text.contains("alice") && !text.contains("Jane Roe") && !text.contains("metadata"), "{path}: {text}");
    }
    // Everything else still asks who is asking.
    let reservations = anonymous.get(app.url("/v1/reservations")).send().await.unwrap();
    assert_eq!(reservations.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn without_a_public_calendar_the_calendar_reads_ask_for_a_principal() {
    let (app, _) = app().await;
    let room = app.resource(1).await;
    let path = format!("/v1/resources/{room}/slots?from=2027-01-12T00:00:00Z&to=2027-01-13T00:00:00Z&duration=PT1H");
    let answer = reqwest::Client::new().get(app.url(&path)).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
}

/// Every day open from `open` to midnight, in Berlin.
fn berlin_from(open: &str) -> Value {
    let day = json!([[open, "24:00"]]);
    let weekly: serde_json::Map<String, Value> =
        ["mon", "tue", "wed", "thu", "fri", "sat", "sun"].iter().map(|d| (d.to_string(), day.clone())).collect();
    json!({"weekly": weekly, "exceptions": []})
}

/// Holds race with changes of the hours, which open the resource at 12:00 Berlin time
/// (odd versions) or all day (even versions). The rules version each booking's insert
/// saw, recorded by a trigger under the lock the insert holds until it commits, is the
/// one in force when it committed; no booking starts before that version's opening.
#[tokio::test]
async fn a_rules_change_racing_with_holds_leaves_no_booking_outside_the_hours_in_force_when_it_committed() {
    let (app, _) = app().await;
    let room = app
        .resource_with(json!({"name": "Desk", "capacity": 1, "time_zone": "Europe/Berlin",
                              "schedule": berlin_from("00:00"), "min_notice_minutes": 1, "slot_minutes": 60}))
        .await;
    let db = app.db().await;
    db.batch_execute(
        "CREATE TABLE seen (reservation uuid PRIMARY KEY, rules_version bigint NOT NULL);
         CREATE FUNCTION seen_insert() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             INSERT INTO seen SELECT NEW.id, r.rules_version FROM resources r WHERE r.id = NEW.resource_id;
             RETURN NULL;
         END $$;
         CREATE TRIGGER seen_insert AFTER INSERT ON reservations FOR EACH ROW EXECUTE FUNCTION seen_insert();",
    )
    .await
    .unwrap();
    // Fills the process's rules of the resource at version 0.
    let first = reserve(&app, "alice", room, "2027-01-05T00:00:00Z", "2027-01-05T01:00:00Z").await;
    assert_eq!(first.0, StatusCode::CREATED, "{}", first.1);
    // Sixteen clients hold the next free hour, one after another, until the changes
    // are done and a while after: holds before, during and after each change. Four
    // more play a process that never reads the rules again: they judge by version 0
    // (open all day) and send the one statement that version.
    let base = at("2027-01-05T01:00:00Z");
    let next = AtomicI64::new(0);
    let changed = AtomicBool::new(false);
    let metadata = shared::domain::Metadata::default();
    let holds = join_all((0..20).map(|c| {
        let (app, next, changed, metadata) = (&app, &next, &changed, &metadata);
        async move {
            let stale = if c >= 16 { Some(app.db().await) } else { None };
            let mut answers = Vec::new();
            let mut after = 0;
            while after < 8 {
                if changed.load(Ordering::SeqCst) {
                    after += 1;
                }
                let start = base + chrono::Duration::hours(next.fetch_add(1, Ordering::SeqCst));
                let end = start + chrono::Duration::hours(1);
                if let Some(db) = &stale {
                    let hold = shared::db::hold::NewHold {
                        id: Uuid::now_v7(),
                        event_id: Uuid::now_v7(),
                        resource_id: room,
                        owner: "stale",
                        start,
                        end,
                        quantity: 1,
                        confirmation: shared::db::hold::Confirmation::Later,
                        metadata,
                        now: at("2027-01-04T00:00:00Z"),
                        rules_version: Some(0),
                        max_holds: 0,
                        event_lease: None,
                    };
                    shared::db::hold::hold(db, &hold).await.unwrap();
                    continue;
                }
                let range = (start.to_rfc3339(), end.to_rfc3339());
                answers.push(app.reserve(&format!("u{c}"), room, (&range.0, &range.1), 1).await);
            }
            answers
        }
    }));
    let changes = async {
        for k in 1..=20 {
            patch_resource(&app, room, json!({"schedule": berlin_from(if k % 2 == 1 { "12:00" } else { "00:00" })}))
                .await;
        }
        changed.store(true, Ordering::SeqCst);
    };
    let (answers, ()) = tokio::join!(holds, changes);
    for (status, body) in answers.iter().flatten() {
        assert!(matches!(*status, StatusCode::CREATED | StatusCode::UNPROCESSABLE_ENTITY), "{status} {body}");
    }
    let version: i64 =
        db.query_one("SELECT rules_version FROM resources WHERE id = $1", &[&room]).await.unwrap().get(0);
    assert_eq!(version, 20);
    let unseen = app
        .count(
            "SELECT count(*) FROM reservations b WHERE b.resource_id = $1 AND NOT EXISTS (SELECT 1 FROM seen s \
                WHERE s.reservation = b.id)",
            &[&room],
        )
        .await;
    assert_eq!(unseen, 0);
    let outside = app
        .count(
            "SELECT count(*) FROM reservations b JOIN seen s ON s.reservation = b.id WHERE b.resource_id = $1 \
             AND extract(hour FROM b.starts_at AT TIME ZONE 'Europe/Berlin') < CASE WHEN s.rules_version % 2 = 1 THEN 12 ELSE 0 END",
            &[&room],
        )
        .await;
    assert_eq!(outside, 0, "a booking starts before the opening of the rules in force when it committed");
}

/// The process judges a hold by the rules it read last; a change since is caught by
/// the version under the lock, and the general path answers by the rules in force,
/// whichever way the change went.
#[tokio::test]
async fn a_hold_judged_by_rules_changed_since_is_decided_by_the_general_path_on_the_rules_in_force() {
    let (app, _) = app().await;
    let room = app
        .resource_with(json!({"name": "Desk", "capacity": 1, "time_zone": "Europe/Berlin",
                              "schedule": berlin_from("09:00")}))
        .await;
    // 10:00 Berlin is 09:00Z in January.
    let known = reserve(&app, "alice", room, "2027-01-05T09:00:00Z", "2027-01-05T10:00:00Z").await;
    assert_eq!(known.0, StatusCode::CREATED, "{}", known.1);
    patch_resource(&app, room, json!({"schedule": berlin_from("12:00")})).await;
    let closed_now = reserve(&app, "bob", room, "2027-01-06T09:00:00Z", "2027-01-06T10:00:00Z").await;
    assert_eq!(refusal(&closed_now), outside("outside_hours"));
    patch_resource(&app, room, json!({"schedule": berlin_from("06:00")})).await;
    let open_now = reserve(&app, "bob", room, "2027-01-07T06:00:00Z", "2027-01-07T07:00:00Z").await;
    assert_eq!(open_now.0, StatusCode::CREATED, "{}", open_now.1);
}

/// The one statement serves a single unit with rules at the version its range was
/// judged by, writes the kept range with the resource's buffers, and tells a taken
/// range from one that only the buffers refuse, which it leaves to the general path.
#[tokio::test]
async fn the_one_statement_hold_serves_a_single_unit_with_rules_only_at_the_version_it_was_judged_by() {
    use shared::db::hold::{self, Confirmation, Hold, NewHold};
    let (app, _) = app().await;
    let room = app
        .resource_with(json!({"name": "Lab", "capacity": 1, "buffer_before_minutes": 10,
                              "buffer_after_minutes": 15, "min_notice_minutes": 1}))
        .await;
    let db = app.db().await;
    let metadata = shared::domain::Metadata::default();
    let hold_at = |start: &str, end: &str, rules_version: Option<i64>| NewHold {
        id: Uuid::now_v7(),
        event_id: Uuid::now_v7(),
        resource_id: room,
        owner: "alice",
        start: at(start),
        end: at(end),
        quantity: 1,
        confirmation: Confirmation::Later,
        metadata: &metadata,
        now: at("2027-01-04T00:00:00Z"),
        rules_version,
        max_holds: 0,
        event_lease: None,
    };
    let range = ("2027-01-05T10:00:00Z", "2027-01-05T11:00:00Z");
    for version in [None, Some(1)] {
        let held = hold::hold(&db, &hold_at(range.0, range.1, version)).await.unwrap();
        assert!(matches!(held, Hold::GeneralPath { rules_version: Some(0) }), "version {version:?}: {held:?}");
    }
    let held = hold::hold(&db, &hold_at(range.0, range.1, Some(0))).await.unwrap();
    assert!(matches!(held, Hold::Reserved { .. }), "{held:?}");
    let kept: String =
        db.query_one("SELECT buffered::text FROM reservations WHERE resource_id = $1", &[&room]).await.unwrap().get(0);
    assert_eq!(kept, r#"["2027-01-05 09:50:00+00","2027-01-05 11:15:00+00")"#);
    let taken = hold::hold(&db, &hold_at("2027-01-05T10:30:00Z", "2027-01-05T11:30:00Z", Some(0))).await.unwrap();
    assert!(matches!(taken, Hold::Unavailable), "{taken:?}");
    let buffer = hold::hold(&db, &hold_at("2027-01-05T11:20:00Z", "2027-01-05T12:00:00Z", Some(0))).await.unwrap();
    assert!(matches!(buffer, Hold::GeneralPath { rules_version: Some(0) }), "{buffer:?}");
}

/// A hold of the one statement on `resource` at `[start, end)`, judged by the rules at
/// `rules_version`, as of the test clock's now.
fn one_statement_hold<'a>(
    resource: Uuid,
    start: &str,
    end: &str,
    rules_version: Option<i64>,
    metadata: &'a shared::domain::Metadata,
) -> shared::db::hold::NewHold<'a> {
    shared::db::hold::NewHold {
        id: Uuid::now_v7(),
        event_id: Uuid::now_v7(),
        resource_id: resource,
        owner: "alice",
        start: at(start),
        end: at(end),
        quantity: 1,
        confirmation: shared::db::hold::Confirmation::Later,
        metadata,
        now: at("2027-01-04T00:00:00Z"),
        rules_version,
        max_holds: 0,
        event_lease: None,
    }
}

/// Capacity N with rules takes the one statement too, at the version its range was
/// judged by: a burst on one slot has exactly as many winners as units, the hours still
/// refuse, and a hold judged by rules changed since goes to the general path, which
/// answers by the rules in force.
#[tokio::test]
async fn a_burst_of_holds_on_three_units_with_rules_has_three_winners_and_the_rules_still_refuse() {
    use shared::db::hold::{self, Hold};
    let (app, _) = app().await;
    let room = app
        .resource_with(json!({"name": "Studio", "capacity": 3, "time_zone": "Europe/Berlin",
                              "schedule": berlin_from("09:00"), "min_notice_minutes": 1, "slot_minutes": 60}))
        .await;
    let db = app.db().await;
    let metadata = shared::domain::Metadata::default();
    for version in [None, Some(1)] {
        let held = hold::hold(
            &db,
            &one_statement_hold(room, "2027-01-06T09:00:00Z", "2027-01-06T10:00:00Z", version, &metadata),
        )
        .await
        .unwrap();
        assert!(matches!(held, Hold::GeneralPath { rules_version: Some(0) }), "version {version:?}: {held:?}");
    }
    let held =
        hold::hold(&db, &one_statement_hold(room, "2027-01-06T09:00:00Z", "2027-01-06T10:00:00Z", Some(0), &metadata))
            .await
            .unwrap();
    assert!(matches!(held, Hold::Reserved { .. }), "{held:?}");
    // 10:00 Berlin is 09:00Z in January.
    let burst = join_all((0..12).map(|c| {
        let app = &app;
        async move { app.reserve(&format!("u{c}"), room, ("2027-01-05T09:00:00Z", "2027-01-05T10:00:00Z"), 1).await }
    }))
    .await;
    let won = burst.iter().filter(|(status, _)| *status == StatusCode::CREATED).count();
    assert_eq!(won, 3, "{burst:?}");
    for answer in burst.iter().filter(|(status, _)| *status != StatusCode::CREATED) {
        assert_eq!(refusal(answer), (StatusCode::CONFLICT, "slot-unavailable".into(), "-".into()));
    }
    let held = app
        .count(
            "SELECT count(*) FROM reservations WHERE resource_id = $1 AND status = 'HELD' \
             AND period && tstzrange('2027-01-05T09:00:00Z', '2027-01-05T10:00:00Z')",
            &[&room],
        )
        .await;
    assert_eq!(held, 3);
    let early = reserve(&app, "bob", room, "2027-01-05T07:00:00Z", "2027-01-05T08:00:00Z").await;
    assert_eq!(refusal(&early), outside("outside_hours"));
    patch_resource(&app, room, json!({"schedule": berlin_from("12:00")})).await;
    let stale =
        hold::hold(&db, &one_statement_hold(room, "2027-01-07T09:00:00Z", "2027-01-07T10:00:00Z", Some(0), &metadata))
            .await
            .unwrap();
    assert!(matches!(stale, Hold::GeneralPath { rules_version: Some(1) }), "{stale:?}");
    let closed_now = reserve(&app, "bob", room, "2027-01-07T09:00:00Z", "2027-01-07T10:00:00Z").await;
    assert_eq!(refusal(&closed_now), outside("outside_hours"));
    let open = reserve(&app, "bob", room, "2027-01-07T11:00:00Z", "2027-01-07T12:00:00Z").await;
    assert_eq!(open.0, StatusCode::CREATED, "{}", open.1);
}

/// On capacity N the one statement judges the buffers as the general path does: the
/// peak of the other bookings' kept ranges over the new one's. A range taken outright
/// is refused at once (409, before the buffers); a range only the buffers refuse is
/// left to the general path, which answers `rule: buffer`; the API answers each the
/// same whichever path decides.
#[tokio::test]
async fn on_two_units_with_buffers_the_one_statement_counts_the_kept_ranges_and_leaves_their_refusal_to_the_general_path()
 {
    use shared::db::hold::{self, Hold};
    let (app, _) = app().await;
    let room = app
        .resource_with(json!({"name": "Lab", "capacity": 2, "buffer_before_minutes": 10, "buffer_after_minutes": 15}))
        .await;
    let db = app.db().await;
    let metadata = shared::domain::Metadata::default();
    let one = |start: &'static str, end: &'static str| {
        let (db, metadata) = (&db, &metadata);
        async move { hold::hold(db, &one_statement_hold(room, start, end, Some(0), metadata)).await.unwrap() }
    };
    let first = one("2027-01-05T10:00:00Z", "2027-01-05T11:00:00Z").await;
    assert!(matches!(first, Hold::Reserved { .. }), "{first:?}");
    let kept: String =
        db.query_one("SELECT buffered::text FROM reservations WHERE resource_id = $1", &[&room]).await.unwrap().get(0);
    assert_eq!(kept, r#"["2027-01-05 09:50:00+00","2027-01-05 11:15:00+00")"#);
    // Its kept range meets the first's: a load of one beside a unit left.
    let beside = one("2027-01-05T11:20:00Z", "2027-01-05T12:00:00Z").await;
    assert!(matches!(beside, Hold::Reserved { .. }), "{beside:?}");
    // The period fits (one booking on it), the kept ranges do not (two over 11:10-11:15).
    let buffer = one("2027-01-05T11:20:00Z", "2027-01-05T12:00:00Z").await;
    assert!(matches!(buffer, Hold::GeneralPath { rules_version: Some(0) }), "{buffer:?}");
    let by_api = reserve(&app, "bob", room, "2027-01-05T11:20:00Z", "2027-01-05T12:00:00Z").await;
    assert_eq!(refusal(&by_api), outside("buffer"));
    // The first's own range again: its period fits beside the first, its kept range
    // meets both.
    let again = one("2027-01-05T10:00:00Z", "2027-01-05T11:00:00Z").await;
    assert!(matches!(again, Hold::GeneralPath { rules_version: Some(0) }), "{again:?}");
    let again_by_api = reserve(&app, "bob", room, "2027-01-05T10:00:00Z", "2027-01-05T11:00:00Z").await;
    assert_eq!(refusal(&again_by_api), outside("buffer"));
    for _ in 0..2 {
        let afternoon = one("2027-01-05T14:00:00Z", "2027-01-05T15:00:00Z").await;
        assert!(matches!(afternoon, Hold::Reserved { .. }), "{afternoon:?}");
    }
    // Taken outright, and the buffers in the way too: the taken range first.
    let taken = one("2027-01-05T14:30:00Z", "2027-01-05T15:30:00Z").await;
    assert!(matches!(taken, Hold::Unavailable), "{taken:?}");
    // The general path (sent there by a version that does not match) answers it 409 too.
    let stale =
        hold::hold(&db, &one_statement_hold(room, "2027-01-05T14:30:00Z", "2027-01-05T15:30:00Z", Some(7), &metadata))
            .await
            .unwrap();
    assert!(matches!(stale, Hold::GeneralPath { rules_version: Some(0) }), "{stale:?}");
    let taken_by_api = reserve(&app, "bob", room, "2027-01-05T14:30:00Z", "2027-01-05T15:30:00Z").await;
    assert_eq!(refusal(&taken_by_api), (StatusCode::CONFLICT, "slot-unavailable".into(), "-".into()));
    let booked =
        app.count("SELECT count(*) FROM reservations WHERE resource_id = $1 AND status = 'HELD'", &[&room]).await;
    assert_eq!(booked, 4);
}

/// Buffers cleared leave the kept ranges of the bookings made with them: on capacity N
/// with rules still in force, the one statement counts those too, as the general path
/// does, though the new booking keeps no buffer of its own.
#[tokio::test]
async fn on_two_units_the_one_statement_counts_the_kept_ranges_left_by_buffers_since_cleared() {
    use shared::db::hold::{self, Hold};
    let (app, _) = app().await;
    let room = app
        .resource_with(json!({"name": "Lab", "capacity": 2, "buffer_before_minutes": 30,
                              "buffer_after_minutes": 30, "min_notice_minutes": 1}))
        .await;
    let db = app.db().await;
    let metadata = shared::domain::Metadata::default();
    for _ in 0..2 {
        let held = hold::hold(
            &db,
            &one_statement_hold(room, "2027-01-05T10:00:00Z", "2027-01-05T11:00:00Z", Some(0), &metadata),
        )
        .await
        .unwrap();
        assert!(matches!(held, Hold::Reserved { .. }), "{held:?}");
    }
    patch_resource(&app, room, json!({"buffer_before_minutes": 0, "buffer_after_minutes": 0})).await;
    let near =
        hold::hold(&db, &one_statement_hold(room, "2027-01-05T11:10:00Z", "2027-01-05T12:00:00Z", Some(1), &metadata))
            .await
            .unwrap();
    assert!(matches!(near, Hold::GeneralPath { rules_version: Some(1) }), "{near:?}");
    let by_api = reserve(&app, "bob", room, "2027-01-05T11:10:00Z", "2027-01-05T12:00:00Z").await;
    assert_eq!(refusal(&by_api), outside("buffer"));
    let clear =
        hold::hold(&db, &one_statement_hold(room, "2027-01-05T11:30:00Z", "2027-01-05T12:00:00Z", Some(1), &metadata))
            .await
            .unwrap();
    assert!(matches!(clear, Hold::Reserved { .. }), "{clear:?}");
}
