//! Where a measured window's CPU time went: the PostgreSQL backends serving the bench
//! database, and this process (the load generator, and in (b) the server too). Read
//! from `/proc`, so on Linux only; elsewhere the bench prints no CPU line.
//!
//! The ratio (b)/(c) says how many holds the service gets out of what the database can
//! commit; these numbers say why: how many milliseconds of database and of service CPU
//! one hold costs next to one baseline transaction.
//!
//! The machine's busy time (every task's, kernel threads included) is read too: it adds
//! what neither side's processes are charged with (the WAL writer, the kernel's
//! threads), and on a machine that runs nothing else it is the total price of one unit
//! of work, whoever paid it.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;
use tokio_postgres::Client;

/// Cumulative CPU nanoseconds, per database backend, of this process and per process
/// of the whole machine, at one instant.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    backends: HashMap<i32, u64>,
    own: u64,
    machine: HashMap<i32, u64>,
}

/// CPU time spent over a window.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub database: Duration,
    pub bench: Duration,
    /// Every process and the kernel, on all cores.
    pub machine: Duration,
    pub window: Duration,
}

impl Usage {
    /// `database` and `bench` per unit of work (a hold, a transaction).
    pub fn per(&self, units: u64) -> (Duration, Duration) {
        let n = units.max(1) as u32;
        (self.database / n, self.bench / n)
    }

    /// How many cores each side kept busy on average.
    pub fn cores(&self) -> (f64, f64) {
        let w = self.window.as_secs_f64().max(f64::MIN_POSITIVE);
        (self.database.as_secs_f64() / w, self.bench.as_secs_f64() / w)
    }
}

/// Samples the backends connected to one database.
pub struct Probe {
    admin: Client,
    database: String,
}

/// The CPU time a process has run, in nanoseconds: the scheduler's own account
/// (`/proc/<pid>/task/<tid>/schedstat`, first field), summed over its threads. The
/// tick-sampled `utime` and `stime` of `/proc/<pid>/stat` were tried first: a backend
/// that runs in bursts of tens of microseconds between idle ticks was charged from a
/// fifth to nearly twice its time, so a baseline transaction's cost swung 0.011 to
/// 0.093 ms between runs.
fn runtime_ns(pid: &str) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        // A thread that ended since the listing (the runtime's blocking pool lets its
        // threads go) has nothing left to count: skip it, do not lose the process.
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else { continue };
        total += stat.split_whitespace().next().and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
    }
    Some(total)
}

/// Every process's run time on the machine, kernel threads included. Kept per process,
/// as the backends are: a process that exits between two samples then loses only what
/// it ran in the window, where one total lost its whole life's run time.
fn machine_ns() -> HashMap<i32, u64> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return HashMap::new() };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let name = name.to_str()?;
            Some((name.parse().ok()?, runtime_ns(name)?))
        })
        .collect()
}

/// The run time of each process in `after` since `before`: a process new in the window
/// counts whole (it started at zero), one that ended in it is lost, and one whose pid
/// was reused counts from zero at worst.
fn spent(before: &HashMap<i32, u64>, after: &HashMap<i32, u64>) -> u64 {
    after.iter().map(|(pid, t)| t.saturating_sub(before.get(pid).copied().unwrap_or(0))).sum()
}

/// What a measured window is sampled with at its start and its end: a [`Probe`], or
/// in tests a stand-in that needs no database.
pub trait Sampler: Sync {
    fn sample(&self) -> impl Future<Output = Sample> + Send;
}

impl Probe {
    pub fn new(admin: Client, database: String) -> Option<Probe> {
        runtime_ns("self").map(|_| Probe { admin, database })
    }
}

impl Sampler for Probe {
    async fn sample(&self) -> Sample {
        let rows = self
            .admin
            .query("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", &[&self.database])
            .await
            .unwrap_or_default();
        let backends = rows
            .iter()
            .filter_map(|r| {
                let pid: i32 = r.get(0);
                runtime_ns(&pid.to_string()).map(|t| (pid, t))
            })
            .collect();
        Sample { backends, own: runtime_ns("self").unwrap_or(0), machine: machine_ns() }
    }
}

/// What was spent between two samples. A backend that connected in between counts
/// whole (it started at zero); one that disconnected is lost, which the bench avoids
/// by keeping its connections open through the window.
pub fn between(before: &Sample, after: &Sample, window: Duration) -> Usage {
    let secs = Duration::from_nanos;
    Usage {
        database: secs(spent(&before.backends, &after.backends)),
        bench: secs(after.own.saturating_sub(before.own)),
        machine: secs(spent(&before.machine, &after.machine)),
        window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_read_from_the_backends_that_ran_and_this_process() {
        // In nanoseconds: 10 ms units, as times are usually read.
        let ms10 = |n: u64| n * 10_000_000;
        let before = Sample {
            backends: HashMap::from([(1, ms10(100)), (2, ms10(50))]),
            own: ms10(10),
            machine: HashMap::from([(1, ms10(100)), (2, ms10(50)), (9, ms10(850))]),
        };
        let after = Sample {
            backends: HashMap::from([(1, ms10(250)), (2, ms10(50)), (3, ms10(40))]),
            own: ms10(70),
            machine: HashMap::from([(1, ms10(250)), (2, ms10(50)), (3, ms10(40)), (9, ms10(960))]),
        };
        let u = between(&before, &after, Duration::from_secs(2));
        assert_eq!(u.database, Duration::from_millis(1900));
        assert_eq!(u.bench, Duration::from_millis(600));
        assert_eq!(u.machine, Duration::from_millis(3000));
        assert_eq!(u.cores(), (0.95, 0.3));
        assert_eq!(u.per(100), (Duration::from_millis(19), Duration::from_millis(6)));
    }

    #[test]
    fn a_process_whose_threads_come_and_go_is_still_measured() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let churn = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::thread::spawn(|| std::hint::black_box(0)).join();
                }
            })
        };
        let unmeasured = (0..2000).filter(|_| runtime_ns("self").is_none()).count();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        churn.join().unwrap();
        assert_eq!(unmeasured, 0, "samples lost to threads that ended while they were read");
    }

    #[test]
    fn a_process_that_ends_in_the_window_takes_only_its_own_time_out_of_the_machines() {
        let ms = |n: u64| n * 1_000_000;
        // The long-lived process 7 ran 5 s before the window and 10 ms in it, then ended;
        // process 8 ran 400 ms in the window.
        let before = Sample { machine: HashMap::from([(7, ms(5000)), (8, ms(100))]), ..Sample::default() };
        let after = Sample { machine: HashMap::from([(8, ms(500))]), ..Sample::default() };
        assert_eq!(between(&before, &after, Duration::from_secs(1)).machine, Duration::from_millis(400));
    }

    #[test]
    fn this_process_and_the_machine_can_be_measured_on_linux() {
        let own = runtime_ns("self").expect("this process is readable");
        assert!(own > 0);
        let machine = machine_ns();
        assert!(machine.get(&(std::process::id() as i32)).is_some_and(|t| *t >= own));
        assert!(machine.values().sum::<u64>() > own);
    }
}
