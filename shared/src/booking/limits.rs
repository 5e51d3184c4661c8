//! Booking limits: at most so many live bookings and holds of one principal on a
//! resource per window (`domain::policies::BookingLimit`). Judged under the resource's
//! lock by every path that makes or moves a booking at its owner's request (the
//! general hold, bookings of several items, the reschedule), so that one principal's
//! concurrent requests are counted one after another and a burst cannot pass a limit.
//! The one-statement hold serves no resource with limits. What an admin does is not
//! limited, for themselves or for the owner they book for (the booking's `acted_by`
//! names them): the exemption follows who acts, not who owns. The waitlist's offers
//! are the service's, not limited either.

use super::BookingError;
use crate::db::{GenericClient, limits};
use crate::domain::{Principal, Resource, judge_limits, limits_reach};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Refuses a booking of `owner`'s, made or moved by `actor`, starting at `start` on
/// `resource` (whose lock the caller holds) with [`BookingError::LimitExceeded`] when
/// it would break a limit; `except`: the booking being moved, which does not count
/// against itself.
pub(super) async fn judge(
    tx: &impl GenericClient,
    resource: &Resource,
    owner: &str,
    actor: &Principal,
    start: DateTime<Utc>,
    except: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<(), BookingError> {
    let (rules, zone) = (&resource.policies.limits, resource.calendar.time_zone);
    let Some(reach) = limits_reach(rules, start, start, zone).filter(|_| !actor.admin) else { return Ok(()) };
    let others = limits::counted(tx, resource.id, owner, reach, except, now).await?;
    judge_limits(rules, start, zone, &others).map_err(BookingError::LimitExceeded)
}
