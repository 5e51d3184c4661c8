use lambda_runtime::{Error, run, service_fn, tracing};
use shared::events::{Queue, SqsPublisher};
use shared::{AppState, config::Defaults};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing::init_default_subscriber();
    let intents = Queue::from_env("INTENTS_QUEUE_URL");
    let state = AppState::from_env(Defaults::Lambda)?.with_upstream_from_config().with_intents(intents);
    let events_queue = std::env::var("EVENTS_QUEUE_URL").map_err(|_| "EVENTS_QUEUE_URL is required")?;
    let events = SqsPublisher::from_env(events_queue);
    run(service_fn(|event| sweeper::handler(&state, &events, event))).await
}
