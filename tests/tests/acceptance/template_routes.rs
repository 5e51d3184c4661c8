//! template.yaml against the route table: the contract's routes (`shared::http::ROUTES`)
//! and the `HttpApi` events of the SAM template must be the same set, each on the
//! function whose cargo-lambda binary serves it, and every `GET` route has its `HEAD`
//! event beside it (an HTTP API routes `HEAD` only where a route names it). Runs without
//! AWS, Docker or a database.

use serde_yaml_ng::{Mapping, Value};
use shared::http::ROUTES;
use std::collections::BTreeSet;

const TEMPLATE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");

/// Who API Gateway lets through to a route.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Guard {
    /// The HTTP API's default JWT authorizer.
    Jwt,
    /// No authorizer (`Authorizer: NONE`).
    Open,
    /// No authorizer when the `PublicCalendar` parameter is "true", else the JWT one.
    PublicCalendar,
    /// Anything else, spelled as the template has it.
    Other(String),
}

/// One route of the HTTP API: an `HttpApi` event of an `AWS::Serverless::Function`, or
/// an operation of the API's `DefinitionBody` integrated with a function.
#[derive(Debug)]
struct Route {
    function: String,
    binary: String,
    /// The event's name, or `DefinitionBody` for an operation of the body.
    name: String,
    method: String,
    path: String,
    guard: Guard,
    /// The API the route belongs to (`ApiId: !Ref` of an event; the body's own API).
    api: Option<String>,
    payload_format: Option<String>,
}

fn template() -> Value {
    let text = std::fs::read_to_string(TEMPLATE).unwrap_or_else(|e| panic!("reading {TEMPLATE}: {e}"));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("parsing {TEMPLATE}: {e}"))
}

fn resources(template: &Value) -> &Mapping {
    template.get("Resources").and_then(Value::as_mapping).expect("template.yaml has a Resources mapping")
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(value, |v, key| v.get(*key))?.as_str()
}

/// The serverless functions: (logical id, resource).
fn functions(template: &Value) -> Vec<(String, &Value)> {
    resources(template)
        .iter()
        .filter(|(_, r)| str_at(r, &["Type"]) == Some("AWS::Serverless::Function"))
        .map(|(id, r)| (id.as_str().expect("logical ids are strings").to_string(), r))
        .collect()
}

/// The one HTTP API: (logical id, resource).
fn http_api(template: &Value) -> (String, &Value) {
    let apis: Vec<(&Value, &Value)> =
        resources(template).iter().filter(|(_, r)| str_at(r, &["Type"]) == Some("AWS::Serverless::HttpApi")).collect();
    assert_eq!(apis.len(), 1, "template.yaml declares exactly one HttpApi");
    (apis[0].0.as_str().expect("logical ids are strings").to_string(), apis[0].1)
}

fn default_authorizer(template: &Value) -> String {
    let (_, api) = http_api(template);
    str_at(api, &["Properties", "Auth", "DefaultAuthorizer"]).expect("a DefaultAuthorizer").to_string()
}

fn binary_of(template: &Value, function: &str) -> String {
    let resource = resources(template).get(function).unwrap_or_else(|| panic!("no resource {function}"));
    str_at(resource, &["Metadata", "BuildProperties", "Binary"])
        .unwrap_or_else(|| panic!("{function} has no Metadata.BuildProperties.Binary"))
        .to_string()
}

/// The routes of the functions' `HttpApi` events and of the API's `DefinitionBody`.
fn routes(template: &Value) -> Vec<Route> {
    let mut out = event_routes(template);
    out.extend(body_routes(template));
    out
}

fn event_routes(template: &Value) -> Vec<Route> {
    let default = default_authorizer(template);
    let mut out = Vec::new();
    for (function, resource) in functions(template) {
        let binary = binary_of(template, &function);
        let Some(events) = resource.get("Properties").and_then(|p| p.get("Events")).and_then(Value::as_mapping) else {
            continue;
        };
        for (name, event) in events {
            if str_at(event, &["Type"]) != Some("HttpApi") {
                continue;
            }
            let name = name.as_str().expect("event names are strings").to_string();
            let properties = event
                .get("Properties")
                .and_then(Value::as_mapping)
                .unwrap_or_else(|| panic!("{function}.{name} has no Properties"));
            let field = |key: &str| {
                properties
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| panic!("{function}.{name} has no plain {key}"))
                    .to_string()
            };
            let guard = match properties.get("Auth").and_then(|a| a.get("Authorizer")).map(|a| a.as_str()) {
                None => Guard::Jwt,
                Some(Some("NONE")) => Guard::Open,
                Some(Some(name)) if name == default => Guard::Jwt,
                Some(other) => Guard::Other(format!("{other:?}")),
            };
            out.push(Route {
                method: field("Method").to_ascii_uppercase(),
                path: field("Path"),
                function: function.clone(),
                binary: binary.clone(),
                name,
                guard,
                api: properties.get("ApiId").and_then(ref_target).map(str::to_string),
                payload_format: properties.get("PayloadFormatVersion").and_then(Value::as_str).map(str::to_string),
            });
        }
    }
    out
}

/// The operations of the HTTP API's `DefinitionBody`, each integrated with a function
/// through `uri: !Sub ...${Function.Arn}/invocations`.
fn body_routes(template: &Value) -> Vec<Route> {
    let (api_id, api) = http_api(template);
    let default = default_authorizer(template);
    let Some(paths) = api.get("Properties").and_then(|p| p.get("DefinitionBody")).and_then(|b| b.get("paths")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (path, item) in paths.as_mapping().expect("paths is a mapping") {
        let path = path.as_str().expect("paths are strings");
        for (method, operation) in item.as_mapping().unwrap_or_else(|| panic!("{path} is a mapping")) {
            let method = method.as_str().expect("methods are strings").to_ascii_uppercase();
            let integration = operation
                .get("x-amazon-apigateway-integration")
                .unwrap_or_else(|| panic!("{method} {path} of the DefinitionBody has no integration"));
            let uri = match integration.get("uri") {
                Some(Value::Tagged(t)) if t.tag == "Sub" => t.value.as_str().unwrap_or_default(),
                other => panic!("{method} {path}: uri must be !Sub ...${{Function.Arn}}..., is {other:?}"),
            };
            assert_eq!(str_at(integration, &["type"]), Some("aws_proxy"), "{method} {path} is a Lambda proxy");
            let function = uri
                .split("${")
                .find_map(|part| part.split_once(".Arn}"))
                .map(|(function, _)| function.to_string())
                .unwrap_or_else(|| panic!("{method} {path}: the uri names no ${{Function.Arn}}: {uri}"));
            out.push(Route {
                binary: binary_of(template, &function),
                function,
                name: "DefinitionBody".to_string(),
                guard: body_guard(template, operation.get("security"), &default),
                method,
                path: path.to_string(),
                api: Some(api_id.clone()),
                payload_format: str_at(integration, &["payloadFormatVersion"]).map(str::to_string),
            });
        }
    }
    out
}

/// `security` of a body operation: `[{NONE: []}]` is how SAM writes `Authorizer: NONE`,
/// no `security` gets the default authorizer, and `!If [PublicCalendarOn, open, jwt]`
/// leaves the choice to the parameter.
fn body_guard(template: &Value, security: Option<&Value>, default: &str) -> Guard {
    let only = |value: &Value, scheme: &str| {
        value.as_sequence().is_some_and(|list| {
            list.len() == 1 && list[0].as_mapping().is_some_and(|m| m.len() == 1 && m.contains_key(scheme))
        })
    };
    match security {
        None => Guard::Jwt,
        Some(list) if only(list, "NONE") => Guard::Open,
        Some(list) if only(list, default) => Guard::Jwt,
        Some(Value::Tagged(choice)) if choice.tag == "If" => {
            let branches = choice.value.as_sequence().expect("!If [condition, then, else]");
            let condition = branches[0].as_str().expect("a condition name");
            let definition = template
                .get("Conditions")
                .and_then(|c| c.get(condition))
                .unwrap_or_else(|| panic!("condition {condition} is declared"));
            let on_public_calendar = match definition {
                Value::Tagged(t) if t.tag == "Equals" => t.value.as_sequence().is_some_and(|args| {
                    args.len() == 2
                        && ref_target(&args[0]) == Some("PublicCalendar")
                        && args[1].as_str() == Some("true")
                }),
                _ => false,
            };
            if on_public_calendar && only(&branches[1], "NONE") && only(&branches[2], default) {
                Guard::PublicCalendar
            } else {
                Guard::Other(format!("{security:?}"))
            }
        }
        Some(other) => Guard::Other(format!("{other:?}")),
    }
}

/// `!Ref Name` (short form) or `{Ref: Name}` (long form).
fn ref_target(value: &Value) -> Option<&str> {
    match value {
        Value::Tagged(tagged) if tagged.tag == "Ref" => tagged.value.as_str(),
        Value::Mapping(m) if m.len() == 1 => m.get("Ref").and_then(Value::as_str),
        _ => None,
    }
}

#[test]
fn every_contract_route_is_wired_to_its_function() {
    let template = template();
    let routes = routes(&template);
    for spec in ROUTES {
        let matching: Vec<&Route> = routes.iter().filter(|r| r.method == spec.method && r.path == spec.path).collect();
        assert_eq!(
            matching.len(),
            1,
            "{} {} must be exactly one route of template.yaml, found {:?}",
            spec.method,
            spec.path,
            matching.iter().map(|r| format!("{}.{}", r.function, r.name)).collect::<Vec<_>>()
        );
        let route = matching[0];
        assert_eq!(
            route.binary,
            spec.function.name(),
            "{} {} is owned by the {} function, but template.yaml wires it to {} (binary {})",
            spec.method,
            spec.path,
            spec.function.name(),
            route.function,
            route.binary
        );
    }
}

#[test]
fn every_get_route_has_a_head_route_on_the_same_function_with_the_same_guard() {
    let template = template();
    let routes = routes(&template);
    for spec in ROUTES.iter().filter(|spec| spec.method == "GET") {
        let get = routes.iter().find(|r| r.method == "GET" && r.path == spec.path).expect("the GET route");
        let heads: Vec<&Route> = routes.iter().filter(|r| r.method == "HEAD" && r.path == spec.path).collect();
        assert_eq!(heads.len(), 1, "HEAD {} must be exactly one route of template.yaml", spec.path);
        assert_eq!(heads[0].function, get.function, "HEAD {} is served by the function of its GET", spec.path);
        assert_eq!(heads[0].guard, get.guard, "HEAD {} is guarded as its GET is", spec.path);
    }
}

#[test]
fn no_route_of_the_template_is_missing_from_the_contract() {
    let template = template();
    for route in routes(&template) {
        // A HEAD route stands for the GET route of its path (shared::http::route).
        let method = if route.method == "HEAD" { "GET" } else { route.method.as_str() };
        assert!(
            ROUTES.iter().any(|spec| spec.method == method && spec.path == route.path),
            "{}.{} ({} {}) is not a route of shared::http::ROUTES",
            route.function,
            route.name,
            route.method,
            route.path
        );
    }
}

#[test]
fn every_route_is_served_through_the_one_http_api_with_payload_format_2() {
    let template = template();
    let (api, _) = http_api(&template);
    for route in routes(&template) {
        assert_eq!(route.api.as_deref(), Some(api.as_str()), "{}.{} must be on {api}", route.function, route.name);
        assert_eq!(
            route.payload_format.as_deref(),
            Some("2.0"),
            "{}.{} ({} {}) must use payload format 2.0",
            route.function,
            route.name,
            route.method,
            route.path
        );
    }
}

/// The routes that answer without a token: health, the problem pages that problem
/// documents link to, the booking page (static; its script sends the token) and the
/// calendar feeds (the token in their path is the key).
const PUBLIC: [&str; 4] = ["/v1/health", "/v1/problems/{id}", "/app", "/v1/feeds/{id}"];

#[test]
fn only_health_the_problem_pages_and_the_booking_page_are_open_and_the_calendar_reads_open_with_the_public_calendar() {
    let template = template();
    let (_, api) = http_api(&template);
    let default = default_authorizer(&template);
    let authorizer = api
        .get("Properties")
        .and_then(|p| p.get("Auth"))
        .and_then(|a| a.get("Authorizers"))
        .and_then(|a| a.get(&default))
        .unwrap_or_else(|| panic!("the default authorizer {default} is declared"));
    assert!(authorizer.get("JwtConfiguration").is_some(), "{default} is a JWT authorizer");

    for route in routes(&template) {
        let method = if route.method == "HEAD" { "GET" } else { route.method.as_str() };
        let spec = ROUTES.iter().find(|s| s.method == method && s.path == route.path).expect("a contract route");
        let expected = if method == "GET" && PUBLIC.contains(&route.path.as_str()) {
            Guard::Open
        } else if spec.op.is_calendar_read() {
            Guard::PublicCalendar
        } else {
            Guard::Jwt
        };
        assert_eq!(route.guard, expected, "{} {} ({}.{})", route.method, route.path, route.function, route.name);
    }
}

#[test]
fn the_public_calendar_parameter_reaches_the_function_that_answers_the_calendar_reads() {
    let template = template();
    let parameter = template.get("Parameters").and_then(|p| p.get("PublicCalendar")).expect("PublicCalendar");
    assert_eq!(str_at(parameter, &["Default"]), Some("false"), "the calendar is private unless asked");
    let routes = routes(&template);
    let calendar: BTreeSet<&str> = ROUTES
        .iter()
        .filter(|s| s.op.is_calendar_read())
        .map(|s| routes.iter().find(|r| r.path == s.path).expect("routed").function.as_str())
        .collect();
    assert_eq!(calendar.len(), 1, "one function answers the calendar reads: {calendar:?}");
    let function = resources(&template).get(*calendar.first().unwrap()).unwrap();
    let variable = function
        .get("Properties")
        .and_then(|p| p.get("Environment"))
        .and_then(|e| e.get("Variables"))
        .and_then(|v| v.get("PUBLIC_CALENDAR"))
        .expect("PUBLIC_CALENDAR is set on the function");
    assert_eq!(ref_target(variable), Some("PublicCalendar"));
}

/// SAM writes the invoke permission of an event's route; a route of the body needs its
/// own `AWS::Lambda::Permission`, or API Gateway answers 500 without calling the function.
#[test]
fn api_gateway_may_invoke_the_function_of_every_route_of_the_definition_body() {
    let template = template();
    let (api, _) = http_api(&template);
    let permissions: Vec<(String, String)> = resources(&template)
        .values()
        .filter(|r| str_at(r, &["Type"]) == Some("AWS::Lambda::Permission"))
        .map(|r| {
            let properties = r.get("Properties").expect("Properties");
            assert_eq!(str_at(properties, &["Principal"]), Some("apigateway.amazonaws.com"));
            assert_eq!(str_at(properties, &["Action"]), Some("lambda:InvokeFunction"));
            let function = properties.get("FunctionName").and_then(ref_target).expect("FunctionName: !Ref").to_string();
            let source = match properties.get("SourceArn") {
                Some(Value::Tagged(t)) if t.tag == "Sub" => t.value.as_str().unwrap_or_default().to_string(),
                other => panic!("SourceArn must be a !Sub string, is {other:?}"),
            };
            (function, source)
        })
        .collect();
    for route in body_routes(&template).iter() {
        let wanted = format!("${{{api}}}/*/*{}", route.path.replace("{id}", "*"));
        assert!(
            permissions.iter().any(|(f, source)| *f == route.function && source.ends_with(&wanted)),
            "{} {}: no permission for {} with a SourceArn ending in {wanted}",
            route.method,
            route.path,
            route.function
        );
    }
}

#[test]
fn each_route_owner_is_a_template_function_built_from_its_own_workspace_binary() {
    let template = template();
    let binaries: Vec<String> = functions(&template)
        .iter()
        .map(|(id, r)| {
            assert_eq!(str_at(r, &["Metadata", "BuildMethod"]), Some("rust-cargolambda"), "{id} BuildMethod");
            assert_eq!(str_at(r, &["Properties", "CodeUri"]), Some("."), "{id} CodeUri is the workspace root");
            str_at(r, &["Metadata", "BuildProperties", "Binary"]).unwrap_or_default().to_string()
        })
        .collect();
    let unique: BTreeSet<&str> = binaries.iter().map(String::as_str).collect();
    assert_eq!(unique.len(), binaries.len(), "one template function per binary: {binaries:?}");

    // Functions without HTTP routes (a scheduled sweeper, a queue worker) may come on top.
    let owners: BTreeSet<&str> = ROUTES.iter().map(|spec| spec.function.name()).collect();
    assert!(owners.is_subset(&unique), "every owner of a route is a template function: {owners:?} in {unique:?}");

    // Every binary the template builds is the [[bin]] of the workspace crate of that name.
    for name in &unique {
        let manifest = format!("{}/../functions/{name}/Cargo.toml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("reading {manifest}: {e}"));
        assert!(
            text.contains("[[bin]]") && text.contains(&format!("name = \"{name}\"")),
            "{manifest} declares a binary named {name}"
        );
    }
}

#[test]
fn the_http_api_answers_cors_for_the_origins_of_a_parameter_by_the_dev_servers_rules() {
    let template = template();
    let parameter = template.get("Parameters").and_then(|p| p.get("CorsAllowedOrigins")).expect("CorsAllowedOrigins");
    assert_eq!(str_at(parameter, &["Type"]), Some("CommaDelimitedList"));
    assert_eq!(str_at(parameter, &["Default"]), Some(""), "no CORS unless origins are given");
    let api = resources(&template)
        .values()
        .find(|r| str_at(r, &["Type"]) == Some("AWS::Serverless::HttpApi"))
        .expect("an HttpApi");
    let Some(Value::Tagged(cors)) = api.get("Properties").and_then(|p| p.get("CorsConfiguration")) else {
        panic!("CorsConfiguration is an !If on the parameter being empty");
    };
    assert_eq!(cors.tag, "If");
    let branches = cors.value.as_sequence().expect("!If [condition, then, else]");
    assert_eq!(branches[0].as_str(), Some("HasCors"));
    let config = &branches[1];
    assert_eq!(config.get("AllowOrigins").and_then(ref_target), Some("CorsAllowedOrigins"));
    let list = |key: &str| -> Vec<String> {
        config
            .get(key)
            .and_then(Value::as_sequence)
            .expect(key)
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let lower = |s: &str| -> Vec<String> { s.split(", ").map(str::to_ascii_lowercase).collect() };
    // In AWS the principal is a bearer token: no X-Principal.
    assert_eq!(list("AllowHeaders"), lower(dev_server::cors::API_HEADERS));
    assert_eq!(list("ExposeHeaders"), lower(dev_server::cors::EXPOSED));
    assert_eq!(config.get("MaxAge").and_then(Value::as_u64), Some(dev_server::cors::MAX_AGE.into()));
    let methods = list("AllowMethods");
    for spec in ROUTES {
        assert!(methods.contains(&spec.method.to_string()), "{} is allowed by CORS", spec.method);
    }
    assert!(methods.contains(&"HEAD".to_string()));
}
