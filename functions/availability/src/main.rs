use lambda_http::{Error, run, service_fn, tracing};
use shared::{AppState, config::Defaults};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing::init_default_subscriber();
    let state = AppState::from_env(Defaults::Lambda)?.with_upstream_from_config();
    run(service_fn(|req| availability::handler(&state, req))).await
}
