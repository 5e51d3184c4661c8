//! A resource's life: creating, reading, changing its settings and capacity, archiving.
//!
//! A new capacity is written under the resource's change lock, which waits for and
//! then excludes every path that changes the load. Lowering it is refused while any
//! instant ahead holds more than the new value; the past is not judged (it was booked
//! under the capacity of its day), and its rows are detached from the capacity before
//! the change cascades into the rest (the reservations' composite foreign key on
//! `(resource_id, capacity)`), so that the exclusion constraint
//! of capacity 1 stays exact.

use super::{BookingError, hand_over, on_freed};
use crate::db::{GenericClient, lapse, reservations, resources, waitlist};
use crate::domain::{
    Authority, CalendarChange, CalendarRules, FieldError, Limits, Metadata, Patch, Policies, PoliciesChange, Principal,
    Resource,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub struct NewResource {
    pub name: String,
    pub capacity: i32,
    pub authority: Authority,
    pub upstream_ref: Option<String>,
    pub hold_ttl_seconds: Option<i32>,
    pub offer_ttl_seconds: Option<i32>,
    pub metadata: Metadata,
    /// The calendar rules given; the rest are the defaults (UTC, always open).
    pub calendar: CalendarChange,
    /// The policies given; the rest are none.
    pub policies: PoliciesChange,
    pub default_duration_minutes: Option<i32>,
}

pub struct ResourceDefaults {
    pub hold_ttl_seconds: i32,
    pub offer_ttl_seconds: i32,
}

pub async fn create_resource(
    c: &impl GenericClient,
    by: &Principal,
    new: NewResource,
    defaults: ResourceDefaults,
    now: DateTime<Utc>,
) -> Result<Resource, BookingError> {
    let mut errors = Vec::new();
    check_name(&new.name, &mut errors);
    if new.upstream_ref.as_deref().is_some_and(|r| r.chars().any(char::is_control)) {
        errors.push(FieldError::new("upstream_ref", "must not contain control characters"));
    }
    check_capacity(new.capacity, &mut errors);
    match (new.authority, new.upstream_ref.as_deref()) {
        (Authority::Upstream, None | Some("")) => {
            errors.push(FieldError::new("upstream_ref", "is required when authority is upstream"))
        }
        (Authority::Upstream, Some(r)) if r.len() > 200 => {
            errors.push(FieldError::new("upstream_ref", "must be at most 200 characters"))
        }
        (Authority::Local, Some(_)) => {
            errors.push(FieldError::new("upstream_ref", "must be null when authority is local"))
        }
        _ => {}
    }
    if new.authority == Authority::Upstream && new.capacity != 1 {
        errors.push(FieldError::new("capacity", "must be 1 when authority is upstream"));
    }
    check_ttls(new.hold_ttl_seconds, new.offer_ttl_seconds, &mut errors);
    let hold_ttl_seconds = new.hold_ttl_seconds.unwrap_or(defaults.hold_ttl_seconds);
    let policies = new.policies.apply(&Policies::default());
    check_max_hold(&policies, hold_ttl_seconds, &mut errors);
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    Ok(resources::insert(
        c,
        &resources::NewResource {
            id: Uuid::now_v7(),
            name: &new.name,
            capacity: new.capacity,
            authority: new.authority,
            upstream_ref: new.upstream_ref.as_deref(),
            hold_ttl_seconds,
            offer_ttl_seconds: new.offer_ttl_seconds.unwrap_or(defaults.offer_ttl_seconds),
            metadata: &new.metadata,
            created_by: &by.id,
            created_at: now,
            calendar: &new.calendar.apply(&CalendarRules::default()),
            policies: &policies,
            default_duration_minutes: new.default_duration_minutes,
        },
    )
    .await?)
}

pub async fn get_resource(c: &impl GenericClient, id: Uuid) -> Result<Resource, BookingError> {
    resources::get(c, id).await?.ok_or(BookingError::ResourceNotFound)
}

fn check_name(name: &str, errors: &mut Vec<FieldError>) {
    if !(1..=200).contains(&name.chars().count()) {
        errors.push(FieldError::new("name", "must be 1 to 200 characters"));
    }
    // PostgreSQL text cannot hold NUL, and no name needs control characters.
    if name.chars().any(char::is_control) {
        errors.push(FieldError::new("name", "must not contain control characters"));
    }
}

fn check_capacity(capacity: i32, errors: &mut Vec<FieldError>) {
    if !(1..=100_000).contains(&capacity) {
        errors.push(FieldError::new("capacity", "must be between 1 and 100000"));
    }
}

fn check_ttls(hold: Option<i32>, offer: Option<i32>, errors: &mut Vec<FieldError>) {
    for (field, ttl) in [("hold_ttl_seconds", hold), ("offer_ttl_seconds", offer)] {
        if ttl.is_some_and(|t| t < 1) {
            errors.push(FieldError::new(field, "must be at least 1"));
        }
    }
}

/// A hold is kept at least its TTL: a longest hold below it could never be reached.
fn check_max_hold(policies: &Policies, hold_ttl_seconds: i32, errors: &mut Vec<FieldError>) {
    if policies.max_hold_seconds.is_some_and(|max| max < hold_ttl_seconds) {
        errors.push(FieldError::new("max_hold_seconds", "must be at least hold_ttl_seconds"));
    }
}

/// What a `PATCH` of a resource asks to change; `None` keeps the current value. New
/// TTLs apply to holds and offers made from now on.
#[derive(Debug, Default)]
pub struct ResourceChange {
    pub name: Option<String>,
    pub capacity: Option<i32>,
    pub hold_ttl_seconds: Option<i32>,
    pub offer_ttl_seconds: Option<i32>,
    pub metadata: Option<Metadata>,
    /// New calendar rules: they judge reservations made from now on; those already
    /// made stay as they are.
    pub calendar: CalendarChange,
    /// New policies: they apply to every booking from now on.
    pub policies: PoliciesChange,
    pub default_duration_minutes: Patch<i32>,
}

/// Changes a resource's settings. A higher capacity is offered to the waitlist at
/// once; a lower one is refused with [`BookingError::CapacityInUse`] while any instant
/// ahead holds more. Run inside a transaction.
pub async fn update_resource(
    tx: &impl GenericClient,
    id: Uuid,
    change: ResourceChange,
    limits: Limits,
    now: DateTime<Utc>,
) -> Result<Resource, BookingError> {
    let mut errors = Vec::new();
    if let Some(name) = &change.name {
        check_name(name, &mut errors);
    }
    if let Some(capacity) = change.capacity {
        check_capacity(capacity, &mut errors);
    }
    check_ttls(change.hold_ttl_seconds, change.offer_ttl_seconds, &mut errors);
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    let current = resources::lock_for_change(tx, id).await?.ok_or(BookingError::ResourceNotFound)?;
    let capacity = change.capacity.unwrap_or(current.capacity);
    if current.authority == Authority::Upstream && capacity != 1 {
        return Err(super::invalid("capacity", "must be 1 when authority is upstream"));
    }
    let hold_ttl_seconds = change.hold_ttl_seconds.unwrap_or(current.hold_ttl_seconds);
    let policies = change.policies.apply(&current.policies);
    check_max_hold(&policies, hold_ttl_seconds, &mut errors);
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    let settings = resources::Settings {
        name: change.name.as_deref().unwrap_or(&current.name),
        capacity,
        hold_ttl_seconds,
        offer_ttl_seconds: change.offer_ttl_seconds.unwrap_or(current.offer_ttl_seconds),
        metadata: change.metadata.as_ref().unwrap_or(&current.metadata),
        calendar: &change.calendar.apply(&current.calendar),
        policies: &policies,
        default_duration_minutes: change.default_duration_minutes.apply(&current.default_duration_minutes),
    };
    if capacity == current.capacity {
        return Ok(resources::update_settings(tx, id, &settings, now).await?);
    }
    if current.archived_at.is_some() {
        return Err(BookingError::ResourceArchived);
    }
    // Lapsed holds ahead still count for the exclusion constraint: written down first.
    let lapsed = lapse::expire_lapsed_overlapping(tx, id, now, None, now).await?;
    if capacity < current.capacity {
        let peak = reservations::peak_ahead(tx, id, now).await?;
        if peak > i64::from(capacity) {
            return Err(BookingError::CapacityInUse { peak });
        }
    }
    reservations::detach_settled(tx, id, now).await?;
    let updated = resources::update_settings(tx, id, &settings, now).await?;
    on_freed(tx, &updated, &lapsed, now).await?;
    if capacity > current.capacity {
        // The new places go to whoever waits, before anyone else can take them.
        hand_over(tx, &updated, now, now + limits.horizon + limits.max_duration, now).await?;
    }
    Ok(updated)
}

/// Archives a resource: it takes no new holds, joins or reschedules, and its waiting
/// entries are cancelled (nothing can be offered to them). Its bookings stay, and can
/// still be cancelled; reads still work. Archiving again answers it as it is.
pub async fn archive_resource(tx: &impl GenericClient, id: Uuid, now: DateTime<Utc>) -> Result<Resource, BookingError> {
    let current = resources::lock(tx, id).await?.ok_or(BookingError::ResourceNotFound)?;
    if current.archived_at.is_some() {
        return Ok(current);
    }
    let archived = resources::archive(tx, id, now).await?;
    waitlist::cancel_waiting_of(tx, id, now).await?;
    Ok(archived)
}
