//! SQL for the `series` and `series_occurrences` tables: a recurring series, its
//! occurrences, and the reservations a scoped change acts on.

use super::{DbError, GenericClient};
use chrono::{DateTime, Utc};
use tokio_postgres::types::Json;
use uuid::Uuid;

statements![INSERT, INSERT_OCCURRENCES, TAG, GET, OCCURRENCES, PLACE_OF, IN_SCOPE];

pub const INSERT: &str = "INSERT INTO series (id, owner, resource_id, time_zone, recurrence, mode, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// Every occurrence of series `$1`: `$2` starts, `$3` ends, `$4` reservations (NULL:
/// not held) and `$5` problems (NULL: held), by position.
pub const INSERT_OCCURRENCES: &str = "INSERT INTO series_occurrences \
     (series_id, position, starts_at, ends_at, reservation_id, problem) \
     SELECT $1, o.n - 1, o.s, o.e, o.r, o.p \
     FROM unnest($2::timestamptz[], $3::timestamptz[], $4::uuid[], $5::jsonb[]) WITH ORDINALITY AS o(s, e, r, p, n)";

/// Names series `$1` on the reservations `$2` and on every item of those that are
/// bookings of several, and in the events their holds wrote at `$3` (before the series
/// had an id), in the same transaction: no relay has seen them yet. Those events are
/// pending at exactly `$3`, among the unpublished events the outbox's partial index holds.
pub const TAG: &str = "WITH tagged AS (UPDATE reservations SET series_id = $1 WHERE id = ANY($2) OR booking_id = ANY($2)) \
     UPDATE outbox SET payload = payload || jsonb_build_object('series_id', $1::uuid) \
     WHERE topic = 'events' AND published_at IS NULL AND next_attempt_at = $3 AND subject_id = ANY($2)";

pub const GET: &str =
    "SELECT id, owner, resource_id, time_zone, recurrence, mode, created_at FROM series WHERE id = $1";

/// The occurrences of series `$1` in order, each as its reservation stands now (moved,
/// confirmed, cancelled; a hold lapsed by `$2` reads `EXPIRED`), or as it was refused.
pub const OCCURRENCES: &str = r#"
    SELECT o.position, coalesce(r.starts_at, o.starts_at) AS starts_at, coalesce(r.ends_at, o.ends_at) AS ends_at,
           o.reservation_id, o.problem,
           CASE WHEN r.status = 'HELD' AND r.expires_at <= $2 THEN 'EXPIRED' ELSE r.status END AS status
    FROM series_occurrences o
    LEFT JOIN reservations r ON r.id = o.reservation_id
    WHERE o.series_id = $1
    ORDER BY o.position"#;

/// The position of reservation `$2` in series `$1`.
pub const PLACE_OF: &str = "SELECT position FROM series_occurrences WHERE series_id = $1 AND reservation_id = $2";

/// The live reservations of series `$1` from position `$2` on, in series order: what a
/// scoped change acts on. A hold lapsed by `$3` is left out; settled ones too.
pub const IN_SCOPE: &str = r#"
    SELECT o.reservation_id
    FROM series_occurrences o
    JOIN reservations r ON r.id = o.reservation_id
    WHERE o.series_id = $1 AND o.position >= $2
      AND r.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
      AND NOT (r.status = 'HELD' AND r.expires_at <= $3)
    ORDER BY o.position"#;

pub struct NewSeries<'a> {
    pub id: Uuid,
    pub owner: &'a str,
    pub resource_id: Uuid,
    pub time_zone: &'a str,
    pub recurrence: &'a str,
    pub mode: &'a str,
    pub now: DateTime<Utc>,
}

/// One occurrence as recorded: held (its reservation) or refused (its problem).
pub struct OccurrenceRow {
    pub position: i32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub reservation_id: Option<Uuid>,
    pub problem: Option<serde_json::Value>,
    pub status: Option<String>,
}

pub struct SeriesRow {
    pub id: Uuid,
    pub owner: String,
    pub resource_id: Uuid,
    pub time_zone: String,
    pub recurrence: String,
    pub mode: String,
    pub created_at: DateTime<Utc>,
}

/// Records a series and its occurrences, and names it on the reservations held.
pub async fn insert(c: &impl GenericClient, s: &NewSeries<'_>, occurrences: &[OccurrenceRow]) -> Result<(), DbError> {
    c.exec(INSERT, &[&s.id, &s.owner, &s.resource_id, &s.time_zone, &s.recurrence, &s.mode, &s.now]).await?;
    let starts: Vec<DateTime<Utc>> = occurrences.iter().map(|o| o.start).collect();
    let ends: Vec<DateTime<Utc>> = occurrences.iter().map(|o| o.end).collect();
    let held: Vec<Option<Uuid>> = occurrences.iter().map(|o| o.reservation_id).collect();
    let problems: Vec<Option<Json<&serde_json::Value>>> =
        occurrences.iter().map(|o| o.problem.as_ref().map(Json)).collect();
    c.exec(INSERT_OCCURRENCES, &[&s.id, &starts, &ends, &held, &problems]).await?;
    let ids: Vec<Uuid> = held.into_iter().flatten().collect();
    c.exec(TAG, &[&s.id, &ids, &s.now]).await?;
    Ok(())
}

pub async fn get(c: &impl GenericClient, id: Uuid) -> Result<Option<SeriesRow>, DbError> {
    let Some(row) = c.opt_row(GET, &[&id]).await? else { return Ok(None) };
    Ok(Some(SeriesRow {
        id: row.try_get("id")?,
        owner: row.try_get("owner")?,
        resource_id: row.try_get("resource_id")?,
        time_zone: row.try_get("time_zone")?,
        recurrence: row.try_get("recurrence")?,
        mode: row.try_get("mode")?,
        created_at: row.try_get("created_at")?,
    }))
}

pub async fn occurrences(c: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<Vec<OccurrenceRow>, DbError> {
    c.rows(OCCURRENCES, &[&id, &now])
        .await?
        .iter()
        .map(|row| {
            Ok(OccurrenceRow {
                position: row.try_get("position")?,
                start: row.try_get("starts_at")?,
                end: row.try_get("ends_at")?,
                reservation_id: row.try_get("reservation_id")?,
                problem: row.try_get::<_, Option<Json<serde_json::Value>>>("problem")?.map(|j| j.0),
                status: row.try_get("status")?,
            })
        })
        .collect()
}

pub async fn place_of(c: &impl GenericClient, series: Uuid, reservation: Uuid) -> Result<Option<i32>, DbError> {
    Ok(c.opt_row(PLACE_OF, &[&series, &reservation]).await?.map(|row| row.try_get(0)).transpose()?)
}

pub async fn in_scope(
    c: &impl GenericClient,
    series: Uuid,
    from: i32,
    now: DateTime<Utc>,
) -> Result<Vec<Uuid>, DbError> {
    c.rows(IN_SCOPE, &[&series, &from, &now]).await?.iter().map(|row| Ok(row.try_get(0)?)).collect()
}
