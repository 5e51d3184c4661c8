//! SQL for the hold: how a request for capacity is decided.
//!
//! One statement decides when it can ([`HOLD`], `reservation_hold`): it judges the
//! request, inserts the reservation with its event, and commits on its own. When the
//! request carries an `Idempotency-Key`, the same statement claims the key first and
//! stores the answer last ([`HOLD_KEYED`]), so the hold and its answer commit once.
//! A resource's calendar rules are judged before the statement from rules read earlier
//! ([`RULES`]) and proved current by their version under the statement's lock.
//! What the statement cannot decide (upstream resources, calendar rules not proved
//! current, a range refused for kept buffers, lapsed holds owed to the waitlist) it
//! leaves to the general path, untouched: a
//! transaction that looks first ([`PRECHECK`]), takes the resource lock and inserts
//! with [`super::reservations::insert_if_fits`]. The replay of a keyed hold's answer is
//! read back by [`super::idempotency::read`].

use super::idempotency::Answering;
use super::outbox::Event;
use super::reservations::{columns, from_row};
use super::run::Param;
use super::{DbError, GenericClient};
use crate::domain::{Metadata, Reservation};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use tokio_postgres::types::Json;
use uuid::Uuid;

statements![HOLD, HOLD_KEYED, HOLD_ITEMS, PRECHECK, PRECHECK_MANY, RULES];

/// A hold or booking of a local resource in one round trip (`reservation_hold`).
/// Capacity 1: the resource row shared and the insert with its event, the exclusion
/// constraint judging it. Capacity N: the lock when it is free (otherwise the look
/// before waiting for it), the load under it (with rules, the kept ranges' too) and the
/// insert with its event. One row:
/// the `outcome` (`reserved` with the row, `unavailable`, `not_found`, `archived`,
/// `too_many` with the `capacity`, or `general` when the general path must decide:
/// upstream resources, calendar rules not proved current, a range refused for kept
/// buffers, lapsed holds for the waitlist; with the
/// `rules_version` of the row it read, if it read it).
///
/// Parameters: `$1` id, `$2` resource, `$3` owner, `$4` start, `$5` end, `$6` quantity,
/// `$7` confirm, `$8` now, `$9` metadata, `$10` the id of its event in the outbox (made
/// here, as the reservation's is), `$11` the version of the calendar rules the range
/// was judged by (a resource with rules is served only at that version), `$12` the
/// limit of the owner's active holds (0: none), judged under the owner's lock
/// (`principal_holds`, before the resource's): at the limit the outcome is `general`;
/// `$13` the lease of its event when the request publishes it itself
/// ([`crate::outbox::EventsRelay::lease`]), with which the row carries the event's
/// payload (`event`).
pub const HOLD: &str = concat!(
    "SELECT outcome, capacity, rules_version, event, ",
    columns!(),
    " FROM reservation_hold($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, p_rules_version => $11, p_max_holds => $12, \
     p_event_lease => $13)"
);

/// [`HOLD`] for a request with an `Idempotency-Key`: the same function with the key's
/// arguments after the hold's, which claims the key first and stores the answer last.
/// One more outcome, `key_taken`, when the key already has a committed row; past `$17` waiting for a
/// concurrent original, lock_not_available. Outcomes other than `reserved` and
/// `unavailable` leave nothing behind, the claim included.
///
/// Parameters: [`HOLD`]'s first ten, then `$11`-`$14` the key's scope and key, `$15`
/// fingerprint, `$16` when the record may be purged, `$17` the wait (a `lock_timeout`),
/// `$18`-`$20` the refusal's stored answer (status, headers, body), `$21` the rules'
/// version ([`HOLD`]'s `$11`), `$22` the limit of active holds ([`HOLD`]'s `$12`),
/// `$23` the event's lease ([`HOLD`]'s `$13`).
pub const HOLD_KEYED: &str = concat!(
    "SELECT outcome, capacity, rules_version, event, ",
    columns!(),
    " FROM reservation_hold($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, \
     $20, p_rules_version => $21, p_max_holds => $22, p_event_lease => $23)"
);

/// A resource's calendar rules and their version, which every change of them bumps:
/// what a hold judges its range by before [`HOLD`], which proves the version current.
pub const RULES: &str = "SELECT rules_version, time_zone, schedule, buffer_before_minutes, buffer_after_minutes, \
     min_notice_minutes, max_advance_days, slot_minutes, booking_limits IS NOT NULL AS limited \
     FROM resources WHERE id = $1";

/// The look before the lock: the resource, the peak load over the range now, and
/// whether lapsed holds overlap it, in one read that takes no lock and writes nothing.
/// `$5` is the quantity asked for: where the load timeline leaves room for it, lapsed
/// holds are not looked for (see `reservation_load`).
/// A request that does not fit by this read is refused at once (the capacity really
/// was taken at that instant), so a burst of losers never queues on the resource lock
/// nor waits for a disk flush; only requests that may fit go on to the locked insert.
pub const PRECHECK: &str = "SELECT r.id, r.name, r.capacity, r.authority, r.upstream_ref, r.hold_ttl_seconds, \
     r.offer_ttl_seconds, r.metadata, r.archived_at, r.created_at, r.updated_at, r.time_zone, r.schedule, \
     r.buffer_before_minutes, r.buffer_after_minutes, r.min_notice_minutes, r.max_advance_days, r.slot_minutes, \
     r.cancel_notice_minutes, r.reschedule_notice_minutes, r.max_reschedules, r.max_hold_seconds, \
     r.default_duration_minutes, r.booking_limits, l.peak AS load, l.lapsed \
     FROM resources r, reservation_load($1, $2, $3, $4, NULL, $5) l WHERE r.id = $1";

/// What [`HOLD`] came to.
// One value per request, moved once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Hold {
    /// Held or booked; with the hold's event when it was written under a lease
    /// ([`NewHold::event_lease`]), for the request to publish.
    Reserved {
        reservation: Reservation,
        leased: Option<Event>,
    },
    Unavailable,
    NotFound,
    TooMany {
        capacity: i32,
    },
    Archived,
    /// Nothing was done: the general path must decide, in a transaction. The version
    /// of the resource's calendar rules the statement read, when it read the row.
    GeneralPath {
        rules_version: Option<i64>,
    },
    /// The request's key is taken, by a committed answer or a concurrent original
    /// (keyed holds only): nothing was done; the idempotency guard decides.
    KeyTaken,
}

/// Whether a reserve holds the capacity, to be confirmed later, or books it at once
/// (the request's `confirm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// A hold, which lapses unless confirmed.
    Later,
    /// A booking (or, upstream, a confirm sent to the system of record).
    Now,
}

impl Confirmation {
    /// The request's `confirm` flag.
    pub fn of_flag(confirm: bool) -> Self {
        if confirm { Confirmation::Now } else { Confirmation::Later }
    }

    /// The statement's `confirm` parameter.
    pub fn is_now(self) -> bool {
        self == Confirmation::Now
    }
}

pub struct NewHold<'a> {
    pub id: Uuid,
    /// The id of the hold's event in the outbox.
    pub event_id: Uuid,
    pub resource_id: Uuid,
    pub owner: &'a str,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub confirmation: Confirmation,
    pub metadata: &'a Metadata,
    pub now: DateTime<Utc>,
    /// The version of the calendar rules the range was judged by ([`RULES`]).
    pub rules_version: Option<i64>,
    /// The most active holds the owner may have (0: no limit); see [`HOLD`].
    pub max_holds: i32,
    /// The lease of the hold's event when the request publishes it itself
    /// ([`crate::outbox::EventsRelay::lease`]); `None` leaves it to a relay.
    pub event_lease: Option<DateTime<Utc>>,
}

/// The first ten parameters of [`HOLD`] and of [`HOLD_KEYED`].
fn hold_params<'a>(h: &'a NewHold<'_>, confirm: &'a bool, metadata: &'a Json<&Metadata>) -> [&'a dyn Param; 10] {
    [&h.id, &h.resource_id, &h.owner, &h.start, &h.end, &h.quantity, confirm, &h.now, metadata, &h.event_id]
}

/// See [`HOLD`].
pub async fn hold(c: &impl GenericClient, h: &NewHold<'_>) -> Result<Hold, DbError> {
    let metadata = Json(h.metadata);
    let confirm = h.confirmation.is_now();
    let row = c
        .row(
            HOLD,
            &[&hold_params(h, &confirm, &metadata)[..], &[&h.rules_version, &h.max_holds, &h.event_lease]].concat(),
        )
        .await?;
    hold_of(&row, h)
}

/// See [`HOLD_KEYED`]; for autocommit, where the statement is the transaction.
pub async fn hold_keyed(c: &impl GenericClient, h: &NewHold<'_>, a: &Answering<'_>) -> Result<Hold, DbError> {
    let metadata = Json(h.metadata);
    // At least a millisecond: a lock_timeout of 0 would wait forever.
    let wait = format!("{}ms", a.wait.as_millis().max(1));
    let refused_status = a.refused.status as i16;
    let key: [&dyn Param; 10] = [
        &a.key.principal,
        &a.key.method,
        &a.key.route,
        &a.key.key,
        &a.fingerprint,
        &a.times.expires_at,
        &wait,
        &refused_status,
        a.refused.headers,
        &a.refused.body,
    ];
    let confirm = h.confirmation.is_now();
    let row = c
        .row(
            HOLD_KEYED,
            &[&hold_params(h, &confirm, &metadata)[..], &key[..], &[&h.rules_version, &h.max_holds, &h.event_lease]]
                .concat(),
        )
        .await;
    match row {
        Ok(row) => hold_of(&row, h),
        // A concurrent original holds the key: nothing was written here.
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => Ok(Hold::KeyTaken),
        Err(e) => Err(e.into()),
    }
}

/// The event a hold wrote leased to its request: its kind and payload as the outbox
/// row has them.
#[derive(serde::Deserialize)]
struct LeasedEvent {
    kind: String,
    payload: serde_json::Value,
}

/// The statement's outcome, with the reservation's event when it was leased at write.
fn hold_of(row: &Row, h: &NewHold<'_>) -> Result<Hold, DbError> {
    Ok(match row.try_get::<_, &str>("outcome")? {
        "reserved" => {
            let reservation = from_row(row)?;
            let leased =
                row.try_get::<_, Option<Json<LeasedEvent>>>("event")?.map(|Json(LeasedEvent { kind, payload })| {
                    Ok::<_, DbError>(Event {
                        id: h.event_id,
                        kind: kind.parse()?,
                        subject_id: reservation.id,
                        payload,
                        created_at: h.now,
                        attempts: 0,
                    })
                });
            Hold::Reserved { reservation, leased: leased.transpose()? }
        }
        // The range is taken: the request's answer, and no event written.
        "unavailable" => Hold::Unavailable,
        "not_found" => Hold::NotFound,
        "too_many" => Hold::TooMany { capacity: row.try_get("capacity")? },
        "general" => Hold::GeneralPath { rules_version: row.try_get("rules_version")? },
        "archived" => Hold::Archived,
        "key_taken" => Hold::KeyTaken,
        other => return Err(DbError::Corrupt(format!("hold outcome {other}"))),
    })
}

/// A booking of several items in one statement (`reservation_hold_items`), all or
/// nothing, with its one event: the look before the locks, every resource of the
/// booking locked in id order, the load under the locks, each item (a resource, or a
/// pool's members in its strategy's order) judged in turn, then every row inserted.
/// Rows: `reserved`, the lead's (with the booking's `items`); `unavailable`, one per
/// item that did not fit (its place in `item`), nothing written; `general`, nothing
/// done: a resource with calendar rules or limits, upstream or archived, a pool not
/// found, a lapsed hold over the range.
///
/// Parameters: `$1` every item's row id (the first is the lead's, the booking's id),
/// `$2` every item's resource or pool, `$3` whether it is a pool, `$4` its quantity,
/// `$5` owner, `$6` start, `$7` end, `$8` confirm, `$9` now, `$10` metadata, `$11` the
/// id of its event in the outbox, `$12` the limit of the owner's active holds (0: none;
/// see [`HOLD`]), the booking counting as one.
pub const HOLD_ITEMS: &str = concat!(
    "SELECT outcome, item, ",
    columns!(),
    ", items FROM reservation_hold_items($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
);

/// One item of [`NewHoldItems`]: a resource, or any one member of a pool.
pub struct HoldItem {
    pub target: Uuid,
    pub pooled: bool,
    pub quantity: i32,
}

pub struct NewHoldItems<'a> {
    /// One row id per item; the first is the lead's, which names the booking.
    pub ids: Vec<Uuid>,
    pub items: Vec<HoldItem>,
    pub event_id: Uuid,
    pub owner: &'a str,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub confirmation: Confirmation,
    pub metadata: &'a Metadata,
    pub now: DateTime<Utc>,
    /// The most active holds the owner may have (0: no limit); see [`HOLD_ITEMS`].
    pub max_holds: i32,
}

/// What [`HOLD_ITEMS`] came to.
// One value per request, moved once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum HeldItems {
    Reserved(Reservation),
    /// The places of the items that did not fit; nothing was written.
    Unavailable(Vec<usize>),
    /// Nothing was done: the general path must decide, in a transaction.
    GeneralPath,
}

/// See [`HOLD_ITEMS`]; in autocommit, where the statement is the transaction.
pub async fn hold_items(c: &impl GenericClient, h: &NewHoldItems<'_>) -> Result<HeldItems, DbError> {
    let targets: Vec<Uuid> = h.items.iter().map(|i| i.target).collect();
    let pooled: Vec<bool> = h.items.iter().map(|i| i.pooled).collect();
    let quantities: Vec<i32> = h.items.iter().map(|i| i.quantity).collect();
    let confirm = h.confirmation.is_now();
    let metadata = Json(h.metadata);
    let rows = c
        .rows(
            HOLD_ITEMS,
            &[
                &h.ids,
                &targets,
                &pooled,
                &quantities,
                &h.owner,
                &h.start,
                &h.end,
                &confirm,
                &h.now,
                &metadata,
                &h.event_id,
                &h.max_holds,
            ],
        )
        .await;
    let rows = match rows {
        Ok(rows) => rows,
        // A capacity-1 booking's kept buffers from before its resource's were cleared:
        // the statement rolled back, and the general path judges them.
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::EXCLUSION_VIOLATION) => {
            return Ok(HeldItems::GeneralPath);
        }
        Err(e) => return Err(e.into()),
    };
    let Some(first) = rows.first() else { return Err(DbError::Corrupt("no hold outcome".into())) };
    Ok(match first.try_get::<_, &str>("outcome")? {
        "reserved" => HeldItems::Reserved(from_row(first)?),
        "unavailable" => HeldItems::Unavailable(
            rows.iter().map(|row| Ok(row.try_get::<_, i16>("item")? as usize)).collect::<Result<_, DbError>>()?,
        ),
        "general" => HeldItems::GeneralPath,
        other => return Err(DbError::Corrupt(format!("hold outcome {other}"))),
    })
}

/// What [`PRECHECK`] read.
pub struct Precheck {
    pub resource: crate::domain::Resource,
    pub peak: i64,
    pub lapsed: bool,
}

/// See [`PRECHECK`]; `None` when the resource does not exist.
pub async fn precheck(
    c: &impl GenericClient,
    resource_id: Uuid,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    quantity: i32,
    now: DateTime<Utc>,
) -> Result<Option<Precheck>, DbError> {
    let Some(row) = c.opt_row(PRECHECK, &[&resource_id, &start, &end, &now, &quantity]).await? else {
        return Ok(None);
    };
    Ok(Some(Precheck {
        resource: super::resources::from_row(&row)?,
        peak: row.try_get::<_, Option<i64>>("load")?.unwrap_or(0),
        lapsed: row.try_get("lapsed")?,
    }))
}

/// [`PRECHECK`]'s load for several resources at once (a booking of several items):
/// each resource's capacity, its peak load over `[$2, $3)` as at `$4`, and whether
/// lapsed holds overlap the range. No lock, no write.
pub const PRECHECK_MANY: &str = "SELECT r.id, r.capacity, l.peak AS load, l.lapsed \
     FROM resources r, reservation_load(r.id, $2, $3, $4) l WHERE r.id = ANY($1)";

/// One resource's line of [`PRECHECK_MANY`].
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub capacity: i32,
    pub peak: i64,
    pub lapsed: bool,
}

impl Load {
    /// Whether `quantity` more is refused by live claims at this instant: only a lapsed
    /// hold written down, or a release, could free it.
    pub fn refuses(&self, quantity: i32) -> bool {
        !self.lapsed && self.peak + i64::from(quantity) > i64::from(self.capacity)
    }
}

/// See [`PRECHECK_MANY`].
pub async fn precheck_many(
    c: &impl GenericClient,
    resource_ids: &[Uuid],
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<std::collections::BTreeMap<Uuid, Load>, DbError> {
    c.rows(PRECHECK_MANY, &[&resource_ids, &start, &end, &now])
        .await?
        .iter()
        .map(|row| {
            let load = Load {
                capacity: row.try_get("capacity")?,
                peak: row.try_get::<_, Option<i64>>("load")?.unwrap_or(0),
                lapsed: row.try_get("lapsed")?,
            };
            Ok((row.try_get("id")?, load))
        })
        .collect()
}

/// A resource's calendar rules at a version ([`RULES`]).
pub struct VersionedRules {
    pub version: i64,
    pub rules: crate::domain::calendar::CalendarRules,
    /// Whether the resource has booking limits, which only the general path judges.
    pub limited: bool,
}

/// See [`RULES`]; `None` when the resource does not exist.
pub async fn rules(c: &impl GenericClient, resource_id: Uuid) -> Result<Option<VersionedRules>, DbError> {
    let Some(row) = c.opt_row(RULES, &[&resource_id]).await? else { return Ok(None) };
    Ok(Some(VersionedRules {
        version: row.try_get("rules_version")?,
        rules: super::resources::calendar_from_row(&row)?,
        limited: row.try_get("limited")?,
    }))
}
