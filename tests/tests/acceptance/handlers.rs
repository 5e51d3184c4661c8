//! The Lambda handlers are plain async functions: called here directly with
//! `lambda_http` requests, without the runtime and without the dev server.

use acceptance::{TestApp, hours, json_of, lambda_request};
use lambda_http::RequestExt;
use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription, ApiGatewayV2httpRequestContext,
};
use lambda_http::request::RequestContext;
use serde_json::json;
use shared::config::AuthMode;
use std::collections::HashMap;

/// A request as API Gateway hands it over behind the JWT authorizer.
fn with_jwt(mut req: lambda_http::Request, sub: &str, scope: &str) -> lambda_http::Request {
    let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
    jwt.claims = HashMap::from([("sub".to_string(), sub.to_string()), ("scope".to_string(), scope.to_string())]);
    let mut authorizer = ApiGatewayRequestAuthorizer::default();
    authorizer.jwt = Some(jwt);
    let mut ctx = ApiGatewayV2httpRequestContext::default();
    ctx.authorizer = Some(authorizer);
    req.headers_mut().remove("x-principal");
    req.with_request_context(RequestContext::ApiGatewayV2(ctx))
}

#[tokio::test]
async fn each_function_answers_its_own_routes_when_called_directly() {
    let app = TestApp::spawn().await;
    let state = &app.state;
    let created = admin::handler(
        state,
        lambda_request("POST", "/v1/resources", Some("admin"), Some(&json!({"name": "Desk 4", "capacity": 1}))),
    )
    .await
    .unwrap();
    assert_eq!(created.status(), 201);
    let room = json_of(created.body())["id"].as_str().unwrap().to_string();

    let (s, e) = hours(10, 11);
    let held = reserve::handler(
        state,
        lambda_request(
            "POST",
            "/v1/reservations",
            Some("alice"),
            Some(&json!({"resource_id": room, "start": s, "end": e})),
        ),
    )
    .await
    .unwrap();
    assert_eq!(held.status(), 201);
    let id = json_of(held.body())["id"].as_str().unwrap().to_string();

    let confirmed =
        confirm::handler(state, lambda_request("POST", &format!("/v1/reservations/{id}/confirm"), Some("alice"), None))
            .await
            .unwrap();
    assert_eq!(confirmed.status(), 200);
    assert_eq!(json_of(confirmed.body())["status"], "CONFIRMED");

    let read =
        availability::handler(state, lambda_request("GET", &format!("/v1/reservations/{id}"), Some("alice"), None))
            .await
            .unwrap();
    assert_eq!(json_of(read.body())["status"], "CONFIRMED");
}

#[tokio::test]
async fn a_function_asked_for_a_route_it_does_not_own_answers_not_found() {
    let app = TestApp::spawn().await;
    let resp = confirm::handler(&app.state, lambda_request("GET", "/v1/health", None, None)).await.unwrap();
    assert_eq!(resp.status(), 404);
    assert!(json_of(resp.body())["type"].as_str().unwrap().ends_with("/not-found"));
}

#[tokio::test]
async fn in_jwt_mode_the_principal_is_the_sub_claim_and_the_header_is_ignored() {
    let app = TestApp::spawn_with(acceptance::Options {
        tweak: Box::new(|c| c.auth_mode = AuthMode::Jwt),
        ..Default::default()
    })
    .await;
    let state = &app.state;
    // The header alone identifies nobody in jwt mode.
    let resp =
        admin::handler(state, lambda_request("POST", "/v1/resources", Some("admin"), Some(&json!({"name": "x"}))))
            .await
            .unwrap();
    assert_eq!(resp.status(), 401);
    // An admin is whoever carries the admin scope.
    let req = lambda_request("POST", "/v1/resources", None, Some(&json!({"name": "Room 9"})));
    let resp = admin::handler(state, with_jwt(req, "ops-1", "openid reservations/admin")).await.unwrap();
    assert_eq!(resp.status(), 201);
    let room = json_of(resp.body())["id"].as_str().unwrap().to_string();
    let req = lambda_request("POST", "/v1/resources", None, Some(&json!({"name": "Room 10"})));
    assert_eq!(admin::handler(state, with_jwt(req, "alice", "openid")).await.unwrap().status(), 403);

    let (s, e) = hours(10, 11);
    let req = lambda_request(
        "POST",
        "/v1/reservations",
        Some("mallory"),
        Some(&json!({"resource_id": room, "start": s, "end": e})),
    );
    let resp = reserve::handler(state, with_jwt(req, "user-123", "openid")).await.unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(json_of(resp.body())["owner"], "user-123");
}

#[tokio::test]
async fn a_broken_database_is_a_503_that_says_nothing_internal() {
    let app = TestApp::spawn().await;
    let mut config = (*app.state.config).clone();
    config.database.url = "postgres://postgres@127.0.0.1:1/nowhere".into();
    let mut state = shared::AppState::new(shared::db::pool(&config.database).unwrap(), config);
    state.clock = app.state.clock.clone();
    let resp = availability::handler(&state, lambda_request("GET", "/v1/health", None, None)).await.unwrap();
    assert_eq!(resp.status(), 503);
    let (s, e) = hours(10, 11);
    let req = lambda_request(
        "POST",
        "/v1/reservations",
        Some("alice"),
        Some(&json!({"resource_id": uuid::Uuid::new_v4(), "start": s, "end": e})),
    );
    let resp = reserve::handler(&state, req).await.unwrap();
    assert_eq!(resp.status(), 503);
    let text = String::from_utf8(resp.body().as_ref().to_vec()).unwrap();
    assert!(text.contains("database-unavailable"), "{text}");
    assert!(!text.contains("127.0.0.1") && !text.to_lowercase().contains("connection refused"), "{text}");
}
