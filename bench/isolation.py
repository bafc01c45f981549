#!/usr/bin/env python3
"""Isolation between tenants on their own partitions (DESIGN.md targets):
a light tenant's tiny-program latency when the server is idle, and while a
heavy tenant saturates its own partition, measured in one run.

    python3 bench/isolation.py [--build build] [--requests 300] [--runs 1] [--blocks 1]
                               [--heavy compute|upload] [--mib 8] [--write-readme]

With --runs N the measurement is repeated N times (a fresh server each) and
the median p99 ratio is reported with every run's ratio. With --blocks B
each run alternates B idle and B loaded blocks of requests/B requests, so
background load that comes and goes affects both sides alike. The 1-minute load
average before and after is printed: on a shared 2-core machine other jobs
move p99 far more than anything in the server does, so compare figures
taken under similar load only.

Config: two partitions of share 0.5 (one core each on a 2-core machine,
threads pinned), workqueue_limit 2; tenant "light" on one, "heavy" on the
other. The heavy tenant keeps 4 clients busy back to back, from a separate
process (so the light client never waits for the heavy clients' GIL):
with --heavy compute (the default) submitting 200x200 float64 matmul
chains (~60 ms each); with --heavy upload moving large bodies instead
(issue 14, "ingress belongs to its tenant"): two uploaders alternating a
JSON `b64` PUT and a two-tensor safetensors `POST /v1/tensors:upload` of
--mib MiB each, and two downloaders alternating `GET ?encoding=b64` and a
safetensors GET. The bodies are made once, before the load starts, so the
heavy clients spend their CPU on the socket only. The heavy process is
pinned to the heavy partition's cpus (from /v1/info), and the light
client to the light partition's, as if they ran on other machines
(--no-pin: both unpinned, as the figures before issue 14 were taken); the
light tenant sends a 3-node program on 16 floats, one
request at a time, over keep-alive.
"""

import argparse
import base64
import hashlib
import json
import multiprocessing
import random
import os
import statistics
import struct
import sys
import tempfile
import threading
import time

import requests

from benchlib import pct, start_server, write_readme_section

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

TOKENS = {"light": "light-token", "heavy": "heavy-token"}


def sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


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


def light_latencies(url, n, warmup=20):
    s = requests.Session()
    s.headers["Authorization"] = "Bearer " + TOKENS["light"]
    for _ in range(warmup):
        s.post(url + "/v1/run", json=TINY, timeout=30).raise_for_status()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = s.post(url + "/v1/run", json=TINY, timeout=30)
        out.append((time.perf_counter() - t0) * 1e3)
        r.raise_for_status()
    return out


def f32_bytes(mib, seed):
    rnd = random.Random(seed)
    block = bytes(rnd.getrandbits(8) & 0x3f for _ in range(4096))  # finite float32s
    return (block * ((mib << 20) // 4096 + 1))[:mib << 20]


def safetensors_body(tensors):
    """tensors: {name: raw float32 bytes} -> a safetensors file (bytes)."""
    header, off = {}, 0
    for name, raw in tensors.items():
        header[name] = {"dtype": "F32", "shape": [len(raw) // 4], "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(tensors.values())


def b64_put_body(raw):
    return b'{"dtype":"float32","shape":[%d],"b64":"' % (len(raw) // 4) + base64.b64encode(raw) + b'"}'


def upload_load(url, mib, stop, done):
    """In a child process: two uploaders (JSON b64 PUT, safetensors upload,
    alternately) and two downloaders (b64 JSON GET, safetensors GET) of
    `mib` MiB bodies, back to back until `stop` is set."""
    raw = f32_bytes(mib, 1)
    half = len(raw) // 2
    json_body = b64_put_body(raw)
    st_bodies = [safetensors_body({"big/s%d_a" % k: raw[:half], "big/s%d_b" % k: raw[half:]}) for k in range(2)]

    def session():
        s = requests.Session()
        s.headers["Authorization"] = "Bearer " + TOKENS["heavy"]
        return s

    s = session()  # what the downloaders read exists before they start
    for k in range(2):
        s.put(url + "/v1/tensors/big/j%d" % k, data=json_body, headers={"Content-Type": "application/json"},
              timeout=120).raise_for_status()
        s.post(url + "/v1/tensors:upload", data=st_bodies[k],
               headers={"Content-Type": "application/vnd.safetensors"}, timeout=120).raise_for_status()

    def count(r):
        if r.status_code in (200, 201):
            with done.get_lock():
                done.value += 1

    def uploader(k):
        s = session()
        i = 0
        while not stop.is_set():
            try:
                if i % 2 == 0:
                    r = s.put(url + "/v1/tensors/big/j%d" % k, data=json_body,
                              headers={"Content-Type": "application/json"}, timeout=120)
                else:
                    r = s.post(url + "/v1/tensors:upload", data=st_bodies[k],
                               headers={"Content-Type": "application/vnd.safetensors"}, timeout=120)
            except requests.RequestException:
                return  # the server is going away
            count(r)
            i += 1

    def downloader(k):
        s = session()
        i = 0
        while not stop.is_set():
            try:
                if i % 2 == 0:
                    r = s.get(url + "/v1/tensors/big/j%d?encoding=b64" % k, timeout=120)
                else:
                    r = s.get(url + "/v1/tensors/big/s%d_a" % k, headers={"Accept": "application/vnd.safetensors"},
                              timeout=120)
                r.content
            except requests.RequestException:
                return
            count(r)
            i += 1

    threads = [threading.Thread(target=uploader, args=(k,)) for k in range(2)]
    threads += [threading.Thread(target=downloader, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def heavy_process(url, kind, mib, cpus, stop, done):
    """The heavy tenant's clients, in a child process pinned to `cpus`."""
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:
            pass
    if kind == "upload":
        upload_load(url, mib, stop, done)
    else:
        heavy_load(url, 4, stop, done)


def heavy_load(url, clients, stop, done):
    """In a child process: `clients` threads post heavy programs back to back until `stop` is set."""

    def client():
        s = requests.Session()
        s.headers["Authorization"] = "Bearer " + TOKENS["heavy"]
        body = heavy_program()
        while not stop.is_set():
            try:
                r = s.post(url + "/v1/run", json=body, timeout=120)
            except requests.RequestException:
                return  # the server is going away
            if r.status_code == 200:
                with done.get_lock():
                    done.value += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def loadavg():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except OSError:
        return float("nan")


def measure(binary, n_requests, blocks=1, kind="compute", mib=8, pin=True):
    """One run on a fresh server: the light tenant's latencies idle and while
    the heavy tenant saturates its partition, in `blocks` alternating
    idle/loaded blocks (so slow changes in the machine's background load hit
    both alike); returns (idle, loaded, heavy_done, heavy_partition)."""
    cfg = {"partitions": [{"name": "light", "share": 0.5, "workqueue_limit": 2},
                          {"name": "heavy", "share": 0.5, "workqueue_limit": 2}],
           "tenants": [{"name": "light", "token_sha256": sha(TOKENS["light"]), "partition": "light"},
                       {"name": "heavy", "token_sha256": sha(TOKENS["heavy"]), "partition": "heavy",
                        "max_queued": 64}]}
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    proc, url = start_server(binary, ["--config", path])
    auth = {"Authorization": "Bearer " + TOKENS["heavy"]}  # /v1/info needs a token when tenants are configured
    info = requests.get(url + "/v1/info", headers=auth, timeout=10).json()
    heavy_cpus = [p.get("cpus") for p in info.get("partitions", []) if p["name"] == "heavy"]
    heavy_cpus = (heavy_cpus[0] or []) if heavy_cpus else []
    light_cpus = [p.get("cpus") for p in info.get("partitions", []) if p["name"] == "light"]
    light_cpus = (light_cpus[0] or []) if light_cpus else []
    pinned = None
    if pin and light_cpus and not set(light_cpus) & set(heavy_cpus):
        # The light client on its partition's cores, as the heavy one on its
        # own (bench/load.py does the same): else, unpinned, it waits for a
        # core the heavy clients keep busy and measures them, not the server.
        pinned = os.sched_getaffinity(0)
        os.sched_setaffinity(0, light_cpus)
    elif not pin:
        heavy_cpus = []
    info = None
    idle, loaded, heavy_done = [], [], 0
    blocks = max(1, blocks)
    per_block = max(1, n_requests // blocks)
    try:
        light_latencies(url, 0)  # warm up
        # The heavy clients run in another process: in this one they would
        # hold the GIL while encoding and decoding, and the light client's
        # p99 would measure Python's 5 ms GIL switch interval, not the server.
        ctx = multiprocessing.get_context("spawn")
        for _ in range(blocks):
            idle += light_latencies(url, per_block, warmup=0)
            stop = ctx.Event()
            done = ctx.Value("i", 0)
            heavy = ctx.Process(target=heavy_process, args=(url, kind, mib, heavy_cpus, stop, done), daemon=True)
            heavy.start()
            time.sleep(1.5 if kind == "compute" else 4.0)  # saturated now (uploads: bodies made, tensors stored)
            if info is None:
                info = requests.get(url + "/v1/info", headers=auth, timeout=10).json()
            loaded += light_latencies(url, per_block, warmup=0)
            stop.set()
            heavy.join(120)  # its clients' last requests have finished: idle again
            heavy_done += done.value
    finally:
        if pinned:
            os.sched_setaffinity(0, pinned)
        proc.terminate()
        proc.wait(30)
        os.unlink(path)
    heavy_parts = [p for p in (info or {}).get("partitions", []) if p["name"] == "heavy"]
    return idle, loaded, heavy_done, (heavy_parts[0] if heavy_parts else {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--blocks", type=int, default=1,
                    help="alternate idle and loaded measurement in this many blocks per run")
    ap.add_argument("--heavy", choices=["compute", "upload"], default="compute",
                    help="what the heavy tenant does: matmul chains, or large uploads and downloads")
    ap.add_argument("--mib", type=int, default=8, help="--heavy upload: MiB per upload/download")
    ap.add_argument("--no-pin", action="store_true",
                    help="leave the light and heavy client processes unpinned (the figures before issue 14)")
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args()
    binary = os.path.join(args.build, "tensord")
    load_before = loadavg()
    runs = []
    for _ in range(max(1, args.runs)):
        idle, loaded, heavy_done, heavy_part = measure(binary, args.requests, args.blocks, args.heavy, args.mib,
                                                       not args.no_pin)
        runs.append((pct(loaded, 0.99) / pct(idle, 0.99), statistics.median(loaded) / statistics.median(idle)))
    load_after = loadavg()
    what = ("heavy tenant saturating its partition" if args.heavy == "compute" else
            "heavy tenant uploading and downloading %d MiB bodies" % args.mib)
    rows = [("idle", idle), (what, loaded)]
    lines = ["| light tenant, tiny /v1/run | p50 ms | p99 ms |", "|---|---:|---:|"]
    for label, xs in rows:
        lines.append("| %s | %.2f | %.2f |" % (label, statistics.median(xs), pct(xs, 0.99)))
    ratio99, ratio50 = runs[-1]
    summary = ("p99 loaded / idle: %.2fx (target <= 1.5x); p50: %.2fx. Heavy %s finished meanwhile: %d; "
               "heavy partition while measured: %s" % (ratio99, ratio50,
                                                        "jobs" if args.heavy == "compute" else "transfers",
                                                        heavy_done, json.dumps(heavy_part)))
    if len(runs) > 1:
        summary += ("\n\n%d runs: p99 ratio median %.2fx (%s); p50 ratio median %.2fx." %
                    (len(runs), statistics.median(r[0] for r in runs), ", ".join("%.2fx" % r[0] for r in runs),
                     statistics.median(r[1] for r in runs)))
    summary += " Load average (1 min) before / after: %.2f / %.2f on %d cores." % (load_before, load_after,
                                                                                 os.cpu_count() or 0)
    text = "\n".join(lines) + "\n\n" + summary
    print(text)
    if args.write_readme:
        # Each mode has its own section: a run of one keeps the other's figures.
        head = "## isolation" if args.heavy == "compute" else "## isolation: uploads"
        body = (head + "\n\n`bench/isolation.py`: two partitions of share 0.5 (one pinned core each here), a light "
                "tenant's tiny `/v1/run` latency (%d requests, one at a time) idle and while a heavy tenant's 4 "
                "clients keep its own partition busy with %s.\n\n" % (
                    args.requests, "matmul chains" if args.heavy == "compute" else "large uploads and downloads") +
                text + "\n\nRun: `python3 bench/isolation.py --build build --runs 5 --blocks 5%s --write-readme`.\n" %
                ("" if args.heavy == "compute" else " --heavy upload"))
        write_readme_section(head, body)


if __name__ == "__main__":
    sys.exit(main())
