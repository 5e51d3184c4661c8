//! The conventions a client of any HTTP API expects: problem `type`s that lead to a
//! page, problems that name their request, a 401 that says how to authenticate, `HEAD`
//! wherever `GET` is, and CORS for the configured browser origins.

use acceptance::{Options, TestApp, hours, json_of, lambda_request, raw_exchange, send, slug};
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::http::ROUTES;
use std::time::Duration;

/// Fetches what a problem's `type` names, resolved as a client resolves it: against the
/// URL of the request that got the problem.
async fn follow_type(app: &TestApp, request_path: &str, problem: &Value) -> (StatusCode, String, String) {
    let base = reqwest::Url::parse(&app.url(request_path)).unwrap();
    let page = base.join(problem["type"].as_str().expect("a type")).unwrap();
    assert_eq!(page.origin(), base.origin(), "the type resolves on the API's own origin");
    let resp = app.http.get(page).send().await.unwrap();
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    (resp.status(), content_type, resp.text().await.unwrap())
}

#[tokio::test]
async fn a_problem_type_leads_to_the_page_that_describes_it_and_names_its_request() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let missing = format!("/v1/resources/{}", uuid::Uuid::new_v4());
    let (s, e) = hours(10, 11);
    let cases = [
        ("/v1/reservations", send(app.post("alice", "/v1/reservations", &json!({"resource_id": room}))).await),
        (missing.as_str(), send(app.get("alice", &missing)).await),
        ("/v1/reservations", send(app.http.post(app.url("/v1/reservations")).json(&json!({}))).await),
        ("/v1/reservations", {
            app.hold("bob", room, 10, 11).await;
            send(app.post("alice", "/v1/reservations", &json!({"resource_id": room, "start": s, "end": e}))).await
        }),
    ];
    let mut seen = Vec::new();
    for (path, (status, problem)) in &cases {
        assert!(status.is_client_error(), "{path}: {status} {problem}");
        assert_eq!(problem["instance"], *path, "the problem names its request: {problem}");
        let (page_status, content_type, page) = follow_type(&app, path, problem).await;
        assert_eq!(page_status, StatusCode::OK, "{}", problem["type"]);
        assert!(content_type.starts_with("text/html"), "{content_type}");
        assert!(page.contains(slug(problem)) && page.contains(problem["title"].as_str().unwrap()), "{page}");
        assert!(page.contains(&format!("status {}", status.as_u16())), "{page}");
        seen.push(slug(problem).to_string());
    }
    assert_eq!(seen, ["validation-error", "resource-not-found", "unauthenticated", "slot-unavailable"]);

    let (status, problem) = send(app.http.get(app.url("/v1/problems/no-such-problem"))).await;
    assert_eq!((status, slug(&problem)), (StatusCode::NOT_FOUND, "problem-type-not-found"));
    assert_eq!(problem["instance"], "/v1/problems/no-such-problem");
}

#[tokio::test]
async fn a_401_challenges_for_a_bearer_token_and_says_what_header_mode_reads() {
    let app = TestApp::spawn().await;
    let resp = app.http.get(app.url(&format!("/v1/reservations/{}", uuid::Uuid::new_v4()))).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let challenge = resp.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.starts_with(r#"Bearer realm="reservations", error="invalid_request""#), "{challenge}");
    assert!(challenge.contains("X-Principal"), "{challenge}");
    // Only a 401 challenges.
    let (status, _) = send(app.post("alice", "/v1/resources", &json!({"name": "x"}))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let resp = app.post("alice", "/v1/resources", &json!({"name": "x"})).send().await.unwrap();
    assert!(resp.headers().get("www-authenticate").is_none());
}

/// Every GET route of the contract, with ids that exist, and the dev server's own: the
/// document and the booking page at `/`.
async fn get_paths(app: &TestApp) -> Vec<String> {
    let room = app.resource(1).await;
    let hold = app.hold("alice", room, 10, 11).await;
    let (s, e) = hours(10, 11);
    let (_, entry) = app.join_waitlist_with("alice", room, &json!({"start": s, "end": e})).await;
    let mut paths: Vec<String> = ROUTES
        .iter()
        .filter(|spec| spec.method == "GET")
        .map(|spec| {
            let id = match spec.path {
                "/v1/problems/{id}" => "slot-unavailable".to_string(),
                p if p.starts_with("/v1/resources/") => room.to_string(),
                p if p.starts_with("/v1/reservations/") => hold["id"].as_str().unwrap().to_string(),
                p if p.starts_with("/v1/waitlist/") => entry["id"].as_str().unwrap().to_string(),
                _ => String::new(),
            };
            let path = spec.path.replace("{id}", &id);
            if path.ends_with("/availability") { format!("{path}?from={s}&to={e}") } else { path }
        })
        .collect();
    paths.push("/v1/openapi.json".into());
    paths.push("/".into());
    paths
}

#[tokio::test]
async fn head_answers_every_get_route_with_its_status_and_headers_and_no_body() {
    let app = TestApp::spawn().await;
    for path in get_paths(&app).await {
        for who in ["alice", "mallory"] {
            let get = app.get(who, &path).send().await.unwrap();
            let (status, headers) = (get.status().as_u16(), get.headers().clone());
            let length = get.bytes().await.unwrap().len();
            let request = format!("HEAD {path} HTTP/1.1\r\nHost: x\r\nx-principal: {who}\r\nconnection: close\r\n\r\n");
            let head = raw_exchange(app.addr(), request.as_bytes(), Duration::from_secs(10)).await;
            assert_eq!(head.status, status, "HEAD {path} as {who}");
            assert!(head.body.is_empty(), "HEAD {path}: no body");
            assert_eq!(head.header("content-length"), Some(length.to_string().as_str()), "HEAD {path}");
            for name in ["content-type", "location", "allow"] {
                assert_eq!(
                    head.header(name),
                    headers.get(name).map(|v| v.to_str().unwrap()),
                    "HEAD {path} as {who}: {name}"
                );
            }
        }
    }
    // Where GET is not allowed, neither is HEAD; the Allow header names both where it is.
    let confirm = format!("/v1/reservations/{}/confirm", uuid::Uuid::new_v4());
    let resp = app.http.head(app.url(&confirm)).header("x-principal", "alice").send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    let resp = app.http.put(app.url("/v1/waitlist/x")).header("x-principal", "alice").send().await.unwrap();
    assert_eq!(resp.headers()["allow"], "GET, HEAD, DELETE");
}

#[tokio::test]
async fn a_lambda_handler_answers_head_as_get_without_the_body() {
    let app = TestApp::spawn().await;
    let room = app.resource(2).await;
    let path = format!("/v1/resources/{room}");
    let get = admin::handler(&app.state, lambda_request("GET", &path, Some("alice"), None)).await.unwrap();
    let head = admin::handler(&app.state, lambda_request("HEAD", &path, Some("alice"), None)).await.unwrap();
    assert_eq!((head.status(), get.status()), (StatusCode::OK, StatusCode::OK));
    assert_eq!(head.headers()["content-type"], get.headers()["content-type"]);
    assert_eq!(head.headers()["content-length"], get.body().as_ref().len().to_string().as_str());
    assert!(head.body().as_ref().is_empty());
    assert_eq!(json_of(get.body())["id"], room.to_string());
    let page = availability::handler(&app.state, lambda_request("HEAD", "/v1/problems/forbidden", None, None)).await;
    assert_eq!(page.unwrap().status(), StatusCode::OK);
}

const APP: &str = "https://app.example.com";

async fn cors_app() -> TestApp {
    TestApp::spawn_with(Options {
        tweak: Box::new(|c| c.cors_allowed_origins = vec![APP.to_string()]),
        ..Default::default()
    })
    .await
}

fn cors_headers(headers: &reqwest::header::HeaderMap) -> Vec<String> {
    headers.keys().map(|k| k.as_str().to_string()).filter(|k| k.starts_with("access-control-")).collect()
}

#[tokio::test]
async fn a_preflight_from_an_allowed_origin_gets_the_methods_of_its_path_and_the_headers_the_api_reads() {
    let app = cors_app().await;
    let preflight = |path: &str, origin: &str| {
        app.http
            .request(reqwest::Method::OPTIONS, app.url(path))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type, idempotency-key, x-principal")
            .send()
    };
    let resp = preflight("/v1/reservations", APP).await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let h = resp.headers();
    assert_eq!(h["access-control-allow-origin"], APP);
    assert_eq!(h["access-control-allow-methods"], "POST, GET, HEAD");
    assert_eq!(h["access-control-allow-headers"], "Authorization, Content-Type, Idempotency-Key, X-Principal");
    assert_eq!(h["access-control-max-age"], "600");
    assert_eq!(h["vary"], "Origin");
    let resp = preflight(&format!("/v1/reservations/{}", uuid::Uuid::new_v4()), APP).await.unwrap();
    assert_eq!(resp.headers()["access-control-allow-methods"], "GET, HEAD, PATCH, DELETE");

    let resp = preflight("/v1/reservations", "https://evil.example.net").await.unwrap();
    assert!(cors_headers(resp.headers()).is_empty(), "{:?}", resp.headers());
    assert_ne!(resp.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn answers_to_an_allowed_origin_carry_cors_headers_and_others_get_none() {
    let app = cors_app().await;
    let body = json!({"name": "Room"});
    let resp = app.post("admin", "/v1/resources", &body).header("origin", APP).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert_eq!(resp.headers()["access-control-allow-origin"], APP);
    assert_eq!(resp.headers()["access-control-expose-headers"], "Location, Retry-After, Idempotency-Replayed");
    assert_eq!(resp.headers()["vary"], "Origin");
    // A problem answer is read by the same script, so it carries them too.
    let resp = app.http.get(app.url("/v1/resources/x")).header("origin", APP).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(resp.headers()["access-control-allow-origin"], APP);

    let resp = app.post("admin", "/v1/resources", &body).header("origin", "https://evil.example.net").send().await;
    assert!(cors_headers(resp.unwrap().headers()).is_empty());
    // With no origins configured, nobody gets CORS headers.
    let plain = TestApp::spawn().await;
    let resp = plain.post("admin", "/v1/resources", &body).header("origin", APP).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    assert!(cors_headers(resp.headers()).is_empty());
}
