use lambda_runtime::{run, service_fn, tracing};
use shared::AppState;
use shared::config::{Defaults, exit_on_error};
use shared::outbox::EventsRelay;

#[tokio::main]
async fn main() {
    tracing::init_default_subscriber();
    let state = exit_on_error("notifier", AppState::from_env(Defaults::Lambda));
    let state = state.with_events_relay(EventsRelay::after_request_from_env("EVENTS_QUEUE_URL"));
    let notifier = notifier::Notifier::from_env(state);
    exit_on_error("notifier", run(service_fn(|event| notifier::handler(&notifier, event))).await)
}
