//! The catalogue of problem types: each one's slug, status, title and the page its
//! `type` leads to (`GET /v1/problems/{slug}`), written once. [`super::ApiError`] maps
//! every failure to one of them.

/// Problem `type`s are this base plus the slug: a relative URI reference (RFC 9457
/// §3.1.1), which resolves against the API's own origin to the page that describes
/// the problem, `GET /v1/problems/{slug}`. Relative, because the origin is the
/// deployment's (an API Gateway URL, a custom domain, the dev server's port) and no
/// build knows it; an absolute base would name a host that serves nothing.
pub const PROBLEM_BASE: &str = "/v1/problems/";

/// A problem type: what its answers carry (slug, status, title) and what its page
/// (`GET /v1/problems/{slug}`) says.
#[derive(Debug)]
pub struct ProblemType {
    pub slug: &'static str,
    pub status: u16,
    pub title: &'static str,
    /// What happened and what a client does about it.
    pub description: &'static str,
}

/// Every problem type this API answers, in status order: what `GET /v1/problems` pages
/// describe and what [`super::ApiError::problem_type`] answers with.
pub const PROBLEM_TYPES: &[ProblemType] = &[
    ProblemType::VALIDATION_ERROR,
    ProblemType::BAD_REQUEST,
    ProblemType::INVALID_CURSOR,
    ProblemType::UNAUTHENTICATED,
    ProblemType::FORBIDDEN,
    ProblemType::NOT_FOUND,
    ProblemType::RESOURCE_NOT_FOUND,
    ProblemType::RESERVATION_NOT_FOUND,
    ProblemType::WAITLIST_ENTRY_NOT_FOUND,
    ProblemType::WEBHOOK_NOT_FOUND,
    ProblemType::WEBHOOK_DELIVERY_NOT_FOUND,
    ProblemType::POOL_NOT_FOUND,
    ProblemType::SERIES_NOT_FOUND,
    ProblemType::FEED_NOT_FOUND,
    ProblemType::PROBLEM_TYPE_NOT_FOUND,
    ProblemType::METHOD_NOT_ALLOWED,
    ProblemType::SLOT_UNAVAILABLE,
    ProblemType::RESERVATION_NOT_HELD,
    ProblemType::RESERVATION_IN_FLIGHT,
    ProblemType::WEBHOOK_DISABLED,
    ProblemType::RESOURCE_ARCHIVED,
    ProblemType::RESCHEDULE_NOT_SUPPORTED,
    ProblemType::CAPACITY_IN_USE,
    ProblemType::POLICY_WINDOW_CLOSED,
    ProblemType::RESCHEDULE_LIMIT,
    ProblemType::HOLD_EXTENSION_LIMIT,
    ProblemType::LIMIT_EXCEEDED,
    ProblemType::IDEMPOTENCY_KEY_IN_PROGRESS,
    ProblemType::PAYLOAD_TOO_LARGE,
    ProblemType::URI_TOO_LONG,
    ProblemType::UNSUPPORTED_MEDIA_TYPE,
    ProblemType::OUTSIDE_SCHEDULE,
    ProblemType::IDEMPOTENCY_KEY_REUSED,
    ProblemType::UPSTREAM_NOT_GROUPABLE,
    ProblemType::REQUEST_HEADER_FIELDS_TOO_LARGE,
    ProblemType::INTERNAL_ERROR,
    ProblemType::UPSTREAM_UNAVAILABLE,
    ProblemType::DATABASE_UNAVAILABLE,
];

/// The catalogue: each problem type's slug, status, title and page text, written once.
impl ProblemType {
    pub const VALIDATION_ERROR: ProblemType = ProblemType {
        slug: "validation-error",
        status: 400,
        title: "The request is not valid",
        description: "A field of the body, a query parameter or the Idempotency-Key header is missing or not acceptable. `errors` lists every one, each with its field and a message; fix them all and send the request again.",
    };
    pub const BAD_REQUEST: ProblemType = ProblemType {
        slug: "bad-request",
        status: 400,
        title: "Bad request",
        description: "The HTTP layer could not read the request: a malformed request line, header or chunked body, or a body that did not arrive in time.",
    };
    pub const INVALID_CURSOR: ProblemType = ProblemType {
        slug: "invalid-cursor",
        status: 400,
        title: "Invalid cursor",
        description: "The `cursor` is not one this list gave out for this principal and these filters (it was changed, made up, or taken from another list). Start again without a cursor.",
    };
    pub const UNAUTHENTICATED: ProblemType = ProblemType {
        slug: "unauthenticated",
        status: 401,
        title: "Authentication required",
        description: "The request carries no valid principal: a bearer token in AWS, the X-Principal header with the dev server. The WWW-Authenticate header says which.",
    };
    pub const FORBIDDEN: ProblemType = ProblemType {
        slug: "forbidden",
        status: 403,
        title: "Forbidden",
        description: "The operation is for admins, and the principal is not one.",
    };
    pub const NOT_FOUND: ProblemType = ProblemType {
        slug: "not-found",
        status: 404,
        title: "Not found",
        description: "No route matches the request's path.",
    };
    pub const RESOURCE_NOT_FOUND: ProblemType = ProblemType {
        slug: "resource-not-found",
        status: 404,
        title: "Resource not found",
        description: "No resource has this id.",
    };
    pub const RESERVATION_NOT_FOUND: ProblemType = ProblemType {
        slug: "reservation-not-found",
        status: 404,
        title: "Reservation not found",
        description: "No reservation with this id is visible to the principal: it does not exist, or it is another principal's.",
    };
    pub const WAITLIST_ENTRY_NOT_FOUND: ProblemType = ProblemType {
        slug: "waitlist-entry-not-found",
        status: 404,
        title: "Waitlist entry not found",
        description: "No waitlist entry with this id is visible to the principal: it does not exist, or it is another principal's.",
    };
    pub const WEBHOOK_NOT_FOUND: ProblemType = ProblemType {
        slug: "webhook-not-found",
        status: 404,
        title: "Webhook not found",
        description: "No webhook endpoint has this id, or it was deleted.",
    };
    pub const WEBHOOK_DELIVERY_NOT_FOUND: ProblemType = ProblemType {
        slug: "webhook-delivery-not-found",
        status: 404,
        title: "Webhook delivery not found",
        description: "The endpoint's delivery log has no attempt with this id: it never did, or the attempt is older than the log keeps (30 days). List the endpoint's deliveries for the ids it has.",
    };
    pub const POOL_NOT_FOUND: ProblemType = ProblemType {
        slug: "pool-not-found",
        status: 404,
        title: "Pool not found",
        description: "No pool has this id (it may have been deleted). An item `{\"pool_id\"}` of a booking must name a pool that exists.",
    };
    pub const SERIES_NOT_FOUND: ProblemType = ProblemType {
        slug: "series-not-found",
        status: 404,
        title: "Series not found",
        description: "No recurring series with this id is visible to the principal: it does not exist, or it is another principal's.",
    };
    pub const FEED_NOT_FOUND: ProblemType = ProblemType {
        slug: "feed-not-found",
        status: 404,
        title: "Feed not found",
        description: "No calendar feed is at this URL, or no feed with this id is the principal's: the URL was revoked or rotated, or never was one. The answer is the same whichever it is. Make a new feed (`POST /v1/feeds`), or ask its owner for its current URL.",
    };
    pub const UPSTREAM_NOT_GROUPABLE: ProblemType = ProblemType {
        slug: "upstream-not-groupable",
        status: 422,
        title: "Upstream resource in a booking of several",
        description: "A resource whose system of record is upstream is written outside any transaction, so it cannot be held with others all or nothing: in a booking of several items, or as the occurrences of a recurring series. Book it on its own, one reservation at a time; `items` names the item (for a series of one resource, item 0).",
    };
    pub const PROBLEM_TYPE_NOT_FOUND: ProblemType = ProblemType {
        slug: "problem-type-not-found",
        status: 404,
        title: "Problem type not found",
        description: "No problem type of this API has this slug.",
    };
    pub const METHOD_NOT_ALLOWED: ProblemType = ProblemType {
        slug: "method-not-allowed",
        status: 405,
        title: "Method not allowed",
        description: "The path exists, but not with this method. The Allow header lists the methods it takes.",
    };
    pub const SLOT_UNAVAILABLE: ProblemType = ProblemType {
        slug: "slot-unavailable",
        status: 409,
        title: "Slot unavailable",
        description: "The requested capacity is taken for some part of the range. Choose another range or quantity, or join the waitlist. Under an idempotency key this answer is replayed; a new attempt needs a new key.",
    };
    pub const RESERVATION_NOT_HELD: ProblemType = ProblemType {
        slug: "reservation-not-held",
        status: 409,
        title: "Reservation not held",
        description: "The reservation is no longer a hold (it expired, was released or is already settled), so it cannot be confirmed.",
    };
    pub const RESERVATION_IN_FLIGHT: ProblemType = ProblemType {
        slug: "reservation-in-flight",
        status: 409,
        title: "Reservation in flight",
        description: "The reservation is being confirmed with the external system of record. Read it again, or retry, once it settles.",
    };
    pub const WEBHOOK_DISABLED: ProblemType = ProblemType {
        slug: "webhook-disabled",
        status: 409,
        title: "Webhook endpoint disabled",
        description: "Deliveries to the endpoint stopped: it answered 410 Gone, or failed every attempt for five days (`disabled_reason` on the endpoint). Fix the receiver, then `POST /v1/webhooks/{id}/recover`, which enables it and sends again what it failed to take.",
    };
    pub const RESOURCE_ARCHIVED: ProblemType = ProblemType {
        slug: "resource-archived",
        status: 409,
        title: "Resource archived",
        description: "The resource is archived: it takes no new holds, waitlist entries, moves or capacity changes. Its bookings stay readable and can still be cancelled.",
    };
    pub const RESCHEDULE_NOT_SUPPORTED: ProblemType = ProblemType {
        slug: "reschedule-not-supported",
        status: 409,
        title: "Reschedule not supported",
        description: "Bookings of an upstream resource cannot be moved: the system of record has no move, and a cancel plus a new booking could lose the seat. Cancel and book again, or change only the metadata.",
    };
    pub const CAPACITY_IN_USE: ProblemType = ProblemType {
        slug: "capacity-in-use",
        status: 409,
        title: "Capacity in use",
        description: "Some instant from now on holds more than the requested capacity; nothing changed. Move or cancel bookings first, or choose a capacity at least as large as `detail` names.",
    };
    pub const POLICY_WINDOW_CLOSED: ProblemType = ProblemType {
        slug: "policy-window-closed",
        status: 409,
        title: "Policy window closed",
        description: "The resource lets an owner cancel or move a booking only until some time before its start (`policy` names the rule, `deadline` the last instant allowed), and that time has passed; nothing changed. An admin may still do it. Releasing a hold that is not confirmed is never refused.",
    };
    pub const RESCHEDULE_LIMIT: ProblemType = ProblemType {
        slug: "reschedule-limit",
        status: 409,
        title: "Reschedule limit reached",
        description: "The booking was already moved as many times as the resource's `max_reschedules` allows; nothing changed. Its metadata can still be changed, and an admin may still move it.",
    };
    pub const LIMIT_EXCEEDED: ProblemType = ProblemType {
        slug: "limit-exceeded",
        status: 409,
        title: "Booking limit reached",
        description: "The principal already has as many live bookings and holds on this resource in the window as one of its `limits` allows, or as many active holds across the service as the service allows; nothing was held. `limit` names the limit: one of the resource's (`max`, `window`), with `window_start` and `window_end` the window the booking's start falls in, or the service's (`scope`: `principal`, `max`: the most active holds per principal, a booking of several counting as one; confirm or release one). `frees_at`, when present, says when the earliest of the counted holds lapses. Admins are not limited.",
    };
    pub const HOLD_EXTENSION_LIMIT: ProblemType = ProblemType {
        slug: "hold-extension-limit",
        status: 409,
        title: "Hold extension limit reached",
        description: "The hold already lasts as long as the resource's `max_hold_seconds` allows from its creation (or the resource allows no extension); its expiry is unchanged. Confirm it before it expires.",
    };
    pub const IDEMPOTENCY_KEY_IN_PROGRESS: ProblemType = ProblemType {
        slug: "idempotency-key-in-progress",
        status: 409,
        title: "Request in progress",
        description: "A request with this Idempotency-Key is still running. Retry after the Retry-After seconds with the same key to get its answer.",
    };
    pub const PAYLOAD_TOO_LARGE: ProblemType = ProblemType {
        slug: "payload-too-large",
        status: 413,
        title: "Payload too large",
        description: "Request bodies may be at most 64 KiB.",
    };
    pub const URI_TOO_LONG: ProblemType = ProblemType {
        slug: "uri-too-long",
        status: 414,
        title: "URI too long",
        description: "The request's URI is too long.",
    };
    pub const UNSUPPORTED_MEDIA_TYPE: ProblemType = ProblemType {
        slug: "unsupported-media-type",
        status: 415,
        title: "Unsupported media type",
        description: "A request body must be sent as application/json.",
    };
    pub const OUTSIDE_SCHEDULE: ProblemType = ProblemType {
        slug: "outside-schedule",
        status: 422,
        title: "Outside the resource's schedule",
        description: "The range breaks one of the resource's calendar rules, which `rule` names: `closed_day` (no opening hours on the day of the start), `outside_hours` (not inside one stretch of opening hours), `buffer` (the time kept free around bookings overlaps another booking), `notice` (the start is sooner than the minimum notice), `advance` (the start is further ahead than the maximum advance) or `grid` (the start is not on the grid of starts). The resource's fields show its rules, and `GET /v1/resources/{id}/slots` lists the starts that fit.",
    };
    pub const IDEMPOTENCY_KEY_REUSED: ProblemType = ProblemType {
        slug: "idempotency-key-reused",
        status: 422,
        title: "Idempotency key reused",
        description: "This Idempotency-Key was used by the same principal for a different request (another body or path). Use a new key for a new request.",
    };
    pub const REQUEST_HEADER_FIELDS_TOO_LARGE: ProblemType = ProblemType {
        slug: "request-header-fields-too-large",
        status: 431,
        title: "Request header fields too large",
        description: "The request's headers are too many or too large.",
    };
    pub const INTERNAL_ERROR: ProblemType = ProblemType {
        slug: "internal-error",
        status: 500,
        title: "Internal error",
        description: "An unexpected error occurred. Nothing about it is shown to the client; the service logs it.",
    };
    pub const UPSTREAM_UNAVAILABLE: ProblemType = ProblemType {
        slug: "upstream-unavailable",
        status: 503,
        title: "System of record unavailable",
        description: "The external system of record of an upstream resource cannot be reached right now. Retry after the Retry-After seconds.",
    };
    pub const DATABASE_UNAVAILABLE: ProblemType = ProblemType {
        slug: "database-unavailable",
        status: 503,
        title: "Service unavailable",
        description: "The database is briefly unreachable or busy, and the request changed nothing. Retry after the Retry-After seconds.",
    };
}

impl ProblemType {
    /// The page a problem's `type` leads to: what a person reading a problem needs.
    /// The text is this file's own, so nothing in it needs escaping beyond the
    /// backticks that mark code.
    pub fn page(&self) -> String {
        let code = |s: &str| {
            let mut out = String::new();
            for (i, part) in s.split('`').enumerate() {
                out.push_str(if i % 2 == 1 { "<code>" } else { "" });
                out.push_str(part);
                out.push_str(if i % 2 == 1 { "</code>" } else { "" });
            }
            out
        };
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>{title} ({slug})</title></head>\n\
             <body>\n<h1 id=\"{slug}\">{title}</h1>\n<p>Problem type <code>{base}{slug}</code>, answered with HTTP \
             status {status}.</p>\n<p>{description}</p>\n</body>\n</html>\n",
            title = self.title,
            slug = self.slug,
            base = PROBLEM_BASE,
            status = self.status,
            description = code(self.description),
        )
    }
}

/// The problem type of a slug.
pub fn problem_type(slug: &str) -> Option<&'static ProblemType> {
    PROBLEM_TYPES.iter().find(|t| t.slug == slug)
}
