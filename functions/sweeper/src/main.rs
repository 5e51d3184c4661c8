use lambda_runtime::{Error, run, service_fn, tracing};
use shared::{AppState, config::Defaults, events::SqsPublisher};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing::init_default_subscriber();
    let state = AppState::from_env(Defaults::Lambda)?;
    let queue_url = std::env::var("EVENTS_QUEUE_URL").map_err(|_| "EVENTS_QUEUE_URL is required")?;
    let publisher = SqsPublisher::from_env(queue_url).await;
    run(service_fn(|event| sweeper::handler(&state, &publisher, event))).await
}
