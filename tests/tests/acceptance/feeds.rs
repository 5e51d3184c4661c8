//! Calendar feeds: made, rotated and revoked through the API, read without a principal
//! by their URL, and parsed by a reference implementation of RFC 5545 (the `icalendar`
//! package from PyPI, which scripts/test installs): a stable UID, SEQUENCE rising on a
//! reschedule and a cancel, cancelled bookings kept as STATUS:CANCELLED, ETag and 304,
//! and the same 404 for every token that is not a live feed's.

use acceptance::{TestApp, hours, python_json, reservation_path, send, slug};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Parses iCalendar text with the `icalendar` package: the calendar's properties, its
/// events, and every error the parser noted.
fn parse_with_reference(ics: &[u8]) -> Value {
    const SCRIPT: &str = r#"
import json, sys
from icalendar import Calendar
cal = Calendar.from_ical(sys.stdin.buffer.read())
text = lambda c, name: str(c[name]) if name in c else None
out = {
    "name": text(cal, "X-WR-CALNAME"),
    "time_zone": text(cal, "X-WR-TIMEZONE"),
    "version": text(cal, "VERSION"),
    "errors": [str(e) for c in cal.walk() for e in c.errors],
    "events": [],
}
for ev in cal.walk("VEVENT"):
    out["events"].append({
        "uid": text(ev, "UID"),
        "sequence": int(ev["SEQUENCE"]),
        "status": text(ev, "STATUS"),
        "start": ev.decoded("DTSTART").isoformat(),
        "end": ev.decoded("DTEND").isoformat(),
        "stamp": ev.decoded("DTSTAMP").isoformat(),
        "summary": text(ev, "SUMMARY"),
        "location": text(ev, "LOCATION"),
        "description": text(ev, "DESCRIPTION"),
        "time_zone": text(ev, "X-RESERVATIONS-TIME-ZONE"),
    })
print(json.dumps(out))
"#;
    python_json(SCRIPT, ics, "pip install icalendar")
}

/// A feed read as a calendar application reads it: no principal, maybe a tag.
async fn read(app: &TestApp, url: &str, tag: Option<&str>) -> reqwest::Response {
    let mut req = app.http.get(app.url(url));
    if let Some(tag) = tag {
        req = req.header("if-none-match", tag);
    }
    req.send().await.unwrap()
}

/// The feed as the reference parser reads it, with its ETag; asserts what every 200
/// answer carries, and that every line ends in CRLF within 75 octets.
async fn parsed(app: &TestApp, url: &str) -> (Value, String) {
    let resp = read(app, url, None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/calendar; charset=utf-8");
    assert_eq!(resp.headers()["cache-control"], "private, no-cache");
    let tag = resp.headers()["etag"].to_str().unwrap().to_string();
    let body = resp.bytes().await.unwrap();
    let text = std::str::from_utf8(&body).unwrap();
    assert!(text.starts_with("BEGIN:VCALENDAR\r\n") && text.ends_with("END:VCALENDAR\r\n"));
    for line in text.strip_suffix("\r\n").unwrap().split("\r\n") {
        assert!(line.len() <= 75 && !line.contains('\n') && !line.contains('\r'), "{line:?}");
    }
    let calendar = parse_with_reference(&body);
    assert_eq!(calendar["errors"], json!([]), "{text}");
    assert_eq!(calendar["version"], "2.0");
    (calendar, tag)
}

async fn make_feed(app: &TestApp, who: &str, body: Value) -> Value {
    let (status, feed) = send(app.post(who, "/v1/feeds", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "{feed}");
    feed
}

fn event<'a>(calendar: &'a Value, id: &Value) -> &'a Value {
    let events = calendar["events"].as_array().unwrap();
    events.iter().find(|e| e["uid"] == *id).unwrap_or_else(|| panic!("{id} is in the feed: {calendar:#}"))
}

fn utc(rfc3339: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(rfc3339).unwrap().to_utc()
}

#[tokio::test]
async fn a_feed_of_ones_own_bookings_shows_a_reschedule_and_a_cancel_under_one_uid_with_a_rising_sequence() {
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Salle, \"Rivoli\"; 2e", "time_zone": "Europe/Paris"})).await;
    let booking = app.hold("alice", room, 10, 11).await;
    assert_eq!(app.confirm("alice", &booking["id"]).await.0, StatusCode::OK);
    let others = app.hold("bob", room, 12, 13).await;
    let feed = make_feed(&app, "alice", json!({})).await;
    let url = feed["url"].as_str().unwrap().to_string();
    assert_eq!((feed["owner"].as_str(), &feed["resource_id"]), (Some("alice"), &Value::Null));

    let (confirmed, tag) = parsed(&app, &url).await;
    assert_eq!(confirmed["name"], "Bookings of alice");
    assert_eq!(confirmed["events"].as_array().unwrap().len(), 1, "bob's booking is not in alice's feed");
    assert!(!confirmed.to_string().contains(others["id"].as_str().unwrap()));
    let first = event(&confirmed, &booking["id"]);
    assert_eq!(first["status"], "CONFIRMED");
    assert_eq!(utc(first["start"].as_str().unwrap()), utc(&hours(10, 11).0));
    assert_eq!(first["summary"], "Salle, \"Rivoli\"; 2e", "text escaped and read back whole");
    assert_eq!(first["time_zone"], "Europe/Paris");
    assert!(first["description"].as_str().unwrap().ends_with("(Europe/Paris)"), "{first}");

    // Unchanged: 304 with the same tag, and no body.
    let again = read(&app, &url, Some(&tag)).await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["etag"].to_str().unwrap(), tag);
    assert!(again.bytes().await.unwrap().is_empty());

    let (s, e) = hours(14, 15);
    let (status, moved) =
        send(app.patch("alice", &reservation_path(&booking["id"]), &json!({"start": s, "end": e}))).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    assert_eq!(read(&app, &url, Some(&tag)).await.status(), StatusCode::OK, "a move changes the tag");
    let (rescheduled, moved_tag) = parsed(&app, &url).await;
    let second = event(&rescheduled, &booking["id"]);
    assert_eq!(second["status"], "CONFIRMED");
    assert_eq!(utc(second["start"].as_str().unwrap()), utc(&s));
    assert_eq!(utc(second["end"].as_str().unwrap()), utc(&e));
    assert!(second["sequence"].as_i64() > first["sequence"].as_i64(), "{first} then {second}");

    let (status, _) = send(app.delete("alice", &reservation_path(&booking["id"]))).await;
    assert_eq!(status, StatusCode::OK);
    let (cancelled, cancelled_tag) = parsed(&app, &url).await;
    assert_ne!(cancelled_tag, moved_tag);
    let third = event(&cancelled, &booking["id"]);
    assert_eq!(third["status"], "CANCELLED", "kept in the feed as cancelled");
    assert!(third["sequence"].as_i64() > second["sequence"].as_i64(), "{second} then {third}");
    assert_eq!(utc(third["start"].as_str().unwrap()), utc(&s));
}

#[tokio::test]
async fn a_feed_of_a_resource_is_for_admins_and_shows_everyones_bookings_in_the_resources_zone() {
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Room 101", "capacity": 2, "time_zone": "America/New_York"})).await;
    let alices = app.hold("alice", room, 10, 11).await;
    let (status, bobs) = app.reserve("bob", room, (&hours(10, 11).0, &hours(10, 11).1), 1).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, problem) = send(app.post("alice", "/v1/feeds", &json!({"resource_id": room}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::FORBIDDEN, "forbidden"));
    let (status, problem) = send(app.post("admin", "/v1/feeds", &json!({"resource_id": uuid::Uuid::now_v7()}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::BAD_REQUEST, "validation-error"));

    let feed = make_feed(&app, "admin", json!({"resource_id": room})).await;
    let (calendar, _) = parsed(&app, feed["url"].as_str().unwrap()).await;

    assert_eq!(
        (calendar["name"].as_str(), calendar["time_zone"].as_str()),
        (Some("Room 101"), Some("America/New_York"))
    );
    let (a, b) = (event(&calendar, &alices["id"]), event(&calendar, &bobs["id"]));
    assert_eq!((a["status"].as_str(), a["summary"].as_str()), (Some("TENTATIVE"), Some("alice")));
    assert_eq!((b["location"].as_str(), b["summary"].as_str()), (Some("Room 101"), Some("bob")));
}

#[tokio::test]
async fn bad_rotated_and_revoked_tokens_are_one_and_the_same_404_and_only_a_hash_is_stored() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    app.hold("alice", room, 10, 11).await;
    let feed = make_feed(&app, "alice", json!({})).await;
    let (id, url) = (feed["id"].as_str().unwrap(), feed["url"].as_str().unwrap());
    let token = url.strip_prefix("/v1/feeds/").and_then(|t| t.strip_suffix(".ics")).unwrap();
    assert_eq!(token.len(), 43, "256 bits in unpadded base64url: {url}");
    let stored = app
        .count("SELECT count(*) FROM calendar_feeds WHERE token_hash = sha256(convert_to($1, 'UTF8'))", &[&token])
        .await;
    assert_eq!(stored, 1, "the token's SHA-256 is stored");
    let plain = app
        .count(
            "SELECT count(*) FROM calendar_feeds WHERE position(convert_to($1, 'UTF8') IN token_hash) > 0",
            &[&token],
        )
        .await;
    assert_eq!(plain, 0, "the token itself is not");

    let not_found = async |path: &str| {
        let resp = read(&app, path, None).await;
        let status = resp.status();
        let mut body: Value = resp.json().await.unwrap();
        body.as_object_mut().unwrap().remove("instance");
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        body
    };
    let unknown = not_found(&format!("/v1/feeds/{}.ics", "A".repeat(43))).await;
    assert_eq!(slug(&unknown), "feed-not-found");
    for bad in [
        format!("/v1/feeds/{token}"),
        format!("/v1/feeds/{token}x.ics"),
        "/v1/feeds/..%2F.ics".into(),
        format!("/v1/feeds/{id}"),
    ] {
        assert_eq!(not_found(&bad).await, unknown, "{bad}");
    }

    // Only the owner (or an admin) rotates or revokes; to anyone else the feed is not there.
    let rotate = format!("/v1/feeds/{id}/rotate");
    let (status, problem) = send(app.post("bob", &rotate, &json!({}))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "feed-not-found"));
    let (status, problem) = send(app.delete("bob", &format!("/v1/feeds/{id}"))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "feed-not-found"));
    assert_eq!(read(&app, url, None).await.status(), StatusCode::OK);

    let (status, rotated) = send(app.post("alice", &rotate, &json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let new_url = rotated["url"].as_str().unwrap();
    assert_eq!(rotated["id"], feed["id"]);
    assert_ne!(new_url, url);
    assert_eq!(not_found(url).await, unknown, "the old URL is gone at once");
    assert_eq!(read(&app, new_url, None).await.status(), StatusCode::OK);

    let (status, _) = send(app.delete("admin", &format!("/v1/feeds/{id}"))).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "an admin revokes anyone's feed");
    assert_eq!(not_found(new_url).await, unknown, "revoked");
    let (status, problem) = send(app.delete("alice", &format!("/v1/feeds/{id}"))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "feed-not-found"));
}
