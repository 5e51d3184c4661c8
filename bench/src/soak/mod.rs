//! The soak: a steady mixed load on the in-process dev server for many minutes, to see
//! whether latency, memory and the tables stay flat. See `src/bin/soak.rs`.

pub mod footprint;
pub mod load;
pub mod record;
