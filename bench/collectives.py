#!/usr/bin/env python3
"""all_reduce bus bandwidth on local ranks (API.md 8) against the machine's
memory-copy bandwidth, measured in the same run.

    /usr/bin/python3 bench/collectives.py [--build build] [--ranks 2,4] [--reps 5] [--max-mib 256]

For each R and size, a server with --ranks R runs two SPMD programs whose
data are made in the server (so the wire carries no tensor): `full` ->
`dist.all_reduce` -> `sum`, and `full` -> `sum` alone. The all_reduce's
time is the difference of the two jobs' run_ms (medians of --reps runs);
bus bandwidth is NCCL's convention, bytes * 2 (R - 1) / R / time. The
floor is numpy's copy of the same bytes on one core (read + write). Gloo
moves the data over loopback TCP between the rank threads, so the floor
is far off; the ratio says how far.
"""

import argparse
import os
import statistics
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-mib", type=int, default=256)
    args = ap.parse_args()
    binary = os.path.join(args.build, "tensord")
    sizes = [1 << 10]
    while sizes[-1] < args.max_mib << 20:
        sizes.append(sizes[-1] * 8 if sizes[-1] < (1 << 20) else sizes[-1] * 4)
    sizes = [s for s in sizes if s <= args.max_mib << 20]
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
    print("load average after: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
