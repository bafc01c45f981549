"""What an operator relies on: strict request fields (API.md 4.1), auth on
/v1/info and /v1/ops (9), gauges that follow the state (9), and logs with
request ids in text and JSON (10)."""

import json
import struct
import time

import numpy as np
import pytest
import requests

import tensord
from conftest import Server, _stop_and_check
from test_graphs import metric_value
from test_shutdown import long_loop_body, start_long_job
from test_tenancy import TOKENS, sha, write_config

ADD = {"inputs": {"x": {"dtype": "float32", "shape": [2]}},
       "nodes": [{"id": "a", "op": "add", "args": ["x", 1.0], "outputs": ["y"]}], "outputs": ["y"]}
X = {"dtype": "float32", "shape": [2], "data": [1, 2]}


def _bad_field(r, field):
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "bad_request"
    assert '"%s"' % field in err["message"], err


def test_unknown_request_fields_are_400_naming_them(server):
    url = server.url
    _bad_field(requests.post(url + "/v1/run", json={"program": ADD, "inputs": {"x": X}, "retrun": ["y"]}), "retrun")
    _bad_field(requests.post(url + "/v1/jobs", json={"program": ADD, "inputs": {"x": X}, "deadline": 5}), "deadline")
    _bad_field(requests.post(url + "/v1/graphs", json={"program": ADD, "inptus": {}}), "inptus")
    g = requests.post(url + "/v1/graphs", json={"program": ADD})
    assert g.status_code == 201, g.text
    gid = g.json()["id"]
    _bad_field(requests.post(url + "/v1/graphs/%s/replay" % gid, json={"inputs": {"x": X}, "stroe": {}}), "stroe")
    ok = requests.post(url + "/v1/graphs/%s/replay" % gid, json={"inputs": {"x": X}})
    assert ok.status_code == 200 and ok.json()["outputs"]["y"]["data"] == [2, 3]
    # The same rule for a safetensors request's __metadata__.request.
    header = json.dumps({"__metadata__": {"request": json.dumps({"program": ADD, "priorty": 1})},
                         "x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    header += b" " * (-len(header) % 8)
    body = struct.pack("<Q", len(header)) + header + np.array([1, 2], np.float32).tobytes()
    _bad_field(requests.post(url + "/v1/run", data=body,
                             headers={"Content-Type": "application/vnd.safetensors"}), "priorty")
    # Known fields still work, "ranks": 1 included; more ranks are refused by name.
    r = requests.post(url + "/v1/run", json={"program": ADD, "inputs": {"x": X}, "ranks": 1, "priority": 0})
    assert r.status_code == 200, r.text
    r = requests.post(url + "/v1/run", json={"program": ADD, "inputs": {"x": X}, "ranks": 4})
    assert r.status_code == 400 and "ranks" in r.json()["error"]["message"]
    requests.delete(url + "/v1/graphs/" + gid)


def test_info_and_ops_need_a_token_when_tenants_are_configured():
    cfg = write_config({"partitions": [{"name": "p", "share": 1.0, "workqueue_limit": 1}],
                        "tenants": [{"name": "alice", "token_sha256": sha(TOKENS["alice"]), "partition": "p"}]})
    s = Server(["--config", cfg], name="info-auth")
    try:
        for route in ("/v1/info", "/v1/ops"):
            r = requests.get(s.url + route, timeout=10)
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated", (route, r.text)
            r = requests.get(s.url + route, headers={"Authorization": "Bearer wrong"}, timeout=10)
            assert r.status_code == 401
            r = requests.get(s.url + route, headers={"Authorization": "Bearer " + TOKENS["alice"]}, timeout=10)
            assert r.status_code == 200, r.text
        for route in ("/healthz", "/readyz", "/metrics"):  # never need one
            assert requests.get(s.url + route, timeout=10).status_code == 200
    finally:
        _stop_and_check(s)


def _listed_bytes(url):
    return sum(t["bytes"] for t in requests.get(url + "/v1/tensors?prefix=", timeout=10).json()["tensors"])


def _gauge(url):
    return metric_value(url, "tensord_tenant_memory_bytes", {"tenant": "default"})


def test_memory_gauge_follows_put_delete_upload_and_restart():
    s = Server(["--checkpoint-every", "0"], name="gauge")
    c = tensord.Client(s.url)
    assert _gauge(s.url) == 0
    c.put("g/a", np.ones((100, 10), np.float32))
    assert _gauge(s.url) == _listed_bytes(s.url) == 4000
    c.put("g/b", np.ones(50, np.float64))
    assert _gauge(s.url) == _listed_bytes(s.url) == 4400
    c.delete("g/a")
    assert _gauge(s.url) == _listed_bytes(s.url) == 400
    c.upload({"g/u1": np.zeros(8, np.int32), "g/u2": np.zeros((2, 2), np.float32)})
    assert _gauge(s.url) == _listed_bytes(s.url) == 400 + 32 + 16
    # A result that leaves the server frees its bytes; the gauge follows.
    c.run({"nodes": [{"id": "z", "op": "zeros", "args": [[1000]], "outputs": ["z"]}], "outputs": ["z"]})
    deadline = time.time() + 5
    while time.time() < deadline and _gauge(s.url) != _listed_bytes(s.url):
        time.sleep(0.05)
    assert _gauge(s.url) == _listed_bytes(s.url)
    state = s.state_dir
    _stop_and_check(s)
    b = Server(["--state-dir", state], name="gauge-restart")
    assert _gauge(b.url) == _listed_bytes(b.url) == 448
    _stop_and_check(b)


def test_busy_seconds_advance_while_a_long_job_runs():
    s = Server([], name="busy")
    try:
        job = start_long_job(s.url)
        labels = {"tenant": "default"}
        time.sleep(1.5)
        b1 = metric_value(s.url, "tensord_tenant_busy_seconds_total", labels)
        time.sleep(2.2)
        b2 = metric_value(s.url, "tensord_tenant_busy_seconds_total", labels)
        assert requests.get(s.url + "/v1/jobs/" + job, timeout=10).json()["state"] == "running"
        assert b1 >= 0.5, b1
        assert b2 - b1 >= 1.0, (b1, b2)
        requests.delete(s.url + "/v1/jobs/" + job, timeout=10)
        text = requests.get(s.url + "/metrics", timeout=10).text
        assert "tensord_config_last_reload_successful 1" in text
    finally:
        _stop_and_check(s)


def test_request_and_job_lines_carry_the_request_id():
    s = Server([], name="log-text")
    try:
        r = requests.post(s.url + "/v1/run", json={"program": ADD, "inputs": {"x": X}},
                          headers={"X-Request-Id": "req-abc-123"}, timeout=10)
        assert r.status_code == 200
        r = requests.get(s.url + "/v1/tensors/nope", headers={"X-Request-Id": "req-missing-9"}, timeout=10)
        assert r.status_code == 404
        deadline = time.time() + 5
        while time.time() < deadline and not any("req-missing-9" in l for l in s.lines):
            time.sleep(0.05)
        req = [l for l in s.lines if "request_id=req-abc-123" in l]
        assert any("route=/v1/run" in l and "status=200" in l and "tenant=default" in l for l in req), req
        assert any(" job " in l and "state=succeeded" in l for l in req), req
        miss = [l for l in s.lines if "req-missing-9" in l]
        assert any("route=/v1/tensors/{name}" in l and "status=404" in l for l in miss), miss
    finally:
        _stop_and_check(s)


def test_json_logs_parse_line_by_line():
    s = Server(["--log-format", "json"], name="log-json")
    try:
        requests.post(s.url + "/v1/run", json={"program": ADD, "inputs": {"x": X}},
                      headers={"X-Request-Id": "json-req-1"}, timeout=10)
        requests.post(s.url + "/v1/run", data=b"{not json", headers={"X-Request-Id": "json-req-2"}, timeout=10)
    finally:
        _stop_and_check(s)
    events = [json.loads(l) for l in s.lines if l.strip()]  # every line is one JSON object
    assert events and all({"ts", "level", "msg"} <= set(e) for e in events)
    reqs = {e.get("request_id"): e for e in events if e["msg"] == "request"}
    assert reqs["json-req-1"]["status"] == 200 and reqs["json-req-1"]["route"] == "/v1/run"
    assert reqs["json-req-2"]["status"] == 400 and reqs["json-req-2"]["bytes_in"] == 9
    assert any(e["msg"] == "stopped" for e in events)


def test_log_flags_are_checked():
    import subprocess
    from conftest import server_binary
    for args in (["--log-format", "xml"], ["--log-level", "loud"], ["--checkpoint-every", "-1"]):
        p = subprocess.run([server_binary()] + args, capture_output=True, timeout=30)
        assert p.returncode == 2 and b"usage" in p.stderr, (args, p.stderr)
    p = subprocess.run([server_binary(), "--log-level", "error", "--listen", "127.0.0.1:0", "--backend", "bogus"],
                       capture_output=True, timeout=30)
    assert p.returncode == 2
