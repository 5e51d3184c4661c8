//! Pools: resources that stand in for one another, which an item of a booking is
//! picked from (the pick is in `group`). Admins create, change and delete them.

use super::BookingError;
use crate::db::{GenericClient, pools, resources};
use crate::domain::{Authority, FieldError, Pool, PoolStrategy, Principal};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The most members a pool may have.
pub const MAX_MEMBERS: usize = 50;

pub struct NewPool {
    pub name: String,
    pub resource_ids: Vec<Uuid>,
    pub strategy: PoolStrategy,
}

/// What a `PATCH` of a pool asks to change; `None` keeps the current value.
#[derive(Debug, Default)]
pub struct PoolChange {
    pub name: Option<String>,
    pub resource_ids: Option<Vec<Uuid>>,
    pub strategy: Option<PoolStrategy>,
}

pub async fn create_pool(
    tx: &impl GenericClient,
    by: &Principal,
    new: NewPool,
    now: DateTime<Utc>,
) -> Result<Pool, BookingError> {
    let mut errors = Vec::new();
    check_name(&new.name, &mut errors);
    check_members(tx, &new.resource_ids, &mut errors).await?;
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    let id = Uuid::now_v7();
    pools::insert(
        tx,
        &pools::NewPool {
            id,
            name: &new.name,
            strategy: new.strategy,
            resource_ids: &new.resource_ids,
            created_by: &by.id,
            now,
        },
    )
    .await?;
    get_pool(tx, id).await
}

pub async fn get_pool(c: &impl GenericClient, id: Uuid) -> Result<Pool, BookingError> {
    pools::get(c, id).await?.ok_or(BookingError::PoolNotFound(id))
}

pub async fn update_pool(
    tx: &impl GenericClient,
    id: Uuid,
    change: PoolChange,
    now: DateTime<Utc>,
) -> Result<Pool, BookingError> {
    let mut errors = Vec::new();
    if let Some(name) = &change.name {
        check_name(name, &mut errors);
    }
    if let Some(members) = &change.resource_ids {
        check_members(tx, members, &mut errors).await?;
    }
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    if !pools::lock(tx, id).await? {
        return Err(BookingError::PoolNotFound(id));
    }
    let current = get_pool(tx, id).await?;
    let name = change.name.unwrap_or(current.name);
    pools::update(tx, id, &name, change.strategy.unwrap_or(current.strategy), now).await?;
    if let Some(members) = &change.resource_ids {
        pools::set_members(tx, id, members).await?;
    }
    get_pool(tx, id).await
}

/// Deletes a pool; bookings picked from it stay, naming it.
pub async fn delete_pool(c: &impl GenericClient, id: Uuid) -> Result<(), BookingError> {
    if pools::delete(c, id).await? { Ok(()) } else { Err(BookingError::PoolNotFound(id)) }
}

fn check_name(name: &str, errors: &mut Vec<FieldError>) {
    if !(1..=200).contains(&name.chars().count()) || name.chars().any(char::is_control) {
        errors.push(FieldError::new("name", "must be 1 to 200 characters, none of them control characters"));
    }
}

/// Members are 1 to [`MAX_MEMBERS`] distinct local resources that exist: an upstream
/// resource's booking is written outside any transaction, so it cannot be held with
/// others all or nothing.
async fn check_members(c: &impl GenericClient, ids: &[Uuid], errors: &mut Vec<FieldError>) -> Result<(), BookingError> {
    if ids.is_empty() || ids.len() > MAX_MEMBERS {
        errors.push(FieldError::new("resource_ids", format!("must name 1 to {MAX_MEMBERS} resources")));
        return Ok(());
    }
    for (i, id) in ids.iter().enumerate() {
        if ids[..i].contains(id) {
            errors.push(FieldError::new(format!("resource_ids[{i}]"), "names a resource already in the pool"));
            continue;
        }
        match resources::get(c, *id).await? {
            None => errors.push(FieldError::new(format!("resource_ids[{i}]"), "is not a resource")),
            Some(r) if r.authority == Authority::Upstream => errors.push(FieldError::new(
                format!("resource_ids[{i}]"),
                "is an upstream resource, which cannot be booked with others",
            )),
            Some(_) => {}
        }
    }
    Ok(())
}
