//! Bookings of several items keep the guarantee: every operation on a whole booking
//! judges every item under every item's resource lock, with the time read after the
//! locks; an item written down on its own takes its whole booking with it; nothing
//! written down is ever written back. Real PostgreSQL, real concurrency; the guarantee
//! and all-or-nothing checked in SQL ([`over_capacity`], [`split_bookings`]).

use acceptance::{
    TestApp, hours, load_timeline_mismatches, over_capacity, reservation_path, send, short_lived, split_bookings,
};
use chrono::{DateTime, Duration, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::Clock;
use shared::booking::sweep::Bounds;
use shared::clock::ManualClock;
use std::sync::Arc;
use uuid::Uuid;

const TTL: i64 = 2;

/// A server on a manual clock, and resources A (capacity 1) and B (capacity 2) whose
/// holds last [`TTL`] seconds and may be kept for a minute.
async fn two_resources() -> (TestApp, Arc<ManualClock>, Uuid, Uuid) {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let a = app.resource_with(short_lived(1, TTL, 60)).await;
    let b = app.resource_with(short_lived(2, TTL, 60)).await;
    (app, clock, a, b)
}

fn booking(app: &TestApp, who: &str, items: Value, confirm: bool) -> reqwest::RequestBuilder {
    let (start, end) = hours(10, 11);
    app.post(who, "/v1/reservations", &json!({"items": items, "start": start, "end": end, "confirm": confirm}))
}

fn single(app: &TestApp, who: &str, resource: Uuid, quantity: i32, confirm: bool) -> reqwest::RequestBuilder {
    let (start, end) = hours(10, 11);
    app.post(
        who,
        "/v1/reservations",
        &json!({"resource_id": resource, "start": start, "end": end, "quantity": quantity, "confirm": confirm}),
    )
}

/// Alice's booking of `[A x1, B x2]`; returns it and the instant it expires.
async fn alices_booking(app: &TestApp, a: Uuid, b: Uuid) -> (Value, DateTime<Utc>) {
    let items = json!([{"resource_id": a}, {"resource_id": b, "quantity": 2}]);
    let (status, r) = send(booking(app, "alice", items, false)).await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    let expires: DateTime<Utc> = r["expires_at"].as_str().unwrap().parse().unwrap();
    (r, expires)
}

fn millis(n: i64) -> Duration {
    Duration::milliseconds(n)
}

#[tokio::test]
async fn a_confirm_that_waited_past_the_expiry_refuses_and_the_rival_who_came_after_the_expiry_gets_the_place() {
    let (app, clock, a, b) = two_resources().await;
    let (r, expires) = alices_booking(&app, a, b).await;
    let lead: Uuid = r["id"].as_str().unwrap().parse().unwrap();
    // A second session holds the lead row: any delay between the confirm reading its
    // clock and writing.
    let mut blocker = app.db().await;
    let tx = blocker.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM reservations WHERE id = $1 FOR UPDATE", &[&lead]).await.unwrap();

    clock.set(expires - Duration::seconds(1));
    let confirm = tokio::spawn({
        let req =
            app.http.post(app.url(&format!("{}/confirm", reservation_path(&r["id"])))).header("x-principal", "alice");
        async move { send(req).await }
    });
    app.until_waiting_on_a_lock(1).await;
    clock.set(expires + millis(300));
    let bob = tokio::spawn(send(single(&app, "bob", b, 2, true)));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    tx.commit().await.unwrap();

    let (confirmed, body) = confirm.await.unwrap();
    let (bobs, bob_body) = bob.await.unwrap();
    assert_eq!(confirmed, StatusCode::CONFLICT, "the booking had lapsed when the confirm could judge it: {body}");
    assert_eq!(bobs, StatusCode::CREATED, "{bob_body}");
    let db = app.db().await;
    assert_eq!(over_capacity(&db, clock.now()).await, 0, "B holds at most its 2");
    assert_eq!(split_bookings(&db, clock.now()).await, 0);
    let statuses =
        app.count("SELECT count(*) FROM reservations WHERE booking_id = $1 AND status = 'EXPIRED'", &[&lead]).await;
    assert_eq!(statuses, 2, "the booking is written down whole");
}

#[tokio::test]
async fn an_extend_that_waited_past_the_expiry_extends_nothing_and_a_later_confirm_revives_nothing() {
    let (app, clock, a, b) = two_resources().await;
    let (r, expires) = alices_booking(&app, a, b).await;
    let lead: Uuid = r["id"].as_str().unwrap().parse().unwrap();
    // A second session holds resource A's lock, as a path on A does: the extend waits
    // for it.
    let mut blocker = app.db().await;
    let tx = blocker.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM resources WHERE id = $1 FOR NO KEY UPDATE", &[&a]).await.unwrap();

    clock.set(expires - Duration::seconds(1));
    let extend = tokio::spawn({
        let req =
            app.http.post(app.url(&format!("{}/extend", reservation_path(&r["id"])))).header("x-principal", "alice");
        async move { send(req.json(&json!({}))).await }
    });
    app.until_waiting_on_a_lock(1).await;
    clock.set(expires + millis(300));
    let (bobs, bob_body) = send(single(&app, "bob", b, 2, true)).await;
    assert_eq!(bobs, StatusCode::CREATED, "B's place was free once Alice's hold lapsed: {bob_body}");
    tx.commit().await.unwrap();
    let (extended, body) = extend.await.unwrap();
    assert_eq!(extended, StatusCode::CONFLICT, "{body}");

    // With no race left, Alice confirms before the expiry the extend would have set.
    clock.set(expires + Duration::seconds(1));
    let (confirmed, body) = app.confirm("alice", &r["id"]).await;
    assert_eq!(confirmed, StatusCode::CONFLICT, "{body}");
    let db = app.db().await;
    assert_eq!(over_capacity(&db, clock.now()).await, 0);
    assert_eq!(split_bookings(&db, clock.now()).await, 0);
    let live =
        app.count("SELECT count(*) FROM reservations WHERE booking_id = $1 AND status <> 'EXPIRED'", &[&lead]).await;
    assert_eq!(live, 0, "no item revived");
}

#[tokio::test]
async fn an_item_written_down_by_another_principals_hold_writes_down_the_whole_booking_with_one_event() {
    let (app, clock, a, b) = two_resources().await;
    let (r, expires) = alices_booking(&app, a, b).await;
    let lead: Uuid = r["id"].as_str().unwrap().parse().unwrap();
    // Carol waits for A, the lead's resource.
    let (joined, entry) = app.join_waitlist("carol", a, 10, 11, 1).await;
    assert_eq!(joined, StatusCode::CREATED, "{entry}");

    clock.set(expires + millis(1));
    let (bobs, body) = send(single(&app, "bob", b, 2, false)).await;
    assert_eq!(bobs, StatusCode::CREATED, "{body}");
    let rows = |status: &'static str| {
        let app = &app;
        async move {
            app.count("SELECT count(*) FROM reservations WHERE booking_id = $1 AND status = $2", &[&lead, &status])
                .await
        }
    };
    assert_eq!(rows("EXPIRED").await, 2, "the lead on A too, though Bob's hold locked B alone");
    let events =
        app.count("SELECT count(*) FROM outbox WHERE subject_id = $1 AND kind = 'reservation.expired'", &[&lead]).await;
    assert_eq!(events, 1, "one event for the booking");
    let items = app
        .count(
            "SELECT jsonb_array_length(payload -> 'items')::bigint FROM outbox
             WHERE subject_id = $1 AND kind = 'reservation.expired'",
            &[&lead],
        )
        .await;
    assert_eq!(items, 2, "the event carries every item");

    // A's capacity is owed to Carol: the sweep offers it.
    let report =
        shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), Bounds::default()).await.unwrap();
    assert_eq!((report.owed_handed_over, report.offers), (1, 1), "{report:?}");
    let carol = app.waitlist_entry("carol", &entry).await;
    assert_eq!(carol["status"], "OFFERED", "{carol}");
}

#[tokio::test]
async fn the_sweep_of_one_resource_writes_down_every_item_of_a_lapsed_booking_in_one_transaction() {
    let (app, clock, a, b) = two_resources().await;
    let (r, expires) = alices_booking(&app, a, b).await;
    let lead: Uuid = r["id"].as_str().unwrap().parse().unwrap();
    clock.set(expires + millis(1));
    let db = app.db().await;
    // The sweep's batch statement of B alone, as the sweep runs it under B's lock.
    let mut c = app.db().await;
    let tx = c.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM resources WHERE id = $1 FOR NO KEY UPDATE", &[&b]).await.unwrap();
    let expired = shared::db::lapse::expire_lapsed_batch(&tx, b, clock.now(), 10).await.unwrap();
    assert_eq!(expired.len(), 1, "B holds one item");
    let seen_before_commit =
        db.query_one("SELECT count(*) FROM reservations WHERE booking_id = $1 AND status = 'HELD'", &[&lead]).await;
    assert_eq!(seen_before_commit.unwrap().get::<_, i64>(0), 2, "nothing shows before the commit");
    tx.commit().await.unwrap();
    let held =
        db.query_one("SELECT count(*) FROM reservations WHERE booking_id = $1 AND status = 'HELD'", &[&lead]).await;
    assert_eq!(held.unwrap().get::<_, i64>(0), 0, "both items together after it");
}

#[tokio::test]
async fn a_row_written_down_is_never_written_back_by_a_confirm_extend_release_or_move() {
    let (app, clock, a, b) = two_resources().await;
    let (r, expires) = alices_booking(&app, a, b).await;
    let lead: Uuid = r["id"].as_str().unwrap().parse().unwrap();
    // An item written down on its own, as a path that predates the whole write-down
    // left it (the trigger is for write-downs of lapses; this one is by hand).
    app.db()
        .await
        .execute("UPDATE reservations SET status = 'RELEASED' WHERE booking_id = $1 AND id <> booking_id", &[&lead])
        .await
        .unwrap();
    clock.set(expires - Duration::seconds(1));
    let path = reservation_path(&r["id"]);
    let (start, end) = hours(12, 13);
    let (confirmed, _) = app.confirm("alice", &r["id"]).await;
    let (extended, _) = send(app.post("alice", &format!("{path}/extend"), &json!({}))).await;
    let (moved, _) = send(app.patch("alice", &path, &json!({"start": start, "end": end}))).await;
    assert_eq!(
        (confirmed, extended, moved),
        (StatusCode::CONFLICT, StatusCode::CONFLICT, StatusCode::CONFLICT),
        "a booking with an item written down is not held"
    );
    let (released, body) = send(app.delete("alice", &path)).await;
    assert_eq!(released, StatusCode::OK, "{body}");
    let item = app
        .count(
            "SELECT count(*) FROM reservations WHERE booking_id = $1 AND id <> booking_id AND status = 'RELEASED'",
            &[&lead],
        )
        .await;
    assert_eq!(item, 1, "the item keeps its status");
}

/// Every whole-booking operation raced against rival holds on each item's resource
/// across the booking's expiry: the operation is sent with the clock just before the
/// expiry, the clock moves just past it a random moment later, and the rivals are sent
/// at once. Each round, the guarantee and all-or-nothing hold, and nothing answers 500.
#[tokio::test]
async fn confirm_extend_move_and_release_raced_against_rival_holds_across_the_expiry_keep_the_guarantee() {
    let (app, clock, a, b) = two_resources().await;
    let ops = ["confirm", "extend", "move", "release"];
    for round in 0..80 {
        let op = ops[round % ops.len()];
        clock.set(Utc::now());
        let (r, expires) = alices_booking(&app, a, b).await;
        clock.set(expires - millis(5));
        let path = reservation_path(&r["id"]);
        let (moved_start, moved_end) = hours(10, 12);
        let whole = match op {
            "confirm" => app.http.post(app.url(&format!("{path}/confirm"))).header("x-principal", "alice"),
            "extend" => app.post("alice", &format!("{path}/extend"), &json!({})),
            "move" => app.patch("alice", &path, &json!({"start": moved_start, "end": moved_end})),
            _ => app.delete("alice", &path),
        };
        let whole = tokio::spawn(send(whole));
        tokio::time::sleep(std::time::Duration::from_micros(150 * (round as u64 % 8))).await;
        clock.set(expires + millis(5));
        let rivals = [(a, 1), (b, 2), (b, 1), (a, 1)]
            .into_iter()
            .enumerate()
            .map(|(i, (resource, quantity))| single(&app, &format!("rival{i}"), resource, quantity, i % 2 == 0))
            .collect();
        let mut answers = acceptance::send_at_once(rivals).await;
        answers.push(whole.await.unwrap());
        for (status, body) in &answers {
            assert!(!status.is_server_error(), "{op}, round {round}: {status} {body}");
        }
        let db = app.db().await;
        assert_eq!(over_capacity(&db, clock.now()).await, 0, "{op}, round {round}: {answers:?}");
        assert_eq!(split_bookings(&db, clock.now()).await, 0, "{op}, round {round}: {answers:?}");
        // Clear the range for the next round.
        db.execute(
            "UPDATE reservations SET status = CASE status WHEN 'HELD' THEN 'RELEASED' ELSE 'CANCELLED' END
             WHERE status IN ('HELD', 'CONFIRMING', 'CONFIRMED')",
            &[],
        )
        .await
        .unwrap();
    }
}

/// Random interleavings, run concurrently a few at a time, of single holds, bookings of
/// two items (either order) and of a resource and a pool, confirms, extends, moves and
/// releases, with the clock moving and the sweep running between them: after every
/// step, no resource over its capacity and every booking whole, and no 500.
#[tokio::test]
async fn random_interleavings_of_every_operation_keep_capacity_and_all_or_nothing_after_every_step() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let mut resources = Vec::new();
    for capacity in [1, 1, 2, 3] {
        resources.push((app.resource_with(short_lived(capacity, TTL, 8)).await, capacity));
    }
    let ones: Vec<Uuid> = resources.iter().filter(|(_, c)| *c == 1).map(|(id, _)| *id).collect();
    let (_, pool) =
        send(app.post("admin", "/v1/pools", &json!({"name": "P", "resource_ids": ones, "strategy": "ordered"}))).await;
    let pool = pool["id"].clone();
    let seed = std::env::var("WHOLE_BOOKINGS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_u64);
    let mut rng = acceptance::Rng(seed | 1);
    let mut made: Vec<(String, Value)> = Vec::new();
    for step in 0..200 {
        let mut requests = Vec::new();
        for _ in 0..1 + rng.below(5) {
            let who = format!("p{}", rng.below(4));
            let from = 9 + rng.below(3) as i64;
            let (start, end) = hours(from, from + 1 + rng.below(2) as i64);
            let (r1, c1) = resources[rng.below(resources.len())];
            let (r2, _) = resources[rng.below(resources.len())];
            let confirm = rng.below(4) == 0;
            let kind = if made.is_empty() { rng.below(3) } else { rng.below(8) };
            let req = match kind {
                0 => app.post(
                    &who,
                    "/v1/reservations",
                    &json!({"resource_id": r1, "start": start, "end": end,
                        "quantity": 1 + rng.below(c1 as usize), "confirm": confirm}),
                ),
                1 if r1 != r2 => app.post(
                    &who,
                    "/v1/reservations",
                    &json!({"start": start, "end": end,
                        "items": [{"resource_id": r1}, {"resource_id": r2}], "confirm": confirm}),
                ),
                1 | 2 => app.post(
                    &who,
                    "/v1/reservations",
                    &json!({"start": start, "end": end,
                        "items": [{"resource_id": r1}, {"pool_id": pool}], "confirm": confirm}),
                ),
                _ => {
                    let (owner, r) = &made[rng.below(made.len())];
                    let path = reservation_path(&r["id"]);
                    match kind {
                        3 | 4 => app.http.post(app.url(&format!("{path}/confirm"))).header("x-principal", owner),
                        5 => app.post(owner, &format!("{path}/extend"), &json!({})),
                        6 => app.patch(owner, &path, &json!({"start": start, "end": end})),
                        _ => app.delete(owner, &path),
                    }
                }
            };
            requests.push((who, kind, req));
        }
        // Half the steps start just before some booking's expiry, and the clock moves
        // through it while the step's requests run.
        let ticking = acceptance::tick_through_an_expiry(&clock, &made, &mut rng);
        let kinds: Vec<(String, usize)> = requests.iter().map(|(w, k, _)| (w.clone(), *k)).collect();
        let answers = acceptance::send_at_once(requests.into_iter().map(|(_, _, r)| r).collect()).await;
        ticking.await.unwrap();
        for ((who, kind), (status, body)) in kinds.into_iter().zip(&answers) {
            assert!(!status.is_server_error(), "step {step}: {status} {body}");
            if kind <= 2 && *status == StatusCode::CREATED {
                made.push((who, body.clone()));
            }
        }
        match rng.below(4) {
            0 => clock.advance(millis(300 + rng.below(1500) as i64)),
            1 => {
                clock.advance(millis(rng.below(2500) as i64));
                shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), Bounds::default())
                    .await
                    .unwrap();
            }
            _ => {}
        }
        let db = app.db().await;
        assert_eq!(over_capacity(&db, clock.now()).await, 0, "step {step} (seed {seed}): {answers:?}");
        assert_eq!(split_bookings(&db, clock.now()).await, 0, "step {step} (seed {seed}): {answers:?}");
        assert_eq!(load_timeline_mismatches(&db).await, 0, "step {step} (seed {seed}): {answers:?}");
        made.retain(|_| rng.below(10) != 0);
    }
}
