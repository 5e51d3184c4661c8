//! Calendar feeds: a URL that a calendar application reads without a principal, made
//! by a principal for their own bookings or by an admin for one resource's. The URL
//! carries a token of 256 random bits; only its SHA-256 is stored, so the token is
//! shown once (on creation and on rotation) and a bad, revoked or rotated-out token
//! finds nothing. What the feed shows is `domain::ical`'s.

use super::{BookingError, invalid};
use crate::db::feeds::{self, EventRow, EventWindow, FeedRow};
use crate::db::{GenericClient, resources};
use crate::domain::Principal;
use crate::domain::ical::{Feed, FeedEvent, sequence, shown_as};
use base64::Engine;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// A feed shows the bookings that meet this many days back from now...
pub const FEED_PAST_DAYS: i64 = 30;
/// ...to this many days ahead.
pub const FEED_AHEAD_DAYS: i64 = 366;
/// A cancelled booking stays in the feed, as `STATUS:CANCELLED`, this long after its
/// cancel, so that a calendar that copied it learns it is off.
pub const CANCELLED_KEPT_DAYS: i64 = 30;
/// At most this many events in one feed, the earliest first.
pub const MAX_EVENTS: i64 = 1000;

/// Random octets in a token: 256 bits.
const TOKEN_BYTES: usize = 32;
/// A token's length as written in its URL (unpadded base64url).
const TOKEN_CHARS: usize = 43;

/// A feed as its creation or rotation answers it: the one time its URL is shown.
#[derive(Debug, Clone, Serialize)]
pub struct FeedUrl {
    pub id: Uuid,
    /// `/v1/feeds/{token}.ics`, relative to the API's origin.
    pub url: String,
    /// The resource whose bookings it shows; `null`: its owner's own bookings.
    pub resource_id: Option<Uuid>,
    pub owner: String,
    pub created_at: DateTime<Utc>,
}

impl FeedUrl {
    fn of(row: FeedRow, token: &str) -> Self {
        FeedUrl {
            id: row.id,
            url: format!("/v1/feeds/{token}.ics"),
            resource_id: row.resource_id,
            owner: row.owner,
            created_at: row.created_at,
        }
    }
}

/// A new token and the hash that is stored for it.
fn new_token() -> (String, Vec<u8>) {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).expect("the operating system's random source answers");
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let hash = token_hash(&token);
    (token, hash)
}

fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Makes a feed of `who`'s own bookings, or (admins only: the caller checks) of
/// resource `resource_id`'s.
pub async fn create_feed(
    c: &impl GenericClient,
    who: &Principal,
    resource_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<FeedUrl, BookingError> {
    if let Some(id) = resource_id
        && resources::get(c, id).await?.is_none()
    {
        return Err(invalid("resource_id", "names no resource"));
    }
    let (token, hash) = new_token();
    let row = FeedRow { id: Uuid::now_v7(), owner: who.id.clone(), resource_id, created_at: now };
    feeds::insert(c, &row, &hash).await?;
    Ok(FeedUrl::of(row, &token))
}

/// A feed `who` may change: their own, or any for an admin. Another's is not found,
/// so that ids are not probed.
async fn own_feed(c: &impl GenericClient, who: &Principal, id: Uuid) -> Result<FeedRow, BookingError> {
    match feeds::get(c, id).await? {
        Some(feed) if who.admin || feed.owner == who.id => Ok(feed),
        _ => Err(BookingError::FeedNotFound),
    }
}

/// Revokes a feed: its URL finds nothing from now on.
pub async fn delete_feed(c: &impl GenericClient, who: &Principal, id: Uuid) -> Result<(), BookingError> {
    own_feed(c, who, id).await?;
    if feeds::delete(c, id).await? { Ok(()) } else { Err(BookingError::FeedNotFound) }
}

/// Gives a feed a new URL; the old one finds nothing from now on.
pub async fn rotate_feed(
    c: &impl GenericClient,
    who: &Principal,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<FeedUrl, BookingError> {
    own_feed(c, who, id).await?;
    let (token, hash) = new_token();
    let row = feeds::rotate(c, id, &hash, now).await?.ok_or(BookingError::FeedNotFound)?;
    Ok(FeedUrl::of(row, &token))
}

/// The feed at the last segment of its URL, `{token}.ics`. Anything that is not the
/// token of a live feed is the same not-found, read or not.
pub async fn read_feed(c: &impl GenericClient, segment: &str, now: DateTime<Utc>) -> Result<Feed, BookingError> {
    let token = segment.strip_suffix(".ics").ok_or(BookingError::FeedNotFound)?;
    let well_formed =
        token.len() == TOKEN_CHARS && token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !well_formed {
        return Err(BookingError::FeedNotFound);
    }
    let feed = feeds::by_token(c, &token_hash(token)).await?.ok_or(BookingError::FeedNotFound)?;
    let window = EventWindow {
        from: now - Duration::days(FEED_PAST_DAYS),
        to: now + Duration::days(FEED_AHEAD_DAYS),
        now,
        cancelled_since: now - Duration::days(CANCELLED_KEPT_DAYS),
        max_events: MAX_EVENTS,
    };
    let rows = feeds::events(c, feed.resource.as_ref().map(|r| r.0), &feed.owner, window).await?;
    let of_resource = feed.resource.is_some();
    let events = rows.into_iter().filter_map(|row| event(row, of_resource)).collect();
    Ok(match feed.resource {
        Some((_, name, zone)) => Feed { name, time_zone: Some(zone), events },
        None => Feed { name: format!("Bookings of {}", feed.owner), time_zone: None, events },
    })
}

/// A booking as its feed shows it: on a resource's feed, named after who booked it; on
/// an owner's, after the resource.
fn event(row: EventRow, of_resource: bool) -> Option<FeedEvent> {
    let status = shown_as(row.status)?;
    let who = if of_resource { &row.owner } else { &row.resource_name };
    let summary = match row.quantity {
        1 => who.clone(),
        n => format!("{who} ({n} places)"),
    };
    Some(FeedEvent {
        id: row.id,
        summary,
        resource_name: row.resource_name,
        time_zone: row.time_zone,
        starts_at: row.starts_at,
        ends_at: row.ends_at,
        status,
        sequence: sequence(row.reschedules, row.status),
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_256_random_bits_in_url_safe_text() {
        let (a, hash) = new_token();
        let (b, _) = new_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), TOKEN_CHARS);
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{a}");
        assert_eq!(hash.len(), 32);
        assert_eq!(hash, token_hash(&a));
    }
}
