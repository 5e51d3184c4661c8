//! Recurring series: a first occurrence and a recurrence rule, each occurrence a
//! reservation of its own, and confirms, cancels and moves scoped to one occurrence,
//! it and the later ones, or all of them.
//!
//! A series is made in one transaction. Its resources are locked first, in id order
//! (the lock order's resource level), then each occurrence is held by the very path
//! any other hold of its kind takes: [`reserve`] (the general path) for one resource,
//! [`reserve_items`] for several. So every calendar rule and booking limit judges each
//! occurrence as it would judge a hold made on its own, and no hold SQL is written
//! twice. Each occurrence runs under a savepoint, so that a refused one (whose path
//! may have written part of a booking of several, or hit the exclusion constraint)
//! is undone alone. `all_or_nothing` then fails the whole series when any occurrence
//! was refused (the caller rolls back); `skip_conflicts` keeps what was held and
//! records why the others were not.

use super::group::{GroupRequest, ItemRequest, Target, reserve_items};
use super::hold::{Approval, ReserveRequest, Reserved, reserve};
use super::reschedule::{Change, Rescheduled, reschedule};
use super::{BookingError, invalid, limits};
use crate::Clock;
use crate::db::hold::Confirmation;
use crate::db::series::{self as rows, NewSeries, OccurrenceRow};
use crate::db::{DbError, GenericClient, pools, reservations, resources};
use crate::domain::calendar::local_to_utc;
use crate::domain::recurrence::Recurrence;
use crate::domain::{Authority, Limits, Metadata, Principal, Resource};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;
use uuid::Uuid;

/// What the occurrences hold: one resource, or the items of a booking of several.
#[derive(Debug, Clone)]
pub enum SeriesTarget {
    Resource { resource_id: Uuid, quantity: i32 },
    Items(Vec<ItemRequest>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    AllOrNothing,
    SkipConflicts,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::AllOrNothing => "all_or_nothing",
            Mode::SkipConflicts => "skip_conflicts",
        }
    }
}

pub struct SeriesRequest {
    /// The principal the series is for, when an admin makes it for someone else (the
    /// caller checks that only an admin names one); `None`: the caller.
    pub owner: Option<String>,
    pub target: SeriesTarget,
    /// The first occurrence.
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub recurrence: Recurrence,
    /// The rule as the client wrote it, kept and answered as written.
    pub recurrence_text: String,
    pub mode: Mode,
    pub confirmation: Confirmation,
    pub metadata: Metadata,
}

/// An occurrence that was not held: its place, its range, and why (a problem object,
/// rendered by the caller's renderer).
#[derive(Debug, Clone, Serialize)]
pub struct RefusedOccurrence {
    pub index: usize,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub problem: serde_json::Value,
}

/// A series as read: what was asked and every occurrence, held or not.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub id: Uuid,
    pub owner: String,
    /// The resource whose time zone the rule was expanded in: the series' resource, or
    /// for items the first item's (a pool's first member).
    pub time_zone_resource_id: Uuid,
    pub time_zone: String,
    pub recurrence: String,
    pub mode: &'static str,
    pub created_at: DateTime<Utc>,
    pub occurrences: Vec<SeriesOccurrence>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeriesOccurrence {
    pub index: usize,
    /// The occurrence's range: its reservation's as it stands now (a move moves it).
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub reservation_id: Option<Uuid>,
    /// Its reservation's status now; `None` when it was not held.
    pub status: Option<String>,
    /// Why it was not held; `None` when it was.
    pub problem: Option<serde_json::Value>,
}

/// Which occurrences a confirm, cancel or move acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// The reservation named.
    #[default]
    One,
    /// It and every later occurrence of its series.
    Following,
    /// Every occurrence of its series.
    All,
}

/// Whether a refusal belongs to one occurrence (its range is taken or refused by the
/// rules or limits there) or to the whole request (the resource is missing, archived,
/// upstream, a field is bad whatever the range, the database failed).
fn refuses_the_request(e: &BookingError) -> bool {
    match e {
        BookingError::Validation(errors) => errors.iter().any(|e| e.field != "start" && e.field != "end"),
        BookingError::Db(_)
        | BookingError::ResourceNotFound
        | BookingError::ResourceArchived
        | BookingError::PoolNotFound(_)
        | BookingError::UpstreamInGroup { .. }
        | BookingError::UpstreamUnavailable { .. } => true,
        _ => false,
    }
}

/// Makes a series: see the module's documentation. `render` turns an occurrence's
/// refusal into the problem object recorded and answered for it. Run inside a
/// transaction; commit on `Ok`; on [`BookingError::OccurrencesRefused`] roll back.
/// `who` acts, as in [`reserve`]: every occurrence records them in `acted_by`.
pub async fn create_series(
    tx: &impl GenericClient,
    who: &Principal,
    req: &SeriesRequest,
    approval: Approval<'_>,
    limits: Limits,
    now: DateTime<Utc>,
    render: impl Fn(BookingError) -> serde_json::Value,
) -> Result<Series, BookingError> {
    let (zone_resource, lock_ids) = resources_of(tx, &req.target).await?;
    let tz = zone_resource.calendar.time_zone;
    let occurrences = req.recurrence.expand("recurrence", tz, req.start, req.end).map_err(BookingError::Validation)?;
    // The owner's lock first (the lock order), when the limit of active holds applies:
    // each occurrence's hold is judged against it, under it, in turn.
    let owner = req.owner.as_deref().unwrap_or(&who.id);
    limits::lock_owner(tx, owner, who, req.confirmation, limits, now).await?;
    // The lock, every resource at once in id order, before any occurrence: two series
    // over the same resources queue on it instead of deadlocking, and no occurrence's
    // look is ever taken without it.
    resources::lock_many(tx, &lock_ids).await?;
    let mut held = Vec::with_capacity(occurrences.len());
    let mut refused = Vec::new();
    for (index, o) in occurrences.iter().enumerate() {
        tx.batch_execute("SAVEPOINT occurrence").await.map_err(DbError::from)?;
        let outcome = match &req.target {
            SeriesTarget::Resource { resource_id, quantity } => {
                let one = ReserveRequest {
                    owner: req.owner.clone(),
                    resource_id: *resource_id,
                    start: o.start,
                    end: o.end,
                    quantity: *quantity,
                    confirmation: req.confirmation,
                    metadata: req.metadata.clone(),
                };
                match reserve(tx, who, &one, approval, limits, now).await {
                    Ok(Reserved::Reserved(r) | Reserved::Queued(r)) => Ok(r.id),
                    Ok(Reserved::Unavailable) => Err(BookingError::SlotUnavailable),
                    Err(e) => Err(e),
                }
            }
            SeriesTarget::Items(items) => {
                let group = GroupRequest {
                    owner: req.owner.clone(),
                    items: items.clone(),
                    start: o.start,
                    end: o.end,
                    confirmation: req.confirmation,
                    metadata: req.metadata.clone(),
                };
                reserve_items(tx, who, &group, limits, now).await.map(|r| r.id)
            }
        };
        match outcome {
            Ok(id) => {
                tx.batch_execute("RELEASE SAVEPOINT occurrence").await.map_err(DbError::from)?;
                held.push((index, id));
            }
            Err(e) if refuses_the_request(&e) => return Err(e),
            Err(e) => {
                // Undone alone: a refused booking of several may have written some of
                // its items, and an exclusion violation aborts until the rollback.
                tx.batch_execute("ROLLBACK TO SAVEPOINT occurrence; RELEASE SAVEPOINT occurrence")
                    .await
                    .map_err(DbError::from)?;
                refused.push(RefusedOccurrence { index, start: o.start, end: o.end, problem: render(e) });
            }
        }
    }
    if held.is_empty() || (req.mode == Mode::AllOrNothing && !refused.is_empty()) {
        return Err(BookingError::OccurrencesRefused(refused));
    }
    // A refusal under the lock turns synchronous commit off for the rest of the
    // transaction (see `reserve`); the holds this one keeps must reach the disk
    // before the client is told of them.
    tx.batch_execute("SET LOCAL synchronous_commit TO ON").await.map_err(DbError::from)?;
    let id = Uuid::now_v7();
    let mut recorded: Vec<OccurrenceRow> = occurrences
        .iter()
        .enumerate()
        .map(|(i, o)| OccurrenceRow {
            position: i as i32,
            start: o.start,
            end: o.end,
            reservation_id: None,
            problem: None,
            status: None,
        })
        .collect();
    for (index, rid) in held {
        recorded[index].reservation_id = Some(rid);
    }
    for r in refused {
        recorded[r.index].problem = Some(r.problem);
    }
    let new = NewSeries {
        id,
        owner: req.owner.as_deref().unwrap_or(&who.id),
        resource_id: zone_resource.id,
        time_zone: tz.name(),
        recurrence: &req.recurrence_text,
        mode: req.mode.as_str(),
        now,
    };
    rows::insert(tx, &new, &recorded).await?;
    read(tx, id, now).await?.ok_or(BookingError::SeriesNotFound)
}

/// The resource whose zone the rule is expanded in, and every resource the series
/// locks (sorted, deduplicated: the lock order). Refuses a missing, archived or
/// upstream resource for the whole series.
async fn resources_of(tx: &impl GenericClient, target: &SeriesTarget) -> Result<(Resource, Vec<Uuid>), BookingError> {
    let (first, mut ids) = match target {
        SeriesTarget::Resource { resource_id, .. } => (*resource_id, vec![*resource_id]),
        SeriesTarget::Items(items) => {
            let mut ids = Vec::new();
            let mut first = None;
            for item in items {
                match item.target {
                    Target::Resource(id) => {
                        first.get_or_insert(id);
                        ids.push(id);
                    }
                    Target::Pool(pool) => {
                        let members = pools::members_of(tx, &[pool]).await?;
                        let m = members.into_iter().next().ok_or(BookingError::PoolNotFound(pool))?;
                        if let Some(&member) = m.resource_ids.first() {
                            first.get_or_insert(member);
                        }
                        ids.extend(m.resource_ids);
                    }
                }
            }
            (first.ok_or_else(|| invalid("items", "must name a resource or a pool with members"))?, ids)
        }
    };
    ids.sort();
    ids.dedup();
    let zone = resources::get(tx, first).await?.ok_or(BookingError::ResourceNotFound)?;
    if zone.archived_at.is_some() {
        return Err(BookingError::ResourceArchived);
    }
    if matches!(target, SeriesTarget::Resource { .. }) && zone.authority == Authority::Upstream {
        // Written to the system of record one seat at a time, outside any transaction:
        // a series could not be held all or nothing there.
        return Err(BookingError::UpstreamInGroup { index: 0 });
    }
    Ok((zone, ids))
}

/// A series as it stands, or `None` when there is none.
async fn read(c: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<Option<Series>, BookingError> {
    let Some(s) = rows::get(c, id).await? else { return Ok(None) };
    let occurrences = rows::occurrences(c, id, now)
        .await?
        .into_iter()
        .map(|o| SeriesOccurrence {
            index: o.position as usize,
            start: o.start,
            end: o.end,
            reservation_id: o.reservation_id,
            status: o.status,
            problem: o.problem,
        })
        .collect();
    let mode = if s.mode == Mode::SkipConflicts.as_str() { Mode::SkipConflicts } else { Mode::AllOrNothing };
    Ok(Some(Series {
        id: s.id,
        owner: s.owner,
        time_zone_resource_id: s.resource_id,
        time_zone: s.time_zone,
        recurrence: s.recurrence,
        mode: mode.as_str(),
        created_at: s.created_at,
        occurrences,
    }))
}

/// `GET /v1/series/{id}`: its owner's, or any for an admin.
pub async fn get_series(
    c: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<Series, BookingError> {
    match read(c, id, now).await? {
        Some(s) if s.owner == who.id || who.admin => Ok(s),
        _ => Err(BookingError::SeriesNotFound),
    }
}

/// What a scoped change acts on: the series of reservation `id` (none for a
/// reservation of no series, or scope `one`) and the reservations, in series order.
/// `one` is the reservation alone; `following` and `all` are the live occurrences
/// from it, or from the first, on, with the reservation itself always among them (so
/// that its own refusal is answered), locked ([`lock_scope`]).
pub async fn in_scope(
    c: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    scope: Scope,
    now: DateTime<Utc>,
) -> Result<(Option<Uuid>, Vec<Uuid>), BookingError> {
    let r = match reservations::get(c, id).await? {
        Some(r) if r.owner == who.id || who.admin => r,
        _ => return Err(BookingError::ReservationNotFound),
    };
    let Some(series) = r.series_id.filter(|_| scope != Scope::One) else { return Ok((None, vec![id])) };
    let from = match scope {
        Scope::All => 0,
        _ => rows::place_of(c, series, id).await?.unwrap_or(0),
    };
    let mut ids = rows::in_scope(c, series, from, now).await?;
    if !ids.contains(&id) {
        ids.insert(0, id);
    }
    lock_scope(c, &ids).await?;
    Ok((Some(series), ids))
}

/// Locks what a scoped change touches, in the lock order, before any of it changes:
/// every resource of every occurrence in scope (a pool item may have picked another
/// member each time) at once, in id order, then the reservations in series order. The
/// single operations that follow find their rows locked already; without this, the
/// second occurrence's resource would be locked after the first one's reservation
/// (back up a level), and a move processed latest first would take the reservations
/// in the opposite order to a scoped confirm of the same series.
async fn lock_scope(c: &impl GenericClient, ids: &[Uuid]) -> Result<(), BookingError> {
    let mut resource_ids = Vec::new();
    for &id in ids {
        resource_ids.extend(reservations::resources_of_booking(c, id).await?);
    }
    resource_ids.sort();
    resource_ids.dedup();
    resources::lock_many(c, &resource_ids).await?;
    for &id in ids {
        reservations::lock_booking(c, id).await?;
    }
    Ok(())
}

/// The series after a scoped change, for its answer.
pub async fn series_after(c: &impl GenericClient, series: Uuid, now: DateTime<Utc>) -> Result<Series, BookingError> {
    read(c, series, now).await?.ok_or(BookingError::SeriesNotFound)
}

/// A move of reservation `id` carried to the other occurrences in scope (`ids`, from
/// [`in_scope`]): each moves
/// by the same change of wall-clock time in the series' zone (moved from 09:00 to
/// 10:00, every occurrence moves to 10:00, on either side of a change of offset), and
/// takes the same quantity and metadata. All or nothing: an occurrence that does not
/// fit fails the whole move ([`BookingError::SlotUnavailable`]), and the caller rolls
/// back. Each is moved by [`reschedule`], so every rule and policy judges it.
pub async fn reschedule_series(
    tx: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    ids: &[Uuid],
    change: Change,
    limits: Limits,
    clock: &dyn Clock,
) -> Result<Series, BookingError> {
    let this = reservations::get(tx, id).await?.ok_or(BookingError::ReservationNotFound)?;
    let series = this.series_id.ok_or(BookingError::SeriesNotFound)?;
    let s = rows::get(tx, series).await?.ok_or(BookingError::SeriesNotFound)?;
    let tz: Tz = s.time_zone.parse().map_err(|_| DbError::Corrupt(format!("series time zone {}", s.time_zone)))?;
    let local = |t: DateTime<Utc>| t.with_timezone(&tz).naive_local();
    let start_shift = change.start.map(|t| local(t) - local(this.start));
    let end_shift = change.end.map(|t| local(t) - local(this.end));
    // Later occurrences first when moving later, so that no occurrence is moved onto
    // the place of one that has not moved yet.
    let later = start_shift.or(end_shift).is_some_and(|d| d > chrono::Duration::zero());
    let order: Vec<Uuid> = if later { ids.iter().rev().copied().collect() } else { ids.to_vec() };
    for occurrence in order {
        let r = reservations::get(tx, occurrence).await?.ok_or(BookingError::ReservationNotFound)?;
        let one = Change {
            start: start_shift.map(|d| local_to_utc(tz, local(r.start) + d)),
            end: end_shift.map(|d| local_to_utc(tz, local(r.end) + d)),
            quantity: change.quantity,
            metadata: change.metadata.clone(),
        };
        if let Rescheduled::Unavailable = reschedule(tx, who, occurrence, one, limits, clock).await? {
            return Err(BookingError::SlotUnavailable);
        }
    }
    series_after(tx, series, clock.now()).await
}
