"""GET /v1/stream (WebSocket) and GET /v1/trace (Chrome trace JSON), API.md 9."""

import hashlib
import json
import os
import re
import struct
import subprocess
import tempfile
import time

import pytest
import requests
import websocket

import tensord
from conftest import Server, _stop_and_check, server_binary

TOKENS = {"alice": "alice-obs-token", "bob": "bob-obs-token", "root": "root-obs-token"}


def sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


CONFIG = {
    "partitions": [{"name": "interactive", "share": 0.5, "workqueue_limit": 2},
                   {"name": "batch", "share": 0.5, "workqueue_limit": 2}],
    "tenants": [
        {"name": "alice", "token_sha256": sha(TOKENS["alice"]), "partition": "interactive"},
        {"name": "bob", "token_sha256": sha(TOKENS["bob"]), "partition": "batch"},
        {"name": "root", "token_sha256": sha(TOKENS["root"]), "partition": "batch", "admin": True},
    ],
}

PROGRAM = {"nodes": [{"id": "m", "op": "mul", "args": [{"dtype": "float32", "shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]},
                                                       2.0], "outputs": ["y"]},
                     {"id": "s", "op": "sum", "args": ["y"], "outputs": ["t"]}],
           "outputs": ["t"]}


@pytest.fixture(scope="module")
def tenant_server():
    fd, path = tempfile.mkstemp(prefix="tensord-obs-cfg-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(CONFIG, f)
    srv = Server(["--config", path], name="observability-tenancy")
    yield srv
    _stop_and_check(srv)
    os.unlink(path)


def ws_url(url):
    return "ws" + url[len("http"):] + "/v1/stream"


def connect(url, token=None, timeout=10):
    header = ["Authorization: Bearer " + token] if token else []
    return websocket.create_connection(ws_url(url), header=header, timeout=timeout)


def subscribe(ws, streams, interval_ms=1000):
    ws.send(json.dumps({"subscribe": streams, "interval_ms": interval_ms}))
    ack = json.loads(ws.recv())
    assert ack["type"] == "subscribed", ack
    return ack


def run(url, token=None):
    headers = {"Authorization": "Bearer " + token} if token else {}
    r = requests.post(url + "/v1/run", json={"program": PROGRAM}, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["job"]["id"]


def job_events(ws, until_ids, timeout=10):
    """Job events until every id in until_ids has a final state."""
    final = {"succeeded", "failed", "cancelled"}
    done, out = set(), []
    deadline = time.time() + timeout
    while not set(until_ids) <= done:
        assert time.time() < deadline, "no final events for %s; got %s" % (until_ids, out)
        ev = json.loads(ws.recv())
        if ev["type"] != "job":
            continue
        out.append(ev)
        if ev["state"] in final:
            done.add(ev["id"])
    return out


def expect_close(ws):
    """Reads until the close frame; returns (code, reason)."""
    while True:
        opcode, data = ws.recv_data(control_frame=True)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
            return code, data[2:].decode("utf-8", "replace")


# ---------------------------------------------------------------- /v1/stream

def test_metrics_snapshots_at_the_interval(base_url):
    ws = connect(base_url)
    try:
        ack = subscribe(ws, ["metrics"], interval_ms=200)
        assert ack == {"type": "subscribed", "streams": ["metrics"], "interval_ms": 200}
        times, snaps = [], []
        for _ in range(4):
            snaps.append(json.loads(ws.recv()))
            times.append(time.monotonic())
        for s in snaps:
            assert s["type"] == "metrics"
            for key in ("time", "uptime_s", "requests", "partitions", "tenants", "jobs"):
                assert key in s, (key, s)
            assert set(s["jobs"]) == {"queued", "running", "succeeded", "failed", "cancelled"}
            p = s["partitions"][0]
            assert set(p) == {"name", "inflight", "limit", "queued", "busy_seconds"}
            t = s["tenants"][0]
            assert {"name", "partition", "queued", "running", "memory_bytes", "memory_limit_bytes"} <= set(t)
        gaps = [b - a for a, b in zip(times[1:], times[2:])]  # the first snapshot comes at once
        assert all(0.12 < g < 1.0 for g in gaps), gaps
    finally:
        ws.close()


def test_interval_is_clamped(base_url):
    ws = connect(base_url)
    try:
        assert subscribe(ws, ["metrics"], interval_ms=1)["interval_ms"] == 100
        ws.send(json.dumps({"subscribe": ["jobs"], "interval_ms": 10 ** 9}))
        while True:  # a resubscribe replaces the first; snapshots may still be queued
            m = json.loads(ws.recv())
            if m["type"] == "subscribed":
                assert m == {"type": "subscribed", "streams": ["jobs"], "interval_ms": 60000}
                break
    finally:
        ws.close()


def test_job_events_for_a_run(base_url):
    ws = connect(base_url)
    try:
        subscribe(ws, ["jobs"])
        job = run(base_url)
        evs = [e for e in job_events(ws, [job]) if e["id"] == job]
        assert [e["state"] for e in evs] == ["queued", "running", "succeeded"]
        for e in evs:
            assert set(e) == {"type", "id", "state", "tenant", "partition", "queue_ms", "run_ms"}
            assert e["tenant"] == "default" and e["partition"] == "default"
        assert evs[-1]["run_ms"] > 0 and evs[-1]["queue_ms"] >= 0
    finally:
        ws.close()


def test_client_stream_generator(base_url):
    c = tensord.Client(base_url)
    it = c.stream(["jobs"], timeout=10)
    try:
        # The generator subscribes on the first next(): start it in a thread-free way by
        # running the job after the subscription is acknowledged (the first event waits).
        import threading
        t = threading.Timer(0.3, lambda: run(base_url))
        t.start()
        ev = next(it)
        assert ev["type"] == "job" and ev["state"] == "queued"
        t.join()
    finally:
        it.close()
        c.close()


@pytest.mark.parametrize("message,needle", [
    ("not json", "malformed JSON"),
    ("[1, 2]", "expected an object"),
    (json.dumps({"interval_ms": 100}), "missing 'subscribe'"),
    (json.dumps({"subscribe": []}), "non-empty array"),
    (json.dumps({"subscribe": ["metrics", "logs"]}), "unknown stream 'logs'"),
    (json.dumps({"subscribe": ["jobs"], "interval_ms": "fast"}), "interval_ms"),
    (json.dumps({"subscribe": ["jobs"], "intervalms": 5}), "unknown field"),
])
def test_malformed_subscribe_gets_an_error_then_close(base_url, message, needle):
    ws = connect(base_url)
    try:
        ws.send(message)
        err = json.loads(ws.recv())
        assert err["type"] == "error" and err["error"]["code"] == "bad_request", err
        assert needle in err["error"]["message"], err
        code, _ = expect_close(ws)
        assert code == 1008
    finally:
        ws.close()


def test_plain_get_is_426(base_url):
    r = requests.get(base_url + "/v1/stream", timeout=10)
    assert r.status_code == 426
    assert r.headers["Upgrade"] == "websocket"


def test_stream_needs_a_token_with_config(tenant_server):
    with pytest.raises(websocket.WebSocketBadStatusException) as e:
        connect(tenant_server.url)
    assert e.value.status_code == 401
    with pytest.raises(websocket.WebSocketBadStatusException) as e:
        connect(tenant_server.url, token="wrong")
    assert e.value.status_code == 401


def test_tenants_see_only_their_job_events(tenant_server):
    url = tenant_server.url
    wa, wr = connect(url, TOKENS["alice"]), connect(url, TOKENS["root"])
    try:
        subscribe(wa, ["jobs"])
        subscribe(wr, ["jobs", "metrics"], interval_ms=60000)
        jb = run(url, TOKENS["bob"])
        ja = run(url, TOKENS["alice"])
        seen_alice = job_events(wa, [ja])
        assert {e["tenant"] for e in seen_alice} == {"alice"}
        assert jb not in {e["id"] for e in seen_alice}
        seen_root = job_events(wr, [ja, jb])
        assert {e["tenant"] for e in seen_root} >= {"alice", "bob"}
    finally:
        wa.close()
        wr.close()


def test_tenant_metrics_snapshot_is_filtered(tenant_server):
    ws = connect(tenant_server.url, TOKENS["alice"])
    try:
        subscribe(ws, ["metrics"])
        s = json.loads(ws.recv())
        assert [t["name"] for t in s["tenants"]] == ["alice"]
        assert [p["name"] for p in s["partitions"]] == ["interactive"]
        assert "requests" not in s  # server-wide traffic is for admins
    finally:
        ws.close()


# ---------------------------------------------------------------- /v1/trace

def trace(url, token=None, **params):
    headers = {"Authorization": "Bearer " + token} if token else {}
    r = requests.get(url + "/v1/trace", params=params, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def trace_with_run_span(url, job, token=None, timeout=5):
    """/v1/trace once `job`'s run span is in it: the engine records a job's
    run span (and its final metrics) just after waking the waiter, so a trace
    read right after the reply may not have it yet."""
    deadline = time.time() + timeout
    while True:
        doc = trace(url, token)
        if any(e["ph"] == "X" and e.get("cat") == "job" and e["args"].get("job") == job for e in doc["traceEvents"]):
            return doc
        assert time.time() < deadline, "no run span for %s within %ss" % (job, timeout)
        time.sleep(0.02)


def test_trace_structure(base_url):
    job = run(base_url)
    doc = trace_with_run_span(base_url, job)
    assert doc["displayTimeUnit"] == "ms"
    evs = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(re.match(r"(runner default stream \d+|request thread) #\d+$", n) for n in names.values()), names
    assert any(n.startswith("request thread") for n in names.values()), names
    # A lane per partition and stream: the job ran on one of the default
    # partition's streams (workqueue_limit 2: streams 0 and 1), or, this
    # program being small and the partition idle, on the request's own
    # thread (the short-job path: docs/architecture.md, "Threads").
    run_span = next(e for e in evs if e["ph"] == "X" and e.get("cat") == "job" and e["args"].get("job") == job)
    assert re.match(r"(runner default stream [01]|request thread) #\d+$", names[run_span["tid"]]), \
        names[run_span["tid"]]
    xs = [e for e in evs if e["ph"] == "X"]
    for e in xs:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        assert e["pid"] == 1 and e["tid"] in names
    ops = [e for e in xs if e["cat"] == "op" and e["args"]["job"] == job]
    assert [o["args"]["node"] for o in ops] == ["m", "s"]
    assert ops[0]["args"]["op"] == "mul" and ops[0]["args"]["inputs"][0] == "float32[2, 3]"
    assert ops[0]["args"]["outputs"] == ["float32[2, 3]"]
    run_span = [e for e in xs if e["cat"] == "job" and e["args"]["job"] == job]
    assert len(run_span) == 1 and run_span[0]["args"]["state"] == "succeeded"
    for o in ops:  # ops nest in their job's run span, on its lane
        assert o["tid"] == run_span[0]["tid"]
        assert run_span[0]["ts"] <= o["ts"] and o["ts"] + o["dur"] <= run_span[0]["ts"] + run_span[0]["dur"] + 0.01
    reqs = [e for e in xs if e["cat"] == "request" and job in e["args"].get("jobs", "")]
    assert len(reqs) == 1 and reqs[0]["name"] == "POST /v1/run"
    # /v1/run is answered from its job's end: the request span covers the run.
    assert reqs[0]["ts"] <= run_span[0]["ts"]
    assert reqs[0]["ts"] + reqs[0]["dur"] >= run_span[0]["ts"] + run_span[0]["dur"] - 0.01
    # Flows pair up: request -> job (id 2n) and job -> first op (2n + 1), each
    # start with one finish at or after it. (Other tests' jobs may still be
    # queued or running, with only their start recorded so far.)
    n = int(job.rsplit("-", 1)[1])
    starts = {e["id"]: e for e in evs if e["ph"] == "s" and e["id"] in (2 * n, 2 * n + 1)}
    ends = {e["id"]: e for e in evs if e["ph"] == "f" and e["id"] in (2 * n, 2 * n + 1)}
    assert set(starts) == set(ends) == {2 * n, 2 * n + 1}
    for i, s in starts.items():
        assert ends[i]["ts"] >= s["ts"]
    assert starts[2 * n]["tid"] == reqs[0]["tid"] and ends[2 * n]["tid"] == run_span[0]["tid"]
    assert starts[2 * n + 1]["tid"] == ends[2 * n + 1]["tid"] == run_span[0]["tid"]
    assert ends[2 * n + 1]["ts"] == ops[0]["ts"]
    queue = [e for e in evs if e["ph"] in "be" and e.get("cat") == "queue"]
    assert len(queue) % 2 == 0 and queue


def test_trace_last_bounds_the_reply(base_url):
    run(base_url)
    evs = [e for e in trace(base_url, last=3)["traceEvents"] if e["ph"] != "M"]
    assert 1 <= len([e for e in evs if e["ph"] != "e"]) <= 3
    assert [e for e in trace(base_url, last=0)["traceEvents"] if e["ph"] != "M"] == []


@pytest.mark.parametrize("last", ["-1", "x", "1.5", "", "99999999999999999999999"])
def test_trace_bad_last_is_400(base_url, last):
    r = requests.get(base_url + "/v1/trace", params={"last": last}, timeout=10)
    assert r.status_code == 400, (last, r.text)
    assert r.json()["error"]["code"] == "bad_request"


def test_trace_is_per_tenant(tenant_server):
    url = tenant_server.url
    ja = run(url, TOKENS["alice"])
    jb = run(url, TOKENS["bob"])

    def jobs_in(doc):
        return {e["args"]["job"] for e in doc["traceEvents"] if isinstance(e.get("args"), dict) and "job" in e["args"]}

    a = jobs_in(trace(url, TOKENS["alice"]))
    assert ja in a and jb not in a
    b = jobs_in(trace(url, TOKENS["bob"]))
    assert jb in b and ja not in b
    assert {ja, jb} <= jobs_in(trace(url, TOKENS["root"]))
    assert requests.get(url + "/v1/trace", timeout=10).status_code == 401


def test_graph_replay_op_spans_carry_graph_id(base_url):
    """A captured graph's replay: its op spans and run span name the graph
    (args.graph), with node ids and shapes; a plain /v1/run's do not."""
    f32 = lambda shape: {"dtype": "float32", "shape": shape}
    prog = {"inputs": {"x": f32([4])},
            "nodes": [{"id": "gm", "op": "mul", "args": ["x", 3.0], "outputs": ["y"]},
                      {"id": "gs", "op": "sum", "args": ["y"], "outputs": ["t"]}],
            "outputs": ["t"]}
    r = requests.post(base_url + "/v1/graphs", json={"program": prog, "inputs": {"x": f32([4])}}, timeout=30)
    assert r.status_code == 201, r.text
    gid = r.json()["id"]
    try:
        r = requests.post(base_url + "/v1/graphs/%s/replay" % gid,
                          json={"inputs": {"x": {"dtype": "float32", "shape": [4], "data": [1, 2, 3, 4]}}},
                          timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["outputs"]["t"]["data"] in (30.0, [30.0])
        job = r.json()["job"]["id"]
        plain = run(base_url)
        trace_with_run_span(base_url, job)
        evs = trace_with_run_span(base_url, plain)["traceEvents"]
    finally:
        requests.delete(base_url + "/v1/graphs/" + gid, timeout=30)
    ops = [e for e in evs if e["ph"] == "X" and e["cat"] == "op" and e["args"]["job"] == job]
    assert [o["args"]["node"] for o in ops] == ["gm", "gs"], ops
    for o in ops:
        assert o["args"]["graph"] == gid, o
    assert ops[0]["args"]["op"] == "mul"
    assert ops[0]["args"]["inputs"][0] == "float32[4]" and ops[0]["args"]["outputs"] == ["float32[4]"]
    assert ops[1]["args"]["outputs"] == ["float32[]"]
    run_span = [e for e in evs if e["ph"] == "X" and e["cat"] == "job" and e["args"]["job"] == job]
    assert len(run_span) == 1 and run_span[0]["args"]["graph"] == gid
    assert run_span[0]["args"]["state"] == "succeeded"
    plain_ops = [e for e in evs if e["ph"] == "X" and e["cat"] == "op" and e["args"]["job"] == plain]
    assert plain_ops and all("graph" not in o["args"] for o in plain_ops)


# ---------------------------------------------------------------- --metrics / --trace off

TINY_RUN = {"program": {"nodes": [{"id": "a", "op": "mul", "args": ["x", 2.0], "outputs": ["y"]},
                                  {"id": "s", "op": "sum", "args": ["y"], "outputs": ["t"]}],
                        "outputs": ["t"]},
            "inputs": {"x": {"dtype": "float32", "shape": [16], "data": [1.0] * 16}}}


def test_metrics_off_records_nothing_and_metrics_still_answers():
    srv = Server(["--metrics", "off"], name="metrics-off")
    try:
        for _ in range(3):
            r = requests.post(srv.url + "/v1/run", json=TINY_RUN, timeout=30)
            assert r.status_code == 200, r.text
            assert r.json()["outputs"]["t"]["data"] in (32.0, [32.0])
        r = requests.get(srv.url + "/metrics", timeout=10)
        assert r.status_code == 200
        text = r.text
        assert r.headers["content-type"].startswith("text/plain")
        assert 'tensord_build_info{backend="cpu"' in text
        for family in ("process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"):
            assert family in text, family
        for family in ("tensord_http_requests_total", "tensord_http_request_duration_seconds", "tensord_jobs_total",
                       "tensord_job_run_seconds", "tensord_op_launches_total", "tensord_op_seconds",
                       "tensord_queue_depth", "tensord_tenant_memory_bytes"):
            assert family not in text, family
        p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
        assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
        # The trace is independent of --metrics.
        ops = [e for e in trace(srv.url)["traceEvents"] if e["ph"] == "X" and e.get("cat") == "op"]
        assert len(ops) == 6
    finally:
        _stop_and_check(srv)


def test_trace_off_records_no_spans():
    srv = Server(["--trace", "off", "--metrics", "on"], name="trace-off")
    try:
        r = requests.post(srv.url + "/v1/run", json=TINY_RUN, timeout=30)
        assert r.status_code == 200, r.text
        doc = trace(srv.url)
        assert [e for e in doc["traceEvents"] if e["ph"] != "M"] == []
        want = 'tensord_jobs_total{partition="default",state="succeeded",tenant="default"} 1'
        deadline = time.time() + 5
        while want not in requests.get(srv.url + "/metrics", timeout=10).text:  # recorded just after the reply
            assert time.time() < deadline, want
            time.sleep(0.02)
        text = requests.get(srv.url + "/metrics", timeout=10).text
        assert 'tensord_op_launches_total{backend="cpu",op="mul"} 1' in text
    finally:
        _stop_and_check(srv)


@pytest.mark.parametrize("args", [["--metrics", "maybe"], ["--metrics", "ON"], ["--metrics", ""], ["--metrics=1"],
                                  ["--metrics"], ["--trace", "yes"], ["--trace=off2"], ["--trace"]])
def test_bad_metrics_and_trace_flags_exit_2(args):
    p = subprocess.run([server_binary(), "--listen", "127.0.0.1:0"] + args, capture_output=True, timeout=30)
    assert p.returncode == 2, (args, p.stderr)
    assert b"usage" in p.stderr
    assert (b"--metrics" if "metrics" in args[0] else b"--trace") in p.stderr


def test_help_lists_metrics_and_trace_flags():
    p = subprocess.run([server_binary(), "--help"], capture_output=True, timeout=30)
    assert p.returncode == 0
    assert b"--metrics on|off" in p.stdout and b"--trace on|off" in p.stdout


# ---------------------------------------------------------------- /metrics: the table of API.md 9

# (name, type, labels every series must have) for each family of the table.
METRIC_TABLE = [
    ("tensord_build_info", "gauge", {"version", "backend"}),
    ("tensord_http_requests_total", "counter", {"route", "method", "code"}),
    ("tensord_http_request_duration_seconds", "histogram", {"route"}),
    ("tensord_jobs_total", "counter", {"tenant", "partition", "state"}),
    ("tensord_job_queue_seconds", "histogram", {"tenant", "partition"}),
    ("tensord_job_run_seconds", "histogram", {"tenant", "partition"}),
    ("tensord_queue_depth", "gauge", {"tenant", "partition"}),
    ("tensord_partition_inflight", "gauge", {"partition"}),
    ("tensord_partition_workqueue_limit", "gauge", {"partition"}),
    ("tensord_op_launches_total", "counter", {"op", "backend"}),
    ("tensord_op_seconds", "histogram", {"op"}),
    ("tensord_tenant_busy_seconds_total", "counter", {"tenant", "partition"}),
    ("tensord_tenant_memory_bytes", "gauge", {"tenant"}),
    ("tensord_tenant_memory_limit_bytes", "gauge", {"tenant"}),
    ("tensord_device_memory_bytes", "gauge", {"device", "kind"}),
    ("tensord_graph_replays_total", "counter", {"tenant"}),
    ("process_resident_memory_bytes", "gauge", set()),
    ("process_cpu_seconds_total", "counter", set()),
    ("process_open_fds", "gauge", set()),
]

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text):
    """({family: type}, [(sample name, {label: value}, value)])."""
    types, samples = {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            types[name] = typ
        elif line and not line.startswith("#"):
            m = SAMPLE_RE.match(line)
            assert m, "unparsable sample line: %r" % line
            samples.append((m.group(1), dict(LABEL_RE.findall(m.group(2) or "")), float(m.group(3))))
    return types, samples


def check_families(text, table):
    types, samples = parse_exposition(text)
    problems = []
    for name, typ, labels in table:
        if types.get(name) != typ:
            problems.append("%s: type %s, want %s" % (name, types.get(name), typ))
            continue
        series = name + "_count" if typ == "histogram" else name
        found = [l for s, l, _ in samples if s == series]
        if not found:
            problems.append("%s: no series" % name)
        elif not all(labels <= set(l) for l in found):
            problems.append("%s: a series lacks labels %s: %s" % (name, sorted(labels), found[:3]))
    return problems


def traffic(url):
    run(url)
    f32 = {"dtype": "float32", "shape": [2]}
    r = requests.post(url + "/v1/graphs", json={"program": {"inputs": {"x": f32}, "nodes": [
        {"id": "n", "op": "neg", "args": ["x"], "outputs": ["y"]}], "outputs": ["y"]}, "inputs": {"x": f32}},
        timeout=30)
    assert r.status_code == 201, r.text
    gid = r.json()["id"]
    r = requests.post(url + "/v1/graphs/%s/replay" % gid,
                      json={"inputs": {"x": {"dtype": "float32", "shape": [2], "data": [1, 2]}}}, timeout=30)
    assert r.status_code == 200, r.text
    requests.delete(url + "/v1/graphs/" + gid, timeout=30)


def test_metrics_has_every_family_of_the_table(base_url):
    traffic(base_url)
    deadline = time.time() + 5
    while True:  # a job's series are recorded just after its reply
        text = requests.get(base_url + "/metrics", timeout=10).text
        problems = check_families(text, METRIC_TABLE)
        if not problems or time.time() > deadline:
            break
        time.sleep(0.05)
    assert not problems, "\n".join(problems)
    _, samples = parse_exposition(text)
    kinds = {l.get("kind") for s, l, _ in samples if s == "tensord_device_memory_bytes"}
    assert kinds == {"used", "total"}, kinds


def test_route_label_is_the_template_not_the_path(base_url):
    name = "routecheck-%d" % int(time.time() * 1e6)
    r = requests.get(base_url + "/v1/tensors/" + name, timeout=10)
    assert r.status_code == 404
    r = requests.get(base_url + "/v1/jobs/job-%s" % name, timeout=10)
    assert r.status_code == 404
    text = requests.get(base_url + "/metrics", timeout=10).text
    assert name not in text
    _, samples = parse_exposition(text)
    routes = {l["route"] for s, l, _ in samples if s == "tensord_http_requests_total"}
    assert "/v1/tensors/{name}" in routes and "/v1/jobs/{id}" in routes, routes
    codes = {(l["route"], l["code"]) for s, l, _ in samples if s == "tensord_http_requests_total"}
    assert ("/v1/tensors/{name}", "404") in codes
