//! SQL for the `waitlist_entries` table.

use super::{DbError, GenericClient};
use crate::domain::{EventKind, Intent, WaitlistEntry, WaitlistStatus};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

statements![
    INSERT,
    ACTIVE_FOR_RANGE,
    GET,
    LOCK,
    RESOURCE_OF,
    WAITING_OVERLAPPING,
    LIST,
    LIST_BY_OWNER,
    MARK_OFFERED,
    SETTLE_OFFERS,
    CANCEL_WAITING_OF,
    SET_STATUS,
    EXPIRE_PASSED,
    UPSTREAM_QUEUE,
    ACCEPT_WAIT,
    REQUEST_LEAVE,
];

macro_rules! columns {
    () => {
        "w.id, w.resource_id, w.owner, w.starts_at, w.ends_at, w.quantity, w.status, w.seq, w.reservation_id, \
         w.auto_book, w.leave_requested_at IS NOT NULL AS leave_requested, w.created_at, w.updated_at"
    };
}

/// The outbox payload of a waitlist event.
macro_rules! event_payload {
    ($row:literal) => {
        concat!(
            "jsonb_build_object('entry_id', ",
            $row,
            ".id, 'resource_id', ",
            $row,
            ".resource_id, 'owner', ",
            $row,
            ".owner, 'start', ",
            $row,
            ".starts_at, 'end', ",
            $row,
            ".ends_at, 'quantity', ",
            $row,
            ".quantity, 'status', ",
            $row,
            ".status, 'reservation_id', ",
            $row,
            ".reservation_id)"
        )
    };
}

/// The columns every statement that answers entries returns besides the table's:
/// the FIFO position, whether the offer has lapsed and the wait intent, which only
/// [`GET`] computes.
macro_rules! without_position {
    () => {
        ", NULL::bigint AS position, false AS offer_lapsed, NULL::uuid AS intent_id, NULL::text AS intent_state, \
         NULL::integer AS intent_attempts, NULL::timestamptz AS intent_updated_at"
    };
}

/// A new waiting entry, or no row when the principal already has an active entry for
/// the same range (`waitlist_entries_one_per_range_key`).
pub const INSERT: &str = concat!(
    r#"
    INSERT INTO waitlist_entries AS w
        (id, resource_id, owner, starts_at, ends_at, quantity, status, auto_book, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, 'WAITING', $8, $7, $7)
    ON CONFLICT (resource_id, owner, starts_at, ends_at) WHERE status IN ('WAITING', 'OFFERED') DO NOTHING
    RETURNING "#,
    columns!(),
    without_position!()
);

/// The principal's active (waiting or offered) entry for exactly this range, if any.
pub const ACTIVE_FOR_RANGE: &str = r#"
    SELECT id FROM waitlist_entries
    WHERE resource_id = $1 AND owner = $2 AND starts_at = $3 AND ends_at = $4
      AND status IN ('WAITING', 'OFFERED')"#;

/// The FIFO position of a waiting entry `w`: among the entries waiting for a time that
/// overlaps its own, as the hand-over serves them (an entry for another time is never
/// ahead of it).
macro_rules! position {
    () => {
        r#"CASE WHEN w.status = 'WAITING' THEN (
            SELECT count(*) FROM waitlist_entries x
            WHERE x.resource_id = w.resource_id AND x.status = 'WAITING' AND x.seq <= w.seq
              AND x.period && w.period)
        END AS position"#
    };
}

/// The entry document's columns after [`columns!`], one entry at a time: its FIFO
/// position while waiting ([`position!`]), whether its offer lapsed unswept by `$now`,
/// and its wait intent; from `w` and its [`document_joins!`].
macro_rules! entry_document {
    ($now:literal) => {
        concat!(
            ",\n        ",
            position!(),
            r#",
        (w.status = 'OFFERED' AND r.status = 'HELD' AND r.expires_at <= "#,
            $now,
            r#") IS TRUE AS offer_lapsed,
        i.id AS intent_id, i.state AS intent_state, i.attempts AS intent_attempts, i.updated_at AS intent_updated_at"#
        )
    };
}

/// What an entry document reads beside the entry: its offer and its wait intent.
macro_rules! document_joins {
    () => {
        r#"
    LEFT JOIN reservations r ON r.id = w.reservation_id
    LEFT JOIN intents i ON i.waitlist_entry_id = w.id"#
    };
}

/// An entry with its FIFO position (while waiting) and whether its offer has lapsed
/// unswept (`$2` is now).
pub const GET: &str = concat!(
    "SELECT ",
    columns!(),
    entry_document!("$2"),
    "\n    FROM waitlist_entries w",
    document_joins!(),
    "\n    WHERE w.id = $1"
);

pub const LOCK: &str =
    concat!("SELECT ", columns!(), without_position!(), " FROM waitlist_entries w WHERE w.id = $1 FOR UPDATE");

pub const RESOURCE_OF: &str = "SELECT resource_id FROM waitlist_entries WHERE id = $1";

/// Waiting entries that a freed range may serve, first come first served: the next
/// page after sequence number `$5` (keyset pagination, so a long queue is walked in
/// pages of `$6` without skipping or repeating an entry). `$2`-`$3` is the freed
/// range, `$4` now.
pub const WAITING_OVERLAPPING: &str = concat!(
    "SELECT ",
    columns!(),
    without_position!(),
    r#"
    FROM waitlist_entries w
    WHERE w.resource_id = $1 AND w.status = 'WAITING'
      AND w.period && tstzrange($2, $3, '[)') AND w.ends_at > $4
      AND w.seq > $5
    ORDER BY w.seq
    LIMIT $6"#
);

/// A page of a resource's whole queue (`$1`), every status, in FIFO order: the entries
/// after sequence number `$2` (none: from the start), at most `$4`, by
/// `waitlist_entries_resource_seq_idx`. Each carries its position while waiting and
/// whether its offer lapsed by `$3` (now), as [`GET`] computes them.
pub const LIST: &str = concat!(
    "SELECT ",
    columns!(),
    ",\n        ",
    position!(),
    r#",
        (w.status = 'OFFERED' AND r.status = 'HELD' AND r.expires_at <= $3) IS TRUE AS offer_lapsed,
        i.id AS intent_id, i.state AS intent_state, i.attempts AS intent_attempts, i.updated_at AS intent_updated_at
    FROM (
        SELECT w.* FROM waitlist_entries w
        WHERE w.resource_id = $1::uuid AND w.seq > coalesce($2::bigint, 0)
        ORDER BY w.seq
        LIMIT $4
    ) w"#,
    document_joins!(),
    "\n    ORDER BY w.seq"
);

/// A page of one owner's (`$1`) entries, newest first, every status, optionally of
/// one resource (`$2`): those before `($4, $5)` in `(created_at, id)` order (none: from
/// the newest), at most `$6`, by `waitlist_entries_owner_created_idx`. Position and
/// lapsed offer as [`GET`] computes them, `$3` being now.
pub const LIST_BY_OWNER: &str = concat!(
    "SELECT ",
    columns!(),
    entry_document!("$3"),
    r#"
    FROM (
        SELECT w.* FROM waitlist_entries w
        WHERE w.owner = $1::text AND ($2::uuid IS NULL OR w.resource_id = $2)
          AND (w.created_at, w.id) < (coalesce($4::timestamptz, 'infinity'),
                                      coalesce($5::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
        ORDER BY w.created_at DESC, w.id DESC
        LIMIT $6
    ) w"#,
    document_joins!(),
    "\n    ORDER BY w.created_at DESC, w.id DESC"
);

/// Marks a waiting entry offered the reservation `$2`, recording `$4`,
/// `waitlist.offered`.
pub const MARK_OFFERED: &str = concat!(
    r#"
    WITH upd AS (
        UPDATE waitlist_entries SET status = 'OFFERED', reservation_id = $2, updated_at = $3
        WHERE id = $1 AND status = 'WAITING'
        RETURNING *
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT $4::text, upd.id, "#,
    event_payload!("upd"),
    r#", $3, $3 FROM upd
    )
    SELECT count(*) FROM upd"#
);

/// Settles the entries behind offers whose reservations moved on (`$2`: ACCEPTED,
/// EXPIRED or CANCELLED); a lapse records `$4`, `waitlist.offer_expired`.
pub const SETTLE_OFFERS: &str = concat!(
    r#"
    WITH upd AS (
        UPDATE waitlist_entries SET status = $2, updated_at = $3
        WHERE reservation_id = ANY($1) AND status = 'OFFERED'
        RETURNING *
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT $4::text, upd.id, "#,
    event_payload!("upd"),
    r#", $3, $3 FROM upd WHERE upd.status = 'EXPIRED'
    )
    SELECT count(*) FROM upd"#
);

/// Cancels every waiting entry of a resource (`$1`) that is archived: nothing can be
/// offered for them any more, and each records `$3`, `waitlist.cancelled`. Offered
/// entries keep their offers.
pub const CANCEL_WAITING_OF: &str = concat!(
    r#"
    WITH upd AS (
        UPDATE waitlist_entries SET status = 'CANCELLED', updated_at = $2
        WHERE resource_id = $1 AND status = 'WAITING'
        RETURNING *
    ), ev AS (
        INSERT INTO outbox (kind, subject_id, payload, created_at, next_attempt_at)
        SELECT $3::text, upd.id, "#,
    event_payload!("upd"),
    r#", $2, $2 FROM upd
    )
    SELECT count(*) FROM upd"#
);

pub const SET_STATUS: &str = concat!(
    "UPDATE waitlist_entries AS w SET status = $2, updated_at = $3 WHERE id = $1 RETURNING ",
    columns!(),
    without_position!()
);

/// The sweep's claim of waiting entries whose range has ended: nothing can be offered
/// for them any more. An `auto_book` wait ends earlier, with its intent, when its range
/// starts (`intents::END_STARTED_WAITS`).
pub const EXPIRE_PASSED: &str = r#"
    WITH passed AS (
        SELECT id AS passed_id FROM waitlist_entries
        WHERE status = 'WAITING' AND ends_at <= $1 AND NOT auto_book
        ORDER BY ends_at LIMIT $2
        FOR UPDATE SKIP LOCKED
    )
    UPDATE waitlist_entries SET status = 'EXPIRED', updated_at = $1
    FROM passed WHERE id = passed_id"#;

/// An upstream seat's queue as the poller serves it: its waiting entries in FIFO order
/// (`$3` at most) whose range has not ended by `$2`, each with its wait intent, if any.
pub const UPSTREAM_QUEUE: &str = concat!(
    "SELECT ",
    columns!(),
    r#", NULL::bigint AS position, false AS offer_lapsed,
        i.id AS intent_id, i.state AS intent_state, i.attempts AS intent_attempts, i.updated_at AS intent_updated_at
    FROM waitlist_entries w
    LEFT JOIN intents i ON i.waitlist_entry_id = w.id
    WHERE w.resource_id = $1 AND w.status = 'WAITING' AND w.ends_at > $2
    ORDER BY w.seq
    LIMIT $3"#
);

/// A wait whose write succeeded: its entry is `ACCEPTED`, naming the booking.
pub const ACCEPT_WAIT: &str = "UPDATE waitlist_entries SET status = 'ACCEPTED', reservation_id = $2, updated_at = $3 \
     WHERE id = $1 AND status = 'WAITING'";

/// The waiter left while a write of theirs was in flight.
pub const REQUEST_LEAVE: &str = "UPDATE waitlist_entries SET leave_requested_at = $2, updated_at = $2 \
     WHERE id = $1 AND status = 'WAITING' AND leave_requested_at IS NULL";

pub struct NewEntry<'a> {
    pub id: Uuid,
    pub resource_id: Uuid,
    pub owner: &'a str,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub auto_book: bool,
    pub now: DateTime<Utc>,
}

/// The new entry, or `None` when the owner already has an active one for the range.
pub async fn insert(c: &impl GenericClient, e: &NewEntry<'_>) -> Result<Option<WaitlistEntry>, DbError> {
    let row = c
        .opt_row(INSERT, &[&e.id, &e.resource_id, &e.owner, &e.start, &e.end, &e.quantity, &e.now, &e.auto_book])
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// The id of `owner`'s waiting or offered entry for exactly `[start, end)`, if any.
pub async fn active_for_range(
    c: &impl GenericClient,
    resource_id: Uuid,
    owner: &str,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Option<Uuid>, DbError> {
    Ok(c.opt_row(ACTIVE_FOR_RANGE, &[&resource_id, &owner, &start, &end])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?)
}

pub async fn upstream_queue(
    c: &impl GenericClient,
    resource_id: Uuid,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<WaitlistEntry>, DbError> {
    c.rows(UPSTREAM_QUEUE, &[&resource_id, &now, &limit]).await?.iter().map(from_row).collect()
}

pub async fn accept_wait(
    c: &impl GenericClient,
    id: Uuid,
    reservation_id: Uuid,
    now: DateTime<Utc>,
) -> Result<bool, DbError> {
    Ok(c.exec(ACCEPT_WAIT, &[&id, &reservation_id, &now]).await? == 1)
}

pub async fn request_leave(c: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<bool, DbError> {
    Ok(c.exec(REQUEST_LEAVE, &[&id, &now]).await? == 1)
}

pub async fn get(c: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<Option<WaitlistEntry>, DbError> {
    c.opt_row(GET, &[&id, &now]).await?.as_ref().map(from_row).transpose()
}

pub async fn lock(c: &impl GenericClient, id: Uuid) -> Result<Option<WaitlistEntry>, DbError> {
    c.opt_row(LOCK, &[&id]).await?.as_ref().map(from_row).transpose()
}

pub async fn resource_of(c: &impl GenericClient, id: Uuid) -> Result<Option<Uuid>, DbError> {
    Ok(c.opt_row(RESOURCE_OF, &[&id]).await?.map(|row| row.try_get(0)).transpose()?)
}

/// A page of [`WAITING_OVERLAPPING`]: waiting entries after sequence number `after`.
pub async fn waiting_overlapping(
    c: &impl GenericClient,
    resource_id: Uuid,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
    after: i64,
    limit: i64,
) -> Result<Vec<WaitlistEntry>, DbError> {
    c.rows(WAITING_OVERLAPPING, &[&resource_id, &start, &end, &now, &after, &limit])
        .await?
        .iter()
        .map(from_row)
        .collect()
}

/// See [`LIST`]; `after` is the sequence number of the last entry of the page before.
pub async fn list(
    c: &impl GenericClient,
    resource_id: Uuid,
    after: Option<i64>,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<WaitlistEntry>, DbError> {
    c.rows(LIST, &[&resource_id, &after, &now, &limit]).await?.iter().map(from_row).collect()
}

/// See [`LIST_BY_OWNER`].
pub async fn list_by_owner(
    c: &impl GenericClient,
    owner: &str,
    resource_id: Option<Uuid>,
    after: Option<(DateTime<Utc>, Uuid)>,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<WaitlistEntry>, DbError> {
    let (at, id) = (after.map(|a| a.0), after.map(|a| a.1));
    c.rows(LIST_BY_OWNER, &[&owner, &resource_id, &now, &at, &id, &limit]).await?.iter().map(from_row).collect()
}

pub async fn mark_offered(
    c: &impl GenericClient,
    id: Uuid,
    reservation_id: Uuid,
    now: DateTime<Utc>,
) -> Result<bool, DbError> {
    let kind = EventKind::WaitlistOffered.as_str();
    Ok(c.row(MARK_OFFERED, &[&id, &reservation_id, &now, &kind]).await?.try_get::<_, i64>(0)? == 1)
}

pub async fn settle_offers(
    c: &impl GenericClient,
    reservation_ids: &[Uuid],
    to: WaitlistStatus,
    now: DateTime<Utc>,
) -> Result<u64, DbError> {
    if reservation_ids.is_empty() {
        return Ok(0);
    }
    let kind = EventKind::WaitlistOfferExpired.as_str();
    Ok(c.row(SETTLE_OFFERS, &[&reservation_ids, &to.as_str(), &now, &kind]).await?.try_get::<_, i64>(0)? as u64)
}

pub async fn set_status(
    c: &impl GenericClient,
    id: Uuid,
    to: WaitlistStatus,
    now: DateTime<Utc>,
) -> Result<WaitlistEntry, DbError> {
    from_row(&c.row(SET_STATUS, &[&id, &to.as_str(), &now]).await?)
}

pub async fn expire_passed(c: &impl GenericClient, now: DateTime<Utc>, limit: i64) -> Result<u64, DbError> {
    Ok(c.exec(EXPIRE_PASSED, &[&now, &limit]).await?)
}

fn from_row(row: &Row) -> Result<WaitlistEntry, DbError> {
    let status: WaitlistStatus = row.try_get::<_, &str>("status")?.parse()?;
    let lapsed: bool = row.try_get("offer_lapsed")?;
    Ok(WaitlistEntry {
        id: row.try_get("id")?,
        resource_id: row.try_get("resource_id")?,
        owner: row.try_get("owner")?,
        start: row.try_get("starts_at")?,
        end: row.try_get("ends_at")?,
        quantity: row.try_get("quantity")?,
        // An offer that lapsed reads as expired before the sweep writes it down.
        status: if lapsed { WaitlistStatus::Expired } else { status },
        position: row.try_get::<_, Option<i64>>("position")?.filter(|_| status == WaitlistStatus::Waiting),
        reservation_id: row.try_get("reservation_id")?,
        auto_book: row.try_get("auto_book")?,
        intent: match row.try_get::<_, Option<Uuid>>("intent_id")? {
            Some(id) => Some(Intent {
                id,
                state: row.try_get::<_, &str>("intent_state")?.parse()?,
                attempts: row.try_get("intent_attempts")?,
                updated_at: row.try_get("intent_updated_at")?,
            }),
            None => None,
        },
        leave_requested: row.try_get("leave_requested")?,
        seq: row.try_get("seq")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

pub async fn cancel_waiting_of(c: &impl GenericClient, resource_id: Uuid, now: DateTime<Utc>) -> Result<i64, DbError> {
    let kind = EventKind::WaitlistCancelled.as_str();
    Ok(c.row(CANCEL_WAITING_OF, &[&resource_id, &now, &kind]).await?.try_get(0)?)
}
