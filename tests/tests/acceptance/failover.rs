//! A primary that fails over: a server that is read-only, in recovery or shutting
//! down is unavailability (503 with `Retry-After`), never an error, and a connection
//! found read-only is not used again; an answer stored under an Idempotency-Key is
//! committed durably, so that no failover turns a key's refusal into a hold.
//! `scripts/failover` runs the failover itself, on two clusters.

use acceptance::{Options, TestApp, hours, send, slug};
use reqwest::StatusCode;
use serde_json::json;

/// A pool of one connection, so that the test knows which connection the next
/// request gets.
async fn app_of_one_connection() -> TestApp {
    TestApp::spawn_with(Options { tweak: Box::new(|c| c.database.pool_size = 1), ..Default::default() }).await
}

#[tokio::test]
async fn a_read_only_server_answers_503_with_retry_after_and_the_connection_is_not_reused() {
    let app = app_of_one_connection().await;
    let room = app.resource(1).await;
    // The pool's one connection turns read-only, as every session of a server does when
    // it is made read-only (`default_transaction_read_only` set and reloaded).
    {
        let client = app.state.pool.get().await.unwrap();
        client.batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY").await.unwrap();
    }
    let (s, e) = hours(10, 11);
    let body = json!({"resource_id": room, "start": s, "end": e});
    let resp = app.post("alice", "/v1/reservations", &body).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()["retry-after"], "1");
    let problem: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(slug(&problem), "database-unavailable");
    // The next request gets a new connection, which is not read-only.
    let (status, held) = send(app.post("alice", "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
}

/// A connection of the test's own, outside the server's pool of one.
async fn admin() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&acceptance::admin_url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

#[tokio::test]
async fn a_server_whose_new_sessions_are_read_only_answers_503_and_health_says_it_cannot_write() {
    let app = app_of_one_connection().await;
    let room = app.resource(1).await;
    let (status, _) = send(app.get("alice", "/v1/health")).await;
    assert_eq!(status, StatusCode::OK);
    let name = app.database_url.rsplit('/').next().unwrap().to_string();
    let db = admin().await;
    db.batch_execute(&format!("ALTER DATABASE \"{name}\" SET default_transaction_read_only = on")).await.unwrap();
    // The pool's connection predates the change: end it, as a failover ends the
    // sessions of the old primary, so that the next one is a new session.
    db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", &[&name]).await.unwrap();
    let (s, e) = hours(10, 11);
    let body = json!({"resource_id": room, "start": s, "end": e});
    for _ in 0..3 {
        let resp = app.post("alice", "/v1/reservations", &body).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()["retry-after"], "1");
    }
    let resp = app.get("alice", "/v1/health").send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()["retry-after"], "1");
    db.batch_execute(&format!("ALTER DATABASE \"{name}\" RESET default_transaction_read_only")).await.unwrap();
    let (status, held) = send(app.post("alice", "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    let (status, _) = send(app.get("alice", "/v1/health")).await;
    assert_eq!(status, StatusCode::OK);
}

/// The keyed hold refused in one statement, in a transaction of the test's, and the
/// `synchronous_commit` its commit would have had.
async fn keyed_refusal_commit_mode(app: &TestApp, room: uuid::Uuid, quantity: i32) -> (String, String) {
    let mut db = app.db().await;
    let tx = db.transaction().await.unwrap();
    let (s, e) = hours(10, 11);
    let start: chrono::DateTime<chrono::Utc> = s.parse().unwrap();
    let end: chrono::DateTime<chrono::Utc> = e.parse().unwrap();
    let row = tx
        .query_one(
            "SELECT outcome FROM reservation_hold(
                 p_id => gen_random_uuid(), p_resource => $1, p_owner => 'bob', p_start => $2, p_end => $3,
                 p_quantity => $4, p_confirm => false, p_now => now(), p_metadata => '{}'::jsonb,
                 p_event_id => gen_random_uuid(), p_principal => 'bob', p_method => 'POST',
                 p_route => 'POST /v1/reservations', p_key => 'k-refused', p_fingerprint => '\\x00'::bytea,
                 p_retain_until => now() + interval '1 day', p_wait => '1s', p_refused_status => 409::smallint,
                 p_refused_headers => '{}'::jsonb, p_refused_body => '\\x00'::bytea)",
            &[&room, &start, &end, &quantity],
        )
        .await
        .unwrap();
    let outcome: String = row.get(0);
    let mode: String = tx.query_one("SHOW synchronous_commit", &[]).await.unwrap().get(0);
    tx.rollback().await.unwrap();
    (outcome, mode)
}

#[tokio::test]
async fn a_refusal_stored_under_an_idempotency_key_waits_for_a_durable_commit() {
    let app = TestApp::spawn().await;
    let single = app.resource(1).await;
    let several = app.resource(2).await;
    let (s, e) = hours(10, 11);
    let (status, _) = app.reserve("alice", single, (&s, &e), 1).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = app.reserve("alice", several, (&s, &e), 2).await;
    assert_eq!(status, StatusCode::CREATED);
    // Capacity 1 (the exclusion constraint's path) and capacity N (the load under the
    // lock): each refusal is stored as the key's answer, and its commit waits for the
    // disk and for a synchronous standby as the session's setting says.
    assert_eq!(keyed_refusal_commit_mode(&app, single, 1).await, ("unavailable".into(), "on".into()));
    assert_eq!(keyed_refusal_commit_mode(&app, several, 1).await, ("unavailable".into(), "on".into()));
}
