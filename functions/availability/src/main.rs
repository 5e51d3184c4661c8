use lambda_http::{run, service_fn, tracing};
use shared::AppState;
use shared::config::{Defaults, exit_on_error};

#[tokio::main]
async fn main() {
    tracing::init_default_subscriber();
    let state = exit_on_error("availability", AppState::from_env(Defaults::Lambda)).with_upstream_from_config();
    exit_on_error("availability", run(service_fn(|req| availability::handler(&state, req))).await)
}
