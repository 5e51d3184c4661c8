//! The API Gateway HTTP API (payload 2.0) events in tests/events/ are what the Lambda
//! functions receive in AWS: each deserializes as the runtime does it, becomes a
//! `lambda_http::Request` on the route its file name says, and yields the JWT
//! principal from the authorizer's claims. Runs without AWS or a database.

use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use lambda_http::request::LambdaRequest;
use lambda_http::{Request, RequestExt};
use shared::config::{AuthMode, Config, Defaults};
use shared::http::{ApiError, Op, ROUTES, RouteSpec, principal, query_param, route};
use std::path::PathBuf;

const ADMIN_SCOPE: &str = "reservations/admin";

fn events_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("events")
}

/// A fixture is named after the operation of its route, in snake case:
/// `Op::GetAvailability` is `get_availability.json`.
fn file_stem(op: Op) -> String {
    let mut out = String::new();
    for (i, c) in format!("{op:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The route a fixture's file name stands for.
fn spec_named(stem: &str) -> &'static RouteSpec {
    ROUTES
        .iter()
        .find(|spec| file_stem(spec.op) == stem)
        .unwrap_or_else(|| panic!("tests/events/{stem}.json does not name an operation of shared::http::ROUTES"))
}

fn op_of(stem: &str) -> Op {
    spec_named(stem).op
}

struct Fixture {
    stem: String,
    raw: serde_json::Value,
    event: ApiGatewayV2httpRequest,
}

/// tests/events also holds the events of other sources (the sweeper's EventBridge
/// schedule, queue batches): those are told apart by their own envelope and left to
/// their own tests; anything else must be an HTTP API event.
fn is_http_api_event(raw: &serde_json::Value) -> bool {
    let other_source = raw.get("detail-type").is_some() || raw.get("Records").is_some();
    !other_source
}

fn fixtures() -> Vec<Fixture> {
    let mut out: Vec<Fixture> = std::fs::read_dir(events_dir())
        .expect("tests/events exists")
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let raw: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
            if !is_http_api_event(&raw) {
                return None;
            }
            let event: ApiGatewayV2httpRequest = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not an HTTP API v2 event: {e}", path.display()));
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            Some(Fixture { stem, raw, event })
        })
        .collect();
    out.sort_by(|a, b| a.stem.cmp(&b.stem));
    assert!(!out.is_empty(), "tests/events holds fixtures");
    out
}

fn request(event: ApiGatewayV2httpRequest) -> Request {
    LambdaRequest::ApiGatewayV2(event).into()
}

fn jwt_config() -> Config {
    let config = Config::from_lookup(Defaults::Lambda, |k| match k {
        "DATABASE_URL" => Some("postgres://x@h/db".into()),
        _ => None,
    })
    .expect("a Lambda configuration");
    assert_eq!(config.auth_mode, AuthMode::Jwt);
    config
}

#[test]
fn every_route_of_the_contract_has_an_event_fixture() {
    let stems: Vec<String> = fixtures().into_iter().map(|f| f.stem).collect();
    for spec in ROUTES {
        let stem = file_stem(spec.op);
        assert!(
            stems.contains(&stem),
            "tests/events/{stem}.json is the fixture for {} {} ({:?})",
            spec.method,
            spec.path,
            spec.op
        );
    }
}

#[test]
fn every_fixture_is_a_payload_2_event_shaped_like_api_gateway_sends_it() {
    for f in fixtures() {
        let spec = spec_named(&f.stem);
        let route_key = format!("{} {}", spec.method, spec.path);
        let name = &f.stem;
        assert_eq!(f.raw["version"], "2.0", "{name}: version");
        assert_eq!(f.raw["isBase64Encoded"], false, "{name}: isBase64Encoded");
        assert!(f.raw["rawQueryString"].is_string(), "{name}: rawQueryString is present");
        assert_eq!(f.event.route_key.as_deref(), Some(route_key.as_str()), "{name}: routeKey");
        assert_eq!(f.event.request_context.route_key.as_deref(), Some(route_key.as_str()), "{name}: context routeKey");
        assert_eq!(f.event.request_context.stage.as_deref(), Some("$default"), "{name}: stage");
        assert_eq!(f.event.request_context.http.method.as_str(), spec.method, "{name}: http.method");
        assert_eq!(f.event.request_context.http.path, f.event.raw_path, "{name}: http.path is the raw path");
        if f.event.body.is_some() {
            let content_type = f.event.headers.get("content-type").and_then(|v| v.to_str().ok());
            assert_eq!(content_type, Some("application/json"), "{name}: a body comes with its content type");
        }
        // API Gateway fills pathParameters exactly for the routes with a path parameter.
        let raw_path = f.event.raw_path.clone().unwrap_or_default();
        match spec.path.split('/').position(|seg| seg == "{id}") {
            Some(i) => {
                let id = raw_path.split('/').nth(i).expect("the raw path has the id segment");
                assert_eq!(
                    f.event.path_parameters.get("id").map(String::as_str),
                    Some(id),
                    "{name}: pathParameters.id"
                );
            }
            None => assert!(f.event.path_parameters.is_empty(), "{name}: no pathParameters"),
        }
    }
}

#[test]
fn every_fixture_becomes_a_request_on_the_route_its_file_name_says() {
    for f in fixtures() {
        let spec = spec_named(&f.stem);
        let op = spec.op;
        let raw_path = f.event.raw_path.clone().unwrap_or_default();
        let req = request(f.event);
        assert_eq!(req.method().as_str(), spec.method, "{}: method", f.stem);
        assert_eq!(req.uri().path(), raw_path, "{}: path", f.stem);
        let matched = route(req.method(), req.uri().path())
            .unwrap_or_else(|e| panic!("{}: {} {} matches no route: {e:?}", f.stem, req.method(), req.uri().path()));
        assert_eq!(matched.spec.op, op, "{}: routed to {:?}", f.stem, matched.spec.op);
        if let Some(id) = matched.id {
            // A problem page's id is its slug, a feed's its `{token}.ics`; every other id
            // is a UUID.
            let is_id = [Op::GetProblem, Op::GetFeed].contains(&op) || uuid::Uuid::parse_str(id).is_ok();
            assert!(is_id, "{}: the path id {id} is a UUID", f.stem);
            assert_eq!(req.path_parameters_ref().and_then(|p| p.first("id")), Some(id), "{}: path parameter", f.stem);
        }
    }
}

#[test]
fn the_availability_fixture_carries_its_window_in_the_query_string() {
    let f = fixtures().into_iter().find(|f| f.stem == "get_availability").expect("get_availability.json");
    let req = request(f.event);
    assert_eq!(query_param(&req, "from").as_deref(), Some("2027-03-15T00:00:00+01:00"));
    assert_eq!(query_param(&req, "to").as_deref(), Some("2027-03-16T00:00:00Z"));
}

#[test]
fn in_jwt_mode_the_principal_is_the_sub_claim_and_admin_follows_the_scope() {
    let config = jwt_config();
    for f in fixtures() {
        let claims = f.event.request_context.authorizer.as_ref().and_then(|a| a.jwt.as_ref()).map(|j| j.claims.clone());
        let req = request(f.event);
        match claims {
            Some(claims) => {
                let sub = claims.get("sub").unwrap_or_else(|| panic!("{}: claims have a sub", f.stem));
                let scope = claims.get("scope").unwrap_or_else(|| panic!("{}: claims have a scope", f.stem));
                let who = principal(&req, &config).unwrap_or_else(|e| panic!("{}: no principal: {e:?}", f.stem));
                assert_eq!(&who.id, sub, "{}: principal is the sub claim", f.stem);
                assert_eq!(who.admin, scope.split(' ').any(|s| s == ADMIN_SCOPE), "{}: admin by scope", f.stem);
                // The header is ignored in JWT mode, whatever it says.
                let mut spoofed = req;
                spoofed.headers_mut().insert("x-principal", "admin".parse().unwrap());
                assert_eq!(principal(&spoofed, &config).unwrap().id, *sub, "{}: X-Principal is ignored", f.stem);
            }
            None => {
                // Only health, the problem pages, the booking page and the calendar
                // feeds are served without the JWT authorizer.
                let public = [Op::Health, Op::GetProblem, Op::GetPage, Op::GetFeed].contains(&op_of(&f.stem));
                assert!(public, "{}: only health and the pages come without authorizer claims", f.stem);
                assert!(matches!(principal(&req, &config), Err(ApiError::Unauthenticated(_))));
            }
        }
    }
}

/// The operations only admins may call; their fixtures carry the admin scope, and no
/// other fixture does.
const ADMIN_OPS: [Op; 12] = [
    Op::CreateResource,
    Op::UpdateResource,
    Op::ArchiveResource,
    Op::ListWaitlist,
    Op::CreateWebhook,
    Op::ListWebhooks,
    Op::GetWebhook,
    Op::DeleteWebhook,
    Op::RotateWebhookSecret,
    Op::CreatePool,
    Op::UpdatePool,
    Op::DeletePool,
];

#[test]
fn only_the_fixtures_of_admin_operations_have_the_admin_scope() {
    let config = jwt_config();
    for f in fixtures() {
        let op = op_of(&f.stem);
        let req = request(f.event);
        let admin = principal(&req, &config).map(|p| p.admin).unwrap_or(false);
        assert_eq!(admin, ADMIN_OPS.contains(&op), "{}: admin scope", f.stem);
    }
}
