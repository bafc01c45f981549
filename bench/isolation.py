#!/usr/bin/env python3
"""Isolation between tenants on their own partitions (DESIGN.md targets):
a light tenant's tiny-program latency when the server is idle, and while a
neighbour (the heavy tenant) works on its own partition, measured in one
run, for each neighbour of a matrix (bench/isolation_neighbours.py: pure
compute, compute on large JSON and safetensors inputs, uploads, downloads,
a request storm at its queue limit, slow readers and bodies cut short,
SIGHUP reloads and checkpoints).

    python3 bench/isolation.py [--build build] [--requests 300] [--runs 1] [--blocks 1]
                               [--heavy all|KIND[,KIND...]] [--mib 8] [--write-readme]

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
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time

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


def light_latencies(url, n, warmup=20):
    s = requests.Session()
    s.headers["Authorization"] = "Bearer " + TOKENS["light"]
    for _ in range(warmup):
        s.post(url + "/v1/run", json=TINY, timeout=30).raise_for_status()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = s.post(url + "/v1/run", json=TINY, timeout=30)
        out.append((time.perf_counter() - t0) * 1e3)
        r.raise_for_status()
    return out


def loadavg():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except OSError:
        return float("nan")


def measure(binary, n_requests, blocks=1, kind="compute", mib=8, pin=True):
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
        light_latencies(url, 0)  # warm up
        # The heavy clients run in another process: in this one they would
        # hold the GIL while encoding and decoding, and the light client's
        # p99 would measure Python's 5 ms GIL switch interval, not the server.
        ctx = multiprocessing.get_context("spawn")
        for _ in range(blocks):
            idle += light_latencies(url, per_block, warmup=0)
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
            loaded += light_latencies(url, per_block, warmup=0)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--blocks", type=int, default=1,
                    help="alternate idle and loaded measurement in this many blocks per run")
    ap.add_argument("--heavy", default="compute",
                    help="the neighbours, comma-separated, or 'all': " + ", ".join(neighbours.KINDS))
    ap.add_argument("--mib", type=int, default=8, help="MiB per upload/download/checkpointed tensor")
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
    lines = ["| neighbour (heavy tenant, own partition) | idle p50 | idle p99 | loaded p50 | loaded p99 | "
             "p99 loaded/idle | runs' p99 ratios | heavy work done (429s) |",
             "|---|---:|---:|---:|---:|---:|---|---:|"]
    for kind in kinds:
        runs = []
        for _ in range(max(1, args.runs)):
            runs.append(measure(binary, args.requests, args.blocks, kind, args.mib, not args.no_pin))
        med = lambda f: statistics.median(f(r) for r in runs)  # noqa: E731
        ratios = [pct(r[1], 0.99) / pct(r[0], 0.99) for r in runs]
        line = "| %s | %.3f | %.3f | %.3f | %.3f | **%.2fx** | %s | %d (%d) |" % (
            neighbours.describe(kind, args.mib), med(lambda r: statistics.median(r[0])), med(lambda r: pct(r[0], 0.99)),
            med(lambda r: statistics.median(r[1])), med(lambda r: pct(r[1], 0.99)), statistics.median(ratios),
            ", ".join("%.2f" % x for x in ratios), sum(r[2] for r in runs), sum(r[3] for r in runs))
        print(line, flush=True)
        lines.append(line)
    load_after = loadavg()
    idle_tail = statistics.median(pct(r[0], 0.99) / statistics.median(r[0]) for r in runs)
    text = "\n".join(lines) + ("\n\nms, medians over %d runs of %d light requests (%d blocks). Light tenant: a "
                               "3-node program on 16 floats, one request at a time over keep-alive. Idle p99 / p50 "
                               "(last row's runs): %.2fx (target <= 3x). Load average (1 min) before / after: "
                               "%.2f / %.2f on %d cores." % (max(1, args.runs), args.requests, args.blocks, idle_tail,
                                                              load_before, load_after, os.cpu_count() or 0))
    print(text)
    if args.write_readme:
        head = "## isolation: the matrix"
        body = (head + "\n\n`bench/isolation.py`: two partitions of share 0.5 (one pinned core each here), a light "
                "tenant's tiny `/v1/run` latency idle and while the heavy tenant, on its own partition, does each of "
                "the following from a client process pinned to that partition's core (the light client pinned to "
                "its own).\n\n" + text + "\n\nRun: `python3 bench/isolation.py --build build --heavy %s --runs %d "
                "--blocks %d --write-readme`.\n" % (args.heavy, args.runs, args.blocks))
        write_readme_section(head, body)


if __name__ == "__main__":
    sys.exit(main())
