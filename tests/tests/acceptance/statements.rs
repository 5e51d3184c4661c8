//! The SQL of every named statement against the migrated schema: a typo or a dropped
//! column fails here, not in a request.

use acceptance::TestApp;
use shared::db::hold::{self, Confirmation, Hold, NewHold};

#[tokio::test]
async fn every_named_statement_prepares_against_the_migrated_schema() {
    let app = TestApp::spawn().await;
    let db = app.db().await;
    let mut failures = Vec::new();
    for (name, sql) in shared::db::STATEMENTS {
        if let Err(e) = db.prepare(sql).await {
            failures.push(format!(
                "{name}: {}",
                e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_string())
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// tokio-postgres encodes a parameter only as a type it knows: a parameter that
/// PostgreSQL infers as a domain (`SET status = $1` where `status` is
/// `reservation_status`) is refused before it is sent, at run time.
#[tokio::test]
async fn no_named_statement_asks_for_a_parameter_of_a_domain_type() {
    let app = TestApp::spawn().await;
    let db = app.db().await;
    let mut domains = Vec::new();
    for (name, sql) in shared::db::STATEMENTS {
        let statement = db.prepare(sql).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        for (i, ty) in statement.params().iter().enumerate() {
            if let tokio_postgres::types::Kind::Domain(_) = ty.kind() {
                domains.push(format!("{name}: ${} is {}", i + 1, ty.name()));
            }
        }
    }
    assert!(domains.is_empty(), "cast these parameters to their base type: {domains:#?}");
}

/// The reservation's lists and its metadata's shape are domains; a row written past
/// the application is refused under the constraint of its column.
#[tokio::test]
async fn a_reservation_row_outside_the_known_values_is_refused_under_the_constraint_of_its_column() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let db = app.db().await;
    let cases = [
        ("status", "'PENDING'", "NULL", "'request'", "'{}'", "reservations_status_known"),
        ("source", "'CONFIRMED'", "NULL", "'import'", "'{}'", "reservations_source_known"),
        ("failure reason", "'FAILED'", "'timeout'", "'request'", "'{}'", "reservations_failure_reason_known"),
        ("failure without a reason", "'FAILED'", "NULL", "'request'", "'{}'", "reservations_failure_reason"),
        ("a reason without a failure", "'CONFIRMED'", "'race'", "'request'", "'{}'", "reservations_failure_reason"),
        ("metadata", "'CONFIRMED'", "NULL", "'request'", "'[1]'", "reservations_metadata_object"),
    ];
    for (what, status, reason, source, metadata, constraint) in cases {
        let refused = db
            .execute(
                &format!(
                    "INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, \
                     quantity, status, expires_at, failure_reason, source, created_at, updated_at, metadata) \
                     VALUES (gen_random_uuid(), $1, 1, 'mallory', '2027-02-01T10:00:00Z', \
                     '2027-02-01T11:00:00Z', 1, {status}, NULL, {reason}, {source}, now(), now(), {metadata})"
                ),
                &[&room],
            )
            .await
            .expect_err(what);
        let refused = refused.as_db_error().unwrap_or_else(|| panic!("{what}: {refused}"));
        assert_eq!(refused.code(), &tokio_postgres::error::SqlState::CHECK_VIOLATION, "{what}");
        assert_eq!(refused.constraint(), Some(constraint), "{what}: {}", refused.message());
    }
    let stored: i64 = db.query_one("SELECT count(*) FROM reservations", &[]).await.unwrap().get(0);
    assert_eq!(stored, 0);
}

/// The five rules that compare a reservation's columns with each other are one check
/// (a PL/pgSQL function over the row); a row that breaks one, written or changed past
/// the application, is refused under that rule's own name.
#[tokio::test]
async fn a_reservation_row_whose_columns_disagree_is_refused_under_the_rule_it_breaks() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let db = app.db().await;
    let insert = |starts, quantity, status, expires, reason, buffered| {
        format!(
            "INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, \
             status, expires_at, failure_reason, source, created_at, updated_at, buffered) \
             VALUES (gen_random_uuid(), $1, 1, 'mallory', {starts}, '2027-02-01T11:00:00Z', {quantity}, {status}, \
             {expires}, {reason}, 'request', now(), now(), {buffered})"
        )
    };
    let (start, hour, later) =
        ("'2027-02-01T10:00:00Z'", "'[2027-02-01T10:00:00Z,2027-02-01T11:00:00Z)'", "now() + interval '1 hour'");
    // (A range that ends before it starts is refused before any check, by tstzrange in
    // the generated `period`.)
    let cases = [
        (
            "an empty range",
            insert("'2027-02-01T11:00:00Z'", "1", "'CONFIRMED'", "NULL", "NULL", "NULL"),
            "reservations_period_ordered",
        ),
        ("no place", insert(start, "0", "'CONFIRMED'", "NULL", "NULL", "NULL"), "reservations_quantity_fits"),
        (
            "more than the capacity",
            insert(start, "2", "'CONFIRMED'", "NULL", "NULL", "NULL"),
            "reservations_quantity_fits",
        ),
        ("a hold that never lapses", insert(start, "1", "'HELD'", "NULL", "NULL", "NULL"), "reservations_held_expires"),
        (
            "failure without a reason",
            insert(start, "1", "'FAILED'", "NULL", "NULL", "NULL"),
            "reservations_failure_reason",
        ),
        (
            "a reason without a failure",
            insert(start, "1", "'HELD'", later, "'race'", "NULL"),
            "reservations_failure_reason",
        ),
        (
            "buffers narrower than the period",
            insert(start, "1", "'CONFIRMED'", "NULL", "NULL", "'[2027-02-01T10:30:00Z,2027-02-01T11:00:00Z)'"),
            "reservations_buffered_holds_period",
        ),
    ];
    for (what, sql, constraint) in &cases {
        let refused = db.execute(sql.as_str(), &[&room]).await.expect_err(what);
        let refused = refused.as_db_error().unwrap_or_else(|| panic!("{what}: {refused}"));
        assert_eq!(refused.code(), &tokio_postgres::error::SqlState::CHECK_VIOLATION, "{what}");
        assert_eq!(refused.constraint(), Some(*constraint), "{what}: {}", refused.message());
        assert_eq!(refused.table(), Some("reservations"), "{what}");
    }
    // A row that keeps every rule is written, and a change that breaks one is refused.
    let written = db.execute(insert(start, "1", "'HELD'", later, "NULL", hour).as_str(), &[&room]).await;
    assert_eq!(written.expect("a row that keeps every rule"), 1);
    let changes = [
        ("a hold's expiry taken away", "expires_at = NULL", "reservations_held_expires"),
        ("failed without a reason", "status = 'FAILED'", "reservations_failure_reason"),
        ("the range emptied", "starts_at = ends_at", "reservations_period_ordered"),
    ];
    for (what, set, constraint) in changes {
        let refused = db.execute(&format!("UPDATE reservations SET {set}"), &[]).await.expect_err(what);
        let refused = refused.as_db_error().unwrap_or_else(|| panic!("{what}: {refused}"));
        assert_eq!(refused.code(), &tokio_postgres::error::SqlState::CHECK_VIOLATION, "{what}");
        assert_eq!(refused.constraint(), Some(constraint), "{what}: {}", refused.message());
    }
    let stored: i64 =
        db.query_one("SELECT count(*) FROM reservations WHERE status = 'HELD'", &[]).await.unwrap().get(0);
    assert_eq!(stored, 1);
}

/// A hold of 10:00-11:00 tomorrow as the server makes it: both ids from the server.
fn new_hold(room: uuid::Uuid, metadata: &shared::domain::Metadata) -> NewHold<'_> {
    let start = acceptance::day() + chrono::Duration::hours(10);
    NewHold {
        id: uuid::Uuid::now_v7(),
        event_id: uuid::Uuid::now_v7(),
        resource_id: room,
        owner: "alice",
        start,
        end: start + chrono::Duration::hours(1),
        quantity: 1,
        confirmation: Confirmation::Later,
        metadata,
        now: chrono::Utc::now(),
        rules_version: None,
        max_holds: 0,
        event_lease: None,
    }
}

/// The server makes the id of a hold's event, as it makes the reservation's: the
/// event in the outbox is the one the server named, on either path of the hold.
#[tokio::test]
async fn a_hold_records_its_event_under_the_id_the_server_made() {
    let app = TestApp::spawn().await;
    let db = app.db().await;
    let metadata = shared::domain::Metadata::new();
    for capacity in [1, 2] {
        let room = app.resource(capacity).await;
        let hold = new_hold(room, &metadata);
        let held = hold::hold(&db, &hold).await.unwrap();
        assert!(matches!(held, Hold::Reserved { .. }), "capacity {capacity}");
        let events: Vec<uuid::Uuid> = db
            .query("SELECT id FROM outbox WHERE subject_id = $1", &[&hold.id])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(events, [hold.event_id], "capacity {capacity}");
    }
}

/// The capacity-1 hold's insert has the exclusion constraint as its only arbiter:
/// an id already taken is an error, never read as a taken range.
#[tokio::test]
async fn a_hold_whose_id_is_taken_is_an_error_not_a_taken_range() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let db = app.db().await;
    let id = uuid::Uuid::now_v7();
    let hold = |from_hour| {
        let (start, end) = acceptance::hours(from_hour, from_hour + 1);
        let db = &db;
        async move {
            db.query_one(
                "SELECT outcome FROM reservation_hold($1, $2, 'alice', $3::text::timestamptz, \
                 $4::text::timestamptz, 1, false, now(), '{}', gen_random_uuid())",
                &[&id, &room, &start, &end],
            )
            .await
            .map(|row| row.get::<_, String>(0))
        }
    };
    assert_eq!(hold(10).await.unwrap(), "reserved");
    let again = hold(12).await.expect_err("a second reservation under the same id");
    assert_eq!(again.code(), Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION), "{again:?}");
    let stored: i64 = db.query_one("SELECT count(*) FROM reservations", &[]).await.unwrap().get(0);
    assert_eq!(stored, 1);
}
