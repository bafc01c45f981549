#!/usr/bin/env python3
"""The torch side of the benchmarks, run under whichever interpreter holds
the torch to compare against (benchlib.torch_peers: PyPI's torch 2.15 in
build/torch-venv, the peer; Debian's 1.13, the old column), so that one
benchmark run measures both. Prints one JSON line.

    PYTHON bench/torch_peer.py optim --numel N --tensors T --reps R --threads 2
    PYTHON bench/torch_peer.py eigh --npy FILE --reps R --threads 2
    PYTHON bench/torch_peer.py loop --numel N --trips T --reps R --threads 1
    PYTHON bench/torch_peer.py ops --numel N --mm n --reps R --threads 2

optim: each case of bench/optim.py as optimizer.step() with foreach=True,
foreach=False and fused=True (where this torch has a fused CPU kernel for
it: torch 2.4+; null otherwise), median ms of `reps` steps after two
warm-up steps. eigh: torch.linalg.eigh of the array, median ms. loop:
bench/graphs.py's captured while_loop as a Python loop of eager ops (i + 1,
x * 1.0001 + 0.5 on float32[numel]), median us per trip. ops: bench/ops.py's
cases (add, mul, exp, sum on float32[numel]; matmul of two [mm, mm]), out
of place, and into a result allocated once (out=), median ms.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from optim import CASES  # noqa: E402


def median_ms(fn, reps, warmup=2):
    times = []
    for r in range(reps + warmup):
        t0 = time.perf_counter()
        fn()
        if r >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def optim(a):
    per = a.numel // a.tensors
    out = {}
    for label, cls, kw in CASES:
        row = {}
        for variant, extra in (("foreach", {"foreach": True}), ("single", {"foreach": False}),
                               ("fused", {"fused": True})):
            g = torch.Generator().manual_seed(0)
            ps = [torch.nn.Parameter(torch.randn(per, generator=g)) for _ in range(a.tensors)]
            for p in ps:
                p.grad = torch.randn(per, generator=g)
            try:
                opt = getattr(torch.optim, cls)(ps, **kw, **extra)
                opt.step()  # a torch without this fused CPU kernel refuses here or above
            except (TypeError, RuntimeError, ValueError) as e:
                row[variant] = None
                row[variant + "_why"] = str(e).splitlines()[0][:200]
                continue
            row[variant] = median_ms(opt.step, a.reps)
            del opt, ps
        out[label] = row
    return out


def eigh(a):
    import numpy as np
    t = torch.from_numpy(np.load(a.npy))
    return {"ms": median_ms(lambda: torch.linalg.eigh(t), a.reps, warmup=1)}


def loop(a):
    ts = []
    for _ in range(a.reps):
        x = torch.ones(a.numel)
        t0 = time.perf_counter()
        i = 0
        while i < a.trips:
            i += 1
            x = x * 1.0001 + 0.5
        ts.append((time.perf_counter() - t0) / a.trips * 1e6)
    return {"us_per_trip": statistics.median(ts)}


def ops(a):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(a.numel, generator=g), torch.randn(a.numel, generator=g)
    m1, m2 = torch.randn(a.mm, a.mm, generator=g), torch.randn(a.mm, a.mm, generator=g)
    out, mout = torch.empty(a.numel), torch.empty(a.mm, a.mm)
    cases = {"add": lambda: torch.add(x, y), "mul": lambda: torch.mul(x, y), "exp": lambda: torch.exp(x),
             "sum": lambda: torch.sum(x), "matmul": lambda: torch.matmul(m1, m2),
             # into a result allocated once (out=): no fresh pages per call
             "add_out": lambda: torch.add(x, y, out=out), "mul_out": lambda: torch.mul(x, y, out=out),
             "exp_out": lambda: torch.exp(x, out=out), "matmul_out": lambda: torch.matmul(m1, m2, out=mout)}
    return {name: median_ms(fn, a.reps) for name, fn in cases.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["optim", "eigh", "loop", "ops"])
    ap.add_argument("--numel", type=int, default=16 << 20)
    ap.add_argument("--tensors", type=int, default=4)
    ap.add_argument("--npy")
    ap.add_argument("--trips", type=int, default=5000)
    ap.add_argument("--mm", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    res = {"optim": optim, "eigh": eigh, "loop": loop, "ops": ops}[a.what](a)
    print(json.dumps({"version": torch.__version__, "threads": a.threads, "result": res}))


if __name__ == "__main__":
    main()
