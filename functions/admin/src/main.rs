use lambda_http::{run, service_fn, tracing};
use shared::AppState;
use shared::config::{Defaults, exit_on_error};
use shared::outbox::EventsRelay;

#[tokio::main]
async fn main() {
    tracing::init_default_subscriber();
    let state = exit_on_error("admin", AppState::from_env(Defaults::Lambda));
    let state = state.with_events_relay(EventsRelay::after_request_from_env("EVENTS_QUEUE_URL"));
    exit_on_error("admin", run(service_fn(|req| admin::handler(&state, req))).await)
}
