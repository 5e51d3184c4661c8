//! The check after each phase of the core bench: no resource holds more than its
//! capacity at any instant, no booking lies outside its resource's opening hours, and
//! no booking of several items has some items active and others not.
//! A fast answer is worth nothing if it double-booked, so the table itself is read,
//! not the answers.
//!
//! The load is computed here on its own, in one query over every resource, and not by
//! the service's `reservation_load`: the function under test does not judge itself.
//! Active claims count as the acceptance tests count them: a hold past its expiry does
//! not, whether or not it has been written down yet.

use crate::setup::BoxError;
use tokio_postgres::Client;

/// The peak load of every resource over its active claims, ends before starts at one
/// instant (half-open ranges), where it exceeds the capacity.
const OVER_CAPACITY: &str = r#"
    WITH live AS (
        SELECT r.resource_id, r.starts_at, r.ends_at, r.quantity
        FROM reservations r
        WHERE r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NOT (r.status = 'HELD' AND r.expires_at <= now())
    ), events AS (
        SELECT resource_id, starts_at AS at, quantity AS delta FROM live
        UNION ALL SELECT resource_id, ends_at, -quantity FROM live
    ), running AS (
        SELECT resource_id, sum(delta) OVER (PARTITION BY resource_id ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS load
        FROM events
    )
    SELECT res.id::text, res.capacity, max(running.load)::bigint AS peak
    FROM running JOIN resources res ON res.id = running.resource_id
    GROUP BY res.id, res.capacity
    HAVING max(running.load) > res.capacity"#;

/// The active bookings of resources with a schedule that lie outside one opening range
/// of the local day they start on (the exception's hours on a date that has one, else
/// the weekday's), read in PostgreSQL's own time zone database. A booking that crosses
/// local midnight counts as outside: the bench makes none.
const OUTSIDE_HOURS: &str = r#"
    SELECT count(*)
    FROM reservations b
    JOIN resources res ON res.id = b.resource_id
    CROSS JOIN LATERAL (SELECT b.starts_at AT TIME ZONE res.time_zone AS start_local,
                               b.ends_at AT TIME ZONE res.time_zone AS end_local) l
    WHERE res.schedule IS NOT NULL AND b.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
      AND NOT EXISTS (
          SELECT 1
          FROM jsonb_array_elements(coalesce(
                   (SELECT e -> 'hours' FROM jsonb_array_elements(res.schedule -> 'exceptions') e
                    WHERE e ->> 'date' = to_char(l.start_local, 'YYYY-MM-DD')),
                   res.schedule -> 'weekly'
                       -> (ARRAY['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'])[extract(isodow FROM l.start_local)::int],
                   '[]')) h
          WHERE l.start_local >= date_trunc('day', l.start_local) + (h ->> 0)::interval
            AND l.end_local <= date_trunc('day', l.start_local) + (h ->> 1)::interval)"#;

pub struct Check {
    /// Active claims read, over how many resources.
    pub claims: i64,
    pub resources: i64,
    /// Each resource over its capacity: (id, capacity, peak).
    pub over: Vec<(String, i32, i64)>,
    /// Active bookings outside their resource's opening hours.
    pub outside_hours: i64,
    /// Bookings of several items with some items active and others not.
    pub partial_bookings: i64,
}

impl Check {
    pub fn is_correct(&self) -> bool {
        self.over.is_empty() && self.outside_hours == 0 && self.partial_bookings == 0
    }
}

/// Bookings of several items whose rows disagree on being active.
const PARTIAL_BOOKINGS: &str = "
    SELECT count(*) FROM (
        SELECT booking_id
        FROM reservations
        WHERE booking_id IS NOT NULL
        GROUP BY booking_id
        HAVING count(DISTINCT (status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
                               AND NOT (status = 'HELD' AND expires_at <= now()))) > 1
    ) partial";

pub async fn check(db: &Client) -> Result<Check, BoxError> {
    let over = db.query(OVER_CAPACITY, &[]).await?.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    let counts = db
        .query_one(
            "SELECT count(*), count(DISTINCT resource_id) FROM reservations \
             WHERE status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NOT (status = 'HELD' AND expires_at <= now())",
            &[],
        )
        .await?;
    let outside_hours = db.query_one(OUTSIDE_HOURS, &[]).await?.get(0);
    let partial_bookings = db.query_one(PARTIAL_BOOKINGS, &[]).await?.get(0);
    Ok(Check { claims: counts.get(0), resources: counts.get(1), over, outside_hours, partial_bookings })
}
