#!/usr/bin/env python3
"""Graph replay against /v1/run (issue 5, DESIGN.md targets), in one run:

* a 200-node program on small float32 tensors (64 elements: a chain of
  elementwise ops with a reduction every 20 nodes folded back in), sent
  through POST /v1/run and replayed from a graph captured once: the client's
  round trip over one keep-alive connection (http.client, request body
  pre-encoded, response JSON decoded outside the timing), and the server-side
  time (the Server-Timing
  header: the whole request from headers read to response, so /v1/run's
  includes parsing and compiling the program), median of many;
* the same graph called through KServe v2 (API.md 11:
  POST /v2/models/{id}/infer, the same replay path) against its
  /v1/graphs/{id}/replay, in JSON both ways and with the binary tensor data
  extension both ways (target: /infer within 1.5x of replay);
* the per-node replay overhead: the slope of the replay's server-side time
  between chains of 100 and 400 trivial ops (neg on 16 floats; the kernels'
  own time is included, so this is an upper bound), and the same slope of
  the job's run_ms (executor only); with the C++ microbenchmark
  (build/bench/graphs_replay_bench) when it is built: plan replay vs
  execute_program vs the kernels called directly, per node.

    python3 bench/graphs.py [--build build] [--requests 300] [--server-args "--trace off"]
"""

import argparse
import copy
import http.client
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import time

import requests

from benchlib import run_torch_peer, start_server, torch_peers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

N = 64  # elements per tensor


def program_200():
    """200 nodes: elementwise chain on x (float32[64]) with a sum/mean/amax
    every 20 nodes broadcast back in; outputs the chain's end and the last
    reduction."""
    nodes = []
    cur = "x"
    k = 0

    def add(op, args, kwargs=None):
        nonlocal k
        out = "v%d" % k
        node = {"id": "n%d" % k, "op": op, "args": args, "outputs": [out]}
        if kwargs:
            node["kwargs"] = kwargs
        nodes.append(node)
        k += 1
        return out

    cycle = [lambda v: add("mul", [v, 0.999]),
             lambda v: add("add", [v, 0.01]),
             lambda v: add("tanh", [v]),
             lambda v: add("sub", [v, "x"]),
             lambda v: add("maximum", [v, "x"]),
             lambda v: add("neg", [v]),
             lambda v: add("abs", [v])]
    red = None
    i = 0
    while k < 200:
        if k % 20 == 18:
            red = add(["sum", "mean", "amax"][(k // 20) % 3], [cur])
            cur = add("add", [cur, red])
            continue
        cur = cycle[i % len(cycle)](cur)
        i += 1
    assert len(nodes) == 200
    return {"inputs": {"x": {"dtype": "float32", "shape": [N]}}, "nodes": nodes, "outputs": [cur, red]}


def chain_program(n, size=16):
    nodes = [{"id": "n%d" % i, "op": "neg", "args": ["x" if i == 0 else "v%d" % (i - 1)], "outputs": ["v%d" % i]}
             for i in range(n)]
    return {"inputs": {"x": {"dtype": "float32", "shape": [size]}}, "nodes": nodes, "outputs": ["v%d" % (n - 1)]}


def loop_program():
    """while i < n: i += 1; x = x * 1.0001 + 0.5 (x: float32[64])."""
    carries = {"i": {"dtype": "int64", "shape": []}, "x": {"dtype": "float32", "shape": [N]},
               "n": {"dtype": "int64", "shape": []}}

    def sub(nodes, outputs):
        return {"inputs": carries, "nodes": nodes, "outputs": outputs}

    node = {"id": "l", "op": "while_loop", "args": ["i", "x", "n"], "outputs": ["i2", "x2", "n2"],
            "cond": sub([{"id": "c", "op": "lt", "args": ["i", "n"], "outputs": ["b"]}], ["b"]),
            "body": sub([{"id": "a", "op": "add", "args": ["i", 1], "outputs": ["j"]},
                         {"id": "m", "op": "mul", "args": ["x", 1.0001], "outputs": ["y"]},
                         {"id": "s", "op": "add", "args": ["y", 0.5], "outputs": ["z"]}], ["j", "z", "n"])}
    return {"inputs": carries, "nodes": [node], "outputs": ["x2"]}


def loop_inputs(trips):
    return {"i": {"dtype": "int64", "shape": [], "data": 0}, "x": tensor(N, 7),
            "n": {"dtype": "int64", "shape": [], "data": trips}}


def torch_loop_us(trips):
    """The same loop in eager PyTorch on the CPU (one thread, as a notebook's
    small-tensor loop runs), per trip, under each torch peer
    (benchlib.torch_peers: PyPI's 2.15 first, then Debian's 1.13):
    [(label, us)]."""
    return [("%s eager (CPU, 1 thread)" % label,
             run_torch_peer(py, "loop", "--numel", N, "--trips", trips, "--threads", 1)["result"]["us_per_trip"])
            for label, py in torch_peers()]


def server_ms(r):
    m = re.search(r"total;dur=([0-9.]+)", r.getheader("Server-Timing") or "")
    return float(m.group(1)) if m else float("nan")


class Conn:
    """One keep-alive HTTP/1.1 connection (http.client: the requests library
    adds ~0.3 ms of client-side work per call, which would hide the server)."""

    def __init__(self, url):
        host, port = url.split("//", 1)[1].split(":")
        self.c = http.client.HTTPConnection(host, int(port), timeout=60)

    def post(self, path, data, headers=None):
        self.c.request("POST", path, body=data,
                       headers=headers if headers is not None else {"Content-Type": "application/json"})
        r = self.c.getresponse()
        body = r.read()
        if r.status >= 300:
            raise SystemExit("POST %s: %d %s" % (path, r.status, body[:300]))
        return r, body


def timed(conn, reqs, n, blocks=5, warm=10):
    """Per (path, body) in reqs: median round trip (request written to
    response body read, JSON decoding excluded), Server-Timing total, job
    run_ms and queue_ms over n requests. The requests go in blocks of n /
    blocks per entry, entries taking turns, so that drifting load on a shared
    machine hits each alike while each block runs back to back (warm caches,
    as a loop of replays would); each block starts with `warm` untimed ones."""
    # An entry is (path, JSON body) or (path, raw bytes, headers): a KServe
    # infer, whose answer has no "job" (run_ms and queue_ms are then nan).
    # A callable body is called for every request (not timed): a program
    # sent once only, which the server's compile cache has not seen.
    datas = [(e[0], e[1] if isinstance(e[1], bytes) or callable(e[1]) else json.dumps(e[1]).encode(),
              e[2] if len(e) > 2 else None) for e in reqs]
    cols = [{"rtt": [], "server": [], "run": [], "queue": []} for _ in datas]
    per = max(1, n // blocks)
    for _ in range(blocks):
        for (path, data, headers), col in zip(datas, cols):
            for _ in range(warm):
                conn.post(path, data() if callable(data) else data, headers)
            for _ in range(per):
                body = data() if callable(data) else data
                t0 = time.perf_counter()
                r, raw = conn.post(path, body, headers)
                col["rtt"].append((time.perf_counter() - t0) * 1e3)
                col["server"].append(server_ms(r))
                if (r.getheader("Content-Type") or "").startswith("application/json"):
                    job = json.loads(raw).get("job")
                    if job:
                        col["run"].append(job["run_ms"])
                        col["queue"].append(job["queue_ms"])
    return [{k: statistics.median(v) if v else float("nan") for k, v in col.items()} for col in cols]


def kserve_bodies(x):
    """The KServe v2 infer bodies for input x (a tensor() dict): JSON in and
    out, and binary in and out (as tritonclient.http sends them: JSON header,
    then the bytes, Inference-Header-Content-Length, no Content-Type)."""
    import struct
    vals = x["data"]
    js = {"inputs": [{"name": "x", "shape": x["shape"], "datatype": "FP32", "data": vals}]}
    header = json.dumps({"inputs": [{"name": "x", "shape": x["shape"], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 4 * len(vals)}}],
                         "parameters": {"binary_data_output": True}}).encode()
    raw = header + struct.pack("<%df" % len(vals), *vals)
    return js, raw, {"Inference-Header-Content-Length": str(len(header))}


def capture(session, url, prog):
    r = session.post(url + "/v1/graphs", data=json.dumps({"program": prog, "inputs": prog["inputs"]}),
                     headers={"Content-Type": "application/json"}, timeout=60)
    r.raise_for_status()
    return r.json()["id"]


def tensor(size, seed):
    return {"dtype": "float32", "shape": [size], "data": [((i * 37 + seed) % 17 - 8) / 8.0 for i in range(size)]}


def microbench(build):
    exe = os.path.join(build, "bench", "graphs_replay_bench")
    if not os.path.exists(exe):
        return None
    out = subprocess.run([exe], capture_output=True, text=True, timeout=600)
    return out.stdout.strip() if out.returncode == 0 else "graphs_replay_bench failed: " + out.stderr.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--server-args", default="", help='extra server flags, e.g. "--trace off --metrics off"')
    args = ap.parse_args()
    proc, url = start_server(os.path.join(args.build, "tensord"), ["--backend", "cpu"] + args.server_args.split())
    try:
        s = requests.Session()
        c = Conn(url)
        prog = program_200()
        x = tensor(N, 3)
        gid = capture(s, url, prog)
        sent = itertools.count()

        def fresh():
            # The same program under another first node id: another sha256,
            # so /v1/run compiles it (what a capture saves).
            p = copy.deepcopy(prog)
            p["nodes"][0]["id"] += "-%d" % next(sent)
            return json.dumps({"program": p, "inputs": {"x": x}}).encode()

        run, rep, again = timed(c, [("/v1/run", fresh), ("/v1/graphs/%s/replay" % gid, {"inputs": {"x": x}}),
                                    ("/v1/run", {"program": prog, "inputs": {"x": x}})], args.requests)
        # Same answers either way.
        a = s.post(url + "/v1/run", json={"program": prog, "inputs": {"x": x}}).json()["outputs"]
        b = s.post(url + "/v1/graphs/%s/replay" % gid, json={"inputs": {"x": x}}).json()["outputs"]
        same = all(a[k]["data"] == b[k]["data"] for k in a)

        # The same graph through KServe v2: JSON, and binary both ways.
        kjs, kraw, khdr = kserve_bodies(x)
        infer_path = "/v2/models/%s/infer" % gid
        k_rep, k_json, k_bin = timed(c, [("/v1/graphs/%s/replay" % gid, {"inputs": {"x": x}}),
                                         (infer_path, kjs), (infer_path, kraw, khdr)], args.requests)
        kout = s.post(url + infer_path, json=kjs).json()["outputs"]
        same_kserve = all(o["data"] == b[o["name"]]["data"] for o in kout) and len(kout) == len(b)

        slopes = {}
        for route in ("replay", "run"):
            pts = {}
            for n in (100, 400):
                p = chain_program(n)
                xin = tensor(16, 5)
                if route == "replay":
                    g = capture(s, url, p)
                    pts[n] = timed(c, [("/v1/graphs/%s/replay" % g, {"inputs": {"x": xin}})], args.requests)[0]
                else:
                    pts[n] = timed(c, [("/v1/run", {"program": p, "inputs": {"x": xin}})], args.requests // 3)[0]
            slopes[route] = {k: (pts[400][k] - pts[100][k]) / 300 * 1e3 for k in ("server", "run", "rtt")}

        # A captured loop: per-trip cost from the run_ms slope between 1000
        # and 5000 trips, /v1/run and replay, against eager torch.
        lp = loop_program()
        lg = capture(s, url, lp)
        trips = {}
        for route, path in (("/v1/run", "/v1/run"), ("graph replay", "/v1/graphs/%s/replay" % lg)):
            pts = {}
            for t in (1000, 5000):
                body = {"inputs": loop_inputs(t)}
                if route == "/v1/run":
                    body["program"] = lp
                pts[t] = timed(c, [(path, body)], 15, blocks=3, warm=2)[0]["run"]
            trips[route] = (pts[5000] - pts[1000]) / 4000 * 1e3
        peers = torch_loop_us(5000)
        for label, us in peers:
            trips[label] = us
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    print("## graphs: 200-node program, float32[%d], %d requests each (median ms)%s"
          % (N, args.requests, "; server flags: " + args.server_args if args.server_args else ""))
    print()
    print("| path | round trip ms | server ms (Server-Timing) | job run_ms | job queue_ms |")
    print("|---|---:|---:|---:|---:|")
    for name, r in (("/v1/run, a program sent once", run), ("graph replay", rep),
                    ("/v1/run, the same program again (compiled once)", again)):
        print("| %s | %.3f | %.3f | %.3f | %.3f |" % (name, r["rtt"], r["server"], r["run"], r["queue"]))
    e2e = run["rtt"] / rep["rtt"]
    srv = run["server"] / rep["server"]
    print()
    print("replay vs /v1/run of a program sent once: end to end %.1fx (target >= 3x: %s), server-side %.1fx (target >= 10x: %s); "
          "executor alone (run_ms) %.1fx; same outputs: %s"
          % (e2e, "met" if e2e >= 3 else "NOT met", srv, "met" if srv >= 10 else "NOT met",
             run["run"] / max(rep["run"], 1e-9), same))
    print()
    print("KServe v2 /infer vs /v1/graphs/{id}/replay, same graph, %d requests each (median ms):" % args.requests)
    print()
    print("| path | round trip ms | server ms (Server-Timing) | vs replay (round trip) | vs replay (server) |")
    print("|---|---:|---:|---:|---:|")
    for name, r in (("replay (JSON)", k_rep), ("/infer JSON", k_json), ("/infer binary in+out", k_bin)):
        print("| %s | %.3f | %.3f | %.2fx | %.2fx |"
              % (name, r["rtt"], r["server"], r["rtt"] / k_rep["rtt"], r["server"] / k_rep["server"]))
    worst = max(k_json["rtt"] / k_rep["rtt"], k_json["server"] / k_rep["server"])
    print()
    print("/infer (JSON) within %.2fx of replay (target <= 1.5x: %s); same outputs: %s"
          % (worst, "met" if worst <= 1.5 else "NOT met", same_kserve))
    print()
    print("per-node cost, slope between 100- and 400-node chains of neg on float32[16] (us/node, kernel included):")
    print()
    print("| path | server (Server-Timing) | job run_ms | round trip |")
    print("|---|---:|---:|---:|")
    for route in ("replay", "run"):
        sl = slopes[route]
        print("| %s | %.3f | %.3f | %.3f |" % (route, sl["server"], sl["run"], sl["rtt"]))
    ov = slopes["replay"]["run"]
    print()
    print("per-node replay overhead (run_ms slope, upper bound): %.3f us (target < 2 us: %s)"
          % (ov, "met" if ov < 2 else "NOT met"))
    print()
    print("captured while_loop (body: i + 1, x * 1.0001 + 0.5 on float32[%d]), us per trip (job run_ms slope "
          "between 1000 and 5000 trips; torch: a Python loop of the same ops):" % N)
    print()
    print("| path | us per trip | vs %s |" % (peers[0][0] if peers else "torch eager"))
    print("|---|---:|---:|")
    t_torch = peers[0][1] if peers else None
    for name, us in trips.items():
        if us is None:
            continue
        print("| %s | %.3f | %s |" % (name, us, "%.1fx" % (t_torch / us) if t_torch else "-"))
    mb = microbench(args.build)
    if mb:
        print()
        print(mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
