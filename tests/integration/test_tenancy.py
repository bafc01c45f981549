"""Tenants from --config: bearer tokens, isolation, admin routes, quotas."""

import hashlib
import json
import os
import subprocess
import tempfile

import numpy as np
import pytest
import requests

import tensord
from conftest import Server, _stop_and_check, server_binary

TOKENS = {"alice": "alice-secret-token", "bob": "bob-secret-token", "root": "root-secret-token"}


def sha(t):
    return hashlib.sha256(t.encode()).hexdigest()


def write_config(cfg):
    fd, path = tempfile.mkstemp(prefix="tensord-cfg-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    return path


CONFIG = {
    "partitions": [{"name": "interactive", "share": 0.5, "workqueue_limit": 2},
                   {"name": "batch", "share": 0.5, "workqueue_limit": 2}],
    "tenants": [
        {"name": "alice", "token_sha256": sha(TOKENS["alice"]), "partition": "interactive", "weight": 1,
         "memory_bytes": 4096, "max_queued": 8, "max_running": 2},
        {"name": "bob", "token_sha256": sha(TOKENS["bob"]), "partition": "batch", "weight": 2,
         "memory_bytes": 1 << 20},
        {"name": "root", "token_sha256": sha(TOKENS["root"]), "partition": "batch", "admin": True},
    ],
}


@pytest.fixture(scope="module")
def tenant_server():
    path = write_config(CONFIG)
    srv = Server(["--config", path], name="tenancy")
    yield srv
    _stop_and_check(srv)
    os.unlink(path)


def hdr(name):
    return {"Authorization": "Bearer " + TOKENS[name]}


def test_missing_or_wrong_token_is_401(tenant_server):
    url = tenant_server.url
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic YWxpY2U6eA=="},
                    {"Authorization": "Bearer"}, {"Authorization": "Bearer " + sha(TOKENS["alice"])}):
        r = requests.get(url + "/v1/tensors", headers=headers, timeout=10)
        assert r.status_code == 401, headers
        assert r.json()["error"]["code"] == "unauthenticated"
        assert r.headers.get("WWW-Authenticate", "").startswith("Bearer")
    r = requests.post(url + "/v1/run", json={"program": {}}, timeout=10)
    assert r.status_code == 401


def test_health_and_metrics_need_no_token(tenant_server):
    for path in ("/healthz", "/readyz", "/metrics", "/v2/health/live", "/v2/health/ready"):
        assert requests.get(tenant_server.url + path, timeout=10).status_code == 200, path


def test_tenants_see_only_their_tensors(tenant_server):
    a = tensord.Client(tenant_server.url, token=TOKENS["alice"])
    b = tensord.Client(tenant_server.url, token=TOKENS["bob"])
    a.put("shared/name", np.array([1, 2, 3], np.float32))
    b.put("shared/name", np.array([9.0], np.float64))
    np.testing.assert_array_equal(a.get("shared/name"), [1, 2, 3])
    np.testing.assert_array_equal(b.get("shared/name"), [9.0])
    a.put("alice/only", np.zeros(2, np.float32))
    with pytest.raises(tensord.TensordError) as e:
        b.get("alice/only")
    assert e.value.status == 404
    assert all(t["name"] != "alice/only" for t in b.list(""))
    with pytest.raises(tensord.TensordError) as e:
        b.delete("alice/only")
    assert e.value.status == 404
    # A program of bob's cannot read alice's stored tensor either.
    with pytest.raises(tensord.TensordError) as e:
        b.run({"nodes": [{"id": "n", "op": "neg", "args": ["$stored/alice/only"], "outputs": ["y"]}], "outputs": ["y"]})
    assert e.value.status == 404
    np.testing.assert_array_equal(a.get("alice/only"), [0, 0])


def test_admin_route(tenant_server):
    url = tenant_server.url + "/v1/admin/tenants"
    r = requests.get(url, headers=hdr("alice"), timeout=10)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    assert requests.get(url, timeout=10).status_code == 401
    r = requests.get(url, headers=hdr("root"), timeout=10)
    assert r.status_code == 200
    body = r.json()
    names = {t["name"]: t for t in body["tenants"]}
    assert set(names) == {"alice", "bob", "root"}
    assert names["alice"]["memory_limit_bytes"] == 4096
    assert names["alice"]["partition"] == "interactive"
    text = r.text
    for tok in TOKENS.values():
        assert tok not in text and sha(tok) not in text


def test_quota_429_stores_nothing(tenant_server):
    a = tensord.Client(tenant_server.url, token=TOKENS["alice"])
    before = {t["name"] for t in a.list("")}
    with pytest.raises(tensord.TensordError) as e:
        a.put("big/x", np.zeros(2048, np.float32))  # 8 KiB > 4 KiB quota
    assert e.value.status == 429 and e.value.code == "quota_exceeded"
    with pytest.raises(tensord.TensordError) as e:
        a.run({"nodes": [{"id": "z", "op": "zeros", "args": [[4096]], "outputs": ["y"]}], "outputs": ["y"]},
              store={"y": "big/y"})
    assert e.value.status == 429
    assert {t["name"] for t in a.list("")} == before
    admin = requests.get(tenant_server.url + "/v1/admin/tenants", headers=hdr("root"), timeout=10).json()
    alice = [t for t in admin["tenants"] if t["name"] == "alice"][0]
    assert alice["memory_bytes"] <= 4096


@pytest.mark.parametrize("mutate,needle", [
    (lambda c: c["partitions"].append({"name": "interactive", "share": 0.1, "workqueue_limit": 1}), "duplicate partition"),
    (lambda c: c["partitions"][0].update(share=0.9), "sum"),
    (lambda c: c["tenants"][0].update(partition="nope"), "unknown partition"),
    (lambda c: c["tenants"][1].update(name="alice"), "duplicate tenant"),
    (lambda c: c["tenants"][0].update(token_sha256="xyz"), "token_sha256"),
    (lambda c: c["tenants"][0].update(colour="red"), "unknown key"),
    (lambda c: c["partitions"][0].update(workqueue_limit=0), "workqueue_limit"),
    (lambda c: c["tenants"][0].update(weight=-1), "weight"),
])
def test_bad_config_exits_2(mutate, needle):
    cfg = json.loads(json.dumps(CONFIG))
    mutate(cfg)
    path = write_config(cfg)
    try:
        p = subprocess.run([server_binary(), "--listen", "127.0.0.1:0", "--config", path], capture_output=True,
                           timeout=30)
        assert p.returncode == 2, p.stderr
        assert needle.encode() in p.stderr, p.stderr
    finally:
        os.unlink(path)


def test_no_config_refuses_non_loopback():
    p = subprocess.run([server_binary(), "--listen", "0.0.0.0:0"], capture_output=True, timeout=30)
    assert p.returncode == 2
    assert b"loopback" in p.stderr


def chain(n, size=200):
    nodes = [{"id": "r", "op": "rand", "args": [[size, size]], "kwargs": {"dtype": "float64", "seed": 3},
              "outputs": ["x0"]}]
    for i in range(n):
        nodes.append({"id": "m%d" % i, "op": "matmul", "args": ["x%d" % i, "x0"], "outputs": ["x%d" % (i + 1)]})
    nodes.append({"id": "s", "op": "sum", "args": ["x%d" % n], "outputs": ["t"]})
    return {"nodes": nodes, "outputs": ["t"]}


def test_queue_full_429_and_limit_1_partition():
    cfg = {
        "partitions": [{"name": "one", "share": 0.5, "workqueue_limit": 1},
                       {"name": "other", "share": 0.5, "workqueue_limit": 2}],
        "tenants": [{"name": "alice", "token_sha256": sha(TOKENS["alice"]), "partition": "one",
                     "max_queued": 3, "max_running": 1},
                    {"name": "root", "token_sha256": sha(TOKENS["root"]), "partition": "other", "admin": True}],
    }
    path = write_config(cfg)
    srv = Server(["--config", path], name="queue-full")
    try:
        accepted, rejected = [], []
        for _ in range(12):
            r = requests.post(srv.url + "/v1/jobs", json={"program": chain(60)}, headers=hdr("alice"), timeout=10)
            if r.status_code == 202:
                accepted.append(r.json()["id"])
            else:
                assert r.status_code == 429, r.text
                assert r.json()["error"]["code"] == "queue_full"
                ra = int(r.headers["Retry-After"])
                assert 1 <= ra <= 60
                rejected.append(r)
        assert rejected, "max_queued 3 must refuse some of 12 quick submissions"
        assert len(accepted) >= 3
        # While they run, the limit-1 partition never shows two running jobs.
        import time
        deadline = time.time() + 60
        states = {}
        while time.time() < deadline:
            info = requests.get(srv.url + "/v1/info", headers=hdr("alice"), timeout=10).json()
            one = [p for p in info["partitions"] if p["name"] == "one"][0]
            assert one["inflight"] <= 1, one
            # Job states are read one GET at a time, so two "running" in one
            # poll can be one job ending between the reads; the run spans
            # below are the exact check.
            states = {j: requests.get(srv.url + "/v1/jobs/" + j, headers=hdr("alice"), timeout=10).json()["state"]
                      for j in accepted}
            if all(s in ("succeeded", "failed", "cancelled") for s in states.values()):
                break
            time.sleep(0.01)
        assert all(s == "succeeded" for s in states.values()), states
        # Each job's run span lies inside its scheduler slot: on the limit-1
        # partition no two of them overlap.
        doc = requests.get(srv.url + "/v1/trace", params={"last": 65536}, headers=hdr("root"), timeout=10).json()
        runs = sorted((e["ts"], e["ts"] + e["dur"], e["args"]["job"]) for e in doc["traceEvents"]
                      if e["ph"] == "X" and e.get("cat") == "job" and e["args"].get("job") in accepted)
        assert len(runs) == len(accepted), runs
        for (s0, e0, j0), (s1, e1, j1) in zip(runs, runs[1:]):
            assert s1 >= e0 - 0.001, "%s ran during %s: %s" % (j1, j0, runs)
    finally:
        _stop_and_check(srv)
        os.unlink(path)
