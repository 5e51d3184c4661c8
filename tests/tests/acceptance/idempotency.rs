//! Retries are safe: every outcome of an `Idempotency-Key`.

use acceptance::{Options, TestApp, hours, send, slug};
use chrono::Duration;
use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

fn body(resource: Uuid, from: i64, to: i64) -> Value {
    let (s, e) = hours(from, to);
    json!({"resource_id": resource, "start": s, "end": e})
}

async fn keyed(app: &TestApp, who: &str, key: &str, body: &Value) -> (StatusCode, Option<String>, Value) {
    let resp = app.post(who, "/v1/reservations", body).header("idempotency-key", key).send().await.unwrap();
    let status = resp.status();
    let replayed = resp.headers().get("idempotency-replayed").map(|v| v.to_str().unwrap().to_string());
    (status, replayed, resp.json().await.unwrap_or(Value::Null))
}

async fn rows(app: &TestApp, resource: Uuid) -> i64 {
    app.count("SELECT count(*) FROM reservations WHERE resource_id = $1", &[&resource]).await
}

async fn key_state(app: &TestApp, key: &str) -> Option<String> {
    app.db()
        .await
        .query_opt("SELECT state FROM idempotency_keys WHERE key = $1", &[&key])
        .await
        .unwrap()
        .map(|r| r.get(0))
}

/// A server whose retries wait at most `wait` for their original to finish.
async fn app_whose_retries_wait_at_most(wait: std::time::Duration) -> TestApp {
    TestApp::spawn_with(Options { tweak: Box::new(move |c| c.idempotency_wait = wait), ..Default::default() }).await
}

/// Takes the resource's row lock in a transaction of the test's own: a request for the
/// resource then queues inside its own transaction until the test lets go.
async fn take_the_row_lock_of(
    db: &mut deadpool_postgres::Object,
    resource: Uuid,
) -> deadpool_postgres::Transaction<'_> {
    let lock = db.transaction().await.unwrap();
    lock.execute("SELECT 1 FROM resources WHERE id = $1 FOR UPDATE", &[&resource]).await.unwrap();
    lock
}

/// Sends the original request in the background and returns once it has claimed its
/// key and queues, inside its transaction, on the resource lock the test holds.
async fn send_original(app: &TestApp, b: &Value, key: &str) -> tokio::task::JoinHandle<reqwest::Response> {
    let req = app.post("alice", "/v1/reservations", b).header("idempotency-key", key);
    let original = tokio::spawn(async move { req.send().await.unwrap() });
    wait_for_claim(app, key).await;
    original
}

/// Waits until the original request has claimed its key. The tests that use it hold the
/// resource's row lock themselves, so the original then queues inside its own
/// transaction for as long as the test likes. Its claim is not committed, so what is
/// seen is the wait, on the lock that comes after the claim.
async fn wait_for_claim(app: &TestApp, _key: &str) {
    for _ in 0..500 {
        let waiting = app
            .count(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
                &[],
            )
            .await;
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("the original never claimed its key");
}

#[tokio::test]
async fn a_retry_with_the_same_key_replays_the_stored_answer_and_runs_nothing() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let b = body(room, 10, 11);
    let (s1, r1, first) = keyed(&app, "alice", "k-1", &b).await;
    assert_eq!((s1, r1.as_deref()), (StatusCode::CREATED, Some("false")));
    let (s2, r2, second) = keyed(&app, "alice", "k-1", &b).await;
    assert_eq!((s2, r2.as_deref()), (StatusCode::CREATED, Some("true")));
    assert_eq!(first, second);
    assert_eq!(rows(&app, room).await, 1);
}

#[tokio::test]
async fn the_fingerprint_ignores_field_order_and_whitespace() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (s, e) = hours(10, 11);
    let a = format!(r#"{{"resource_id":"{room}","start":"{s}","end":"{e}"}}"#);
    let b = format!("{{ \"end\" : \"{e}\",\n \"start\": \"{s}\", \"resource_id\": \"{room}\" }}");
    let send_raw = |raw: String| {
        app.http
            .post(app.url("/v1/reservations"))
            .header("x-principal", "alice")
            .header("content-type", "application/json")
            .header("idempotency-key", "k-order")
            .body(raw)
            .send()
    };
    assert_eq!(send_raw(a).await.unwrap().status(), StatusCode::CREATED);
    let again = send_raw(b).await.unwrap();
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers()["idempotency-replayed"], "true");
}

#[tokio::test]
async fn a_key_reused_for_another_request_is_refused() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    keyed(&app, "alice", "k-2", &body(room, 10, 11)).await;
    let (status, _, problem) = keyed(&app, "alice", "k-2", &body(room, 12, 13)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::UNPROCESSABLE_ENTITY, "idempotency-key-reused"));
    assert_eq!(rows(&app, room).await, 1);
}

#[tokio::test]
async fn keys_are_scoped_to_the_principal_and_the_route() {
    let app = TestApp::spawn().await;
    let room = app.resource(2).await;
    let b = body(room, 10, 11);
    let (_, _, alices) = keyed(&app, "alice", "shared-key", &b).await;
    let (status, replayed, bobs) = keyed(&app, "bob", "shared-key", &b).await;
    assert_eq!((status, replayed.as_deref()), (StatusCode::CREATED, Some("false")));
    assert_ne!(alices["id"], bobs["id"]);
    // The same key on the confirm route is a different scope.
    let resp = app
        .http
        .post(app.url(&format!("/v1/reservations/{}/confirm", alices["id"].as_str().unwrap())))
        .header("x-principal", "alice")
        .header("idempotency-key", "shared-key")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["idempotency-replayed"], "false");
}

#[tokio::test]
async fn a_lost_race_is_an_answer_and_is_replayed_too() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (_, _, winner) = keyed(&app, "alice", "a", &body(room, 10, 11)).await;
    let (status, _, problem) = keyed(&app, "bob", "b", &body(room, 10, 11)).await;
    assert_eq!((status, slug(&problem)), (StatusCode::CONFLICT, "slot-unavailable"));
    send(app.delete("alice", &format!("/v1/reservations/{}", winner["id"].as_str().unwrap()))).await;
    // The slot is free now, but bob's key already has its answer.
    let (status, replayed, again) = keyed(&app, "bob", "b", &body(room, 10, 11)).await;
    assert_eq!((status, replayed.as_deref()), (StatusCode::CONFLICT, Some("true")));
    assert_eq!(again, problem);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_of_one_request_all_get_its_single_answer() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let b = body(room, 10, 11);
    let barrier = Arc::new(tokio::sync::Barrier::new(10));
    let results = join_all((0..10).map(|_| {
        let (app, b, barrier) = (&app, &b, barrier.clone());
        async move {
            barrier.wait().await;
            keyed(app, "alice", "k-burst", b).await
        }
    }))
    .await;
    let ids: Vec<&Value> = results.iter().map(|(_, _, r)| &r["id"]).collect();
    for (status, _, r) in &results {
        assert_eq!(*status, StatusCode::CREATED, "a retry lost a race against itself: {r}");
    }
    assert!(ids.iter().all(|id| *id == ids[0]));
    let firsts = results.iter().filter(|(_, r, _)| r.as_deref() == Some("false")).count();
    assert_eq!(firsts, 1, "exactly one answer is the original");
    assert_eq!(rows(&app, room).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_queued_behind_its_slow_original_gets_the_replay() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let b = body(room, 10, 11);
    let mut blocker = app.db().await;
    let lock = take_the_row_lock_of(&mut blocker, room).await;

    let original = send_original(&app, &b, "slow").await;
    let retry = tokio::spawn({
        let req = app.post("alice", "/v1/reservations", &b).header("idempotency-key", "slow");
        async move { req.send().await.unwrap() }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    lock.rollback().await.unwrap();

    let (original, retry) = (original.await.unwrap(), retry.await.unwrap());
    assert_eq!(original.status(), StatusCode::CREATED);
    assert_eq!(retry.status(), StatusCode::CREATED);
    assert_eq!(retry.headers()["idempotency-replayed"], "true");
    let (o, r): (Value, Value) = (original.json().await.unwrap(), retry.json().await.unwrap());
    assert_eq!(o["id"], r["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_that_cannot_wait_long_enough_is_told_to_come_back() {
    let app = app_whose_retries_wait_at_most(std::time::Duration::from_millis(150)).await;
    let room = app.resource(1).await;
    let b = body(room, 10, 11);
    let mut blocker = app.db().await;
    let lock = take_the_row_lock_of(&mut blocker, room).await;
    let original = send_original(&app, &b, "busy").await;

    let resp = app.post("alice", "/v1/reservations", &b).header("idempotency-key", "busy").send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    let retry_after: u64 = resp.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    let problem: Value = resp.json().await.unwrap();
    assert_eq!(slug(&problem), "idempotency-key-in-progress");

    lock.rollback().await.unwrap();
    assert_eq!(original.await.unwrap().status(), StatusCode::CREATED);
    let (status, replayed, _) = keyed(&app, "alice", "busy", &b).await;
    assert_eq!((status, replayed.as_deref()), (StatusCode::CREATED, Some("true")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_runs_at_once_when_its_original_died_leaving_nothing_behind() {
    let app = app_whose_retries_wait_at_most(std::time::Duration::from_millis(100)).await;
    let room = app.resource(1).await;
    let b = body(room, 10, 11);
    let mut blocker = app.db().await;
    let lock = take_the_row_lock_of(&mut blocker, room).await;
    let original = send_original(&app, &b, "dies").await;
    // The original's database session dies mid-request, as a function killed by its
    // timeout would: its transaction is gone, and its claim with it.
    let killed = app
        .count(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
            &[],
        )
        .await;
    assert_eq!(killed, 1);
    assert!(original.await.unwrap().status().is_server_error());
    lock.rollback().await.unwrap();
    assert_eq!(key_state(&app, "dies").await, None);

    let (status, replayed, r) = keyed(&app, "alice", "dies", &b).await;
    assert_eq!((status, replayed.as_deref()), (StatusCode::CREATED, Some("false")), "{r}");
    assert_eq!(rows(&app, room).await, 1);
    let (status, replayed, again) = keyed(&app, "alice", "dies", &b).await;
    assert_eq!((status, replayed.as_deref(), &again["id"]), (StatusCode::CREATED, Some("true"), &r["id"]));
}

#[tokio::test]
async fn a_malformed_key_is_a_validation_error() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    for key in ["has space", &"x".repeat(256)] {
        let (status, _, problem) = keyed(&app, "alice", key, &body(room, 10, 11)).await;
        assert_eq!((status, slug(&problem)), (StatusCode::BAD_REQUEST, "validation-error"), "{key}");
    }
    assert_eq!(rows(&app, room).await, 0);
}

#[tokio::test]
async fn a_retried_resource_create_with_the_same_key_makes_one_resource_and_replays_it() {
    let app = TestApp::spawn().await;
    let body = json!({"name": "Room 7", "capacity": 3});
    let create = || app.post("admin", "/v1/resources", &body).header("idempotency-key", "room-7").send();
    let first = create().await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    assert_eq!(first.headers()["idempotency-replayed"], "false");
    let location = first.headers()["location"].to_str().unwrap().to_string();
    let first: Value = first.json().await.unwrap();

    let retry = create().await.unwrap();
    assert_eq!(retry.status(), StatusCode::CREATED);
    assert_eq!(retry.headers()["idempotency-replayed"], "true");
    assert_eq!(retry.headers()["location"], location.as_str());
    assert_eq!(retry.json::<Value>().await.unwrap(), first);

    let count = app.count("SELECT count(*) FROM resources WHERE name = 'Room 7'", &[]).await;
    assert_eq!(count, 1);
    // Another body under the same key is refused, not a second resource.
    let (status, p) =
        send(app.post("admin", "/v1/resources", &json!({"name": "Room 8"})).header("idempotency-key", "room-7")).await;
    assert_eq!((status, slug(&p)), (StatusCode::UNPROCESSABLE_ENTITY, "idempotency-key-reused"));
}

/// A keyed hold that settles in one statement stores the reservation it
/// made, and its replay is rendered from it: the same status, `Location` and bytes.
#[tokio::test]
async fn a_hold_settled_in_one_statement_is_replayed_byte_for_byte_from_the_row_it_stored() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let mut b = body(room, 10, 11);
    b["metadata"] = json!({"note": "naïve \"quoted\" \n line", "a": "1"});
    let send_keyed = || app.post("alice", "/v1/reservations", &b).header("idempotency-key", "bytes").send();
    let first = send_keyed().await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    assert_eq!(first.headers()["idempotency-replayed"], "false");
    let location = first.headers()["location"].clone();
    let first = first.bytes().await.unwrap();

    let row = app
        .db()
        .await
        .query_one(
            "SELECT state, response_status, response_body IS NULL, response_reservation->>'id' \
             FROM idempotency_keys WHERE key = 'bytes'",
            &[],
        )
        .await
        .unwrap();
    let stored: (String, i16, bool, String) = (row.get(0), row.get(1), row.get(2), row.get(3));
    let made: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(stored, ("completed".into(), 201, true, made["id"].as_str().unwrap().to_string()));

    let again = send_keyed().await.unwrap();
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    assert_eq!(again.headers()["location"], location);
    assert_eq!(again.bytes().await.unwrap(), first, "the replay is the first answer's bytes");
}

/// The keyed statement writes its claim with the answer it expects: the hold's
/// expiry from the resource's TTL as read before the lock. Here the TTL changes while
/// the hold waits for the lock, so the answer stored is the one the hold gave, and the
/// replay still matches the first answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_expiry_moved_while_it_waited_stores_the_answer_it_gave() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let b = body(room, 10, 11);
    let mut blocker = app.db().await;
    let lock = take_the_row_lock_of(&mut blocker, room).await;
    let original = send_original(&app, &b, "ttl").await;
    lock.execute("UPDATE resources SET hold_ttl_seconds = 77 WHERE id = $1", &[&room]).await.unwrap();
    lock.commit().await.unwrap();

    let first = original.await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    let first: Value = first.json().await.unwrap();
    let (created, expires) = (first["created_at"].as_str().unwrap(), first["expires_at"].as_str().unwrap());
    let ttl =
        chrono::DateTime::parse_from_rfc3339(expires).unwrap() - chrono::DateTime::parse_from_rfc3339(created).unwrap();
    assert_eq!(ttl, Duration::seconds(77), "{first}");
    let (status, replayed, again) = keyed(&app, "alice", "ttl", &b).await;
    assert_eq!((status, replayed.as_deref()), (StatusCode::CREATED, Some("true")));
    assert_eq!(again, first);
}

/// What the one statement leaves to the general path (here a resource with calendar
/// rules, and one that does not exist) goes through the guard's transaction, and its
/// answer is stored and replayed as before.
#[tokio::test]
async fn a_keyed_hold_the_general_path_decides_is_stored_and_replayed_by_the_guard() {
    let app = TestApp::spawn().await;
    let lab = app.resource_with(json!({"name": "Lab", "buffer_after_minutes": 30})).await;
    let (status, replayed, first) = keyed(&app, "alice", "rules", &body(lab, 10, 11)).await;
    assert_eq!((status, replayed.as_deref()), (StatusCode::CREATED, Some("false")), "{first}");
    let (status, replayed, again) = keyed(&app, "alice", "rules", &body(lab, 10, 11)).await;
    assert_eq!((status, replayed.as_deref(), &again), (StatusCode::CREATED, Some("true"), &first));
    assert_eq!(rows(&app, lab).await, 1);

    let nowhere = Uuid::now_v7();
    let (status, replayed, problem) = keyed(&app, "alice", "nowhere", &body(nowhere, 10, 11)).await;
    assert_eq!(
        (status, replayed.as_deref(), slug(&problem)),
        (StatusCode::NOT_FOUND, Some("false"), "resource-not-found")
    );
    let (status, replayed, _) = keyed(&app, "alice", "nowhere", &body(nowhere, 10, 11)).await;
    assert_eq!((status, replayed.as_deref()), (StatusCode::NOT_FOUND, Some("true")));
    // The keyed statement took its claim back: one row per key, the guard's.
    let keys = app.count("SELECT count(*) FROM idempotency_keys", &[]).await;
    assert_eq!(keys, 2);
}

/// Many clients, some sending the same request several times at once, on a resource
/// with room for three: three holds, one answer per key, checked in SQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_racing_for_a_few_places_get_one_answer_per_key_and_never_overbook() {
    let app = TestApp::spawn().await;
    let room = app.resource(3).await;
    let b = body(room, 10, 11);
    let (keys, copies) = (8, 5);
    let barrier = Arc::new(tokio::sync::Barrier::new(keys * copies));
    let results = join_all((0..keys * copies).map(|i| {
        let (app, b, barrier) = (&app, &b, barrier.clone());
        async move {
            let key = format!("k{}", i % keys);
            barrier.wait().await;
            let resp = app.post("alice", "/v1/reservations", b).header("idempotency-key", &key).send().await.unwrap();
            (key, resp.status(), resp.bytes().await.unwrap())
        }
    }))
    .await;
    let mut answers = std::collections::HashMap::new();
    for (key, status, bytes) in &results {
        assert!([StatusCode::CREATED, StatusCode::CONFLICT].contains(status), "{status}: {bytes:?}");
        let first = answers.entry(key.clone()).or_insert((*status, bytes.clone()));
        assert_eq!((&first.0, &first.1), (status, bytes), "every copy of {key} gets the one answer");
    }
    let won = answers.values().filter(|(s, _)| *s == StatusCode::CREATED).count();
    assert_eq!(won, 3, "three places, three holds");
    let row = app
        .db()
        .await
        .query_one(
            "SELECT (SELECT count(*) FROM reservations WHERE resource_id = $1), \
                    (SELECT count(*) FROM idempotency_keys WHERE state = 'completed'), \
                    (SELECT count(*) FROM idempotency_keys k JOIN reservations r \
                       ON r.id = (k.response_reservation->>'id')::uuid)",
            &[&room],
        )
        .await
        .unwrap();
    let counted: (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(counted, (3, keys as i64, 3), "(reservations, keys answered, answers that are a reservation)");
}
