use dev_server::startup::{self, Settings, StartupError};
use shared::outbox::{EventsRelay, Queue, SqsPublisher, run_events_relay};
use shared::{AppState, config::Defaults};
use std::process::ExitCode;

/// A start-up failure is one line on stderr, such as `dev-server: PORT must be a port
/// number (got "abc")`, and exit status 1.
#[tokio::main]
async fn main() -> ExitCode {
    lambda_http::tracing::init_default_subscriber();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dev-server: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), StartupError> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut state = AppState::from_env(Defaults::DevServer)?.with_upstream_from_config();
    // `dev-server migrate`: apply the migrations to DATABASE_URL and stop (how a deploy
    // migrates RDS: run it once from a machine or task that reaches the database).
    if std::env::args().nth(1).as_deref() == Some("migrate") {
        let applied = startup::migrate(&state.config).await?;
        println!("applied {applied} migration(s)");
        return Ok(());
    }
    let settings = Settings::from_env()?;
    // Bound before the database is touched: a busy port fails at once and changes nothing.
    let listener = startup::listen(settings.port).await?;
    let applied = startup::migrate(&state.config).await?;
    let mut background = Vec::new();
    // Events: the server's own relay publishes them right after the requests that
    // write them (the sweep wakes it too, and leaves them to it).
    let wake = std::sync::Arc::new(tokio::sync::Notify::new());
    state = state.with_events_relay(EventsRelay::Background(wake.clone()));
    // Intents: a real SQS queue when one is named, else an in-process one.
    match env("INTENTS_QUEUE_URL") {
        Some(url) => {
            let sqs = shared::sqs::Sqs::from_env();
            state = state.with_intents(Queue::Sqs(SqsPublisher::new(sqs.clone(), url.clone())));
            background.push(tokio::spawn(dev_server::run_intent_worker_on_sqs(state.clone(), sqs, url)));
        }
        None if state.upstream.is_none() => {
            tracing::warn!("no UPSTREAM_BASE_URL: upstream confirmations wait as CONFIRMING until one is configured");
        }
        None => {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            state = state.with_intents(Queue::Channel(tx.clone()));
            background.push(tokio::spawn(dev_server::run_intent_worker(state.clone(), rx, tx)));
        }
    }
    // Events go to EVENTS_QUEUE_URL when one is given (moto, LocalStack, AWS), else to
    // the log and the in-process notifier, which posts them to the registered webhooks.
    let events = match env("EVENTS_QUEUE_URL") {
        Some(url) => Queue::Sqs(SqsPublisher::from_env(url)),
        None => {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let sender = shared::notify::Sender::new(shared::notify::Sender::DEFAULT_TIMEOUT);
            let notifier = std::sync::Arc::new(notifier::Notifier { state: state.clone(), sender, queue: None });
            background.push(tokio::spawn(dev_server::run_notifier(notifier, rx)));
            Queue::Channel(tx)
        }
    };
    background.push(tokio::spawn(run_events_relay(state.clone(), events, wake)));
    background.push(tokio::spawn(dev_server::run_scheduled(state.clone(), Queue::None, settings.sweep_interval)));
    let port = listener.local_addr().map_or(settings.port, |a| a.port());
    tracing::info!(%port, applied, "dev server listening on http://127.0.0.1:{port}");
    tokio::select! {
        () = dev_server::serve_with(listener, state, settings.limits) => {}
        _ = tokio::signal::ctrl_c() => tracing::info!("shutting down"),
    }
    background.iter().for_each(|task| task.abort());
    Ok(())
}
