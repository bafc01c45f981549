#!/usr/bin/env python3
"""tensord's CUDA backend against PyTorch on the same GPU, in one run.

What a notebook user sees: a fresh ``build/tensord --backend cuda`` and the
Python client, against torch called locally on the same device. Per case,
medians of --reps runs after a warm-up:

- eigh: ``Client.eigh`` end to end (numpy in, numpy out, over HTTP) and
  the job's ``run_ms``, against torch's round trip (numpy -> cuda ->
  torch.linalg.eigh -> numpy) and torch's kernel alone (synchronized).
  Accuracy: max |A v - v diag(w)| of the server's answer.
- optim: one Adam/AdamW/SGD step over stored parameters on the device
  (the job's ``run_ms``) against ``torch.optim.*(fused=True)``'s step and
  the bandwidth floor (the bytes one pass moves over the device-to-device
  copy bandwidth measured in this run).
- elementwise and matmul over stored device tensors: ``run_ms`` against
  torch's synchronized op.

Without a CUDA device (or a build without the CUDA backend) it prints why
and exits 0.

    python3 bench/cuda.py [--build build] [--reps 5]
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "clients", "python"))

import numpy as np  # noqa: E402

from benchlib import start_server  # noqa: E402


def med(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def cuda_ms(torch, fn, reps):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def run_ms(c, program, reps, **kw):
    c.run(program, **kw)
    ts = []
    for _ in range(reps):
        c.run(program, **kw)
        ts.append(float(c.last_job["run_ms"]))
    return statistics.median(ts)


def sym(batch, n, seed=0):
    a = np.random.default_rng(seed).standard_normal((batch, n, n), dtype=np.float32)
    return np.ascontiguousarray((a + a.transpose(0, 2, 1)) * np.float32(0.5))


def bench_eigh(c, torch, reps, rows):
    for batch, n in [(10000, 8), (10000, 16), (10000, 32), (1000, 64), (100, 256)]:
        a = sym(batch, n)
        e2e = med(lambda: c.eigh(a), reps)
        w, v = c.eigh(a)
        srv_run = float(c.last_job["run_ms"])
        resid = float(np.abs(a @ v - v * w[:, None, :]).max())

        def torch_e2e():
            t = torch.from_numpy(a).cuda()
            tw, tv = torch.linalg.eigh(t)
            return tw.cpu().numpy(), tv.cpu().numpy()

        c.put("bench/eigh", a)
        prog = {"nodes": [{"id": "e", "op": "linalg.eigh", "args": ["$stored/bench/eigh"], "outputs": ["w", "v"]}],
                "outputs": ["w", "v"]}
        stored_run = run_ms(c, prog, reps, store={"w": "bench/w", "v": "bench/v"}, return_=[])
        t_e2e = med(torch_e2e, reps)
        ta = torch.from_numpy(a).cuda()
        t_kernel = cuda_ms(torch, lambda: torch.linalg.eigh(ta), reps)
        rows.append(("eigh %dx%dx%d" % (batch, n, n), e2e, srv_run, t_e2e, t_kernel,
                     "resid %.1e; stored in/out run_ms %.3f" % (resid, stored_run)))


def copy_bandwidth(torch):
    x = torch.empty(1 << 28, dtype=torch.float32, device="cuda")  # 1 GiB
    y = torch.empty_like(x)
    ms = cuda_ms(torch, lambda: y.copy_(x), 10)
    return 2 * x.numel() * 4 / (ms * 1e-3)  # bytes read + written per second


def bench_optim(c, torch, reps, rows, bw):
    numel, tensors = 1 << 24, 4
    each = numel // tensors
    rng = np.random.default_rng(1)
    params = [rng.standard_normal(each, dtype=np.float32) for _ in range(tensors)]
    grads = [rng.standard_normal(each, dtype=np.float32) for _ in range(tensors)]
    for i in range(tensors):
        c.put("bench/p%d" % i, params[i])
        c.put("bench/g%d" % i, grads[i])
    cases = [("adam", "Adam", {}, 2 + 3 * 2), ("adamw", "AdamW", {}, 2 + 3 * 2),
             ("sgd_momentum", "SGD", {"lr": 1e-3, "momentum": 0.9}, 2 + 2 * 2)]
    for label, cls, hyper, elems in cases:
        kind = label.split("_")[0]
        opt = c.optimizer(kind, ["bench/p%d" % i for i in range(tensors)], state="bench/" + label, **hyper)
        prog = opt.program(["$stored/bench/g%d" % i for i in range(tensors)])
        srv = run_ms(c, prog, reps)
        tp = [torch.nn.Parameter(torch.from_numpy(p).cuda()) for p in params]
        for p, g in zip(tp, grads):
            p.grad = torch.from_numpy(g).cuda()
        topt = getattr(torch.optim, cls)(tp, fused=True, **hyper)
        t_ms = cuda_ms(torch, topt.step, reps)
        floor = elems * numel * 4 / bw * 1e3
        rows.append(("%s 16M params" % label, None, srv, None, t_ms, "floor %.3f ms, server %.2fx floor"
                     % (floor, srv / floor)))


def bench_dense(c, torch, reps, rows):
    n = 1 << 26
    x = np.random.default_rng(2).standard_normal(n, dtype=np.float32)
    c.put("bench/x", x)
    prog = {"nodes": [{"id": "m", "op": "mul", "args": ["$stored/bench/x", 2.0], "outputs": ["y"]},
                      {"id": "a", "op": "add", "args": ["y", "$stored/bench/x"], "outputs": ["z"]}],
            "outputs": ["z"]}
    srv = run_ms(c, prog, reps, store={"z": "bench/z"}, return_=[])
    tx = torch.from_numpy(x).cuda()
    t_ms = cuda_ms(torch, lambda: tx * 2.0 + tx, reps)
    rows.append(("mul+add 64M float32", None, srv, None, t_ms, ""))

    m = 4096
    a = np.random.default_rng(3).standard_normal((m, m), dtype=np.float32)
    c.put("bench/a", a)
    prog = {"nodes": [{"id": "mm", "op": "matmul", "args": ["$stored/bench/a", "$stored/bench/a"],
                       "outputs": ["y"]}], "outputs": ["y"]}
    srv = run_ms(c, prog, reps, store={"y": "bench/y"}, return_=[])
    ta = torch.from_numpy(a).cuda()
    torch.backends.cuda.matmul.allow_tf32 = False
    t_ms = cuda_ms(torch, lambda: ta @ ta, reps)
    rows.append(("matmul 4096^2 float32", None, srv, None, t_ms, "%.1f TFLOP/s server"
                 % (2 * m ** 3 / (srv * 1e-3) / 1e12)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("bench/cuda.py: skipped, torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("bench/cuda.py: skipped, no CUDA device")
        return 0
    from tensord import Client

    proc, url = start_server(os.path.join(args.build, "tensord"), ["--backend", "cuda"])
    try:
        c = Client(url)
        info = c.info()
        print("server:", info.get("backend"), info.get("devices"))
        print("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name(0)))
        bw = copy_bandwidth(torch)
        print("device copy bandwidth %.0f GB/s (read + write)" % (bw / 1e9))
        rows = []
        for fn in (bench_eigh, lambda c, t, r, rows: bench_optim(c, t, r, rows, bw), bench_dense):
            try:
                fn(c, torch, args.reps, rows)
            except Exception as e:  # report and go on: one failing case must not hide the others
                rows.append((getattr(fn, "__name__", "case"), None, None, None, None, "FAILED: %r" % e))
        print("\n| case | server e2e ms | server run_ms | torch e2e ms | torch kernel ms | note |")
        print("|---|---|---|---|---|---|")
        fmt = lambda v: "-" if v is None else "%.3f" % v  # noqa: E731
        for r in rows:
            print("| %s | %s | %s | %s | %s | %s |" % (r[0], fmt(r[1]), fmt(r[2]), fmt(r[3]), fmt(r[4]), r[5]))
    finally:
        proc.terminate()
        rc = proc.wait(30)
    # Stored tensors live on the device by now: the shutdown's checkpoint and
    # teardown must still end cleanly.
    print("server exit status after SIGTERM: %d" % rc)
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
