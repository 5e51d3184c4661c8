//! openapi/openapi.json against the service: the document names exactly the routes of
//! `shared::http::ROUTES`, the dev server serves it as committed, and real answers along
//! the main flows match what it documents for their operation and status (status,
//! content type, headers and body schema).

use acceptance::{TestApp, hours, slug};
use reqwest::{RequestBuilder, StatusCode};
use serde_json::{Value, json};
use shared::http::ROUTES;
use std::collections::BTreeSet;

const DOCUMENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/openapi.json");
const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

fn document() -> Value {
    let text = std::fs::read_to_string(DOCUMENT).unwrap_or_else(|e| panic!("reading {DOCUMENT}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {DOCUMENT}: {e}"))
}

/// `Op::GetWaitlistEntry` as an operationId: `getWaitlistEntry`.
fn operation_id(op: shared::http::Op) -> String {
    let name = format!("{op:?}");
    let mut chars = name.chars();
    chars.next().map(|c| c.to_ascii_lowercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// Follows a local `$ref` (`#/components/...`) of the document, if `value` is one.
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("only local $refs: {r}"));
            resolve(doc, doc.pointer(pointer).unwrap_or_else(|| panic!("dangling $ref {r}")))
        }
        None => value,
    }
}

/// A validator for `schema`, whose `$ref`s point into the document's components.
fn validator(doc: &Value, schema: &Value) -> jsonschema::Validator {
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": doc["components"],
        "allOf": [schema],
    });
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&root)
        .unwrap_or_else(|e| panic!("schema {schema} does not compile: {e}"))
}

fn assert_valid(doc: &Value, schema: &Value, instance: &Value, what: &str) {
    let errors: Vec<String> =
        validator(doc, schema).iter_errors(instance).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{what} does not match the document:\n{}\ninstance: {instance:#}", errors.join("\n"));
}

#[test]
fn every_route_of_the_contract_is_documented_and_nothing_else_is() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                documented.insert((method.to_ascii_uppercase(), path.clone()));
                let params = op["parameters"].as_array().cloned().unwrap_or_default();
                let path_params: BTreeSet<String> = params
                    .iter()
                    .map(|p| resolve(&doc, p))
                    .filter(|p| p["in"] == "path")
                    .map(|p| p["name"].as_str().unwrap().to_string())
                    .collect();
                let in_template: BTreeSet<String> = path
                    .split('/')
                    .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
                    .map(String::from)
                    .collect();
                assert_eq!(path_params, in_template, "{method} {path}: path parameters");
                let responses = op["responses"].as_object().expect("responses");
                assert!(responses.contains_key("500"), "{method} {path} documents its 500");
                // Public: health, the problem pages, the booking page (static; its script
                // sends the identity with each API call) and a calendar feed's read.
                let public = ["/v1/health", "/v1/problems/{id}", "/app"].contains(&path.as_str())
                    || (method == "get" && path == "/v1/feeds/{id}");
                if !public {
                    assert!(responses.contains_key("401"), "{method} {path} documents its 401");
                }
            }
        }
    }
    let routes: BTreeSet<(String, String)> =
        ROUTES.iter().map(|r| (r.method.to_string(), r.path.to_string())).collect();
    let missing: Vec<_> = routes.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&routes).collect();
    assert!(missing.is_empty(), "routes of ROUTES missing from the document: {missing:?}");
    assert!(extra.is_empty(), "operations of the document that ROUTES does not have: {extra:?}");
    for route in ROUTES {
        let op = &doc["paths"][route.path][route.method.to_ascii_lowercase()];
        assert_eq!(op["operationId"], operation_id(route.op), "{} {}", route.method, route.path);
    }
}

#[test]
fn the_idempotent_routes_document_the_idempotency_key_header() {
    let doc = document();
    let idempotent = [
        ("post", "/v1/resources"),
        ("post", "/v1/reservations"),
        ("post", "/v1/reservations/{id}/confirm"),
        ("post", "/v1/reservations/{id}/extend"),
        ("post", "/v1/resources/{id}/waitlist"),
        ("patch", "/v1/reservations/{id}"),
        ("patch", "/v1/resources/{id}"),
        ("post", "/v1/webhooks"),
        ("post", "/v1/webhooks/{id}/rotate-secret"),
        ("post", "/v1/webhooks/{id}/deliveries/{delivery_id}/retry"),
        ("post", "/v1/webhooks/{id}/recover"),
        ("post", "/v1/pools"),
        ("patch", "/v1/pools/{id}"),
        ("post", "/v1/series"),
    ];
    for route in ROUTES {
        let (method, path) = (route.method.to_ascii_lowercase(), route.path);
        let op = &doc["paths"][path][&method];
        let names: Vec<String> = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| resolve(&doc, p))
            .filter(|p| p["in"] == "header")
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect();
        let has_key = names.iter().any(|n| n == "Idempotency-Key");
        assert_eq!(has_key, idempotent.contains(&(method.as_str(), path)), "{method} {path}: Idempotency-Key");
        if has_key {
            assert!(op["responses"].get("422").is_some(), "{method} {path} documents 422");
        }
    }
}

#[test]
fn every_schema_of_the_document_compiles_and_its_examples_satisfy_it() {
    let doc = document();
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        let reference = json!({"$ref": format!("#/components/schemas/{name}")});
        validator(&doc, &reference);
        for example in schema["examples"].as_array().into_iter().flatten() {
            assert_valid(&doc, &reference, example, &format!("the example of {name}"));
        }
    }
}

#[tokio::test]
async fn the_dev_server_serves_the_committed_document() {
    let app = TestApp::spawn().await;
    // No principal needed: the document is public.
    let resp = app.http.get(app.url("/v1/openapi.json")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let served = resp.text().await.unwrap();
    let committed = std::fs::read_to_string(DOCUMENT).unwrap();
    assert!(served == committed, "the served document differs from {DOCUMENT}: rebuild the dev server");
}

/// A real answer, checked against the document.
struct Answer {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn id(&self) -> String {
        self.body["id"].as_str().unwrap_or_else(|| panic!("no id in {}", self.body)).to_string()
    }
}

/// A resource whose authority is the system of record, made by the admin through
/// [`call`].
async fn upstream_seat(app: &TestApp, doc: &Value, name: &str, upstream_ref: &str) -> Answer {
    let body = json!({"name": name, "authority": "upstream", "upstream_ref": upstream_ref});
    call(app, doc, app.post("admin", "/v1/resources", &body)).await
}

/// Sends `req` to the dev server and checks the answer against the operation that the
/// route table finds for it: the status is documented, the content type is one of that
/// response's, required headers are there, present ones and the body match their schemas.
async fn call(app: &TestApp, doc: &Value, req: RequestBuilder) -> Answer {
    let req = req.build().unwrap();
    let method = req.method().clone();
    let path = req.url().path().to_string();
    let resp = app.http.execute(req).await.expect("the dev server answers");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.bytes().await.unwrap();
    let body: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{method} {path}: {status} with a body that is not JSON ({e})"));
    let what = format!("{method} {path} -> {status}");

    let template = shared::http::route(&method, &path).map(|m| m.spec.path).unwrap_or_else(|e| panic!("{what}: {e}"));
    let op = &doc["paths"][template][method.as_str().to_ascii_lowercase()];
    assert!(op.is_object(), "{what}: {method} {template} is not documented");
    let documented = op["responses"]
        .get(status.as_str())
        .unwrap_or_else(|| panic!("{what}: status {status} is not documented for {method} {template}"));
    let response = resolve(doc, documented);

    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    let media = content_type.split(';').next().unwrap().trim();
    let schema = response["content"]
        .get(media)
        .unwrap_or_else(|| panic!("{what}: content type {content_type:?} is not documented ({})", response["content"]))
        .get("schema")
        .unwrap_or_else(|| panic!("{what}: no schema for {media}"));
    assert_valid(doc, schema, &body, &what);

    for (name, header) in response["headers"].as_object().into_iter().flatten() {
        let header = resolve(doc, header);
        match headers.get(name.as_str()).map(|v| v.to_str().unwrap().to_string()) {
            None => assert!(header["required"] != true, "{what}: required header {name} is missing"),
            Some(raw) => {
                let value = match header["schema"]["type"].as_str() {
                    Some("integer") => {
                        json!(raw.parse::<i64>().unwrap_or_else(|_| panic!("{what}: {name}: {raw} is not an integer")))
                    }
                    _ => json!(raw),
                };
                assert_valid(doc, &header["schema"], &value, &format!("{what}: header {name}"));
            }
        }
    }
    Answer { status, headers, body }
}

fn reservation_body(resource: &str, range: &(String, String)) -> Value {
    json!({"resource_id": resource, "start": range.0, "end": range.1})
}

#[tokio::test]
async fn answers_along_the_main_flows_match_the_document() {
    let app = TestApp::spawn().await;
    let doc = document();

    let health = call(&app, &doc, app.http.get(app.url("/v1/health"))).await;
    assert_eq!(health.status, StatusCode::OK);

    let room = call(&app, &doc, app.post("admin", "/v1/resources", &json!({"name": "Room 101", "capacity": 1}))).await;
    assert_eq!(room.status, StatusCode::CREATED);
    let room_id = room.id();
    let read = call(&app, &doc, app.get("alice", &format!("/v1/resources/{room_id}"))).await;
    assert_eq!(read.status, StatusCode::OK);

    // A hold under an idempotency key, and its replay.
    let ten = hours(10, 11);
    let hold =
        || app.post("alice", "/v1/reservations", &reservation_body(&room_id, &ten)).header("idempotency-key", "k-1");
    let held = call(&app, &doc, hold()).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    assert_eq!(held.body["status"], "HELD");
    assert_eq!(held.header("idempotency-replayed"), Some("false"));
    let replayed = call(&app, &doc, hold()).await;
    assert_eq!(replayed.status, StatusCode::CREATED);
    assert_eq!(replayed.header("idempotency-replayed"), Some("true"));
    assert_eq!(replayed.body, held.body);
    let hold_id = held.id();

    // The same key for another request.
    let other = hours(12, 13);
    let reused = call(
        &app,
        &doc,
        app.post("alice", "/v1/reservations", &reservation_body(&room_id, &other)).header("idempotency-key", "k-1"),
    )
    .await;
    assert_eq!(reused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(slug(&reused.body), "idempotency-key-reused");

    // A lost race: a 409, stored and replayed under its key.
    let race =
        || app.post("bob", "/v1/reservations", &reservation_body(&room_id, &ten)).header("idempotency-key", "b-1");
    let lost = call(&app, &doc, race()).await;
    assert_eq!(lost.status, StatusCode::CONFLICT);
    assert_eq!(slug(&lost.body), "slot-unavailable");
    let lost_again = call(&app, &doc, race()).await;
    assert_eq!(lost_again.status, StatusCode::CONFLICT);
    assert_eq!(lost_again.header("idempotency-replayed"), Some("true"));

    // A validation error.
    let backwards = (ten.1.clone(), ten.0.clone());
    let invalid =
        call(&app, &doc, app.post("alice", "/v1/reservations", &reservation_body(&room_id, &backwards))).await;
    assert_eq!(invalid.status, StatusCode::BAD_REQUEST);
    assert_eq!(slug(&invalid.body), "validation-error");
    assert_eq!(invalid.body["errors"][0]["field"], "end");

    // The calendar while held.
    let day = hours(8, 14);
    let calendar = format!("/v1/resources/{room_id}/availability?from={}&to={}", day.0, day.1);
    let availability = call(&app, &doc, app.get("carol", &calendar)).await;
    assert_eq!(availability.status, StatusCode::OK);
    assert_eq!(availability.body["taken"][0]["status"], "HELD");
    assert_eq!(availability.body["free"].as_array().unwrap().len(), 2);
    // The same window's starts, with the reason each of the others cannot be booked.
    let window = format!("from={}&to={}&duration=PT1H&unavailable=true", day.0, day.1);
    let starts = call(&app, &doc, app.get("carol", &format!("/v1/resources/{room_id}/slots?{window}"))).await;
    assert_eq!(starts.status, StatusCode::OK);
    assert_eq!(starts.body["slots"].as_array().unwrap().len(), 5, "{}", starts.body);
    assert_eq!(starts.body["unavailable"], json!([{"start": ten.0, "end": ten.1, "reason": "taken"}]));
    let found = call(&app, &doc, app.get("carol", &format!("/v1/slots?resource_id={room_id}&{window}"))).await;
    assert_eq!(found.status, StatusCode::OK);
    assert_eq!(found.body["resources"][0]["unavailable"], starts.body["unavailable"]);
    let plain_path = format!("{}&duration=PT1H", calendar.replace("availability", "slots"));
    let plain = call(&app, &doc, app.get("carol", &plain_path)).await;
    assert!(plain.body.get("unavailable").is_none(), "listed only when asked: {}", plain.body);
    // A booking page's default length, set and cleared.
    let length =
        |v: Value| app.patch("admin", &format!("/v1/resources/{room_id}"), &json!({"default_duration_minutes": v}));
    let set = call(&app, &doc, length(json!(45))).await;
    assert_eq!((set.status, &set.body["default_duration_minutes"]), (StatusCode::OK, &json!(45)));
    let cleared = call(&app, &doc, length(Value::Null)).await;
    assert_eq!((cleared.status, &cleared.body["default_duration_minutes"]), (StatusCode::OK, &Value::Null));
    let no_to =
        call(&app, &doc, app.get("carol", &format!("/v1/resources/{room_id}/availability?from={}", day.0))).await;
    assert_eq!(no_to.status, StatusCode::BAD_REQUEST);

    // Bob waits for the slot.
    let join = call(
        &app,
        &doc,
        app.post("bob", &format!("/v1/resources/{room_id}/waitlist"), &json!({"start": ten.0, "end": ten.1}))
            .header("idempotency-key", "w-1"),
    )
    .await;
    assert_eq!(join.status, StatusCode::CREATED, "{}", join.body);
    assert_eq!(join.body["status"], "WAITING");
    assert_eq!(join.body["position"], 1);
    let entry_path = format!("/v1/waitlist/{}", join.id());

    // Alice confirms, twice.
    let confirm =
        || app.http.post(app.url(&format!("/v1/reservations/{hold_id}/confirm"))).header("x-principal", "alice");
    let confirmed = call(&app, &doc, confirm()).await;
    assert_eq!(confirmed.status, StatusCode::OK);
    assert_eq!(confirmed.body["status"], "CONFIRMED");
    let again = call(&app, &doc, confirm().json(&json!({}))).await;
    assert_eq!(again.status, StatusCode::OK);
    let read = call(&app, &doc, app.get("alice", &format!("/v1/reservations/{hold_id}"))).await;
    assert_eq!(read.body["status"], "CONFIRMED");
    let hidden = call(&app, &doc, app.get("bob", &format!("/v1/reservations/{hold_id}"))).await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    assert_eq!(slug(&hidden.body), "reservation-not-found");

    // Alice cancels: the slot goes to Bob's entry as an offer, which he accepts.
    let cancelled = call(&app, &doc, app.delete("alice", &format!("/v1/reservations/{hold_id}"))).await;
    assert_eq!(cancelled.body["status"], "CANCELLED");
    let offered = call(&app, &doc, app.get("bob", &entry_path)).await;
    assert_eq!(offered.body["status"], "OFFERED");
    let offer_id = offered.body["reservation_id"].as_str().unwrap().to_string();
    let offer = call(&app, &doc, app.get("bob", &format!("/v1/reservations/{offer_id}"))).await;
    assert_eq!(offer.body["source"], "waitlist_offer");
    let accepted = call(
        &app,
        &doc,
        app.http
            .post(app.url(&format!("/v1/reservations/{offer_id}/confirm")))
            .header("x-principal", "bob")
            .header("idempotency-key", "c-1"),
    )
    .await;
    assert_eq!(accepted.status, StatusCode::OK);
    let left = call(&app, &doc, app.delete("bob", &entry_path)).await;
    assert_eq!(left.status, StatusCode::OK);
    assert_eq!(left.body["status"], "ACCEPTED", "deleting an accepted entry answers it as it is");

    // A hold that was released cannot be confirmed.
    let noon = hours(12, 13);
    let second = call(&app, &doc, app.post("alice", "/v1/reservations", &reservation_body(&room_id, &noon))).await;
    let released = call(&app, &doc, app.delete("alice", &format!("/v1/reservations/{}", second.id()))).await;
    assert_eq!(released.body["status"], "RELEASED");
    let not_held = call(
        &app,
        &doc,
        app.http.post(app.url(&format!("/v1/reservations/{}/confirm", second.id()))).header("x-principal", "alice"),
    )
    .await;
    assert_eq!(not_held.status, StatusCode::CONFLICT);
    assert_eq!(slug(&not_held.body), "reservation-not-held");
}

#[tokio::test]
async fn refusals_before_any_operation_runs_match_the_document() {
    let app = TestApp::spawn().await;
    let doc = document();
    let room = app.resource(2).await.to_string();
    let range = hours(10, 11);

    let anonymous = call(&app, &doc, app.http.get(app.url(&format!("/v1/resources/{room}")))).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anonymous.body["instance"], format!("/v1/resources/{room}"), "a problem names its request");
    let forbidden = call(&app, &doc, app.post("alice", "/v1/resources", &json!({"name": "Mine"}))).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
    let unknown_field =
        call(&app, &doc, app.post("admin", "/v1/resources", &json!({"name": "X", "colour": "red"}))).await;
    assert_eq!(unknown_field.status, StatusCode::BAD_REQUEST);
    let no_body = call(&app, &doc, app.http.post(app.url("/v1/reservations")).header("x-principal", "alice")).await;
    assert_eq!(no_body.status, StatusCode::BAD_REQUEST, "an empty body is a 400, not a 415");
    let text = call(
        &app,
        &doc,
        app.http
            .post(app.url("/v1/reservations"))
            .header("x-principal", "alice")
            .header("content-type", "text/plain")
            .body(reservation_body(&room, &range).to_string()),
    )
    .await;
    assert_eq!(text.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let big = call(
        &app,
        &doc,
        app.post("alice", &format!("/v1/resources/{room}/waitlist"), &json!({"start": "x".repeat(70 * 1024)})),
    )
    .await;
    assert_eq!(big.status, StatusCode::PAYLOAD_TOO_LARGE);
    let bad_key = call(
        &app,
        &doc,
        app.post("alice", "/v1/reservations", &reservation_body(&room, &range)).header("idempotency-key", "a b"),
    )
    .await;
    assert_eq!(bad_key.status, StatusCode::BAD_REQUEST);
    for path in [
        "/v1/resources/not-a-uuid".to_string(),
        format!("/v1/resources/{}/availability?from={}&to={}", uuid::Uuid::new_v4(), range.0, range.1),
        "/v1/reservations/not-a-uuid".to_string(),
        format!("/v1/waitlist/{}", uuid::Uuid::new_v4()),
    ] {
        let missing = call(&app, &doc, app.get("alice", &path)).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND, "{path}");
    }
    let unknown_resource = call(
        &app,
        &doc,
        app.post("alice", "/v1/reservations", &reservation_body(&uuid::Uuid::new_v4().to_string(), &range)),
    )
    .await;
    assert_eq!(slug(&unknown_resource.body), "resource-not-found");
}

#[tokio::test]
async fn an_upstream_confirm_in_flight_matches_the_document() {
    let app = TestApp::spawn().await;
    let doc = document();
    let seat = upstream_seat(&app, &doc, "Seat 1", "seat-1").await;
    assert_eq!(seat.status, StatusCode::CREATED, "{}", seat.body);
    let range = hours(10, 11);
    let mut body = reservation_body(&seat.id(), &range);
    body["confirm"] = json!(true);
    let booked = call(&app, &doc, app.post("alice", "/v1/reservations", &body).header("idempotency-key", "u-1")).await;
    assert!(
        [StatusCode::ACCEPTED, StatusCode::SERVICE_UNAVAILABLE].contains(&booked.status),
        "{} {}",
        booked.status,
        booked.body
    );
    if booked.status == StatusCode::ACCEPTED {
        assert_eq!(booked.body["status"], "CONFIRMING");
        assert!(booked.body["intent"].is_object(), "{}", booked.body);
        let read = call(&app, &doc, app.get("alice", &format!("/v1/reservations/{}", booked.id()))).await;
        assert_eq!(read.status, StatusCode::OK);
    }
    let calendar = format!("/v1/resources/{}/availability?from={}&to={}", seat.id(), range.0, range.1);
    let availability = call(&app, &doc, app.get("alice", &calendar)).await;
    assert!([StatusCode::OK, StatusCode::SERVICE_UNAVAILABLE].contains(&availability.status));
}

#[tokio::test]
async fn a_wait_for_an_upstream_seat_matches_the_document() {
    let app = TestApp::spawn().await;
    let doc = document();
    let seat = upstream_seat(&app, &doc, "Seat 2", "seat-2").await;
    let (start, end) = hours(10, 11);
    let joined = call(
        &app,
        &doc,
        app.post(
            "alice",
            &format!("/v1/resources/{}/waitlist", seat.id()),
            &json!({"start": start, "end": end, "auto_book": true}),
        ),
    )
    .await;
    assert_eq!(
        (joined.status, joined.body["intent"]["state"].as_str()),
        (StatusCode::CREATED, Some("WAITING_FOR_SEAT"))
    );
    let read = call(&app, &doc, app.get("alice", &format!("/v1/waitlist/{}", joined.id()))).await;
    assert_eq!(read.body["auto_book"], true);
    let left = call(&app, &doc, app.delete("alice", &format!("/v1/waitlist/{}", joined.id()))).await;
    assert_eq!(
        (left.body["status"].as_str(), left.body["intent"]["state"].as_str()),
        (Some("CANCELLED"), Some("CANCELLED"))
    );
}

#[tokio::test]
async fn list_answers_match_the_document() {
    let app = TestApp::spawn().await;
    let doc = document();
    let room = call(&app, &doc, app.post("admin", "/v1/resources", &json!({"name": "Room 1", "capacity": 1}))).await;
    let room_id = room.id();
    let (ten, eleven) = (hours(10, 11), hours(11, 12));
    call(&app, &doc, app.post("alice", "/v1/reservations", &reservation_body(&room_id, &ten))).await;
    call(&app, &doc, app.post("alice", "/v1/reservations", &reservation_body(&room_id, &eleven))).await;
    call(
        &app,
        &doc,
        app.post("bob", &format!("/v1/resources/{room_id}/waitlist"), &json!({"start": ten.0, "end": ten.1})),
    )
    .await;

    let first = call(&app, &doc, app.get("alice", "/v1/reservations?limit=1&status=HELD")).await;
    assert_eq!(first.status, StatusCode::OK);
    let cursor = first.body["next_cursor"].as_str().expect("a second page").to_string();
    let last =
        call(&app, &doc, app.get("alice", &format!("/v1/reservations?limit=1&status=HELD&cursor={cursor}"))).await;
    assert_eq!((last.status, &last.body["next_cursor"]), (StatusCode::OK, &Value::Null));
    let everyone = call(&app, &doc, app.get("admin", &format!("/v1/reservations?resource_id={room_id}"))).await;
    assert_eq!(everyone.body["items"].as_array().unwrap().len(), 2);
    let resources = call(&app, &doc, app.get("bob", "/v1/resources?include_archived=true")).await;
    assert_eq!(resources.status, StatusCode::OK);
    let queue = call(&app, &doc, app.get("admin", &format!("/v1/resources/{room_id}/waitlist"))).await;
    assert_eq!(queue.body["items"][0]["position"], 1);

    for (who, path, status, expected) in [
        ("alice", format!("/v1/reservations?cursor={cursor}"), StatusCode::BAD_REQUEST, "invalid-cursor"),
        ("alice", "/v1/reservations?limit=0".to_string(), StatusCode::BAD_REQUEST, "validation-error"),
        ("alice", "/v1/resources?cursor=x".to_string(), StatusCode::BAD_REQUEST, "invalid-cursor"),
        ("alice", "/v1/reservations?owner=bob".to_string(), StatusCode::FORBIDDEN, "forbidden"),
        ("alice", format!("/v1/resources/{room_id}/waitlist"), StatusCode::FORBIDDEN, "forbidden"),
        (
            "admin",
            format!("/v1/resources/{}/waitlist", uuid::Uuid::new_v4()),
            StatusCode::NOT_FOUND,
            "resource-not-found",
        ),
        ("admin", format!("/v1/resources/{room_id}/waitlist?cursor=x"), StatusCode::BAD_REQUEST, "invalid-cursor"),
    ] {
        let refused = call(&app, &doc, app.get(who, &path)).await;
        assert_eq!((refused.status, slug(&refused.body)), (status, expected), "{who} {path}");
    }
    let anonymous = call(&app, &doc, app.http.get(app.url("/v1/reservations"))).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn webhook_answers_match_the_document_the_delivery_log_included() {
    let app = TestApp::spawn().await;
    let doc = document();
    let body =
        json!({"url": "https://hooks.example.com/r", "event_types": ["reservation.held", "webhook.endpoint_disabled"]});
    let created = call(&app, &doc, app.post("admin", "/v1/webhooks", &body)).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let id = created.id();
    let rotated = call(&app, &doc, app.post("admin", &format!("/v1/webhooks/{id}/rotate-secret"), &json!({}))).await;
    assert_eq!(rotated.status, StatusCode::OK);
    // One logged attempt, as the notifier writes it.
    let (event, attempt) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let client = app.db().await;
    client
        .execute(
            "INSERT INTO webhook_events (id, type, body, received_at) VALUES ($1, 'reservation.held', '{}', now())",
            &[&event],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO webhook_delivery_attempts (id, endpoint_id, event_id, attempt, trigger, attempted_at, \
             status_code, error, duration_ms, next_attempt_at) \
             VALUES ($1, $2::text::uuid, $3, 1, 'queue', now(), 503, 'status 503', 12, now() + interval '5 seconds')",
            &[&attempt, &id, &event],
        )
        .await
        .unwrap();

    let log = call(&app, &doc, app.get("admin", &format!("/v1/webhooks/{id}/deliveries?limit=10"))).await;
    assert_eq!((log.status, log.body["items"][0]["id"].as_str()), (StatusCode::OK, Some(&*attempt.to_string())));
    let retry = format!("/v1/webhooks/{id}/deliveries/{attempt}/retry");
    let queued = call(&app, &doc, app.post("admin", &retry, &json!({}))).await;
    assert_eq!(queued.status, StatusCode::ACCEPTED);
    let recovered =
        call(&app, &doc, app.post("admin", &format!("/v1/webhooks/{id}/recover"), &json!({"since": hours(0, 1).0})))
            .await;
    assert_eq!(recovered.status, StatusCode::BAD_REQUEST, "a time in the future");
    let recovered = call(
        &app,
        &doc,
        app.post("admin", &format!("/v1/webhooks/{id}/recover"), &json!({"since": "2020-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!((recovered.status, recovered.body["resends_queued"].as_i64()), (StatusCode::OK, Some(0)));
    client
        .execute(
            "UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'gone' WHERE id = $1::text::uuid",
            &[&id],
        )
        .await
        .unwrap();
    let read = call(&app, &doc, app.get("admin", &format!("/v1/webhooks/{id}"))).await;
    assert_eq!(read.body["disabled_reason"], "gone");
    let refused = call(&app, &doc, app.post("admin", &retry, &json!({}))).await;
    assert_eq!((refused.status, slug(&refused.body)), (StatusCode::CONFLICT, "webhook-disabled"));
    for (who, path, status, expected) in [
        ("alice", format!("/v1/webhooks/{id}/deliveries"), StatusCode::FORBIDDEN, "forbidden"),
        (
            "admin",
            format!("/v1/webhooks/{}/deliveries", uuid::Uuid::now_v7()),
            StatusCode::NOT_FOUND,
            "webhook-not-found",
        ),
        ("admin", format!("/v1/webhooks/{id}/deliveries?cursor=x"), StatusCode::BAD_REQUEST, "invalid-cursor"),
    ] {
        let answer = call(&app, &doc, app.get(who, &path)).await;
        assert_eq!((answer.status, slug(&answer.body)), (status, expected), "{who} {path}");
    }
    let unknown = format!("/v1/webhooks/{id}/deliveries/{}/retry", uuid::Uuid::now_v7());
    let answer = call(&app, &doc, app.post("admin", &unknown, &json!({}))).await;
    assert_eq!((answer.status, slug(&answer.body)), (StatusCode::NOT_FOUND, "webhook-delivery-not-found"));
}

#[tokio::test]
async fn series_answers_match_the_document() {
    let doc = document();
    let app = TestApp::spawn().await;
    let room =
        call(&app, &doc, app.post("admin", "/v1/resources", &json!({"name": "Weekly", "time_zone": "Europe/Berlin"})))
            .await
            .id();
    let (start, end) = acceptance::hours(10, 11);
    let body = |mode: &str| json!({"resource_id": room, "start": start, "end": end, "recurrence": "FREQ=WEEKLY;COUNT=3", "mode": mode});
    let made = call(&app, &doc, app.post("alice", "/v1/series", &body("all_or_nothing"))).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let refused = call(&app, &doc, app.post("bob", "/v1/series", &body("all_or_nothing"))).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    let skipped = call(&app, &doc, app.post("bob", "/v1/series", &body("skip_conflicts"))).await;
    assert_eq!(skipped.status, StatusCode::CONFLICT, "nothing fits: {}", skipped.body);
    let bad = json!({"resource_id": room, "start": start, "end": end, "recurrence": "FREQ=MONTHLY;BYSETPOS=1"});
    assert_eq!(call(&app, &doc, app.post("alice", "/v1/series", &bad)).await.status, StatusCode::BAD_REQUEST);
    let id = made.id();
    assert_eq!(call(&app, &doc, app.get("alice", &format!("/v1/series/{id}"))).await.status, StatusCode::OK);
    assert_eq!(call(&app, &doc, app.get("bob", &format!("/v1/series/{id}"))).await.status, StatusCode::NOT_FOUND);
    let first = made.body["occurrences"][0]["reservation_id"].as_str().unwrap().to_string();
    let second = made.body["occurrences"][1]["reservation_id"].as_str().unwrap().to_string();
    let one = call(&app, &doc, app.get("alice", &format!("/v1/reservations/{first}"))).await;
    assert_eq!(one.body["series_id"], json!(id));
    let confirmed =
        call(&app, &doc, app.post("alice", &format!("/v1/reservations/{second}/confirm?scope=following"), &json!({})))
            .await;
    assert_eq!(confirmed.status, StatusCode::OK, "{}", confirmed.body);
    let moved = json!({"metadata": {"note": "weekly"}});
    let patched = call(&app, &doc, app.patch("alice", &format!("/v1/reservations/{first}?scope=all"), &moved)).await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let released = call(&app, &doc, app.delete("alice", &format!("/v1/reservations/{first}?scope=one"))).await;
    assert_eq!(released.body["status"], "RELEASED");
    let cancelled = call(&app, &doc, app.delete("alice", &format!("/v1/reservations/{first}?scope=all"))).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
}

#[tokio::test]
async fn answers_of_the_calendar_feeds_match_the_document() {
    let app = TestApp::spawn().await;
    let doc = document();
    let made = call(&app, &doc, app.post("alice", "/v1/feeds", &json!({}))).await;
    assert_eq!(made.status, StatusCode::CREATED);
    assert_eq!(made.header("location"), made.body["url"].as_str());
    let forbidden =
        call(&app, &doc, app.post("alice", "/v1/feeds", &json!({"resource_id": uuid::Uuid::now_v7()}))).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
    let rotated = call(&app, &doc, app.post("alice", &format!("/v1/feeds/{}/rotate", made.id()), &json!({}))).await;
    assert_eq!(rotated.status, StatusCode::OK);
    let gone = call(&app, &doc, app.http.get(app.url(made.body["url"].as_str().unwrap()))).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let unknown = call(&app, &doc, app.delete("alice", &format!("/v1/feeds/{}", uuid::Uuid::now_v7()))).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);

    // The feed itself is iCalendar, not JSON: its status, type and headers.
    let op = &doc["paths"]["/v1/feeds/{id}"]["get"]["responses"];
    let resp = app.http.get(app.url(rotated.body["url"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let media = resp.headers()["content-type"].to_str().unwrap().split(';').next().unwrap().to_string();
    assert!(op["200"]["content"].get(&media).is_some(), "{media}");
    let tag = resp.headers()["etag"].to_str().unwrap().to_string();
    assert_valid(&doc, &op["200"]["headers"]["ETag"]["schema"], &json!(tag), "ETag");
    let body = json!(resp.text().await.unwrap());
    assert_valid(&doc, &op["200"]["content"][&media]["schema"], &body, "the feed");
    let unchanged = app.http.get(app.url(rotated.body["url"].as_str().unwrap())).header("if-none-match", &tag);
    assert_eq!(unchanged.send().await.unwrap().status().as_str(), "304");
    assert!(op.get("304").is_some());
}
