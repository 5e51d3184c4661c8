//! The `reserve` function: the routes that change a resource's load.
//! `POST /v1/reservations` (hold, or book in one step), `PATCH /v1/reservations/{id}`
//! (move a booking, or change its metadata), `DELETE /v1/reservations/{id}` (release a
//! hold, cancel a booking), `POST /v1/resources/{id}/waitlist` (join the queue) and
//! `DELETE /v1/waitlist/{id}` (leave it). Admins may act on anyone's reservations and
//! entries, and book for anyone (`owner`); the reservation records who acted.
//! `POST /v1/series` makes a recurring series, each occurrence held by the same paths;
//! `PATCH` and `DELETE` take `?scope=one|following|all` to act on a series'
//! occurrences together.
//!
//! Each runs in one short transaction that takes the resource lock, so freed capacity
//! is handed to the waitlist in the same transaction; the `POST`s and the `PATCH` run
//! inside the idempotency guard. A hold without an `Idempotency-Key` first tries the
//! one-statement hold in autocommit, which is a transaction of its own.

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use shared::AppState;
use shared::booking::{
    self, Approval, Attempt, Change, Confirmation, GroupAttempt, GroupRequest, ItemRequest, JoinRequest, Joined, Mode,
    Rescheduled, ReserveRequest, Reserved, Scope, SeriesRequest, SeriesTarget, Target,
};
use shared::domain::recurrence::Recurrence;
use shared::http::fields::{self, Fields};
use shared::http::{
    Answered, ApiError, EmptyBody, Function, KeyedStatement, Op, Reply, booking_owner, carries_key, fingerprint,
    json_body, principal, respond_publishing, route_for, run_idempotent,
};
use uuid::Uuid;

/// The answer to a reserve that ran to the end: 201 (held or booked), 202 (queued for
/// the system of record) or 409 (taken), counted for the dashboard.
fn created(req: &Request, outcome: Reserved) -> Reply {
    let (status, r) = match outcome {
        Reserved::Reserved(r) => {
            let held = r.status == shared::domain::Status::Held;
            shared::metrics::count(if held { "Holds" } else { "Bookings" });
            (StatusCode::CREATED, r)
        }
        Reserved::Queued(r) => {
            shared::metrics::count("UpstreamConfirmsRequested");
            (StatusCode::ACCEPTED, r)
        }
        // Committed and stored like any answer; see `Reserved`.
        Reserved::Unavailable => {
            shared::metrics::count("Conflicts");
            return taken(req);
        }
    };
    Reply::reservation_created(status, &r)
}

/// The answer when the range is taken.
fn taken(req: &Request) -> Reply {
    ApiError::SlotUnavailable.into_reply_at(req.uri().path())
}

pub async fn handler(state: &AppState, req: Request) -> Result<Response<Body>, Error> {
    Ok(respond_publishing(state, &req, serve(state, &req)).await)
}

async fn serve(state: &AppState, req: &Request) -> Result<Answered, ApiError> {
    let matched = route_for(req.method(), req.uri().path(), Function::Reserve)?;
    let who = principal(req, &state.config)?;
    match matched.spec.op {
        Op::CreateReservation => create_reservation(state, req, matched.spec, &who).await,
        // Each may have written events: a claim after it publishes them.
        _ => serve_others(state, req, &matched, &who).await.map(Answered::from),
    }
}

/// `POST /v1/reservations`: the one-statement hold says what it wrote of events (its
/// event leased to the request, or none when the range was taken).
async fn create_reservation(
    state: &AppState,
    req: &Request,
    spec: &'static shared::http::RouteSpec,
    who: &shared::domain::Principal,
) -> Result<Answered, ApiError> {
    let body = json_body(req, EmptyBody::Refused)?;
    let input = match body.read(create_reservation_body)? {
        Booking::One(mut input) => {
            input.owner = booking_owner(who, input.owner)?;
            input
        }
        Booking::Several(mut group) => {
            group.owner = booking_owner(who, group.owner)?;
            return reserve_items(state, who, req, spec, &body, group).await.map(Answered::from);
        }
    };
    let limits = state.config.limits();
    let fingerprint = fingerprint(req, &body.canonical);
    let approval = Approval { principal: &who.id, fingerprint: &fingerprint };
    // The common hold commits on its own, in one round trip, with its key's
    // claim and answer when it has a key; only what the general path must
    // decide, or a key already taken, goes on to the guard's transaction.
    let keyed = KeyedStatement::of(state, who, req, spec, &fingerprint, taken(req))?;
    let answering = keyed.as_ref().map(KeyedStatement::answering);
    let client = state.pool.get().await?;
    let now = state.clock.now();
    let lease = state.events.lease(now);
    match booking::hold_at_once(&client, who, &input, answering.as_ref(), limits, lease, now).await {
        Ok(Attempt::Settled { outcome, written }) => {
            let reply = created(req, outcome);
            let response = match &keyed {
                Some(keyed) => keyed.first_answer(reply),
                None => reply.into_response(),
            };
            return Ok(Answered { response, written });
        }
        Ok(Attempt::GeneralPath) => {}
        Err(e) => {
            let e = ApiError::from(e);
            // A keyed request's refusal (a 4xx) is an answer to store and replay:
            // the guard runs the request again and stores it.
            if keyed.is_none() || !e.is_final() {
                return Err(e);
            }
        }
    }
    drop(client);
    let mut queued = false;
    let response = run_idempotent(state, who, req, spec, &fingerprint, async |tx| {
        let outcome = booking::reserve(tx, who, &input, approval, limits, state.clock.now()).await?;
        queued = matches!(outcome, Reserved::Queued(_));
        Ok(created(req, outcome))
    })
    .await?;
    // Committed: hand the intent to the worker now, not at the next sweep.
    if queued {
        shared::outbox::publish_intents(state).await;
    }
    Ok(response.into())
}

async fn serve_others(
    state: &AppState,
    req: &Request,
    matched: &shared::http::Matched<'_>,
    who: &shared::domain::Principal,
) -> Result<Response<Body>, ApiError> {
    match matched.spec.op {
        Op::CreateSeries => {
            let body = json_body(req, EmptyBody::Refused)?;
            let mut input = body.read(create_series_body)?;
            input.owner = booking_owner(who, input.owner)?;
            let fingerprint = fingerprint(req, &body.canonical);
            let approval = Approval { principal: &who.id, fingerprint: &fingerprint };
            let limits = state.config.limits();
            run_idempotent(state, who, req, matched.spec, &fingerprint, async |tx| {
                // Each occurrence's refusal is the problem its own hold would answer.
                let render = |e: booking::BookingError| ApiError::from(e).problem_object();
                let series = booking::create_series(tx, who, &input, approval, limits, state.clock.now(), render)
                    .await
                    .inspect_err(|e| {
                        if matches!(e, booking::BookingError::OccurrencesRefused(_)) {
                            shared::metrics::count("Conflicts");
                        }
                    })?;
                shared::metrics::count("Series");
                Ok(Reply::json(StatusCode::CREATED, &series).with_location(format!("/v1/series/{}", series.id)))
            })
            .await
        }
        Op::RescheduleReservation => {
            let id = matched.id(ApiError::ReservationNotFound)?;
            let scope = shared::http::scope(req)?;
            let body = json_body(req, EmptyBody::Refused)?;
            let change = body.read(reschedule_body)?;
            let fingerprint = fingerprint(req, &body.canonical);
            let limits = state.config.limits();
            run_idempotent(state, who, req, matched.spec, &fingerprint, async |tx| {
                let now = state.clock.now();
                if scope != Scope::One
                    && let (Some(_), ids) = booking::in_scope(tx, who, id, scope, now).await?
                {
                    let s = booking::reschedule_series(tx, who, id, &ids, change, limits, &*state.clock).await?;
                    shared::metrics::count("Reschedules");
                    return Ok(Reply::json(StatusCode::OK, &s));
                }
                match booking::reschedule(tx, who, id, change, limits, &*state.clock).await? {
                    Rescheduled::Rescheduled(r) => {
                        shared::metrics::count("Reschedules");
                        Ok(Reply::json(StatusCode::OK, &r))
                    }
                    Rescheduled::Unavailable => {
                        shared::metrics::count("Conflicts");
                        Ok(ApiError::SlotUnavailable.into_reply())
                    }
                }
            })
            .await
        }
        Op::ReleaseReservation => {
            let id = matched.id(ApiError::ReservationNotFound)?;
            let scope = shared::http::scope(req)?;
            let now = state.clock.now();
            let mut client = state.pool.get().await?;
            let tx = client.transaction().await?;
            if scope != Scope::One
                && let (Some(series), ids) = booking::in_scope(&tx, who, id, scope, now).await?
            {
                // Every occurrence in scope, in series order, or none: the first
                // refusal (a cancel past its notice) rolls the others back.
                let mut upstream_cancel = false;
                for occurrence in ids {
                    upstream_cancel |= booking::release(&tx, who, occurrence, &*state.clock).await?.upstream_cancel;
                }
                let s = booking::series_after(&tx, series, state.clock.now()).await?;
                tx.commit().await?;
                if upstream_cancel {
                    shared::outbox::publish_intents(state).await;
                }
                return Ok(Reply::json(StatusCode::OK, &s).into_response());
            }
            let released = booking::release(&tx, who, id, &*state.clock).await?;
            tx.commit().await?;
            if released.upstream_cancel {
                shared::outbox::publish_intents(state).await;
            }
            Ok(Reply::json(StatusCode::OK, &released.reservation).into_response())
        }
        Op::JoinWaitlist => {
            let resource_id = matched.id(ApiError::ResourceNotFound)?;
            let body = json_body(req, EmptyBody::Refused)?;
            let input = body.read(|f| join_waitlist_body(f, resource_id))?;
            let limits = state.config.limits();
            let fingerprint = fingerprint(req, &body.canonical);
            let approval = Approval { principal: &who.id, fingerprint: &fingerprint };
            run_idempotent(state, who, req, matched.spec, &fingerprint, async |tx| {
                let (status, e) =
                    match booking::join_waitlist(tx, who, &input, approval, limits, state.clock.now()).await? {
                        Joined::New(e) => (StatusCode::CREATED, e),
                        Joined::Existing(e) => (StatusCode::OK, e),
                    };
                Ok(Reply::json(status, &e).with_location(format!("/v1/waitlist/{}", e.id)))
            })
            .await
        }
        Op::LeaveWaitlist => {
            let id = matched.id(ApiError::WaitlistEntryNotFound)?;
            let mut client = state.pool.get().await?;
            let tx = client.transaction().await?;
            let e = booking::leave_waitlist(&tx, who, id, state.clock.now()).await?;
            tx.commit().await?;
            Ok(Reply::json(StatusCode::OK, &e).into_response())
        }
        _ => Err(ApiError::RouteNotFound),
    }
}

/// A booking of several items, held all or nothing: in one statement when it can, else
/// in one transaction inside the idempotency guard, which a refusal rolls back.
async fn reserve_items(
    state: &AppState,
    who: &shared::domain::Principal,
    req: &Request,
    route: &'static shared::http::RouteSpec,
    body: &shared::http::JsonBody,
    group: GroupRequest,
) -> Result<Response<Body>, ApiError> {
    let limits = state.config.limits();
    let counted = |e: &booking::BookingError| {
        if matches!(e, booking::BookingError::ItemsRefused(_)) {
            shared::metrics::count("Conflicts");
        }
    };
    // The common booking commits on its own, in one round trip; a request with a key,
    // or what that statement leaves, goes to the guard's transaction.
    if !carries_key(req)? {
        let client = state.pool.get().await?;
        let attempt = booking::hold_items_at_once(&client, who, &group, limits, state.clock.now()).await;
        match attempt.inspect_err(counted)? {
            GroupAttempt::Held(r) => return Ok(created(req, Reserved::Reserved(r)).into_response()),
            GroupAttempt::GeneralPath => {}
        }
    }
    let fingerprint = fingerprint(req, &body.canonical);
    run_idempotent(state, who, req, route, &fingerprint, async |tx| {
        match booking::reserve_items(tx, who, &group, limits, state.clock.now()).await.inspect_err(counted) {
            Ok(r) => Ok(created(req, Reserved::Reserved(r))),
            // Committed and stored like any answer: the lapsed holds the booking wrote
            // down went to their waitlists, and that stays.
            Err(e @ booking::BookingError::ItemsRefused(_)) => Ok(ApiError::from(e).into_reply_at(req.uri().path())),
            Err(e) => Err(e.into()),
        }
    })
    .await
}

/// What `POST /v1/reservations` asks for: one resource, or several items.
// One value per request, matched at once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Booking {
    One(ReserveRequest),
    Several(GroupRequest),
}

/// The body of `POST /v1/reservations`: a `resource_id` (with its `quantity`), or
/// `items`, each a `resource_id` or a `pool_id` with its `quantity`; an admin may name
/// the `owner` the booking is for. A list of one resource is the same booking as the
/// single form, and takes its path.
fn create_reservation_body(f: &mut Fields<'_>) -> Option<Booking> {
    let owner = f.optional("owner", fields::principal_id);
    let resource_id = f.optional("resource_id", fields::uuid);
    let start = f.required("start", fields::timestamp);
    let end = f.required("end", fields::timestamp);
    let quantity = f.optional("quantity", fields::integer(1, i32::MAX));
    let items = f.objects("items", booking::MAX_ITEMS, item_body);
    let confirmation = Confirmation::of_flag(f.optional("confirm", fields::boolean).unwrap_or(false));
    let metadata = f.metadata("metadata").unwrap_or_default();
    let (start, end) = (start?.0, end?.0);
    match (resource_id, items) {
        (Some(resource_id), None) if !f.given("items") => Some(Booking::One(ReserveRequest {
            owner,
            resource_id,
            start,
            end,
            quantity: quantity.unwrap_or(1),
            confirmation,
            metadata,
        })),
        (None, Some(items)) if !f.given("quantity") && !f.given("resource_id") => match items.as_slice() {
            [ItemRequest { target: Target::Resource(resource_id), quantity }] => Some(Booking::One(ReserveRequest {
                owner,
                resource_id: *resource_id,
                start,
                end,
                quantity: *quantity,
                confirmation,
                metadata,
            })),
            _ => Some(Booking::Several(GroupRequest { owner, items, start, end, confirmation, metadata })),
        },
        (_, None) if f.given("items") => None,
        (None, _) if f.given("resource_id") => None,
        (None, None) => {
            f.refuse("resource_id", "is required, or items");
            None
        }
        _ => {
            f.refuse("items", "must not be given with resource_id or quantity (each item has its own)");
            None
        }
    }
}

/// The body of `POST /v1/series`: what `POST /v1/reservations` takes for the first
/// occurrence (`resource_id` with its `quantity`, or `items`), and `recurrence` (an
/// RRULE of the subset [`Recurrence`] reads, each bad part named), `mode`
/// (`all_or_nothing`, the default, or `skip_conflicts`).
fn create_series_body(f: &mut Fields<'_>) -> Option<SeriesRequest> {
    let booking = create_reservation_body(f);
    let text = f.required("recurrence", fields::text(1, 500));
    let mode = f.optional("mode", fields::one_of(&["all_or_nothing", "skip_conflicts"]));
    let recurrence = match text.as_deref().map(|t| Recurrence::parse("recurrence", t)) {
        Some(Ok(r)) => Some(r),
        Some(Err(errors)) => {
            for e in errors {
                f.refuse(&e.field, &e.message);
            }
            None
        }
        None => None,
    };
    let mode = match mode {
        Some("skip_conflicts") => Mode::SkipConflicts,
        _ => Mode::AllOrNothing,
    };
    let (owner, target, start, end, confirmation, metadata) = match booking? {
        Booking::One(r) => (
            r.owner,
            SeriesTarget::Resource { resource_id: r.resource_id, quantity: r.quantity },
            r.start,
            r.end,
            r.confirmation,
            r.metadata,
        ),
        Booking::Several(g) => (g.owner, SeriesTarget::Items(g.items), g.start, g.end, g.confirmation, g.metadata),
    };
    Some(SeriesRequest {
        owner,
        target,
        start,
        end,
        recurrence: recurrence?,
        recurrence_text: text?,
        mode,
        confirmation,
        metadata,
    })
}

/// One item of `items`: a `resource_id` or a `pool_id`, and its `quantity` (default 1).
fn item_body(f: &mut Fields<'_>) -> Option<ItemRequest> {
    let resource_id = f.optional("resource_id", fields::uuid);
    let pool_id = f.optional("pool_id", fields::uuid);
    let quantity = f.optional("quantity", fields::integer(1, i32::MAX)).unwrap_or(1);
    let target = match (resource_id, pool_id) {
        (Some(id), None) if !f.given("pool_id") => Target::Resource(id),
        (None, Some(id)) if !f.given("resource_id") => Target::Pool(id),
        (None, None) if f.given("resource_id") || f.given("pool_id") => return None,
        (None, None) => {
            f.refuse("resource_id", "is required, or pool_id");
            return None;
        }
        _ => {
            f.refuse("pool_id", "must not be given with resource_id");
            return None;
        }
    };
    Some(ItemRequest { target, quantity })
}

/// The body of `PATCH /v1/reservations/{id}`: any of the range, the quantity and the
/// metadata; at least one.
fn reschedule_body(f: &mut Fields<'_>) -> Option<Change> {
    let change = Change {
        start: f.optional("start", fields::timestamp).map(|t| t.0),
        end: f.optional("end", fields::timestamp).map(|t| t.0),
        quantity: f.optional("quantity", fields::integer(1, i32::MAX)),
        metadata: f.metadata("metadata"),
    };
    if f.is_empty() {
        f.refuse("body", "must change at least one of start, end, quantity, metadata");
        return None;
    }
    Some(change)
}

/// The body of `POST /v1/resources/{id}/waitlist`.
fn join_waitlist_body(f: &mut Fields<'_>, resource_id: Uuid) -> Option<JoinRequest> {
    let start = f.required("start", fields::timestamp);
    let end = f.required("end", fields::timestamp);
    let quantity = f.optional("quantity", fields::integer(1, i32::MAX)).unwrap_or(1);
    let auto_book = f.optional("auto_book", fields::boolean).unwrap_or(false);
    Some(JoinRequest { resource_id, start: start?.0, end: end?.0, quantity, auto_book })
}

#[cfg(test)]
mod tests {
    use super::{create_reservation_body, join_waitlist_body};
    use shared::http::{ApiError, EmptyBody, json_body};

    fn post(body: &str) -> lambda_http::Request {
        http::Request::builder()
            .method("POST")
            .header("content-type", "application/json")
            .body(lambda_http::Body::Text(body.into()))
            .unwrap()
    }

    #[test]
    fn a_reservation_body_defaults_to_one_unit_held_not_confirmed() {
        let id = uuid::Uuid::now_v7();
        let body = format!(r#"{{"resource_id":"{id}","start":"2027-03-15T10:00:00Z","end":"2027-03-15T11:00:00Z"}}"#);
        let read = json_body(&post(&body), EmptyBody::Refused).unwrap().read(create_reservation_body).unwrap();
        let super::Booking::One(r) = read else { panic!("one resource") };
        assert_eq!((r.resource_id, r.quantity, r.confirmation), (id, 1, shared::booking::Confirmation::Later));
    }

    #[test]
    fn unknown_fields_and_missing_bounds_are_refused() {
        let join = |body: &str| {
            json_body(&post(body), EmptyBody::Refused).unwrap().read(|f| join_waitlist_body(f, uuid::Uuid::nil()))
        };
        let body = r#"{"start":"2027-03-15T10:00:00Z","end":"2027-03-15T11:00:00Z","seats":2}"#;
        assert!(matches!(join(body), Err(ApiError::Validation(e)) if e[0].field == "seats"));
        let body = r#"{"start":"2027-03-15T10:00:00Z"}"#;
        assert!(matches!(join(body), Err(ApiError::Validation(e)) if e[0].field == "end"));
    }
}
