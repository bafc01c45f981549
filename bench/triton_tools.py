#!/usr/bin/env python3
"""Triton's perf_analyzer against a captured graph, beside bench/graphs.py's
own replay timing of the same graph in the same run (API.md 11.1):

* the graphs benchmark's 200-node program and a tiny one (y = 3x + 1 on
  float32[64]), each captured once;
* per graph: bench/graphs.py's timed loop (one keep-alive connection,
  http.client) over /v1/graphs/{id}/replay and KServe binary /infer
  (round trip and the server's own Server-Timing), then perf_analyzer
  (count_windows, concurrency 1, binary data, sync HTTP) over the same
  model: its client-side throughput and latency and the server-side
  breakdown it reads from the statistics extension (queue, compute input,
  compute infer, compute output, and the overhead it derives).

* a 64 MiB FP32 input (16M elements, the graph returns its sum) sent by
  tritonclient.http as binary tensor data against the same input in a
  registered system shared memory region: infer latency, median of --reps.

perf_analyzer is the perf-analyzer wheel's binary and tritonclient comes from
PyPI (scripts/install-pytools.sh puts both in build/venv): run this with
build/venv/bin/python.

    build/venv/bin/python bench/triton_tools.py [--build build] [--requests 2000] [--reps 15]
"""

import argparse
import csv
import os
import subprocess
import sys
import tempfile

import requests

from benchlib import start_server
from graphs import Conn, capture, kserve_bodies, program_200, tensor, timed

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def tiny_program(n):
    return {"inputs": {"x": {"dtype": "float32", "shape": [n]}},
            "nodes": [{"id": "m", "op": "mul", "args": ["x", 3.0], "outputs": ["m"]},
                      {"id": "a", "op": "add", "args": ["m", 1.0], "outputs": ["y"]}],
            "outputs": ["y"]}


def perf_analyzer(pa, url, model, count):
    fd, out = tempfile.mkstemp(prefix="tensord-pa-", suffix=".csv")
    os.close(fd)
    cmd = [pa, "-m", model, "-u", url.split("//", 1)[1], "-i", "http", "--measurement-mode", "count_windows",
           "--measurement-request-count", str(count), "--stability-percentage", "50", "--max-trials", "10",
           "-f", out, "--verbose-csv"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    rows = list(csv.DictReader(open(out))) if os.path.getsize(out) else []
    os.unlink(out)
    if p.returncode != 0 or not rows:
        return None, p.stdout[-2000:] + p.stderr[-2000:]
    return rows[0], p.stdout


def shm_against_binary(url, reps):
    """Median infer latency (ms) of a 64 MiB input: binary tensor data, then a shm region."""
    import statistics
    import time
    import uuid

    import numpy as np
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm

    n = 16 << 20
    s = requests.Session()
    prog = {"inputs": {"x": {"dtype": "float32", "shape": [n]}},
            "nodes": [{"id": "s", "op": "sum", "args": ["x"], "outputs": ["t"]}], "outputs": ["t"]}
    gid = capture(s, url, prog)
    c = httpclient.InferenceServerClient(url=url.split("//", 1)[1], network_timeout=120)
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    key = "/bench_%s" % uuid.uuid4().hex[:8]
    h = shm.create_shared_memory_region("bench", key, x.nbytes)
    try:
        shm.set_shared_memory_region(h, [x])
        c.register_system_shared_memory("bench", key, x.nbytes)
        binary = httpclient.InferInput("x", [n], "FP32")
        binary.set_data_from_numpy(x, binary_data=True)
        viashm = httpclient.InferInput("x", [n], "FP32")
        viashm.set_shared_memory("bench", x.nbytes)
        out = {"binary": [], "shm": []}
        for _ in range(reps):
            for label, inp in (("binary", binary), ("shm", viashm)):
                t0 = time.perf_counter()
                r = c.infer(gid, [inp])
                out[label].append((time.perf_counter() - t0) * 1e3)
                assert abs(float(r.as_numpy("t")) - float(x.sum(dtype=np.float64))) < 1e-2 * n ** 0.5
        c.unregister_system_shared_memory("bench")
    finally:
        shm.destroy_shared_memory_region(h)
        c.close()
    return {k: statistics.median(v) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--perf-analyzer", default=os.path.join(REPO, "build", "venv", "bin", "perf_analyzer"))
    a = ap.parse_args()
    if not os.access(a.perf_analyzer, os.X_OK):
        raise SystemExit("perf_analyzer not found at %s: run scripts/install-pytools.sh" % a.perf_analyzer)
    proc, url = start_server(os.path.join(a.build, "tensord"), ["--backend", "cpu"])
    try:
        s = requests.Session()
        conn = Conn(url)
        print("%-10s %-26s %10s %12s" % ("graph", "path", "rtt p50 us", "server p50 us"))
        for label, prog, n in (("tiny", tiny_program(64), 64), ("200-node", program_200(), 64)):
            gid = capture(s, url, prog)
            x = tensor(n, 1)
            _, raw, hdrs = kserve_bodies(x)
            rows = timed(conn, [("/v1/graphs/%s/replay" % gid, {"inputs": {"x": x}}),
                                ("/v2/models/%s/infer" % gid, raw, hdrs)], a.requests // 4)
            for path, r in zip(("replay (JSON)", "KServe infer (binary)"), rows):
                print("%-10s %-26s %10.0f %12.0f" % (label, path, r["rtt"] * 1e3, r["server"] * 1e3))
            row, out = perf_analyzer(a.perf_analyzer, url, gid, a.requests)
            if row is None:
                print("%-10s perf_analyzer failed:\n%s" % (label, out))
                continue
            srv = sum(float(row[k]) for k in ("Server Queue", "Server Compute Input", "Server Compute Infer",
                                                 "Server Compute Output"))
            print("%-10s %-26s %10s %12s   throughput %.0f infer/s, p99 %s us" % (
                label, "perf_analyzer (binary)", row["p50 latency"], "%.0f" % srv,
                float(row["Inferences/Second"]), row["p99 latency"]))
            print("%-10s   server breakdown (us): queue %s, compute input %s, compute infer %s, compute output %s"
                  % (label, row["Server Queue"], row["Server Compute Input"], row["Server Compute Infer"],
                     row["Server Compute Output"]))
            for line in out.splitlines():
                if "Avg request latency" in line:
                    print("%-10s   perf_analyzer: %s" % (label, line.strip()))
        m = shm_against_binary(url, a.reps)
        print("64 MiB FP32 input, tritonclient.http infer, median of %d: binary tensor data %.1f ms, "
              "system shared memory %.1f ms (%.2fx)" % (a.reps, m["binary"], m["shm"], m["shm"] / m["binary"]))
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    sys.exit(main())
