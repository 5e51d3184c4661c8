//! The hold: holding (or, confirmed now, booking) capacity, where the race for the last
//! place is settled.
//!
//! A hold is decided in one statement when it can ([`hold_at_once`], in autocommit:
//! one round trip and its own commit), and when the request has an `Idempotency-Key`
//! the same statement claims the key and stores the answer. A resource's calendar
//! rules that need no load are judged here first, from the rules the process knows
//! ([`calendar::KNOWN`]), and the statement proves them current by their version under
//! its lock, and judges the buffers there. What that statement leaves to the general
//! path (upstream resources, calendar rules not proved current or that refuse the
//! range, a range refused for kept buffers, lapsed capacity owed to the waitlist, a key
//! already taken) it leaves untouched, and
//! [`reserve`] decides it in a transaction, under the resource lock, inside the
//! idempotency guard. The SQL is [`crate::db::hold`]'s.

use super::{BookingError, calendar, invalid, limits, on_freed};
use crate::db::hold::{self, Confirmation, Hold, NewHold};
use crate::db::idempotency::Answering;
use crate::db::{DbError, GenericClient, intents, lapse, outbox, reservations, resources};
use crate::domain::{
    Authority, Intent, IntentState, Judge, Limits, Metadata, Principal, Reservation, Resource, Source, Status,
    validate_range,
};
use crate::outbox::Written;
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

/// What the user approved, for the audit row an upstream confirm writes: who asked,
/// and the fingerprint of the request that asked.
#[derive(Debug, Clone, Copy)]
pub struct Approval<'a> {
    pub principal: &'a str,
    pub fingerprint: &'a [u8],
}

/// Records an upstream confirmation in the caller's transaction: the approval, the
/// intent (`REQUESTED`) and the intent message in the outbox.
pub(super) async fn request_intent(
    tx: &impl GenericClient,
    r: &Reservation,
    resource: &Resource,
    approval: Approval<'_>,
    now: DateTime<Utc>,
) -> Result<Intent, DbError> {
    let id = Uuid::now_v7();
    let seat = resource.upstream_ref.as_deref().ok_or(DbError::Corrupt("upstream resource without a ref".into()))?;
    tokio::try_join!(
        intents::insert_approval(tx, r.id, approval.principal, approval.fingerprint, now),
        intents::insert(tx, id, r.id, seat, now),
        outbox::insert_intent_message(tx, id, r.id, now),
    )?;
    Ok(Intent { id, state: IntentState::Requested, attempts: 0, updated_at: now })
}

/// Refuses fast when the system of record cannot be reached (breaker open): the work
/// would only queue up behind it.
pub(super) async fn upstream_reachable(tx: &impl GenericClient, now: DateTime<Utc>) -> Result<(), BookingError> {
    match crate::upstream::breaker::open_now(tx, now).await? {
        Some(retry_after_seconds) => Err(BookingError::UpstreamUnavailable { retry_after_seconds }),
        None => Ok(()),
    }
}

pub struct ReserveRequest {
    /// The principal the booking is for, when an admin books for someone else (the
    /// caller checks that only an admin names one); `None`: the caller.
    pub owner: Option<String>,
    pub resource_id: Uuid,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i32,
    pub confirmation: Confirmation,
    pub metadata: Metadata,
}

/// A reserve that ran to the end. A lost race is an outcome, not an error: the
/// transaction still commits, because it may have expired lapsed holds and handed them
/// to the waitlist on the way, and that work must not roll back with the refusal.
#[derive(Debug)]
pub enum Reserved {
    Reserved(Reservation),
    /// `CONFIRMING` on an upstream resource: an intent for the worker was queued, to be
    /// sent after commit.
    Queued(Reservation),
    Unavailable,
}

/// What [`hold_at_once`] came to.
// One value per request, matched at once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Attempt {
    /// Decided and committed: a hold or booking made, or the range taken, and what it
    /// wrote of events.
    Settled { outcome: Reserved, written: Written },
    /// Nothing was done: the general path must decide, in a transaction ([`reserve`]),
    /// inside the idempotency guard (which also answers a request whose key was taken).
    GeneralPath,
}

/// The common hold in one statement outside any transaction (autocommit: one round
/// trip, the statement's own commit). With `key`, the statement also claims the
/// request's idempotency key and stores its answer, so a keyed hold commits once with
/// its answer too. The statement either decides (and its writes commit with it) or
/// leaves nothing behind, when the general path must decide or the key is taken; the
/// caller then runs [`reserve`] in a transaction, inside the idempotency guard.
pub async fn hold_at_once(
    client: &impl GenericClient,
    owner: &Principal,
    req: &ReserveRequest,
    key: Option<&Answering<'_>>,
    limits: Limits,
    event_lease: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Attempt, BookingError> {
    validate(req, limits, now)?;
    if req.owner.is_some() {
        // An admin acting for an owner: only the general path records who acted.
        return Ok(Attempt::GeneralPath);
    }
    one_statement(client, owner, req, key, limits, event_lease, now).await
}

fn validate(req: &ReserveRequest, limits: Limits, now: DateTime<Utc>) -> Result<(), BookingError> {
    let errors = validate_range(req.start, req.end, now, limits);
    if !errors.is_empty() {
        return Err(BookingError::Validation(errors));
    }
    if req.quantity < 1 {
        return Err(invalid("quantity", "must be at least 1"));
    }
    Ok(())
}

/// The one-round-trip hold ([`hold::HOLD`], or [`hold::HOLD_KEYED`] with a key),
/// after the calendar rules that need no load, judged by the rules the process knows.
/// With the limit of active holds on, the statement takes the owner's lock first and
/// leaves a hold at the limit to the general path, which answers the refusal.
/// A resource the process does not know yet has its rules read first (one round trip,
/// once per process): a hold sent without them would go to the general path, whose
/// exclusive lock would send the holds that meet it there too. A range the known rules
/// refuse goes to the general path, which judges by the rules under the lock and
/// answers the refusal, and the rules are read again, in case they changed.
async fn one_statement(
    c: &impl GenericClient,
    owner: &Principal,
    req: &ReserveRequest,
    key: Option<&Answering<'_>>,
    limits: Limits,
    event_lease: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Attempt, BookingError> {
    let known = match calendar::KNOWN.get(req.resource_id) {
        Some(known) => Some(known),
        None => calendar::KNOWN.learn(c, req.resource_id).await?,
    };
    if known.as_ref().is_some_and(|k| k.limited) {
        // Booking limits count the principal's bookings under the exclusive lock.
        return Ok(Attempt::GeneralPath);
    }
    let with_rules = known.as_ref().is_some_and(|k| k.rules.any());
    let known_version = known.as_ref().map(|k| k.version);
    if let Some(known) = known.as_ref().filter(|_| with_rules)
        && known.rules.judge(req.start, req.end, now, Judge::Everything).is_err()
    {
        calendar::KNOWN.learn(c, req.resource_id).await?;
        return Ok(Attempt::GeneralPath);
    }
    let new = NewHold {
        id: Uuid::now_v7(),
        event_id: Uuid::now_v7(),
        resource_id: req.resource_id,
        owner: &owner.id,
        start: req.start,
        end: req.end,
        quantity: req.quantity,
        confirmation: req.confirmation,
        metadata: &req.metadata,
        now,
        rules_version: known_version,
        max_holds: limits::max_active_holds(owner, req.confirmation, limits),
        event_lease,
    };
    let held = match key {
        Some(key) => hold::hold_keyed(c, &new, key).await?,
        None => hold::hold(c, &new).await?,
    };
    match held {
        Hold::GeneralPath { rules_version } => {
            // Rules this process does not know, or knows at another version: read
            // them for the next hold.
            if rules_version.is_some() && rules_version != known_version {
                calendar::KNOWN.learn(c, req.resource_id).await?;
            }
            Ok(Attempt::GeneralPath)
        }
        Hold::KeyTaken => Ok(Attempt::GeneralPath),
        Hold::Reserved { reservation, leased } => Ok(Attempt::Settled {
            outcome: Reserved::Reserved(reservation),
            written: leased.map_or(Written::MaybeSome, |event| Written::Leased(vec![event])),
        }),
        Hold::Unavailable => Ok(Attempt::Settled { outcome: Reserved::Unavailable, written: Written::Nothing }),
        Hold::NotFound => Err(BookingError::ResourceNotFound),
        Hold::Archived => Err(BookingError::ResourceArchived),
        Hold::TooMany { capacity } => Err(invalid("quantity", format!("must not exceed the capacity of {capacity}"))),
    }
}

/// Holds (or, confirmed now, books) capacity: the general path, for what the
/// one-statement hold ([`hold_at_once`]) left to it. Must run inside a transaction: the
/// resource lock it takes is what makes the load check see every committed competitor.
/// Commit the transaction on `Ok`, whichever the outcome.
///
/// It does not try the one-statement hold again first: on a capacity-1 resource that
/// hold takes the resource row shared, and a transaction that then asks for it
/// exclusively, as this path does, deadlocks with another doing the same.
///
/// `who` acts: the booking is theirs, or `req.owner`'s when an admin books for
/// someone, and records `who` in `acted_by` either way.
pub async fn reserve(
    tx: &impl GenericClient,
    who: &Principal,
    req: &ReserveRequest,
    approval: Approval<'_>,
    limits: Limits,
    now: DateTime<Utc>,
) -> Result<Reserved, BookingError> {
    validate(req, limits, now)?;
    let pre = hold::precheck(tx, req.resource_id, req.start, req.end, req.quantity, now)
        .await?
        .ok_or(BookingError::ResourceNotFound)?;
    if pre.resource.archived_at.is_some() {
        return Err(BookingError::ResourceArchived);
    }
    if req.quantity > pre.resource.capacity {
        return Err(invalid("quantity", format!("must not exceed the capacity of {}", pre.resource.capacity)));
    }
    // The rules as the look saw them, so that a range no rule allows is refused as
    // such rather than as taken; judged again under the lock below.
    pre.resource.calendar.judge(req.start, req.end, now, Judge::Everything).map_err(BookingError::OutsideSchedule)?;
    let upstream = pre.resource.authority == Authority::Upstream;
    let confirm_now = req.confirmation == Confirmation::Now;
    if upstream && confirm_now {
        upstream_reachable(tx, now).await?;
    }
    if pre.peak + i64::from(req.quantity) > i64::from(pre.resource.capacity) && !pre.lapsed {
        // Taken at this instant by live claims: refused without a lock or a write.
        return Ok(Reserved::Unavailable);
    }
    // The owner's lock before the resource's (the lock order), when the limit of active
    // holds applies: its holds on other resources are counted one after another.
    let owner = req.owner.as_deref().unwrap_or(&who.id);
    limits::hold_lock(tx, owner, who, req.confirmation, limits, now).await?;
    // The resource's lock, in a round trip of its own: every statement after it reads a
    // snapshot taken after the lock was granted, which includes every committed
    // competitor (pipelined, a statement can run before the lock: see the lock order).
    // The row as the lock found it: it may have been archived, or its capacity changed,
    // since the look.
    let resource = resources::lock(tx, req.resource_id).await?.ok_or(BookingError::ResourceNotFound)?;
    if resource.archived_at.is_some() {
        return Err(BookingError::ResourceArchived);
    }
    if req.quantity > resource.capacity {
        return Err(invalid("quantity", format!("must not exceed the capacity of {}", resource.capacity)));
    }
    // The calendar rules in force now: a change of them waits for this lock.
    let candidate = calendar::Candidate { start: req.start, end: req.end, quantity: req.quantity, except: None };
    calendar::judge(tx, &resource, candidate, Judge::Everything, now).await?;
    limits::judge(tx, &resource, owner, who, req.start, None, now).await?;
    if pre.lapsed {
        // Capacity that lapsed goes to the waitlist first, not to whoever asks next.
        let lapsed = lapse::expire_lapsed_in_way(tx, resource.id, (req.start, req.end), req.quantity, now).await?;
        on_freed(tx, &resource, &lapsed, now).await?;
    }
    let (status, expires_at) = match (confirm_now, upstream) {
        // The system of record decides: the slot is held locally as CONFIRMING (which
        // is what refuses every competitor here, at once) until the worker settles it.
        (true, true) => (Status::Confirming, None),
        (true, false) => (Status::Confirmed, None),
        (false, _) => (Status::Held, Some(now + Duration::seconds(resource.hold_ttl_seconds.into()))),
    };
    let new = reservations::NewReservation {
        id: Uuid::now_v7(),
        resource_id: resource.id,
        resource_capacity: resource.capacity,
        owner,
        start: req.start,
        end: req.end,
        quantity: req.quantity,
        status,
        expires_at,
        source: Source::Request,
        metadata: &req.metadata,
        acted_by: Some(&who.id),
        now,
        item: None,
    };
    let inserted = reservations::insert_if_fits(tx, &new).await;
    let inserted = match inserted {
        Ok(inserted) => inserted,
        // The exclusion constraint fired: some path skipped the lock. Still a loss, and
        // the transaction is aborted, so this one is an error the caller rolls back.
        Err(e) if e.sql_state() == Some(&tokio_postgres::error::SqlState::EXCLUSION_VIOLATION) => {
            tracing::warn!("exclusion constraint refused an overlapping reservation");
            return Err(BookingError::SlotUnavailable);
        }
        Err(e) => return Err(e.into()),
    };
    // A hold that lapsed between the precheck and the lock was written down by the
    // insert itself; its capacity goes on to the waitlist with what is left.
    on_freed(tx, &resource, &inserted.expired, now).await?;
    match inserted.reservation {
        Some(mut r) => {
            if r.status == Status::Confirming {
                r.intent = Some(request_intent(tx, &r, &resource, approval, now).await?);
                return Ok(Reserved::Queued(r));
            }
            Ok(Reserved::Reserved(r))
        }
        None => {
            // Lost under the lock. The transaction still commits (it may have handed
            // lapsed capacity over), but a crash that lost this commit would lose only
            // a refusal, or work the next request or sweep redoes: no need to wait for
            // the disk, and the queue of losers behind the lock moves faster.
            tx.batch_execute("SET LOCAL synchronous_commit TO OFF").await.map_err(DbError::from)?;
            Ok(Reserved::Unavailable)
        }
    }
}
