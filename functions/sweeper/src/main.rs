use lambda_runtime::{run, service_fn, tracing};
use shared::AppState;
use shared::config::{ConfigError, Defaults, exit_on_error};
use shared::outbox::{Queue, SqsPublisher};

#[tokio::main]
async fn main() {
    tracing::init_default_subscriber();
    let intents = Queue::from_env("INTENTS_QUEUE_URL");
    let state = exit_on_error("sweeper", AppState::from_env(Defaults::Lambda));
    let state = state.with_upstream_from_config().with_intents(intents);
    let events_queue = std::env::var("EVENTS_QUEUE_URL").map_err(|_| ConfigError::Missing("EVENTS_QUEUE_URL"));
    let events = SqsPublisher::from_env(exit_on_error("sweeper", events_queue));
    exit_on_error("sweeper", run(service_fn(|event| sweeper::handler(&state, &events, event))).await)
}
