//! The benchmarks' pieces, shared by the binaries. The binaries (docs/benchmarks.md
//! gives each one's current figures):
//!
//! - `bench` (`src/main.rs`): the burst, the throughput phases and the raw baselines;
//! - `upstream-bench` (`src/bin/upstream.rs`): a naive direct path against this service;
//! - `soak` (`src/bin/soak.rs`): a steady mixed load for ten minutes;
//! - `lists-bench` (`src/bin/lists.rs`): a page of each list on a million reservations;
//! - `slots-bench` (`src/bin/slots.rs`): a month of bookable starts on a busy resource;
//! - `fanout` (`src/bin/fanout.rs`): Lambda's scale-out against a small PostgreSQL, with
//!   and without a pooler;
//! - `relay-bench` (`src/bin/relay.rs`): the events relay's ceiling;
//! - `webhook-bench` (`src/bin/webhooks.rs`): how soon a hold's webhook arrives, and what
//!   relaying after each request costs the holds;
//! - `drain-bench` (`src/bin/drain.rs`): the sweep catching up with a backlog of lapsed
//!   holds, and what it costs the holds on other resources.
//!
//! The modules: [`setup`] (the throwaway database, the in-process dev server, the
//! parameters and the exit code), [`burst`] ((a) and (ag)), [`throughput`] (the
//! closed-loop phases and the baselines), [`capacity`] (the check after each phase),
//! [`cpu`] (where a window's CPU went), [`stats`] (percentiles and tallies) and
//! [`soak`] (the soak's load, footprint and record).

pub mod burst;
pub mod capacity;
pub mod cpu;
pub mod setup;
pub mod soak;
pub mod stats;
pub mod throughput;
