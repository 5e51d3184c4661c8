use lambda_runtime::{run, service_fn, tracing};
use shared::AppState;
use shared::config::{Defaults, exit_on_error};
use shared::outbox::EventsRelay;

#[tokio::main]
async fn main() {
    tracing::init_default_subscriber();
    let state = exit_on_error("intent-worker", AppState::from_env(Defaults::Lambda)).with_upstream_from_config();
    let state = state.with_events_relay(EventsRelay::after_request_from_env("EVENTS_QUEUE_URL"));
    exit_on_error("intent-worker", run(service_fn(|event| intent_worker::handler(&state, event))).await)
}
