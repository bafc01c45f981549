#!/usr/bin/env python3
"""Fused optimizers: tensord's step vs torch's CPU optimizers, and vs the
memory-bandwidth floor, in one run (DESIGN.md "Performance targets").

16M float32 parameters as 4 tensors. tensord's time is the registered "cpu"
kernel (bench/optim_kernel.cpp: validation, allocation of the new buffers,
the fused pass), median of the runs; torch's is optimizer.step() with
fused=True (torch's fused CPU kernels, 2.4+), foreach=True and
foreach=False, torch.set_num_threads(2), median of the runs, for each torch
benchlib.torch_peers finds (PyPI's 2.15, the peer, and Debian's 1.13, the
old column), each in its own interpreter (bench/torch_peer.py) in the same
run. The floor is the bytes one pass must move (every parameter, gradient
and state element read once, every new parameter and state element written
once) over the copy bandwidth measured in the same run (the faster of glibc
memcpy and a streaming-store copy, 2 threads).

The second table is the step in the real server (build/tensord): the
parameters and gradients stored (one upload, no bytes on the wire per
step), one `/v1/run` of a one-node program per step, the job's `run_ms`.
Each round measures, back to back, the copy bandwidth, one kernel step
(optim_kernel_bench --serve, the server allocator) and one server step (in
the other order every other round), so all three see the same moment of a
shared machine; ratios are medians of
the per-round ratios. The server's minor page faults per step come from
/proc/<pid>/stat; "outside the op" is the job's run span minus its one op
span, both from /v1/trace (validation, allocation and the fused pass are
inside the op; the commit and the job's releases outside).

    python3 bench/optim.py [--build build] [--reps 7] [--server-reps 15] [--write-readme]
    python3 bench/optim.py --server-only [--tensord other/build/tensord]   # the in-server table alone
"""

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

from benchlib import run_torch_peer, start_server, torch_peers, write_readme_section

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


COMPUTE_NICE = 5  # the server's partition threads (ops/cpu/thread_pool.h kComputeNice)

# The server's program per case: kwargs as bench/optim_kernel.cpp's cases
# (op, kwargs; "state" filled in per case).
SERVER_CASES = {
    "sgd": ("optim.sgd", {"lr": 1e-3}),
    "sgd_momentum": ("optim.sgd", {"lr": 1e-3, "momentum": 0.9, "state": True}),
    "adam": ("optim.adam", {"state": True}),
    "adamw": ("optim.adamw", {"state": True}),
    "adam_amsgrad": ("optim.adam", {"amsgrad": True, "state": True}),
    "adagrad": ("optim.adagrad", {"state": True}),
}


def kernel_bench(binary, reps, numel, tensors, mallopt):
    out = subprocess.run([binary, "--reps", str(reps), "--numel", str(numel), "--tensors", str(tensors),
                          "--mallopt", "1" if mallopt else "0"], check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    copy = next(r for r in rows if r["kind"] == "copy")
    steps = {r["optimizer"]: r for r in rows if r["kind"] == "step"}
    return copy, steps


def torch_bench(reps, numel, tensors):
    """[(label, {case: {"foreach", "single", "fused"} ms or None})], one per torch peer, newest first."""
    return [(label, run_torch_peer(py, "optim", "--numel", numel, "--tensors", tensors, "--reps", reps,
                                   "--threads", 2)["result"]) for label, py in torch_peers()]


def best(row):
    return min(v for k, v in row.items() if k in ("foreach", "single", "fused") and v is not None)


def table(copy, steps, tuned, peers):
    """peers: torch_bench's list; the first is the peer the speedup is against."""
    fmt = lambda v: "-" if v is None else "%.1f" % v  # noqa: E731
    lines = []
    lines.append("copy bandwidth (2 threads, read+write): memcpy %.1f GB/s, streaming %.1f GB/s; AVX2 loop: %s; "
                 "%s" % (copy["memcpy_GBps"], copy["stream_GBps"], copy["avx2"], ", ".join(p[0] for p in peers)))
    lines.append("")
    cols = ["optimizer", "tensord ms (plain malloc)", "tensord ms (server allocator)"]
    for label, _ in peers:
        cols += ["%s fused ms" % label, "%s foreach ms" % label, "%s single ms" % label,
                 "speedup vs best %s" % label]
    cols += ["tensord GB/s", "floor ms", "x floor", "x floor (server allocator)"]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))
    for label, _, _ in CASES:
        s, t = steps[label], tuned[label]
        cells = [label, "%.2f" % s["ms"], "%.2f" % t["ms"]]
        for _, res in peers:
            row = res[label]
            cells += [fmt(row["fused"]), fmt(row["foreach"]), fmt(row["single"]), "%.1fx" % (best(row) / t["ms"])]
        cells += ["%.1f" % s["GBps"], "%.2f" % s["floor_ms"], "%.2f" % s["vs_floor"], "%.2f" % (t["ms"] / t["floor_ms"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def safetensors_body(tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        raw = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def outside_op_ms(session, url):
    """The last job's run span minus its op span (ms), from /v1/trace."""
    evs = session.get(url + "/v1/trace?last=20", timeout=30).json()
    evs = evs["traceEvents"] if isinstance(evs, dict) else evs
    last = {}
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") in ("job", "op") and e["ts"] >= last.get(e["cat"], {}).get("ts", -1):
            last[e["cat"]] = e
    return (last["job"]["dur"] - last["op"]["dur"]) / 1e3


def minor_faults(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])  # field 10, minflt


class KernelServer:
    """optim_kernel_bench --serve: one copy measurement or kernel step per call."""

    def __init__(self, binary, numel, tensors):
        # At the server's compute priority (nice +5, ops/cpu/thread_pool.h
        # kComputeNice): under other load, kernel, copy and server steps then
        # get the same share of the cores.
        self.p = subprocess.Popen([binary, "--serve", "1", "--reps", "3", "--numel", str(numel),
                                   "--tensors", str(tensors)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, COMPUTE_NICE))

    def ask(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        r = json.loads(self.p.stdout.readline())
        if r["kind"] == "error":
            raise SystemExit("optim_kernel_bench --serve: %s: %s" % (cmd, r["message"]))
        return r

    def close(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        self.p.wait(30)


def request_grads_rounds(url, ks, prefix, tensors, per, reps, rng):
    """Adam with its gradients sent in each request (the client's
    opt.step(numpy arrays)): the same stored parameters and state."""
    import numpy as np
    import requests
    sys.path.insert(0, os.path.join(REPO, "clients", "python"))
    from tensord import Client
    c = Client(url)
    trace = requests.Session()
    opt = c.optimizer("adam", params=["%s/w%d" % (prefix, i) for i in range(tensors)], state=prefix + "/st")
    grads = [rng.standard_normal(per, dtype=np.float32) for _ in range(tensors)]
    opt.step(grads)
    rows = []
    for i in range(reps):
        cp = ks.ask("copy")
        if i % 2:
            opt.step(grads)
            k = ks.ask("step adam")
        else:
            k = ks.ask("step adam")
            opt.step(grads)
        run_ms = float(c.last_job["run_ms"])
        floor = k["bytes"] / (max(cp["memcpy_GBps"], cp["stream_GBps"]) * 1e9) * 1e3
        rows.append((run_ms, k["ms"], floor, 0, outside_op_ms(trace, url)))
    return summarize(rows, faults=None)


def summarize(rows, faults=True):
    med = statistics.median
    return {"run_ms": med(r[0] for r in rows), "kernel_ms": med(r[1] for r in rows),
            "floor_ms": med(r[2] for r in rows), "x_floor": med(r[0] / r[2] for r in rows),
            "kernel_x_floor": med(r[1] / r[2] for r in rows), "vs_kernel": med(r[0] / r[1] for r in rows),
            "faults": med(r[3] for r in rows) if faults else None, "outside_ms": med(r[4] for r in rows)}


def server_bench(tensord, kernel_binary, reps, numel, tensors):
    """Per case: {"run_ms", "kernel_ms", "floor_ms", "x_floor", "kernel_x_floor", "vs_kernel", "faults"}."""
    import numpy as np
    import requests
    proc, url = start_server(tensord)
    ks = KernelServer(kernel_binary, numel, tensors)
    s = requests.Session()
    per = numel // tensors
    rng = np.random.default_rng(0)
    out = {}
    try:
        for label, _, _ in CASES:
            op, kw = SERVER_CASES[label]
            prefix = "bench/%s" % label
            kw = dict(kw)
            if kw.get("state"):
                kw["state"] = prefix + "/st"
            body = {}
            for i in range(tensors):
                body["%s/w%d" % (prefix, i)] = rng.standard_normal(per, dtype=np.float32)
                body["%s/g%d" % (prefix, i)] = rng.standard_normal(per, dtype=np.float32)
            r = s.post(url + "/v1/tensors:upload", data=safetensors_body(body),
                       headers={"Content-Type": "application/vnd.safetensors"}, timeout=120)
            r.raise_for_status()
            del body
            prog = {"nodes": [{"id": "step", "op": op, "kwargs": kw, "outputs": [],
                               "args": [["$stored/%s/w%d" % (prefix, i) for i in range(tensors)],
                                        ["$stored/%s/g%d" % (prefix, i) for i in range(tensors)]]}],
                    "outputs": []}

            def server_step():
                f0 = minor_faults(proc.pid)
                r = s.post(url + "/v1/run", json={"program": prog}, timeout=120)
                r.raise_for_status()
                faults = minor_faults(proc.pid) - f0
                return r.json()["job"]["run_ms"], faults, outside_op_ms(s, url)

            for _ in range(2):  # state creation, then the first step over cached blocks
                server_step()
                ks.ask("step " + label)
            rows = []
            for i in range(reps):
                c = ks.ask("copy")
                if i % 2:  # the server first every other round: neither always follows the other's writes
                    run_ms, faults, outside = server_step()
                    k = ks.ask("step " + label)
                else:
                    k = ks.ask("step " + label)
                    run_ms, faults, outside = server_step()
                floor = k["bytes"] / (max(c["memcpy_GBps"], c["stream_GBps"]) * 1e9) * 1e3
                rows.append((run_ms, k["ms"], floor, faults, outside))
            out[label] = summarize(rows)
            if label == "adam":
                out["adam, grads in the request"] = request_grads_rounds(url, ks, prefix, tensors, per, reps, rng)
            for t in s.get(url + "/v1/tensors", params={"prefix": prefix + "/"}, timeout=30).json()["tensors"]:
                s.delete(url + "/v1/tensors/" + t["name"], timeout=30)
    finally:
        ks.close()
        proc.terminate()
        proc.wait(30)
    return out


def server_table(res, reps):
    lines = ["| optimizer | server run_ms | outside the op ms | kernel ms (same rounds) | floor ms | run_ms / floor | "
             "kernel / floor | run_ms / kernel | server page faults per step |", "|---|---|---|---|---|---|---|---|---|"]
    for label, r in res.items():
        lines.append("| %s | %.2f | %.2f | %.2f | %.2f | **%.2f** | %.2f | %.2f | %s |" % (
            label, r["run_ms"], r["outside_ms"], r["kernel_ms"], r["floor_ms"], r["x_floor"], r["kernel_x_floor"],
            r["vs_kernel"], "-" if r["faults"] is None else "%d" % r["faults"]))
    return "\n".join(lines)


README_HEAD = "## optim"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--numel", type=int, default=16 << 20)
    ap.add_argument("--tensors", type=int, default=4)
    ap.add_argument("--server-reps", type=int, default=15, help="rounds of the in-server table")
    ap.add_argument("--server-only", action="store_true", help="only the in-server table (no torch, no README)")
    ap.add_argument("--tensord", help="the server binary (default: <build>/tensord; another build, for before/after)")
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench", "optim_kernel_bench")
    if not os.path.exists(binary):
        print("optim: %s not built (ninja -C %s optim_kernel_bench); skipping" % (binary, args.build))
        return 0
    tensord = args.tensord or os.path.join(args.build, "tensord")
    if args.server_only:
        print(server_table(server_bench(tensord, binary, args.server_reps, args.numel, args.tensors), args.server_reps))
        return 0
    peers = torch_bench(args.reps, args.numel, args.tensors)
    if not peers:
        print("optim: no interpreter with torch (make torch-venv; Debian: python3-torch); skipping")
        return 0
    copy, steps = kernel_bench(binary, args.reps, args.numel, args.tensors, mallopt=False)
    _, tuned = kernel_bench(binary, args.reps, args.numel, args.tensors, mallopt=True)
    text = table(copy, steps, tuned, peers)
    intro = ("%dM float32 parameters as %d tensors; median of %d steps. `server allocator`: buffers come from "
             "the CPU backend as in the server, whose block cache returns already-mapped buffers of the same size "
             "class; `plain malloc`: a fresh aligned_alloc per buffer, whose pages the kernel must fault in and "
             "zero on every step.\n\n"
             % (args.numel >> 20, args.tensors, args.reps))
    if os.path.exists(tensord):
        load0 = os.getloadavg()[0]
        res = server_bench(tensord, binary, args.server_reps, args.numel, args.tensors)
        text += ("\n\nIn the server (the job's `run_ms`, parameters and gradients stored, state stored; "
                 "median of %d rounds, each: copy bandwidth, one kernel step and one server step, in turn first; kernel and copy at the server's compute nice +5; load average "
                 "%.1f before, %.1f after):\n\n" % (args.server_reps, load0, os.getloadavg()[0]))
        text += server_table(res, args.server_reps)
    else:
        text += "\n\nIn the server: %s not built; skipped." % tensord
    print(intro + text)
    if args.write_readme:
        write_readme_section(README_HEAD, README_HEAD + "\n\n" + intro + text +
                             "\n\nRun: `python3 bench/optim.py --build build --write-readme`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
