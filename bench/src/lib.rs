//! The benchmarks' pieces, shared by the binaries: `bench` (`src/main.rs`: the burst,
//! uncontended throughput and the raw baseline), `upstream-bench`, `soak` and
//! `lists-bench` (a page of each list on a million reservations).

pub mod burst;
pub mod capacity;
pub mod cpu;
pub mod setup;
pub mod soak;
pub mod stats;
pub mod throughput;
