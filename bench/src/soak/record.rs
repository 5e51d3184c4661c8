//! What the soak's clients answered, binned by the minute the answer came in, and the
//! per-minute line and goal verdicts made from it.

use crate::stats::{Outcome, Summary, Tally};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a client asked for, for the end's tally by operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Hold,
    Book,
    Confirm,
    AcceptOffer,
    Release,
    Cancel,
    JoinWaitlist,
    LeaveWaitlist,
    ReadWaitlist,
    Availability,
    /// A mutation sent again with its `Idempotency-Key`.
    Replay,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Hold => "hold",
            Op::Book => "book (confirm: true)",
            Op::Confirm => "confirm a hold",
            Op::AcceptOffer => "confirm an offer",
            Op::Release => "release a hold",
            Op::Cancel => "cancel a booking",
            Op::JoinWaitlist => "join the waitlist",
            Op::LeaveWaitlist => "leave the waitlist",
            Op::ReadWaitlist => "read a waitlist entry",
            Op::Availability => "availability",
            Op::Replay => "replay (same key)",
        }
    }
}

/// The answers of one minute.
#[derive(Debug, Default, Clone)]
pub struct Period {
    /// Every request's latency, whatever it answered.
    pub latencies: Vec<Duration>,
    pub outcomes: Tally,
    /// 4xx answers by the problem document's type (its last path segment).
    pub problems: BTreeMap<String, u64>,
    pub by_op: BTreeMap<(Op, Outcome), u64>,
    pub first_error: Option<String>,
}

impl Period {
    pub fn merge(&mut self, other: Period) {
        self.latencies.extend(other.latencies);
        self.outcomes.merge(&other.outcomes);
        for (k, n) in other.problems {
            *self.problems.entry(k).or_default() += n;
        }
        for (k, n) in other.by_op {
            *self.by_op.entry(k).or_default() += n;
        }
        self.first_error = self.first_error.take().or(other.first_error);
    }

    /// Answers whose status is `class`xx (2 for 2xx ...).
    pub fn class(&self, class: u16) -> u64 {
        self.outcomes
            .0
            .iter()
            .filter(|(o, _)| matches!(o, Outcome::Status(s) if s / 100 == class))
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests that got no answer at all.
    pub fn unanswered(&self) -> u64 {
        self.outcomes.count(Outcome::Error)
    }

    /// Server faults and requests without an answer: wrong in any amount.
    pub fn failures(&self) -> u64 {
        self.outcomes.0.iter().filter(|(o, _)| o.is_failure()).map(|(_, n)| n).sum()
    }
}

/// One bin per minute of the run, and one for answers that came after its end.
pub struct Recorder {
    started: Instant,
    period: Duration,
    bins: Vec<Mutex<Period>>,
    /// Replays (the same `Idempotency-Key` again) that answered otherwise than the
    /// first request: how many, and the first.
    mismatches: Mutex<(u64, Option<String>)>,
}

impl Recorder {
    pub fn new(started: Instant, period: Duration, periods: usize) -> Self {
        Self { started, period, bins: (0..=periods).map(|_| Mutex::default()).collect(), mismatches: Mutex::default() }
    }

    pub fn mismatch(&self, what: String) {
        let mut m = self.mismatches.lock().expect("no panics while recording");
        m.0 += 1;
        m.1.get_or_insert(what);
    }

    pub fn mismatches(&self) -> (u64, Option<String>) {
        self.mismatches.lock().expect("no panics while recording").clone()
    }

    pub fn periods(&self) -> usize {
        self.bins.len() - 1
    }

    /// When period `i` (0-based) ends.
    pub fn end_of(&self, i: usize) -> Instant {
        self.started + self.period * (i as u32 + 1)
    }

    /// The bin of an answer that came at `at`: by when it came, like the core bench's
    /// windows; past the last minute, the overflow bin.
    fn bin(&self, at: Instant) -> usize {
        let i = (at.saturating_duration_since(self.started).as_nanos() / self.period.as_nanos().max(1)) as usize;
        i.min(self.periods())
    }

    pub fn record(&self, op: Op, outcome: Outcome, problem: Option<&str>, started: Instant, finished: Instant) {
        let mut p = self.bins[self.bin(finished)].lock().expect("no panics while recording");
        p.latencies.push(finished - started);
        p.outcomes.add(outcome);
        *p.by_op.entry((op, outcome)).or_default() += 1;
        if let Some(kind) = problem {
            match p.problems.get_mut(kind) {
                Some(n) => *n += 1,
                None => {
                    p.problems.insert(kind.to_string(), 1);
                }
            }
        }
    }

    pub fn error(&self, at: Instant, error: String) {
        self.bins[self.bin(at)].lock().expect("no panics while recording").first_error.get_or_insert(error);
    }

    /// Takes what bin `i` holds; `periods()` is the overflow bin.
    pub fn take(&self, i: usize) -> Period {
        std::mem::take(&mut *self.bins[i].lock().expect("no panics while recording"))
    }
}

/// One minute's line, with what was sampled at its end.
#[derive(Debug, Clone)]
pub struct Minute {
    pub number: usize,
    pub requests: u64,
    pub per_second: f64,
    pub latency: Option<Summary>,
    pub ok: u64,
    pub client_errors: u64,
    pub server_errors: u64,
    pub unanswered: u64,
    pub problems: BTreeMap<String, u64>,
    /// This process's resident set (server and load generator), in KiB.
    pub rss_kib: Option<u64>,
    pub outbox_rows: i64,
    pub outbox_pending: i64,
    /// Events written since the start (the outbox's newest `seq`).
    pub outbox_written: i64,
}

impl Minute {
    /// Takes the period's latencies (a minute's worth is about a megabyte; the run
    /// keeps only the counts, so that its own memory does not grow minute by minute).
    pub fn of(number: usize, period: &mut Period, length: Duration) -> Self {
        Self {
            number,
            requests: period.outcomes.total(),
            per_second: period.outcomes.total() as f64 / length.as_secs_f64(),
            latency: Summary::of(std::mem::take(&mut period.latencies)),
            ok: period.class(2),
            client_errors: period.class(4),
            server_errors: period.class(5),
            unanswered: period.unanswered(),
            problems: period.problems.clone(),
            rss_kib: None,
            outbox_rows: 0,
            outbox_pending: 0,
            outbox_written: 0,
        }
    }

    pub fn p99(&self) -> Option<Duration> {
        self.latency.map(|l| l.p99)
    }

    pub const HEADER: &str = "minute  requests    req/s   p50 ms   p99 ms     2xx     4xx  5xx  none  rss MB  outbox (unpublished)  4xx by kind";

    pub fn line(&self) -> String {
        let (p50, p99) = self.latency.map_or((f64::NAN, f64::NAN), |l| (millis(l.p50), millis(l.p99)));
        let kinds: Vec<String> = self.problems.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!(
            "{:>6}  {:>8}  {:>7.1}  {:>7.1}  {:>7.1}  {:>6}  {:>6}  {:>3}  {:>4}  {:>6}  {:>8} ({:>8})  {}",
            self.number,
            self.requests,
            self.per_second,
            p50,
            p99,
            self.ok,
            self.client_errors,
            self.server_errors,
            self.unanswered,
            self.rss_kib.map_or_else(|| "n/a".into(), |k| format!("{:.1}", k as f64 / 1024.0)),
            self.outbox_rows,
            self.outbox_pending,
            if kinds.is_empty() { "-".into() } else { kinds.join(", ") }
        )
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The latency goal: the last minute's p99 within `limit` times the first minute's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct P99Drift {
    pub first: Duration,
    pub last: Duration,
    pub ratio: f64,
    pub pass: bool,
}

pub fn p99_drift(minutes: &[Minute], limit: f64) -> Option<P99Drift> {
    let (first, last) = (minutes.first()?.p99()?, minutes.last()?.p99()?);
    let ratio = last.as_secs_f64() / first.as_secs_f64().max(f64::MIN_POSITIVE);
    Some(P99Drift { first, last, ratio, pass: ratio <= limit })
}

/// The memory goal: the last minute's RSS within `limit_percent` of the first's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RssGrowth {
    pub first_mib: f64,
    pub last_mib: f64,
    pub growth_mib: f64,
    pub percent: f64,
    pub pass: bool,
}

pub fn rss_growth(minutes: &[Minute], limit_percent: f64) -> Option<RssGrowth> {
    let (first, last) = (minutes.first()?.rss_kib? as f64 / 1024.0, minutes.last()?.rss_kib? as f64 / 1024.0);
    let percent = 100.0 * (last - first) / first.max(f64::MIN_POSITIVE);
    Some(RssGrowth {
        first_mib: first,
        last_mib: last,
        growth_mib: last - first,
        percent,
        pass: percent <= limit_percent,
    })
}

/// The relay's goal: what is left unpublished at the end, in seconds of the last
/// minute's rate of events written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backlog {
    pub pending: i64,
    pub per_second: f64,
    pub seconds: f64,
    pub pass: bool,
}

/// See [`Backlog`]; `None` before two minutes, or when the last minute wrote nothing.
pub fn relay_backlog(minutes: &[Minute], length: Duration, limit_seconds: f64) -> Option<Backlog> {
    let [.., before, last] = minutes else { return None };
    let per_second = (last.outbox_written - before.outbox_written) as f64 / length.as_secs_f64();
    (per_second > 0.0).then(|| {
        let seconds = last.outbox_pending as f64 / per_second;
        Backlog { pending: last.outbox_pending, per_second, seconds, pass: seconds <= limit_seconds }
    })
}

/// The outbox goal: the row count levels off. Bounded when the count at the end is
/// within `limit_percent` of the count half-way through; a table that only grows
/// (no purge within the run) doubles over that stretch.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxTrend {
    pub counts: Vec<i64>,
    pub halfway: i64,
    pub last: i64,
    /// Rows added per minute over the second half.
    pub per_minute: f64,
    /// Whether the count ever went down: the purge ran.
    pub shrank: bool,
    pub pass: bool,
}

pub fn outbox_trend(minutes: &[Minute], limit_percent: f64) -> Option<OutboxTrend> {
    if minutes.len() < 2 {
        return None;
    }
    let counts: Vec<i64> = minutes.iter().map(|m| m.outbox_rows).collect();
    let mid = counts.len() / 2 - 1;
    let (halfway, last) = (counts[mid], *counts.last().expect("two or more"));
    let per_minute = (last - halfway) as f64 / (counts.len() - 1 - mid) as f64;
    let shrank = counts.windows(2).any(|w| w[1] < w[0]);
    let pass = (last - halfway) as f64 <= halfway.max(1) as f64 * limit_percent / 100.0;
    Some(OutboxTrend { counts, halfway, last, per_minute, shrank, pass })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute(number: usize, p99_ms: u64, rss_mib: u64, outbox: i64) -> Minute {
        let mut period = Period { latencies: vec![Duration::from_millis(p99_ms)], ..Period::default() };
        let mut m = Minute::of(number, &mut period, Duration::from_secs(60));
        assert!(period.latencies.is_empty());
        m.rss_kib = Some(rss_mib * 1024);
        m.outbox_rows = outbox;
        m
    }

    #[test]
    fn the_backlog_is_what_is_left_unpublished_in_seconds_of_the_last_minutes_rate() {
        let with = |written, pending| Minute { outbox_written: written, outbox_pending: pending, ..minute(1, 1, 1, 0) };
        let minutes = [with(60_000, 100), with(120_000, 3_000)];
        let b = relay_backlog(&minutes, Duration::from_secs(60), 5.0).unwrap();
        assert_eq!((b.per_second, b.seconds, b.pass), (1_000.0, 3.0, true));
        let behind = [with(60_000, 100), with(120_000, 6_000)];
        assert!(!relay_backlog(&behind, Duration::from_secs(60), 5.0).unwrap().pass);
        assert_eq!(relay_backlog(&minutes[..1], Duration::from_secs(60), 5.0), None);
    }

    #[test]
    fn answers_land_in_the_minute_they_came_in_and_late_ones_in_the_overflow() {
        let t0 = Instant::now();
        let r = Recorder::new(t0, Duration::from_secs(60), 2);
        let at = |s: u64| t0 + Duration::from_secs(s);
        r.record(Op::Hold, Outcome::Status(201), None, at(0), at(1));
        r.record(Op::Hold, Outcome::Status(409), Some("slot-unavailable"), at(59), at(61));
        r.record(Op::Book, Outcome::Status(500), None, at(119), at(130));
        r.record(Op::Availability, Outcome::Error, None, at(100), at(110));
        let (first, second, late) = (r.take(0), r.take(1), r.take(2));
        assert_eq!((first.outcomes.total(), first.class(2)), (1, 1));
        assert_eq!(second.problems.get("slot-unavailable"), Some(&1));
        assert_eq!((second.class(4), second.unanswered(), second.failures()), (1, 1, 1));
        assert_eq!((late.class(5), late.failures()), (1, 1));
        assert_eq!(r.end_of(1), at(120));
    }

    #[test]
    fn p99_goal_compares_the_last_minute_with_the_first() {
        let d = p99_drift(&[minute(1, 10, 50, 0), minute(2, 99, 50, 0), minute(3, 15, 50, 0)], 1.5).unwrap();
        assert_eq!((d.ratio, d.pass), (1.5, true));
        let d = p99_drift(&[minute(1, 10, 50, 0), minute(2, 16, 50, 0)], 1.5).unwrap();
        assert!(!d.pass);
        assert!(p99_drift(&[], 1.5).is_none());
    }

    #[test]
    fn rss_goal_is_growth_from_the_first_minute() {
        let g = rss_growth(&[minute(1, 1, 100, 0), minute(2, 1, 300, 0), minute(3, 1, 105, 0)], 10.0).unwrap();
        assert_eq!((g.growth_mib, g.percent, g.pass), (5.0, 5.0, true));
        assert!(!rss_growth(&[minute(1, 1, 100, 0), minute(2, 1, 120, 0)], 10.0).unwrap().pass);
    }

    #[test]
    fn outbox_goal_wants_the_second_half_flat() {
        let ms: Vec<Minute> = (1..=10).map(|i| minute(i, 1, 1, 100 * i as i64)).collect();
        let t = outbox_trend(&ms, 10.0).unwrap();
        assert_eq!((t.halfway, t.last, t.per_minute, t.shrank, t.pass), (500, 1000, 100.0, false, false));
        let flat: Vec<Minute> =
            [100, 200, 300, 250, 310, 300].iter().enumerate().map(|(i, &n)| minute(i, 1, 1, n)).collect();
        let t = outbox_trend(&flat, 10.0).unwrap();
        assert_eq!((t.halfway, t.last, t.shrank, t.pass), (300, 300, true, true));
        assert!(outbox_trend(&ms[..1], 10.0).is_none());
    }
}
