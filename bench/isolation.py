#!/usr/bin/env python3
"""Isolation between tenants on their own partitions (DESIGN.md targets):
a light tenant's tiny-program latency when the server is idle, and while a
heavy tenant saturates its own partition, measured in one run.

    python3 bench/isolation.py [--build build] [--requests 300] [--write-readme]

Config: two partitions of share 0.5 (one core each on a 2-core machine,
threads pinned), workqueue_limit 2; tenant "light" on one, "heavy" on the
other. The heavy tenant keeps 4 clients submitting 200x200 float64 matmul
chains (~60 ms each) back to back; the light tenant sends a 3-node program
on 16 floats, one request at a time, over keep-alive.
"""

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

TOKENS = {"light": "light-token", "heavy": "heavy-token"}


def sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


def start_server(binary, config_path):
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--config", config_path], stderr=subprocess.PIPE)
    line = p.stderr.readline().decode()
    m = re.search(r"listening on (http://\S+)", line)
    if not m:
        p.kill()
        raise SystemExit("server did not start: " + line)
    threading.Thread(target=lambda: [None for _ in iter(p.stderr.readline, b"")], daemon=True).start()
    return p, m.group(1)


TINY = {"program": {"nodes": [{"id": "a", "op": "mul", "args": ["x", 2.0], "outputs": ["y"]},
                              {"id": "b", "op": "add", "args": ["y", 1.0], "outputs": ["z"]},
                              {"id": "s", "op": "sum", "args": ["z"], "outputs": ["t"]}],
                    "outputs": ["t"]},
        "inputs": {"x": {"dtype": "float32", "shape": [16], "data": [1.0] * 16}}}


def heavy_program(n=40, size=200):
    nodes = [{"id": "r", "op": "rand", "args": [[size, size]], "kwargs": {"dtype": "float64", "seed": 1},
              "outputs": ["x0"]}]
    for i in range(n):
        nodes.append({"id": "m%d" % i, "op": "matmul", "args": ["x%d" % i, "x0"], "outputs": ["x%d" % (i + 1)]})
    nodes.append({"id": "s", "op": "sum", "args": ["x%d" % n], "outputs": ["t"]})
    return {"program": {"nodes": nodes, "outputs": ["t"]}}


def light_latencies(url, n):
    s = requests.Session()
    s.headers["Authorization"] = "Bearer " + TOKENS["light"]
    for _ in range(20):  # warm up
        s.post(url + "/v1/run", json=TINY, timeout=30).raise_for_status()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = s.post(url + "/v1/run", json=TINY, timeout=30)
        out.append((time.perf_counter() - t0) * 1e3)
        r.raise_for_status()
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args()
    binary = os.path.join(args.build, "tensord")
    cfg = {"partitions": [{"name": "light", "share": 0.5, "workqueue_limit": 2},
                          {"name": "heavy", "share": 0.5, "workqueue_limit": 2}],
           "tenants": [{"name": "light", "token_sha256": sha(TOKENS["light"]), "partition": "light"},
                       {"name": "heavy", "token_sha256": sha(TOKENS["heavy"]), "partition": "heavy",
                        "max_queued": 64}]}
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    proc, url = start_server(binary, path)
    try:
        idle = light_latencies(url, args.requests)
        stop = threading.Event()
        heavy_done = [0]

        def heavy_client():
            s = requests.Session()
            s.headers["Authorization"] = "Bearer " + TOKENS["heavy"]
            body = heavy_program()
            while not stop.is_set():
                r = s.post(url + "/v1/run", json=body, timeout=120)
                if r.status_code == 200:
                    heavy_done[0] += 1

        threads = [threading.Thread(target=heavy_client, daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # the heavy partition is saturated now
        info = requests.get(url + "/v1/info", timeout=10).json()
        loaded = light_latencies(url, args.requests)
        stop.set()
        for t in threads:
            t.join(120)
    finally:
        proc.terminate()
        proc.wait(30)
        os.unlink(path)
    heavy_parts = [p for p in info["partitions"] if p["name"] == "heavy"]
    rows = [("idle", idle), ("heavy tenant saturating its partition", loaded)]
    lines = ["| light tenant, tiny /v1/run | p50 ms | p99 ms |", "|---|---:|---:|"]
    for label, xs in rows:
        lines.append("| %s | %.2f | %.2f |" % (label, statistics.median(xs), pct(xs, 0.99)))
    ratio99 = pct(loaded, 0.99) / pct(idle, 0.99)
    ratio50 = statistics.median(loaded) / statistics.median(idle)
    summary = ("p99 loaded / idle: %.2fx (target <= 1.5x); p50: %.2fx. Heavy jobs finished meanwhile: %d; "
               "heavy partition while measured: %s" % (ratio99, ratio50, heavy_done[0],
                                                       json.dumps(heavy_parts[0] if heavy_parts else {})))
    text = "\n".join(lines) + "\n\n" + summary
    print(text)
    if args.write_readme:
        readme = os.path.join(HERE, "README.md")
        old = open(readme).read()
        head = "## isolation"
        body = (head + "\n\n`bench/isolation.py`: two partitions of share 0.5 (one pinned core each here), a light "
                "tenant's tiny `/v1/run` latency (%d requests, one at a time) idle and while a heavy tenant's 4 "
                "clients keep its own partition busy with matmul chains.\n\n" % args.requests + text +
                "\n\nRun: `python3 bench/isolation.py --build build --write-readme`.\n")
        if head in old:
            start = old.index(head)
            nxt = old.find("\n## ", start + 1)
            old = old[:start] + body + (old[nxt + 1:] if nxt >= 0 else "")
        else:
            old = old.rstrip("\n") + "\n\n" + body
        open(readme, "w").write(old)


if __name__ == "__main__":
    sys.exit(main())
