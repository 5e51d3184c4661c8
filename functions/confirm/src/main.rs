use lambda_http::{Error, run, service_fn, tracing};
use shared::{AppState, config::Defaults, events::Queue};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing::init_default_subscriber();
    let state = AppState::from_env(Defaults::Lambda)?.with_intents(Queue::from_env("INTENTS_QUEUE_URL"));
    run(service_fn(|req| confirm::handler(&state, req))).await
}
