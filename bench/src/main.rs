//! `bench`: the numbers behind the reservation service's two performance promises.
//!
//! One run prints everything, against a throwaway database and a dev server started in
//! this process (the very handlers the Lambdas run, behind real HTTP on 127.0.0.1):
//!
//! - **(a) burst**: 100 principals hold the *same* slot of one capacity-1 resource at
//!   the same instant, released together by a barrier over pre-warmed connections.
//!   This is the moment the design exists for: exactly one 201 and 99 quick 409s per
//!   round, or the service is wrong. Per-request latency over all rounds is reported,
//!   and the target is p95 <= 50 ms.
//! - **(b) uncontended throughput**: holds per second through HTTP when no two requests
//!   share a resource, at a fixed concurrency for a fixed time after a warm-up. This is
//!   the cost of a booking's transaction, locks and HTTP when nothing contends.
//! - **(c) physical baseline**: plain `BEGIN; INSERT; COMMIT` of one row at the same
//!   concurrency straight through tokio-postgres, in the same run on the same machine.
//!   Absolute rates say more about the laptop than the code; (b) as a share of (c)
//!   says how much of what the database can commit the service turns into bookings.
//!   The target is (b) >= 50% of (c), with and without an `Idempotency-Key` (b2).
//!   It runs twice, first (c0) and after the holds: the two rates show how far the
//!   machine moved during the run (the ratios use the second).
//! - **(d) serialized holds**: every hold on one resource of capacity 2, so each queues
//!   on its lock, against **(e)** a pgbench-style "lock one row, insert one row, commit"
//!   at the same concurrency. The target is (d) >= 60% of (e). Beside it, with no
//!   target, **(d1)**: the same on one resource of capacity 1, whose holds share the
//!   lock and are judged by the exclusion constraint, so they do not queue.
//! - **(s) statements**: (b) and (b2) again, once with `DB_STATEMENTS=cached` (named
//!   statements prepared once per connection) and once with `unnamed` (typed unnamed
//!   statements, no session state: what a transaction-mode pooler needs), on the same
//!   server and its warm connections, switched between phases; no target, the two
//!   rates side by side decide the default.
//! - **(br), (b2r), (d1r)**: (b), (b2) and (d1) again, each right after its plain run,
//!   on resources with calendar rules (Europe/Berlin, a weekly schedule open all day,
//!   a 5-minute grid, a minute's notice, a year's advance, a 5-minute buffer after
//!   each booking on every other resource and on the one of (d1r); see
//!   `throughput::Rules`). The targets: each at least 80 % of its plain run's rate,
//!   and the database CPU per hold at most 1.3x the plain hold's, in (b) and (d1).
//! - **(g2), (p5), (ag)**: bookings of several items: (b) again with every request
//!   booking two resources together (`items`), and with every request taking any
//!   member of a `least_booked` pool of five; then (a) on one group of two resources.
//!   The targets: (g2) at least 60 % of (b)'s rate; (ag) one winner per round, p95 at
//!   most 50 ms. (p5) is printed beside them with no target.
//! - The database CPU per hold, read from `/proc` for the bench database's backends,
//!   against a baseline transaction's: the target is at most 2.5x. Beside it, with no
//!   target, the whole machine's busy CPU per hold against per baseline transaction.
//!   Both are read at the start and the end of each window while every connection of
//!   the phase is open: a backend that exits before the last sample loses its window
//!   (see `throughput::drive`).
//!
//! The bench exits non-zero only when the service is *wrong*: a round without exactly
//! one winner, a 5xx, a request without an answer, a failed hold of a free slot, a
//! resource over its capacity or a booking outside its resource's opening hours (read
//! from the table after every phase that holds). A
//! missed speed target is printed as MISS and is not a failure.
//!
//! ```text
//! cargo run -p bench --release [-- --quick]
//! ```
//!
//! Environment: `BENCH_DATABASE_URL` (admin connection; default
//! `postgres://postgres@127.0.0.1:5432/postgres`), `BENCH_POOL_SIZE` (the server's pool,
//! default 16), `BENCH_CONCURRENCY` (default 32), `BENCH_DURATION_SECS` (each of (b)
//! and (c); default 10, quick 2), `BENCH_DATABASE_SETTINGS` (a diagnostic: `name=value`
//! pairs, comma-separated, set on the bench database for every connection, e.g.
//! `synchronous_commit=off` to see what commit flushes cost; default none),
//! `MAX_ACTIVE_HOLDS_PER_PRINCIPAL` (the server's limit of active holds per principal,
//! as the service reads it; default the service's, 20; `0` turns it off). Every hold of
//! (b), (d) and their kin is made by a principal of its own, so the limit refuses none:
//! a run with it on and one with `0` compare what its lock and count cost a hold.

use bench::setup::{self, BoxError, Server, env_number};
use bench::stats::{Outcome, ms};
use bench::throughput::{self, HoldMix, Phases, Rules, Shape};
use bench::{burst, capacity, cpu};
use std::process::ExitCode;
use std::time::Duration;

const BURST_P95_TARGET: Duration = Duration::from_millis(50);
const THROUGHPUT_SHARE_TARGET: f64 = 50.0;
const SERIALIZED_SHARE_TARGET: f64 = 60.0;
const DB_CPU_RATIO_TARGET: f64 = 2.5;
const RULES_SHARE_TARGET: f64 = 80.0;
const RULES_DB_CPU_RATIO_TARGET: f64 = 1.3;
const GROUP_SHARE_TARGET: f64 = 60.0;

/// Everything a run depends on, printed at the start so a number is never read
/// without the conditions it was taken under.
#[derive(Debug, Clone)]
struct Params {
    quick: bool,
    pool_size: usize,
    concurrency: usize,
    contenders: usize,
    rounds: usize,
    resources: usize,
    phases: Phases,
    database_settings: Vec<(String, String)>,
}

impl Params {
    fn from_args_and_env() -> Result<Self, String> {
        let mut quick = false;
        for arg in std::env::args().skip(1) {
            match arg.as_str() {
                "--quick" => quick = true,
                "-h" | "--help" => {
                    return Err("usage: bench [--quick]   (see the crate docs for BENCH_* variables)".into());
                }
                other => return Err(format!("unknown argument {other:?}; usage: bench [--quick]")),
            }
        }
        let seconds = env_number("BENCH_DURATION_SECS", if quick { 2 } else { 10 })?;
        Ok(Self {
            quick,
            pool_size: env_number("BENCH_POOL_SIZE", 16)?,
            concurrency: env_number("BENCH_CONCURRENCY", 32)?,
            contenders: 100,
            rounds: if quick { 3 } else { 10 },
            resources: 200,
            phases: Phases {
                // Long enough to open every connection, prepare every statement and
                // let the first wave of requests settle.
                warmup: if quick { Duration::from_millis(500) } else { Duration::from_secs(2) },
                measure: Duration::from_secs(seconds as u64),
            },
            database_settings: database_settings(&std::env::var("BENCH_DATABASE_SETTINGS").unwrap_or_default())?,
        })
    }
}

/// `a=1, b.c=on` as pairs. Names are restricted to what a PostgreSQL setting can be
/// called, because they go into the SQL text unquoted.
fn database_settings(spec: &str) -> Result<Vec<(String, String)>, String> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').ok_or_else(|| format!("{pair:?} is not name=value"))?;
            let name = name.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
                return Err(format!("{name:?} is not a setting name"));
            }
            Ok((name.to_string(), value.trim().to_string()))
        })
        .collect()
}

#[tokio::main]
async fn main() -> ExitCode {
    let params = setup::parameters_or_exit(Params::from_args_and_env());
    print_parameters(&params);
    setup::in_fresh_database(move |url| run(params, url)).await
}

fn print_parameters(p: &Params) {
    println!("reservation service bench ({})", if p.quick { "quick" } else { "full" });
    println!("machine: {}", setup::machine());
    println!(
        "parameters: server pool {} (BENCH_POOL_SIZE), concurrency {} (BENCH_CONCURRENCY), \
         burst {} contenders x {} rounds, {} resources for throughput, warm-up {:.1} s, measure {:.1} s",
        p.pool_size,
        p.concurrency,
        p.contenders,
        p.rounds,
        p.resources,
        p.phases.warmup.as_secs_f64(),
        p.phases.measure.as_secs_f64()
    );
    if !p.database_settings.is_empty() {
        let list: Vec<String> = p.database_settings.iter().map(|(n, v)| format!("{n}={v}")).collect();
        println!("database settings (BENCH_DATABASE_SETTINGS, diagnostic): {}", list.join(", "));
    }
}

/// The whole measurement; `Ok(false)` when the service answered wrongly.
async fn run(p: Params, database_url: String) -> Result<bool, BoxError> {
    let mut db = setup::connect(&database_url).await?;
    shared::db::migrate(&mut db).await?;
    apply_database_settings(&db, &p.database_settings).await?;
    setup::print_database_settings(&db).await?;
    let mut correct = true;

    // The baseline once before the holds too: on a shared host the same transaction's
    // rate moved by half between runs minutes apart, and this shows how far it moved
    // within this run (the ratios use the one after the holds, next to (e)).
    println!();
    println!(
        "(c0) baseline before the holds: BEGIN; INSERT one row; COMMIT, {} connections, {:.1} s",
        p.concurrency,
        p.phases.measure.as_secs_f64()
    );
    let database: String = db.query_one("SELECT current_database()", &[]).await?.get(0);
    let probe = cpu::Probe::new(setup::connect(&database_url).await?, database);
    let probe = probe.as_ref();
    let baseline_before = throughput::sql_inserts(&database_url, p.concurrency, p.phases, probe).await?;
    correct &= print_baseline(&baseline_before);

    let server = Server::start(&database_url, p.pool_size).await?;

    println!();
    println!("(a) burst: {} concurrent holds of one slot of a capacity-1 resource, {} rounds", p.contenders, p.rounds);
    let burst = burst::run(&server, &db, p.contenders, p.rounds, 1).await?;
    correct &= print_burst(&burst);
    correct &= print_capacity(&db).await?;

    // The holds through HTTP, phase by phase in the table's order; the statements'
    // phases (s) run right after (b), on its mix.
    let spread =
        HoldMix { resources: p.resources, capacity: 1, keyed: false, rules: Rules::Plain, shape: Shape::Single };
    let mut reports = Vec::new();
    for phase in hold_phases(&p, spread) {
        println!();
        println!("{}", phase.title);
        let report = throughput::http_holds(&server, phase.mix, p.concurrency, p.phases, probe).await?;
        correct &= print_throughput(&report, phase.unit, Outcome::Status(201));
        print_cpu(&report, phase.each, "the bench process (client and server)");
        correct &= print_capacity(&db).await?;
        reports.push(report);
        if reports.len() == 1 {
            correct &= run_statement_modes(&server, spread, &p, probe, &db).await?;
        }
    }
    let Ok([holds, rules, keyed, keyed_rules, serialized, side_by_side, single_rules, groups, pools]) =
        <[throughput::Report; 9]>::try_from(reports)
    else {
        unreachable!("hold_phases has nine phases")
    };

    println!();
    println!(
        "(ag) burst on a group: {} concurrent bookings of one slot of two capacity-1 resources together, {} rounds",
        p.contenders, p.rounds
    );
    let group_burst = burst::run(&server, &db, p.contenders, p.rounds, 2).await?;
    correct &= print_burst(&group_burst);
    correct &= print_capacity(&db).await?;
    drop(server);

    println!();
    println!(
        "(c) baseline: BEGIN; INSERT one row; COMMIT through tokio-postgres, {} connections, {:.1} s",
        p.concurrency,
        p.phases.measure.as_secs_f64()
    );
    let baseline = throughput::sql_inserts(&database_url, p.concurrency, p.phases, probe).await?;
    correct &= print_baseline(&baseline);

    println!();
    println!("(e) serialized baseline: BEGIN; lock one row; INSERT one row; COMMIT, {} connections", p.concurrency);
    let locked = throughput::sql_locked_inserts(&database_url, p.concurrency, p.phases, probe).await?;
    correct &= print_baseline(&locked);

    println!();
    print_summary(
        &burst,
        &group_burst,
        &Ratios {
            holds: &holds,
            keyed: &keyed,
            serialized: &serialized,
            side_by_side: &side_by_side,
            rules: &rules,
            keyed_rules: &keyed_rules,
            single_rules: &single_rules,
            groups: &groups,
            pools: &pools,
            baseline_before: &baseline_before,
            baseline: &baseline,
            locked: &locked,
        },
        correct,
    );
    Ok(correct)
}

/// One phase of holds through HTTP: its heading, what it holds, and the units its
/// rate and its CPU are counted in.
struct HoldPhase {
    title: String,
    mix: HoldMix,
    unit: &'static str,
    each: &'static str,
}

/// The phases of holds through HTTP, in the order they run (and `run` names their
/// reports): (b), (br), (b2), (b2r), (d), (d1), (d1r), (g2), (p5).
fn hold_phases(p: &Params, spread: HoldMix) -> [HoldPhase; 9] {
    let phase = |title: String, mix, unit, each| HoldPhase { title, mix, unit, each };
    let keyed = HoldMix { keyed: true, ..spread };
    let one = HoldMix { resources: 1, capacity: 2, ..spread };
    let single = HoldMix { capacity: 1, ..one };
    [
        phase(
            format!(
                "(b) uncontended holds through HTTP: {} resources, concurrency {}, {:.1} s",
                p.resources,
                p.concurrency,
                p.phases.measure.as_secs_f64()
            ),
            spread,
            "holds/s",
            "hold",
        ),
        phase(
            "(br) the same on resources with calendar rules".into(),
            HoldMix { rules: Rules::Calendar, ..spread },
            "holds/s",
            "hold",
        ),
        phase("(b2) the same as (b) with an Idempotency-Key on every request".into(), keyed, "keyed holds/s", "hold"),
        phase(
            "(b2r) the same on resources with calendar rules".into(),
            HoldMix { rules: Rules::Calendar, ..keyed },
            "keyed holds/s",
            "hold",
        ),
        phase(
            "(d) holds of one resource of capacity 2, each on a free slot: every request queues on its lock".into(),
            one,
            "holds/s",
            "hold",
        ),
        phase(
            "(d1) the same on one resource of capacity 1: its holds share the lock, the constraint judges them".into(),
            single,
            "holds/s",
            "hold",
        ),
        phase(
            "(d1r) the same on one capacity-1 resource with calendar rules and a buffer".into(),
            HoldMix { rules: Rules::Calendar, ..single },
            "holds/s",
            "hold",
        ),
        phase(
            "(g2) the same as (b), each request booking two resources together (items)".into(),
            HoldMix { shape: Shape::Group(2), ..spread },
            "bookings of 2/s",
            "booking",
        ),
        phase(
            "(p5) the same as (b), each request taking any member of a least_booked pool of 5".into(),
            HoldMix { shape: Shape::Pool(5), ..spread },
            "pool holds/s",
            "hold",
        ),
    ]
}

/// (s): (b) and (b2) in each mode of sending statements, printed; the configured mode
/// is set back after. `false` when the service answered wrongly.
async fn run_statement_modes(
    server: &Server,
    spread: HoldMix,
    p: &Params,
    probe: Option<&cpu::Probe>,
    db: &tokio_postgres::Client,
) -> Result<bool, BoxError> {
    println!();
    println!(
        "(s) statements: (b) and (b2) with DB_STATEMENTS=cached (named, prepared once per connection) \
         and =unnamed (typed, one round trip, no session state), alternating on the same server"
    );
    let mut correct = true;
    let statements = statement_modes(server, spread, p.concurrency, p.phases, probe).await?;
    for ((mode, keyed), report) in &statements {
        println!("  {:<8} {:<6}", mode.as_str(), if *keyed { "keyed" } else { "plain" });
        correct &= print_throughput(report, "holds/s", Outcome::Status(201));
    }
    shared::db::run::set_mode(server.state.config.database.statements);
    Ok(correct & print_capacity(db).await?)
}

/// (b) and (b2) once in each mode of sending statements, cached first: `((mode,
/// keyed), report)` in the order run. The mode is the process's, switched between
/// phases; the caller sets the configured one back.
async fn statement_modes(
    server: &Server,
    spread: HoldMix,
    concurrency: usize,
    phases: Phases,
    probe: Option<&cpu::Probe>,
) -> Result<Vec<((shared::db::Statements, bool), throughput::Report)>, BoxError> {
    use shared::db::Statements::{Cached, Unnamed};
    let mut reports = Vec::new();
    for (mode, keyed) in [(Cached, false), (Unnamed, false), (Cached, true), (Unnamed, true)] {
        shared::db::run::set_mode(mode);
        let mix = HoldMix { keyed, ..spread };
        reports.push(((mode, keyed), throughput::http_holds(server, mix, concurrency, phases, probe).await?));
    }
    Ok(reports)
}

/// Sets each pair on the bench database; connections opened afterwards (the server's
/// pool, the baseline's) start with them.
async fn apply_database_settings(db: &tokio_postgres::Client, settings: &[(String, String)]) -> Result<(), BoxError> {
    let name: String = db.query_one("SELECT current_database()", &[]).await?.get(0);
    for (setting, value) in settings {
        let value = value.replace('\'', "''");
        db.batch_execute(&format!("ALTER DATABASE {name} SET {setting} = '{value}'")).await?;
    }
    Ok(())
}

/// Reads the table after a phase; `false` if any resource holds more than its capacity.
async fn print_capacity(db: &tokio_postgres::Client) -> Result<bool, BoxError> {
    let check = capacity::check(db).await?;
    println!(
        "  capacity: {} active claims on {} resources, {} over capacity, {} outside the opening hours, \
         {} bookings with only some items active",
        check.claims,
        check.resources,
        check.over.len(),
        check.outside_hours,
        check.partial_bookings
    );
    for (id, capacity, peak) in &check.over {
        println!("FAIL: resource {id} of capacity {capacity} holds {peak} at once");
    }
    if check.partial_bookings > 0 {
        println!("FAIL: {} bookings of several items have some items active and others not", check.partial_bookings);
    }
    if check.outside_hours > 0 {
        println!("FAIL: {} active bookings lie outside their resource's opening hours", check.outside_hours);
    }
    Ok(check.is_correct())
}

/// Prints each round and the latency; `false` if any round was wrong.
fn print_burst(report: &burst::Report) -> bool {
    print_round("warm-up", &report.warmup, report.contenders);
    for (i, r) in report.rounds.iter().enumerate() {
        print_round(&format!("round {:>2}", i + 1), r, report.contenders);
    }
    if let Some(l) = report.latency() {
        println!("  latency per request, rounds 1-{} (not the warm-up): {l}", report.rounds.len());
    }
    let correct = report.all_correct() && !report.any_failure();
    if !correct {
        println!(
            "FAIL: burst: every round must answer exactly 1x201 and {}x409 and store one hold, without 5xx",
            report.contenders - 1
        );
    }
    correct
}

fn print_round(label: &str, r: &burst::Round, contenders: usize) {
    let verdict = if r.is_correct(contenders) { "ok" } else { "WRONG" };
    println!(
        "  {label:<8}: {:<16} stored active {}  wall {:>9}  slowest {:>9}  {verdict}",
        r.tally.to_string(),
        r.stored_active,
        ms(r.wall),
        ms(r.latencies.iter().copied().max().unwrap_or_default()),
    );
    if let Some(e) = &r.first_error {
        println!("            first error: {e}");
    }
}

/// Prints the rate and latency; `false` if anything but `success` was answered, since
/// every request here targets a free slot (or a plain insert) and must succeed.
fn print_throughput(report: &throughput::Report, unit: &str, success: Outcome) -> bool {
    println!("  {unit}: {:.1}  ({} in {:.1} s)", report.per_second(), report.successes, report.window.as_secs_f64());
    if let Some(l) = &report.latency {
        println!("  latency: {l}");
    }
    let unexpected = report.unexpected(success);
    println!("  other outcomes (warm-up included): {unexpected}");
    if let Some(e) = &report.first_error {
        println!("  first error: {e}");
    }
    let correct = unexpected.total() == 0;
    if !correct {
        println!("FAIL: {unit}: {unexpected} where only {success} is right");
    }
    correct
}

/// A baseline of plain transactions: its rate and CPU; `false` if any failed.
fn print_baseline(report: &throughput::Report) -> bool {
    let correct = print_throughput(report, "transactions/s", Outcome::Committed);
    print_cpu(report, "transaction", "the bench process (client)");
    correct
}

/// Where the window's CPU went, and what one unit of work cost each side.
fn print_cpu(report: &throughput::Report, unit: &str, process: &str) {
    let Some(cpu) = report.cpu else { return };
    let (database, bench) = cpu.cores();
    let (db_each, bench_each) = cpu.per(report.successes);
    println!(
        "  cpu: database backends {database:.2} cores ({:.3} ms per {unit}), {process} {bench:.2} cores ({:.3} ms per {unit})",
        db_each.as_secs_f64() * 1e3,
        bench_each.as_secs_f64() * 1e3
    );
    println!(
        "  cpu: the whole machine {:.2} cores busy ({:.3} ms per {unit})",
        cpu.machine.as_secs_f64() / cpu.window.as_secs_f64().max(f64::MIN_POSITIVE),
        machine_per(&cpu, report.successes) * 1e3
    );
}

/// The machine's busy seconds per unit of work.
fn machine_per(cpu: &bench::cpu::Usage, units: u64) -> f64 {
    cpu.machine.as_secs_f64() / units.max(1) as f64
}

/// The throughput runs the summary compares.
struct Ratios<'a> {
    holds: &'a throughput::Report,
    keyed: &'a throughput::Report,
    serialized: &'a throughput::Report,
    side_by_side: &'a throughput::Report,
    rules: &'a throughput::Report,
    keyed_rules: &'a throughput::Report,
    single_rules: &'a throughput::Report,
    groups: &'a throughput::Report,
    pools: &'a throughput::Report,
    baseline_before: &'a throughput::Report,
    baseline: &'a throughput::Report,
    locked: &'a throughput::Report,
}

/// `a` as a percentage of `b`.
fn share(a: &throughput::Report, b: &throughput::Report) -> f64 {
    100.0 * a.per_second() / b.per_second().max(f64::MIN_POSITIVE)
}

fn print_summary(burst: &burst::Report, group_burst: &burst::Report, r: &Ratios<'_>, correct: bool) {
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    println!("summary");
    for (label, burst) in [("burst", burst), ("burst on a group of 2", group_burst)] {
        let p95 = burst.latency().map(|l| l.p95);
        let burst_ok = burst.all_correct() && p95.is_some_and(|p| p <= BURST_P95_TARGET);
        println!(
            "  target: {label}: exactly 1 winner each round, p95 <= {}: {} (p95 {}, {} of {} rounds right)",
            ms(BURST_P95_TARGET),
            verdict(burst_ok),
            p95.map_or_else(|| "n/a".into(), ms),
            burst.rounds.iter().filter(|r| r.is_correct(burst.contenders)).count(),
            burst.rounds.len()
        );
    }
    for (label, holds, base, target) in [
        ("uncontended / baseline", r.holds, r.baseline, THROUGHPUT_SHARE_TARGET),
        ("keyed uncontended / baseline", r.keyed, r.baseline, THROUGHPUT_SHARE_TARGET),
        ("one resource / serialized baseline", r.serialized, r.locked, SERIALIZED_SHARE_TARGET),
    ] {
        let pct = share(holds, base);
        println!(
            "  target: {label} >= {target:.0} %: {} ({:.1} / {:.1} per second = {pct:.1} %)",
            verdict(pct >= target),
            holds.per_second(),
            base.per_second()
        );
    }
    let pct = share(r.groups, r.holds);
    println!(
        "  target: a booking of 2 / a single hold >= {GROUP_SHARE_TARGET:.0} %: {} ({:.1} / {:.1} per second = {pct:.1} %)",
        verdict(pct >= GROUP_SHARE_TARGET),
        r.groups.per_second(),
        r.holds.per_second()
    );
    println!(
        "  (no target) a hold from a pool of 5 / a single hold: {:.1} / {:.1} per second = {:.1} %",
        r.pools.per_second(),
        r.holds.per_second(),
        share(r.pools, r.holds)
    );
    println!(
        "  (no target) one capacity-1 resource / serialized baseline: {:.1} / {:.1} per second = {:.1} %",
        r.side_by_side.per_second(),
        r.locked.per_second(),
        share(r.side_by_side, r.locked)
    );
    if let (Some(h), Some(b)) = (r.holds.cpu, r.baseline.cpu) {
        let (h_db, h_bench) = h.per(r.holds.successes);
        let (b_db, _) = b.per(r.baseline.successes);
        let ratio = h_db.as_secs_f64() / b_db.as_secs_f64().max(f64::MIN_POSITIVE);
        println!(
            "  target: database CPU per hold <= {DB_CPU_RATIO_TARGET:.1}x a baseline transaction's: {} ({ratio:.1}x: \
             {:.3} ms / {:.3} ms); the bench process (client and server) spends {:.3} ms per hold",
            verdict(ratio <= DB_CPU_RATIO_TARGET),
            h_db.as_secs_f64() * 1e3,
            b_db.as_secs_f64() * 1e3,
            h_bench.as_secs_f64() * 1e3
        );
        let (h_machine, b_machine) = (machine_per(&h, r.holds.successes), machine_per(&b, r.baseline.successes));
        println!(
            "  (no target) the whole machine's CPU per hold: {:.1}x a baseline transaction's ({:.3} ms / {:.3} ms)",
            h_machine / b_machine.max(f64::MIN_POSITIVE),
            h_machine * 1e3,
            b_machine * 1e3
        );
    }
    for (label, with_rules, plain) in [
        ("uncontended, rules / plain", r.rules, r.holds),
        ("keyed uncontended, rules / plain", r.keyed_rules, r.keyed),
        ("one capacity-1 resource, rules / plain", r.single_rules, r.side_by_side),
    ] {
        let pct = share(with_rules, plain);
        println!(
            "  target: {label} >= {RULES_SHARE_TARGET:.0} %: {} ({:.1} / {:.1} per second = {pct:.1} %)",
            verdict(pct >= RULES_SHARE_TARGET),
            with_rules.per_second(),
            plain.per_second()
        );
    }
    for (label, with_rules, plain) in
        [("uncontended", r.rules, r.holds), ("one capacity-1 resource", r.single_rules, r.side_by_side)]
    {
        if let (Some(w), Some(p)) = (with_rules.cpu, plain.cpu) {
            let (w_db, _) = w.per(with_rules.successes);
            let (p_db, _) = p.per(plain.successes);
            let ratio = w_db.as_secs_f64() / p_db.as_secs_f64().max(f64::MIN_POSITIVE);
            println!(
                "  target: {label}: database CPU per hold with rules <= {RULES_DB_CPU_RATIO_TARGET:.1}x the plain \
                 hold's: {} ({ratio:.2}x: {:.3} ms / {:.3} ms)",
                verdict(ratio <= RULES_DB_CPU_RATIO_TARGET),
                w_db.as_secs_f64() * 1e3,
                p_db.as_secs_f64() * 1e3
            );
        }
    }
    println!(
        "  the baseline within this run: {:.1} per second before the holds, {:.1} after ({:+.1} %); \
         the ratios use the one after",
        r.baseline_before.per_second(),
        r.baseline.per_second(),
        share(r.baseline, r.baseline_before) - 100.0
    );
    println!("  correctness: {}", if correct { "OK" } else { "FAIL" });
}

#[cfg(test)]
mod tests {
    use super::database_settings;

    #[test]
    fn database_settings_parse_and_refuse_injection() {
        assert_eq!(
            database_settings(" synchronous_commit=off, a.b = 1 ").unwrap(),
            vec![("synchronous_commit".into(), "off".into()), ("a.b".into(), "1".into())]
        );
        assert!(database_settings("").unwrap().is_empty());
        assert!(database_settings("x; DROP TABLE y=1").is_err());
        assert!(database_settings("novalue").is_err());
    }
}
