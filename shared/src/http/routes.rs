//! The route table of the HTTP contract, shared by the Lambda functions (each serves
//! its own rows), the dev server (which dispatches on it) and the template test.

use super::ApiError;
use http::Method;

/// The Lambda function that owns a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Admin,
    Reserve,
    Confirm,
    Availability,
}

impl Function {
    pub fn name(self) -> &'static str {
        match self {
            Function::Admin => "admin",
            Function::Reserve => "reserve",
            Function::Confirm => "confirm",
            Function::Availability => "availability",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Health,
    GetProblem,
    GetPage,
    CreateResource,
    ListResources,
    GetResource,
    UpdateResource,
    ArchiveResource,
    GetAvailability,
    GetSlots,
    FindSlots,
    CreateReservation,
    ListReservations,
    GetReservation,
    RescheduleReservation,
    ConfirmReservation,
    ExtendReservation,
    ReleaseReservation,
    JoinWaitlist,
    ListWaitlist,
    ListOwnWaitlist,
    GetWaitlistEntry,
    LeaveWaitlist,
    CreateWebhook,
    ListWebhooks,
    GetWebhook,
    DeleteWebhook,
    RotateWebhookSecret,
    ListWebhookDeliveries,
    RetryWebhookDelivery,
    RecoverWebhook,
    CreatePool,
    ListPools,
    CreateSeries,
    GetSeries,
    CreateFeed,
    GetFeed,
    DeleteFeed,
    RotateFeed,
    GetPool,
    UpdatePool,
    DeletePool,
}

impl Op {
    /// The calendar reads: what is taken and what is free, never who holds it nor its
    /// metadata. `PUBLIC_CALENDAR` opens exactly these to callers without a principal,
    /// and the template's `PublicCalendar` parameter opens their routes at API Gateway.
    pub fn is_calendar_read(self) -> bool {
        matches!(self, Op::GetAvailability | Op::GetSlots | Op::FindSlots)
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct RouteSpec {
    pub method: &'static str,
    /// API Gateway's notation: `{id}` is a path parameter.
    pub path: &'static str,
    pub op: Op,
    pub function: Function,
}

pub const ROUTES: &[RouteSpec] = &[
    RouteSpec { method: "GET", path: "/v1/health", op: Op::Health, function: Function::Availability },
    RouteSpec { method: "GET", path: "/v1/problems/{id}", op: Op::GetProblem, function: Function::Availability },
    // The booking page (web/): static, public, served by the read function.
    RouteSpec { method: "GET", path: "/app", op: Op::GetPage, function: Function::Availability },
    RouteSpec { method: "POST", path: "/v1/resources", op: Op::CreateResource, function: Function::Admin },
    RouteSpec { method: "GET", path: "/v1/resources", op: Op::ListResources, function: Function::Admin },
    RouteSpec { method: "GET", path: "/v1/resources/{id}", op: Op::GetResource, function: Function::Admin },
    RouteSpec { method: "PATCH", path: "/v1/resources/{id}", op: Op::UpdateResource, function: Function::Admin },
    RouteSpec { method: "DELETE", path: "/v1/resources/{id}", op: Op::ArchiveResource, function: Function::Admin },
    RouteSpec {
        method: "GET",
        path: "/v1/resources/{id}/availability",
        op: Op::GetAvailability,
        function: Function::Availability,
    },
    RouteSpec { method: "GET", path: "/v1/resources/{id}/slots", op: Op::GetSlots, function: Function::Availability },
    RouteSpec { method: "GET", path: "/v1/slots", op: Op::FindSlots, function: Function::Availability },
    RouteSpec { method: "POST", path: "/v1/reservations", op: Op::CreateReservation, function: Function::Reserve },
    RouteSpec { method: "GET", path: "/v1/reservations", op: Op::ListReservations, function: Function::Availability },
    RouteSpec {
        method: "GET",
        path: "/v1/reservations/{id}",
        op: Op::GetReservation,
        function: Function::Availability,
    },
    RouteSpec {
        method: "PATCH",
        path: "/v1/reservations/{id}",
        op: Op::RescheduleReservation,
        function: Function::Reserve,
    },
    RouteSpec {
        method: "DELETE",
        path: "/v1/reservations/{id}",
        op: Op::ReleaseReservation,
        function: Function::Reserve,
    },
    RouteSpec {
        method: "POST",
        path: "/v1/reservations/{id}/confirm",
        op: Op::ConfirmReservation,
        function: Function::Confirm,
    },
    RouteSpec {
        method: "POST",
        path: "/v1/reservations/{id}/extend",
        op: Op::ExtendReservation,
        function: Function::Confirm,
    },
    RouteSpec {
        method: "POST",
        path: "/v1/resources/{id}/waitlist",
        op: Op::JoinWaitlist,
        function: Function::Reserve,
    },
    RouteSpec {
        method: "GET",
        path: "/v1/resources/{id}/waitlist",
        op: Op::ListWaitlist,
        function: Function::Availability,
    },
    RouteSpec { method: "GET", path: "/v1/waitlist", op: Op::ListOwnWaitlist, function: Function::Availability },
    RouteSpec { method: "GET", path: "/v1/waitlist/{id}", op: Op::GetWaitlistEntry, function: Function::Availability },
    RouteSpec { method: "DELETE", path: "/v1/waitlist/{id}", op: Op::LeaveWaitlist, function: Function::Reserve },
    RouteSpec { method: "POST", path: "/v1/webhooks", op: Op::CreateWebhook, function: Function::Admin },
    RouteSpec { method: "GET", path: "/v1/webhooks", op: Op::ListWebhooks, function: Function::Admin },
    RouteSpec { method: "GET", path: "/v1/webhooks/{id}", op: Op::GetWebhook, function: Function::Admin },
    RouteSpec { method: "DELETE", path: "/v1/webhooks/{id}", op: Op::DeleteWebhook, function: Function::Admin },
    RouteSpec {
        method: "POST",
        path: "/v1/webhooks/{id}/rotate-secret",
        op: Op::RotateWebhookSecret,
        function: Function::Admin,
    },
    RouteSpec {
        method: "GET",
        path: "/v1/webhooks/{id}/deliveries",
        op: Op::ListWebhookDeliveries,
        function: Function::Admin,
    },
    RouteSpec {
        method: "POST",
        path: "/v1/webhooks/{id}/deliveries/{delivery_id}/retry",
        op: Op::RetryWebhookDelivery,
        function: Function::Admin,
    },
    RouteSpec { method: "POST", path: "/v1/webhooks/{id}/recover", op: Op::RecoverWebhook, function: Function::Admin },
    RouteSpec { method: "POST", path: "/v1/pools", op: Op::CreatePool, function: Function::Admin },
    RouteSpec { method: "GET", path: "/v1/pools", op: Op::ListPools, function: Function::Admin },
    RouteSpec { method: "GET", path: "/v1/pools/{id}", op: Op::GetPool, function: Function::Admin },
    RouteSpec { method: "PATCH", path: "/v1/pools/{id}", op: Op::UpdatePool, function: Function::Admin },
    RouteSpec { method: "DELETE", path: "/v1/pools/{id}", op: Op::DeletePool, function: Function::Admin },
    RouteSpec { method: "POST", path: "/v1/series", op: Op::CreateSeries, function: Function::Reserve },
    RouteSpec { method: "GET", path: "/v1/series/{id}", op: Op::GetSeries, function: Function::Availability },
    // Calendar feeds. The read is public (its `{id}` is the feed's `{token}.ics`: the
    // token is the key) and served by the read function; the rest by the admin one.
    RouteSpec { method: "POST", path: "/v1/feeds", op: Op::CreateFeed, function: Function::Admin },
    RouteSpec { method: "GET", path: "/v1/feeds/{id}", op: Op::GetFeed, function: Function::Availability },
    RouteSpec { method: "DELETE", path: "/v1/feeds/{id}", op: Op::DeleteFeed, function: Function::Admin },
    RouteSpec { method: "POST", path: "/v1/feeds/{id}/rotate", op: Op::RotateFeed, function: Function::Admin },
];

/// A matched route with its raw path ids (parsed by the handler, so that a non-UUID
/// answers the 404 of the right kind): `{id}`, and `{delivery_id}` where the route has
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched<'a> {
    pub spec: &'static RouteSpec,
    pub id: Option<&'a str>,
    pub delivery_id: Option<&'a str>,
}

impl Matched<'_> {
    /// The path id as a UUID, or the given not-found error.
    pub fn id(&self, not_found: ApiError) -> Result<uuid::Uuid, ApiError> {
        self.id.and_then(|raw| uuid::Uuid::parse_str(raw).ok()).ok_or(not_found)
    }

    /// The path's `{delivery_id}` as a UUID, or the given not-found error.
    pub fn delivery_id(&self, not_found: ApiError) -> Result<uuid::Uuid, ApiError> {
        self.delivery_id.and_then(|raw| uuid::Uuid::parse_str(raw).ok()).ok_or(not_found)
    }
}

impl RouteSpec {
    /// This route matched by `path` (whatever the method), with the path's id where
    /// the route's template has one; `None` when the path is not this route's.
    fn matching<'a>(&'static self, path: &'a str) -> Option<Matched<'a>> {
        let (mut t, mut p) = (self.path.split('/'), path.split('/'));
        let (mut id, mut delivery_id) = (None, None);
        loop {
            match (t.next(), p.next()) {
                (None, None) => return Some(Matched { spec: self, id, delivery_id }),
                (Some("{id}"), Some(seg)) if !seg.is_empty() => id = Some(seg),
                (Some("{delivery_id}"), Some(seg)) if !seg.is_empty() => delivery_id = Some(seg),
                (Some(a), Some(b)) if a == b => {}
                _ => return None,
            }
        }
    }
}

/// Finds the route for a request: 404 `not-found` when no path matches, 405 when the
/// path exists with other methods. `HEAD` is served by every `GET` route (its answer
/// without the body, see [`super::without_body`]); the table lists only the `GET`.
pub fn route<'a>(method: &Method, path: &'a str) -> Result<Matched<'a>, ApiError> {
    let wanted = if method == Method::HEAD { "GET" } else { method.as_str() };
    for spec in ROUTES {
        if spec.method == wanted
            && let Some(matched) = spec.matching(path)
        {
            return Ok(matched);
        }
    }
    let allowed = methods_of(path);
    if allowed.is_empty() {
        return Err(ApiError::RouteNotFound);
    }
    Err(ApiError::MethodNotAllowed { allow: allowed.join(", ") })
}

/// The methods a path takes, in table order, `HEAD` right after `GET`; empty for a
/// path that is no route's.
pub fn methods_of(path: &str) -> Vec<&'static str> {
    let mut methods = Vec::new();
    for spec in ROUTES.iter().filter(|spec| spec.matching(path).is_some()) {
        methods.push(spec.method);
        if spec.method == "GET" {
            methods.push("HEAD");
        }
    }
    methods
}

/// The route of a request, if `function` owns it. A function deployed behind a route
/// it does not serve answers 404, as an unknown route would.
pub fn route_for<'a>(method: &Method, path: &'a str, function: Function) -> Result<Matched<'a>, ApiError> {
    let matched = route(method, path)?;
    if matched.spec.function != function {
        return Err(ApiError::RouteNotFound);
    }
    Ok(matched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_of_the_contract_matches_its_own_path() {
        for spec in ROUTES {
            let path = spec
                .path
                .replace("{id}", "00000000-0000-0000-0000-000000000000")
                .replace("{delivery_id}", "00000000-0000-0000-0000-000000000001");
            let m = route(&spec.method.parse().unwrap(), &path).unwrap();
            assert_eq!(m.spec.op, spec.op, "{} {}", spec.method, spec.path);
        }
    }

    #[test]
    fn head_is_served_by_the_get_route_of_the_path() {
        let m = route(&Method::HEAD, "/v1/waitlist/x").unwrap();
        assert_eq!((m.spec.method, m.spec.op), ("GET", Op::GetWaitlistEntry));
        assert!(matches!(route(&Method::HEAD, "/v1/reservations/x/confirm"), Err(ApiError::MethodNotAllowed { .. })));
        assert_eq!(methods_of("/v1/resources/x"), ["GET", "HEAD", "PATCH", "DELETE"]);
        assert!(methods_of("/v1/nothing").is_empty());
    }

    #[test]
    fn a_retry_hands_over_both_of_its_path_ids() {
        let m = route(&Method::POST, "/v1/webhooks/w1/deliveries/d1/retry").unwrap();
        assert_eq!((m.spec.op, m.id, m.delivery_id), (Op::RetryWebhookDelivery, Some("w1"), Some("d1")));
        assert!(matches!(m.delivery_id(ApiError::WebhookDeliveryNotFound), Err(ApiError::WebhookDeliveryNotFound)));
        assert!(matches!(route(&Method::POST, "/v1/webhooks/w1/deliveries//retry"), Err(ApiError::RouteNotFound)));
    }

    #[test]
    fn a_path_id_is_handed_over_raw() {
        let m = route(&Method::GET, "/v1/reservations/not-a-uuid").unwrap();
        assert_eq!(m.spec.op, Op::GetReservation);
        assert_eq!(m.id, Some("not-a-uuid"));
        assert!(matches!(m.id(ApiError::ReservationNotFound), Err(ApiError::ReservationNotFound)));
    }

    #[test]
    fn unknown_paths_are_not_found_and_wrong_methods_are_not_allowed() {
        assert!(matches!(route(&Method::GET, "/v1/nothing"), Err(ApiError::RouteNotFound)));
        assert!(matches!(route(&Method::GET, "/v1/reservations/"), Err(ApiError::RouteNotFound)));
        assert!(matches!(
            route(&Method::PUT, "/v1/reservations/x"),
            Err(ApiError::MethodNotAllowed { allow }) if allow == "GET, HEAD, PATCH, DELETE"
        ));
        assert!(
            matches!(route(&Method::PUT, "/v1/reservations"), Err(ApiError::MethodNotAllowed { allow }) if allow == "POST, GET, HEAD")
        );
        assert_eq!(route(&Method::GET, "/v1/reservations").unwrap().spec.op, Op::ListReservations);
    }
}
