//! Creating and reading resources.

use super::BookingError;
use crate::db::{GenericClient, resources};
use crate::domain::{Authority, FieldError, Principal, Resource};
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub struct NewResource {
    pub name: String,
    pub capacity: i32,
    pub authority: Authority,
    pub upstream_ref: Option<String>,
    pub hold_ttl_seconds: Option<i32>,
    pub offer_ttl_seconds: Option<i32>,
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
    let name_len = new.name.chars().count();
    if !(1..=200).contains(&name_len) {
        errors.push(FieldError::new("name", "must be 1 to 200 characters"));
    }
    // PostgreSQL text cannot hold NUL, and no name needs control characters.
    if new.name.chars().any(char::is_control) {
        errors.push(FieldError::new("name", "must not contain control characters"));
    }
    if new.upstream_ref.as_deref().is_some_and(|r| r.chars().any(char::is_control)) {
        errors.push(FieldError::new("upstream_ref", "must not contain control characters"));
    }
    if !(1..=100_000).contains(&new.capacity) {
        errors.push(FieldError::new("capacity", "must be between 1 and 100000"));
    }
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
    for (field, ttl) in [("hold_ttl_seconds", new.hold_ttl_seconds), ("offer_ttl_seconds", new.offer_ttl_seconds)] {
        if ttl.is_some_and(|t| t < 1) {
            errors.push(FieldError::new(field, "must be at least 1"));
        }
    }
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
            hold_ttl_seconds: new.hold_ttl_seconds.unwrap_or(defaults.hold_ttl_seconds),
            offer_ttl_seconds: new.offer_ttl_seconds.unwrap_or(defaults.offer_ttl_seconds),
            created_by: &by.id,
            created_at: now,
        },
    )
    .await?)
}

pub async fn get_resource(c: &impl GenericClient, id: Uuid) -> Result<Resource, BookingError> {
    resources::get(c, id).await?.ok_or(BookingError::ResourceNotFound)
}
