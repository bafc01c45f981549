#!/usr/bin/env python3
"""Fused optimizers: tensord's step vs torch's CPU optimizers, and vs the
memory-bandwidth floor, in one run (DESIGN.md "Performance targets").

16M float32 parameters as 4 tensors. tensord's time is the registered "cpu"
kernel (bench/optim_kernel.cpp: validation, allocation of the new buffers,
the fused pass), median of the runs; torch's is optimizer.step() with
foreach=True and foreach=False, torch.set_num_threads(2), median of the
runs. The floor is the bytes one pass must move (every parameter, gradient
and state element read once, every new parameter and state element written
once) over the copy bandwidth measured in the same run (the faster of glibc
memcpy and a streaming-store copy, 2 threads).

    python3 bench/optim.py [--build build] [--reps 7] [--write-readme]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchlib import write_readme_section

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

CASES = [  # label, torch class, torch kwargs
    ("sgd", "SGD", {"lr": 1e-3}),
    ("sgd_momentum", "SGD", {"lr": 1e-3, "momentum": 0.9}),
    ("adam", "Adam", {}),
    ("adamw", "AdamW", {}),
    ("adam_amsgrad", "Adam", {"amsgrad": True}),
    ("adagrad", "Adagrad", {}),
]


def kernel_bench(binary, reps, numel, tensors, mallopt):
    out = subprocess.run([binary, "--reps", str(reps), "--numel", str(numel), "--tensors", str(tensors),
                          "--mallopt", "1" if mallopt else "0"], check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    copy = next(r for r in rows if r["kind"] == "copy")
    steps = {r["optimizer"]: r for r in rows if r["kind"] == "step"}
    return copy, steps


def torch_bench(reps, numel, tensors):
    import torch
    torch.set_num_threads(2)
    per = numel // tensors
    out = {}
    for label, cls, kw in CASES:
        for foreach in (True, False):
            g = torch.Generator().manual_seed(0)
            ps = [torch.nn.Parameter(torch.randn(per, generator=g)) for _ in range(tensors)]
            for p in ps:
                p.grad = torch.randn(per, generator=g)
            opt = getattr(torch.optim, cls)(ps, foreach=foreach, **kw)
            times = []
            for r in range(reps + 2):
                t0 = time.perf_counter()
                opt.step()
                if r >= 2:
                    times.append(time.perf_counter() - t0)
            out[(label, foreach)] = statistics.median(times) * 1e3
            del opt, ps
    return out, torch.__version__


def table(copy, steps, tuned, torch_ms, torch_version):
    lines = []
    lines.append("copy bandwidth (2 threads, read+write): memcpy %.1f GB/s, streaming %.1f GB/s; AVX2 loop: %s; "
                 "torch %s" % (copy["memcpy_GBps"], copy["stream_GBps"], copy["avx2"], torch_version))
    lines.append("")
    lines.append("| optimizer | tensord ms (plain malloc) | tensord ms (server allocator) | torch foreach ms | torch single ms | "
                 "speedup vs best torch (server allocator) | tensord GB/s | floor ms | x floor | x floor (server allocator) |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for label, _, _ in CASES:
        s, t = steps[label], tuned[label]
        best_torch = min(torch_ms[(label, True)], torch_ms[(label, False)])
        lines.append("| %s | %.2f | %.2f | %.1f | %.1f | %.1fx | %.1f | %.2f | %.2f | %.2f |" % (
            label, s["ms"], t["ms"], torch_ms[(label, True)], torch_ms[(label, False)], best_torch / t["ms"],
            s["GBps"], s["floor_ms"], s["vs_floor"], t["ms"] / t["floor_ms"]))
    return "\n".join(lines)


README_HEAD = "## optim"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--numel", type=int, default=16 << 20)
    ap.add_argument("--tensors", type=int, default=4)
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench", "optim_kernel_bench")
    if not os.path.exists(binary):
        print("optim: %s not built (ninja -C %s optim_kernel_bench); skipping" % (binary, args.build))
        return 0
    try:
        torch_ms, torch_version = torch_bench(args.reps, args.numel, args.tensors)
    except ImportError:
        print("optim: torch not installed (Debian: python3-torch); skipping")
        return 0
    copy, steps = kernel_bench(binary, args.reps, args.numel, args.tensors, mallopt=False)
    _, tuned = kernel_bench(binary, args.reps, args.numel, args.tensors, mallopt=True)
    text = table(copy, steps, tuned, torch_ms, torch_version)
    intro = ("%dM float32 parameters as %d tensors; median of %d steps. `server allocator`: buffers come from "
             "the CPU backend as in the server, whose block cache returns already-mapped buffers of the same size "
             "class; `plain malloc`: a fresh aligned_alloc per buffer, whose pages the kernel must fault in and "
             "zero on every step.\n\n"
             % (args.numel >> 20, args.tensors, args.reps))
    print(intro + text)
    if args.write_readme:
        write_readme_section(README_HEAD, README_HEAD + "\n\n" + intro + text +
                             "\n\nRun: `python3 bench/optim.py --build build --write-readme`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
