//! SQL for the reservations lists: a page at a time, newest first, by keyset.

use super::reservations::from_row;
use super::{DbError, GenericClient};
use crate::domain::{Reservation, Status};
use chrono::{DateTime, Utc};
use uuid::Uuid;

statements![LIST_BY_OWNER, LIST_BY_OWNER_ON_RESOURCE, LIST_BY_RESOURCE, LIST_ALL];

/// A page of a reservations list, newest first: the bookings that `$scope` and the
/// filters keep, after the keyset position `($7, $8)` (none: from the newest), at most
/// `$9` of them, each with its upstream intent as [`super::reservations::GET`] reads it.
/// The page is cut before the joins, so they touch only its rows.
///
/// A booking of several is listed once, as its lead row (its items share the lead's
/// owner, `created_at`, status and range). Where the scope names no resource the lead
/// is in it whenever an item is, and the page reads leads alone (`leads:`), in the
/// index's order. Where it names one, any row of a booking may be the one there
/// (`any_row:`): the page reads them and keeps each booking once, by its lead's id,
/// which a sort within each `created_at` of the resource's rows puts in order.
///
/// Parameters, the same for every scope: `$1` owner, `$2` resource (null: any), `$3`
/// now (a hold lapsed by then is `EXPIRED` for the status filter too, as it reads),
/// `$4` statuses (null: any), `$5` from and `$6` to (the reservation overlaps
/// `[from, to)`; null: unbounded), `$7` created_at and `$8` id of the last row of the
/// page before, `$9` the number of rows.
macro_rules! list_page {
    (leads: $scope:literal) => {
        list_page!(@page "SELECT created_at, id AS lead_id", "id", $scope, "AND (booking_id IS NULL OR booking_id = id)")
    };
    (any_row: $scope:literal) => {
        list_page!(@page "SELECT DISTINCT created_at, coalesce(booking_id, id) AS lead_id", "coalesce(booking_id, id)", $scope, "")
    };
    (@page $select:literal, $lead:literal, $scope:literal, $leads_only:literal) => {
        concat!(
            r#"
    SELECT r.id, r.resource_id, r.owner, r.starts_at, r.ends_at, r.quantity, r.status, r.expires_at,
           r.failure_reason, r.source, r.created_at, r.updated_at, r.metadata, r.acted_by,
           i.id AS intent_id, i.state AS intent_state, i.attempts AS intent_attempts,
           i.updated_at AS intent_updated_at, reservation_items(r.id, r.resource_id, r.quantity) AS items,
           r.series_id
    FROM (
        "#,
            $select,
            r#"
        FROM reservations
        WHERE "#,
            $scope,
            r#"
          "#,
            $leads_only,
            r#"
          AND ($4::text[] IS NULL
               OR (CASE WHEN status = 'HELD' AND expires_at <= $3 THEN 'EXPIRED' ELSE status END) = ANY($4))
          AND ($5::timestamptz IS NULL OR ends_at > $5)
          AND ($6::timestamptz IS NULL OR starts_at < $6)
          AND (created_at, "#,
            $lead,
            r#") < (coalesce($7::timestamptz, 'infinity'),
                    coalesce($8::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
        ORDER BY created_at DESC, lead_id DESC
        LIMIT $9
    ) page
    JOIN reservations r ON r.id = page.lead_id
    -- By its unique key, row by row: the LIMIT keeps the planner from hashing the
    -- whole intents table for a page of rows.
    LEFT JOIN LATERAL (
        SELECT id, state, attempts, updated_at FROM intents
        WHERE reservation_id = r.id AND kind = 'reserve'
        LIMIT 1
    ) i ON true
    ORDER BY r.created_at DESC, r.id DESC"#
        )
    };
}

/// `list_page!` of one owner's reservations, by `reservations_owner_created_idx`.
pub const LIST_BY_OWNER: &str = list_page!(leads: "owner = $1::text AND $2::uuid IS NULL");

/// `list_page!` of one owner's reservations on one resource, by
/// `reservations_owner_created_idx` (the resource is checked on the owner's rows).
pub const LIST_BY_OWNER_ON_RESOURCE: &str = list_page!(any_row: "owner = $1::text AND resource_id = $2::uuid");

/// `list_page!` of one resource's reservations, by `reservations_resource_created_idx`.
pub const LIST_BY_RESOURCE: &str = list_page!(any_row: "resource_id = $2::uuid AND ($1::text IS NULL OR owner = $1)");

/// `list_page!` of everyone's reservations, by `reservations_created_idx`.
pub const LIST_ALL: &str = list_page!(leads: "$1::text IS NULL AND $2::uuid IS NULL");

/// What a page of a reservations list keeps (see `list_page!`).
#[derive(Debug, Clone, Copy)]
pub struct ListFilter<'a> {
    pub owner: Option<&'a str>,
    pub resource_id: Option<Uuid>,
    /// Empty: every status.
    pub statuses: &'a [Status],
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// The `(created_at, id)` of the last row of the page before.
    pub after: Option<(DateTime<Utc>, Uuid)>,
    pub limit: i64,
    pub now: DateTime<Utc>,
}

/// The statement of a page: the one whose index leads to it, the owner's when an owner
/// is named, else the resource's, else the one of everyone's.
pub fn list_statement(f: &ListFilter<'_>) -> &'static str {
    match (f.owner, f.resource_id) {
        (Some(_), None) => LIST_BY_OWNER,
        (Some(_), Some(_)) => LIST_BY_OWNER_ON_RESOURCE,
        (None, Some(_)) => LIST_BY_RESOURCE,
        (None, None) => LIST_ALL,
    }
}

/// A page of a reservations list (see [`list_statement`]).
pub async fn list(c: &impl GenericClient, f: &ListFilter<'_>) -> Result<Vec<Reservation>, DbError> {
    let statuses: Option<Vec<&str>> = (!f.statuses.is_empty()).then(|| f.statuses.iter().map(|s| s.as_str()).collect());
    let (after_at, after_id) = f.after.unzip();
    c.rows(
        list_statement(f),
        &[&f.owner, &f.resource_id, &f.now, &statuses, &f.from, &f.to, &after_at, &after_id, &f.limit],
    )
    .await?
    .iter()
    .map(from_row)
    .collect()
}
