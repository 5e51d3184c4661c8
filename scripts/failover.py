"""Failover of the primary under load (scripts/failover runs it; Python 3.11, standard
library only).

For each variant: two PostgreSQL clusters of our own (pg_createcluster on free ports,
trust authentication on 127.0.0.1), a primary and a synchronous streaming standby made
with pg_basebackup (`synchronous_standby_names = '*'` on the primary); the dev server on
the primary; 50 clients sending keyed holds and bookings; the primary killed
(`pg_ctlcluster ... stop -m immediate`), the standby promoted; then, against the new
primary:

- every reservation answered 201 is there, HELD or CONFIRMED as it was answered;
- no resource holds more than its capacity at any instant (SQL);
- every key sent again answers what it answered first (status and reservation);
- no HTTP 500.

It prints the time from the promotion to the first write (a 201 sent after it) and
the slowest answer after the kill (the goal: every request answered within 5 s).

Variants (FAILOVER_VARIANTS, comma-separated; default all):
- multihost: DATABASE_URL names both hosts, without target_session_attrs;
- moved: through a TCP proxy (the endpoint), switched to the standby once promoted;
- moved-early: the proxy switched to the standby before its promotion;
- blackhole: the proxy stops forwarding without closing anything (the old primary
  vanished: a partition, a dead host), then forwards new connections to the promoted
  standby.

Every cluster is stopped and dropped by its exact name, and the dev server stopped by
its pid, on every exit path; the whole run is bounded (FAILOVER_DEADLINE_SECONDS).
Traffic goes to 127.0.0.1 only.
"""

import asyncio
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".dev" / "failover"
SERVER_BIN = os.environ["FAILOVER_SERVER_BIN"]
VARIANTS = [v for v in os.environ.get("FAILOVER_VARIANTS", "multihost,moved,moved-early,blackhole").split(",") if v]
CLIENTS = int(os.environ.get("FAILOVER_CLIENTS", "50"))
BEFORE_KILL = float(os.environ.get("FAILOVER_BEFORE_KILL_SECONDS", "5"))
AFTER_PROMOTE = float(os.environ.get("FAILOVER_AFTER_PROMOTE_SECONDS", "8"))
DEADLINE = int(os.environ.get("FAILOVER_DEADLINE_SECONDS", "290"))
PG_VERSION = os.environ.get("FAILOVER_PG_VERSION", "15")
# A client's timeout: long enough to see a request that hangs for its whole length.
CLIENT_TIMEOUT = 30.0
RUN_ID = f"{os.getpid()}"

clusters_made: list[str] = []
server_proc: subprocess.Popen | None = None


def say(*what):
    print("failover:", *what, flush=True)


def free_port():
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, check=True, timeout=60):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip() or out.stdout.strip()}")
    return out


def as_postgres(cmd):
    return (["runuser", "-u", "postgres", "--"] + cmd) if os.geteuid() == 0 else cmd


def pg_bin(name):
    return f"/usr/lib/postgresql/{PG_VERSION}/bin/{name}"


class Cluster:
    """A cluster of pg_createcluster's, on a free port, named for this run."""

    def __init__(self, name):
        self.name = name
        self.port = free_port()
        self.data = None

    def create(self, settings):
        run(["pg_createcluster", PG_VERSION, self.name, "-p", str(self.port), "--start-conf=manual",
             "--", "--auth=trust", "--no-sync"], timeout=120)
        clusters_made.append(self.name)
        self.data = f"/var/lib/postgresql/{PG_VERSION}/{self.name}"
        # Appended: a later line of postgresql.conf wins over an earlier one.
        with open(f"/etc/postgresql/{PG_VERSION}/{self.name}/postgresql.conf", "a") as conf:
            conf.write("\n# scripts/failover\n")
            for key, value in settings.items():
                conf.write(f"{key} = '{value}'\n")

    def start(self):
        run(["pg_ctlcluster", "--skip-systemctl-redirect", PG_VERSION, self.name, "start"], timeout=60)

    def stop_immediately(self):
        run(["pg_ctlcluster", "--skip-systemctl-redirect", PG_VERSION, self.name, "stop", "-m", "immediate"],
            check=False, timeout=30)

    def promote(self):
        run(["pg_ctlcluster", "--skip-systemctl-redirect", PG_VERSION, self.name, "promote"], timeout=60)

    def url(self, db="postgres"):
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}"

    def psql(self, sql, timeout=60):
        out = run([pg_bin("psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", self.url(), "-c", sql],
                  timeout=timeout)
        return out.stdout.strip()


def drop_cluster(name):
    subprocess.run(["pg_dropcluster", "--stop", PG_VERSION, name], capture_output=True, timeout=60)


def cleanup():
    global server_proc
    if server_proc is not None and server_proc.poll() is None:
        server_proc.kill()
        server_proc.wait(timeout=10)
    server_proc = None
    while clusters_made:
        drop_cluster(clusters_made.pop())


def on_signal(signum, _frame):
    raise SystemExit(f"failover: stopped by signal {signum} (deadline {DEADLINE} s, or interrupted)")


class Proxy:
    """The endpoint: a TCP proxy on 127.0.0.1 whose target can move. `freeze` makes it
    a black hole: nothing is forwarded any more and nothing is closed, on the
    connections it has and on new ones, until `switch` gives new ones a target."""

    def __init__(self, target_port):
        self.port = free_port()
        self.target = target_port
        # Connections of a generation below this one are frozen.
        self.generation = 0
        self.frozen_below = 0
        self.loop = asyncio.new_event_loop()
        # Frozen connections are meant to hang until the proxy goes: what asyncio would
        # report about them then (tasks pending, cancelled callbacks) is no news.
        self.loop.set_exception_handler(lambda _loop, _context: None)
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self.loop.run_forever()

    async def _start(self):
        self.server = await asyncio.start_server(self._client, "127.0.0.1", self.port)
        self.ready.set()

    async def _client(self, reader, writer):
        # A black hole for new connections too: accepted, never answered.
        try:
            while self.target is None:
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            writer.close()
            return
        generation = self.generation
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return

        async def pump(src, dst):
            try:
                while True:
                    data = await src.read(65536)
                    if generation < self.frozen_below:
                        break
                    if not data:
                        break
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            if generation < self.frozen_below:
                # Frozen: keep every socket open, forward nothing.
                await asyncio.Event().wait()
            dst.close()

        try:
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        except asyncio.CancelledError:
            # The proxy is stopping: a task that ends without an exception, so that
            # asyncio's server has nothing to report.
            writer.close()
            up_writer.close()

    def freeze(self):
        """Every connection made so far stops forwarding and stays open; new ones are
        accepted and never answered until `switch`."""
        self.loop.call_soon_threadsafe(self._freeze)

    def _freeze(self):
        self.target = None
        self.generation += 1
        self.frozen_below = self.generation

    def switch(self, port):
        """Connections made from now on go to `port`; frozen ones stay frozen."""
        self.loop.call_soon_threadsafe(setattr, self, "target", port)

    def stop(self):
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)

    async def _shutdown(self):
        self.server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.loop.call_soon(self.loop.stop)


class Load:
    """CLIENTS threads, each its own principal, each sending keyed holds and bookings
    (a third with `confirm: true`) of one hour on four resources over 200 days, so that
    some are refused (409) and most are not."""

    def __init__(self, base_port, resources):
        self.port = base_port
        self.resources = resources
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answers = []  # dicts: key, body, status, reservation, started, ended, error
        self.day0 = (datetime.now(timezone.utc) + timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)

    def request_body(self, rng):
        start = self.day0 + timedelta(days=rng.randrange(200), hours=rng.randrange(24))
        return {
            "resource_id": rng.choice(self.resources),
            "start": start.isoformat().replace("+00:00", "Z"),
            "end": (start + timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
            "confirm": rng.random() < 0.33,
        }

    def client(self, n):
        rng = random.Random(n)
        principal = f"client-{n}"
        conn_holder = [None]
        while not self.stop.is_set():
            key = str(uuid.uuid4())
            body = self.request_body(rng)
            answer = send(self.port, principal, key, body, conn_holder)
            answer.update(key=key, body=body, principal=principal)
            with self.lock:
                self.answers.append(answer)
            time.sleep(0.1)

    def run_until(self, event):
        threads = [threading.Thread(target=self.client, args=(n,), daemon=True) for n in range(CLIENTS)]
        for t in threads:
            t.start()
        event.wait()
        self.stop.set()
        for t in threads:
            t.join(CLIENT_TIMEOUT + 5)


def send(port, principal, key, body, conn_holder):
    """POST /v1/reservations; the answer as a dict. `conn_holder[0]` is the client's
    keep-alive connection, replaced when it breaks."""
    started = time.monotonic()
    answer = {"started": started, "status": None, "reservation": None, "error": None, "replayed": None}
    conn = conn_holder[0]
    try:
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
        conn.request("POST", "/v1/reservations", body=json.dumps(body), headers={
            "content-type": "application/json", "x-principal": principal, "idempotency-key": key})
        resp = conn.getresponse()
        raw = resp.read()
        answer["status"] = resp.status
        answer["replayed"] = resp.getheader("idempotency-replayed")
        answer["retry_after"] = resp.getheader("retry-after")
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            doc = {"raw": raw[:200].decode(errors="replace")}
        if resp.status == 201:
            answer["reservation"] = {"id": doc.get("id"), "status": doc.get("status")}
        else:
            answer["problem"] = doc.get("type") or doc.get("raw")
            answer["detail"] = doc.get("detail")
        conn_holder[0] = conn
    except (OSError, http.client.HTTPException) as e:
        answer["error"] = f"{type(e).__name__}: {e}"
        try:
            conn.close()
        except Exception:
            pass
        conn_holder[0] = None
    answer["ended"] = time.monotonic()
    return answer


def api(port, method, path, body=None, principal="admin"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"content-type": "application/json", "x-principal": principal})
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    return resp.status, (json.loads(raw) if raw else None)


def start_server(url, migration_url, log_path):
    global server_proc
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "DB_"))}
    env.update({
        "PORT": str(port),
        "DATABASE_URL": url,
        "DATABASE_MIGRATION_URL": migration_url,
        "MAX_ACTIVE_HOLDS_PER_PRINCIPAL": "0",
        "SWEEP_INTERVAL_SECONDS": "1",
        "RUST_LOG": os.environ.get("RUST_LOG", "info"),
    })
    log = open(log_path, "w")
    server_proc = subprocess.Popen([SERVER_BIN], env=env, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        if server_proc.poll() is not None:
            raise RuntimeError(f"the dev server exited ({server_proc.returncode}); see {log_path}")
        try:
            status, _ = api(port, "GET", "/v1/health")
            if status == 200:
                return port
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the dev server did not become healthy; see {log_path}")


def stop_server():
    global server_proc
    if server_proc is not None:
        server_proc.kill()
        server_proc.wait(timeout=10)
        server_proc = None


def make_pair(tag):
    primary = Cluster(f"failover_{RUN_ID}_{tag}_p")
    standby = Cluster(f"failover_{RUN_ID}_{tag}_s")
    common = {"listen_addresses": "127.0.0.1", "fsync": "off", "max_connections": "200",
              "log_line_prefix": "%m [%p] %a: "}
    primary.create({**common, "synchronous_standby_names": "*", "wal_level": "replica"})
    primary.start()
    standby.create(common)
    # Emptied, not removed: the directory's parent is root's.
    run(["find", standby.data, "-mindepth", "1", "-delete"])
    run(as_postgres([pg_bin("pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
                     "-D", standby.data, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"]), timeout=120)
    standby.start()
    for _ in range(100):
        if primary.psql("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == "1":
            return primary, standby
        time.sleep(0.1)
    raise RuntimeError("the standby did not become synchronous")


def run_variant(variant):
    say(f"== {variant}")
    WORK.mkdir(parents=True, exist_ok=True)
    primary, standby = make_pair(variant.replace("-", ""))
    proxy = None
    if variant == "multihost":
        url = f"postgres://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/postgres"
    else:
        proxy = Proxy(primary.port)
        url = f"postgres://postgres@127.0.0.1:{proxy.port}/postgres"
    port = start_server(url, primary.url(), WORK / f"server-{variant}.log")
    resources = []
    for capacity in (1, 1, 1, 3):
        status, doc = api(port, "POST", "/v1/resources",
                          {"name": f"failover {capacity}", "capacity": capacity, "hold_ttl_seconds": 3600})
        if status != 201:
            raise RuntimeError(f"creating a resource: {status} {doc}")
        resources.append(doc["id"])

    load = Load(port, resources)
    done = threading.Event()
    runner = threading.Thread(target=load.run_until, args=(done,), daemon=True)
    runner.start()
    time.sleep(BEFORE_KILL)

    killed_at = time.monotonic()
    if variant == "blackhole":
        proxy.freeze()
    if variant == "moved-early":
        proxy.switch(standby.port)
    primary.stop_immediately()
    time.sleep(1.0 if variant != "moved-early" else 2.0)
    standby.promote()
    promoted_at = time.monotonic()
    if variant in ("moved", "blackhole"):
        proxy.switch(standby.port)
    time.sleep(AFTER_PROMOTE)
    done.set()
    runner.join(CLIENT_TIMEOUT + 10)

    report = check(variant, load, standby, killed_at, promoted_at)
    stop_server()
    if proxy:
        proxy.stop()
    for c in (standby, primary):
        drop_cluster(c.name)
        clusters_made.remove(c.name)
    return report


def check(variant, load, new_primary, killed_at, promoted_at):
    answers = load.answers
    failures = []
    by_status = {}
    for a in answers:
        label = str(a["status"]) if a["status"] is not None else "no answer"
        by_status[label] = by_status.get(label, 0) + 1
    say(f"{len(answers)} requests: " + ", ".join(f"{k}: {v}" for k, v in sorted(by_status.items())))
    five_hundreds = [a for a in answers if a["status"] is not None and a["status"] >= 500 and a["status"] != 503]
    if five_hundreds:
        failures.append(f"{len(five_hundreds)} answers of 5xx other than 503, such as "
                        f"{five_hundreds[0]['status']} {five_hundreds[0].get('detail')}")
    no_retry_after = [a for a in answers if a["status"] == 503 and not a.get("retry_after")]
    if no_retry_after:
        failures.append(f"{len(no_retry_after)} answers of 503 without Retry-After")
    unanswered = [a for a in answers if a["status"] is None]
    if unanswered:
        failures.append(f"{len(unanswered)} requests without an answer, such as {unanswered[0]['error']}")

    after_kill = [a for a in answers if a["ended"] >= killed_at]
    slowest = max((a["ended"] - a["started"] for a in after_kill), default=0.0)
    over_5 = sum(1 for a in after_kill if a["ended"] - a["started"] > 5.0)
    writes_after = sorted(a["ended"] for a in answers if a["status"] == 201 and a["started"] >= promoted_at)
    first_write = writes_after[0] - promoted_at if writes_after else None
    unavailable = [a for a in answers if a["status"] == 503]
    say(f"slowest answer of a request in flight at or after the kill: {slowest:.2f} s "
        f"({over_5} over 5 s); 503s: {len(unavailable)}")
    say("first write after the promotion: " + (f"{first_write:.2f} s" if first_write is not None else "none"))
    if first_write is None:
        failures.append("no write after the promotion")

    # Every key sent again: a final answer (201 or 4xx) is answered again as it was.
    resend = [dict(a) for a in answers]
    mismatched, still_unanswered, lock = [], [], threading.Lock()
    finals = {}

    def worker(chunk):
        conn_holder = [None]
        for a in chunk:
            for attempt in range(20):
                again = send(load.port, a["principal"], a["key"], a["body"], conn_holder)
                if again["status"] is not None and again["status"] < 500:
                    break
                time.sleep(0.25)
            with lock:
                finals[a["key"]] = again
                first_final = a["status"] is not None and a["status"] < 500
                if first_final and (again["status"] != a["status"] or again["reservation"] != a["reservation"]):
                    mismatched.append((a, again))
                if again["status"] is None or again["status"] >= 500:
                    still_unanswered.append((a, again))

    chunks = [resend[i::CLIENTS] for i in range(CLIENTS)]
    threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in chunks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if mismatched:
        a, again = mismatched[0]
        failures.append(f"{len(mismatched)} keys answered otherwise when sent again, such as "
                        f"{a['status']} {a['reservation'] or a.get('problem')} then "
                        f"{again['status']} {again['reservation'] or again.get('problem')}")
    if still_unanswered:
        failures.append(f"{len(still_unanswered)} keys without a final answer after the failover")

    # Every reservation acknowledged is on the new primary, in the status answered.
    acknowledged = {}
    for a in answers:
        if a["status"] == 201:
            acknowledged[a["reservation"]["id"]] = a["reservation"]["status"]
    for key, again in finals.items():
        if again["status"] == 201 and again["reservation"]["id"] not in acknowledged:
            acknowledged[again["reservation"]["id"]] = again["reservation"]["status"]
    stored = {}
    ids = list(acknowledged)
    for i in range(0, len(ids), 500):
        chunk = ",".join(f"'{x}'" for x in ids[i:i + 500])
        rows = new_primary.psql(f"SELECT id || ' ' || status FROM reservations WHERE id IN ({chunk})")
        for line in rows.splitlines():
            rid, status = line.split(" ")
            stored[rid] = status
    missing = [rid for rid in acknowledged if rid not in stored]
    wrong = [(rid, acknowledged[rid], stored[rid]) for rid in acknowledged
             if rid in stored and stored[rid] != acknowledged[rid]]
    say(f"acknowledged reservations: {len(acknowledged)}; on the new primary: {len(acknowledged) - len(missing)}")
    if missing:
        failures.append(f"{len(missing)} acknowledged reservations are not on the new primary, such as {missing[0]}")
    if wrong:
        failures.append(f"{len(wrong)} reservations in another status than answered, such as {wrong[0]}")

    over = new_primary.psql("""
        SELECT count(*) FROM (
            SELECT a.id
            FROM reservations a
            JOIN resources res ON res.id = a.resource_id
            JOIN reservations b ON b.resource_id = a.resource_id AND b.period @> a.starts_at
            WHERE a.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
              AND b.status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
              AND NOT (b.status = 'HELD' AND b.expires_at <= now())
            GROUP BY a.id, res.capacity
            HAVING sum(b.quantity) > res.capacity) over_capacity""")
    say(f"instants over capacity: {over}")
    if over != "0":
        failures.append(f"{over} reservations start at an instant over their resource's capacity")
    for f in failures:
        say(f"FAILED ({variant}): {f}")
    return {"variant": variant, "requests": len(answers), "statuses": by_status, "slowest": slowest,
            "over_5s": over_5, "first_write_after_promotion": first_write, "failures": failures}


def main():
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGALRM, on_signal)
    signal.alarm(DEADLINE)
    if os.geteuid() != 0:
        raise SystemExit("failover: pg_createcluster needs root")
    reports = []
    try:
        for variant in VARIANTS:
            reports.append(run_variant(variant))
    finally:
        cleanup()
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "report.json").write_text(json.dumps(reports, indent=2))
    failed = [r for r in reports if r["failures"]]
    for r in reports:
        fw = r["first_write_after_promotion"]
        say(f"{r['variant']}: first write {fw:.2f} s after the promotion, slowest answer {r['slowest']:.2f} s, "
            f"{len(r['failures'])} failures" if fw is not None else f"{r['variant']}: no write after the promotion")
    say(f"{len(reports) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
