//! The README's by-hand path under `cargo lambda watch` ("Local runs"): on a migrated
//! database with tests/events/seed.sql applied, every `cargo lambda invoke ...
//! --data-file tests/events/NAME.json` that the README shows gets a 2xx from its
//! function. The invocations run in process through the functions' own handlers, with
//! a Lambda configuration (JWT identity from the fixtures' claims); the emulator path
//! itself is proven by lambda_entrypoints.rs.

use acceptance::{fresh_database, workspace_root};
use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use lambda_http::request::LambdaRequest;
use shared::AppState;
use shared::config::{Config, Defaults};
use tokio_postgres::NoTls;

/// The `(function, fixture file)` of each `cargo lambda invoke` in the README, in order.
fn readme_invocations() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let invocations: Vec<(String, String)> = readme
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.windows(3).position(|w| w[..2] == ["cargo", "lambda"] && w[2] == "invoke")?;
            let function = words.get(at + 3)?.to_string();
            let file = words.iter().position(|w| *w == "--data-file").and_then(|i| words.get(i + 1))?;
            Some((function, file.to_string()))
        })
        .collect();
    assert!(!invocations.is_empty(), "the README shows how to invoke a function by hand");
    invocations
}

async fn invoke(state: &AppState, function: &str, event: ApiGatewayV2httpRequest) -> (u16, String) {
    let req: lambda_http::Request = LambdaRequest::ApiGatewayV2(event).into();
    let response = match function {
        "admin" => admin::handler(state, req).await,
        "reserve" => reserve::handler(state, req).await,
        "confirm" => confirm::handler(state, req).await,
        "availability" => availability::handler(state, req).await,
        other => panic!("the README invokes {other}, which takes no HTTP event"),
    }
    .unwrap_or_else(|e| panic!("{function} crashed: {e}"));
    let body = String::from_utf8_lossy(response.body().as_ref()).into_owned();
    (response.status().as_u16(), body)
}

#[tokio::test]
async fn every_invocation_the_readme_shows_succeeds_on_a_database_with_the_seed() {
    let url = fresh_database().await;
    let (db, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let seed = std::fs::read_to_string(workspace_root().join("tests/events/seed.sql")).expect("tests/events/seed.sql");
    db.batch_execute(&seed).await.expect("the seed applies");
    db.batch_execute(&seed).await.expect("the seed applies again and changes nothing");

    let lookup_url = url.clone();
    let config = Config::from_lookup(Defaults::Lambda, move |k| (k == "DATABASE_URL").then(|| lookup_url.clone()))
        .expect("a Lambda configuration");
    let state = AppState::new(shared::db::pool(&config.database).unwrap(), config);
    for (function, file) in readme_invocations() {
        let text = std::fs::read_to_string(workspace_root().join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let event: ApiGatewayV2httpRequest = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let (status, body) = invoke(&state, &function, event).await;
        assert!((200..300).contains(&status), "cargo lambda invoke {function} --data-file {file}: {status} {body}");
    }
}
