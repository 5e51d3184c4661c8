//! Latency percentiles and the outcome tally every measurement keeps.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// What one request ended in: an HTTP status, or no answer at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// An HTTP answer.
    Status(u16),
    /// A baseline transaction that committed.
    Committed,
    /// No answer: connection refused or reset, timeout, or a database error.
    Error,
}

impl Outcome {
    /// A server fault: never acceptable, in any phase, however fast.
    pub fn is_failure(self) -> bool {
        match self {
            Outcome::Status(s) => s >= 500,
            Outcome::Committed => false,
            Outcome::Error => true,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Status(s) => write!(f, "{s}"),
            Outcome::Committed => f.write_str("committed"),
            Outcome::Error => f.write_str("error"),
        }
    }
}

/// How many requests ended in each outcome.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally(pub BTreeMap<Outcome, u64>);

impl Tally {
    pub fn add(&mut self, outcome: Outcome) {
        *self.0.entry(outcome).or_default() += 1;
    }

    pub fn merge(&mut self, other: &Tally) {
        for (&outcome, &n) in &other.0 {
            *self.0.entry(outcome).or_default() += n;
        }
    }

    pub fn count(&self, outcome: Outcome) -> u64 {
        self.0.get(&outcome).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub fn any_failure(&self) -> bool {
        self.0.keys().any(|o| o.is_failure())
    }
}

impl fmt::Display for Tally {
    /// `201 x1, 409 x99`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let parts: Vec<String> = self.0.iter().map(|(o, n)| format!("{o} x{n}")).collect();
        f.write_str(&parts.join(", "))
    }
}

/// The shape of a latency distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub count: usize,
    pub p50: Duration,
    pub p95: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Summary {
    /// `None` for no samples: there is no honest percentile of nothing.
    pub fn of(mut samples: Vec<Duration>) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        Some(Self {
            count: samples.len(),
            p50: percentile(&samples, 50.0),
            p95: percentile(&samples, 95.0),
            p99: percentile(&samples, 99.0),
            max: *samples.last().expect("not empty"),
        })
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "p50 {}  p95 {}  p99 {}  max {}  (n={})",
            ms(self.p50),
            ms(self.p95),
            ms(self.p99),
            ms(self.max),
            self.count
        )
    }
}

/// Nearest-rank percentile of sorted, non-empty samples: the smallest sample that at
/// least `p` percent of the samples do not exceed. Never interpolates, so it is
/// always a latency some request really had.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `12.3 ms`
pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s = millis(&(1..=100).collect::<Vec<_>>());
        assert_eq!(percentile(&s, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&s, 95.0), Duration::from_millis(95));
        assert_eq!(percentile(&s, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&s, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&millis(&[7]), 99.0), Duration::from_millis(7));
        assert_eq!(percentile(&s, 0.0), Duration::from_millis(1));
    }

    #[test]
    fn summary_sorts_and_refuses_nothing() {
        let s = Summary::of(millis(&[30, 10, 20])).unwrap();
        assert_eq!((s.p50, s.max, s.count), (Duration::from_millis(20), Duration::from_millis(30), 3));
        assert!(Summary::of(Vec::new()).is_none());
    }

    #[test]
    fn tally_counts_and_flags_server_faults() {
        let mut t = Tally::default();
        t.add(Outcome::Status(201));
        t.add(Outcome::Status(409));
        t.add(Outcome::Status(409));
        assert_eq!(t.to_string(), "201 x1, 409 x2");
        assert!(!t.any_failure());
        t.add(Outcome::Status(503));
        assert!(t.any_failure());
        assert_eq!(t.total(), 4);
    }
}
