#!/usr/bin/python3
"""Instructions a tiny request costs the server, counted by callgrind.

`/usr/bin/python3 bench/request_cost.py [--build DIR] [--requests N] [--kinds K,...]`:
for each kind (healthz, run, replay, infer, chain: the requests of
bench/overhead.py, chain a 500-node replay) one server (`--backend cpu`)
runs under `valgrind --tool=callgrind` with collection off; after 300
warm-up requests on one keep-alive connection collection is turned on
for N requests (callgrind_control) and off again. Prints instructions per
request and where they went: every function's own instructions summed by
the part of the server (or library) it belongs to. Instruction counts do
not move with the machine's load (the wall-clock figures of overhead.py
do, by tens of percent on a shared 2-core machine), so two builds compare
exactly; they are not time (cache misses and system calls are not in
them: under valgrind the CPU's SHA extensions are not used either).
"""

import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import overhead as O  # noqa: E402

# (part, pattern on the function's name): the first that matches takes it.
PARTS = [
    ("malloc/free", r"malloc|_int_free|\bfree\b|operator new|operator delete|realloc|memalign|consolidate"),
    ("memcpy/memcmp/strlen", r"memmove|memcpy|memcmp|memset|strlen|memchr"),
    ("locks", r"pthread_mutex|pthread_cond|lll_lock|futex"),
    ("log lines", r"tensord::log::|spdlog|fmt::"),
    ("trace", r"Trace|engine_trace"),
    ("metrics", r"prometheus|Metrics::|OpMetrics"),
    ("JSON (RapidJSON, tensord's JSON)", r"rapidjson|_json|json_|Json|to_chars|from_chars|Grisu|write_float|write_number"),
    ("HTTP: writing the answer (Beast's serializer before)",
     r"serializer|buffers_cat_view|buffers_prefix_view|buffers_suffix|buffers_ref|write_some_op|PartsBody|"
     r"ResponseWriter|do_write|sendmsg|reactive_socket_send"),
    ("HTTP: Beast parser", r"beast::http::basic_parser|basic_fields|beast::http::detail::read"),
    ("Asio/Beast I/O and handlers", r"boost::asio|boost::beast"),
    ("server (session, router, writer, auth)",
     r"tensord::(HttpSession|Router|RouteMatch|ResponseWriter|IoDeadline|AsyncSessionReply|HttpRequest|"
     r"parse_target|percent_decode|new_request_id|request_id|guarded|call_handler|add_\w+_routes|answer_job|"
     r"start_graph_replay|authenticate|caller|request_tenant|wants_|b64_requested|is_safetensors)"),
    ("scheduler (engine, jobs, fair queue)", r"tensord::(Engine|Job|FairQueue|RunningJobs|GraphService|Tenant|"
                                              r"JobSpec|JobResult|QueuedJob|RankWorkers|ExecOptions)"),
    ("graphs and kernels (compile, bind, run)", r"tensord::|kernels::"),
    ("libstdc++ and the rest", r"."),
]


def count(binary, kind, n, out):
    """Runs `n` requests of `kind` under callgrind; the profile goes to `out`."""
    port = O.free_port()
    err = open(out + ".err", "w")
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=" + out,
                          binary, "--backend", "cpu", "--listen", "127.0.0.1:%d" % port],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                c.request("GET", "/healthz")
                c.getresponse().read()
                break
            except OSError:
                if time.monotonic() > deadline or p.poll() is not None:
                    raise SystemExit("the server under valgrind did not start (%s.err)" % out)
                time.sleep(0.5)

        def call(method, path, body=None, headers=None):
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            if r.status >= 300:
                raise SystemExit("%s %s: %d %s" % (method, path, r.status, data[:300]))
            return data

        program = O.chain(500) if kind == "chain" else O.TINY
        cap = {"program": program, "inputs": program["inputs"], "name": O.MODEL}
        gid = json.loads(call("POST", "/v1/graphs", json.dumps(cap).encode(), O.JSON_HDR))["id"]
        kinds = {"healthz": ("GET", "/healthz", None, None),
                 "run": ("POST", "/v1/run", O.RUN_BODY, O.JSON_HDR),
                 "replay": ("POST", "/v1/graphs/%s/replay" % gid, O.REPLAY_BODY, O.JSON_HDR),
                 "chain": ("POST", "/v1/graphs/%s/replay" % gid, O.REPLAY_BODY, O.JSON_HDR),
                 "infer": ("POST", "/v2/models/%s/infer" % O.MODEL, O.INFER_BODY, O.JSON_HDR)}
        req = kinds[kind]
        for _ in range(300):
            call(*req)
        subprocess.run(["callgrind_control", "-i", "on", str(p.pid)], check=True, capture_output=True)
        for _ in range(n):
            call(*req)
        subprocess.run(["callgrind_control", "-i", "off", str(p.pid)], check=True, capture_output=True)
    finally:
        p.terminate()
        p.wait(timeout=120)
        err.close()


def parts(profile):
    """(total instructions, {part: instructions}) from a callgrind profile."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", profile], capture_output=True, text=True,
                          check=True).stdout
    total = 0
    m = re.search(r"^\s*([\d,]+) \([^)]*\)\s+PROGRAM TOTALS", text, re.M)
    if m:
        total = int(m.group(1).replace(",", ""))
    got = {name: 0 for name, _ in PARTS}
    for line in text.splitlines():
        m = re.match(r"^\s*([\d,]+) \([^)]*\)\s+(\S.*)$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        fn = m.group(2)
        for name, pat in PARTS:
            if re.search(pat, fn):
                got[name] += int(m.group(1).replace(",", ""))
                break
    return total, got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--kinds", default="healthz,run,replay,infer,chain")
    args = ap.parse_args()
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate"):
        if not shutil.which(tool):
            raise SystemExit("%s not found (apt-get install valgrind)" % tool)
    kinds = args.kinds.split(",")
    binary = os.path.join(args.build, "tensord")
    tmp = tempfile.mkdtemp(prefix="tensord-request-cost-")
    rows = {}
    for kind in kinds:
        n = max(1, args.requests // 5) if kind == "chain" else args.requests
        out = os.path.join(tmp, kind + ".callgrind")
        count(binary, kind, n, out)
        total, got = parts(out)
        rows[kind] = (total / n, {k: v / n for k, v in got.items()})
    print("## Instructions per request (callgrind, %s, %d requests each; chain: %d)\n"
          % (binary, args.requests, max(1, args.requests // 5)))
    print("| part | " + " | ".join(kinds) + " |")
    print("|---|" + "---:|" * len(kinds))
    for name, _ in PARTS:
        print("| %s | " % name + " | ".join("%.1fk" % (rows[k][1][name] / 1e3) for k in kinds) + " |")
    print("| **total** | " + " | ".join("**%.1fk**" % (rows[k][0] / 1e3) for k in kinds) + " |")
    print("\nJSON " + json.dumps({k: {"per_request": v[0], "parts": v[1]} for k, v in rows.items()}))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
