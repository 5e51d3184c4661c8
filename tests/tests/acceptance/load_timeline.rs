//! A capacity-N resource's load timeline (`resource_load`): what a hold judges its range
//! by, so that its cost does not grow with the bookings already on the range. The
//! pieces must equal the bookings they count after every write, whichever path wrote
//! it and whatever ran beside it: checked in SQL ([`load_timeline_mismatches`]), beside
//! the guarantee itself ([`over_capacity`]).

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

/// The pieces of a resource's timeline, as `(range, load)` in order.
async fn pieces(app: &TestApp, resource: Uuid) -> Vec<(String, i64)> {
    let db = app.db().await;
    db.query(
        "SELECT during::text, load FROM resource_load WHERE resource_id = $1 AND load > 0 ORDER BY during",
        &[&resource],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// The loads of a resource's pieces, in order.
async fn loads(app: &TestApp, resource: Uuid) -> Vec<i64> {
    pieces(app, resource).await.into_iter().map(|(_, load)| load).collect()
}

/// Whether a reservation's row still says `HELD`: a lapse reads as `EXPIRED` at once,
/// but its row is written down only by the sweep or by a write that needs its place.
async fn written_held(app: &TestApp, reservation: &Value) -> bool {
    let sql = "SELECT count(*) FROM reservations WHERE id::text = $1 AND status = 'HELD'";
    app.count(sql, &[&reservation["id"].as_str()]).await == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_holds_of_one_range_are_one_piece_and_the_fifty_first_is_refused() {
    let app = TestApp::spawn().await;
    let hall = app.resource(50).await;
    let (start, end) = hours(10, 14);
    let holds = (0..60).map(|i| {
        app.post(&format!("fan{i}"), "/v1/reservations", &json!({"resource_id": hall, "start": start, "end": end}))
    });
    let answers = acceptance::send_at_once(holds.collect()).await;
    let won = answers.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    let refused = answers.iter().filter(|(s, _)| *s == StatusCode::CONFLICT).count();
    assert_eq!((won, refused), (50, 10), "{answers:?}");
    let [(_, load)] = pieces(&app, hall).await[..] else { panic!("one range many hold is one piece") };
    assert_eq!(load, 50);
    let db = app.db().await;
    assert_eq!(load_timeline_mismatches(&db).await, 0);
    assert_eq!(over_capacity(&db, Utc::now()).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_hold_counts_in_the_timeline_until_a_hold_that_needs_its_place_writes_it_down() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let pair = app.resource_with(short_lived(2, TTL, 8)).await;
    let (start, end) = hours(10, 11);
    for who in ["ann", "ben"] {
        let (status, body) = app.reserve(who, pair, (&start, &end), 1).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    clock.advance(Duration::seconds(TTL + 1));
    assert_eq!(loads(&app, pair).await, [2], "lapsed, not written down");
    let (status, body) = app.reserve("cat", pair, (&start, &end), 2).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(loads(&app, pair).await, [2], "only cat's two now");
    let db = app.db().await;
    assert_eq!(load_timeline_mismatches(&db).await, 0);
}

/// Lapsed holds only ever raise the timeline's peak: where it leaves room for a hold,
/// the hold is made without looking for them (the expensive part of a capacity-N
/// hold), and their places stay owed to the waitlist until the sweep writes them down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_the_timeline_has_room_for_leaves_the_lapsed_holds_to_the_sweep_and_their_places_to_the_waitlist() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let four = app.resource_with(short_lived(4, TTL, 8)).await;
    let (start, end) = hours(10, 11);
    let (status, ben) = app.reserve("ben", four, (&start, &end), 2).await;
    assert_eq!(status, StatusCode::CREATED, "{ben}");
    let ann = app.hold("ann", four, 10, 11).await;
    assert_eq!(app.confirm("ann", &ann["id"]).await.0, StatusCode::OK);
    let (status, wendy) = app.join_waitlist("wendy", four, 10, 11, 2).await;
    assert_eq!((status, wendy["status"].as_str()), (StatusCode::CREATED, Some("WAITING")), "{wendy}");
    clock.advance(Duration::seconds(TTL + 1));

    let (status, body) = app.reserve("cat", four, (&start, &end), 1).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(app.reservation("ben", &ben["id"]).await["status"], "EXPIRED", "as read, the lapse is the state");
    let db = app.db().await;
    assert!(written_held(&app, &ben).await, "ben's lapse is not written down by a hold that did not need his places");
    assert_eq!(app.waitlist_entry("wendy", &wendy).await["status"], "WAITING");
    assert_eq!(loads(&app, four).await, [4], "ben's two still counted");

    shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), Bounds::default()).await.unwrap();
    assert_eq!(app.waitlist_entry("wendy", &wendy).await["status"], "OFFERED", "ben's two places went to wendy");
    assert_eq!(loads(&app, four).await, [4], "ann, cat and wendy's offer");
    assert_eq!(load_timeline_mismatches(&db).await, 0);
    assert_eq!(over_capacity(&db, clock.now()).await, 0);
}

/// Sells every place of `hall` over `[day + from, day + to)`, one hold of one place per
/// principal, a hundred requests at a time.
async fn sell_out(app: &TestApp, hall: Uuid, places: usize, (from, to): (i64, i64)) {
    let (start, end) = hours(from, to);
    for wave in 0..places.div_ceil(100) {
        let holds = (wave * 100..places.min(wave * 100 + 100)).map(|i| {
            app.post(&format!("fan{i}"), "/v1/reservations", &json!({"resource_id": hall, "start": start, "end": end}))
        });
        let answers = acceptance::send_at_once(holds.collect()).await;
        assert!(answers.iter().all(|(s, _)| *s == StatusCode::CREATED), "every place sold: {answers:?}");
    }
}

/// Where the timeline has no room, a claim writes down the lapsed holds over the pieces
/// that lack it, not merely the oldest over its range: it never takes the place of a
/// hold not yet written down, so the timeline, which counts such a hold as a reader of
/// the events does, never goes over the capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_writes_down_the_lapsed_holds_where_the_timeline_lacks_room_and_never_counts_over_the_capacity() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let pair = app.resource_with(short_lived(2, TTL, 8)).await;
    let (ben, bea) = (app.hold("ben", pair, 10, 11).await, app.hold("bea", pair, 10, 11).await);
    clock.advance(Duration::seconds(1));
    let cat = app.hold("cat", pair, 11, 12).await;
    let ann = app.hold("ann", pair, 11, 12).await;
    assert_eq!(app.confirm("ann", &ann["id"]).await.0, StatusCode::OK);
    clock.advance(Duration::seconds(TTL + 1));

    // Both hours are full by the timeline: ben's and bea's lapsed holds, the oldest, take
    // the first; cat's lapsed hold and ann's booking the second.
    let (start, end) = hours(10, 12);
    let (status, body) = app.reserve("dan", pair, (&start, &end), 1).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let still_held = [written_held(&app, &ben).await, written_held(&app, &bea).await];
    assert_eq!(still_held.iter().filter(|&&held| held).count(), 1, "one place of the first hour written down");
    assert!(!written_held(&app, &cat).await, "and cat's, the one place of the second");
    let db = app.db().await;
    let highest = app.count("SELECT max(load) FROM resource_load WHERE resource_id = $1", &[&pair]).await;
    assert_eq!(highest, 2, "the timeline, lapsed holds counted, within the capacity");
    assert_eq!(load_timeline_mismatches(&db).await, 0);
    assert_eq!(over_capacity(&db, clock.now()).await, 0);
}

/// A move is judged without the booking it moves, and so is what stands in its way: a
/// piece full only with the booking itself does not stop the write-down of the lapsed
/// holds on the piece beyond it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_writes_down_the_lapsed_hold_beyond_the_hour_its_own_booking_fills() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let pair = app.resource_with(short_lived(2, TTL, 8)).await;
    let lapsing = app.hold("lee", pair, 11, 12).await;
    let mut confirmed = Vec::new();
    for (who, from) in [("ann", 10), ("bob", 10), ("cy", 11)] {
        let r = app.hold(who, pair, from, from + 1).await;
        assert_eq!(app.confirm(who, &r["id"]).await.0, StatusCode::OK);
        confirmed.push(r);
    }
    clock.advance(Duration::seconds(TTL + 1));

    let (start, end) = hours(10, 12);
    let (status, moved) =
        send(app.patch("ann", &reservation_path(&confirmed[0]["id"]), &json!({"start": start, "end": end}))).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    assert!(!written_held(&app, &lapsing).await, "lee's lapse written down");
    assert_eq!(app.count("SELECT max(load) FROM resource_load WHERE resource_id = $1", &[&pair]).await, 2);
    let db = app.db().await;
    assert_eq!(load_timeline_mismatches(&db).await, 0);
    assert_eq!(over_capacity(&db, clock.now()).await, 0);
}

/// The same for a booking of several items: each resource's timeline with room for
/// what the booking asks of it, the booking is made in its one statement, and the
/// lapsed holds on its range are the sweep's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booking_of_several_the_timelines_have_room_for_leaves_the_lapsed_holds_to_the_sweep() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let (stage, floor) =
        (app.resource_with(short_lived(4, TTL, 8)).await, app.resource_with(short_lived(4, TTL, 8)).await);
    let (start, end) = hours(10, 11);
    let (status, ben) = app.reserve("ben", stage, (&start, &end), 2).await;
    assert_eq!(status, StatusCode::CREATED, "{ben}");
    clock.advance(Duration::seconds(TTL + 1));

    let items = json!([{"resource_id": stage, "quantity": 1}, {"resource_id": floor, "quantity": 3}]);
    let (status, body) =
        send(app.post("alice", "/v1/reservations", &json!({"items": items, "start": start, "end": end}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(written_held(&app, &ben).await, "ben's lapse is left to the sweep");
    assert_eq!(loads(&app, stage).await, [3], "ben's two still counted");
    let db = app.db().await;
    assert_eq!(load_timeline_mismatches(&db).await, 0);

    shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), Bounds::default()).await.unwrap();
    assert_eq!(loads(&app, stage).await, [1]);
    assert_eq!(load_timeline_mismatches(&db).await, 0);
    assert_eq!(over_capacity(&db, clock.now()).await, 0);
}

/// A sold-out event whose holds all lapse at once: the sweep writes them down a batch
/// per transaction, the timeline follows each batch, and the waiters are offered
/// places in the order they joined, each offer writing down no more than the places
/// it takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_out_events_holds_lapsing_at_once_are_written_down_a_batch_a_transaction_and_offered_in_the_order_joined()
 {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let hall = app.resource_with(short_lived(600, TTL, 8)).await;
    sell_out(&app, hall, 600, (18, 22)).await;
    let mut waiters = Vec::new();
    for i in 0..5 {
        let (status, entry) = app.join_waitlist(&format!("late{i}"), hall, 18, 22, 30).await;
        assert_eq!((status, entry["status"].as_str()), (StatusCode::CREATED, Some("WAITING")), "{entry}");
        waiters.push(entry["id"].as_str().unwrap().to_owned());
    }
    clock.advance(Duration::seconds(TTL + 1));

    let bounds = Bounds { batch: 100, budget: std::time::Duration::from_secs(60) };
    let report = shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), bounds).await.unwrap();
    assert_eq!((report.expired, report.batches, report.offers), (600, 6, 5), "{report:?}");
    let db = app.db().await;
    let by_transaction: Vec<i64> = db
        .query(
            "SELECT count(*) FROM outbox WHERE kind = 'reservation.expired' GROUP BY xmin::text ORDER BY 1 DESC",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    // The first: a batch, and the 50 places that the last two offers needed beyond the
    // 100 it freed (the timeline counts lapsed holds until they are written down).
    assert_eq!(by_transaction, [150, 100, 100, 100, 100, 50], "a batch a transaction, and what the offers needed");
    let offered: Vec<String> = db
        .query("SELECT subject_id::text FROM outbox WHERE kind = 'waitlist.offered' ORDER BY seq", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(offered, waiters, "offered in the order they joined");
    assert_eq!(loads(&app, hall).await, [150], "the five offers of 30");
    assert_eq!(load_timeline_mismatches(&db).await, 0);
    assert_eq!(over_capacity(&db, clock.now()).await, 0);
}

/// The same sold-out event, and a request before the sweep comes: it writes down the
/// oldest lapsed holds for the places it asks for, and leaves the rest to the sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_on_a_sold_out_event_whose_holds_lapsed_writes_down_only_the_places_it_asks_for() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let hall = app.resource_with(short_lived(300, TTL, 8)).await;
    sell_out(&app, hall, 300, (18, 22)).await;
    clock.advance(Duration::seconds(TTL + 1));

    let (start, end) = hours(18, 22);
    let (status, body) = app.reserve("late", hall, (&start, &end), 3).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let db = app.db().await;
    let expired =
        app.count("SELECT count(*) FROM reservations WHERE resource_id = $1 AND status = 'EXPIRED'", &[&hall]).await;
    assert_eq!(expired, 3, "three places asked for, three lapsed holds written down");
    assert_eq!(loads(&app, hall).await, [300]);
    assert_eq!(load_timeline_mismatches(&db).await, 0);

    let report =
        shared::booking::sweep::expire_lapsed(&app.state.pool, clock.as_ref(), Bounds::default()).await.unwrap();
    assert_eq!(report.expired, 297, "{report:?}");
    assert_eq!(loads(&app, hall).await, [3]);
    assert_eq!(load_timeline_mismatches(&db).await, 0);
    assert_eq!(over_capacity(&db, clock.now()).await, 0);
}

/// The one write that lowers a load without the resource's lock: an item of a booking
/// of several written down from another item's resource. Here it meets a raise in
/// flight that splits the very piece it lowers, and still lowers every piece of its
/// range (it looks again, with a fresh snapshot, for the halves it could not see).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_written_down_from_another_resource_lowers_every_piece_a_raise_in_flight_split() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let room = app.resource_with(short_lived(1, TTL, 8)).await;
    let hall = app.resource_with(short_lived(3, TTL, 8)).await;
    let (start, end) = hours(10, 14);
    let items = json!([{"resource_id": room}, {"resource_id": hall}]);
    let (status, body) =
        send(app.post("alice", "/v1/reservations", &json!({"items": items, "start": start, "end": end}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    clock.advance(Duration::seconds(TTL + 1));

    // A raise on the hall in flight: its lock, and a booking inside Alice's range that
    // splits her piece in three, not committed yet.
    let mut raiser = app.db().await;
    let raise = raiser.transaction().await.unwrap();
    raise.execute("SELECT 1 FROM resources WHERE id = $1 FOR NO KEY UPDATE", &[&hall]).await.unwrap();
    raise
        .execute(
            "INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, \
             status, expires_at, source, created_at, updated_at) \
             VALUES ($1, $2, 3, 'bob', $3::text::timestamptz, $4::text::timestamptz, 1, 'CONFIRMED', NULL, \
             'request', now(), now())",
            &[&Uuid::new_v4(), &hall, &hours(11, 12).0, &hours(11, 12).1],
        )
        .await
        .unwrap();

    // Carol's hold of the room writes Alice's booking down, its hall item included,
    // under the room's lock alone; it waits for the hall's piece the raise holds.
    let carol = tokio::spawn({
        let request = app.post("carol", "/v1/reservations", &json!({"resource_id": room, "start": start, "end": end}));
        async move { send(request).await }
    });
    app.until_waiting_on_a_lock(1).await;
    raise.commit().await.unwrap();
    let (status, body) = carol.await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let db = app.db().await;
    assert_eq!(load_timeline_mismatches(&db).await, 0, "{:?}", pieces(&app, hall).await);
    let (from, to) = hours(11, 12);
    let piece = format!("[\"{}\",\"{}\")", db_time(&db, &from).await, db_time(&db, &to).await);
    assert_eq!(pieces(&app, hall).await, [(piece, 1)], "Bob's booking alone");
}

/// The hour-long starts from 8:00 to 13:00 of the test day as a slots read answers
/// them: each with its remaining places, or 0 and its reason where it is not bookable.
async fn hourly_slots(app: &TestApp, resource: Uuid) -> Vec<(String, i64, String)> {
    let (from, to) = hours(8, 14);
    let query = format!("from={from}&to={to}&duration=PT1H&unavailable=true");
    let (status, body) = send(app.get("reader", &format!("/v1/resources/{resource}/slots?{query}"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let start = |s: &Value| s["start"].as_str().unwrap().to_string();
    let open =
        body["slots"].as_array().unwrap().iter().map(|s| (start(s), s["remaining"].as_i64().unwrap(), "".into()));
    let closed =
        body["unavailable"].as_array().unwrap().iter().map(|s| (start(s), 0, s["reason"].as_str().unwrap().into()));
    let mut starts: Vec<_> = open.chain(closed).collect();
    starts.sort();
    starts
}

/// The same starts as the bookings live at `now` leave them, recomputed in SQL from the
/// rows (the peak of the live bookings over each hour), without reasons but `taken`.
async fn hourly_slots_by_the_bookings(
    app: &TestApp,
    resource: Uuid,
    now: chrono::DateTime<Utc>,
) -> Vec<(String, i64, String)> {
    let db = app.db().await;
    let capacity: i32 =
        db.query_one("SELECT capacity FROM resources WHERE id = $1", &[&resource]).await.unwrap().get(0);
    let mut starts = Vec::new();
    for hour in 8..14 {
        let (start, end) = hours(hour, hour + 1);
        let peak: i64 = db
            .query_one(
                "WITH live AS (
                     SELECT greatest(starts_at, $2::text::timestamptz) AS s, least(ends_at, $3::text::timestamptz) AS e,
                            quantity
                     FROM reservations
                     WHERE resource_id = $1 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
                       AND NOT (status = 'HELD' AND expires_at <= $4)
                       AND period && tstzrange($2::text::timestamptz, $3::text::timestamptz, '[)')
                 ), edges AS (SELECT s AS at, quantity AS delta FROM live UNION ALL SELECT e, -quantity FROM live)
                 SELECT coalesce(max(load), 0)::bigint
                 FROM (SELECT sum(delta) OVER (ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS load FROM edges) r",
                &[&resource, &start, &end, &now],
            )
            .await
            .unwrap()
            .get(0);
        let remaining = i64::from(capacity) - peak;
        starts.push(if remaining > 0 { (start, remaining, "".into()) } else { (start, 0, "taken".into()) });
    }
    starts
}

/// A free piece of an availability answer: `(start, end, remaining)`.
type FreePiece = (DateTime<Utc>, DateTime<Utc>, i64);

/// The free pieces from 8:00 to 14:00 of the test day as an availability read answers them.
async fn availability_free(app: &TestApp, resource: Uuid) -> Vec<FreePiece> {
    let (from, to) = hours(8, 14);
    let path = format!("/v1/resources/{resource}/availability?from={from}&to={to}");
    let (status, body) = send(app.get("reader", &path)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let at = |v: &Value| v.as_str().unwrap().parse::<DateTime<Utc>>().unwrap();
    body["free"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (at(&f["start"]), at(&f["end"]), f["remaining"].as_i64().unwrap()))
        .collect()
}

/// The same pieces recomputed from the rows of the bookings live at `now`: the window
/// cut at every start and end, each part's remaining places, equal neighbours joined.
async fn free_by_the_bookings(app: &TestApp, resource: Uuid, now: DateTime<Utc>) -> Vec<FreePiece> {
    let (from, to) = hours(8, 14);
    let (from, to): (DateTime<Utc>, DateTime<Utc>) = (from.parse().unwrap(), to.parse().unwrap());
    let db = app.db().await;
    let capacity: i32 =
        db.query_one("SELECT capacity FROM resources WHERE id = $1", &[&resource]).await.unwrap().get(0);
    let live: Vec<(DateTime<Utc>, DateTime<Utc>, i64)> = db
        .query(
            "SELECT greatest(starts_at, $2), least(ends_at, $3), quantity::bigint
             FROM reservations
             WHERE resource_id = $1 AND status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
               AND NOT (status = 'HELD' AND expires_at <= $4) AND period && tstzrange($2, $3, '[)')",
            &[&resource, &from, &to, &now],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let mut cuts: Vec<DateTime<Utc>> = live.iter().flat_map(|&(s, e, _)| [s, e]).chain([from, to]).collect();
    cuts.sort();
    cuts.dedup();
    let mut free: Vec<FreePiece> = Vec::new();
    for part in cuts.windows(2) {
        let load: i64 = live.iter().filter(|&&(s, e, _)| s < part[1] && e > part[0]).map(|&(_, _, q)| q).sum();
        let remaining = i64::from(capacity) - load;
        match free.last_mut() {
            Some(last) if last.1 == part[0] && last.2 == remaining => last.1 = part[1],
            _ => free.push((part[0], part[1], remaining)),
        }
    }
    free.retain(|&(_, _, remaining)| remaining > 0);
    free
}

#[tokio::test]
async fn a_big_events_slots_and_free_pieces_leave_out_lapsed_holds_and_keep_the_buffers_kept_from_before() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let hall = app.resource_with(short_lived(3, TTL, 8)).await;
    let (status, body) = app.reserve("ann", hall, (&hours(9, 11).0, &hours(9, 11).1), 1).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = send(app.post(
        "ben",
        "/v1/reservations",
        &json!({"resource_id": hall, "start": hours(10, 12).0, "end": hours(10, 12).1, "quantity": 2, "confirm": true}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let free = |h: i64, n: i64| (hours(h, h + 1).0, n, String::new());
    let taken = |h: i64| (hours(h, h + 1).0, 0, "taken".to_string());
    assert_eq!(
        hourly_slots(&app, hall).await,
        [free(8, 3), free(9, 2), taken(10), free(11, 1), free(12, 3), free(13, 3)]
    );

    // Ann's hold lapses; nothing writes it down, and the read leaves it out.
    clock.advance(Duration::seconds(TTL + 1));
    assert_eq!(loads(&app, hall).await, [1, 3, 2], "still counted");
    assert_eq!(
        hourly_slots(&app, hall).await,
        [free(8, 3), free(9, 3), free(10, 1), free(11, 1), free(12, 3), free(13, 3)]
    );
    let piece = |from: i64, to: i64, n: i64| {
        let (start, end) = hours(from, to);
        (start.parse().unwrap(), end.parse().unwrap(), n)
    };
    assert_eq!(availability_free(&app, hall).await, [piece(8, 10, 3), piece(10, 12, 1), piece(12, 14, 3)]);

    // Cat books the hall whole while it keeps an hour after each booking; the buffer is
    // then cleared, with another rule left in force. Her booking still keeps its hour:
    // the read finds it (by the index of wider kept ranges) and judges by the bookings.
    let patch = |body: Value| app.patch("admin", &format!("/v1/resources/{hall}"), &body);
    let (status, body) = send(patch(json!({"buffer_after_minutes": 60}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app.reserve("cat", hall, (&hours(12, 13).0, &hours(12, 13).1), 3).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = send(patch(json!({"buffer_after_minutes": 0, "min_notice_minutes": 5}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let buffer = (hours(13, 14).0, 0, "buffer".to_string());
    assert_eq!(hourly_slots(&app, hall).await, [free(8, 3), free(9, 3), free(10, 1), free(11, 1), taken(12), buffer]);
    assert_eq!(availability_free(&app, hall).await, [piece(8, 10, 3), piece(10, 12, 1)]);
}

/// A timestamp as PostgreSQL prints it in a range.
async fn db_time(db: &deadpool_postgres::Object, at: &str) -> String {
    db.query_one("SELECT $1::text::timestamptz::text", &[&at]).await.unwrap().get(0)
}

/// Every write path of a capacity-N resource raced a few at a time: holds with and
/// without an Idempotency-Key, bookings of several with an item on the big resource, a
/// pool's pick, confirms, extends, moves, releases, waitlist entries served as places
/// free, with the clock moving through expiries, the sweep running and an admin
/// changing the capacity. After every step the timeline equals the bookings, no
/// resource is over its capacity, every booking is whole, and the slots and the free
/// pieces of availability read as the bookings leave them.
#[tokio::test]
async fn every_write_path_raced_with_expiry_the_sweep_and_capacity_changes_keeps_the_timeline_exact() {
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let app = TestApp::spawn_with_clock(clock.clone()).await;
    let big = app.resource_with(short_lived(6, TTL, 8)).await;
    let small = app.resource_with(short_lived(2, TTL, 8)).await;
    let single = app.resource_with(short_lived(1, TTL, 8)).await;
    let (_, pool) = send(app.post(
        "admin",
        "/v1/pools",
        &json!({"name": "P", "resource_ids": [small, single], "strategy": "least_booked"}),
    ))
    .await;
    let pool = pool["id"].clone();
    let resources = [(big, 6), (small, 2), (single, 1)];
    let seed = std::env::var("LOAD_TIMELINE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x10ad_u64);
    let mut rng = acceptance::Rng(seed | 1);
    let mut made: Vec<(String, Value)> = Vec::new();
    let mut capacity = 6;
    for step in 0..150 {
        let mut requests = Vec::new();
        for _ in 0..1 + rng.below(5) {
            let who = format!("p{}", rng.below(5));
            let from = 9 + rng.below(3) as i64;
            let (start, end) = hours(from, from + 1 + rng.below(2) as i64);
            let (r1, c1) = if rng.below(2) == 0 { resources[0] } else { resources[rng.below(3)] };
            let confirm = rng.below(4) == 0;
            let kind = if made.is_empty() { rng.below(4) } else { rng.below(11) };
            let req = match kind {
                0 => app.post(
                    &who,
                    "/v1/reservations",
                    &json!({"resource_id": r1, "start": start, "end": end,
                        "quantity": 1 + rng.below(c1.min(3)), "confirm": confirm}),
                ),
                1 => app
                    .post(
                        &who,
                        "/v1/reservations",
                        &json!({"resource_id": big, "start": start, "end": end, "quantity": 1 + rng.below(2)}),
                    )
                    .header("idempotency-key", format!("k{}", rng.below(8))),
                2 => app.post(
                    &who,
                    "/v1/reservations",
                    &json!({"start": start, "end": end, "confirm": confirm,
                        "items": [{"resource_id": big, "quantity": 1 + rng.below(2)}, {"pool_id": pool}]}),
                ),
                3 => app.post(
                    &who,
                    &format!("/v1/resources/{big}/waitlist"),
                    &json!({"start": start, "end": end, "quantity": 1 + rng.below(2)}),
                ),
                // Capacity changes: the big resource's between 4 and 8, and the single
                // unit's between 1 and 2 (its bookings join and leave the timeline).
                4 if rng.below(2) == 0 => {
                    capacity = 4 + rng.below(5) as i32;
                    app.patch("admin", &format!("/v1/resources/{big}"), &json!({"capacity": capacity}))
                }
                4 => app.patch("admin", &format!("/v1/resources/{single}"), &json!({"capacity": 1 + rng.below(2)})),
                _ => {
                    let (owner, r) = &made[rng.below(made.len())];
                    let path = reservation_path(&r["id"]);
                    match kind {
                        5 | 6 => app.http.post(app.url(&format!("{path}/confirm"))).header("x-principal", owner),
                        7 => app.post(owner, &format!("{path}/extend"), &json!({})),
                        8 => app.patch(owner, &path, &json!({"start": start, "end": end})),
                        _ => app.delete(owner, &path),
                    }
                }
            };
            requests.push((who, kind, req));
        }
        // Half the steps start just before some booking's expiry, and the clock moves
        // through it while the step's requests run.
        let ticking = acceptance::tick_through_an_expiry(&clock, &made, &mut rng);
        let sweeping = (rng.below(3) == 0).then(|| {
            let (pool, clock) = (app.state.pool.clone(), clock.clone());
            tokio::spawn(async move {
                shared::booking::sweep::expire_lapsed(&pool, clock.as_ref(), Bounds::default()).await
            })
        });
        let kinds: Vec<(String, usize)> = requests.iter().map(|(w, k, _)| (w.clone(), *k)).collect();
        let answers = acceptance::send_at_once(requests.into_iter().map(|(_, _, r)| r).collect()).await;
        ticking.await.unwrap();
        if let Some(sweep) = sweeping {
            sweep.await.unwrap().unwrap();
        }
        for ((who, kind), (status, body)) in kinds.into_iter().zip(&answers) {
            assert!(!status.is_server_error(), "step {step}: {status} {body}");
            if kind <= 2 && *status == StatusCode::CREATED {
                made.push((who, body.clone()));
            }
        }
        if rng.below(3) == 0 {
            clock.advance(Duration::milliseconds(300 + rng.below(2500) as i64));
        }
        let db = app.db().await;
        assert_eq!(load_timeline_mismatches(&db).await, 0, "step {step} (seed {seed}): {answers:?}");
        assert_eq!(over_capacity(&db, clock.now()).await, 0, "step {step} (seed {seed}): {answers:?}");
        assert_eq!(split_bookings(&db, clock.now()).await, 0, "step {step} (seed {seed}): {answers:?}");
        for r in [big, small] {
            let by_bookings = hourly_slots_by_the_bookings(&app, r, clock.now()).await;
            assert_eq!(hourly_slots(&app, r).await, by_bookings, "step {step} (seed {seed}): slots of {r}");
            let by_bookings = free_by_the_bookings(&app, r, clock.now()).await;
            assert_eq!(availability_free(&app, r).await, by_bookings, "step {step} (seed {seed}): free of {r}");
        }
        made.retain(|_| rng.below(10) != 0);
    }
    let db = app.db().await;
    let counted: i64 = db
        .query_one("SELECT count(*) FROM resource_load WHERE resource_id = $1 AND load > 0", &[&big])
        .await
        .unwrap()
        .get(0);
    assert!(counted > 0, "the run left bookings on the big resource (capacity {capacity})");
}
