//! A database the size of a busy year, written by SQL alone (`generate_series`), for
//! the test that every list is served by an index and for the lists' bench: a million
//! reservations of 10,000 owners over 2,000 resources, one in a hundred with an
//! upstream intent, and 100,000 waitlist entries. Statistics are gathered at the end,
//! so the planner sees the tables as they are.

use chrono::{DateTime, Duration, Utc};

pub const RESERVATIONS: i64 = 1_000_000;
pub const OWNERS: i64 = 10_000;
pub const RESOURCES: i64 = 2_000;
pub const WAITLIST_ENTRIES: i64 = 100_000;

/// Owner `i` (0-based), as the generated rows name them.
pub fn owner(i: i64) -> String {
    format!("user{i}")
}

/// The first calendar day of the generated reservations; they cover about 210 days
/// from there (a reservation every 5 minutes of the calendar per resource band).
pub fn first_day() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2027-01-01T00:00:00Z").expect("a constant").with_timezone(&Utc)
}

/// When the newest generated row was written; older ones one second apart before it.
pub fn newest_created_at() -> DateTime<Utc> {
    first_day() - Duration::days(1)
}

/// The rows of an empty, migrated database. One reservation in ten is active (held or
/// confirmed), the others settled (released, expired, cancelled): the mix a list's
/// status filter meets.
pub const FILL: &str = r#"

    INSERT INTO resources (id, name, capacity, authority, hold_ttl_seconds, offer_ttl_seconds, created_by, created_at,
                           updated_at)
    SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'Room ' || g, 10, 'local', 300, 900,
           'admin', timestamptz '2026-12-31T00:00:00Z' - make_interval(secs => 2000000 + g),
           timestamptz '2026-12-31T00:00:00Z' - make_interval(secs => 2000000 + g)
    FROM generate_series(0, 1999) g;

    INSERT INTO reservations (id, resource_id, resource_capacity, owner, starts_at, ends_at, quantity, status,
                              expires_at, failure_reason, source, created_at, updated_at)
    SELECT ('00000000-0000-4000-9000-' || lpad(to_hex(g), 12, '0'))::uuid,
           ('00000000-0000-4000-8000-' || lpad(to_hex(g % 2000), 12, '0'))::uuid, 10,
           'user' || (g % 10000),
           timestamptz '2027-01-01T00:00:00Z' + make_interval(mins => 5 * (g / 16)),
           timestamptz '2027-01-01T00:00:00Z' + make_interval(mins => 5 * (g / 16) + 60),
           1, s.status,
           CASE WHEN s.status = 'HELD' THEN c.at + interval '5 minutes' END,
           NULL, 'request', c.at, c.at
    FROM generate_series(0, 999999) g
    CROSS JOIN LATERAL (SELECT timestamptz '2026-12-31T00:00:00Z' - make_interval(secs => 999999 - g) AS at) c
    CROSS JOIN LATERAL (SELECT (ARRAY['CONFIRMED', 'RELEASED', 'EXPIRED', 'CANCELLED', 'RELEASED', 'EXPIRED',
                                      'CANCELLED', 'RELEASED', 'EXPIRED', 'CANCELLED', 'RELEASED', 'EXPIRED',
                                      'CANCELLED', 'RELEASED', 'EXPIRED', 'CANCELLED', 'RELEASED', 'EXPIRED',
                                      'CANCELLED', 'HELD'])[g % 20 + 1] AS status) s;

    INSERT INTO intents (id, reservation_id, upstream_ref, state, not_before, created_at, updated_at, kind)
    SELECT ('00000000-0000-4000-a000-' || lpad(to_hex(g), 12, '0'))::uuid,
           ('00000000-0000-4000-9000-' || lpad(to_hex(g), 12, '0'))::uuid,
           'seat-' || g, 'FAILED_UPSTREAM', now(), now(), now(), 'reserve'
    FROM generate_series(0, 999999, 100) g;

    INSERT INTO waitlist_entries (id, resource_id, owner, starts_at, ends_at, quantity, status, created_at, updated_at)
    SELECT ('00000000-0000-4000-b000-' || lpad(to_hex(g), 12, '0'))::uuid,
           ('00000000-0000-4000-8000-' || lpad(to_hex(g % 2000), 12, '0'))::uuid,
           'user' || (g % 10000),
           -- One hour each, so that no owner waits twice for one range (the waitlist's unique index).
           timestamptz '2027-01-01T00:00:00Z' + make_interval(hours => g),
           timestamptz '2027-01-01T00:00:00Z' + make_interval(hours => g + 1),
           1, (ARRAY['WAITING', 'CANCELLED', 'EXPIRED', 'WAITING'])[g % 4 + 1],
           timestamptz '2026-12-31T00:00:00Z', timestamptz '2026-12-31T00:00:00Z'
    FROM generate_series(0, 99999) g;
"#;

/// Fills an empty, migrated database with [`FILL`] and analyzes it. The secondary
/// indexes are dropped for the load and built again from their own definitions
/// afterwards, each in one sorted pass instead of a million inserts: the same indexes,
/// in a third of the time. Constraints (keys, foreign keys, checks) stay on.
pub async fn fill(client: &tokio_postgres::Client) -> Result<(), tokio_postgres::Error> {
    client
        .batch_execute(&format!(
            r#"
            BEGIN;
            SET LOCAL synchronous_commit = off;
            SET LOCAL maintenance_work_mem = '256MB';
            CREATE TEMPORARY TABLE bulk_secondary_indexes ON COMMIT DROP AS
                SELECT indexname, indexdef FROM pg_indexes i
                WHERE schemaname = current_schema() AND tablename IN ('reservations', 'intents', 'waitlist_entries')
                  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname);
            DO $$ DECLARE i record; BEGIN
                FOR i IN SELECT indexname FROM bulk_secondary_indexes LOOP EXECUTE format('DROP INDEX %I', i.indexname); END LOOP;
            END $$;
            {FILL}
            DO $$ DECLARE i record; BEGIN
                FOR i IN SELECT indexdef FROM bulk_secondary_indexes LOOP EXECUTE i.indexdef; END LOOP;
            END $$;
            COMMIT;
            ANALYZE resources, reservations, intents, waitlist_entries;
            "#
        ))
        .await
}

/// A resource id of the generated ones (`i` below [`RESOURCES`]).
pub fn resource(i: i64) -> uuid::Uuid {
    format!("00000000-0000-4000-8000-{i:012x}").parse().expect("a UUID")
}
