//! The acceptance tests, one binary: the whole HTTP API, the Lambda handlers and the
//! scripts' promises against a real PostgreSQL (see `acceptance`, the harness in
//! tests/src). One module per subject. `request_logs` is a binary of its own because it
//! installs the process-wide log subscriber, as a function does.

mod alarms;
mod bad_input;
mod calendar;
mod changes;
mod concurrency;
mod conventions;
mod database_tls;
mod event_fixtures;
mod failover;
mod faults;
mod feeds;
mod groups;
mod handlers;
mod hostile_clients;
mod idempotency;
mod lambda_by_hand;
mod lambda_entrypoints;
mod lifecycle;
mod limits;
mod lists;
mod load_timeline;
mod migrations_on_deploy;
mod openapi;
mod outbox;
mod policies;
mod principals;
mod schema;
mod series;
mod startup_errors;
mod statements;
mod template_routes;
mod upstream;
mod upstream_waits;
mod waitlist;
mod webhooks;
mod whole_bookings;
