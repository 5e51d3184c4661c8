//! The SQL of every named statement against the migrated schema: a typo or a dropped
//! column fails here, not in a request.

use acceptance::TestApp;

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
/// `reservation_status`, V23) is refused before it is sent, at run time.
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

/// The reservation's lists and its metadata's shape are domains since V23; a row
/// written past the application is refused as before, under the same names.
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
/// since V24 (a PL/pgSQL function over the row); a row that breaks one, written or
/// changed past the application, is still refused under that rule's own name.
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
