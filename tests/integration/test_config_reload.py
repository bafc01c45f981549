"""SIGHUP reloads --config without dropping jobs (docs/api-notes.md, "Config reload")."""

import copy
import json
import os
import re
import signal
import time

import numpy as np
import requests

import tensord
from conftest import Server, _stop_and_check
from test_tenancy import TOKENS, chain, hdr, sha, write_config

CAROL = "carol-secret-token"

CONFIG = {
    "partitions": [{"name": "interactive", "share": 0.5, "workqueue_limit": 1},
                   {"name": "batch", "share": 0.5, "workqueue_limit": 2}],
    "tenants": [
        {"name": "alice", "token_sha256": sha(TOKENS["alice"]), "partition": "interactive", "max_queued": 8,
         "max_running": 1, "memory_bytes": 1 << 20},
        {"name": "bob", "token_sha256": sha(TOKENS["bob"]), "partition": "batch"},
        {"name": "root", "token_sha256": sha(TOKENS["root"]), "partition": "batch", "admin": True},
    ],
}


def reloads(srv, result):
    text = requests.get(srv.url + "/metrics", timeout=10).text
    m = re.search(r'^tensord_config_reloads_total\{result="%s"\} (\S+)$' % result, text, re.M)
    return float(m.group(1)) if m else 0.0


def sighup_and_wait(srv, result, before):
    os.kill(srv.pid, signal.SIGHUP)
    deadline = time.time() + 20
    while time.time() < deadline:
        if reloads(srv, result) >= before + 1:
            return
        time.sleep(0.05)
    raise AssertionError("no %s reload counted after SIGHUP; stderr:\n%s" % (result, srv.stderr_tail()))


def job_state(srv, jid, who="alice"):
    return requests.get(srv.url + "/v1/jobs/" + jid, headers=hdr(who), timeout=10).json()["state"]


def wait_state(srv, jid, states, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = job_state(srv, jid)
        if s in states:
            return s
        time.sleep(0.02)
    raise AssertionError("job %s never reached %s" % (jid, states))


def test_sighup_reload_applies_tenants_and_keeps_jobs():
    path = write_config(CONFIG)
    srv = Server(["--config", path], name="reload")
    try:
        url = srv.url
        # The counter's series exist from the start, at 0.
        text = requests.get(url + "/metrics", timeout=10).text
        assert 'tensord_config_reloads_total{result="ok"} 0' in text
        assert 'tensord_config_reloads_total{result="error"} 0' in text
        alice = tensord.Client(url, token=TOKENS["alice"])
        alice.put("keep/w", np.arange(4, dtype=np.float32))
        assert requests.get(url + "/v1/tensors", headers={"Authorization": "Bearer " + CAROL},
                            timeout=10).status_code == 401

        # A long job of alice's, running across the reload.
        r = requests.post(url + "/v1/jobs", json={"program": chain(3000)}, headers=hdr("alice"), timeout=10)
        assert r.status_code == 202, r.text
        long_job = r.json()["id"]
        wait_state(srv, long_job, ("running",))

        # New file: carol added, bob removed, alice's max_queued 8 -> 1, batch
        # limit 2 -> 3, interactive's share changed (a layout change: kept).
        cfg = copy.deepcopy(CONFIG)
        cfg["tenants"][0]["max_queued"] = 1
        cfg["tenants"][0]["memory_bytes"] = 2 << 20
        cfg["tenants"] = [t for t in cfg["tenants"] if t["name"] != "bob"]
        cfg["tenants"].append({"name": "carol", "token_sha256": sha(CAROL), "partition": "batch"})
        cfg["partitions"][0]["share"] = 0.4
        cfg["partitions"][1]["workqueue_limit"] = 3
        with open(path, "w") as f:
            json.dump(cfg, f)
        sighup_and_wait(srv, "ok", reloads(srv, "ok"))

        # The reload happened while the job ran.
        # (chain(3000) takes seconds on one core; the reload, milliseconds).
        assert job_state(srv, long_job) == "running"
        carol = {"Authorization": "Bearer " + CAROL}
        assert requests.get(url + "/v1/tensors", headers=carol, timeout=10).status_code == 200
        r = requests.get(url + "/v1/tensors", headers=hdr("bob"), timeout=10)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
        # alice's stored tensor and usage survive.
        np.testing.assert_array_equal(alice.get("keep/w"), [0, 1, 2, 3])
        admin = requests.get(url + "/v1/admin/tenants", headers=hdr("root"), timeout=10).json()
        names = {t["name"]: t for t in admin["tenants"]}
        assert set(names) == {"alice", "root", "carol"}
        assert names["alice"]["max_queued"] == 1
        assert names["alice"]["memory_limit_bytes"] == 2 << 20
        assert names["alice"]["stored_tensors"] == 1 and names["alice"]["memory_bytes"] >= 16
        info = requests.get(url + "/v1/info", headers=hdr("root"), timeout=10).json()
        parts = {p["name"]: p for p in info["partitions"]}
        assert parts["batch"]["workqueue_limit"] == 3
        assert parts["interactive"]["share"] == 0.5  # layout kept
        assert any("share 0.4 not applied" in l for l in srv.lines), srv.stderr_tail()

        # max_queued 1 now: with the long job still running on the limit-1
        # partition, one more job queues and the next is 429 queue_full.
        assert job_state(srv, long_job) == "running"
        codes = []
        for _ in range(3):
            r = requests.post(url + "/v1/jobs", json={"program": chain(5)}, headers=hdr("alice"), timeout=10)
            codes.append(r.status_code)
            if r.status_code != 202:
                assert r.json()["error"]["code"] == "queue_full" and "Retry-After" in r.headers
        assert job_state(srv, long_job) == "running"  # so nothing drained meanwhile
        assert codes == [202, 429, 429], codes
        # The job that ran across the reload completes.
        assert wait_state(srv, long_job, ("succeeded", "failed", "cancelled")) == "succeeded"

        # An invalid file: logged, the running config stays in force.
        with open(path, "w") as f:
            f.write('{"partitions": [], "tenants": [')
        sighup_and_wait(srv, "error", reloads(srv, "error"))
        assert requests.get(url + "/v1/tensors", headers=carol, timeout=10).status_code == 200
        assert requests.get(url + "/v1/tensors", headers=hdr("bob"), timeout=10).status_code == 401
        assert any("config reload failed" in l for l in srv.lines), srv.stderr_tail()
        # A valid file that cannot be applied (a new tenant on a new partition): refused whole.
        bad = copy.deepcopy(cfg)
        bad["partitions"].append({"name": "new", "share": 0.1, "workqueue_limit": 1})
        bad["tenants"].append({"name": "dave", "token_sha256": sha("dave-token"), "partition": "new"})
        bad["tenants"][0]["max_queued"] = 50
        with open(path, "w") as f:
            json.dump(bad, f)
        sighup_and_wait(srv, "error", reloads(srv, "error"))
        assert requests.get(url + "/v1/tensors", headers={"Authorization": "Bearer dave-token"},
                            timeout=10).status_code == 401
        admin = requests.get(url + "/v1/admin/tenants", headers=hdr("root"), timeout=10).json()
        assert [t["max_queued"] for t in admin["tenants"] if t["name"] == "alice"] == [1]
        assert any("not in the running layout" in l for l in srv.lines), srv.stderr_tail()

        # bob comes back with his tensors (none here) and his old token.
        with open(path, "w") as f:
            json.dump(CONFIG, f)
        sighup_and_wait(srv, "ok", reloads(srv, "ok"))
        assert requests.get(url + "/v1/tensors", headers=hdr("bob"), timeout=10).status_code == 200
        assert requests.get(url + "/v1/tensors", headers=carol, timeout=10).status_code == 401
    finally:
        _stop_and_check(srv)
        os.unlink(path)


def test_sighup_without_config_is_ignored():
    srv = Server([], name="reload-anon")
    try:
        os.kill(srv.pid, signal.SIGHUP)
        deadline = time.time() + 10
        while time.time() < deadline and not any("nothing to reload" in l for l in srv.lines):
            time.sleep(0.05)
        assert any("nothing to reload" in l for l in srv.lines), srv.stderr_tail()
        assert requests.get(srv.url + "/healthz", timeout=10).status_code == 200
    finally:
        _stop_and_check(srv)


def test_a_program_sent_again_meets_the_reloaded_quota_and_token():
    """/v1/run compiles a program sent again only once (scheduler/compile_cache.h);
    what a reload changes is still checked on every run: a quota lowered
    below the program's output is 429, a replaced token is 401 and its new
    one 200, and another tenant sending the same program runs it as itself."""
    cfg = copy.deepcopy(CONFIG)
    path = write_config(cfg)
    srv = Server(["--config", path], name="reload-compiled")
    try:
        url = srv.url
        body = {"program": {"nodes": [{"id": "z", "op": "zeros", "args": [[8192]], "outputs": ["y"]}],
                            "outputs": ["y"]}}  # 32 KiB of output

        def run(headers):
            return requests.post(url + "/v1/run?encoding=b64", json=body, headers=headers, timeout=30)

        shas = set()
        for _ in range(3):
            r = run(hdr("alice"))
            assert r.status_code == 200, r.text
            shas.add(r.json()["job"]["program_sha256"])
        assert len(shas) == 1

        cfg["tenants"][0]["memory_bytes"] = 8192  # below the output
        with open(path, "w") as f:
            json.dump(cfg, f)
        sighup_and_wait(srv, "ok", reloads(srv, "ok"))
        r = run(hdr("alice"))
        assert r.status_code == 429 and r.json()["error"]["code"] == "quota_exceeded", r.text

        cfg["tenants"][0]["memory_bytes"] = 1 << 20
        cfg["tenants"][0]["token_sha256"] = sha(CAROL)  # alice's token replaced
        with open(path, "w") as f:
            json.dump(cfg, f)
        sighup_and_wait(srv, "ok", reloads(srv, "ok"))
        r = run(hdr("alice"))
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated", r.text
        r = run({"Authorization": "Bearer " + CAROL})
        assert r.status_code == 200 and r.json()["job"]["partition"] == "interactive", r.text

        r = run(hdr("bob"))  # the same program from another tenant
        assert r.status_code == 200, r.text
        assert r.json()["job"]["partition"] == "batch"
    finally:
        _stop_and_check(srv)
        os.unlink(path)
