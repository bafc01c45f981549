#!/usr/bin/env python3
# (Long file: one script an operator runs end to end; its traffic roles share
# the tenants' config, the pacing and the statistics, and splitting them into
# modules would make a package of a benchmark.)
"""Load test of the real binary (issue 15), loopback only, bounded in
requests and in time: it starts its own tensord, drives it with several
tenants at once, and prints what an operator wants to know afterwards.

    /usr/bin/python3 bench/load.py [--bin build/tensord] [--duration 60] [--blocks 3] [--quick]

Tenants (one config file, tokens of its own): `light` alone on partition
`light`; `heavy-a` and `heavy-b` on partition `heavy` (share 0.5 each,
workqueue_limit 2). Traffic, each role in a process of its own (so no
client waits on another's GIL):

- light (the tenant whose latency is measured): a paced stream
  (--light-rate req/s, one at a time, keep-alive) of tiny programs
  (elementwise mul/add + sum on 16 floats) with a small PUT and GET mixed
  in (run, run, run, put, get);
- compute (heavy-a, --compute-clients clients back to back): a batched
  `linalg.eigh` (2000 x 32 x 32 float32 made on the server) and a chain of
  30 float64 200x200 matmuls, alternately; its max_queued is small, so
  some 429 queue_full are expected (and honoured: Retry-After, capped at 1 s);
- transfer (heavy-b): one client uploading --big-mib MiB, alternately a
  JSON `b64` PUT and a two-tensor safetensors `POST /v1/tensors:upload`,
  and one client downloading them, as `?encoding=b64` JSON and as
  safetensors;
- rude (heavy-b), raw sockets: a slow reader (SO_RCVBUF 8 KiB, recv of
  4 KiB then a 2 ms sleep, a 2 MiB tensor, the whole body checked), a
  client that sends headers and part of a body (or part of the headers)
  and closes (FIN or RST), and a client that starts a long `while_loop`
  through `/v1/run` and closes while it runs.

Phases: the server is started and its tensors stored, then everything runs
for a warm-up (--warmup s), after which the server's RSS is taken (median
of a few samples of VmRSS in /proc/<pid>/status). Then --blocks times: the
light tenant alone (idle) for --idle s, then the full load for --duration /
blocks s with the light tenant measured after a 1 s ramp. After each
block the load stops and the script waits until the server has no job in
flight (a cancelled job that keeps running shows here). At the end: RSS
again, the server must answer /healthz and a tiny run, then SIGTERM.

Printed: requests/s, p50/p99 per tenant and per request kind (idle and
loaded), responses by HTTP status (429 expected, not a failure; connection
errors counted apart), RSS before/after (and after each block), open fds
and threads, the light tenant's p99 under load over idle (the median of
the blocks' ratios) and the same tenant as the server's log lines see it
(request duration, job queue and run time: a slow answer told apart from
a slow client), jobs by end state, and a PASS/FAIL line per
criterion: no 5xx, server alive at the end, RSS after within 10% of
before, light p99 within 2x of idle. The exit status is non-zero only for
a 5xx or a crash (or a server that stopped answering): latency on a shared
2-core machine is reported, not judged.

The client processes are pinned to the cpus /v1/info gives the partitions
(the light client to the light partition's, the load clients to the heavy
one's; --no-pin turns that off), as if they ran on other machines. RSS
that grows while the tenants' stored bytes stay the same may be glibc
keeping freed memory in its per-thread arenas rather than a leak: run
with MALLOC_MMAP_THRESHOLD_=65536 in the environment (the server inherits
it; large buffers then go back to the system when freed) to tell them apart.

Bounds: every socket has a timeout, each phase has a deadline, the whole
run stops after --max-requests requests or --max-seconds seconds, whatever
the server does. Not run by the tests (it is a benchmark: `make bench`).
"""

import argparse
import collections
import http.client
import json
import multiprocessing
import os
import random
import re
import select
import signal
import statistics
import sys
import time
import urllib.parse

from benchlib import (b64_put_body, close_rudely, f32_bytes, f32_file, matmul_program, pct, proc_status_kib,
                      raw_connect, raw_head, read_head, start_server, token_sha256, wait_ready, write_config,
                      write_readme_section)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

TOKENS = {"light": "load-light-token", "heavy-a": "load-heavy-a-token", "heavy-b": "load-heavy-b-token"}
EXPECTED = {429}  # queue_full / quota_exceeded: the server saying "later", as it should under load
ABANDONED = 0      # status of a request this script closed on purpose
CONN_ERROR = -1    # status of a request that failed at the socket (refused, reset, timeout, short body)

# phases a record is tagged with (the tag is read when the request starts)
WARM, IDLE, RAMP, LOAD = range(4)
PHASE_NAMES = ["warm-up", "idle", "ramp", "load"]

# modes of the shared switches
PAUSE, GO, EXIT = 0, 1, 2


def config(big_mib):
    return {"partitions": [{"name": "light", "share": 0.5, "workqueue_limit": 2},
                           {"name": "heavy", "share": 0.5, "workqueue_limit": 2}],
            "tenants": [{"name": "light", "token_sha256": token_sha256(TOKENS["light"]), "partition": "light",
                         "max_queued": 64},
                        {"name": "heavy-a", "token_sha256": token_sha256(TOKENS["heavy-a"]), "partition": "heavy",
                         "max_queued": 2},
                        {"name": "heavy-b", "token_sha256": token_sha256(TOKENS["heavy-b"]), "partition": "heavy",
                         "max_queued": 16, "memory_bytes": max(1 << 30, 16 * big_mib << 20)}]}


# --- programs -------------------------------------------------------------

TINY = {"program": {"nodes": [{"id": "a", "op": "mul", "args": ["x", 2.0], "outputs": ["y"]},
                              {"id": "b", "op": "add", "args": ["y", 1.0], "outputs": ["z"]},
                              {"id": "s", "op": "sum", "args": ["z"], "outputs": ["t"]}],
                    "outputs": ["t"]},
        "inputs": {"x": {"dtype": "float32", "shape": [16], "data": [1.0] * 16}}}

SMALL_TENSOR = {"dtype": "float32", "shape": [8, 8], "data": [float(i) for i in range(64)]}


def eigh_program(batch=2000, n=32):
    return {"program": {"nodes": [
        {"id": "r", "op": "rand", "args": [[batch, n, n]], "kwargs": {"dtype": "float32", "seed": 7},
         "outputs": ["a"]},
        {"id": "t", "op": "transpose", "args": ["a", -1, -2], "outputs": ["at"]},
        {"id": "s", "op": "add", "args": ["a", "at"], "outputs": ["sym"]},
        {"id": "e", "op": "linalg.eigh", "args": ["sym"], "outputs": ["w", "v"]},
        {"id": "m", "op": "sum", "args": ["w"], "outputs": ["total"]}],
        "outputs": ["total"]}}


def long_loop_request():
    """A while_loop that would run for hours: only a disconnect (or, as a
    safety net, its deadline) ends it."""
    carries = {"i": {"dtype": "int64", "shape": []}, "x": {"dtype": "float32", "shape": [4]},
               "n": {"dtype": "int64", "shape": []}}
    sub = lambda nodes, outs: {"inputs": carries, "nodes": nodes, "outputs": outs}  # noqa: E731
    loop = {"id": "l", "op": "while_loop", "args": ["i", "x", "n"], "outputs": ["i2", "x2", "n2"],
            "kwargs": {"max_iters": 10 ** 12},
            "cond": sub([{"id": "c", "op": "lt", "args": ["i", "n"], "outputs": ["b"]}], ["b"]),
            "body": sub([{"id": "a", "op": "add", "args": ["i", 1], "outputs": ["j"]},
                         {"id": "m", "op": "mul", "args": ["x", 1.0], "outputs": ["y"]}], ["j", "y", "n"])}
    return {"program": {"inputs": carries, "nodes": [loop], "outputs": ["i2"]},
            "inputs": {"i": {"dtype": "int64", "shape": [], "data": 0},
                       "x": {"dtype": "float32", "shape": [4], "data": [1, 2, 3, 4]},
                       "n": {"dtype": "int64", "shape": [], "data": 10 ** 15}},
            "deadline_ms": 60000}


# --- clients ---------------------------------------------------------------

class Recorder:
    """Records (phase, block, tenant, kind, status, ms) of one process, plus
    connection-error kinds and a few samples of unexpected answers."""

    def __init__(self, sh):
        self.sh = sh
        self.rows = []
        self.conn_errors = collections.Counter()
        self.samples = []

    def tag(self):
        t = self.sh["tag"].value
        return t % 4, t // 4

    def add(self, tag, tenant, kind, status, ms, detail=None):
        self.rows.append((tag[0], tag[1], tenant, kind, status, ms))
        if status == CONN_ERROR:
            self.conn_errors[(tenant, kind, detail or "?")] += 1
        elif status not in (ABANDONED, 200, 201, 204) and status not in EXPECTED and len(self.samples) < 8:
            self.samples.append((tenant, kind, status, (detail or "")[:400]))


class Http:
    """One keep-alive connection (http.client), reopened after an error."""

    def __init__(self, url, token, timeout=120):
        u = urllib.parse.urlparse(url)
        self.host, self.port, self.timeout = u.hostname, u.port, timeout
        self.headers = {"Authorization": "Bearer " + token}
        self.conn = None

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def request(self, method, path, body=None, headers=None):
        """-> (status, body bytes, Retry-After or None); raises OSError/HTTPException."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        h = dict(self.headers)
        h.update(headers or {})
        try:
            self.conn.request(method, path, body=body, headers=h)
            r = self.conn.getresponse()
            data = r.read()
            if r.will_close:
                self.close()
            return r.status, data, r.getheader("Retry-After")
        except (OSError, http.client.HTTPException):
            self.close()
            raise


def timed(rec, http_, tenant, kind, method, path, body=None, headers=None, check=None):
    """One request through `http_`, recorded; honours Retry-After (capped) after a 429."""
    tag = rec.tag()
    t0 = time.perf_counter()
    try:
        status, data, retry = http_.request(method, path, body, headers)
    except (OSError, http.client.HTTPException) as e:
        rec.add(tag, tenant, kind, CONN_ERROR, (time.perf_counter() - t0) * 1e3, type(e).__name__)
        time.sleep(0.05)
        return
    ms = (time.perf_counter() - t0) * 1e3
    detail = None
    if status < 300 and check is not None and not check(data):
        status, detail = CONN_ERROR, "unexpected body (%d bytes)" % len(data)
    elif status >= 300:
        detail = data[:400].decode("utf-8", "replace")
    rec.add(tag, tenant, kind, status, ms, detail)
    if status == 429:
        try:
            time.sleep(min(1.0, float(retry or 0.1)))
        except ValueError:
            time.sleep(0.1)


# --- roles (each in a process of its own) -----------------------------------

def role_light(url, sh, rec, p):
    h = Http(url, TOKENS["light"], timeout=30)
    tiny = json.dumps(TINY).encode()
    small = json.dumps(SMALL_TENSOR).encode()
    mix = ["run", "run", "run", "put", "get"]
    ok_run = lambda d: b'"outputs"' in d  # noqa: E731
    interval = 1.0 / p["light_rate"]
    i = 0
    nxt = time.perf_counter()
    while True:
        mode = sh["light"].value
        if mode == EXIT:
            return
        if mode == PAUSE or not claim(sh, p):
            time.sleep(0.01)
            nxt = time.perf_counter()
            continue
        now = time.perf_counter()
        if nxt > now:
            time.sleep(nxt - now)
        nxt = max(nxt + interval, time.perf_counter() - interval)
        kind = mix[i % len(mix)]
        i += 1
        with Busy(sh, "light_busy"):
            if kind == "run":
                timed(rec, h, "light", "run tiny", "POST", "/v1/run", tiny, {"Content-Type": "application/json"},
                      ok_run)
            elif kind == "put":
                timed(rec, h, "light", "PUT small", "PUT", "/v1/tensors/l/small", small,
                      {"Content-Type": "application/json"})
            else:
                timed(rec, h, "light", "GET small", "GET", "/v1/tensors/l/small", check=lambda d: b"dtype" in d)


def role_compute(url, sh, rec, p):
    bodies = [("run eigh", json.dumps(eigh_program()).encode()),
              ("run matmul", json.dumps(matmul_program(30, 200, "total")).encode())]
    ok = lambda d: b'"total"' in d  # noqa: E731

    def client(k):
        h = Http(url, TOKENS["heavy-a"])
        i = k
        while load_turn(sh, p):
            kind, body = bodies[i % 2]
            i += 1
            with Busy(sh, "busy"):
                timed(rec, h, "heavy-a", kind, "POST", "/v1/run", body, {"Content-Type": "application/json"}, ok)

    run_threads([lambda k=k: client(k) for k in range(p["compute_clients"])])


def role_transfer(url, sh, rec, p):
    mib = p["big_mib"]
    raw = f32_bytes(mib, 1)
    half = len(raw) // 2
    json_body = b64_put_body(raw)
    st_body = f32_file({"big/s_a": raw[:half], "big/s_b": raw[half:]})
    ok_json = lambda d: len(d) >= len(raw) * 4 // 3  # noqa: E731
    ok_st = lambda d: len(d) >= len(raw) // 2  # noqa: E731

    def uploader():
        h = Http(url, TOKENS["heavy-b"])
        i = 0
        while load_turn(sh, p):
            slot = i // 2 % 2
            with Busy(sh, "busy"):
                if i % 2 == 0:
                    timed(rec, h, "heavy-b", "PUT %d MiB b64" % mib, "PUT", "/v1/tensors/big/j%d" % slot,
                          memoryview(json_body), {"Content-Type": "application/json"})
                else:
                    timed(rec, h, "heavy-b", "upload %d MiB safetensors" % mib, "POST", "/v1/tensors:upload",
                          memoryview(st_body), {"Content-Type": "application/vnd.safetensors"})
            i += 1

    def downloader():
        h = Http(url, TOKENS["heavy-b"])
        i = 0
        while load_turn(sh, p):
            with Busy(sh, "busy"):
                if i % 2 == 0:
                    timed(rec, h, "heavy-b", "GET %d MiB b64" % mib, "GET", "/v1/tensors/big/j%d?encoding=b64" % (
                        i // 2 % 2), check=ok_json)
                else:
                    timed(rec, h, "heavy-b", "GET %d MiB safetensors" % (mib // 2), "GET", "/v1/tensors/big/s_a",
                          headers={"Accept": "application/vnd.safetensors"}, check=ok_st)
            i += 1

    run_threads([uploader, downloader])


def role_rude(url, sh, rec, p):
    token = TOKENS["heavy-b"]
    slow_len = p["slow_mib"] << 20

    def slow_reader():
        i = 0
        while load_turn(sh, p):
            st = i % 2 == 1
            i += 1
            tag = rec.tag()
            t0 = time.perf_counter()
            with Busy(sh, "busy"):
                try:
                    s = raw_connect(url, rcvbuf=8192)
                    try:
                        extra = "Accept: application/vnd.safetensors\r\n" if st else ""
                        s.sendall(raw_head("GET", "/v1/tensors/slow" + ("" if st else "?encoding=b64"), token,
                                           extra=extra))
                        status, headers, got = read_head(s)
                        n = len(got)
                        want = int(headers.get("content-length", "-1"))
                        while n < want:
                            chunk = s.recv(4096)
                            if not chunk:
                                break
                            n += len(chunk)
                            time.sleep(0.002)
                    finally:
                        s.close()
                except (OSError, ValueError, IndexError) as e:
                    rec.add(tag, "heavy-b", "slow read", CONN_ERROR, (time.perf_counter() - t0) * 1e3,
                            type(e).__name__)
                    time.sleep(0.05)
                    continue
                ms = (time.perf_counter() - t0) * 1e3
                if status == 200 and (want < 0 or n != want or n < slow_len // 2):
                    rec.add(tag, "heavy-b", "slow read", CONN_ERROR, ms, "short body %d of %d" % (n, want))
                else:
                    rec.add(tag, "heavy-b", "slow read", status, ms)

    def abort_request():
        """Headers and part of a body (or part of the headers), then close."""
        big = p["big_mib"] << 20
        variants = [
            ("PUT", "/v1/tensors/rude/partial", "application/json", big,
             b'{"dtype":"float32","shape":[%d],"b64":"' % (big // 4) + b"A" * (1 << 20)),
            ("POST", "/v1/tensors:upload", "application/vnd.safetensors", big,
             f32_file({"rude/u": b"\0" * 4096})[:2000] + b"\0" * (1 << 20)),
            ("POST", "/v1/run", "application/json", 100000, json.dumps(TINY).encode()[:100]),
            ("POST", "/v1/run", None, None, None),  # a head cut in the middle
        ]
        i = 0
        while load_turn(sh, p):
            method, path, ctype, length, part = variants[i % len(variants)]
            rst = i // len(variants) % 2 == 1
            i += 1
            tag = rec.tag()
            t0 = time.perf_counter()
            with Busy(sh, "busy"):
                try:
                    s = raw_connect(url, timeout=10)
                    try:
                        if length is None:
                            s.sendall(raw_head(method, path, token)[:40])
                        else:
                            s.sendall(raw_head(method, path, token, length, ctype))
                            time.sleep(0.02)
                            s.sendall(part)
                        time.sleep(0.05)
                    finally:
                        close_rudely(s, rst)
                except OSError as e:
                    rec.add(tag, "heavy-b", "abort mid-request", CONN_ERROR, (time.perf_counter() - t0) * 1e3,
                            type(e).__name__)
                    time.sleep(0.05)
                    continue
                rec.add(tag, "heavy-b", "abort mid-request", ABANDONED, (time.perf_counter() - t0) * 1e3)
            time.sleep(0.1)

    def abort_job():
        """A /v1/run of a loop that would run for hours, closed while it runs."""
        body = json.dumps(long_loop_request()).encode()
        rnd = random.Random(3)
        i = 0
        while load_turn(sh, p):
            rst = i % 2 == 1
            i += 1
            tag = rec.tag()
            t0 = time.perf_counter()
            with Busy(sh, "busy"):
                try:
                    s = raw_connect(url, timeout=10)
                    try:
                        s.sendall(raw_head("POST", "/v1/run", token, len(body), "application/json") + body)
                        r, _, _ = select.select([s], [], [], rnd.uniform(0.3, 1.0))
                        status = ABANDONED
                        if r:  # answered before we hung up: a 429, or a bug
                            status, _, rest = read_head(s)
                    finally:
                        close_rudely(s, rst)
                except (OSError, ValueError, IndexError) as e:
                    rec.add(tag, "heavy-b", "abort mid-job", CONN_ERROR, (time.perf_counter() - t0) * 1e3,
                            type(e).__name__)
                    time.sleep(0.05)
                    continue
                rec.add(tag, "heavy-b", "abort mid-job", status, (time.perf_counter() - t0) * 1e3,
                        None if status == ABANDONED else rest[:400].decode("utf-8", "replace"))
            time.sleep(0.2)

    run_threads([slow_reader, abort_request, abort_job])


ROLES = {"light": role_light, "compute": role_compute, "transfer": role_transfer, "rude": role_rude}


class Busy:
    """Counts a request in flight in a shared counter (the controller waits for 0)."""

    def __init__(self, sh, name):
        self.v = sh[name]

    def __enter__(self):
        with self.v.get_lock():
            self.v.value += 1

    def __exit__(self, *exc):
        with self.v.get_lock():
            self.v.value -= 1


def claim(sh, p):
    """Counts one more request against --max-requests; False once the cap is reached."""
    with sh["requests"].get_lock():
        if sh["requests"].value >= p["max_requests"]:
            return False
        sh["requests"].value += 1
        return True


def load_turn(sh, p):
    """Blocks while the load is paused; False when the load clients must exit."""
    while True:
        mode = sh["load"].value
        if mode == EXIT:
            return False
        if mode == GO and claim(sh, p):
            return True
        time.sleep(0.02)


def run_threads(fns):
    import threading
    ts = [threading.Thread(target=f, daemon=True) for f in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def role_main(role, url, sh, p, out):
    cpus = p["cpus"].get(role)
    if cpus:
        os.sched_setaffinity(0, cpus)
    rec = Recorder(sh)
    try:
        ROLES[role](url, sh, rec, p)
    finally:
        out.put((role, rec.rows, dict(rec.conn_errors), rec.samples))


# --- the controller -------------------------------------------------------

def metric_values(url, name):
    """{labels string: value} of one family in /metrics (empty when unreachable)."""
    try:
        c = http.client.HTTPConnection(urllib.parse.urlparse(url).hostname, urllib.parse.urlparse(url).port,
                                       timeout=10)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
    except (OSError, http.client.HTTPException):
        return {}
    out = {}
    for m in re.finditer(r"^%s(\{[^}]*\})?\s+(\S+)$" % re.escape(name), text, re.M):
        out[m.group(1) or ""] = float(m.group(2))
    return out


def rss_mib(pid, samples=5, gap=0.2):
    vals = []
    for _ in range(samples):
        v = proc_status_kib(pid, "VmRSS")
        if v is not None:
            vals.append(v / 1024.0)
        time.sleep(gap)
    return statistics.median(vals) if vals else float("nan")


class LogWatcher:
    """Takes the server's stderr lines (benchlib.start_server's `tail`): keeps
    the last 400, and from the per-request and per-job log lines (text
    key=value or JSON) of the light tenant, the server's own view of its
    latency (request duration_ms, job queue_ms and run_ms) by phase, so a
    slow answer can be told apart from a slow client."""

    def __init__(self, sh):
        self.sh = sh
        self.tail = collections.deque(maxlen=400)
        self.light = collections.defaultdict(list)  # (phase, field) -> [ms]

    def append(self, line):
        self.tail.append(line)
        if "light" not in line:
            return
        if line.startswith("{"):
            try:
                d = json.loads(line)
            except ValueError:
                return
        else:
            d = {k: v.strip('"') for k, v in re.findall(r'(\w+)=("[^"]*"|\S+)', line)}
        if d.get("tenant") != "light":
            return
        phase = self.sh["tag"].value % 4
        for field in ("duration_ms", "queue_ms", "run_ms"):
            if field in d:
                try:
                    self.light[(phase, field)].append(float(d[field]))
                except (TypeError, ValueError):
                    pass


def fds_threads(pid):
    """(open fds, threads) of a process, from /proc; (None, None) when it is gone."""
    try:
        return len(os.listdir("/proc/%d/fd" % pid)), proc_status_kib(pid, "Threads")
    except OSError:
        return None, None


def loadavg():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except OSError:
        return float("nan")


class Run:
    def __init__(self, args):
        self.a = args
        self.t_start = time.monotonic()
        self.notes = []
        self.crashed = None
        self.roles = ["light"] + [r for r in args.roles.split(",") if r]

    def over_time(self):
        return time.monotonic() - self.t_start > self.a.max_seconds

    def wait(self, seconds):
        """Sleeps `seconds`, returning early (False) when the server died, the
        request cap was reached or the run is out of time."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                self.crashed = self.crashed or "server exited with %s during the load" % self.proc.returncode
                return False
            if self.sh["requests"].value >= self.a.max_requests:
                self.notes.append("request cap (%d) reached" % self.a.max_requests)
                return False
            if self.over_time():
                self.notes.append("time cap (%d s) reached" % self.a.max_seconds)
                return False
            time.sleep(0.05)
        return True

    def wait_zero(self, name, timeout):
        end = time.monotonic() + timeout
        while self.sh[name].value > 0 and time.monotonic() < end:
            time.sleep(0.02)
        return self.sh[name].value == 0

    def wait_jobs_drained(self, timeout=20.0):
        """Seconds until the server has no job in flight, or None after `timeout`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout and self.proc.poll() is None:
            v = metric_values(self.url, "tensord_partition_inflight")
            if v and sum(v.values()) == 0:
                return time.monotonic() - t0
            time.sleep(0.1)
        return None

    def set_phase(self, phase, block):
        self.sh["tag"].value = block * 4 + phase

    def prepare(self):
        """Stores what the clients read (before any measurement)."""
        a = self.a
        hb = Http(self.url, TOKENS["heavy-b"])
        raw = f32_bytes(a.big_mib, 1)
        half = len(raw) // 2
        for slot in range(2):
            st, _, _ = hb.request("PUT", "/v1/tensors/big/j%d" % slot, b64_put_body(raw),
                                  {"Content-Type": "application/json"})
            assert st in (200, 201), st
        st, body, _ = hb.request("POST", "/v1/tensors:upload",
                                 f32_file({"big/s_a": raw[:half], "big/s_b": raw[half:]}),
                                 {"Content-Type": "application/vnd.safetensors"})
        assert st == 200, (st, body[:300])
        st, _, _ = hb.request("PUT", "/v1/tensors/slow", b64_put_body(f32_bytes(a.slow_mib, 2)),
                              {"Content-Type": "application/json"})
        assert st in (200, 201), st
        hl = Http(self.url, TOKENS["light"])
        st, body, _ = hl.request("PUT", "/v1/tensors/l/small", json.dumps(SMALL_TENSOR).encode(),
                                 {"Content-Type": "application/json"})
        assert st in (200, 201), (st, body[:300])
        hb.close()
        hl.close()

    def main(self):
        a = self.a
        ctx = multiprocessing.get_context("spawn")
        self.sh = {"tag": ctx.Value("i", WARM), "load": ctx.Value("i", PAUSE), "light": ctx.Value("i", PAUSE),
                   "busy": ctx.Value("i", 0), "light_busy": ctx.Value("i", 0), "requests": ctx.Value("q", 0)}
        p = {"light_rate": a.light_rate, "compute_clients": a.compute_clients, "big_mib": a.big_mib,
             "slow_mib": a.slow_mib, "max_requests": a.max_requests}
        self.log = LogWatcher(self.sh)
        self.tail = self.log.tail
        cfg = write_config(config(a.big_mib))
        server_args = ["--config", cfg, "--backend", a.backend, "--drain-timeout", str(a.drain_timeout)]
        server_args += [x for extra in a.server_arg for x in extra.split()]
        self.load_before = loadavg()
        self.proc, self.url = start_server(a.bin, server_args, tail=self.log)
        print("tensord pid %d at %s (%s)" % (self.proc.pid, self.url, " ".join(server_args)), flush=True)
        out = ctx.Queue()
        procs = []
        self.blocks = []
        self.idle_secs = []
        try:
            wait_ready(self.url)
            self.prepare()
            p["cpus"] = self.client_cpus()
            for role in self.roles:
                pr = ctx.Process(target=role_main, args=(role, self.url, self.sh, p, out), daemon=True)
                pr.start()
                procs.append(pr)
            # warm-up: everything at once, results kept only for the status counts
            self.set_phase(WARM, 0)
            self.sh["light"].value = GO
            self.sh["load"].value = GO
            ok = self.wait(a.warmup)
            self.pause_all()
            self.rss_before = rss_mib(self.proc.pid)
            self.fds_before, self.threads_before = fds_threads(self.proc.pid)
            print("warm-up done (%.0f s); RSS %.1f MiB" % (a.warmup, self.rss_before), flush=True)
            per_block = a.duration / a.blocks
            for b in range(a.blocks if ok else 0):
                self.set_phase(IDLE, b)
                self.sh["light"].value = GO
                t0 = time.monotonic()
                ok = self.wait(a.idle)
                idle_s = time.monotonic() - t0
                self.idle_secs.append(idle_s)
                self.sh["light"].value = PAUSE
                self.wait_zero("light_busy", 30)
                if not ok:
                    break
                self.set_phase(RAMP, b)
                self.sh["load"].value = GO
                self.sh["light"].value = GO
                ok = self.wait(a.ramp)
                self.set_phase(LOAD, b)
                t0 = time.monotonic()
                ok = ok and self.wait(per_block)
                loaded_s = time.monotonic() - t0
                drained = self.pause_all()
                rss = rss_mib(self.proc.pid, samples=3, gap=0.1)
                self.blocks.append({"idle_s": idle_s, "loaded_s": loaded_s, "drain_s": drained, "rss": rss})
                print("block %d/%d: %.1f s loaded; jobs drained %s; RSS %.1f MiB" % (
                    b + 1, a.blocks, loaded_s, "in %.1f s" % drained if drained is not None else "NOT within 20 s",
                    rss), flush=True)
                if not ok:
                    break
            self.sh["light"].value = EXIT
            self.sh["load"].value = EXIT
            time.sleep(2.0)  # let the allocator settle
            self.rss_after = rss_mib(self.proc.pid)
            self.fds_after, self.threads_after = fds_threads(self.proc.pid)
            self.hwm = (proc_status_kib(self.proc.pid, "VmHWM") or 0) / 1024.0
            self.alive = self.check_alive()
        finally:
            self.sh["light"].value = EXIT
            self.sh["load"].value = EXIT
            results = []
            for _ in procs:
                try:
                    results.append(out.get(timeout=60))
                except Exception:  # a client process that died or hangs: reported as missing
                    results.append(None)
            for pr in procs:
                pr.join(10)
                if pr.is_alive():
                    pr.terminate()
            self.shutdown()
            os.unlink(cfg)
        self.load_after = loadavg()
        return self.report(results)

    def client_cpus(self):
        """{role: cpus}: the light client on the light partition's cores, the
        load clients on the heavy partition's (from /v1/info), so that on a
        small machine the load generators' own CPU time lands where the heavy
        tenants' work does and the light client's where the light tenant's
        does, as if the clients were other machines. {} with --no-pin."""
        if self.a.no_pin:
            self.pin_note = "clients not pinned"
            return {}
        try:
            st, body, _ = Http(self.url, TOKENS["light"], timeout=10).request("GET", "/v1/info")
            parts = {q["name"]: q.get("cpus") for q in json.loads(body)["partitions"]}
        except (OSError, http.client.HTTPException, ValueError, KeyError):
            parts = {}
        if not parts.get("light") or not parts.get("heavy") or set(parts["light"]) & set(parts["heavy"]):
            self.pin_note = "clients not pinned (partitions' cpus unknown or shared: %s)" % parts
            return {}
        self.pin_note = "light client pinned to cpus %s (partition light), load clients to %s (partition heavy)" % (
            parts["light"], parts["heavy"])
        return dict({r: parts["heavy"] for r in ROLES}, light=parts["light"])

    def pause_all(self):
        """Stops the load and the light client, waits for their requests to end
        and for the server's jobs to drain; -> seconds the drain took (None: never)."""
        self.sh["light"].value = PAUSE
        self.sh["load"].value = PAUSE
        if not (self.wait_zero("busy", 120) and self.wait_zero("light_busy", 30)):
            self.notes.append("clients still had requests in flight 120 s after the load stopped")
        return self.wait_jobs_drained()

    def check_alive(self):
        if self.proc.poll() is not None:
            return "exited with %s" % self.proc.returncode
        try:
            h = Http(self.url, TOKENS["light"], timeout=10)
            st, _, _ = h.request("GET", "/healthz")
            st2, body, _ = h.request("POST", "/v1/run", json.dumps(TINY).encode(),
                                     {"Content-Type": "application/json"})
            h.close()
        except (OSError, http.client.HTTPException) as e:
            return "no answer: %r" % e
        if st != 200 or st2 != 200:
            return "/healthz %d, tiny run %d %s" % (st, st2, body[:200])
        return None

    def shutdown(self):
        """SIGTERM, then (after drain timeout + 20 s) SIGKILL; notes how it went."""
        if self.proc.poll() is not None:
            self.exit_note = "had already exited (%s)" % self.proc.returncode
            return
        self.jobs_end = {k: v for k, v in metric_values(self.url, "tensord_jobs_total").items()}
        self.mem_gauge = metric_values(self.url, "tensord_tenant_memory_bytes")
        self.stored = {}
        for t in TOKENS:
            try:
                st, body, _ = Http(self.url, TOKENS[t], timeout=10).request("GET", "/v1/tensors")
                self.stored[t] = sum(x["bytes"] for x in json.loads(body)["tensors"]) if st == 200 else None
            except (OSError, http.client.HTTPException, ValueError, KeyError):
                self.stored[t] = None
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(self.a.drain_timeout + 20)
            self.exit_note = "SIGTERM: exit %d after %.1f s" % (rc, time.monotonic() - t0)
            if rc < 0:
                self.crashed = self.crashed or "server died of signal %d at shutdown" % -rc
        except Exception:
            self.proc.kill()
            self.proc.wait(10)
            self.exit_note = "SIGTERM: still running after %.0f s, killed" % (self.a.drain_timeout + 20)

    # --- the summary ---------------------------------------------------

    def report(self, results):
        a = self.a
        rows, conn, samples, missing = [], collections.Counter(), [], []
        for role, res in zip(self.roles, results):
            if res is None:
                missing.append(role)
                continue
            rows += res[1]
            conn.update(res[2])
            samples += res[3]
        loaded_s = sum(b["loaded_s"] for b in self.blocks) or float("nan")
        secs = {IDLE: sum(self.idle_secs) or float("nan"), LOAD: loaded_s}
        lines = []
        P = lines.append

        def stats(xs, ph):
            return "%d | %.1f | %.2f | %.2f" % (len(xs), len(xs) / secs[ph], statistics.median(xs), pct(xs, 0.99))

        ok_status = lambda s: 200 <= s < 300  # noqa: E731
        load_rows = [r for r in rows if r[0] == LOAD]
        done = [r for r in load_rows if r[4] != CONN_ERROR]
        P("Requests while loaded: %d in %.1f s = %.1f req/s (all kinds, answered or closed on purpose); "
          "%d requests in all phases." % (len(done), loaded_s, len(done) / loaded_s, len(rows)))
        P("")
        P("| tenant | request | phase | n | req/s | p50 ms | p99 ms |")
        P("|---|---|---|---:|---:|---:|---:|")
        keys = sorted({(r[2], r[3]) for r in rows if r[0] in (IDLE, LOAD)},
                      key=lambda k: (list(TOKENS).index(k[0]), k[1]))
        for tenant in TOKENS:
            for ph in (IDLE, LOAD):
                xs = [r[5] for r in rows if r[0] == ph and r[2] == tenant and ok_status(r[4])]
                if xs:
                    P("| %s | **all** | %s | %s |" % (tenant, PHASE_NAMES[ph], stats(xs, ph)))
            for k in keys:
                if k[0] != tenant:
                    continue
                for ph in (IDLE, LOAD):
                    xs = [r[5] for r in rows if r[0] == ph and (r[2], r[3]) == k and
                          (ok_status(r[4]) or r[4] == ABANDONED)]
                    if xs:
                        P("| %s | %s | %s | %s |" % (k[0], k[1], PHASE_NAMES[ph], stats(xs, ph)))
        P("")
        # statuses over every phase (warm-up included: a 5xx there counts)
        by_status = collections.Counter(r[4] for r in rows)
        P("Responses by status (all phases): " + ", ".join(
            "%s: %d" % ({ABANDONED: "closed by the client on purpose", CONN_ERROR: "connection errors"}.get(s, s), n)
            for s, n in sorted(by_status.items())) + ".")
        for s in sorted(by_status):
            if s >= 300 and s not in EXPECTED or s == CONN_ERROR:
                kinds = collections.Counter((r[2], r[3]) for r in rows if r[4] == s)
                P("  %s: %s" % ("connection errors" if s == CONN_ERROR else s,
                                ", ".join("%s %s x%d" % (k[0], k[1], n) for k, n in kinds.items())))
        for k, n in sorted(conn.items()):
            P("  connection error: %s %s: %s x%d" % (k[0], k[1], k[2], n))
        exp = {s: n for s, n in by_status.items() if s in EXPECTED}
        if exp:
            kinds = collections.Counter((r[2], r[3]) for r in rows if r[4] in EXPECTED)
            P("  expected (not failures): %s (%s)" % (exp, ", ".join("%s %s x%d" % (k[0], k[1], n)
                                                                        for k, n in kinds.items())))
        for smp in samples:
            P("  sample: %s %s -> %s %s" % smp)
        if missing:
            P("  client processes that never reported: %s" % ", ".join(missing))
        P("")
        # light tenant: per block p99 ratio, median across blocks
        ratios = []
        for b in range(len(self.blocks)):
            idle = [r[5] for r in rows if r[0] == IDLE and r[1] == b and r[2] == "light" and ok_status(r[4])]
            load = [r[5] for r in rows if r[0] == LOAD and r[1] == b and r[2] == "light" and ok_status(r[4])]
            if idle and load:
                ratios.append((pct(load, 0.99) / pct(idle, 0.99), pct(idle, 0.99), pct(load, 0.99)))
        ratio = statistics.median(r[0] for r in ratios) if ratios else float("nan")
        if ratios:
            P("Light tenant p99 loaded / idle per block: %s; median %.2fx." % (
                ", ".join("%.2fx (%.2f / %.2f ms)" % r for r in ratios), ratio))
        srv = []
        for field, what in (("duration_ms", "request duration"), ("queue_ms", "job queue"), ("run_ms", "job run")):
            xi, xl = self.log.light.get((IDLE, field)), self.log.light.get((LOAD, field))
            if xi and xl:
                srv.append("%s p50/p99 %.2f/%.2f ms idle, %.2f/%.2f ms loaded" % (
                    what, statistics.median(xi), pct(xi, 0.99), statistics.median(xl), pct(xl, 0.99)))
        if srv:
            P("Light tenant as the server logs it (all its requests): %s." % "; ".join(srv))
        js = collections.Counter()
        for labels, v in getattr(self, "jobs_end", {}).items():
            lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            js["%s %s" % (lab.get("tenant"), lab.get("state"))] += int(v)
        if js:
            P("Jobs by tenant and end state (tensord_jobs_total): %s." % ", ".join(
                "%s %d" % kv for kv in sorted(js.items())))
        drains = [b["drain_s"] for b in self.blocks]
        P("No job in flight after each block's load stopped: %s." % ", ".join(
            "%.1f s" % d if d is not None else "NOT within 20 s" for d in drains))
        gauge = {dict(re.findall(r'(\w+)="([^"]*)"', k)).get("tenant"): int(v)
                 for k, v in getattr(self, "mem_gauge", {}).items()}
        if getattr(self, "stored", None):
            P("tensord_tenant_memory_bytes vs the sum of GET /v1/tensors bytes at the end: %s." % ", ".join(
                "%s %s / %s" % (t, gauge.get(t), self.stored.get(t)) for t in TOKENS))
        rss_ratio = self.rss_after / self.rss_before
        P("Server RSS: %.1f MiB after warm-up, %.1f MiB after the load (%+.1f%%; after each block: %s); "
          "peak (VmHWM) %.1f MiB." % (self.rss_before, self.rss_after, (rss_ratio - 1) * 100,
                                      ", ".join("%.1f" % b["rss"] for b in self.blocks), self.hwm))
        P("Server open fds / threads: %s / %s after warm-up, %s / %s after the load." % (
            self.fds_before, self.threads_before, self.fds_after, self.threads_after))
        P("Shutdown: %s. Load average (1 min) before / after: %.2f / %.2f on %d cores; %.0f s in all." % (
            getattr(self, "exit_note", "?"), self.load_before, self.load_after, os.cpu_count() or 0,
            time.monotonic() - self.t_start))
        P("Pinning: %s." % getattr(self, "pin_note", "?"))
        if self.notes:
            P("Notes: " + "; ".join(sorted(set(self.notes))) + ".")
        P("")
        n5 = sum(n for s, n in by_status.items() if s >= 500)
        crash = self.crashed or (self.alive and "not alive at the end: " + self.alive)
        verdicts = [
            (n5 == 0, True, "no 5xx (%d of %d answers)" % (n5, len(rows))),
            (not crash, True, "server alive at the end" + (" (%s)" % crash if crash else
                                                          " (/healthz and a tiny run answered 200)")),
            (rss_ratio <= 1.10, False, "RSS after within 10%% of RSS before: %.1f -> %.1f MiB (%+.1f%%)" % (
                self.rss_before, self.rss_after, (rss_ratio - 1) * 100)),
            (ratio <= 2.0, False, "light p99 under load within 2x of idle: " + (
                "%.2fx (median over %d blocks)" % (ratio, len(ratios)) if ratios else "not measured (no whole block)")),
        ]
        for ok, fatal, text in verdicts:
            P("%s %s%s" % ("PASS" if ok else "FAIL", text, "" if ok or fatal else " (reported, not fatal)"))
        text = "\n".join(lines)
        print(text, flush=True)
        if crash or n5:
            tail = list(self.tail)
            # per-request and per-job log lines drown the rest: the 5xx ones, then the last others
            bad = [t for t in tail if re.search(r'status[=":]+5\d\d', t)][-20:]
            other = [t for t in tail if not re.search(r"\binfo\W+(request|job)\b", t)][-40:]
            print("\nserver stderr (last 400 lines), 5xx lines:\n" + "\n".join(bad) +
                  "\nlines other than info request/job:\n" + "\n".join(other) +
                  "\nlast lines:\n" + "\n".join(tail[-5:]), flush=True)
        if a.write_readme:
            head = "## load"
            write_readme_section(head, head + "\n\n`bench/load.py` (%s):\n\n" % " ".join(sys.argv[1:]) + text + "\n")
        return 1 if (crash or n5) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    default_bin = os.environ.get("TENSORD_BIN") or os.path.join(
        os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")), "tensord")
    ap.add_argument("--bin", default=default_bin, help="server binary (default $TENSORD_BIN or build/tensord)")
    ap.add_argument("--backend", default="cpu", help="--backend for the server (default cpu)")
    ap.add_argument("--duration", type=float, default=60, help="seconds of full load in all (default 60)")
    ap.add_argument("--blocks", type=int, default=3, help="idle/loaded alternations (default 3)")
    ap.add_argument("--idle", type=float, default=None, help="seconds of light-alone per block (default "
                    "duration/blocks/3, at least 4)")
    ap.add_argument("--warmup", type=float, default=None, help="seconds of full load before RSS is taken "
                    "(default 15%% of duration, at least 4)")
    ap.add_argument("--ramp", type=float, default=1.0, help="seconds between starting the load and measuring")
    ap.add_argument("--light-rate", type=float, default=100, help="light tenant requests/s (default 100)")
    ap.add_argument("--compute-clients", type=int, default=4, help="heavy-a clients (default 4)")
    ap.add_argument("--big-mib", type=int, default=32, help="size of the large uploads (default 32 MiB)")
    ap.add_argument("--slow-mib", type=int, default=2, help="size of the slow reader's tensor (default 2 MiB)")
    ap.add_argument("--max-requests", type=int, default=200000, help="stop after this many requests in all (default 200000)")
    ap.add_argument("--max-seconds", type=float, default=None, help="stop the load after this many seconds "
                    "(default: twice the planned time plus 60)")
    ap.add_argument("--roles", default="compute,transfer,rude",
                    help="load roles beside the light tenant (default compute,transfer,rude)")
    ap.add_argument("--drain-timeout", type=int, default=5, help="the server's --drain-timeout (default 5)")
    ap.add_argument("--server-arg", action="append", default=[], help="more server flags, split at spaces (repeatable): --server-arg=\"--log-format json\"")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the client processes to the partitions' cpus")
    ap.add_argument("--quick", action="store_true", help="a short run: 12 s of load in one block, 8 MiB uploads")
    ap.add_argument("--write-readme", action="store_true", help="write the summary to bench/README.md (## load)")
    a = ap.parse_args()
    if a.quick:
        a.duration, a.blocks, a.big_mib = min(a.duration, 12), 1, min(a.big_mib, 8)
    a.blocks = max(1, a.blocks)
    bad = [r for r in a.roles.split(",") if r and (r not in ROLES or r == "light")]
    if bad:
        ap.error("unknown role(s) %s; the load roles are compute, transfer, rude" % ", ".join(bad))
    if a.idle is None:
        a.idle = max(4.0, a.duration / a.blocks / 3)
    if a.warmup is None:
        a.warmup = max(4.0, 0.15 * a.duration)
    planned = a.warmup + a.blocks * (a.idle + a.ramp) + a.duration
    if a.max_seconds is None:
        a.max_seconds = 2 * planned + 60
    if not (os.path.isfile(a.bin) and os.access(a.bin, os.X_OK)):
        print("load.py: no server binary at %s (build it, or pass --bin / TENSORD_BIN)" % a.bin)
        return 0 if "--bin" not in sys.argv and "TENSORD_BIN" not in os.environ else 2
    print("load.py: %s; %.0f s of load in %d blocks, %.0f s idle each, %.0f s warm-up (about %.0f s)" % (
        a.bin, a.duration, a.blocks, a.idle, a.warmup, planned + 15), flush=True)
    return Run(a).main()


if __name__ == "__main__":
    sys.exit(main())
