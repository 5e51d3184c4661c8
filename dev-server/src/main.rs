use shared::events::{LogPublisher, Queue, SqsPublisher};
use shared::{AppState, config::Defaults, db};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    lambda_http::tracing::init_default_subscriber();
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut state = AppState::from_env(Defaults::DevServer)?.with_upstream_from_config();
    let applied = db::connect_and_migrate(&state.config).await?;
    // `dev-server migrate`: apply the migrations to DATABASE_URL and stop (how a deploy
    // migrates RDS: run it once from a machine or task that reaches the database).
    if std::env::args().nth(1).as_deref() == Some("migrate") {
        println!("applied {applied} migration(s)");
        return Ok(());
    }
    let port: u16 = env("PORT").map(|p| p.parse()).transpose()?.unwrap_or(3000);
    let sweep_every = Duration::from_secs(env("SWEEP_INTERVAL_SECONDS").map(|s| s.parse()).transpose()?.unwrap_or(15));
    let mut background = Vec::new();
    // Intents: a real SQS queue when one is named, else an in-process one.
    match env("INTENTS_QUEUE_URL") {
        Some(url) => {
            let sqs = shared::events::sqs_client_from_env();
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
    // Events go to EVENTS_QUEUE_URL when one is given (moto, LocalStack, AWS), else to the log.
    background.push(match env("EVENTS_QUEUE_URL") {
        Some(url) => tokio::spawn(dev_server::run_scheduled(state.clone(), SqsPublisher::from_env(url), sweep_every)),
        None => tokio::spawn(dev_server::run_scheduled(state.clone(), LogPublisher, sweep_every)),
    });
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await?;
    tracing::info!(%port, applied, "dev server listening on http://127.0.0.1:{port}");
    tokio::select! {
        () = dev_server::serve(listener, state) => {}
        _ = tokio::signal::ctrl_c() => tracing::info!("shutting down"),
    }
    background.iter().for_each(|task| task.abort());
    Ok(())
}
