#!/usr/bin/env python3
"""Elementwise and matmul in the server against today's torch, with
Debian's 1.13 beside it (DESIGN.md: the peer is PyPI's torch), one run.

tensord: the operands stored once, each rep one /v1/run whose result is
stored (no tensor crosses the wire), timed by the job's `run_ms` (the
server's own measurement: the kernel, its output's allocation and the
commit). torch: the same op out of place (a fresh result each call, as the
server's), and into a result allocated once (out=: no fresh pages each
call, which torch's CPU allocator returns to the OS for large blocks),
under each interpreter benchlib.torch_peers finds
(bench/torch_peer.py), torch.set_num_threads(2) (the server's cores).
Medians of R.

    python3 bench/ops.py [--build build] [--numel N] [--mm N] [--reps R]
"""

import argparse
import os
import statistics
import sys

import numpy as np

from benchlib import run_torch_peer, start_server, torch_peers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
import tensord  # noqa: E402

# label, op, operands (stored names), torch_peer's case name
CASES = [
    ("add float32[N]", "add", ["x", "y"], "add"),
    ("mul float32[N]", "mul", ["x", "y"], "mul"),
    ("exp float32[N]", "exp", ["x"], "exp"),
    ("sum float32[N]", "sum", ["x"], "sum"),
    ("matmul float32[n,n] @ [n,n]", "matmul", ["a", "b"], "matmul"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--numel", type=int, default=16 << 20)
    ap.add_argument("--mm", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=9)
    a = ap.parse_args()
    peers = torch_peers()
    if not peers:
        sys.exit("bench/ops.py: no interpreter with torch (make torch-venv; Debian: python3-torch)")
    proc, url = start_server(os.path.join(a.build, "tensord"), ["--backend", "cpu", "--checkpoint-every", "0"])
    rows = []
    try:
        c = tensord.Client(url)
        rng = np.random.default_rng(0)
        c.put("bench/ops/x", rng.standard_normal(a.numel).astype(np.float32))
        c.put("bench/ops/y", rng.standard_normal(a.numel).astype(np.float32))
        c.put("bench/ops/a", rng.standard_normal((a.mm, a.mm)).astype(np.float32))
        c.put("bench/ops/b", rng.standard_normal((a.mm, a.mm)).astype(np.float32))
        for label, op, args, case in CASES:
            node = {"id": "r", "op": op, "args": ["$stored/bench/ops/" + n for n in args], "outputs": ["r"]}
            times = []
            for r in range(a.reps + 2):
                c.run({"nodes": [node], "outputs": ["r"]}, store={"r": "bench/ops/r"})
                if r >= 2:
                    times.append(float(c.last_job["run_ms"]))
            rows.append((label, case, statistics.median(times)))
    finally:
        proc.terminate()
        proc.wait(30)
    peer_ms = [run_torch_peer(py, "ops", "--numel", a.numel, "--mm", a.mm, "--reps", a.reps, "--threads", 2)
               for _, py in peers]
    labels = [label for label, _ in peers]
    print("N = %d (%d MiB a float32 operand), n = %d; median of %d; tensord: job run_ms; torch: 2 threads, "
          "out of place; %s" % (a.numel, a.numel * 4 >> 20, a.mm, a.reps, ", ".join(labels)))
    print()
    fmt = lambda v: "-" if v is None else "%.2f" % v  # noqa: E731
    print("| op | tensord ms | " + " | ".join("%s ms | %s out= ms" % (l, l) for l in labels) + " | " +
          " | ".join("tensord vs %s (best)" % l for l in labels) + " |")
    print("|---|---:|" + "---:|" * (3 * len(labels)))
    for label, case, ms in rows:
        plain = [p["result"][case] for p in peer_ms]
        into = [p["result"].get(case + "_out") for p in peer_ms]
        best = [min(t for t in (a_, b_) if t is not None) for a_, b_ in zip(plain, into)]
        print("| %s | %.2f | " % (label, ms) + " | ".join("%s | %s" % (fmt(t), fmt(u)) for t, u in zip(plain, into)) +
              " | " + " | ".join("%.2fx" % (t / ms) for t in best) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
