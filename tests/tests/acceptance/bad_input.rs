//! Whatever a client sends, the answer is a 4xx problem document, never a 5xx.

use acceptance::{TestApp, hours, send, slug};
use chrono::{Duration, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};

struct Case {
    name: &'static str,
    method: &'static str,
    path: String,
    principal: Option<&'static str>,
    content_type: Option<&'static str>,
    body: String,
    status: u16,
    slug: &'static str,
}

fn case(name: &'static str, method: &'static str, path: &str, body: &str, status: u16, slug: &'static str) -> Case {
    Case {
        name,
        method,
        path: path.to_string(),
        principal: Some("alice"),
        content_type: Some("application/json"),
        body: body.to_string(),
        status,
        slug,
    }
}

fn rfc(t: chrono::DateTime<Utc>) -> String {
    acceptance::rfc3339(t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_input_gets_a_4xx_problem_and_never_a_5xx() {
    let app = TestApp::spawn().await;
    let room = app.resource(2).await;
    let (s, e) = hours(10, 11);
    let ok = |extra: &str| format!(r#"{{"resource_id":"{room}","start":"{s}","end":"{e}"{extra}}}"#);
    let now = Utc::now();
    let far = now + Duration::days(800);
    let long_end = acceptance::day() + Duration::days(32);
    let r = "/v1/reservations";
    let cases = vec![
        case("malformed JSON", "POST", r, "{\"resource_id\": ", 400, "validation-error"),
        case("not an object", "POST", r, "[1,2,3]", 400, "validation-error"),
        case("a bare string", "POST", r, "\"hello\"", 400, "validation-error"),
        case("empty body", "POST", r, "", 400, "validation-error"),
        case("unknown field", "POST", r, &ok(r#","colour":"red""#), 400, "validation-error"),
        case(
            "missing start",
            "POST",
            r,
            &format!(r#"{{"resource_id":"{room}","end":"{e}"}}"#),
            400,
            "validation-error",
        ),
        case(
            "resource id not a uuid",
            "POST",
            r,
            &format!(r#"{{"resource_id":"room-1","start":"{s}","end":"{e}"}}"#),
            400,
            "validation-error",
        ),
        case(
            "resource id a number",
            "POST",
            r,
            &format!(r#"{{"resource_id":7,"start":"{s}","end":"{e}"}}"#),
            400,
            "validation-error",
        ),
        case("quantity a string", "POST", r, &ok(r#","quantity":"2""#), 400, "validation-error"),
        case("quantity huge", "POST", r, &ok(r#","quantity":99999999999999999999999"#), 400, "validation-error"),
        case("quantity beyond float range", "POST", r, &ok(r#","quantity":1e999"#), 400, "validation-error"),
        case("quantity fractional", "POST", r, &ok(r#","quantity":1.5"#), 400, "validation-error"),
        case("quantity zero", "POST", r, &ok(r#","quantity":0"#), 400, "validation-error"),
        case("quantity negative", "POST", r, &ok(r#","quantity":-3"#), 400, "validation-error"),
        case("quantity over capacity", "POST", r, &ok(r#","quantity":3"#), 400, "validation-error"),
        case("confirm not a bool", "POST", r, &ok(r#","confirm":"yes""#), 400, "validation-error"),
        case(
            "naive timestamp",
            "POST",
            r,
            &format!(r#"{{"resource_id":"{room}","start":"2027-03-15T10:00:00","end":"{e}"}}"#),
            400,
            "validation-error",
        ),
        case(
            "date only",
            "POST",
            r,
            &format!(r#"{{"resource_id":"{room}","start":"2027-03-15","end":"{e}"}}"#),
            400,
            "validation-error",
        ),
        case(
            "timestamp nonsense",
            "POST",
            r,
            &format!(r#"{{"resource_id":"{room}","start":"soon","end":"{e}"}}"#),
            400,
            "validation-error",
        ),
        case(
            "year 99999",
            "POST",
            r,
            &format!(r#"{{"resource_id":"{room}","start":"99999-01-01T00:00:00Z","end":"{e}"}}"#),
            400,
            "validation-error",
        ),
        case(
            "end before start",
            "POST",
            r,
            &format!(r#"{{"resource_id":"{room}","start":"{e}","end":"{s}"}}"#),
            400,
            "validation-error",
        ),
        case(
            "empty range",
            "POST",
            r,
            &format!(r#"{{"resource_id":"{room}","start":"{s}","end":"{s}"}}"#),
            400,
            "validation-error",
        ),
        case(
            "too long",
            "POST",
            r,
            &format!(r#"{{"resource_id":"{room}","start":"{s}","end":"{}"}}"#, rfc(long_end)),
            400,
            "validation-error",
        ),
        case(
            "start in the past",
            "POST",
            r,
            &format!(
                r#"{{"resource_id":"{room}","start":"{}","end":"{}"}}"#,
                rfc(now - Duration::hours(2)),
                rfc(now - Duration::hours(1))
            ),
            400,
            "validation-error",
        ),
        case(
            "beyond the horizon",
            "POST",
            r,
            &format!(r#"{{"resource_id":"{room}","start":"{}","end":"{}"}}"#, rfc(far), rfc(far + Duration::hours(1))),
            400,
            "validation-error",
        ),
        case(
            "unknown resource",
            "POST",
            r,
            &format!(r#"{{"resource_id":"{}","start":"{s}","end":"{e}"}}"#, uuid::Uuid::new_v4()),
            404,
            "resource-not-found",
        ),
        case(
            "oversized body",
            "POST",
            r,
            &ok(&format!(r#","pad":"{}""#, "x".repeat(70_000))),
            413,
            "payload-too-large",
        ),
        Case {
            content_type: Some("text/plain"),
            ..case("text/plain body", "POST", r, &ok(""), 415, "unsupported-media-type")
        },
        Case { content_type: None, ..case("no content type", "POST", r, &ok(""), 415, "unsupported-media-type") },
        Case { principal: None, ..case("no principal", "POST", r, &ok(""), 401, "unauthenticated") },
        Case {
            principal: Some("bad principal!"),
            ..case("invalid principal", "POST", r, &ok(""), 401, "unauthenticated")
        },
        case("reservation id not a uuid", "GET", "/v1/reservations/12345", "", 404, "reservation-not-found"),
        case("reservation id sql", "GET", "/v1/reservations/1%27%20OR%201=1", "", 404, "reservation-not-found"),
        case(
            "unknown reservation",
            "GET",
            &format!("/v1/reservations/{}", uuid::Uuid::new_v4()),
            "",
            404,
            "reservation-not-found",
        ),
        case("confirm a non-uuid", "POST", "/v1/reservations/abc/confirm", "", 404, "reservation-not-found"),
        case(
            "confirm with a body",
            "POST",
            &format!("/v1/reservations/{}/confirm", uuid::Uuid::new_v4()),
            r#"{"x":1}"#,
            400,
            "validation-error",
        ),
        case("delete a non-uuid", "DELETE", "/v1/reservations/abc", "", 404, "reservation-not-found"),
        case("resource id not a uuid in path", "GET", "/v1/resources/abc", "", 404, "resource-not-found"),
        case(
            "availability of a non-uuid",
            "GET",
            "/v1/resources/abc/availability?from=x&to=y",
            "",
            404,
            "resource-not-found",
        ),
        case(
            "availability without a window",
            "GET",
            &format!("/v1/resources/{room}/availability"),
            "",
            400,
            "validation-error",
        ),
        case(
            "availability with naive times",
            "GET",
            &format!("/v1/resources/{room}/availability?from=2027-01-01T00:00:00&to=2027-01-02T00:00:00"),
            "",
            400,
            "validation-error",
        ),
        case(
            "availability backwards",
            "GET",
            &format!("/v1/resources/{room}/availability?from={e}&to={s}"),
            "",
            400,
            "validation-error",
        ),
        case(
            "availability over 62 days",
            "GET",
            &format!("/v1/resources/{room}/availability?from=2027-01-01T00:00:00Z&to=2027-03-05T00:00:00Z"),
            "",
            400,
            "validation-error",
        ),
        case("unknown route", "GET", "/v1/nothing-here", "", 404, "not-found"),
        case("wrong method", "PATCH", "/v1/reservations", "{}", 405, "method-not-allowed"),
        Case {
            principal: Some("admin"),
            ..case("resource without a name", "POST", "/v1/resources", r#"{"capacity":1}"#, 400, "validation-error")
        },
        Case {
            principal: Some("admin"),
            ..case(
                "resource name too long",
                "POST",
                "/v1/resources",
                &format!(r#"{{"name":"{}"}}"#, "n".repeat(201)),
                400,
                "validation-error",
            )
        },
        Case {
            principal: Some("admin"),
            ..case("NUL in a name", "POST", "/v1/resources", r#"{"name":"a\u0000b"}"#, 400, "validation-error")
        },
        Case {
            principal: Some("admin"),
            ..case("capacity zero", "POST", "/v1/resources", r#"{"name":"x","capacity":0}"#, 400, "validation-error")
        },
        Case {
            principal: Some("admin"),
            ..case(
                "capacity huge",
                "POST",
                "/v1/resources",
                r#"{"name":"x","capacity":100001}"#,
                400,
                "validation-error",
            )
        },
        Case {
            principal: Some("admin"),
            ..case(
                "capacity beyond i32",
                "POST",
                "/v1/resources",
                r#"{"name":"x","capacity":4294967296}"#,
                400,
                "validation-error",
            )
        },
        Case {
            principal: Some("admin"),
            ..case(
                "unknown authority",
                "POST",
                "/v1/resources",
                r#"{"name":"x","authority":"oracle"}"#,
                400,
                "validation-error",
            )
        },
        Case {
            principal: Some("admin"),
            ..case(
                "upstream without a ref",
                "POST",
                "/v1/resources",
                r#"{"name":"x","authority":"upstream"}"#,
                400,
                "validation-error",
            )
        },
        Case {
            principal: Some("admin"),
            ..case(
                "upstream with capacity 2",
                "POST",
                "/v1/resources",
                r#"{"name":"x","authority":"upstream","upstream_ref":"s","capacity":2}"#,
                400,
                "validation-error",
            )
        },
        Case {
            principal: Some("admin"),
            ..case("ttl zero", "POST", "/v1/resources", r#"{"name":"x","hold_ttl_seconds":0}"#, 400, "validation-error")
        },
        Case {
            principal: Some("admin"),
            ..case("id in the body", "POST", "/v1/resources", r#"{"name":"x","id":"nope"}"#, 400, "validation-error")
        },
        case("resource by a non-admin", "POST", "/v1/resources", r#"{"name":"x"}"#, 403, "forbidden"),
    ];

    let mut failures = Vec::new();
    for c in &cases {
        let mut req = app.http.request(c.method.parse().unwrap(), app.url(&c.path));
        if let Some(p) = c.principal {
            req = req.header("x-principal", p);
        }
        if let Some(ct) = c.content_type.filter(|_| !c.body.is_empty()) {
            req = req.header("content-type", ct);
        }
        let resp = req.body(c.body.clone()).send().await.unwrap();
        let status = resp.status();
        let content_type = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_string());
        let problem: Value = resp.json().await.unwrap_or(Value::Null);
        let good = status.as_u16() == c.status
            && slug(&problem) == c.slug
            && content_type.as_deref() == Some("application/problem+json")
            && problem["status"] == json!(c.status)
            && problem["title"].is_string();
        if !good {
            failures.push(format!("{}: got {status} {problem}", c.name));
        }
        if status.as_u16() == 400 && problem["errors"].as_array().is_none_or(|e| e.is_empty()) {
            failures.push(format!("{}: a validation error must list its fields: {problem}", c.name));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
    let (status, _) = send(app.get("alice", "/v1/health")).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn validation_errors_name_the_field() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let (s, e) = hours(10, 11);
    let (_, p) = send(app.post("alice", "/v1/reservations", &json!({"resource_id": room, "start": e, "end": s}))).await;
    assert_eq!(p["errors"][0]["field"], "end");
    let (_, p) = send(app.post(
        "alice",
        "/v1/reservations",
        &json!({"resource_id": room, "start": "2027-01-01T00:00:00", "end": e}),
    ))
    .await;
    assert_eq!(p["errors"][0]["field"], "start");
    let (_, p) =
        send(app.post("alice", "/v1/reservations", &json!({"resource_id": room, "start": s, "end": e, "quantity": 2})))
            .await;
    assert_eq!(p["errors"][0]["field"], "quantity");
}

/// What the HTTP layer refuses before any handler runs: a body it cannot read, and a
/// request line or headers hyper cannot parse (hyper answers those itself; the dev
/// server turns its bare answers into problem documents, see dev-server/src/problem_io.rs).
#[tokio::test]
async fn what_the_http_layer_refuses_is_a_problem_document_too() {
    let app = TestApp::spawn().await;
    let post = |extra_headers: &str, body: &[u8]| {
        let mut request = format!(
            "POST /v1/reservations HTTP/1.1\r\nHost: localhost\r\nx-principal: alice\r\n\
             content-type: application/json\r\nconnection: close\r\n{extra_headers}\r\n"
        )
        .into_bytes();
        request.extend_from_slice(body);
        request
    };
    // Exactly one byte over the dev server's 1 MiB read limit, so that the server has
    // read everything when it answers (unread bytes would make its close a reset).
    let over_limit = vec![b' '; 1024 * 1024 + 1];
    let many_headers: String = (0..120).map(|i| format!("x-filler-{i}: {i}\r\n")).collect();
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "malformed chunked body",
            post("transfer-encoding: chunked\r\n", b"zz\r\n{}\r\n0\r\n\r\n"),
            400,
            "bad-request",
        ),
        (
            "body over the read limit",
            post(&format!("content-length: {}\r\n", over_limit.len()), &over_limit),
            413,
            "payload-too-large",
        ),
        ("malformed request line", b"GET /v1/health HTTX/1.1\r\nHost: localhost\r\n\r\n".to_vec(), 400, "bad-request"),
        (
            "malformed header",
            b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nBad Header: y\r\n\r\n".to_vec(),
            400,
            "bad-request",
        ),
        (
            "too many headers",
            format!("GET /v1/health HTTP/1.1\r\nHost: localhost\r\n{many_headers}\r\n").into_bytes(),
            431,
            "request-header-fields-too-large",
        ),
        (
            "URI too long",
            format!("GET /v1/{} HTTP/1.1\r\nHost: localhost\r\n\r\n", "a".repeat(70_000)).into_bytes(),
            414,
            "uri-too-long",
        ),
    ];
    let mut failures = Vec::new();
    for (name, request, status, expected_slug) in &cases {
        let answer = acceptance::raw_exchange(app.addr(), request, std::time::Duration::from_secs(10)).await;
        let problem = answer.json();
        let good = answer.status == *status
            && answer.header("content-type") == Some("application/problem+json")
            && slug(&problem) == *expected_slug
            && problem["status"] == json!(status)
            && problem["title"].is_string()
            && problem["detail"].is_string();
        if !good {
            failures.push(format!("{name}: got {} {:?} {problem}", answer.status, answer.header("content-type")));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
    let (status, _) = send(app.get("alice", "/v1/health")).await;
    assert_eq!(status, StatusCode::OK);
}

/// The words of serde and of the uuid crate, which are not this API's.
const FOREIGN_WORDS: [&str; 4] = ["expected", "invalid type", "UUID parsing failed", "unknown field"];

#[tokio::test]
async fn every_bad_field_of_a_body_is_reported_at_once_in_plain_words() {
    let app = TestApp::spawn().await;
    let (_, e) = hours(10, 11);
    let body = json!({"resource_id": "room-1", "start": 20270315, "end": e, "quantity": "two"});
    let (status, p) = send(app.post("alice", "/v1/reservations", &body)).await;
    assert_eq!((status, slug(&p)), (StatusCode::BAD_REQUEST, "validation-error"));
    let errors = p["errors"].as_array().unwrap();
    let fields: Vec<&str> = errors.iter().map(|e| e["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["resource_id", "start", "quantity"], "{p}");
    for e in errors {
        let message = e["message"].as_str().unwrap();
        assert!(message.starts_with("must "), "{message}");
        assert!(!FOREIGN_WORDS.iter().any(|w| message.contains(w)), "{message}");
    }

    let (_, p) =
        send(app.post("admin", "/v1/resources", &json!({"capacity": 0, "colour": "red", "authority": 1}))).await;
    let fields: Vec<&str> = p["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["name", "capacity", "authority", "colour"], "{p}");
    assert!(!FOREIGN_WORDS.iter().any(|w| p.to_string().contains(w)), "{p}");
}

#[tokio::test]
async fn a_body_that_gives_a_key_twice_is_refused_naming_the_key() {
    let app = TestApp::spawn().await;
    let room = app.resource(2).await;
    let (s, e) = hours(10, 11);
    let body = format!(r#"{{"resource_id":"{room}","start":"{s}","end":"{e}","quantity":1,"quantity":2}}"#);
    let resp = app
        .http
        .post(app.url("/v1/reservations"))
        .header("x-principal", "alice")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let p: Value = resp.json().await.unwrap();
    assert_eq!(slug(&p), "validation-error");
    assert_eq!(p["errors"], json!([{"field": "quantity", "message": "is given more than once"}]));
    let held = app.count("SELECT count(*) FROM reservations", &[]).await;
    assert_eq!(held, 0);
}
