//! The `availability` function: the read routes. `GET /v1/resources/{id}/availability`
//! (what is taken and what is free in a window), `GET /v1/reservations` (the caller's
//! list; everyone's for admins), `GET /v1/reservations/{id}`,
//! `GET /v1/resources/{id}/waitlist` (a resource's queue, admins only), `GET /v1/waitlist`
//! (the caller's own entries),
//! `GET /v1/feeds/{token}.ics` (a calendar feed, public: the token is the key),
//! `GET /v1/resources/{id}/slots` and `GET /v1/slots` (bookable starts of one or several
//! resources, after their calendar rules), `GET /v1/waitlist/{id}`, `GET /v1/health`, `GET /v1/problems/{slug}` (the page
//! a problem's `type` leads to) and `GET /app`, the booking page ([`page`]). Reads take no locks. For an upstream
//! resource the upstream's claims are merged in as `EXTERNAL`, read through the shared
//! single-flight cache behind the breaker.

pub mod page;

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use serde::Serialize;
use shared::AppState;
use shared::booking;
use shared::domain::Principal;
use shared::http::{
    ApiError, Function, Op, Reply, Rfc3339, etag, not_modified, own_waitlist_query, principal, query_param,
    query_params, reservations_query, respond, route_for, waitlist_query,
};
use shared::upstream::{UpstreamError, cache};

pub async fn handler(state: &AppState, req: Request) -> Result<Response<Body>, Error> {
    Ok(respond(state, &req, serve(state, &req)).await)
}

async fn serve(state: &AppState, req: &Request) -> Result<Response<Body>, ApiError> {
    let matched = route_for(req.method(), req.uri().path(), Function::Availability)?;
    match matched.spec.op {
        Op::Health => return health(state).await,
        // Public, like the problem documents that link to it.
        Op::GetProblem => return problem_page(matched.id),
        // Public too: the page carries no data; it asks the API as whoever signs in.
        Op::GetPage => return Ok(page::reply(&state.config).into_response()),
        // Public: the token in the URL is the key (see `feed`).
        Op::GetFeed => return feed(state, req, matched.id).await,
        _ => {}
    }
    let now = state.clock.now();
    let calendar = matched.spec.op.is_calendar_read();
    if calendar && state.config.public_calendar {
        // Public calendar: no principal asked for (these answers name no owner).
        return calendar_read(state, req, &matched, None, now).await;
    }
    let who = principal(req, &state.config)?;
    if calendar {
        return calendar_read(state, req, &matched, Some(&who), now).await;
    }
    let reply = match matched.spec.op {
        Op::ListReservations => {
            let (filter, page) = reservations_query(req, &who)?;
            let client = state.pool.get().await?;
            let key = state.cursor_key(&client).await?;
            Reply::json(StatusCode::OK, &booking::list_reservations(&client, key, &who, filter, page, now).await?)
        }
        Op::ListWaitlist => {
            // Before the id is looked at: a non-admin learns nothing of which resources exist.
            if !who.admin {
                return Err(ApiError::Forbidden);
            }
            let id = matched.id(ApiError::ResourceNotFound)?;
            let page = waitlist_query(req)?;
            let client = state.pool.get().await?;
            let key = state.cursor_key(&client).await?;
            Reply::json(StatusCode::OK, &booking::list_waitlist(&client, key, id, page, now).await?)
        }
        Op::ListOwnWaitlist => {
            let (filter, page) = own_waitlist_query(req, &who)?;
            let client = state.pool.get().await?;
            let key = state.cursor_key(&client).await?;
            Reply::json(StatusCode::OK, &booking::list_own_waitlist(&client, key, &who, filter, page, now).await?)
        }
        Op::GetReservation => {
            let id = matched.id(ApiError::ReservationNotFound)?;
            Reply::json(StatusCode::OK, &booking::get_reservation(&state.pool.get().await?, &who, id, now).await?)
        }
        Op::GetSeries => {
            let id = matched.id(ApiError::SeriesNotFound)?;
            Reply::json(StatusCode::OK, &booking::get_series(&state.pool.get().await?, &who, id, now).await?)
        }
        Op::GetWaitlistEntry => {
            let id = matched.id(ApiError::WaitlistEntryNotFound)?;
            Reply::json(StatusCode::OK, &booking::get_entry(&state.pool.get().await?, &who, id, now).await?)
        }
        _ => return Err(ApiError::RouteNotFound),
    };
    Ok(reply.into_response())
}

/// A calendar feed, `GET /v1/feeds/{token}.ics`: read without a principal, the token
/// being the key. Its `ETag` is a hash of its bytes (which carry no clock of their own),
/// so a calendar that sends it back in `If-None-Match` gets a 304 while nothing in the
/// feed changed. `no-cache`: a client keeps it, but asks again before using it.
async fn feed(state: &AppState, req: &Request, segment: Option<&str>) -> Result<Response<Body>, ApiError> {
    let segment = segment.ok_or(ApiError::FeedNotFound)?;
    let client = state.pool.get().await?;
    let ics = booking::read_feed(&client, segment, state.clock.now()).await?.to_ics();
    let tag = etag(ics.as_bytes());
    let builder =
        Response::builder().header(http::header::ETAG, &tag).header(http::header::CACHE_CONTROL, "private, no-cache");
    let response = if not_modified(req, &tag) {
        builder.status(StatusCode::NOT_MODIFIED).body(Body::Empty)
    } else {
        builder
            .status(StatusCode::OK)
            .header(http::header::CONTENT_TYPE, shared::http::CALENDAR)
            .body(Body::Binary(ics.into_bytes()))
    };
    response.map_err(|e| ApiError::Internal(Box::new(e)))
}

/// The calendar reads: availability and slots. They show what is taken and free, never
/// who holds it nor its metadata, which is what lets `PUBLIC_CALENDAR` open them.
async fn calendar_read(
    state: &AppState,
    req: &Request,
    matched: &shared::http::Matched<'_>,
    who: Option<&Principal>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Response<Body>, ApiError> {
    let reply = match matched.spec.op {
        Op::GetAvailability => {
            let id = matched.id(ApiError::ResourceNotFound)?;
            let ask = availability_query(req)?;
            booking::check_window(ask.from, ask.to, state.config.max_availability_window)?;
            let resource = booking::get_resource(&state.pool.get().await?, id).await?;
            let external = external_view(state, &resource, ask.from, ask.to).await?;
            let client = state.pool.get().await?;
            let key = state.cursor_key(&client).await?;
            Reply::json(
                StatusCode::OK,
                &booking::availability(&client, key, &resource, &ask, external.as_deref(), now).await?,
            )
        }
        Op::GetSlots => {
            let id = matched.id(ApiError::ResourceNotFound)?;
            let (ask, listed) = slots_query(req)?;
            booking::check_window(ask.from, ask.to, state.config.max_availability_window)?;
            let resource = booking::get_resource(&state.pool.get().await?, id).await?;
            let external = external_view(state, &resource, ask.from, ask.to).await?;
            let client = state.pool.get().await?;
            let starts =
                booking::slots(&client, &resource, ask, external.as_deref(), who, state.config.limits(), now).await?;
            Reply::json(StatusCode::OK, &Slots::of(starts, listed))
        }
        Op::FindSlots if together(req)? => {
            // The starts at which every resource, and some member of every pool, is
            // free under its own rules and grid (the bookable ones: `unavailable` is
            // a per-resource answer).
            let (ask, _) = slots_query(req)?;
            booking::check_window(ask.from, ask.to, state.config.max_availability_window)?;
            let (ids, pools) = (resource_ids(req, true)?, pool_ids(req)?);
            let mut targets = Vec::with_capacity(ids.len() + pools.len());
            for id in ids {
                let resource = booking::get_resource(&state.pool.get().await?, id).await?;
                targets.push(vec![read_slots(state, &resource, ask, who, now).await?]);
            }
            for id in pools {
                let pool = booking::get_pool(&state.pool.get().await?, id).await?;
                let mut members = Vec::with_capacity(pool.resource_ids.len());
                for member in pool.resource_ids {
                    let resource = booking::get_resource(&state.pool.get().await?, member).await?;
                    members.push(read_slots(state, &resource, ask, who, now).await?);
                }
                targets.push(members);
            }
            Reply::json(StatusCode::OK, &booking::slots_together(&targets))
        }
        Op::FindSlots => {
            if !query_params(req, "pool_id")?.is_empty() {
                return Err(ApiError::validation("pool_id", "is read only with together=true"));
            }
            let (ask, listed) = slots_query(req)?;
            booking::check_window(ask.from, ask.to, state.config.max_availability_window)?;
            let ids = resource_ids(req, false)?;
            let mut resources = Vec::with_capacity(ids.len());
            for id in ids {
                let resource = booking::get_resource(&state.pool.get().await?, id).await?;
                let external = external_view(state, &resource, ask.from, ask.to).await?;
                let client = state.pool.get().await?;
                let starts =
                    booking::slots(&client, &resource, ask, external.as_deref(), who, state.config.limits(), now)
                        .await?;
                let slots = Slots::of(starts, listed);
                resources.push(ResourceSlots { resource_id: id, free: !slots.slots.is_empty(), slots });
            }
            Reply::json(StatusCode::OK, &FoundSlots { resources })
        }
        _ => return Err(ApiError::RouteNotFound),
    };
    Ok(reply.into_response())
}

/// The upstream's view of an upstream resource's seat over `[from, to)`, through the
/// cache; `None` for a local resource. No connection is held while it is read: it
/// takes its own.
async fn external_view(
    state: &AppState,
    resource: &shared::domain::Resource,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> Result<Option<Vec<shared::upstream::Block>>, ApiError> {
    let (Some(seat), Some(upstream)) = (&resource.upstream_ref, &state.upstream) else { return Ok(None) };
    let cfg = &state.config.upstream;
    match cache::view(&state.pool, state.clock.as_ref(), upstream.as_ref(), cfg, seat, from, to).await? {
        Ok(blocks) => Ok(Some(blocks)),
        Err(UpstreamError::Unavailable { retry_after_seconds }) => {
            Err(ApiError::UpstreamUnavailable { retry_after: retry_after_seconds })
        }
        Err(_) => Err(ApiError::UpstreamUnavailable { retry_after: 1 }),
    }
}

/// Which starts a slots read lists: `unavailable=true` asks for the others too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed {
    Bookable,
    WithReasons,
}

#[derive(Serialize)]
struct Slots {
    slots: Vec<shared::domain::calendar::Slot>,
    /// The grid's other starts, each with its reason, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    unavailable: Option<Vec<shared::domain::calendar::Unavailable>>,
}

impl Slots {
    fn of(starts: shared::domain::calendar::Starts, listed: Listed) -> Slots {
        let unavailable = (listed == Listed::WithReasons).then_some(starts.unavailable);
        Slots { slots: starts.slots, unavailable }
    }
}

#[derive(Serialize)]
struct ResourceSlots {
    resource_id: uuid::Uuid,
    /// Whether any start fits.
    free: bool,
    #[serde(flatten)]
    slots: Slots,
}

#[derive(Serialize)]
struct FoundSlots {
    resources: Vec<ResourceSlots>,
}

/// At most this many resources in one `GET /v1/slots`.
const MAX_RESOURCES: usize = 20;

/// The `resource_id`s of `GET /v1/slots`: 1 to [`MAX_RESOURCES`] UUIDs, each once.
fn resource_ids(req: &Request, with_pools: bool) -> Result<Vec<uuid::Uuid>, ApiError> {
    let ids = ids_of(req, "resource_id")?;
    let pools = if with_pools { query_params(req, "pool_id")?.len() } else { 0 };
    if (ids.is_empty() && pools == 0) || ids.len() + pools > MAX_RESOURCES {
        let message = if with_pools {
            format!("must be given, with pool_id, 1 to {MAX_RESOURCES} times")
        } else {
            format!("must be given 1 to {MAX_RESOURCES} times")
        };
        return Err(ApiError::validation("resource_id", message));
    }
    Ok(ids)
}

/// The `pool_id`s of a slots read for a group, each once.
fn pool_ids(req: &Request) -> Result<Vec<uuid::Uuid>, ApiError> {
    ids_of(req, "pool_id")
}

/// The distinct UUIDs of a repeated query parameter, in order.
fn ids_of(req: &Request, name: &str) -> Result<Vec<uuid::Uuid>, ApiError> {
    let mut ids = Vec::new();
    for r in query_params(req, name)? {
        let id = shared::http::fields::uuid(&serde_json::Value::String(r))
            .map_err(|message| ApiError::validation(name, message))?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// `together=true`: one list of starts for the whole group.
fn together(req: &Request) -> Result<bool, ApiError> {
    match query_param(req, "together").as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(ApiError::validation("together", "must be true or false")),
    }
}

/// One resource's bookable starts, as `GET /v1/resources/{id}/slots` reads them.
async fn read_slots(
    state: &AppState,
    resource: &shared::domain::Resource,
    ask: booking::SlotsRequest,
    who: Option<&Principal>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<shared::domain::calendar::Slot>, ApiError> {
    let external = external_view(state, resource, ask.from, ask.to).await?;
    let client = state.pool.get().await?;
    Ok(booking::slots(&client, resource, ask, external.as_deref(), who, state.config.limits(), now).await?.slots)
}

/// An availability read's query: the window, and `limit` (1 to [`booking::MAX_TAKEN`],
/// default the most) and `cursor` for the page of `taken`.
fn availability_query(req: &Request) -> Result<booking::AvailabilityRequest, ApiError> {
    let window = window(req);
    let mut errors = match &window {
        Err(ApiError::Validation(errors)) => errors.clone(),
        _ => Vec::new(),
    };
    let limit = match query_param(req, "limit") {
        None => Some(booking::MAX_TAKEN),
        Some(raw) => match raw.parse::<i64>() {
            Ok(n) if (1..=booking::MAX_TAKEN).contains(&n) => Some(n),
            _ => {
                let message = format!("must be an integer from 1 to {}", booking::MAX_TAKEN);
                errors.push(shared::domain::FieldError::new("limit", message));
                None
            }
        },
    };
    match (window, limit) {
        (Ok((from, to)), Some(limit)) if errors.is_empty() => {
            let page = booking::PageRequest { limit, cursor: query_param(req, "cursor") };
            Ok(booking::AvailabilityRequest { from, to, page })
        }
        _ => Err(ApiError::Validation(errors)),
    }
}

/// `from`, `to`, `duration` (ISO 8601, such as `PT1H` or `PT30M`), `quantity`
/// (default 1) and `unavailable` (`true` or `false`, the default) of a slots read.
fn slots_query(req: &Request) -> Result<(booking::SlotsRequest, Listed), ApiError> {
    let window = window(req);
    let mut errors = match &window {
        Err(ApiError::Validation(errors)) => errors.clone(),
        _ => Vec::new(),
    };
    let duration = match query_param(req, "duration") {
        None => {
            errors.push(shared::domain::FieldError::new("duration", "is required"));
            None
        }
        Some(raw) => match iso_duration(&raw) {
            Some(d) => Some(d),
            None => {
                errors.push(shared::domain::FieldError::new(
                    "duration",
                    "must be an ISO 8601 duration of days, hours and minutes, such as PT1H or PT30M",
                ));
                None
            }
        },
    };
    let quantity = match query_param(req, "quantity") {
        None => Some(1),
        Some(raw) => match raw.parse::<i32>() {
            Ok(q) if q >= 1 => Some(q),
            _ => {
                errors.push(shared::domain::FieldError::new("quantity", "must be a whole number of at least 1"));
                None
            }
        },
    };
    let listed = match query_param(req, "unavailable").as_deref() {
        None | Some("false") => Listed::Bookable,
        Some("true") => Listed::WithReasons,
        Some(_) => {
            errors.push(shared::domain::FieldError::new("unavailable", "must be true or false"));
            Listed::Bookable
        }
    };
    match (window, duration, quantity) {
        (Ok((from, to)), Some(duration), Some(quantity)) if errors.is_empty() => {
            Ok((booking::SlotsRequest { from, to, duration, quantity }, listed))
        }
        _ => Err(ApiError::Validation(errors)),
    }
}

/// An ISO 8601 duration of whole days, hours and minutes: `P1D`, `PT1H30M`, `PT45M`.
fn iso_duration(s: &str) -> Option<chrono::Duration> {
    let rest = s.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut total = chrono::Duration::zero();
    let mut any = false;
    let mut read = |part: &str, units: &[(char, i64)]| -> Option<()> {
        let mut number = String::new();
        let mut next = 0;
        for c in part.chars() {
            if c.is_ascii_digit() {
                number.push(c);
                continue;
            }
            let at = units.iter().skip(next).position(|(u, _)| *u == c)? + next;
            let n: i64 = number.parse().ok().filter(|_| number.len() <= 6)?;
            total += chrono::Duration::minutes(n * units[at].1);
            any = true;
            number.clear();
            next = at + 1;
        }
        number.is_empty().then_some(())
    };
    read(days, &[('D', 1440)])?;
    if let Some(time) = time {
        if time.is_empty() {
            return None;
        }
        read(time, &[('H', 60), ('M', 1)])?;
    }
    any.then_some(total)
}

fn window(req: &Request) -> Result<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>), ApiError> {
    let mut errors = Vec::new();
    let mut read = |name: &str| match query_param(req, name) {
        None => {
            errors.push(shared::domain::FieldError::new(name, "is required"));
            None
        }
        Some(raw) => match Rfc3339::parse(&raw) {
            Ok(t) => Some(t.0),
            Err(message) => {
                errors.push(shared::domain::FieldError::new(name, message));
                None
            }
        },
    };
    let (from, to) = (read("from"), read("to"));
    match (from, to) {
        (Some(from), Some(to)) => Ok((from, to)),
        _ => Err(ApiError::Validation(errors)),
    }
}

/// The page that describes a problem type: where a problem's `type` leads.
fn problem_page(slug: Option<&str>) -> Result<Response<Body>, ApiError> {
    let problem = slug.and_then(shared::http::problem_type).ok_or(ApiError::ProblemTypeNotFound)?;
    Ok(Reply::html(StatusCode::OK, problem.page()).into_response())
}

async fn health(state: &AppState) -> Result<Response<Body>, ApiError> {
    #[derive(Serialize)]
    struct Health {
        status: &'static str,
    }
    match booking::health(&state.pool).await {
        Ok(()) => Ok(Reply::json(StatusCode::OK, &Health { status: "ok" }).into_response()),
        Err(e) => Err(ApiError::DatabaseUnavailable(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::{iso_duration, window};
    use shared::http::ApiError;

    fn get(uri: &str) -> lambda_http::Request {
        http::Request::builder().uri(uri).body(lambda_http::Body::Empty).unwrap()
    }

    #[test]
    fn the_window_is_read_from_the_query_with_its_offsets() {
        let (from, to) = window(&get("/x?from=2027-03-15T10:00:00%2B02:00&to=2027-03-15T12:00:00Z")).unwrap();
        assert_eq!(from.to_rfc3339(), "2027-03-15T08:00:00+00:00");
        assert_eq!(to.to_rfc3339(), "2027-03-15T12:00:00+00:00");
    }

    #[test]
    fn durations_are_iso_8601_days_hours_and_minutes() {
        let minutes = |s: &str| iso_duration(s).map(|d| d.num_minutes());
        assert_eq!(minutes("PT1H"), Some(60));
        assert_eq!(minutes("PT1H30M"), Some(90));
        assert_eq!(minutes("P1DT2H"), Some(1560));
        assert_eq!(minutes("PT45M"), Some(45));
        for bad in ["", "P", "PT", "1H", "PT1M1H", "PT1.5H", "PT1S", "P1W", "PT-1H"] {
            assert_eq!(minutes(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_missing_or_unreadable_bound_is_named() {
        let Err(ApiError::Validation(errors)) = window(&get("/x?to=yesterday")) else { panic!("refused") };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["from", "to"]);
    }
}
