#!/usr/bin/env python3
"""Cold start of the seven function binaries, measured against a Lambda Runtime API of
our own (standard library only). Run through `scripts/cold-start`, which builds them.

For each function and round: spawn the release binary with the environment a
deployment gives it and AWS_LAMBDA_RUNTIME_API pointing at a small HTTP server here.

- init: from the spawn to its first `GET /2018-06-01/runtime/invocation/next`
  (process start, configuration, the lazily connecting pool, the clients);
- first invoke: from the moment the event is handed out on /next to the
  `POST .../invocation/{id}/response`; it opens the first database connection;
- warm invoke: the median of the same work invoked again (WARM_INVOKES times);
- first - warm: what the first invoke costs beyond a warm one (mostly the database
  connection: TCP, startup and authentication, and the pool's check).

The median of the rounds is printed, and PASS/MISS of the init time against 20 ms.

"No I/O at init" is checked per function by starting it with DATABASE_URL at a closed
port (127.0.0.1:1): it must still reach /next. Under strace, when present, the same
start also lists every connect() before /next (only the Runtime API's is expected)
and lists the files opened beyond the loader's.

With --watch, each function also runs once per round under cargo-lambda's emulator
(`cargo lambda watch`): the issue's own measure, first invoke minus a warm one, both
timed by the client through the Invoke API, with the cold invoke sent before the
process starts so that it includes the init.
"""

import argparse
import atexit
import copy
import datetime as dt
import http.server
import json
import os
import queue
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "tests" / "events"
# The order of one round: admin makes the resource that reserve holds, and confirm
# confirms reserve's holds.
ORDER = ["availability", "admin", "reserve", "confirm", "sweeper", "intent-worker", "notifier"]
# The order of the table (docs/benchmarks.md's).
TABLE = ["reserve", "confirm", "availability", "admin", "sweeper", "intent-worker", "notifier"]
INIT_GOAL_MS = 20.0
WARM_INVOKES = 3
CLOSED = "127.0.0.1:1"  # nothing listens on port 1
RESERVATION_PLACEHOLDER = "00000000-0000-0000-0000-000000000002"

INIT_TIMEOUT = 15.0
INVOKE_TIMEOUT = 30.0

children = []  # every process started here, killed at exit
EXTRA_ENV = {}  # --env NAME=VALUE, for experiments


def now():
    return time.perf_counter()


def ms(seconds):
    return seconds * 1000.0


def kill(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def kill_all():
    for p in children:
        kill(p)


def spawn(argv, env, log):
    # Its own process group, so that strace and the function under it die together.
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, process_group=0)
    children.append(p)
    return p


def tail(path, n=20):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


class RuntimeApi(http.server.ThreadingHTTPServer):
    """The Lambda Runtime API (2018-06-01) for one function process."""

    daemon_threads = True

    def __init__(self, function):
        super().__init__(("127.0.0.1", 0), Handler)
        self.function = function
        self.port = self.server_address[1]
        self.events = queue.Queue()
        self.cond = threading.Condition()
        self.polls = []  # times of the GET /next requests
        self.handed = {}  # request id -> time its event was handed out
        self.answers = {}  # request id -> (time, "response" | "error", body)
        self.init_error = None
        self.closing = False
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def invoke(self, payload, proc, timeout=INVOKE_TIMEOUT):
        """Hands `payload` to the function; returns (ms, kind, body)."""
        rid = str(uuid.uuid4())
        self.events.put((rid, json.dumps(payload).encode()))
        deadline = now() + timeout
        with self.cond:
            while rid not in self.answers:
                if proc.poll() is not None:
                    raise RuntimeError(f"the process exited ({proc.returncode}) during the invoke")
                left = deadline - now()
                if left <= 0:
                    raise RuntimeError(f"no answer in {timeout:.0f} s")
                self.cond.wait(min(left, 0.2))
            t, kind, body = self.answers[rid]
        return ms(t - self.handed[rid]), kind, body

    def wait_first_poll(self, proc, timeout=INIT_TIMEOUT):
        """The time of the first GET /next, or an exception."""
        deadline = now() + timeout
        with self.cond:
            while not self.polls:
                if self.init_error is not None:
                    raise RuntimeError(f"init error: {self.init_error}")
                if proc.poll() is not None:
                    raise RuntimeError(f"the process exited ({proc.returncode}) before /next")
                left = deadline - now()
                if left <= 0:
                    raise RuntimeError(f"no /next in {timeout:.0f} s")
                self.cond.wait(min(left, 0.05))
            return self.polls[0]

    def handle_error(self, request, client_address):
        pass  # the function is killed mid-poll at the end of each run

    def close(self):
        self.closing = True
        self.shutdown()
        self.server_close()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def read_body(self):
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self):
        t = now()
        api = self.server
        if self.path != "/2018-06-01/runtime/invocation/next":
            return self.reply(404, b'{"errorMessage":"not found"}')
        with api.cond:
            api.polls.append(t)
            api.cond.notify_all()
        while True:  # long poll until an event is queued
            try:
                rid, body = api.events.get(timeout=0.2)
                break
            except queue.Empty:
                if api.closing:
                    self.close_connection = True
                    return
        deadline_ms = int(time.time() * 1000) + 60_000
        arn = f"arn:aws:lambda:us-east-1:123456789012:function:{api.function}"
        with api.cond:
            api.handed[rid] = now()
        self.reply(
            200,
            body,
            [
                ("Lambda-Runtime-Aws-Request-Id", rid),
                ("Lambda-Runtime-Deadline-Ms", str(deadline_ms)),
                ("Lambda-Runtime-Invoked-Function-Arn", arn),
                ("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000;Sampled=0"),
            ],
        )

    def do_POST(self):
        t = now()
        api = self.server
        body = self.read_body()
        m = re.fullmatch(r"/2018-06-01/runtime/invocation/([^/]+)/(response|error)", self.path)
        with api.cond:
            if m:
                api.answers[m.group(1)] = (t, m.group(2), body)
            elif self.path == "/2018-06-01/runtime/init/error":
                api.init_error = body.decode(errors="replace")
            api.cond.notify_all()
        self.reply(202 if m or api.init_error else 404, b'{"status":"OK"}')


# ---------------------------------------------------------------- events


def fixture(name, ids=()):
    value = json.loads((EVENTS / f"{name}.json").read_text())

    def walk(v):
        if isinstance(v, str):
            for placeholder, real in ids:
                v = v.replace(placeholder, real)
            return v
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    return walk(value)


def with_body(event, body):
    event = copy.deepcopy(event)
    text = json.dumps(body)
    event["body"] = text
    event["headers"]["content-length"] = str(len(text))
    return event


def with_key(event):
    event = copy.deepcopy(event)
    event["headers"]["idempotency-key"] = f"cold-start-{uuid.uuid4()}"
    return event


def rfc3339(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class Workload:
    """One event per invoke for each function, each invoke doing the same work: a
    health check (SELECT 1); a new resource of capacity 1000; a hold of one place of it
    for an hour in 30 days (fresh idempotency key); the confirm of one of those holds
    (fresh key); a sweep; an SQS batch of an unknown intent and an unreadable message
    (the worker looks the intent up and reports the unreadable one as failed)."""

    def __init__(self):
        self.resource = None
        self.holds = []
        day = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=30)).replace(
            hour=0, minute=0, second=0, microsecond=0
        )
        self.start, self.end = rfc3339(day + dt.timedelta(hours=10)), rfc3339(day + dt.timedelta(hours=11))

    def event(self, function):
        if function == "availability":
            return fixture("health")
        if function == "admin":
            body = {"name": "Cold start", "capacity": 1000, "authority": "local"}
            return with_body(fixture("create_resource"), body)
        if function == "reserve":
            if self.resource is None:
                raise RuntimeError("no resource to hold (admin failed)")
            body = {"resource_id": self.resource, "start": self.start, "end": self.end, "quantity": 1, "confirm": False}
            return with_key(with_body(fixture("create_reservation"), body))
        if function == "confirm":
            if not self.holds:
                raise RuntimeError("no hold to confirm (reserve failed)")
            return with_key(fixture("confirm_reservation", [(RESERVATION_PLACEHOLDER, self.holds.pop(0))]))
        if function == "sweeper":
            return fixture("scheduled")
        if function == "intent-worker":
            return fixture("sqs_intents_batch")
        if function == "notifier":
            return fixture("sqs_events_batch")
        raise ValueError(function)

    def check(self, function, kind, raw):
        """Raises unless the answer is the expected one; keeps the ids others need."""
        if kind != "response":
            raise RuntimeError(f"the function answered an error: {raw[:400]!r}")
        out = json.loads(raw)
        if function in ("availability", "admin", "reserve", "confirm"):
            want = {"availability": 200, "admin": 201, "reserve": 201, "confirm": 200}[function]
            if out.get("statusCode") != want:
                raise RuntimeError(f"status {out.get('statusCode')}, expected {want}: {out.get('body')}")
            body = json.loads(out.get("body") or "null")
            if function == "admin" and self.resource is None:
                self.resource = body["id"]
            if function == "reserve":
                self.holds.append(body["id"])
        elif function == "sweeper":
            if out.get("failed") != []:
                raise RuntimeError(f"sweep report: {out}")
        elif function in ("intent-worker", "notifier"):
            # The intent worker: an unknown intent; the notifier: the message that is
            # no event (the other one no endpoint wants).
            if len(out.get("batchItemFailures", [])) != 1:
                raise RuntimeError(f"batch response: {out}")


# ---------------------------------------------------------------- database


def psql(url, sql, timeout=60):
    r = subprocess.run(
        ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if r.returncode != 0:
        raise RuntimeError(f"psql: {r.stderr.strip()}")
    return r.stdout


class Database:
    """A throwaway database on the server of `admin_url`, migrated with psql."""

    def __init__(self, admin_url):
        self.admin_url = admin_url
        self.name = f"coldstart_{uuid.uuid4().hex[:12]}"
        psql(admin_url, f'CREATE DATABASE "{self.name}"')
        self.url = re.sub(r"/[^/?]*(\?|$)", f"/{self.name}\\1", admin_url.rstrip("/"), count=1)
        if not re.search(r"//[^/]*/", self.url):
            self.url = admin_url.rstrip("/") + "/" + self.name
        atexit.register(self.drop)
        # The migration step: the migrations in version order, then every function in
        # one transaction with check_function_bodies off, so that a body naming a
        # function of a later file is resolved when it first runs (shared::db::migrate).
        migrations = sorted(ROOT.glob("migrations/V*.sql"), key=lambda p: int(p.name[1:].split("__")[0]))
        functions = sorted(ROOT.glob("sql/functions/*.sql"))
        steps = [(m.name, m.read_text()) for m in migrations]
        steps.append(
            ("sql/functions", "SET check_function_bodies = off;\n" + "".join(f.read_text() for f in functions))
        )
        for name, sql in steps:
            r = subprocess.run(
                ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-1", "-d", self.url, "-f", "-"],
                input=sql,
                capture_output=True,
                text=True,
                timeout=120,
            )
            if r.returncode != 0:
                raise RuntimeError(f"migration {name}: {r.stderr.strip()}")

    def drop(self):
        try:
            psql(self.admin_url, f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        except Exception as e:  # noqa: BLE001 - best effort at exit
            print(f"cold-start: could not drop {self.name}: {e}", file=sys.stderr)


# ---------------------------------------------------------------- runs


def function_env(function, database_url, runtime_api):
    """What the deployment (template.yaml) and the Lambda service give the function;
    the queues and the upstream point at a closed port: an invoke here sends nothing."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "AWS_LAMBDA_RUNTIME_API": runtime_api,
        "AWS_LAMBDA_FUNCTION_NAME": function,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "AWS_LAMBDA_LOG_FORMAT": "JSON",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_SESSION_TOKEN": "test",
        "AWS_ENDPOINT_URL_SQS": f"http://{CLOSED}",
        "RUST_LOG": "info",
        "DATABASE_URL": database_url,
        "AUTH_MODE": "jwt",
        "EVENTS_QUEUE_URL": f"http://{CLOSED}/123456789012/events.fifo",
        "INTENTS_QUEUE_URL": f"http://{CLOSED}/123456789012/intents.fifo",
        "UPSTREAM_BASE_URL": f"http://{CLOSED}",
        "UPSTREAM_TOKEN": "test",
        **EXTRA_ENV,
    } | ({"EVENTS_QUEUE_URL": ""} if function == "notifier" else {})


def measure(function, binary, database_url, workload, logs):
    """One cold start and its invokes: {init, first, warm, first_minus_warm} in ms."""
    api = RuntimeApi(function)
    log = open(logs / f"{function}.log", "ab")
    env = function_env(function, database_url, f"127.0.0.1:{api.port}")
    t0 = now()
    proc = spawn([str(binary)], env, log)
    try:
        init = ms(api.wait_first_poll(proc) - t0)
        latencies = []
        for _ in range(1 + WARM_INVOKES):
            took, kind, body = api.invoke(workload.event(function), proc)
            workload.check(function, kind, body)
            latencies.append(took)
        first, warm = latencies[0], statistics.median(latencies[1:])
        return {"init": init, "first": first, "warm": warm, "first_minus_warm": first - warm}
    except Exception as e:
        raise RuntimeError(f"{function}: {e}\n--- {logs / (function + '.log')}:\n{tail(logs / (function + '.log'))}")
    finally:
        kill(proc)
        log.close()
        api.close()


# The dynamic loader's and the runtime's own reads (libc, /proc/self, /sys of the cgroup).
LOADER_FILES = re.compile(r"/etc/ld\.so\.cache|/(usr/)?lib(64)?/.*|/proc/.*|/sys/.*")


def no_io_check(function, binary, logs):
    """Starts the function with its database at a closed port; it must reach /next.
    Under strace: the connect() calls before /next, and the files opened."""
    api = RuntimeApi(function)
    env = function_env(function, f"postgres://postgres@{CLOSED}/nothing", f"127.0.0.1:{api.port}")
    trace = logs / f"{function}.strace"
    argv = [str(binary)]
    if shutil.which("strace"):
        argv = ["strace", "-f", "-qq", "-e", "trace=connect,openat,open", "-o", str(trace)] + argv
    log = open(logs / f"{function}.noio.log", "ab")
    proc = spawn(argv, env, log)
    result = {"reached_next": False, "connects": None, "files": None}
    try:
        api.wait_first_poll(proc, timeout=30)  # strace slows the start down
        result["reached_next"] = True
    except RuntimeError as e:
        result["error"] = str(e)
    finally:
        kill(proc)
        log.close()
        api.close()
    if trace.exists():
        lines = trace.read_text(errors="replace").splitlines()
        connects = [line for line in lines if " connect(" in line and f"htons({api.port})" not in line]
        opened = [line for line in lines if ("openat(" in line or " open(" in line) and "= -1" not in line]
        result["connects"] = [re.sub(r"^\d+\s+", "", c) for c in connects]
        paths = {m.group(1) for o in opened if (m := re.search(r'"([^"]*)"', o))}
        result["files"] = sorted(p for p in paths if not LOADER_FILES.fullmatch(p))
    return result


# ---------------------------------------------------------------- cargo lambda watch


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post_json(url, payload, timeout=INVOKE_TIMEOUT):
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST")
    req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def start_watch(logs):
    """`cargo lambda watch` serving only the Runtime and Invoke APIs; returns (process, port)."""
    port = free_port()
    log = open(logs / "watch.log", "ab")
    argv = ["cargo", "lambda", "watch", "--only-lambda-apis", "--ignore-changes", "--invoke-address", "127.0.0.1",
            "--invoke-port", str(port)]
    watch = spawn(argv, dict(os.environ), log)
    log.close()
    deadline = now() + 60
    while True:
        if watch.poll() is not None:
            raise RuntimeError(f"cargo lambda watch exited:\n{tail(logs / 'watch.log')}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return watch, port
        except OSError:
            if now() > deadline:
                kill(watch)
                raise RuntimeError("cargo lambda watch did not listen in 60 s")
            time.sleep(0.1)


def watch_rounds(binaries, database_url, rounds, logs):
    """First invoke minus a warm one under `cargo lambda watch`, timed by the client.
    One emulator per round: it knows a function by its binary's name, so each name
    gets one process per emulator (a killed one may have left a poll behind)."""
    results = {f: [] for f in ORDER}
    for _ in range(rounds):
        workload = Workload()
        watch, port = start_watch(logs)
        try:
            for function in ORDER:
                if function == "sweeper":
                    psql(database_url, "UPDATE outbox SET published_at = now() WHERE published_at IS NULL")
                results[function].append(watch_one(function, binaries[function], database_url, workload, port, logs))
        finally:
            kill(watch)
    return results


def watch_one(function, binary, database_url, workload, port, logs):
    url = f"http://127.0.0.1:{port}/2015-03-31/functions/{function}/invocations"
    env = function_env(function, database_url, f"http://127.0.0.1:{port}/.rt/{function}")
    cold = {}

    def cold_invoke():
        try:
            cold["raw"] = post_json(url, workload.event(function), INIT_TIMEOUT + INVOKE_TIMEOUT)
            cold["end"] = now()
        except Exception as e:  # noqa: BLE001 - reported below
            cold["error"] = e

    log = open(logs / f"{function}.watch.log", "ab")
    proc = None
    try:
        # The cold invoke goes out first and waits in the emulator for the process,
        # which starts right after: from the spawn to the answer is the init plus the
        # first invoke, as on Lambda.
        thread = threading.Thread(target=cold_invoke, daemon=True)
        thread.start()
        time.sleep(0.2)
        t0 = now()
        proc = spawn([str(binary)], env, log)
        thread.join(INIT_TIMEOUT + INVOKE_TIMEOUT)
        if "raw" not in cold:
            raise RuntimeError(cold.get("error", "no answer"))
        workload.check(function, "response", cold["raw"])
        warm = []
        for _ in range(WARM_INVOKES):
            t = now()
            raw = post_json(url, workload.event(function))
            warm.append(ms(now() - t))
            workload.check(function, "response", raw)
        return {"cold": ms(cold["end"] - t0), "warm": statistics.median(warm)}
    except Exception as e:
        raise RuntimeError(f"{function} under cargo lambda watch: {e}\n{tail(logs / (function + '.watch.log'))}")
    finally:
        if proc is not None:
            kill(proc)
        log.close()


# ---------------------------------------------------------------- report


def summarize(paths):
    """Paths, those of a directory with many of them as one count."""
    by_dir = {}
    for p in paths:
        by_dir.setdefault(os.path.dirname(p), []).append(p)
    parts = []
    for d, ps in sorted(by_dir.items()):
        parts += [f"{len(ps)} files in {d}/"] if len(ps) > 3 else ps
    return ", ".join(parts)


def fmt(x):
    return f"{x:.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", required=True, type=Path, help="where the release binaries are")
    parser.add_argument("--database-url", required=True, help="a server to create a throwaway database on")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--watch", action="store_true", help="also measure under cargo lambda watch")
    parser.add_argument("--keep-logs", action="store_true")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="one more variable for the functions (an experiment)")
    args = parser.parse_args()
    EXTRA_ENV.update(kv.split("=", 1) for kv in args.env)

    atexit.register(kill_all)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: sys.exit(130))

    binaries = {f: args.bin_dir / f for f in ORDER}
    for f, b in binaries.items():
        if not b.is_file():
            sys.exit(f"cold-start: no binary {b}")
    logs = Path(tempfile.mkdtemp(prefix="cold-start-"))
    if not args.keep_logs:
        atexit.register(shutil.rmtree, logs, True)
    print(f"cold-start: logs in {logs}", file=sys.stderr)

    noio = {}
    for f in ORDER:  # also brings each binary into the page cache before the timed runs
        noio[f] = no_io_check(f, binaries[f], logs)

    db = Database(args.database_url)
    print(f"cold-start: database {db.name}, {args.rounds} rounds", file=sys.stderr)
    runs = {f: [] for f in ORDER}
    for r in range(args.rounds):
        workload = Workload()
        for f in ORDER:
            if f == "sweeper":
                # The events of this round's writes would be relayed to a queue that is
                # not there: mark them sent, so that every sweep does the same work.
                psql(db.url, "UPDATE outbox SET published_at = now() WHERE published_at IS NULL")
            runs[f].append(measure(f, binaries[f], db.url, workload, logs))
        print(f"cold-start: round {r + 1} done", file=sys.stderr)

    watched = watch_rounds(binaries, db.url, args.rounds, logs) if args.watch else None

    med = lambda f, k: statistics.median(x[k] for x in runs[f])  # noqa: E731
    print()
    print(f"Cold start, own Runtime API: median of {args.rounds} starts per function "
          f"(warm: median of {WARM_INVOKES} invokes after the first), ms")
    print()
    print(f"| function | init | init max | first invoke | warm invoke | first - warm | init <= {INIT_GOAL_MS:.0f} ms |")
    print("|---|---|---|---|---|---|---|")
    for f in TABLE:
        init = med(f, "init")
        verdict = "PASS" if init <= INIT_GOAL_MS else "**MISS**"
        print(f"| {f} | {fmt(init)} | {fmt(max(x['init'] for x in runs[f]))} | {fmt(med(f, 'first'))} | "
              f"{fmt(med(f, 'warm'))} | {fmt(med(f, 'first_minus_warm'))} | {verdict} |")
    print()
    print("first - warm includes the first database connection (TCP, startup, authentication),")
    print("which the pool opens on the first invoke, not at init.")
    print()
    print("No I/O at init: started with DATABASE_URL at a closed port (127.0.0.1:1)")
    print()
    print("| function | reached /next | connect() before /next, besides the Runtime API | files opened besides the loader's |")
    print("|---|---|---|---|")
    for f in TABLE:
        c = noio[f]
        reached = "yes" if c["reached_next"] else f"**no**: {c.get('error', '')}"
        connects = "n/a (no strace)" if c["connects"] is None else (
            "none" if not c["connects"] else "**" + "; ".join(c["connects"]) + "**")
        files = "n/a" if c["files"] is None else (summarize(c["files"]) or "none")
        print(f"| {f} | {reached} | {connects} | {files} |")

    if watched:
        print()
        print(f"Under cargo lambda watch (Invoke API, client-side times): median of {args.rounds} starts, ms")
        print()
        print("| function | first invoke (init included) | warm invoke | first - warm |")
        print("|---|---|---|---|")
        for f in TABLE:
            cold = statistics.median(x["cold"] for x in watched[f])
            warm = statistics.median(x["warm"] for x in watched[f])
            diff = statistics.median(x["cold"] - x["warm"] for x in watched[f])
            print(f"| {f} | {fmt(cold)} | {fmt(warm)} | {fmt(diff)} |")

    failed = [f for f in ORDER if not noio[f]["reached_next"] or noio[f]["connects"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
