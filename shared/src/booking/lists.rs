//! The lists: a principal's reservations (everyone's for admins), the resources, and a
//! resource's waitlist. Each answers a page of at most `limit` items and, when more may
//! follow, the cursor of the next page.
//!
//! Pagination is by keyset, never OFFSET: a page is "the next `limit` rows after the
//! last one shown" in the list's order, which an index hands over directly however
//! deep the page is. Reservations and resources are newest first, by
//! `(created_at, id)`: both, because `created_at` comes from the injected clock and two
//! rows may share it, while the id breaks the tie. A row written after a page was read
//! is newer than every row shown, so it never shifts or repeats the items of the pages
//! after it. The waitlist is in queue order (its sequence); a new entry joins at the
//! end, where a later page shows it.
//!
//! A cursor is opaque and signed (see [`cursor`](super::cursor)), and bound to its
//! list: the list's name, whose rows it shows and every filter. A cursor of one list
//! used on another, or altered in any way, is [`BookingError::InvalidCursor`].

use super::cursor::{self, CursorKey, Position, Scope};
use super::{BookingError, invalid};
use crate::db::{GenericClient, pools, reservation_lists, resources, waitlist, webhooks};
use crate::domain::webhooks::{DeliveryAttempt, Webhook};
use crate::domain::{Pool, Principal, Reservation, Resource, Status, WaitlistEntry};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use uuid::Uuid;

pub const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 100;

/// One page of a list.
#[derive(Debug, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The next page's cursor; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// Which page: how many items (1 to [`MAX_LIMIT`]) and where to go on from.
#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    pub limit: i64,
    pub cursor: Option<String>,
}

/// What a reservations list keeps.
#[derive(Debug, Clone, Default)]
pub struct ReservationFilter {
    /// Whose reservations; for admins only (others see their own whatever it says).
    pub owner: Option<String>,
    pub resource_id: Option<Uuid>,
    /// Empty: every status. A hold past its expiry counts as `EXPIRED`, as it reads.
    pub statuses: Vec<Status>,
    /// Reservations that overlap `[from, to)`; either bound may be left open.
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

/// `GET /v1/reservations`: the caller's reservations, newest first; an admin's list is
/// everyone's unless it names an owner.
pub async fn list_reservations(
    c: &impl GenericClient,
    key: &CursorKey,
    who: &Principal,
    filter: ReservationFilter,
    page: PageRequest,
    now: DateTime<Utc>,
) -> Result<Page<Reservation>, BookingError> {
    if let (Some(from), Some(to)) = (filter.from, filter.to)
        && from >= to
    {
        return Err(invalid("to", "must be after from"));
    }
    let owner = if who.admin { filter.owner } else { Some(who.id.clone()) };
    let mut statuses = filter.statuses;
    statuses.sort_by_key(|s| s.as_str());
    statuses.dedup();
    let text = |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true)).unwrap_or_default();
    let statuses_text: Vec<&str> = statuses.iter().map(|s| s.as_str()).collect();
    let scope = Scope::new("reservations")
        // Unambiguous: an owner is never empty, so "" is everyone's.
        .field("owner", owner.as_deref().unwrap_or(""))
        .field("resource_id", &filter.resource_id.map(|id| id.to_string()).unwrap_or_default())
        .field("status", &statuses_text.join(","))
        .field("from", &text(filter.from))
        .field("to", &text(filter.to));
    let after = newest_position(key, &scope, page.cursor.as_deref())?;
    let rows = reservation_lists::list(
        c,
        &reservation_lists::ListFilter {
            owner: owner.as_deref(),
            resource_id: filter.resource_id,
            statuses: &statuses,
            from: filter.from,
            to: filter.to,
            after,
            limit: page.limit + 1,
            now,
        },
    )
    .await?;
    let page = cut(rows, page.limit, |r| Position::Newest { created_at: r.created_at, id: r.id }, key, &scope);
    Ok(Page { items: page.items.into_iter().map(|r| r.as_of(now)).collect(), next_cursor: page.next_cursor })
}

/// `GET /v1/resources`: newest first, archived ones only when asked for.
pub async fn list_resources(
    c: &impl GenericClient,
    key: &CursorKey,
    include_archived: bool,
    page: PageRequest,
) -> Result<Page<Resource>, BookingError> {
    let scope = Scope::new("resources").field("include_archived", if include_archived { "true" } else { "false" });
    let after = newest_position(key, &scope, page.cursor.as_deref())?;
    let rows = resources::list(c, include_archived, after, page.limit + 1).await?;
    Ok(cut(rows, page.limit, |r| Position::Newest { created_at: r.created_at, id: r.id }, key, &scope))
}

/// `GET /v1/webhooks` (admins): the live endpoints, newest first, without secrets.
pub async fn list_webhooks(
    c: &impl GenericClient,
    key: &CursorKey,
    page: PageRequest,
) -> Result<Page<Webhook>, BookingError> {
    let scope = Scope::new("webhooks");
    let after = newest_position(key, &scope, page.cursor.as_deref())?;
    let rows = webhooks::list(c, after, page.limit + 1).await?;
    Ok(cut(rows, page.limit, |w| Position::Newest { created_at: w.created_at, id: w.id }, key, &scope))
}

/// `GET /v1/webhooks/{id}/deliveries`: the endpoint's delivery attempts, newest first.
/// A deleted endpoint's log is gone with it (404).
pub async fn list_webhook_deliveries(
    c: &impl GenericClient,
    key: &CursorKey,
    endpoint_id: Uuid,
    page: PageRequest,
) -> Result<Page<DeliveryAttempt>, BookingError> {
    let scope = Scope::new("webhook_deliveries").field("webhook_id", &endpoint_id.to_string());
    let after = newest_position(key, &scope, page.cursor.as_deref())?;
    if webhooks::get(c, endpoint_id).await?.is_none() {
        return Err(BookingError::WebhookNotFound);
    }
    let rows = webhooks::list_attempts(c, endpoint_id, after, page.limit + 1).await?;
    Ok(cut(rows, page.limit, |a| Position::Newest { created_at: a.attempted_at, id: a.id }, key, &scope))
}

/// `GET /v1/pools`: the pools, newest first.
pub async fn list_pools(
    c: &impl GenericClient,
    key: &CursorKey,
    page: PageRequest,
) -> Result<Page<Pool>, BookingError> {
    let scope = Scope::new("pools");
    let after = newest_position(key, &scope, page.cursor.as_deref())?;
    let rows = pools::list(c, after, page.limit + 1).await?;
    Ok(cut(rows, page.limit, |p| Position::Newest { created_at: p.created_at, id: p.id }, key, &scope))
}

/// `GET /v1/resources/{id}/waitlist` (admins): the whole queue, every status, in FIFO
/// order, with each waiting entry's position.
pub async fn list_waitlist(
    c: &impl GenericClient,
    key: &CursorKey,
    resource_id: Uuid,
    page: PageRequest,
    now: DateTime<Utc>,
) -> Result<Page<WaitlistEntry>, BookingError> {
    let scope = Scope::new("waitlist").field("resource_id", &resource_id.to_string());
    let after = match page.cursor.as_deref().map(|c| cursor::decode(key, &scope, c)) {
        None => None,
        Some(Some(Position::Seq(seq))) => Some(seq),
        Some(_) => return Err(BookingError::InvalidCursor),
    };
    // An unknown resource is a 404, not an empty queue.
    resources::get(c, resource_id).await?.ok_or(BookingError::ResourceNotFound)?;
    let rows = waitlist::list(c, resource_id, after, now, page.limit + 1).await?;
    Ok(cut(rows, page.limit, |e| Position::Seq(e.seq), key, &scope))
}

/// `GET /v1/waitlist`: the caller's own entries (an admin may name another owner),
/// newest first, every status, optionally of one resource.
pub async fn list_own_waitlist(
    c: &impl GenericClient,
    key: &CursorKey,
    who: &Principal,
    filter: OwnWaitlistFilter,
    page: PageRequest,
    now: DateTime<Utc>,
) -> Result<Page<WaitlistEntry>, BookingError> {
    let owner = match filter.owner {
        Some(owner) if who.admin => owner,
        _ => who.id.clone(),
    };
    let scope = Scope::new("own-waitlist")
        .field("owner", &owner)
        .field("resource_id", &filter.resource_id.map(|id| id.to_string()).unwrap_or_default());
    let after = newest_position(key, &scope, page.cursor.as_deref())?;
    let rows = waitlist::list_by_owner(c, &owner, filter.resource_id, after, now, page.limit + 1).await?;
    Ok(cut(rows, page.limit, |e| Position::Newest { created_at: e.created_at, id: e.id }, key, &scope))
}

/// What the list of one's own waitlist entries keeps.
#[derive(Debug, Clone, Default)]
pub struct OwnWaitlistFilter {
    /// Whose entries; for admins only.
    pub owner: Option<String>,
    pub resource_id: Option<Uuid>,
}

/// The `(created_at, id)` a cursor of a newest-first list names.
fn newest_position(
    key: &CursorKey,
    scope: &Scope,
    cursor: Option<&str>,
) -> Result<Option<(DateTime<Utc>, Uuid)>, BookingError> {
    match cursor.map(|c| cursor::decode(key, scope, c)) {
        None => Ok(None),
        Some(Some(Position::Newest { created_at, id })) => Ok(Some((created_at, id))),
        Some(_) => Err(BookingError::InvalidCursor),
    }
}

/// A page from `limit + 1` rows: the extra row only tells that another page follows,
/// whose cursor is the position of this page's last item.
pub(super) fn cut<T>(
    mut rows: Vec<T>,
    limit: i64,
    position: impl Fn(&T) -> Position,
    key: &CursorKey,
    scope: &Scope,
) -> Page<T> {
    let limit = usize::try_from(limit).unwrap_or(0);
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next_cursor = match rows.last() {
        Some(last) if more => Some(cursor::encode(key, scope, position(last))),
        _ => None,
    };
    Page { items: rows, next_cursor }
}
