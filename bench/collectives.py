#!/usr/bin/env python3
"""all_reduce bus bandwidth on local ranks (API.md 8) against the machine's
memory-copy bandwidth, measured in the same run; and a data-parallel step
(all_reduce of gradients, then optim.adamw) across two servers joined
through redis-server against the same step on one server with two ranks.

    /usr/bin/python3 bench/collectives.py [--build build] [--ranks 2,4] [--reps 5] [--max-mib 256]

For each R and size, a server with --ranks R runs two SPMD programs whose
data are made in the server (so the wire carries no tensor): `full` ->
`dist.all_reduce` -> `sum`, and `full` -> `sum` alone. The all_reduce's
time is the difference of the two jobs' run_ms (medians of --reps runs);
bus bandwidth is NCCL's convention, bytes * 2 (R - 1) / R / time. The
floor is numpy's copy of the same bytes on one core (read + write). Gloo
moves the data over loopback TCP between the rank threads, so the floor
is far off; the ratio says how far.

The data-parallel step: each rank draws its own gradient in the server
(randn without a seed), all-reduces it (avg) and steps AdamW on a stored
parameter of --dp-mib MiB; whole-request time (the client's) and run_ms,
medians of --reps.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

import numpy as np
import requests

from benchlib import start_server

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def program(n, reduce):
    nodes = [{"id": "f", "op": "full", "args": [[n], 1.0], "outputs": ["x"]}]
    src = "x"
    if reduce:
        nodes.append({"id": "a", "op": "dist.all_reduce", "args": ["x"], "outputs": ["y"]})
        src = "y"
    nodes.append({"id": "s", "op": "sum", "args": [src], "outputs": ["s"]})
    return {"nodes": nodes, "outputs": ["s"]}


def run_ms(url, prog, ranks):
    r = requests.post(url + "/v1/run", json={"program": prog, "ranks": ranks}, timeout=600)
    r.raise_for_status()
    return r.json()["job"]["run_ms"]


def copy_gbps(nbytes, reps):
    a = np.ones(nbytes // 4, np.float32)
    b = np.empty_like(a)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(b, a)
        ts.append(time.perf_counter() - t0)
    return 2 * nbytes / statistics.median(ts) / 1e9


def dp_program(n):
    return {"nodes": [{"id": "g", "op": "randn", "args": [[n]], "outputs": ["g"]},
                      {"id": "a", "op": "dist.all_reduce", "args": ["g"], "kwargs": {"op": "avg"}, "outputs": ["gm"]},
                      {"id": "s", "op": "optim.adamw", "args": [["$stored/dp/w"], ["gm"]],
                       "kwargs": {"state": "dp/opt", "lr": 1e-3}, "outputs": []}],
            "outputs": []}


def dp_step(url, n, reps):
    e2e, run = [], []
    prog = dp_program(n)
    requests.post(url + "/v1/run", json={"program": prog, "ranks": 2}, timeout=600).raise_for_status()
    for _ in range(reps):
        t0 = time.perf_counter()
        r = requests.post(url + "/v1/run", json={"program": prog, "ranks": 2}, timeout=600)
        e2e.append((time.perf_counter() - t0) * 1e3)
        r.raise_for_status()
        run.append(r.json()["job"]["run_ms"])
    return statistics.median(e2e), statistics.median(run)


def put_param(url, n):
    body = np.zeros(n, np.float32).tobytes()
    h = {"Content-Type": "application/octet-stream", "X-Tensor-Dtype": "float32", "X-Tensor-Shape": str(n)}
    r = requests.put(url + "/v1/tensors/dp/w", data=body, headers=h, timeout=600)
    if r.status_code >= 300:
        import base64
        r = requests.put(url + "/v1/tensors/dp/w", json={"dtype": "float32", "shape": [n],
                                                          "b64": base64.b64encode(body).decode()}, timeout=600)
    r.raise_for_status()


def dp_bench(binary, mib, reps):
    n = (mib << 20) // 4
    print("\ndata-parallel step, %d MiB float32 parameter (%d elements), 2 ranks:" % (mib, n))
    print("| setup | e2e ms | run_ms |")
    print("|---|---:|---:|")
    proc, url = start_server(binary, ["--backend", "cpu", "--ranks", "2"])
    try:
        put_param(url, n)
        one = dp_step(url, n, reps)
        print("| one server, --ranks 2 | %.2f | %.2f |" % one)
    finally:
        proc.terminate()
        proc.wait(30)
    exe = shutil.which("redis-server")
    if exe is None:
        print("two servers: skipped (no redis-server)")
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    redis = subprocess.Popen([exe, "--port", str(port), "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    world = ["--backend", "cpu", "--ranks", "1", "--world-size", "2", "--rendezvous", "redis://127.0.0.1:%d" % port]
    a, ua = start_server(binary, world + ["--rank-offset", "0"])
    b, ub = start_server(binary, world + ["--rank-offset", "1"])
    try:
        put_param(ua, n)
        put_param(ub, n)
        two = dp_step(ua, n, reps)
        print("| two servers, 1 rank each (redis) | %.2f | %.2f |" % two)
        print("two / one: e2e %.2fx, run_ms %.2fx" % (two[0] / one[0], two[1] / one[1]))
    finally:
        for p in (a, b):
            p.terminate()
            p.wait(30)
        redis.terminate()
        redis.wait(10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-mib", type=int, default=256)
    ap.add_argument("--dp-mib", type=int, default=16)
    args = ap.parse_args()
    binary = os.path.join(args.build, "tensord")
    sizes = [(1 << 10) * 4 ** i for i in range(10) if (1 << 10) * 4 ** i <= args.max_mib << 20]  # 1 KiB .. 256 MiB
    print("load average before: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    print("| R | bytes | all_reduce ms | bus GB/s | copy GB/s (floor) | bus / floor |")
    print("|---|---:|---:|---:|---:|---:|")
    for R in [int(x) for x in args.ranks.split(",")]:
        proc, url = start_server(binary, ["--backend", "cpu", "--ranks", str(R), "--threads", "2"])
        try:
            for nbytes in sizes:
                n = nbytes // 4
                run_ms(url, program(n, True), R)  # warm-up: the group joins
                with_ar = [run_ms(url, program(n, True), R) for _ in range(args.reps)]
                without = [run_ms(url, program(n, False), R) for _ in range(args.reps)]
                ms = max(statistics.median(with_ar) - statistics.median(without), 1e-3)
                bus = nbytes * 2 * (R - 1) / R / (ms / 1e3) / 1e9
                floor = copy_gbps(nbytes, args.reps)
                print("| %d | %d | %.3f | %.3f | %.2f | %.3f |" % (R, nbytes, ms, bus, floor, bus / floor))
                sys.stdout.flush()
        finally:
            proc.terminate()
            proc.wait(30)
    dp_bench(binary, args.dp_mib, args.reps)
    print("load average after: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
