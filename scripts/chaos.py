#!/usr/bin/env python3
"""Fault injection against the dev server and a throwaway PostgreSQL cluster it owns.

Run through `scripts/chaos` (which builds the dev server first). Standard library only.

Mixed concurrent load (holds, one-step bookings, bookings of two items (two resources in
either order, or a resource and any member of a pool), confirms, releases, cancels,
waitlist joins and leaves, every mutation under an Idempotency-Key) on resources of
capacity 1, 2, 5 and 1,000 with 1-2 s hold TTLs, while backends are terminated every few seconds, the cluster
is restarted (`pg_ctl restart -m fast` and `-m immediate`) and the server is killed with
SIGKILL in the middle of a burst and started again. Every key that got no final answer
(a 5xx, a broken connection, 409 idempotency-key-in-progress) is retried until it gets
one. Then the invariants are read from the database, not from the API:

  (a) capacity is never exceeded: now, and at every activation in a replay of the
      outbox event log (ordered by outbox.seq, per resource the commit order);
  (b) no CONFIRMED answer is lost;
  (c) one reservation (and one waitlist entry) per idempotency key;
  (d) no waiting entry could fit the free capacity once the sweeper has run;
  (e) every booking of several items is whole: its rows share one status and expiry;
  (f) every capacity-N resource's load timeline equals its bookings, recomputed in SQL
      (`resource_load_mismatches()`);
plus no HTTP 500 and a final answer for every key. Racers (the whole-bookings scenario)
hold bookings of two items and, at their expiry, confirm or extend them while rival
holds go for each item's resource at once; a sampler reads every resource's peak in SQL
each second of the load, and no sample may be over capacity. The last line is
`chaos: N passed, M failed`; the exit status is 1 when M > 0.

Environment (all optional): CHAOS_SERVER_BIN (the dev-server binary; scripts/chaos sets
it), CHAOS_LOAD_SECONDS (180), CHAOS_WORKERS (36), CHAOS_SEED, CHAOS_KEEP=1 (keep the
cluster's data directory), CHAOS_SERVER_<NAME>=value (passed to the server as <NAME>,
e.g. CHAOS_SERVER_DB_POOL_SIZE=8).
"""

import collections
import concurrent.futures
import datetime as dt
import glob
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".dev" / "chaos"  # logs and the report stay here after the run
T0 = time.monotonic()

LOAD_SECONDS = float(os.environ.get("CHAOS_LOAD_SECONDS", "180"))
WORKERS = int(os.environ.get("CHAOS_WORKERS", "36"))
SEED = int(os.environ.get("CHAOS_SEED", str(random.randrange(1 << 30))))
KEEP = os.environ.get("CHAOS_KEEP") == "1"
# The whole run, setup to report, stays under this (CI budget: 6 minutes with the build).
HARD_LIMIT_SECONDS = float(os.environ.get("CHAOS_HARD_LIMIT_SECONDS", "340"))
REQUEST_TIMEOUT = 15.0
# The longest a retry waits before trying its key again, whatever `Retry-After` says.
MAX_RETRY_AFTER_SECONDS = 10
SWEEP_INTERVAL_SECONDS = 1
ACTIVE = ("HELD", "CONFIRMING", "CONFIRMED")
ACTIVATE = ("reservation.held", "reservation.confirmed")
DEACTIVATE = ("reservation.released", "reservation.expired", "reservation.cancelled", "reservation.failed")


def now():
    return time.monotonic() - T0


def say(msg):
    print(f"[{now():6.1f}s] {msg}", flush=True)


# ---------------------------------------------------------------------------- cluster


def pg_bin(name):
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: [int(x) for x in p.split("/")[4].split(".") if x.isdigit()])
    if not candidates:
        raise SystemExit(f"chaos: {name} not found; install PostgreSQL")
    return candidates[-1]


def as_owner(cmd):
    """initdb and postgres refuse to run as root: run them as the postgres user then."""
    return (["runuser", "-u", "postgres", "--"] + cmd) if os.geteuid() == 0 else cmd


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A PostgreSQL cluster of our own on a free port: restarting it never touches the
    machine's main cluster."""

    def __init__(self):
        self.dir = WORK / "pg"
        self.port = free_port()
        self.log = WORK / "postgres.log"
        self.started = False

    def _dir_usable_by_owner(self):
        if os.geteuid() != 0:
            return True
        return subprocess.run(as_owner(["test", "-w", str(self.dir)]), capture_output=True).returncode == 0

    def init(self):
        self.stop_stale()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
            if not self._dir_usable_by_owner():
                # The checkout is not reachable by the postgres user (a home directory
                # with mode 700, say): fall back to a private directory under /tmp.
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = Path(tempfile.mkdtemp(prefix="chaos-pg-"))
                shutil.chown(self.dir, "postgres")
        self.data = self.dir / "data"
        self.log.touch()
        if os.geteuid() == 0:
            shutil.chown(self.log, "postgres")
        run(as_owner([pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"]))

    def stop_stale(self):
        stale = self.dir / "data"
        if (stale / "postmaster.pid").exists():
            subprocess.run(as_owner([pg_bin("pg_ctl"), "-D", str(stale), "-m", "immediate", "-w", "stop"]), capture_output=True)

    def options(self):
        # No Unix socket (its path length limits where the checkout may live): TCP only.
        return (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
                "-c fsync=off -c max_connections=200 -c log_line_prefix='%m [%p] %a: '")

    def pg_ctl(self, *args, check=True):
        cmd = as_owner([pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", self.options(), *args])
        return run(cmd, check=check)

    def start(self):
        self.pg_ctl("start")
        self.started = True

    def restart(self, mode):
        return self.pg_ctl("-m", mode, "restart", check=False)

    def stop(self):
        if self.started:
            subprocess.run(as_owner([pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]), capture_output=True)
            self.started = False
        if not KEEP:
            shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, db="chaos"):
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}"

    def psql(self, sql, db="chaos", timeout=60):
        out = subprocess.run([pg_bin("psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", self.url(db), "-f", "-"],
                             input=sql, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr.strip()}")
        return out.stdout

    def rows(self, sql):
        """Each row of `sql` as a dict (the query is wrapped in row_to_json)."""
        out = self.psql(f"SELECT row_to_json(q)::text FROM ({sql}) q;")
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def snapshot(self, queries):
        """Several queries read in one REPEATABLE READ transaction, so that they see one
        instant: {name: rows}."""
        parts = ["BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;"]
        for name, sql in queries.items():
            parts.append(f"\\echo @@{name}")
            parts.append(f"SELECT row_to_json(q)::text FROM ({sql}) q;")
        parts.append("COMMIT;")
        out = self.psql("\n".join(parts) + "\n", timeout=120)
        result, current = {name: [] for name in queries}, None
        for line in out.splitlines():
            if line.startswith("@@"):
                current = line[2:]
            elif line.strip():
                result[current].append(json.loads(line))
        return result


def run(cmd, check=True):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    return out


# ----------------------------------------------------------------------------- server


class Server:
    """The dev server as a child process. Its JSON log lines go to server.log with the
    time since the start of the run; errors and warnings are also kept in memory."""

    def __init__(self, binary, db_url):
        self.binary = binary
        self.port = free_port()
        self.db_url = db_url
        self.proc = None
        self.generation = 0
        self.log_path = WORK / "server.log"
        self.logf = open(self.log_path, "w", buffering=1)
        self.log_lock = threading.Lock()
        self.problems = []  # (t, generation, parsed JSON line) for ERROR and WARN lines
        self.pumps = []

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("UPSTREAM_", "INTENTS_", "EVENTS_", "AWS_", "DB_", "CHAOS_"))}
        env.update({
            "DATABASE_URL": self.db_url,
            "PORT": str(self.port),
            "AUTH_MODE": "header",
            "ADMIN_PRINCIPALS": "admin",
            "SWEEP_INTERVAL_SECONDS": str(SWEEP_INTERVAL_SECONDS),
            "HOLD_TTL_SECONDS": "2",
            "OFFER_TTL_SECONDS": "3",
            "AWS_LAMBDA_LOG_FORMAT": "JSON",
            "RUST_LOG": os.environ.get("CHAOS_RUST_LOG", "info"),
        })
        for k, v in os.environ.items():
            if k.startswith("CHAOS_SERVER_") and k != "CHAOS_SERVER_BIN":
                env[k[len("CHAOS_SERVER_"):]] = v
        return env

    def spawn(self):
        self.generation += 1
        gen = self.generation
        self.proc = subprocess.Popen([self.binary], env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
        pump = threading.Thread(target=self._pump, args=(self.proc, gen), daemon=True)
        pump.start()
        self.pumps.append(pump)
        return self.proc.pid

    def _pump(self, proc, gen):
        for raw in proc.stdout:
            t = now()
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.log_lock:
                self.logf.write(f"[{t:8.3f} gen{gen}] {line}\n")
            if '"ERROR"' in line or '"WARN"' in line:
                try:
                    parsed = json.loads(line)
                except ValueError:
                    parsed = {"level": "ERROR", "fields": {"message": line}}
                with self.log_lock:
                    if len(self.problems) < 20000:
                        self.problems.append((t, gen, parsed))

    def wait_healthy(self, limit=60.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the dev server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/v1/health")
                r = c.getresponse()
                r.read()
                c.close()
                if r.status == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the dev server did not become healthy in {limit:.0f} s; see {self.log_path}")

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill9()
        for p in self.pumps:
            p.join(timeout=2)


# ---------------------------------------------------------------------- HTTP and facts


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = 0
        self.hist = collections.Counter()
        self.by_route = collections.Counter()
        self.errors_500 = []  # the first few, with their request
        self.count_500 = 0
        self.watchers = []  # recovery: [name, t_from, t_first_success]

    def record(self, resp):
        with self.lock:
            self.sent += 1
            self.hist[resp.status if resp.status is not None else resp.error] += 1
            self.by_route[(resp.method, resp.route, resp.status if resp.status is not None else resp.error)] += 1
            if resp.status == 500:
                self.count_500 += 1
                if len(self.errors_500) < 20:
                    self.errors_500.append(resp)
            if resp.status is not None and 200 <= resp.status < 300:
                for w in self.watchers:
                    if w[2] is None and resp.t_sent >= w[1]:
                        w[2] = resp.t_recv

    def watch(self, name, t_from):
        with self.lock:
            w = [name, t_from, None]
            self.watchers.append(w)
            return w


STATS = Stats()
SERVER = None  # the Server


class Resp:
    __slots__ = ("method", "path", "route", "principal", "key", "status", "error", "body", "json", "retry_after", "t_sent", "t_recv")

    def slug(self):
        if isinstance(self.json, dict) and isinstance(self.json.get("type"), str):
            return self.json["type"].rsplit("/", 1)[-1]
        return None


def route_of(path):
    parts = path.split("?")[0].split("/")
    return "/".join("{id}" if len(p) == 36 and p.count("-") == 4 else p for p in parts)


class Client:
    """One keep-alive connection for one principal; any failure drops the connection."""

    def __init__(self, principal):
        self.principal = principal
        self.conn = None
        self.last_error = None

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None

    def request(self, method, path, body=None, key=None):
        headers = {"X-Principal": self.principal}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if key is not None:
            headers["Idempotency-Key"] = key
        r = Resp()
        r.method, r.path, r.route, r.principal, r.key = method, path, route_of(path), self.principal, key
        r.status = r.error = r.json = r.retry_after = None
        r.body = b""
        r.t_sent = now()
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=REQUEST_TIMEOUT)
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
            r.body = resp.read()
            r.status = resp.status
            r.retry_after = resp.getheader("Retry-After")
            if (resp.getheader("Connection") or "").lower() == "close":
                self.close()
        except (TimeoutError, socket.timeout):
            r.error = "timeout"
            self.close()
        except (OSError, http.client.HTTPException):
            r.error = "conn-error"
            self.close()
        r.t_recv = now()
        self.last_error = r.error
        if r.body:
            try:
                r.json = json.loads(r.body)
            except ValueError:
                pass
        STATS.record(r)
        return r


def is_final(r):
    """A final answer: any non-5xx, except 409 idempotency-key-in-progress."""
    if r.status is None or r.status >= 500:
        return False
    return not (r.status == 409 and r.slug() == "idempotency-key-in-progress")


class Op:
    """One mutation under one idempotency key, with every answer it got."""
    __slots__ = ("key", "principal", "kind", "method", "path", "body", "answers", "final", "not_before", "target",
                 "busy", "tries", "first_final")

    def __init__(self, principal, kind, method, path, body, target=None):
        self.key = f"chaos-{uuid.uuid4()}"
        self.principal, self.kind, self.method, self.path, self.body = principal, kind, method, path, body
        self.answers = []  # (status, json) of every final answer
        self.final = False
        self.not_before = 0.0
        self.target = target  # the reservation or entry a confirm/delete acts on
        self.busy = False  # its sender is still retrying it inline: the retrier leaves it alone
        self.tries = 0
        self.first_final = None


class Facts:
    """What the clients were told, for the checks."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ops = []
        self.pending = {}  # key -> Op without a final answer yet
        self.confirmed = set()  # reservation ids answered CONFIRMED
        self.deleted = set()  # reservation ids the clients sent a DELETE for
        self.retried_keys = set()  # keys that needed the retrier

    @property
    def retried(self):
        return len(self.retried_keys)

    def add(self, op):
        with self.lock:
            self.ops.append(op)
            if op.method == "DELETE" and op.kind in ("release", "cancel", "decline"):
                self.deleted.add(op.target)

    def answered(self, op, r):
        with self.lock:
            op.answers.append((r.status, r.json))
            op.final = True
            self.pending.pop(op.key, None)
            j = r.json if isinstance(r.json, dict) else {}
            if op.kind in ("hold", "book", "confirm") and r.status in (200, 201) and j.get("status") == "CONFIRMED":
                self.confirmed.add(j.get("id"))

    def park(self, op, wait):
        with self.lock:
            op.not_before = time.monotonic() + wait
            if op.key not in self.pending:
                self.pending[op.key] = op


FACTS = Facts()


def retry_after(r, default):
    try:
        return min(max(float(r.retry_after), 0.1), MAX_RETRY_AFTER_SECONDS)
    except (TypeError, ValueError):
        return default


def attempt(client, op):
    """One try of an op; True when it got its final answer."""
    r = client.request(op.method, op.path, op.body, op.key)
    op.tries += 1
    if op.first_final is None:
        op.first_final = is_final(r)
    if is_final(r):
        FACTS.answered(op, r)
        return r
    wait = retry_after(r, 0.3) if r.status == 409 or r.retry_after else 0.3
    FACTS.park(op, wait)
    return None


def mutate(client, op, tries=3, stop=None):
    """Sends an op, retrying a few times inline; what is still unanswered is left to the
    retrier (FACTS.pending)."""
    op.busy = True
    FACTS.add(op)
    try:
        for i in range(tries):
            r = attempt(client, op)
            if r is not None:
                return r
            if i + 1 < tries and not (stop is not None and stop.is_set()):
                time.sleep(min(max(op.not_before - time.monotonic(), 0.05), 2.0))
        return None
    finally:
        op.busy = False


def retry_pending(deadline, pool, clients):
    """Retries every parked key once it is due, until none is left or the deadline."""
    while time.monotonic() < deadline:
        with FACTS.lock:
            due = [op for op in FACTS.pending.values() if not op.busy and op.not_before <= time.monotonic()]
            left = len(FACTS.pending)
        if left == 0:
            return 0
        if not due:
            time.sleep(0.2)
            continue
        with FACTS.lock:
            for op in due:
                if not op.final and op.key not in FACTS.retried_keys:
                    FACTS.retried_keys.add(op.key)

        def one(op):
            c = clients.setdefault(op.principal + "/" + threading.current_thread().name, Client(op.principal))
            attempt(c, op)

        list(pool.map(one, due))
    with FACTS.lock:
        return len(FACTS.pending)


# ------------------------------------------------------------------------------- load


class World:
    def __init__(self, resources, pool):
        self.resources = resources  # list of dicts: id, capacity, hold_ttl_seconds, offer_ttl_seconds
        self.pool = pool  # the id of a pool of the capacity-1 resources
        day = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
        self.day = day

    def slot(self, rnd, resource=None):
        res = resource or rnd.choice(self.resources)
        start = self.day + dt.timedelta(days=rnd.randrange(2), hours=rnd.randrange(8, 14))
        end = start + dt.timedelta(hours=rnd.choice((1, 1, 2, 3)))
        qty = 1 if res["capacity"] == 1 else rnd.randint(1, min(res["capacity"], 3))
        return res, iso(start), iso(end), qty


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def body(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def worker(i, world, stop, deadline):
    rnd = random.Random(SEED * 1000 + i)
    me = f"user{i:02d}"
    client = Client(me)
    held, booked, entries = [], [], []
    while not stop.is_set() and time.monotonic() < deadline:
        choices = [("hold", 25), ("book", 14), ("group", 10), ("join", 9), ("read", 5)]
        if held:
            choices += [("confirm", 14), ("release", 8), ("extend", 6)]
        if booked:
            choices += [("cancel", 9)]
        if entries:
            choices += [("poll", 10), ("leave", 3)]
        action = rnd.choices([c for c, _ in choices], [w for _, w in choices])[0]
        if action in ("hold", "book"):
            res, start, end, qty = world.slot(rnd)
            payload = {"resource_id": res["id"], "start": start, "end": end, "quantity": qty}
            if action == "book":
                payload["confirm"] = True
            r = mutate(client, Op(me, action, "POST", "/v1/reservations", body(payload)), stop=stop)
            if r is not None and r.status == 201:
                (held if action == "hold" else booked).append(r.json["id"])
        elif action == "group":
            # Two resources in a random order (so A+B races B+A), or one and any member
            # of the pool; one item in four confirmed at once.
            first, second = rnd.sample(world.resources, 2)
            _, start, end, _ = world.slot(rnd, first)
            items = [{"resource_id": first["id"]},
                     {"pool_id": world.pool} if rnd.random() < 0.3 else {"resource_id": second["id"]}]
            payload = {"items": items, "start": start, "end": end}
            if rnd.random() < 0.25:
                payload["confirm"] = True
            kind = "book" if payload.get("confirm") else "hold"
            r = mutate(client, Op(me, kind, "POST", "/v1/reservations", body(payload)), stop=stop)
            if r is not None and r.status == 201:
                (held if kind == "hold" else booked).append(r.json["id"])
        elif action == "confirm":
            rid = held.pop(rnd.randrange(len(held)))
            r = mutate(client, Op(me, "confirm", "POST", f"/v1/reservations/{rid}/confirm", b"{}", rid), stop=stop)
            if r is not None and r.status == 200 and r.json.get("status") == "CONFIRMED":
                booked.append(rid)
        elif action == "extend":
            rid = rnd.choice(held)
            mutate(client, Op(me, "extend", "POST", f"/v1/reservations/{rid}/extend", b"{}", rid), stop=stop)
        elif action in ("release", "cancel"):
            pool = held if action == "release" else booked
            rid = pool.pop(rnd.randrange(len(pool)))
            mutate(client, Op(me, action, "DELETE", f"/v1/reservations/{rid}", None, rid), stop=stop)
        elif action == "join":
            res, start, end, qty = world.slot(rnd)
            r = mutate(client, Op(me, "join", "POST", f"/v1/resources/{res['id']}/waitlist",
                                  body({"start": start, "end": end, "quantity": qty})), stop=stop)
            if r is not None and r.status == 201:
                entries.append(r.json["id"])
        elif action == "poll":
            eid = rnd.choice(entries)
            r = client.request("GET", f"/v1/waitlist/{eid}")
            if r.status == 200 and isinstance(r.json, dict):
                st = r.json.get("status")
                if st == "OFFERED":
                    rid = r.json.get("reservation_id")
                    pick = rnd.random()
                    if pick < 0.6:
                        c = mutate(client, Op(me, "confirm", "POST", f"/v1/reservations/{rid}/confirm", b"{}", rid), stop=stop)
                        if c is not None and c.status == 200 and c.json.get("status") == "CONFIRMED":
                            booked.append(rid)
                    elif pick < 0.8:
                        mutate(client, Op(me, "decline", "DELETE", f"/v1/reservations/{rid}", None, rid), stop=stop)
                    else:
                        mutate(client, Op(me, "leave", "DELETE", f"/v1/waitlist/{eid}", None, eid), stop=stop)
                    entries.remove(eid)
                elif st != "WAITING":
                    entries.remove(eid)
        elif action == "leave":
            eid = entries.pop(rnd.randrange(len(entries)))
            mutate(client, Op(me, "leave", "DELETE", f"/v1/waitlist/{eid}", None, eid), stop=stop)
        elif action == "read":
            res = rnd.choice(world.resources)
            frm, to = iso(world.day), iso(world.day + dt.timedelta(days=2))
            client.request("GET", f"/v1/resources/{res['id']}/availability?from={frm}&to={to}")
        # Keep the lists short: old holds have lapsed anyway.
        del held[:-8]
        del entries[:-12]
        del booked[:-12]
        if client.last_error:
            stop.wait(0.2)  # the server is down: do not spin
    client.close()


RACERS = int(os.environ.get("CHAOS_RACERS", "6"))


def racer(i, world, stop, deadline):
    """The whole-bookings scenario: a booking of two items (either order), then, at its
    expiry (a little before or after it), its owner confirms or extends it while a
    rival holds each item's resource over the same range, all at once."""
    rnd = random.Random(SEED * 1000 + 500 + i)
    me = f"racer{i:02d}"
    clients = [Client(me)] + [Client(f"rival{i:02d}{k}") for k in range(2)]
    pool = concurrent.futures.ThreadPoolExecutor(3, thread_name_prefix=f"racer{i}")
    while not stop.is_set() and time.monotonic() < deadline:
        first, second = rnd.sample(world.resources, 2)
        _, start, end, _ = world.slot(rnd, first)
        items = [{"resource_id": first["id"]}, {"resource_id": second["id"]}]
        r = mutate(clients[0], Op(me, "hold", "POST", "/v1/reservations",
                                  body({"items": items, "start": start, "end": end})), stop=stop)
        if r is None or r.status != 201 or not r.json.get("expires_at"):
            stop.wait(0.05)
            continue
        rid = r.json["id"]
        expires = ts(r.json["expires_at"])
        at = expires + dt.timedelta(milliseconds=rnd.uniform(-60, 40))
        wait = (at - dt.datetime.now(dt.timezone.utc)).total_seconds()
        if wait > 0 and stop.wait(wait):
            break
        what = rnd.choice(("confirm", "extend"))
        ops = [(clients[0], Op(me, what, "POST", f"/v1/reservations/{rid}/{what}", b"{}", rid))]
        for k, res in enumerate((first, second)):
            payload = {"resource_id": res["id"], "start": start, "end": end,
                       "quantity": 1 if res["capacity"] == 1 else rnd.randint(1, res["capacity"])}
            if rnd.random() < 0.5:
                payload["confirm"] = True
            kind = "book" if payload.get("confirm") else "hold"
            ops.append((clients[k + 1], Op(clients[k + 1].principal, kind, "POST", "/v1/reservations", body(payload))))
        list(pool.map(lambda co: mutate(co[0], co[1], stop=stop), ops))
    pool.shutdown(wait=True)
    for c in clients:
        c.close()


class Sampler(threading.Thread):
    """Reads every resource's peak of live claims in SQL once a second during the load."""

    def __init__(self, cluster, stop):
        super().__init__(daemon=True)
        self.cluster, self.stop = cluster, stop
        self.samples, self.over = 0, []

    def run(self):
        while not self.stop.wait(1.0):
            try:
                rows = self.cluster.rows(CAPACITY_NOW)
            except (RuntimeError, subprocess.TimeoutExpired, ValueError):
                continue  # the cluster is restarting: no sample
            self.samples += 1
            over = [f"{r['name']} {r['peak']}/{r['capacity']}" for r in rows if r["peak"] > r["capacity"]]
            if over:
                self.over.append(f"{now():.0f} s: " + ", ".join(over))


def burst(world, n=40):
    """n clients at once, each a single try: half on one contested capacity-1 slot, half
    on slots of the capacity-5 resources (writes that commit). The caller kills the
    server once a third of them were answered; what got no answer is left to the retrier."""
    one_seat = next(r for r in world.resources if r["capacity"] == 1)
    many = [r for r in world.resources if r["capacity"] == 5]
    start = world.day + dt.timedelta(days=1, hours=9)
    go = threading.Barrier(n)
    ops, answered = [], []

    def one(j):
        me = f"burst{j:02d}"
        c = Client(me)
        if j % 2 == 0:
            payload = {"resource_id": one_seat["id"], "start": iso(start), "end": iso(start + dt.timedelta(hours=1 + j % 3)),
                       "confirm": j % 4 == 0}
        else:
            s = world.day + dt.timedelta(days=j % 2, hours=8 + j % 6)
            payload = {"resource_id": many[j % len(many)]["id"], "start": iso(s), "end": iso(s + dt.timedelta(hours=1))}
        op = Op(me, "book" if payload.get("confirm") else "hold", "POST", "/v1/reservations", body(payload))
        ops.append(op)
        try:
            go.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass
        mutate(c, op, tries=1)
        answered.append(j)
        c.close()

    threads = [threading.Thread(target=one, args=(j,), daemon=True) for j in range(n)]
    for t in threads:
        t.start()
    return threads, ops, answered


class Terminator(threading.Thread):
    """Terminates the server's database sessions every few seconds."""

    def __init__(self, cluster, stop):
        super().__init__(daemon=True)
        self.cluster, self.stop = cluster, stop
        self.paused = threading.Event()
        self.rounds = 0
        self.killed = 0

    def run(self):
        rnd = random.Random(SEED + 7)
        while not self.stop.wait(rnd.uniform(2.0, 4.0)):
            if self.paused.is_set():
                continue
            try:
                out = self.cluster.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                        "WHERE application_name = 'reservations' AND pid <> pg_backend_pid();", timeout=10)
                self.rounds += 1
                self.killed += int(out.strip() or 0)
            except (RuntimeError, subprocess.TimeoutExpired, ValueError):
                pass


# ----------------------------------------------------------------------------- checks


def peak(claims, start, end):
    """The peak load of claims (start, end, qty) over [start, end), ranges half-open."""
    events = []
    for s, e, q in claims:
        if s < end and e > start:
            events.append((max(s, start), q))
            events.append((min(e, end), -q))
    events.sort(key=lambda x: (x[0], x[1]))
    load = top = 0
    for _, d in events:
        load += d
        top = max(top, load)
    return top


def ts(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


class Checks:
    def __init__(self):
        self.results = []  # (name, ok, detail)

    def add(self, name, ok, detail):
        self.results.append((name, ok, detail))
        say(f"check {'PASS' if ok else 'FAIL'}: {name}: {detail}")


CAPACITY_NOW = (
    "WITH act AS (SELECT resource_id, starts_at, ends_at, quantity FROM reservations "
    "  WHERE status IN ('HELD', 'CONFIRMING', 'CONFIRMED') AND NOT (status = 'HELD' AND expires_at <= now())), "
    "ev AS (SELECT resource_id, starts_at AS at, quantity AS delta FROM act "
    "  UNION ALL SELECT resource_id, ends_at, -quantity FROM act), "
    "run AS (SELECT resource_id, at, sum(delta) OVER (PARTITION BY resource_id ORDER BY at, delta "
    "  ROWS UNBOUNDED PRECEDING) AS load FROM ev) "
    "SELECT r.name, r.capacity, max(run.load) AS peak FROM run JOIN resources r ON r.id = run.resource_id "
    "GROUP BY r.id, r.name, r.capacity ORDER BY r.name")


def check_capacity_now(cluster, checks):
    rows = cluster.rows(CAPACITY_NOW)
    over = [r for r in rows if r["peak"] > r["capacity"]]
    detail = ", ".join(f"{r['name']} peak {r['peak']}/{r['capacity']}" for r in rows) or "no active reservations"
    checks.add("(a) capacity now (active, unlapsed)", not over,
               detail if not over else "OVER CAPACITY: " + ", ".join(f"{r['name']} {r['peak']}/{r['capacity']}" for r in over))


def check_samples(checks, sampler):
    checks.add("(a) capacity every second of the load (SQL samples)", sampler.samples > 0 and not sampler.over,
               f"{sampler.samples} samples, {len(sampler.over)} over capacity"
               + ("; first: " + " | ".join(sampler.over[:4]) if sampler.over else ""))


def check_replay(checks, snap):
    """Replays the outbox per resource in commit order. Every path that raises a
    resource's load holds its row lock, so one resource's transactions do not overlap
    and their events' seq order is their commit order (a booking of several written down
    whole from another of its resources lowers this one's load without its lock: the
    steps go in the order of their last event, below). Within one transaction it is not:
    PostgreSQL runs the outbox inserts of one statement's data-modifying CTEs in an order
    of its own, so an offer's `held` row can take a lower seq than the `expired` row of
    the lapsed hold its statement wrote down first. So the events of one transaction on
    one resource (one `created_at`: the request's single clock reading) form one step:
    all of them apply, then each reservation the step activated is checked.

    A reservation is active from its first held/confirmed event until its
    released/expired/cancelled/failed one; a hold that lapsed but was not written
    EXPIRED yet still counts, as the server must write lapsed holds down before (or in
    the transaction that) it inserts anything overlapping them."""
    events, reservations = snap["events"], snap["reservations"]
    cap = {r["id"]: r["capacity"] for r in snap["resources"]}
    name = {r["id"]: r["name"] for r in snap["resources"]}
    expires = {r["id"]: r["expires_at"] for r in reservations}
    # A booking's one event claims every item on its own resource: each item is a claim
    # of its own, named (reservation, item) and replayed on its resource.
    steps = {}  # (resource, created_at) -> (event, claim, quantity) in seq order
    for ev in events:
        p = ev["payload"]
        items = p.get("items") or [{"resource_id": p["resource_id"], "quantity": p["quantity"]}]
        for i, item in enumerate(items):
            claim = (p["reservation_id"], i)
            steps.setdefault((item["resource_id"], ev["created_at"]), []).append((ev, claim, int(item["quantity"])))
    active = collections.defaultdict(dict)
    state, last, confirmed_at = {}, {}, {}
    violations, anomalies = [], []
    activations = with_lapsed = 0
    by_source = collections.Counter()
    # In the order of each step's last event: a booking of several written down whole
    # from another of its resources writes this resource's rows without its lock (a
    # write-down only lowers a load), so its event can fall between the events of a
    # transaction that holds the lock; that transaction waited for it, and its last
    # event comes after it.
    for (res, created_at), step in sorted(steps.items(), key=lambda kv: kv[1][-1][0]["seq"]):
        activated = []
        for ev, claim, quantity in step:
            p, kind = ev["payload"], ev["kind"]
            rid = p["reservation_id"]
            last[rid] = (ev["seq"], kind, p.get("status"))
            if kind == "reservation.confirmed":
                confirmed_at.setdefault(rid, ev["seq"])
            if kind in ACTIVATE:
                if claim in state:
                    if state[claim] == "ended":
                        anomalies.append(f"seq {ev['seq']}: {kind} of {rid} after it ended")
                    continue
                active[res][claim] = (ts(p["start"]), ts(p["end"]), quantity)
                state[claim] = "active"
                activated.append((ev, claim))
                activations += 1
            elif kind in DEACTIVATE:
                if state.get(claim) == "active":
                    del active[res][claim]
                elif claim not in state:
                    anomalies.append(f"seq {ev['seq']}: {kind} of {rid} before any held/confirmed event")
                state[claim] = "ended"
        for ev, claim in activated:
            p, kind, rid = ev["payload"], ev["kind"], ev["payload"]["reservation_id"]
            if state[claim] != "active":
                continue
            s0, e0, _ = active[res][claim]
            at = ts(created_at)
            # A booking of several is written down whole with its one event, whichever
            # item's resource found the lapse: every item counts until that event.
            top = peak(list(active[res].values()), s0, e0)
            if top > cap[res]:
                lapsed = [o for o, (s, e, _) in active[res].items()
                          if o != claim and s < e0 and e > s0 and o[0] not in confirmed_at
                          and expires[o[0]] is not None and ts(expires[o[0]]) <= at]
                with_lapsed += bool(lapsed)
                by_source[f"{kind.split('.')[1]} {p.get('source')}"] += 1
                violations.append(f"seq {ev['seq']}: {kind} ({p.get('source')}) of {rid} on {name[res]} brings the load to "
                                  f"{top} > {cap[res]} over {p['start'][5:16]}..{p['end'][11:16]}, overlapping "
                                  f"{len(lapsed)} lapsed hold(s) not yet written EXPIRED")
    detail = (f"{len(events)} events in {len(steps)} transactions, {activations} activations replayed, "
              f"{len(violations)} over capacity")
    if violations:
        detail += (f" ({with_lapsed} of them next to lapsed holds not yet written EXPIRED, "
                   f"{len(violations) - with_lapsed} not; by event and source: "
                   + ", ".join(f"{k}: {n}" for k, n in by_source.most_common()) + "); first: " + " | ".join(violations[:4]))
    checks.add("(a) capacity at every commit (outbox replay)", not violations, detail)

    # The replay means something only if the log tells each reservation's whole story.
    mismatched = []
    for r in reservations:
        # An item's story is its booking's: the lead's events, replayed on its resource.
        lead = r["booking_id"] or r["id"]
        st = state.get((lead, r["item"] or 0))
        seen = last.get(lead)
        if st is None:
            mismatched.append(f"{r['id']} ({r['status']}) has no held/confirmed event")
        elif (r["status"] in ACTIVE) != (st == "active"):
            mismatched.append(f"{r['id']} is {r['status']} but the log says {st}")
        elif seen[2] != r["status"] and r["status"] != "CONFIRMING":
            mismatched.append(f"{r['id']} is {r['status']} but its last event (seq {seen[0]}, {seen[1]}) says {seen[2]}")
    ids = {r["id"] for r in reservations}
    mismatched += [f"event for unknown reservation {rid}" for rid, _ in state if rid not in ids]
    problems = mismatched + anomalies
    checks.add("(a) event log matches the reservations table", not problems,
               f"{len(reservations)} reservations, {len(problems)} mismatches"
               + ("; first: " + " | ".join(problems[:5]) if problems else ""))


def check_confirmed(checks, reservations):
    status = {r["id"]: r["status"] for r in reservations}
    lost = []
    for rid in sorted(FACTS.confirmed):
        st = status.get(rid)
        if st == "CONFIRMED" or (st == "CANCELLED" and rid in FACTS.deleted):
            continue
        lost.append(f"{rid} answered CONFIRMED, now {st or 'MISSING'}")
    checks.add("(b) no CONFIRMED answer lost", not lost,
               f"{len(FACTS.confirmed)} CONFIRMED answers, {len(lost)} lost" + ("; " + " | ".join(lost[:5]) if lost else ""))


def check_idempotency(checks, snap):
    reservations, entries, keys = snap["reservations"], snap["entries"], snap["keys"]
    problems = [f"key {d['key']} stored {d['n']} times" for d in snap["duplicate_keys"]]
    stored = {(k["principal"], k["key"]): k for k in keys}
    # From the database: every reservation made by a request, and every waitlist entry,
    # is the stored answer of exactly one key that created it (201; every such request
    # carried a key). Other keys may answer it only as a join of a range the principal
    # already waits for: 200 with that entry (one place per principal and range).
    by_id = collections.defaultdict(list)
    rejoins = collections.defaultdict(list)
    for k in keys:
        if not k["id"]:
            continue
        if k["status"] == 200 and k["route"] == "POST /v1/resources/{id}/waitlist":
            rejoins[k["id"]].append(k)
        else:
            by_id[k["id"]].append(k["key"])
    problems += [f"{rid} is the stored answer of {len(ks)} keys" for rid, ks in by_id.items() if len(ks) > 1]
    owners = {e["id"]: e["owner"] for e in entries}
    problems += [f"key {k['key']} rejoined {rid}, which is not {k['principal']}'s entry"
                 for rid, ks in rejoins.items() for k in ks if owners.get(rid) != k["principal"]]
    # A booking of several items is made by its request as its lead row (the booking's
    # id); the other items' rows name it in booking_id.
    made = [r["id"] for r in reservations if r["source"] == "request" and r["booking_id"] in (None, r["id"])]
    made += [e["id"] for e in entries]
    orphans = [rid for rid in made if rid not in by_id]
    problems += [f"{rid} was created but no key's stored answer names it" for rid in orphans[:20]]
    # From the clients: each key's answers agree, name what the database stored for the
    # key, and no id was answered for two keys.
    answered_by = collections.defaultdict(set)
    creating = 0
    for op in FACTS.ops:
        if op.kind not in ("hold", "book", "join", "confirm"):
            continue
        outcomes = {(s, (j or {}).get("id") if isinstance(j, dict) else None) for s, j in op.answers}
        if len(outcomes) > 1:
            problems.append(f"key {op.key} got different answers: {sorted(outcomes, key=str)}")
        if op.kind == "confirm":
            continue
        creating += 1
        for s, rid in outcomes:
            if s in (200, 201, 202) and rid:
                if not (op.kind == "join" and s == 200):
                    answered_by[rid].add(op.key)
                db = stored.get((op.principal, op.key))
                if db is None or db["id"] != rid:
                    problems.append(f"key {op.key} answered {rid}, the database stored {db and db['id']}")
    problems += [f"{rid} answered for {len(ks)} keys" for rid, ks in answered_by.items() if len(ks) > 1]
    checks.add("(c) one reservation or entry per idempotency key", not problems,
               f"{creating} creating keys sent, {len(answered_by)} ids answered, {len(keys)} keys stored, "
               f"{len(orphans)} orphans" + ("; first: " + " | ".join(problems[:5]) if problems else ""))


# Waiting entries with a future range that fit the free capacity now. `{grace}` seconds:
# holds that lapsed less than this long ago still count as taken (the sweeper, every
# SWEEP_INTERVAL_SECONDS, may not have reached them yet); 0 is the plain definition.
WAITING_THAT_FITS = """
WITH act AS (
  SELECT resource_id, starts_at, ends_at, quantity FROM reservations
  WHERE status IN ('HELD', 'CONFIRMING', 'CONFIRMED')
    AND NOT (status = 'HELD' AND expires_at <= now() - interval '{grace} seconds')
)
SELECT w.id, r.name, w.starts_at, w.ends_at, w.quantity, r.capacity, coalesce(p.load, 0) AS load
FROM waitlist_entries w JOIN resources r ON r.id = w.resource_id
LEFT JOIN LATERAL (
  SELECT max(load) AS load FROM (
    SELECT sum(delta) OVER (ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS load FROM (
      SELECT greatest(a.starts_at, w.starts_at) AS at, a.quantity AS delta FROM act a
        WHERE a.resource_id = w.resource_id AND a.starts_at < w.ends_at AND a.ends_at > w.starts_at
      UNION ALL
      SELECT least(a.ends_at, w.ends_at), -a.quantity FROM act a
        WHERE a.resource_id = w.resource_id AND a.starts_at < w.ends_at AND a.ends_at > w.starts_at
    ) e
  ) s
) p ON true
WHERE w.status = 'WAITING' AND w.starts_at > now() AND coalesce(p.load, 0) + w.quantity <= r.capacity
ORDER BY w.seq
"""


def check_load_timeline(cluster, checks):
    """(f) The load timeline the capacity-N holds judge by equals the bookings it counts,
    recomputed from the rows, after the kills, restarts and terminated backends."""
    wrong = cluster.rows("SELECT resource_id, during::text, recorded, recomputed FROM resource_load_mismatches()")
    pieces = cluster.rows("SELECT count(*) AS n, count(DISTINCT resource_id) AS resources, coalesce(max(load), 0) AS peak "
                          "FROM resource_load WHERE load > 0")[0]
    checks.add("(f) the load timeline equals the bookings", not wrong and pieces["n"] > 0,
               f"{pieces['n']} pieces with a load on {pieces['resources']} resources (highest {pieces['peak']}), "
               f"{len(wrong)} differences" + ("; first: " + " | ".join(
                   f"{r['resource_id']} {r['during']}: {r['recorded']} recorded, {r['recomputed']} counted"
                   for r in wrong[:5]) if wrong else ""))


def check_bookings_whole(cluster, checks):
    """(e) The rows of a booking of several items share their status and expiry: no
    item was confirmed, released, expired or handed over without the others."""
    split = cluster.rows(
        "SELECT booking_id, count(*) AS items, string_agg(DISTINCT status, '/') AS statuses "
        "FROM reservations WHERE booking_id IS NOT NULL GROUP BY booking_id "
        "HAVING count(DISTINCT status) > 1 OR count(DISTINCT expires_at) > 1 OR count(*) < 2")
    bookings = cluster.rows("SELECT count(DISTINCT booking_id) AS n, count(*) AS rows, "
                            "count(pool_id) AS picked FROM reservations WHERE booking_id IS NOT NULL")[0]
    checks.add("(e) every booking of several items is whole", not split and bookings["n"] > 0,
               f"{bookings['n']} bookings of several items ({bookings['rows']} rows, {bookings['picked']} picked from "
               f"the pool), {len(split)} split" + ("; first: " + " | ".join(
                   f"{r['booking_id']}: {r['items']} rows, {r['statuses']}" for r in split[:5]) if split else ""))


def check_waitlist(cluster, checks):
    """After the load and the sweeps, no waiting entry may fit the free capacity. Offers
    keep lapsing and passing on for a while, and a lapse frees capacity that only the
    next sweep hands over, so an entry fails the check only when it fits on three reads
    over about five seconds, counting holds that lapsed in the last 3 s as still taken.
    The plain counts (active, unlapsed only) are reported alongside."""
    grace = 2 * SWEEP_INTERVAL_SECONDS + 1
    samples, plain = [], []
    for i in range(3):
        if i:
            time.sleep(2.5)
        snap = cluster.snapshot({"grace": WAITING_THAT_FITS.format(grace=grace), "plain": WAITING_THAT_FITS.format(grace=0)})
        samples.append({r["id"]: r for r in snap["grace"]})
        plain.append(len(snap["plain"]))
    stuck = [samples[-1][k] for k in samples[-1] if all(k in s for s in samples)]
    waiting = int(cluster.psql("SELECT count(*) FROM waitlist_entries WHERE status = 'WAITING';").strip())
    detail = (f"{waiting} entries waiting; fitting but not offered per read: {plain} "
              f"(counting holds lapsed < {grace} s ago as taken: {[len(s) for s in samples]}); on all three reads: {len(stuck)}")
    if stuck:
        detail += "; first: " + " | ".join(
            f"{s['id']} on {s['name']} {s['starts_at']}..{s['ends_at']} qty {s['quantity']} (load {s['load']}/{s['capacity']})"
            for s in stuck[:5])
    checks.add("(d) every waiting entry that fits has an offer", not stuck, detail)


# ----------------------------------------------------------------------------- report


def show_500s(server):
    if not STATS.errors_500:
        return
    say(f"the first {min(5, len(STATS.errors_500))} HTTP 500s, with the server's error lines around them:")
    with server.log_lock:
        problems = list(server.problems)
    for r in STATS.errors_500[:5]:
        print(f"  t={r.t_sent:.3f}-{r.t_recv:.3f}s {r.method} {r.path} principal={r.principal} key={r.key}")
        print(f"    body: {r.body.decode('utf-8', 'replace')[:300]}")
        near = [(t, p) for t, _, p in problems if r.t_sent - 0.05 <= t <= r.t_recv + 0.05]
        mine = [(t, p) for t, p in near if (p.get("span") or {}).get("principal") == r.principal] or near
        for t, p in mine[:4]:
            f = p.get("fields", {})
            span = p.get("span") or {}
            err = " ".join(str(f.get("error", "")).split())
            print(f"    server [{t:.3f}s] {p.get('level')} {f.get('message')}: {err} "
                  f"(route {span.get('route')}, principal {span.get('principal')})"[:600])


def error_summary(server):
    with server.log_lock:
        problems = list(server.problems)
    kinds = collections.Counter()
    for _, _, p in problems:
        if p.get("level") != "ERROR":
            continue
        f = p.get("fields", {})
        err = " ".join(str(f.get("error", "")).split("DETAIL:")[0].split())
        err = re.sub(r"\b\d+\b", "N", re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<id>", err))[:200]
        kinds[(f.get("status", "-"), f.get("message", ""), err, (p.get("span") or {}).get("route"))] += 1
    if kinds:
        say("server ERROR lines by status and cause (the 503s are expected during the planned outages):")
        for (status, msg, err, route), n in sorted(kinds.items(), key=lambda kv: (str(kv[0][0]) != "500", -kv[1]))[:16]:
            print(f"  {n:6d}  [{status}] {msg}: {err}" + (f" ({route})" if route else ""))


def report(checks, faults, terminator):
    say("== report")
    print(f"  requests sent: {STATS.sent}")
    hist = sorted(STATS.hist.items(), key=lambda kv: (isinstance(kv[0], str), kv[0]))
    print("  status codes: " + ", ".join(f"{k}: {v}" for k, v in hist))
    routes = collections.defaultdict(collections.Counter)
    for (m, route, st), n in STATS.by_route.items():
        routes[f"{m} {route}"][st] += n
    for route, c in sorted(routes.items()):
        print(f"    {route}: " + ", ".join(f"{k}: {v}" for k, v in sorted(c.items(), key=lambda kv: str(kv[0]))))
    print(f"  HTTP 500s: {STATS.count_500}")
    with FACTS.lock:
        print(f"  idempotency keys: {len(FACTS.ops)} mutations sent, {FACTS.retried} needed the retrier, "
              f"{len(FACTS.pending)} left without a final answer")
    print(f"  backend terminations: {terminator.rounds} rounds, {terminator.killed} sessions terminated")
    for f in faults:
        w = f["watch"]
        rec = f"{w[2] - w[1]:.2f} s" if w[2] is not None else "never"
        print(f"  {f['name']} at {f['t']:.1f}s: {f['what']}; recovered {rec} after the restart (first successful request)")
    for name, ok, detail in checks.results:
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    passed = sum(1 for _, ok, _ in checks.results if ok)
    failed = len(checks.results) - passed
    json.dump({
        "seed": SEED, "requests": STATS.sent, "status": {str(k): v for k, v in STATS.hist.items()},
        "http_500": STATS.count_500,
        "faults": [{"name": f["name"], "at": round(f["t"], 2), "what": f["what"],
                    "recovery_seconds": None if f["watch"][2] is None else round(f["watch"][2] - f["watch"][1], 3)} for f in faults],
        "checks": [{"name": n, "ok": ok, "detail": d} for n, ok, d in checks.results],
    }, open(WORK / "report.json", "w"), indent=2)
    print(f"  logs: {WORK / 'server.log'}, {WORK / 'postgres.log'}, report: {WORK / 'report.json'}")
    return passed, failed


# ------------------------------------------------------------------------------- main


def main():
    global SERVER
    binary = os.environ.get("CHAOS_SERVER_BIN")
    if not binary or not os.access(binary, os.X_OK):
        raise SystemExit("chaos: set CHAOS_SERVER_BIN to the dev-server binary (scripts/chaos does)")
    WORK.mkdir(parents=True, exist_ok=True)
    say(f"seed {SEED}, {WORKERS} workers, {LOAD_SECONDS:.0f} s of load, work dir {WORK}")
    cluster = Cluster()
    server = None
    stop = threading.Event()
    checks = Checks()
    faults = []
    terminator = Terminator(cluster, stop)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)

    def watchdog():
        say(f"chaos: over the hard limit of {HARD_LIMIT_SECONDS:.0f} s; stopping")
        try:
            if server:
                server.kill9()
            cluster.stop()
        finally:
            print("chaos: 0 passed, 1 failed", flush=True)
            os._exit(1)

    dog = threading.Timer(HARD_LIMIT_SECONDS, watchdog)
    dog.daemon = True
    dog.start()
    try:
        cluster.init()
        cluster.start()
        cluster.psql("CREATE DATABASE chaos;", db="postgres")
        say(f"PostgreSQL {cluster.psql('SHOW server_version;').strip()} on 127.0.0.1:{cluster.port}, data {cluster.data}")
        server = Server(binary, cluster.url())
        SERVER = server
        server.spawn()
        server.wait_healthy()
        say(f"dev server on 127.0.0.1:{server.port} (pid {server.proc.pid}), log {server.log_path}")

        admin = Client("admin")
        resources = []
        for cap, n, hold, offer in ((1, 3, 1, 2), (2, 3, 2, 2), (5, 2, 2, 3), (1000, 1, 2, 3)):
            for j in range(n):
                r = admin.request("POST", "/v1/resources", body({"name": f"chaos-cap{cap}-{j}", "capacity": cap,
                                                                 "hold_ttl_seconds": hold + (j % 2 if cap == 1 else 0),
                                                                 "offer_ttl_seconds": offer, "max_hold_seconds": 30}))
                if r.status != 201:
                    raise RuntimeError(f"creating a resource answered {r.status}: {r.body[:300]!r}")
                resources.append(r.json)
        ones = [r["id"] for r in resources if r["capacity"] == 1]
        r = admin.request("POST", "/v1/pools", body({"name": "chaos-pool", "resource_ids": ones, "strategy": "least_booked"}))
        if r.status != 201:
            raise RuntimeError(f"creating the pool answered {r.status}: {r.body[:300]!r}")
        pool = r.json["id"]
        admin.close()
        say("resources: " + ", ".join(f"{r['name']} (ttl {r['hold_ttl_seconds']}/{r['offer_ttl_seconds']} s)" for r in resources))
        world = World(resources, pool)

        load_start = time.monotonic()
        load_end = load_start + LOAD_SECONDS
        threads = [threading.Thread(target=worker, args=(i, world, stop, load_end), daemon=True, name=f"w{i}")
                   for i in range(WORKERS)]
        threads += [threading.Thread(target=racer, args=(i, world, stop, load_end), daemon=True, name=f"r{i}")
                    for i in range(RACERS)]
        for t in threads:
            t.start()
        terminator.start()
        sampler = Sampler(cluster, stop)
        sampler.start()
        retry_pool = concurrent.futures.ThreadPoolExecutor(12, thread_name_prefix="retry")
        retry_clients = {}
        retrier_stop = threading.Event()

        def retrier():
            while not retrier_stop.is_set():
                retry_pending(time.monotonic() + 1.0, retry_pool, retry_clients)
                retrier_stop.wait(0.5)

        retrier_thread = threading.Thread(target=retrier, daemon=True)
        retrier_thread.start()

        def progress():
            last = 0
            while not stop.wait(10):
                with STATS.lock:
                    sent, h = STATS.sent, dict(STATS.hist)
                with FACTS.lock:
                    pend = len(FACTS.pending)
                say(f"load: {sent} requests ({(sent - last) / 10:.0f}/s), " + ", ".join(
                    f"{k}: {v}" for k, v in sorted(h.items(), key=lambda kv: str(kv[0]))) + f"; {pend} keys awaiting retry")
                last = sent

        threading.Thread(target=progress, daemon=True).start()
        say(f"load started: {WORKERS} workers; backends terminated every 2-4 s")

        plan = [(0.14, "pg-restart-fast"), (0.33, "server-kill-9"), (0.55, "pg-restart-immediate"), (0.78, "server-kill-9")]
        for frac, name in plan:
            at = load_start + frac * LOAD_SECONDS
            while time.monotonic() < at:
                time.sleep(0.05)
            t = now()
            if name.startswith("pg-restart"):
                mode = name.rsplit("-", 1)[1]
                terminator.paused.set()
                watch = STATS.watch(name, now())
                out = cluster.restart(mode)
                took = now() - t
                terminator.paused.clear()
                if out.returncode != 0:
                    raise RuntimeError(f"pg_ctl restart -m {mode} failed: {out.stderr.strip()}")
                what = f"pg_ctl restart -m {mode} took {took:.1f} s"
            else:
                flying, burst_ops, answered = burst(world)
                until = time.monotonic() + 3
                while len(answered) < len(flying) // 3 and time.monotonic() < until:
                    time.sleep(0.002)
                server.kill9()
                killed_at = now()
                time.sleep(1.0)
                server.spawn()
                watch = STATS.watch(name, now())
                server.wait_healthy()
                for th in flying:
                    th.join(timeout=REQUEST_TIMEOUT + 5)
                unanswered = sum(1 for op in burst_ops if not op.first_final)
                what = (f"SIGKILL mid-burst of {len(flying)} ({unanswered} of them got no final answer), "
                        f"started again {now() - killed_at:.1f} s later (healthy)")
            faults.append({"name": name, "t": t, "what": what, "watch": watch})
            say(f"fault: {name}: {what}")

        while time.monotonic() < load_end:
            time.sleep(0.1)
        stop.set()
        say("load stopped; waiting for the workers")
        for t in threads:
            t.join(timeout=REQUEST_TIMEOUT * 3)
        retrier_stop.set()
        retrier_thread.join(timeout=30)
        with FACTS.lock:
            pend = len(FACTS.pending)
        say(f"retrying the {pend} keys that have no final answer yet (until each gets one, at most 45 s)")
        left = retry_pending(time.monotonic() + 45, retry_pool, retry_clients)
        retry_pool.shutdown(wait=True)
        with FACTS.lock:
            total = len(FACTS.ops)
            leftover = list(FACTS.pending.values())
        checks.add("every idempotency key got a final answer", left == 0,
                   f"{total} keyed mutations, {FACTS.retried} retried after the first tries, {left} without a final answer"
                   + ("; first: " + " | ".join(f"{o.method} {o.path} key {o.key}" for o in leftover[:5]) if leftover else ""))

        settle = max(max(r["hold_ttl_seconds"], r["offer_ttl_seconds"]) for r in resources) + 2 * SWEEP_INTERVAL_SECONDS + 1
        say(f"settling {settle} s so that every hold and offer has lapsed and the sweeper ran")
        time.sleep(settle)

        snap = cluster.snapshot({
            "resources": "SELECT id, name, capacity FROM resources",
            "reservations": "SELECT id, resource_id, status, source, expires_at, booking_id, item FROM reservations",
            "entries": "SELECT id, owner, status FROM waitlist_entries",
            "events": "SELECT seq, kind, payload, created_at FROM outbox WHERE kind LIKE 'reservation.%' ORDER BY seq",
            "keys": "SELECT principal, route, key, state, response_status AS status, "
                    "CASE WHEN state = 'completed' AND response_status IN (200, 201, 202) "
                    # A keyed hold made in one statement stores the reservation itself,
                    # from which its answer is rendered; other answers, their body.
                    "THEN coalesce(response_reservation ->> 'id', "
                    "convert_from(response_body, 'UTF8')::jsonb ->> 'id') END AS id FROM idempotency_keys "
                    "WHERE route IN ('POST /v1/reservations', 'POST /v1/resources/{id}/waitlist')",
            "duplicate_keys": "SELECT principal, method, route, key, count(*) AS n FROM idempotency_keys "
                              "GROUP BY 1, 2, 3, 4 HAVING count(*) > 1",
        })
        check_capacity_now(cluster, checks)
        check_samples(checks, sampler)
        check_replay(checks, snap)
        check_confirmed(checks, snap["reservations"])
        check_idempotency(checks, snap)
        check_waitlist(cluster, checks)
        check_bookings_whole(cluster, checks)
        check_load_timeline(cluster, checks)
        checks.add("no HTTP 500", STATS.count_500 == 0, f"{STATS.count_500} answers with status 500")
    except KeyboardInterrupt as e:
        stop.set()
        checks.add("the run completed", False, f"interrupted ({e})")
    except Exception as e:  # noqa: BLE001 - any failure of the harness is a failed run
        stop.set()
        checks.add("the run completed", False, f"{type(e).__name__}: {e}")
    finally:
        stop.set()
        if server is not None:
            server.stop()
            show_500s(server)
            error_summary(server)
        cluster.stop()
        dog.cancel()
    passed, failed = report(checks, faults, terminator)
    print(f"chaos: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
