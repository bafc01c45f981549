#!/usr/bin/env python3
"""MX quantize and dequantize through the server, against memory-copy
bandwidth measured in the same run (DESIGN.md "Performance targets": >= 50%
of it for FP8 and FP4).

A float32 tensor of N elements (N(0,1), blocks of 32 along the last axis) is
stored once; each rep runs `mx.quantize($stored/x)` storing the MX result,
and `mx.dequantize($stored/q)` storing the float32 result, so no tensor
crosses the wire: the time is the job's `run_ms` (the server's own
measurement of the program). GB/s counts the float32 side (input of
quantize, output of dequantize). Floors in the same run: numpy's copy of the
same float32 bytes in this process (memcpy), and the server's `neg` of x, an
elementwise pass reading and writing the same bytes (run_ms). Medians of R.

MX matmul: x [M, K] float32 @ an MX weight [K, N] (blocks along K, axis 0,
and along N, axis -1) stored once; `matmul(x, $stored/wq)` (panels
dequantized on the fly) against `matmul(x, mx.dequantize(wq))` (a full
float32 copy first) and the float32 `matmul(x, w)`, all as job run_ms.

    python3 bench/mx.py [--build build] [--numel N] [--reps R] [--mkn M,K,N] [--write-readme]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

from benchlib import start_server, write_readme_section

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
import tensord  # noqa: E402

FORMATS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1"]


def run_ms(c, nodes, store):
    c.run({"nodes": nodes, "outputs": list(store)}, store=store)
    return float(c.last_job["run_ms"])


def matmul_rows(c, a):
    M, K, N = (int(v) for v in a.mkn.split(","))
    rng = np.random.default_rng(1)
    c.put("bench/mx", rng.standard_normal((M, K)).astype(np.float32))
    c.put("bench/mw", rng.standard_normal((K, N)).astype(np.float32))

    def med(nodes):
        return statistics.median(run_ms(c, nodes, {"y": "bench/my"}) for _ in range(a.reps))

    f32 = med([{"id": "y", "op": "matmul", "args": ["$stored/bench/mx", "$stored/bench/mw"], "outputs": ["y"]}])
    rows = []
    for fmt in ("mxfp8_e4m3", "mxfp4_e2m1"):
        for axis in (0, -1):
            run_ms(c, [{"id": "q", "op": "mx.quantize", "args": ["$stored/bench/mw", fmt],
                        "kwargs": {"axis": axis}, "outputs": ["q"]}], {"q": "bench/mwq"})
            fused = med([{"id": "y", "op": "matmul", "args": ["$stored/bench/mx", "$stored/bench/mwq"],
                          "outputs": ["y"]}])
            unfused = med([{"id": "d", "op": "mx.dequantize", "args": ["$stored/bench/mwq"], "outputs": ["d"]},
                           {"id": "y", "op": "matmul", "args": ["$stored/bench/mx", "d"], "outputs": ["y"]}])
            rows.append(("%s axis %d" % (fmt, axis), fused, unfused))
    return {"f32": f32, "rows": rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    # 2^24 floats (64 MiB): numpy's copy of a 16 MiB tensor into the same
    # destination each rep runs largely from the last-level cache (20 GB/s
    # against 9-12 from DRAM here), while the server writes fresh outputs.
    ap.add_argument("--numel", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--mkn", default="128,2048,2048")
    ap.add_argument("--write-readme", action="store_true")
    a = ap.parse_args()
    proc, url = start_server(os.path.join(a.build, "tensord"), ["--backend", "cpu", "--checkpoint-every", "0"])
    try:
        c = tensord.Client(url, timeout=600)
        x = np.random.default_rng(0).standard_normal((a.numel // 256, 256)).astype(np.float32)
        gb = x.nbytes / 1e9
        c.put("bench/x", x)
        dst = np.empty_like(x)
        copies = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            np.copyto(dst, x)
            copies.append(time.perf_counter() - t0)
        memcpy = gb / statistics.median(copies)
        neg = gb / (statistics.median(
            run_ms(c, [{"id": "n", "op": "neg", "args": ["$stored/bench/x"], "outputs": ["y"]}], {"y": "bench/y"})
            for _ in range(a.reps)) / 1e3)
        rows = []
        for fmt in FORMATS:
            row = [fmt]
            for rounding in ("floor", "rceil"):
                q = [{"id": "q", "op": "mx.quantize", "args": ["$stored/bench/x", fmt],
                      "kwargs": {"scale_rounding": rounding}, "outputs": ["q"]}]
                ms = statistics.median(run_ms(c, q, {"q": "bench/q"}) for _ in range(a.reps))
                row.append(gb / (ms / 1e3))
            d = [{"id": "d", "op": "mx.dequantize", "args": ["$stored/bench/q"], "outputs": ["d"]}]
            ms = statistics.median(run_ms(c, d, {"d": "bench/d"}) for _ in range(a.reps))
            row.append(gb / (ms / 1e3))
            rows.append(row)
        mm = matmul_rows(c, a)
        c.close()
    finally:
        proc.terminate()
        proc.wait(30)
    load = os.getloadavg()[0]
    out = ["## mx.py", "",
           "`python3 bench/mx.py --numel %d --reps %d`: through the server (job run_ms, no wire), GB/s of the "
           "float32 side and %% of numpy memcpy (%.2f GB/s) in the same run; the server's `neg` pass over the "
           "same bytes: %.2f GB/s. Load average %.1f." % (a.numel, a.reps, memcpy, neg, load), "",
           "| format | quantize floor | quantize rceil | dequantize (rceil scales) |", "|---|---|---|---|"]
    for fmt, qf, qr, dq in rows:
        out.append("| %s | %.2f (%.0f%%) | %.2f (%.0f%%) | %.2f (%.0f%%) |" % (
            fmt, qf, 100 * qf / memcpy, qr, 100 * qr / memcpy, dq, 100 * dq / memcpy))
    M, K, N = (int(v) for v in a.mkn.split(","))
    out += ["", "MX matmul, x [%d, %d] float32 @ w [%d, %d] (job run_ms, medians of %d; the float32 matmul of the "
            "same w: %.2f ms):" % (M, K, K, N, a.reps, mm["f32"]), "",
            "| weight | matmul(x, wq) ms | matmul(x, mx.dequantize(wq)) ms | ratio |", "|---|---|---|---|"]
    for key, fused, unfused in mm["rows"]:
        out.append("| %s | %.2f | %.2f | %.2f |" % (key, fused, unfused, fused / unfused))
    text = "\n".join(out) + "\n"
    print(text)
    if a.write_readme:
        write_readme_section("## mx.py", text)


if __name__ == "__main__":
    main()
