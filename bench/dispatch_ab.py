#!/usr/bin/env python3
"""A/B of two tensord binaries on small requests of each way a request is
answered (issue 13: inline, asynchronous with the start on the io thread,
offloaded handlers): one server of each binary (--backend cpu, no config),
one keep-alive connection each (http.client); per round, each request kind
in a block of `per` requests on one server then the other (the order flips
every round; round 0 is warm-up). Prints, per kind, the medians over
rounds of each block's median round trip and Server-Timing, and a JSON line.
The server started first tends to be faster on this machine: run it with
both orders (`base-first`, `new-first`) and compare per-run ratios.

    /usr/bin/python3 bench/dispatch_ab.py BASE_BIN NEW_BIN [rounds=10] [per=200] [base-first|new-first]
"""
import http.client
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib

first = sys.argv[5] if len(sys.argv) > 5 else "base-first"
bins = {"base": sys.argv[1], "new": sys.argv[2]}
if first == "new-first":
    bins = {"new": sys.argv[2], "base": sys.argv[1]}
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
per = int(sys.argv[4]) if len(sys.argv) > 4 else 200

tiny = json.dumps({"program": {"inputs": {"x": {"dtype": "float32", "shape": [16]}},
                               "nodes": [{"id": "a", "op": "mul", "args": ["x", 2.0], "outputs": ["y"]},
                                         {"id": "b", "op": "add", "args": ["y", 1.0], "outputs": ["z"]},
                                         {"id": "c", "op": "sum", "args": ["z"], "outputs": ["s"]}],
                               "outputs": ["s"]},
                   "inputs": {"x": {"dtype": "float32", "shape": [16], "data": [float(i) for i in range(16)]}}}).encode()
put = json.dumps({"dtype": "float32", "shape": [16], "data": [float(i) for i in range(16)]}).encode()

def st(r):
    m = re.search(r"total;dur=([0-9.]+)", r.getheader("Server-Timing") or "")
    return float(m.group(1))

servers = {}
for name, b in bins.items():
    p, url = benchlib.start_server(b, ["--backend", "cpu"])
    benchlib.wait_ready(url)
    host, port = url[len("http://"):].split(":")
    c = http.client.HTTPConnection(host, int(port))
    servers[name] = (p, c)
    c.request("PUT", "/v1/tensors/t", body=put, headers={"Content-Type": "application/json"}); c.getresponse().read()
    c.request("POST", "/v1/jobs", body=tiny, headers={"Content-Type": "application/json"})
    r = c.getresponse(); job = json.loads(r.read())["id"]
    servers[name] = (p, c, job)

kinds = [("run tiny (async, inline start)", "POST", "/v1/run", tiny),
         ("GET tensor (offloaded)", "GET", "/v1/tensors/t", None),
         ("PUT tensor (offloaded)", "PUT", "/v1/tensors/u", put),
         ("GET job (offloaded)", "GET", "/v1/jobs/{job}", None),
         ("healthz (inline)", "GET", "/healthz", None)]
res = {(n, k[0]): {"rt": [], "st": []} for n in bins for k in kinds}
names = list(bins)
for rd in range(rounds + 1):
    order = names if rd % 2 == 0 else names[::-1]
    for kind, m, path, body in kinds:
        for n in order:
            p, c, job = servers[n]
            pth = path.replace("{job}", job)
            rts, sts = [], []
            for i in range(per):
                t0 = time.perf_counter()
                c.request(m, pth, body=body, headers={"Content-Type": "application/json"} if body else {})
                r = c.getresponse(); r.read()
                t1 = time.perf_counter()
                assert r.status in (200, 201), (n, kind, r.status)
                rts.append((t1 - t0) * 1e3); sts.append(st(r))
            if rd > 0:  # round 0: warm-up
                res[(n, kind)]["rt"].append(statistics.median(rts))
                res[(n, kind)]["st"].append(statistics.median(sts))
print("load average:", open("/proc/loadavg").read().split()[:3])
print("| request | base round trip ms | new round trip ms | new/base | base server ms | new server ms | new/base |")
print("|---|---:|---:|---:|---:|---:|---:|")
for kind, *_ in kinds:
    b, n = res[("base", kind)], res[("new", kind)]
    brt, nrt = statistics.median(b["rt"]), statistics.median(n["rt"])
    bst, nst = statistics.median(b["st"]), statistics.median(n["st"])
    print("| %s | %.4f | %.4f | %.2f | %.4f | %.4f | %.2f |" % (kind, brt, nrt, nrt / brt, bst, nst, nst / bst))
out = {kind: [statistics.median(res[("base", kind)]["rt"]), statistics.median(res[("new", kind)]["rt"]),
              statistics.median(res[("base", kind)]["st"]), statistics.median(res[("new", kind)]["st"])] for kind, *_ in kinds}
print("JSON", json.dumps({"order": first, "load": open("/proc/loadavg").read().split()[:3], "res": out}))
for n in bins:
    servers[n][0].terminate(); servers[n][0].wait()
