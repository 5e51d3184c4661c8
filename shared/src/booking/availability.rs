//! Reading what is taken and what is free, and reading one reservation.

use super::cursor::{self, CursorKey, Position, Scope};
use super::lists::{PageRequest, cut};
use super::{BookingError, invalid};
use crate::db::GenericClient;
use crate::db::reservations::{self, CalendarPosition};
use crate::domain::calendar::{Reason, Slot, SlotQuery, Starts, Unavailable};
use crate::domain::{
    Authority, FieldError, FreePiece, Limits, Principal, Reservation, Resource, Status, judge_limits, limits_reach,
};
use crate::upstream::Block;
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::Serialize;
use uuid::Uuid;

/// Reads a reservation as of `now`. Others' reservations are not found, except for admins.
pub async fn get_reservation(
    c: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<Reservation, BookingError> {
    match reservations::get(c, id).await? {
        Some(r) if r.owner == who.id || who.admin => Ok(r.as_of(now)),
        _ => Err(BookingError::ReservationNotFound),
    }
}

#[derive(Debug, Serialize)]
pub struct Taken {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub status: TakenStatus,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A local reservation's status, or `EXTERNAL` for the upstream's own claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakenStatus {
    Local(Status),
    External,
}

impl Serialize for TakenStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TakenStatus::Local(status) => status.serialize(s),
            TakenStatus::External => s.serialize_str("EXTERNAL"),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Availability {
    pub resource_id: Uuid,
    pub capacity: i32,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub taken: Vec<Taken>,
    pub free: Vec<FreePiece>,
    /// The cursor of the next page of `taken`; `None` on the last.
    pub next_cursor: Option<String>,
}

/// How many claims one availability answer lists, at most and by default: a page of
/// them (about 0.7 MB) stays far below the 6 MB a Lambda function may answer.
pub const MAX_TAKEN: i64 = 5_000;

/// What an availability read asks for: the window, and which page of its claims.
#[derive(Debug, Clone)]
pub struct AvailabilityRequest {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub page: PageRequest,
}

/// Checks an availability window before anything is read.
pub fn check_window(from: DateTime<Utc>, to: DateTime<Utc>, max_window: Duration) -> Result<(), BookingError> {
    if from >= to {
        return Err(invalid("to", "must be after from"));
    }
    if to - from > max_window {
        return Err(invalid("to", format!("the window may span at most {} days", max_window.num_days())));
    }
    Ok(())
}

/// What is taken and what is free in `[from, to)`. `taken` comes a page at a time, in
/// calendar order (start, end, then id: keyset, so a claim made between two pages never
/// shifts them); `free` is whole on every page. For an upstream resource, `external`
/// is the upstream's view (through the cache); without it the answer is refused, as no
/// view of the system of record could be had.
pub async fn availability(
    c: &impl GenericClient,
    key: &CursorKey,
    resource: &Resource,
    req: &AvailabilityRequest,
    external: Option<&[Block]>,
    now: DateTime<Utc>,
) -> Result<Availability, BookingError> {
    let (from, to) = (req.from, req.to);
    let blocks: Vec<Block> = upstream_claims(c, resource, (from, to), external, now)
        .await?
        .into_iter()
        .filter(|b| b.start < to && b.end > from)
        .collect();
    let text = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Micros, true);
    let scope = Scope::new("availability")
        .field("resource_id", &resource.id.to_string())
        .field("from", &text(from))
        .field("to", &text(to));
    let after = match req.page.cursor.as_deref().map(|c| cursor::decode(key, &scope, c)) {
        None => None,
        Some(Some(Position::Span { start, end, id })) => Some((start, end, id)),
        Some(_) => return Err(BookingError::InvalidCursor),
    };
    let window = (from, to);
    let active = reservations::active_in_window_after(c, resource.id, window, after, Some(req.page.limit + 1), now);
    let mut listed: Vec<(CalendarPosition, Taken)> = active
        .await?
        .iter()
        .map(|r| {
            let status = TakenStatus::Local(r.status);
            let expires_at = if r.status == Status::Held { r.expires_at } else { None };
            ((r.start, r.end, r.id), Taken { start: r.start, end: r.end, quantity: r.quantity, status, expires_at })
        })
        .collect();
    for b in &blocks {
        let at = (b.start, b.end, Uuid::nil());
        if after.is_none_or(|a| at > a) {
            let status = TakenStatus::External;
            listed.push((at, Taken { start: b.start, end: b.end, quantity: 1, status, expires_at: None }));
        }
    }
    listed.sort_by_key(|(at, _)| *at);
    let page = cut(listed, req.page.limit, |&((start, end, id), _)| Position::Span { start, end, id }, key, &scope);
    // What `free` is judged by: the ranges kept around the window (bookings just outside
    // it still reach into it with their buffers), or on a big event the load timeline,
    // as the slots read does; and the upstream's claims.
    let mut claims = super::calendar::claims_around(c, resource, from, to, now).await?.kept;
    claims.extend(blocks.iter().map(Block::claim));
    Ok(Availability {
        resource_id: resource.id,
        capacity: resource.capacity,
        from,
        to,
        // After the hours, the exceptions and the buffers.
        free: resource.calendar.free(from, to, resource.capacity.into(), &claims),
        taken: page.items.into_iter().map(|(_, taken)| taken).collect(),
        next_cursor: page.next_cursor,
    })
}

/// The upstream's claims around `[from, to)` (its view, `external`, read through the
/// cache) less our own confirmed bookings, which its view holds too, each once, in
/// calendar order; none on a local resource. Without a view of an upstream resource
/// the read is refused: no view of the system of record could be had. An upstream seat
/// is a single unit, so the window holds few bookings to compare.
async fn upstream_claims(
    c: &impl GenericClient,
    resource: &Resource,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    external: Option<&[Block]>,
    now: DateTime<Utc>,
) -> Result<Vec<Block>, BookingError> {
    let external = match (resource.authority, external) {
        (Authority::Upstream, None) => return Err(BookingError::UpstreamUnavailable { retry_after_seconds: 5 }),
        (_, e) => e.unwrap_or(&[]),
    };
    if external.is_empty() {
        return Ok(Vec::new());
    }
    let near = reservations::active_in_window(c, resource.id, from, to, now).await?;
    let ours = |b: &Block| near.iter().any(|r| r.start == b.start && r.end == b.end && r.status != Status::Held);
    let mut blocks: Vec<Block> = external.iter().filter(|b| !ours(b)).cloned().collect();
    blocks.sort_by_key(|b| (b.start, b.end));
    blocks.dedup();
    Ok(blocks)
}

/// What a slots read asks for.
#[derive(Debug, Clone, Copy)]
pub struct SlotsRequest {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub duration: Duration,
    pub quantity: i32,
}

/// The starts of a resource's grid in a window (or every `duration` from local
/// midnight): those bookable after its hours, buffers, notice and advance and the load
/// as this read sees it (a read without locks: a reserve still decides), and the
/// others with the reason each is not.
pub async fn slots(
    c: &impl GenericClient,
    resource: &Resource,
    req: SlotsRequest,
    external: Option<&[Block]>,
    who: Option<&Principal>,
    limits: Limits,
    now: DateTime<Utc>,
) -> Result<Starts, BookingError> {
    let mut errors = Vec::new();
    if req.duration < Duration::minutes(1) || req.duration > limits.max_duration {
        errors.push(FieldError::new(
            "duration",
            format!("must be from 1 minute to {} minutes", limits.max_duration.num_minutes()),
        ));
    }
    if !(1..=resource.capacity).contains(&req.quantity) {
        errors.push(FieldError::new("quantity", format!("must be from 1 to the capacity of {}", resource.capacity)));
    }
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    let blocks = upstream_claims(c, resource, (req.from, req.to), external, now).await?;
    let super::calendar::Around { mut kept, mut booked } =
        super::calendar::claims_around(c, resource, req.from, req.to, now).await?;
    kept.extend(blocks.iter().map(Block::claim));
    booked.extend(blocks.iter().map(Block::claim));
    let mut starts = resource.calendar.starts(&SlotQuery {
        from: req.from,
        to: req.to,
        duration: req.duration,
        quantity: req.quantity,
        capacity: resource.capacity,
        claims: &kept,
        booked: &booked,
        now,
        latest_end: now + limits.horizon,
    });
    if let Some(who) = who.filter(|w| !w.admin && !resource.policies.limits.is_empty()) {
        closed_by_limits(c, resource, who, &mut starts, now).await?;
    }
    Ok(starts)
}

/// Moves the starts a booking limit closes for `who` (their own live bookings fill its
/// window) from the bookable to the unavailable ones, with the reason `limit`.
async fn closed_by_limits(
    c: &impl GenericClient,
    resource: &Resource,
    who: &Principal,
    starts: &mut Starts,
    now: DateTime<Utc>,
) -> Result<(), BookingError> {
    let (Some(first), Some(last)) = (starts.slots.first(), starts.slots.last()) else { return Ok(()) };
    let (rules, zone) = (&resource.policies.limits, resource.calendar.time_zone);
    let Some(reach) = limits_reach(rules, first.start, last.start, zone) else { return Ok(()) };
    let others = crate::db::limits::counted(c, resource.id, &who.id, reach, None, now).await?;
    let (open, closed): (Vec<Slot>, Vec<Slot>) = std::mem::take(&mut starts.slots)
        .into_iter()
        .partition(|s| judge_limits(rules, s.start, zone, &others).is_ok());
    starts.slots = open;
    if !closed.is_empty() {
        starts.unavailable.extend(closed.into_iter().map(|s| Unavailable {
            start: s.start,
            end: s.end,
            reason: Reason::Limit,
        }));
        starts.unavailable.sort_by_key(|u| u.start);
    }
    Ok(())
}
