//! The lists: `GET /v1/reservations`, `GET /v1/resources`,
//! `GET /v1/resources/{id}/waitlist` and `GET /v1/waitlist`. Keyset pages that give every item once, in order,
//! whatever is written between them; filters; who sees what; cursors that cannot be
//! forged or carried to another list; and, on a million reservations, a plan without a
//! sequential scan for every list a client asks for.

use acceptance::{TestApp, bulk, fresh_database, hours, send, slug};
use chrono::{Duration, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::clock::ManualClock;
use shared::db::reservation_lists::{self, ListFilter};
use shared::domain::Status;
use std::sync::Arc;
use uuid::Uuid;

/// One page: its items and its next cursor.
async fn page(app: &TestApp, who: &str, path: &str) -> (Vec<Value>, Option<String>) {
    let (status, body) = send(app.get(who, path)).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    let items = body["items"].as_array().unwrap_or_else(|| panic!("{path}: no items in {body}")).clone();
    (items, body["next_cursor"].as_str().map(String::from))
}

/// Every page of a list from the first, following the cursors: the page sizes and the
/// items' ids in the order given.
async fn walk(app: &TestApp, who: &str, path: &str) -> (Vec<usize>, Vec<String>) {
    let (mut sizes, mut ids, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
    loop {
        let url = match &cursor {
            None => path.to_string(),
            Some(c) => format!("{path}{}cursor={c}", if path.contains('?') { '&' } else { '?' }),
        };
        let (items, next) = page(app, who, &url).await;
        sizes.push(items.len());
        ids.extend(items.iter().map(|i| i["id"].as_str().unwrap().to_string()));
        match next {
            Some(next) => cursor = Some(next),
            None => return (sizes, ids),
        }
        assert!(sizes.len() < 100, "the cursors of {path} never end");
    }
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// A list request refused as 400: its slug and the fields its errors name.
async fn refused(app: &TestApp, who: &str, path: &str) -> (String, Vec<String>) {
    let (status, body) = send(app.get(who, path)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
    let fields = body["errors"].as_array().into_iter().flatten().map(|e| e["field"].as_str().unwrap().into()).collect();
    (slug(&body).to_string(), fields)
}

#[tokio::test]
async fn paging_through_seven_reservations_three_at_a_time_gives_each_once_newest_first() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let hall = app.resource(10).await;
    let mut made = Vec::new();
    for h in 0..7 {
        made.push(id(&app.hold("alice", hall, 8 + h, 9 + h).await));
        clock.advance(Duration::seconds(1));
    }
    made.reverse();

    let (sizes, ids) = walk(&app, "alice", "/v1/reservations?limit=3").await;
    assert_eq!(sizes, [3, 3, 1]);
    assert_eq!(ids, made, "every reservation once, newest first");

    // An item is the reservation document itself.
    let (items, _) = page(&app, "alice", "/v1/reservations?limit=1").await;
    let (_, one) = send(app.get("alice", &format!("/v1/reservations/{}", made[0]))).await;
    assert_eq!(items[0], one);
}

#[tokio::test]
async fn reservations_written_in_one_instant_are_paged_by_id_without_a_gap_or_a_repeat() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock).await;
    let hall = app.resource(10).await;
    let mut made = Vec::new();
    for h in 0..5 {
        made.push(id(&app.hold("alice", hall, 8 + h, 9 + h).await));
    }
    made.sort_unstable_by(|a, b| b.cmp(a));
    let (sizes, ids) = walk(&app, "alice", "/v1/reservations?limit=2").await;
    assert_eq!(sizes, [2, 2, 1]);
    assert_eq!(ids, made);
}

#[tokio::test]
async fn reservations_written_between_pages_change_nothing_of_the_later_pages() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let hall = app.resource(10).await;
    for h in 0..7 {
        app.hold("alice", hall, 8 + h, 9 + h).await;
        clock.advance(Duration::seconds(1));
    }
    let (_, before) = walk(&app, "alice", "/v1/reservations").await;

    let (first, cursor) = page(&app, "alice", "/v1/reservations?limit=3").await;
    assert_eq!(first.iter().map(id).collect::<Vec<_>>(), before[..3]);
    let mut newer = Vec::new();
    for h in 0..3 {
        newer.push(id(&app.hold("alice", hall, 16 + h, 17 + h).await));
        clock.advance(Duration::seconds(1));
    }
    let (second, cursor) = page(&app, "alice", &format!("/v1/reservations?limit=3&cursor={}", cursor.unwrap())).await;
    assert_eq!(second.iter().map(id).collect::<Vec<_>>(), before[3..6]);
    newer.push(id(&app.hold("alice", hall, 20, 21).await));
    let (third, end) = page(&app, "alice", &format!("/v1/reservations?limit=3&cursor={}", cursor.unwrap())).await;
    assert_eq!(third.iter().map(id).collect::<Vec<_>>(), before[6..]);
    assert_eq!(end, None);

    // A list started afresh shows the new ones first.
    let (_, now) = walk(&app, "alice", "/v1/reservations").await;
    newer.reverse();
    assert_eq!(now[..4], newer[..]);
    assert_eq!(now[4..], before[..]);
}

#[tokio::test]
async fn each_filter_keeps_only_what_it_names() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let (a, b) = (app.resource(10).await, app.resource(10).await);
    let quick = app.resource_with(json!({"name": "Quick", "capacity": 10, "hold_ttl_seconds": 60})).await;
    let held = id(&app.hold("alice", a, 8, 9).await);
    let confirmed = app.hold("alice", a, 10, 11).await;
    app.confirm("alice", &confirmed["id"]).await;
    let confirmed = id(&confirmed);
    let released = id(&app.hold("alice", b, 12, 13).await);
    send(app.delete("alice", &format!("/v1/reservations/{released}"))).await;
    let on_b = id(&app.hold("alice", b, 14, 15).await);
    let lapsed = id(&app.hold("alice", quick, 16, 17).await);
    clock.advance(Duration::seconds(120));

    let set = |ids: Vec<String>| {
        let mut ids = ids;
        ids.sort();
        ids
    };
    let listed = |query: String| {
        let app = &app;
        async move { set(walk(app, "alice", &format!("/v1/reservations?{query}")).await.1) }
    };
    assert_eq!(listed(format!("resource_id={a}")).await, set(vec![held.clone(), confirmed.clone()]));
    assert_eq!(listed(format!("resource_id={b}")).await, set(vec![released.clone(), on_b.clone()]));
    assert_eq!(listed("status=CONFIRMED".into()).await, std::slice::from_ref(&confirmed));
    assert_eq!(
        listed("status=HELD&status=CONFIRMED".into()).await,
        set(vec![held.clone(), confirmed.clone(), on_b.clone()]),
        "a hold past its expiry is no longer HELD"
    );
    assert_eq!(listed("status=EXPIRED".into()).await, std::slice::from_ref(&lapsed), "it is EXPIRED, as it reads");
    let (items, _) = page(&app, "alice", "/v1/reservations?status=EXPIRED").await;
    assert_eq!(items[0]["status"], "EXPIRED");
    assert_eq!(listed("status=RELEASED".into()).await, std::slice::from_ref(&released));
    assert_eq!(listed(format!("status=HELD&resource_id={b}")).await, std::slice::from_ref(&on_b));

    // Reservations that overlap [from, to), half-open at both ends.
    let (from, to) = hours(9, 13);
    assert_eq!(listed(format!("from={from}&to={to}")).await, set(vec![confirmed.clone(), released.clone()]));
    assert_eq!(listed(format!("from={from}")).await, set(vec![confirmed, released.clone(), on_b, lapsed]));
    assert_eq!(listed(format!("to={from}")).await, [held]);
    assert_eq!(listed(format!("from={from}&to={to}&resource_id={b}")).await, [released]);

    let (slug, fields) = refused(&app, "alice", &format!("/v1/reservations?from={to}&to={from}")).await;
    assert_eq!((slug.as_str(), fields.as_slice()), ("validation-error", ["to".to_string()].as_slice()));
}

#[tokio::test]
async fn a_user_sees_only_their_own_reservations_and_an_admin_sees_everyones() {
    let app = TestApp::spawn().await;
    let hall = app.resource(10).await;
    let alice = vec![id(&app.hold("alice", hall, 8, 9).await), id(&app.hold("alice", hall, 9, 10).await)];
    let bob = vec![id(&app.hold("bob", hall, 10, 11).await)];
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(walk(&app, "alice", "/v1/reservations").await.1), sorted(alice.clone()));
    assert_eq!(walk(&app, "bob", "/v1/reservations").await.1, bob);
    assert!(walk(&app, "carol", "/v1/reservations").await.1.is_empty());
    let everyone = sorted(alice.iter().chain(&bob).cloned().collect());
    assert_eq!(sorted(walk(&app, "admin", "/v1/reservations").await.1), everyone);
    assert_eq!(walk(&app, "admin", "/v1/reservations?owner=bob").await.1, bob);
    assert_eq!(sorted(walk(&app, "admin", "/v1/reservations?owner=alice").await.1), sorted(alice.clone()));

    // Naming another owner is for admins; naming oneself changes nothing.
    let (status, body) = send(app.get("alice", "/v1/reservations?owner=bob")).await;
    assert_eq!((status, slug(&body)), (StatusCode::FORBIDDEN, "forbidden"));
    assert_eq!(sorted(walk(&app, "alice", "/v1/reservations?owner=alice").await.1), sorted(alice));
    let (status, _) = send(app.http.get(app.url("/v1/reservations"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_cursor_that_was_altered_or_comes_from_another_list_is_an_invalid_cursor() {
    let app = TestApp::spawn().await;
    let hall = app.resource(10).await;
    for h in 0..3 {
        app.hold("alice", hall, 8 + h, 9 + h).await;
        app.hold("bob", hall, 8 + h, 9 + h).await;
    }
    app.resource(1).await;
    let (_, cursor) = page(&app, "alice", "/v1/reservations?limit=1").await;
    let cursor = cursor.unwrap();
    // It works where it came from.
    assert_eq!(page(&app, "alice", &format!("/v1/reservations?limit=1&cursor={cursor}")).await.0.len(), 1);

    let mut tampered = cursor.clone().into_bytes();
    let middle = tampered.len() / 2;
    tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let (_, held_cursor) = page(&app, "alice", "/v1/reservations?limit=1&status=HELD").await;
    let (_, resources_cursor) = page(&app, "alice", "/v1/resources?limit=1").await;
    let (_, admin_cursor) = page(&app, "admin", "/v1/reservations?limit=1").await;
    for (who, path) in [
        ("alice", format!("/v1/reservations?cursor={tampered}")),
        ("alice", format!("/v1/reservations?cursor={cursor}x")),
        ("alice", "/v1/reservations?cursor=garbage".to_string()),
        ("alice", "/v1/reservations?cursor=".to_string()),
        // Another filter set, another principal's list, another list.
        ("alice", format!("/v1/reservations?cursor={}", held_cursor.unwrap())),
        ("alice", format!("/v1/reservations?cursor={cursor}&resource_id={hall}")),
        ("bob", format!("/v1/reservations?cursor={cursor}")),
        ("admin", format!("/v1/reservations?cursor={cursor}")),
        ("alice", format!("/v1/reservations?cursor={}", admin_cursor.as_ref().unwrap())),
        ("alice", format!("/v1/reservations?cursor={}", resources_cursor.as_ref().unwrap())),
        ("alice", format!("/v1/resources?cursor={cursor}")),
        ("alice", format!("/v1/resources?include_archived=true&cursor={}", resources_cursor.as_ref().unwrap())),
    ] {
        let (slug, fields) = refused(&app, who, &path).await;
        assert_eq!(slug, "invalid-cursor", "{who} {path}");
        assert!(fields.is_empty());
    }
}

#[tokio::test]
async fn limits_run_from_1_to_100_and_default_to_50_and_every_bad_parameter_is_named() {
    let app = TestApp::spawn().await;
    let hall = app.resource(100).await;
    let (s, e) = hours(8, 9);
    for _ in 0..51 {
        assert_eq!(app.reserve("alice", hall, (&s, &e), 1).await.0, StatusCode::CREATED);
    }
    let (items, next) = page(&app, "alice", "/v1/reservations").await;
    assert_eq!((items.len(), next.is_some()), (50, true));
    let (items, next) = page(&app, "alice", "/v1/reservations?limit=100").await;
    assert_eq!((items.len(), next), (51, None));
    assert_eq!(page(&app, "alice", "/v1/reservations?limit=1").await.0.len(), 1);

    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=-1", "limit"),
        ("limit=ten", "limit"),
        ("limit=1&limit=2", "limit"),
        ("status=LOST", "status"),
        ("status=held", "status"),
        ("from=yesterday", "from"),
        ("to=2027-03-15T10:00:00", "to"),
        ("resource_id=42", "resource_id"),
        ("colour=red", "colour"),
    ] {
        let (slug, fields) = refused(&app, "alice", &format!("/v1/reservations?{query}")).await;
        assert_eq!((slug.as_str(), fields.as_slice()), ("validation-error", [field.to_string()].as_slice()), "{query}");
    }
    let (_, fields) = refused(&app, "alice", "/v1/resources?limit=0&include_archived=maybe").await;
    assert_eq!(fields, ["include_archived", "limit"]);
    let (_, fields) = refused(&app, "admin", &format!("/v1/resources/{hall}/waitlist?limit=101")).await;
    assert_eq!(fields, ["limit"]);
}

#[tokio::test]
async fn the_resources_list_is_everyones_newest_first_and_hides_archived_ones_unless_asked() {
    let app = TestApp::spawn().await;
    let mut made = Vec::new();
    for name in ["One", "Two", "Three", "Four"] {
        made.push(app.resource_with(json!({"name": name})).await.to_string());
    }
    let archived = made[1].clone();
    app.db()
        .await
        .execute("UPDATE resources SET archived_at = now() WHERE id = $1", &[&archived.parse::<Uuid>().unwrap()])
        .await
        .unwrap();
    made.reverse();
    let live: Vec<String> = made.iter().filter(|id| **id != archived).cloned().collect();

    let (sizes, ids) = walk(&app, "alice", "/v1/resources?limit=2").await;
    assert_eq!((sizes, ids), (vec![2, 1], live.clone()));
    assert_eq!(walk(&app, "alice", "/v1/resources?include_archived=false").await.1, live);
    let (sizes, ids) = walk(&app, "bob", "/v1/resources?include_archived=true&limit=2").await;
    assert_eq!((sizes, ids), (vec![2, 2], made));
    let (items, _) = page(&app, "alice", "/v1/resources?limit=1").await;
    let (_, one) = send(app.get("alice", &format!("/v1/resources/{}", live[0]))).await;
    assert_eq!(items[0], one, "an item is the resource document itself");
}

#[tokio::test]
async fn the_waitlist_list_is_for_admins_and_in_queue_order_with_positions() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let holder = app.hold("zed", room, 10, 11).await;
    let (s, e) = hours(10, 11);
    let mut entries = Vec::new();
    for who in ["bob", "carol", "dave", "erin", "frank"] {
        let (status, entry) = app.join_waitlist_with(who, room, &json!({"start": s, "end": e})).await;
        assert_eq!(status, StatusCode::CREATED, "{entry}");
        entries.push(entry);
    }
    // Carol leaves; the slot frees and goes to bob, the first in line.
    send(app.delete("carol", &format!("/v1/waitlist/{}", id(&entries[1])))).await;
    send(app.delete("zed", &format!("/v1/reservations/{}", id(&holder)))).await;

    let path = format!("/v1/resources/{room}/waitlist");
    for who in ["alice", "bob"] {
        let (status, body) = send(app.get(who, &path)).await;
        assert_eq!((status, slug(&body)), (StatusCode::FORBIDDEN, "forbidden"), "{who}");
    }
    let (status, _) = send(app.get("alice", "/v1/resources/not-a-uuid/waitlist")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a non-admin learns nothing of the id");
    let (status, body) = send(app.get("admin", &format!("/v1/resources/{}/waitlist", Uuid::new_v4()))).await;
    assert_eq!((status, slug(&body)), (StatusCode::NOT_FOUND, "resource-not-found"));

    let (sizes, ids) = walk(&app, "admin", &format!("{path}?limit=2")).await;
    assert_eq!(sizes, [2, 2, 1]);
    assert_eq!(ids, entries.iter().map(id).collect::<Vec<_>>(), "queue order");
    let mut seen = Vec::new();
    let (first, cursor) = page(&app, "admin", &format!("{path}?limit=2")).await;
    let (second, _) = page(&app, "admin", &format!("{path}?limit=2&cursor={}", cursor.unwrap())).await;
    for item in first.iter().chain(&second) {
        seen.push((item["owner"].as_str().unwrap().to_string(), item["status"].clone(), item["position"].clone()));
        let (_, one) = send(app.get("admin", &format!("/v1/waitlist/{}", id(item)))).await;
        assert_eq!(*item, one, "an item is the entry document itself");
    }
    assert_eq!(
        seen,
        [
            ("bob".to_string(), json!("OFFERED"), Value::Null),
            ("carol".to_string(), json!("CANCELLED"), Value::Null),
            ("dave".to_string(), json!("WAITING"), json!(1)),
            ("erin".to_string(), json!("WAITING"), json!(2)),
        ]
    );
    // Positions go on across pages.
    let (_, cursor) = page(&app, "admin", &format!("{path}?limit=4")).await;
    let (rest, end) = page(&app, "admin", &format!("{path}?limit=4&cursor={}", cursor.unwrap())).await;
    assert_eq!((rest[0]["owner"].as_str(), rest[0]["position"].as_i64(), end), (Some("frank"), Some(3), None));
}

#[tokio::test]
async fn each_principal_lists_their_own_waitlist_entries_newest_first_on_every_resource() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let (room, hall) = (app.resource(1).await, app.resource(1).await);
    let mut joined = Vec::new();
    for (resource, from) in [(room, 10), (hall, 10), (room, 12), (hall, 14)] {
        app.hold("zed", resource, from, from + 1).await;
        let (s, e) = hours(from, from + 1);
        let path = format!("/v1/resources/{resource}/waitlist");
        let (status, entry) = send(app.post("bob", &path, &json!({"start": s, "end": e}))).await;
        assert_eq!(status, StatusCode::CREATED, "{entry}");
        joined.push(id(&entry));
        clock.advance(Duration::seconds(1));
    }
    let (s, e) = hours(10, 11);
    app.join_waitlist_with("carol", room, &json!({"start": s, "end": e})).await;
    send(app.delete("bob", &format!("/v1/waitlist/{}", joined[2]))).await;

    let newest_first: Vec<String> = joined.iter().rev().cloned().collect();
    let (sizes, ids) = walk(&app, "bob", "/v1/waitlist?limit=3").await;
    assert_eq!((sizes, &ids), (vec![3, 1], &newest_first), "every status, newest first");
    let (items, _) = page(&app, "bob", "/v1/waitlist").await;
    for item in &items {
        let (_, one) = send(app.get("bob", &format!("/v1/waitlist/{}", id(item)))).await;
        assert_eq!(*item, one, "an item is the entry document itself");
    }
    let statuses: Vec<&str> = items.iter().map(|i| i["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["WAITING", "CANCELLED", "WAITING", "WAITING"]);
    let (_, ids) = walk(&app, "bob", &format!("/v1/waitlist?resource_id={hall}")).await;
    assert_eq!(ids, [joined[3].clone(), joined[1].clone()], "one resource's");

    let (carols, _) = page(&app, "carol", "/v1/waitlist").await;
    assert_eq!(carols.len(), 1, "carol sees hers only");
    assert_eq!(carols[0]["position"], json!(2), "behind bob on the room at ten");
    let (status, body) = send(app.get("carol", "/v1/waitlist?owner=bob")).await;
    assert_eq!((status, slug(&body)), (StatusCode::FORBIDDEN, "forbidden"));
    let (_, ids) = walk(&app, "admin", "/v1/waitlist?owner=bob").await;
    assert_eq!(ids, newest_first, "an admin names the owner");
    let (mine, _) = page(&app, "admin", "/v1/waitlist").await;
    assert!(mine.is_empty(), "an admin's own list is their own");

    // A cursor of bob's list is not one of carol's.
    let (_, cursor) = page(&app, "bob", "/v1/waitlist?limit=1").await;
    let (status, body) = send(app.get("carol", &format!("/v1/waitlist?cursor={}", cursor.unwrap()))).await;
    assert_eq!((status, slug(&body)), (StatusCode::BAD_REQUEST, "invalid-cursor"));
}

// --- every list is served by an index --------------------------------------------

/// The PostgreSQL types of a reservations page's parameters, in order.
const RESERVATION_PARAMS: &str = "text, uuid, timestamptz, text[], timestamptz, timestamptz, timestamptz, uuid, bigint";

fn literal<T: ToString>(v: Option<T>, cast: &str) -> String {
    v.map_or("NULL".into(), |v| format!("'{}'::{cast}", v.to_string().replace('\'', "''")))
}

/// A reservations page's parameters as SQL literals, in the order `reservation_lists::list`
/// binds them.
fn reservation_args(f: &ListFilter<'_>) -> String {
    let statuses = (!f.statuses.is_empty())
        .then(|| format!("{{{}}}", f.statuses.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")));
    [
        literal(f.owner, "text"),
        literal(f.resource_id, "uuid"),
        literal(Some(f.now.to_rfc3339()), "timestamptz"),
        literal(statuses, "text[]"),
        literal(f.from.map(|t| t.to_rfc3339()), "timestamptz"),
        literal(f.to.map(|t| t.to_rfc3339()), "timestamptz"),
        literal(f.after.map(|a| a.0.to_rfc3339()), "timestamptz"),
        literal(f.after.map(|a| a.1), "uuid"),
        f.limit.to_string(),
    ]
    .join(", ")
}

/// The plan of `sql` with these arguments, as a custom plan (planned for the values,
/// as the first executions of a prepared statement are) and as the generic plan that
/// PostgreSQL may switch a prepared statement to after five.
async fn plans(db: &tokio_postgres::Client, sql: &str, types: &str, args: &str) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    for mode in ["force_custom_plan", "force_generic_plan"] {
        db.batch_execute(&format!(
            "DEALLOCATE ALL; SET plan_cache_mode = {mode}; PREPARE list_page ({types}) AS {sql}"
        ))
        .await
        .unwrap_or_else(|e| panic!("preparing {sql}: {e}"));
        let row = db.query_one(&format!("EXPLAIN (FORMAT JSON) EXECUTE list_page ({args})"), &[]).await.unwrap();
        out.push((mode, row.get::<_, Value>(0)));
    }
    out
}

fn node_types(plan: &Value, out: &mut Vec<String>) {
    match plan {
        Value::Object(map) => {
            if let Some(Value::String(t)) = map.get("Node Type") {
                out.push(t.clone());
            }
            map.values().for_each(|v| node_types(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| node_types(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn on_a_million_reservations_no_list_a_client_asks_for_scans_a_table() {
    let url = fresh_database().await;
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let started = std::time::Instant::now();
    bulk::fill(&db).await.unwrap();
    eprintln!("filled and analyzed in {:.1} s", started.elapsed().as_secs_f64());

    let now = bulk::newest_created_at();
    let (user, resource) = (bulk::owner(42), bulk::resource(42));
    let (from, to) = (bulk::first_day() + Duration::days(30), bulk::first_day() + Duration::days(31));
    // Halfway down everyone's list: where a deep page starts.
    let middle: (chrono::DateTime<Utc>, Uuid) = {
        let row = db
            .query_one(
                "SELECT created_at, id FROM reservations ORDER BY created_at DESC, id DESC OFFSET 500000 LIMIT 1",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    let base =
        ListFilter { owner: None, resource_id: None, statuses: &[], from: None, to: None, after: None, limit: 51, now };
    let held_or_confirmed = [Status::Held, Status::Confirmed];
    let confirmed = [Status::Confirmed];
    let cases: Vec<(&str, ListFilter<'_>)> = vec![
        ("own list", ListFilter { owner: Some(&user), ..base }),
        ("own list, a later page", ListFilter { owner: Some(&user), after: Some(middle), ..base }),
        ("own list by resource", ListFilter { owner: Some(&user), resource_id: Some(resource), ..base }),
        ("own list by status", ListFilter { owner: Some(&user), statuses: &confirmed, ..base }),
        ("own list in a window", ListFilter { owner: Some(&user), from: Some(from), to: Some(to), ..base }),
        ("admin: everyone's", base),
        ("admin: everyone's, a later page", ListFilter { after: Some(middle), ..base }),
        ("admin: by owner", ListFilter { owner: Some("user4242"), ..base }),
        ("admin: by resource", ListFilter { resource_id: Some(resource), ..base }),
        ("admin: by status", ListFilter { statuses: &held_or_confirmed, ..base }),
        ("admin: in a window", ListFilter { from: Some(from), to: Some(to), ..base }),
        ("admin: by resource in a window", ListFilter { resource_id: Some(resource), from: Some(from), ..base }),
    ];
    let mut checked = Vec::new();
    for (name, filter) in &cases {
        let sql = reservation_lists::list_statement(filter);
        checked.push((name.to_string(), sql, RESERVATION_PARAMS, reservation_args(filter)));
    }
    let resources_sql = shared::db::resources::LIST;
    for (name, args) in [
        ("resources", "false, NULL, NULL, 51".to_string()),
        ("resources with archived ones", "true, NULL, NULL, 51".to_string()),
    ] {
        checked.push((name.into(), resources_sql, "boolean, timestamptz, uuid, bigint", args));
    }
    let waitlist_sql = shared::db::waitlist::LIST;
    for (name, after) in [("a waitlist", "NULL"), ("a waitlist, a later page", "60000")] {
        let args = format!("'{}'::uuid, {after}, '{}'::timestamptz, 51", bulk::resource(7), now.to_rfc3339());
        checked.push((name.into(), waitlist_sql, "uuid, bigint, timestamptz, bigint", args));
    }

    let own_waitlist_sql = shared::db::waitlist::LIST_BY_OWNER;
    for (name, resource) in [
        ("own waitlist entries", "NULL".to_string()),
        ("own waitlist entries of a resource", format!("'{}'", bulk::resource(7))),
    ] {
        let args = format!("'{user}'::text, {resource}::uuid, '{}'::timestamptz, NULL, NULL, 51", now.to_rfc3339());
        checked.push((name.into(), own_waitlist_sql, "text, uuid, timestamptz, timestamptz, uuid, bigint", args));
    }

    for (name, sql, types, args) in &checked {
        for (mode, plan) in plans(&db, sql, types, args).await {
            let mut nodes = Vec::new();
            node_types(&plan, &mut nodes);
            assert!(!nodes.is_empty(), "{name}: no plan");
            assert!(
                !nodes.iter().any(|n| n == "Seq Scan"),
                "{name} ({mode}) scans a table: {nodes:?}\n{plan:#}\nargs: {args}"
            );
        }
    }
    eprintln!("{} lists explained in {:.1} s in all", checked.len(), started.elapsed().as_secs_f64());
}
