//! Reading what is taken and what is free, and reading one reservation.

use super::{BookingError, invalid};
use crate::db::{GenericClient, reservations};
use crate::domain::calendar::{Reason, Slot, SlotQuery, Starts, Unavailable};
use crate::domain::{
    Authority, Claim, FieldError, FreePiece, Limits, Principal, Reservation, Resource, Status, judge_limits,
    limits_reach,
};
use crate::upstream::Block;
use chrono::{DateTime, Duration, Utc};
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

/// What is taken and what is free in `[from, to)`. For an upstream resource, `external`
/// is the upstream's view (through the cache); without it the answer is refused, as no
/// view of the system of record could be had.
pub async fn availability(
    c: &impl GenericClient,
    resource: &Resource,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    external: Option<&[Block]>,
    now: DateTime<Utc>,
) -> Result<Availability, BookingError> {
    let external = match (resource.authority, external) {
        (Authority::Upstream, None) => return Err(BookingError::UpstreamUnavailable { retry_after_seconds: 5 }),
        (_, e) => e.unwrap_or(&[]),
    };
    let active = reservations::active_in_window(c, resource.id, from, to, now).await?;
    // Bookings just outside the window still reach into it with their buffers.
    let mut claims = super::calendar::kept_around(c, resource, from, to, now).await?;
    let mut taken: Vec<Taken> = active
        .iter()
        .map(|r| Taken {
            start: r.start,
            end: r.end,
            quantity: r.quantity,
            status: TakenStatus::Local(r.status),
            expires_at: if r.status == Status::Held { r.expires_at } else { None },
        })
        .collect();
    // Our own confirmed bookings are in the upstream's view too: list each claim once.
    let ours = |b: &Block| active.iter().any(|r| r.start == b.start && r.end == b.end && r.status != Status::Held);
    for b in external.iter().filter(|b| b.start < to && b.end > from && !ours(b)) {
        taken.push(Taken { start: b.start, end: b.end, quantity: 1, status: TakenStatus::External, expires_at: None });
    }
    taken.sort_by_key(|t| (t.start, t.end));
    claims.extend(taken.iter().filter(|t| t.status == TakenStatus::External).map(|t| Claim {
        start: t.start,
        end: t.end,
        quantity: t.quantity.into(),
    }));
    Ok(Availability {
        resource_id: resource.id,
        capacity: resource.capacity,
        from,
        to,
        // After the hours, the exceptions and the buffers.
        free: resource.calendar.free(from, to, resource.capacity.into(), &claims),
        taken,
    })
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
    let external = match (resource.authority, external) {
        (Authority::Upstream, None) => return Err(BookingError::UpstreamUnavailable { retry_after_seconds: 5 }),
        (_, e) => e.unwrap_or(&[]),
    };
    let super::calendar::Around { mut kept, mut booked } =
        super::calendar::claims_around(c, resource, req.from, req.to, now).await?;
    if !external.is_empty() {
        // Our own confirmed bookings are in the upstream's view too: count each once.
        let near = reservations::active_in_window(c, resource.id, req.from, req.to, now).await?;
        let ours = |b: &Block| near.iter().any(|r| r.start == b.start && r.end == b.end && r.status != Status::Held);
        let blocks = external.iter().filter(|b| !ours(b)).map(|b| Claim { start: b.start, end: b.end, quantity: 1 });
        kept.extend(blocks.clone());
        booked.extend(blocks);
    }
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
