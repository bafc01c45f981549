"""GET /v1/stream (WebSocket) and GET /v1/trace (Chrome trace JSON), API.md 9."""

import hashlib
import json
import os
import struct
import tempfile
import time

import pytest
import requests
import websocket

import tensord
from conftest import Server, _stop_and_check

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


def test_trace_structure(base_url):
    job = run(base_url)
    doc = trace(base_url)
    assert doc["displayTimeUnit"] == "ms"
    evs = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any(n.startswith("runner default") for n in names.values()), names
    assert any(n.startswith("request thread") for n in names.values()), names
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
