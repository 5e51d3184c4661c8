//! Where a measured window's CPU time went: the PostgreSQL backends serving the bench
//! database, and this process (the load generator, and in (b) the server too). Read
//! from `/proc`, so on Linux only; elsewhere the bench prints no CPU line.
//!
//! The ratio (b)/(c) says how many holds the service gets out of what the database can
//! commit; these numbers say why: how many milliseconds of database and of service CPU
//! one hold costs next to one baseline transaction.
//!
//! The machine's busy time (`/proc/stat`: everything but idle, I/O wait and steal) is
//! read too: it adds what neither side's processes are charged with (the WAL writer,
//! the kernel's loopback network work), and on a machine that runs nothing else it
//! is the total price of one unit of work, whoever paid it.

use std::collections::HashMap;
use std::time::Duration;
use tokio_postgres::Client;

/// `USER_HZ`: the unit of `/proc/<pid>/stat` times, 100 on every mainstream Linux.
const TICKS_PER_SECOND: f64 = 100.0;

/// Cumulative CPU ticks, per database backend and of this process, at one instant.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    backends: HashMap<i32, u64>,
    own: u64,
    machine: u64,
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

/// utime + stime of `/proc/<pid>/stat`, in ticks.
/// The machine's busy ticks, all cores: `user nice system idle iowait irq softirq
/// steal` are the first fields of the `cpu` line.
fn machine_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> =
        stat.lines().next()?.split_whitespace().skip(1).take(8).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let &[user, nice, system, _idle, _iowait, irq, softirq, _steal] = fields.as_slice() else { return None };
    Some(user + nice + system + irq + softirq)
}

fn ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: count from after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the whole line are 12 and 13 after the name and the state.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

impl Probe {
    pub fn new(admin: Client, database: String) -> Option<Probe> {
        ticks("self").map(|_| Probe { admin, database })
    }

    pub async fn sample(&self) -> Sample {
        let rows = self
            .admin
            .query("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", &[&self.database])
            .await
            .unwrap_or_default();
        let backends = rows
            .iter()
            .filter_map(|r| {
                let pid: i32 = r.get(0);
                ticks(&pid.to_string()).map(|t| (pid, t))
            })
            .collect();
        Sample { backends, own: ticks("self").unwrap_or(0), machine: machine_ticks().unwrap_or(0) }
    }
}

/// What was spent between two samples. A backend that connected in between counts
/// whole (it started at zero); one that disconnected is lost, which the bench avoids
/// by keeping its connections open through the window.
pub fn between(before: &Sample, after: &Sample, window: Duration) -> Usage {
    let database: u64 =
        after.backends.iter().map(|(pid, t)| t.saturating_sub(before.backends.get(pid).copied().unwrap_or(0))).sum();
    let secs = |t: u64| Duration::from_secs_f64(t as f64 / TICKS_PER_SECOND);
    Usage {
        database: secs(database),
        bench: secs(after.own.saturating_sub(before.own)),
        machine: secs(after.machine.saturating_sub(before.machine)),
        window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_read_from_the_backends_that_ran_and_this_process() {
        let before = Sample { backends: HashMap::from([(1, 100), (2, 50)]), own: 10, machine: 1000 };
        let after = Sample { backends: HashMap::from([(1, 250), (2, 50), (3, 40)]), own: 70, machine: 1300 };
        let u = between(&before, &after, Duration::from_secs(2));
        assert_eq!(u.database, Duration::from_millis(1900));
        assert_eq!(u.bench, Duration::from_millis(600));
        assert_eq!(u.machine, Duration::from_secs(3));
        assert_eq!(u.cores(), (0.95, 0.3));
        assert_eq!(u.per(100), (Duration::from_millis(19), Duration::from_millis(6)));
    }

    #[test]
    fn this_process_and_the_machine_can_be_measured_on_linux() {
        assert!(ticks("self").is_some());
        assert!(machine_ticks().is_some_and(|t| t > 0));
    }
}
