#!/usr/bin/env python3
"""Isolation between tenants on their own partitions (DESIGN.md targets):
a light tenant's tiny-program latency when the server is idle, and while a
neighbour (the heavy tenant) works on its own partition, measured in one
run, for each neighbour of a matrix (bench/isolation_neighbours.py: pure
compute, compute on large JSON and safetensors inputs, uploads, downloads,
a request storm at its queue limit, slow readers and bodies cut short,
SIGHUP reloads and checkpoints).

    python3 bench/isolation.py [--build build] [--requests 1500] [--runs 1] [--blocks 3]
                               [--heavy all|KIND[,KIND...]] [--mib 8] [--client http|requests]
                               [--write-readme]

With --runs N each neighbour is measured N times (a fresh server each) and
the median of the runs is reported with every run's p99 ratio. With
--blocks B each run alternates B idle and B loaded blocks of requests/B
requests, so background load that comes and goes affects both sides
alike. The 1-minute load average before and after is printed: on a shared
2-core machine other jobs move p99 far more than anything in the server
does, so compare figures taken under similar load only.

Config: two partitions of share 0.5 (one core each on a 2-core machine,
threads pinned), workqueue_limit 2; tenant "light" on one, "heavy" on the
other. The heavy tenant's clients run in a separate process (so the light
client never waits for their GIL) pinned to the heavy partition's cpus
(from /v1/info), and the light client to the light partition's, as if
they ran on other machines (--no-pin: both unpinned, as the figures
before issue 14 were taken); the light tenant sends a 3-node program on
16 floats, one request at a time, over keep-alive.
"""

import argparse
import hashlib
import http.client
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse

import requests

import isolation_neighbours as neighbours
from benchlib import pct, start_server, write_readme_section

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

TOKENS = {"light": "light-token", "heavy": "heavy-token"}


def sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


TINY = {"program": {"nodes": [{"id": "a", "op": "mul", "args": ["x", 2.0], "outputs": ["y"]},
                              {"id": "b", "op": "add", "args": ["y", 1.0], "outputs": ["z"]},
                              {"id": "s", "op": "sum", "args": ["z"], "outputs": ["t"]}],
                    "outputs": ["t"]},
        "inputs": {"x": {"dtype": "float32", "shape": [16], "data": [1.0] * 16}}}


class LightClient:
    """The light tenant: TINY over one keep-alive connection, one request at
    a time, through http.client (requests costs ~1 ms a request here, more
    than the server, and would hide the server's share of the tail; --client
    requests measures with it). Each sample is (round trip ms, the server's
    own time ms from Server-Timing)."""

    def __init__(self, url, kind="http"):
        self.kind = kind
        self.body = json.dumps(TINY).encode()
        self.headers = {"Authorization": "Bearer " + TOKENS["light"], "Content-Type": "application/json"}
        if kind == "requests":
            self.s = requests.Session()
            self.url = url
        else:
            u = urllib.parse.urlparse(url)
            self.c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)

    def one(self):
        t0 = time.perf_counter()
        if self.kind == "requests":
            r = self.s.post(self.url + "/v1/run", data=self.body, headers=self.headers, timeout=30)
            status, timing = r.status_code, r.headers.get("Server-Timing", "")
        else:
            self.c.request("POST", "/v1/run", self.body, self.headers)
            r = self.c.getresponse()
            r.read()
            status, timing = r.status, r.getheader("Server-Timing", "")
        rtt = (time.perf_counter() - t0) * 1e3
        if status != 200:
            raise RuntimeError("light request: %d" % status)
        return rtt, float(timing.split("dur=")[1].split(";")[0].split(",")[0])

    def latencies(self, n):
        return [self.one() for _ in range(n)]


def loadavg():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except OSError:
        return float("nan")


def measure(binary, n_requests, blocks=1, kind="compute", mib=8, pin=True, client="http"):
    """One run on a fresh server: the light tenant's latencies idle and while
    the neighbour `kind` works on its partition, in `blocks` alternating
    idle/loaded blocks (so slow changes in the machine's background load hit
    both alike); returns (idle, loaded, heavy_done, heavy_refused, heavy_partition)."""
    cfg = {"partitions": [{"name": "light", "share": 0.5, "workqueue_limit": 2},
                          {"name": "heavy", "share": 0.5, "workqueue_limit": 2}],
           "tenants": [{"name": "light", "token_sha256": sha(TOKENS["light"]), "partition": "light"},
                       {"name": "heavy", "token_sha256": sha(TOKENS["heavy"]), "partition": "heavy",
                        "max_queued": neighbours.max_queued(kind)}]}
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    state = tempfile.mkdtemp(prefix="tensord-isolation-")
    proc, url = start_server(binary, ["--config", path, "--state-dir", state, "--checkpoint-every", "0"])
    auth = {"Authorization": "Bearer " + TOKENS["heavy"]}  # /v1/info needs a token when tenants are configured
    info = requests.get(url + "/v1/info", headers=auth, timeout=10).json()
    heavy_cpus = [p.get("cpus") for p in info.get("partitions", []) if p["name"] == "heavy"]
    heavy_cpus = (heavy_cpus[0] or []) if heavy_cpus else []
    light_cpus = [p.get("cpus") for p in info.get("partitions", []) if p["name"] == "light"]
    light_cpus = (light_cpus[0] or []) if light_cpus else []
    pinned = None
    if pin and light_cpus and not set(light_cpus) & set(heavy_cpus):
        # The light client on its partition's cores, as the heavy one on its
        # own (bench/load.py does the same): else, unpinned, it waits for a
        # core the heavy clients keep busy and measures them, not the server.
        pinned = os.sched_getaffinity(0)
        os.sched_setaffinity(0, light_cpus)
    elif not pin:
        heavy_cpus = []
    info = None
    idle, loaded, heavy_done, heavy_refused = [], [], 0, 0
    blocks = max(1, blocks)
    per_block = max(1, n_requests // blocks)
    try:
        light = LightClient(url, client)
        light.latencies(50)  # warm up
        # The heavy clients run in another process: in this one they would
        # hold the GIL while encoding and decoding, and the light client's
        # p99 would measure Python's 5 ms GIL switch interval, not the server.
        ctx = multiprocessing.get_context("spawn")
        for _ in range(blocks):
            idle += light.latencies(per_block)
            stop = ctx.Event()
            done, refused = ctx.Value("i", 0), ctx.Value("i", 0)
            heavy = ctx.Process(target=neighbours.run, daemon=True,
                                args=(kind, url, TOKENS["heavy"], mib, heavy_cpus, proc.pid, stop, done, refused))
            heavy.start()
            # Working now: bodies made, the tensors it reads stored.
            deadline = time.time() + 60
            while done.value + refused.value < 2 and time.time() < deadline and heavy.is_alive():
                time.sleep(0.05)
            time.sleep(0.5)
            if info is None:
                info = requests.get(url + "/v1/info", headers=auth, timeout=10).json()
            loaded += light.latencies(per_block)
            stop.set()
            heavy.join(120)  # its clients' last requests have finished: idle again
            heavy_done += done.value
            heavy_refused += refused.value
    finally:
        if pinned:
            os.sched_setaffinity(0, pinned)
        proc.terminate()
        proc.wait(30)
        os.unlink(path)
        shutil.rmtree(state, ignore_errors=True)
    heavy_parts = [p for p in (info or {}).get("partitions", []) if p["name"] == "heavy"]
    return idle, loaded, heavy_done, heavy_refused, (heavy_parts[0] if heavy_parts else {})


def row(kind, mib, runs):
    """A table row: medians over runs of the light tenant's round trips
    (idle, loaded), the p99 ratio of each run, the server's own p99."""
    rtt = lambda xs: [x[0] for x in xs]  # noqa: E731
    srv = lambda xs: [x[1] for x in xs]  # noqa: E731
    med = lambda f: statistics.median(f(r) for r in runs)  # noqa: E731
    ratios = [pct(rtt(r[1]), 0.99) / pct(rtt(r[0]), 0.99) for r in runs]
    return "| %s | %.3f | %.3f | %.2fx | %.3f | %.3f | **%.2fx** | %s | %.3f / %.3f | %d (%d) |" % (
        neighbours.describe(kind, mib),
        med(lambda r: statistics.median(rtt(r[0]))), med(lambda r: pct(rtt(r[0]), 0.99)),
        med(lambda r: pct(rtt(r[0]), 0.99) / statistics.median(rtt(r[0]))),
        med(lambda r: statistics.median(rtt(r[1]))), med(lambda r: pct(rtt(r[1]), 0.99)),
        statistics.median(ratios), ", ".join("%.2f" % x for x in ratios),
        med(lambda r: pct(srv(r[0]), 0.99)), med(lambda r: pct(srv(r[1]), 0.99)),
        sum(r[2] for r in runs), sum(r[3] for r in runs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--blocks", type=int, default=3,
                    help="alternate idle and loaded measurement in this many blocks per run")
    ap.add_argument("--heavy", default="all",
                    help="the neighbours, comma-separated, or 'all': " + ", ".join(neighbours.KINDS))
    ap.add_argument("--mib", type=int, default=8, help="MiB per upload/download/checkpointed tensor")
    ap.add_argument("--client", choices=["http", "requests"], default="http",
                    help="the light tenant's client library (http: http.client)")
    ap.add_argument("--no-pin", action="store_true",
                    help="leave the light and heavy client processes unpinned (the figures before issue 14)")
    ap.add_argument("--write-readme", action="store_true", help="write the matrix section of bench/README.md")
    args = ap.parse_args()
    kinds = list(neighbours.KINDS) if args.heavy == "all" else args.heavy.split(",")
    for k in kinds:
        if k not in neighbours.KINDS:
            ap.error("unknown neighbour %r (%s)" % (k, ", ".join(neighbours.KINDS)))
    binary = os.path.join(args.build, "tensord")
    load_before = loadavg()
    lines = ["| neighbour (heavy tenant, own partition) | idle p50 | idle p99 | idle p99/p50 | loaded p50 | "
             "loaded p99 | p99 loaded/idle | runs' p99 ratios | server p99 idle / loaded | heavy work done (429s) |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for kind in kinds:
        runs = [measure(binary, args.requests, args.blocks, kind, args.mib, not args.no_pin, args.client)
                for _ in range(max(1, args.runs))]
        lines.append(row(kind, args.mib, runs))
        print(lines[-1], flush=True)
    load_after = loadavg()
    text = "\n".join(lines) + (
        "\n\nms; round trips seen by the light client (%s), medians over %d runs of %d light requests "
        "(%d idle and %d loaded blocks each); server p99: the light requests' Server-Timing. Load average (1 min) "
        "before / after: %.2f / %.2f on %d cores." % (
            "http.client" if args.client == "http" else "requests", max(1, args.runs), args.requests, args.blocks,
            args.blocks, load_before, load_after, os.cpu_count() or 0))
    print(text)
    if args.write_readme:
        head = "## isolation: the matrix"
        body = (head + "\n\n`bench/isolation.py`: two partitions of share 0.5 (one pinned core each here), a light "
                "tenant's tiny `/v1/run` (a 3-node program on 16 floats, one request at a time over keep-alive) "
                "idle and while the heavy tenant, on its own partition, does each of the following from a client "
                "process pinned to that partition's core (the light client pinned to its own).\n\n" + text +
                "\n\nRun: `python3 bench/isolation.py --build build --heavy %s --runs %d --blocks %d%s "
                "--write-readme`.\n" % (args.heavy, args.runs, args.blocks,
                                         "" if args.client == "http" else " --client requests"))
        write_readme_section(head, body)


if __name__ == "__main__":
    sys.exit(main())
