//! A primary that fails over: an answer stored under an Idempotency-Key is committed
//! durably, so that no failover turns a key's refusal into a hold.

use acceptance::{TestApp, hours};
use reqwest::StatusCode;

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
