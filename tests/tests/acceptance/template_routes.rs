//! template.yaml against the route table: the contract's routes (`shared::http::ROUTES`)
//! and the `HttpApi` events of the SAM template must be the same set, each on the
//! function whose cargo-lambda binary serves it, and every `GET` route has its `HEAD`
//! event beside it (an HTTP API routes `HEAD` only where a route names it). Runs without
//! AWS, Docker or a database.

use serde_yaml_ng::{Mapping, Value};
use shared::http::ROUTES;
use std::collections::BTreeSet;

const TEMPLATE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");

/// One `HttpApi` event of an `AWS::Serverless::Function`.
#[derive(Debug)]
struct Event {
    function: String,
    binary: String,
    name: String,
    method: String,
    path: String,
    properties: Mapping,
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

fn http_api_events(template: &Value) -> Vec<Event> {
    let mut out = Vec::new();
    for (function, resource) in functions(template) {
        let binary = str_at(resource, &["Metadata", "BuildProperties", "Binary"])
            .unwrap_or_else(|| panic!("{function} has no Metadata.BuildProperties.Binary"))
            .to_string();
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
                .unwrap_or_else(|| panic!("{function}.{name} has no Properties"))
                .clone();
            let field = |key: &str| {
                properties
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| panic!("{function}.{name} has no plain {key}"))
                    .to_string()
            };
            out.push(Event {
                method: field("Method").to_ascii_uppercase(),
                path: field("Path"),
                function: function.clone(),
                binary: binary.clone(),
                name,
                properties,
            });
        }
    }
    out
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
    let events = http_api_events(&template);
    for spec in ROUTES {
        let matching: Vec<&Event> = events.iter().filter(|e| e.method == spec.method && e.path == spec.path).collect();
        assert_eq!(
            matching.len(),
            1,
            "{} {} must be exactly one HttpApi event in template.yaml, found {:?}",
            spec.method,
            spec.path,
            matching.iter().map(|e| format!("{}.{}", e.function, e.name)).collect::<Vec<_>>()
        );
        let event = matching[0];
        assert_eq!(
            event.binary,
            spec.function.name(),
            "{} {} is owned by the {} function, but template.yaml wires it to {} (binary {})",
            spec.method,
            spec.path,
            spec.function.name(),
            event.function,
            event.binary
        );
    }
}

#[test]
fn every_get_route_has_a_head_event_on_the_same_function_with_the_same_authorizer() {
    let template = template();
    let events = http_api_events(&template);
    let authorizer = |e: &Event| e.properties.get("Auth").and_then(|a| a.get("Authorizer")).cloned();
    for spec in ROUTES.iter().filter(|spec| spec.method == "GET") {
        let get = events.iter().find(|e| e.method == "GET" && e.path == spec.path).expect("the GET event");
        let heads: Vec<&Event> = events.iter().filter(|e| e.method == "HEAD" && e.path == spec.path).collect();
        assert_eq!(heads.len(), 1, "HEAD {} must be exactly one HttpApi event in template.yaml", spec.path);
        assert_eq!(heads[0].function, get.function, "HEAD {} is served by the function of its GET", spec.path);
        assert_eq!(authorizer(heads[0]), authorizer(get), "HEAD {} is guarded as its GET is", spec.path);
    }
}

#[test]
fn no_http_api_event_of_the_template_is_missing_from_the_contract() {
    let template = template();
    for event in http_api_events(&template) {
        // A HEAD event stands for the GET route of its path (shared::http::route).
        let method = if event.method == "HEAD" { "GET" } else { event.method.as_str() };
        assert!(
            ROUTES.iter().any(|spec| spec.method == method && spec.path == event.path),
            "{}.{} ({} {}) is not a route of shared::http::ROUTES",
            event.function,
            event.name,
            event.method,
            event.path
        );
    }
}

#[test]
fn every_route_is_served_through_the_one_http_api_with_payload_format_2() {
    let template = template();
    let apis: Vec<&str> = resources(&template)
        .iter()
        .filter(|(_, r)| str_at(r, &["Type"]) == Some("AWS::Serverless::HttpApi"))
        .filter_map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(apis.len(), 1, "template.yaml declares exactly one HttpApi, found {apis:?}");
    for event in http_api_events(&template) {
        let api = event.properties.get("ApiId").and_then(ref_target);
        assert_eq!(api, Some(apis[0]), "{}.{} must have ApiId: !Ref {}", event.function, event.name, apis[0]);
        let format = event.properties.get("PayloadFormatVersion").and_then(Value::as_str);
        assert_eq!(format, Some("2.0"), "{}.{} must use payload format 2.0", event.function, event.name);
    }
}

/// The routes that answer without a token: health, the problem pages that problem
/// documents link to, and the booking page (static; its script sends the token).
const PUBLIC: [&str; 3] = ["/v1/health", "/v1/problems/{id}", "/app"];

#[test]
fn only_the_health_route_the_problem_pages_and_the_booking_page_bypass_the_jwt_authorizer() {
    let template = template();
    let api = resources(&template)
        .values()
        .find(|r| str_at(r, &["Type"]) == Some("AWS::Serverless::HttpApi"))
        .expect("an HttpApi");
    let default = str_at(api, &["Properties", "Auth", "DefaultAuthorizer"]).expect("a DefaultAuthorizer");
    let authorizer = api
        .get("Properties")
        .and_then(|p| p.get("Auth"))
        .and_then(|a| a.get("Authorizers"))
        .and_then(|a| a.get(default))
        .unwrap_or_else(|| panic!("the default authorizer {default} is declared"));
    assert!(authorizer.get("JwtConfiguration").is_some(), "{default} is a JWT authorizer");

    for event in http_api_events(&template) {
        let chosen = event.properties.get("Auth").and_then(|a| a.get("Authorizer")).and_then(Value::as_str);
        if ["GET", "HEAD"].contains(&event.method.as_str()) && PUBLIC.contains(&event.path.as_str()) {
            assert_eq!(chosen, Some("NONE"), "{} {} answers without a token", event.method, event.path);
        } else {
            assert!(
                chosen.is_none() || chosen == Some(default),
                "{} {} must use the default JWT authorizer, not {chosen:?}",
                event.method,
                event.path
            );
        }
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
