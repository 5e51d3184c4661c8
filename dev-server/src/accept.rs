//! What the accept loop does when `accept` fails.
//!
//! Most failures are about the listener, not one connection: the process or the system
//! is out of file descriptors (`EMFILE`, `ENFILE`) or memory (`ENOBUFS`, `ENOMEM`).
//! Retrying at once fails again at once, so a loop without a pause spins a core and
//! writes a log line per failure (880 MB in 25 s, measured). So the loop sleeps
//! 10 ms after the first failure and twice as long after each further one, up to a
//! second, and logs once per sleep. The first accept that succeeds resets it.
//!
//! A few errors are one connection's own (the peer reset or aborted it while it
//! waited in the backlog): the next connection is unaffected, so those are retried
//! at once and do not count as failures.

use std::io;
use std::time::Duration;

/// The doubling pause between failed accepts.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    next: Option<Duration>,
    failures: u64,
}

impl AcceptBackoff {
    pub const FIRST: Duration = Duration::from_millis(10);
    pub const MAX: Duration = Duration::from_secs(1);

    /// After a failed accept: how long to pause before the next one. The caller logs
    /// once per pause, so at most one line per step of the backoff.
    pub fn failed(&mut self) -> Duration {
        let pause = self.next.unwrap_or(Self::FIRST);
        self.next = Some((pause * 2).min(Self::MAX));
        self.failures += 1;
        pause
    }

    /// After a successful accept: the failures since the last success (0 if none),
    /// and the next failure pauses [`Self::FIRST`] again.
    pub fn succeeded(&mut self) -> u64 {
        self.next = None;
        std::mem::take(&mut self.failures)
    }
}

/// An accept error that concerns only the connection being accepted.
pub fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused
    )
}
