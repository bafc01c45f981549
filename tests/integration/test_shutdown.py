"""Nothing lost, nothing hangs (API.md 10): a bounded SIGTERM drain that
cancels what still runs, checkpoints on a timer that survive SIGKILL, a
training loop resumed bit-identically, concurrent checkpoints, torn state
files skipped, quotas that shrank. All against the real binary."""

import json
import os
import shutil
import signal
import tempfile
import threading
import time

import numpy as np
import pytest
import requests

import tensord
from conftest import Server, _stop_and_check
from test_graphs import metric_value
from test_tenancy import TOKENS, sha, write_config


def long_loop_body(n=10 ** 12):
    """A while_loop that runs until cancelled (or its deadline)."""
    i64 = {"dtype": "int64", "shape": []}
    f32 = {"dtype": "float32", "shape": [3]}
    carries = {"i": i64, "x": f32, "n": i64}

    def sub(nodes, outs):
        return {"inputs": carries, "nodes": nodes, "outputs": outs}

    # max_iters as large as n: the loop must not end at the default 1e6
    # trips, which a fast machine runs in about 3 s.
    node = {"id": "l", "op": "while_loop", "args": ["i", "x", "n"], "outputs": ["i2", "x2", "n2"],
            "kwargs": {"max_iters": n},
            "cond": sub([{"id": "c", "op": "lt", "args": ["i", "n"], "outputs": ["b"]}], ["b"]),
            "body": sub([{"id": "a", "op": "add", "args": ["i", 1], "outputs": ["j"]},
                         {"id": "m", "op": "mul", "args": ["x", 1.0], "outputs": ["y"]}], ["j", "y", "n"])}
    program = {"inputs": carries, "nodes": [node], "outputs": ["i2"]}
    return {"program": program, "inputs": {"i": {"dtype": "int64", "shape": [], "data": 0},
                                           "x": {"dtype": "float32", "shape": [3], "data": [1, 1, 1]},
                                           "n": {"dtype": "int64", "shape": [], "data": n}}}


def start_long_job(url, headers=None):
    r = requests.post(url + "/v1/jobs", data=json.dumps(long_loop_body()), headers=headers, timeout=10)
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    deadline = time.time() + 20
    while time.time() < deadline:
        st = requests.get(url + "/v1/jobs/" + job, headers=headers, timeout=10).json()["state"]
        if st == "running":
            return job
        time.sleep(0.02)
    raise AssertionError("the long job never started running")


def wait_exit(srv, timeout):
    try:
        return srv.proc.wait(timeout)
    except Exception:  # noqa: BLE001
        srv.kill()
        return None


def no_sanitizer_reports(srv):
    reports = [l for l in srv.lines if "runtime error:" in l or "Sanitizer" in l]
    assert not reports, "\n".join(reports[:20])


def test_sigterm_cancels_a_long_job_at_the_drain_timeout_and_keeps_state():
    state = tempfile.mkdtemp(prefix="tensord-it-drain-")
    try:
        s = Server(["--state-dir", state, "--drain-timeout", "2", "--checkpoint-every", "0"], name="drain-long")
        c = tensord.Client(s.url)
        x = np.arange(10, dtype=np.float32) / 3
        c.put("keep/x", x)
        start_long_job(s.url)
        # A /v1/run of a loop too: its client must get 503, not a cut connection.
        answer = {}

        def run_long():
            try:
                answer["r"] = requests.post(s.url + "/v1/run", data=json.dumps(long_loop_body()), timeout=60)
            except Exception as e:  # noqa: BLE001
                answer["err"] = e

        t = threading.Thread(target=run_long)
        t.start()
        time.sleep(0.5)
        # A kept-alive connection made before the signal gets 503 + Retry-After after it.
        sess = requests.Session()
        assert sess.get(s.url + "/healthz", timeout=10).status_code == 200
        t0 = time.time()
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        r = sess.get(s.url + "/v1/tensors/keep/x", timeout=10)
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "unavailable"
        assert int(r.headers["Retry-After"]) >= 1
        rc = wait_exit(s, 2 + 10)
        elapsed = time.time() - t0
        t.join(10)
        assert rc == 0, (rc, s.stderr_tail())
        assert elapsed < 2 + 5, "exited %.1f s after SIGTERM with --drain-timeout 2" % elapsed
        assert "r" in answer, answer
        assert answer["r"].status_code == 503, answer["r"].text
        assert answer["r"].json()["error"]["code"] == "unavailable"
        assert any("drain timeout" in l for l in s.lines), s.stderr_tail()
        no_sanitizer_reports(s)

        b = Server(["--state-dir", state], name="drain-long-restart")
        np.testing.assert_array_equal(tensord.Client(b.url).get("keep/x"), x)
        _stop_and_check(b)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_a_job_that_ends_within_the_drain_timeout_finishes():
    s = Server(["--drain-timeout", "30"], name="drain-short")
    body = long_loop_body(n=3000)  # a few hundred ms of trips
    answer = {}

    def run():
        answer["r"] = requests.post(s.url + "/v1/run", data=json.dumps(body), timeout=60)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.05)
    s.proc.send_signal(signal.SIGTERM)
    rc = wait_exit(s, 30)
    t.join(10)
    assert rc == 0, s.stderr_tail()
    # Started before the signal: it ran to its end. (If the signal won the
    # race the request was refused with 503 and never ran.)
    assert answer["r"].status_code in (200, 503), answer["r"].text
    if answer["r"].status_code == 200:
        assert np.asarray(answer["r"].json()["outputs"]["i2"]["data"]).reshape(()) == 3000


def test_a_second_sigterm_skips_the_wait():
    s = Server(["--drain-timeout", "120", "--checkpoint-every", "0"], name="drain-twice")
    start_long_job(s.url)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert s.alive(), "the first SIGTERM must wait for the running job"
    s.proc.send_signal(signal.SIGTERM)
    rc = wait_exit(s, 15)
    assert rc == 0, s.stderr_tail()
    assert time.time() - t0 < 8
    assert any("second signal" in l for l in s.lines), s.stderr_tail()
    no_sanitizer_reports(s)


def test_checkpoint_timer_survives_sigkill():
    state = tempfile.mkdtemp(prefix="tensord-it-timer-")
    try:
        s = Server(["--state-dir", state, "--checkpoint-every", "1"], name="timer")
        c = tensord.Client(s.url)
        x = np.random.default_rng(3).standard_normal((64, 33)).astype(np.float32)
        c.put("timer/x", x)
        c.put("timer/gone", np.ones(3, np.float32))
        c.delete("timer/gone")
        ok = {"tenant": "default", "result": "ok"}
        deadline = time.time() + 10
        while time.time() < deadline and metric_value(s.url, "tensord_checkpoints_total", ok) < 1:
            time.sleep(0.2)
        assert metric_value(s.url, "tensord_checkpoints_total", ok) == 1
        stamp = metric_value(s.url, "tensord_checkpoint_last_success_timestamp_seconds", {"tenant": "default"})
        assert abs(stamp - time.time()) < 30
        time.sleep(1.5)  # another tick: nothing changed, nothing rewritten
        assert metric_value(s.url, "tensord_checkpoints_total", ok) == 1
        assert metric_value(s.url, "tensord_checkpoints_total", {"tenant": "default", "result": "error"}) == 0
        s.kill()  # SIGKILL: no shutdown checkpoint
        b = Server(["--state-dir", state], name="timer-restart")
        cb = tensord.Client(b.url)
        np.testing.assert_array_equal(cb.get("timer/x"), x)
        with pytest.raises(tensord.TensordError) as e:
            cb.get("timer/gone")
        assert e.value.status == 404
        assert not [f for f in os.listdir(state) if ".tmp" in f]
        _stop_and_check(b)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def _adamw_steps(c, names, grads):
    opt = c.optimizer("adamw", params=names, state="train/opt", lr=1e-2, weight_decay=0.1, amsgrad=True)
    for gs in grads:
        opt.step(gs)


def _everything(c, prefix):
    out = {}
    for t in requests.get(c.url + "/v1/tensors?prefix=" + prefix, timeout=10).json()["tensors"]:
        out[t["name"]] = c.get(t["name"])
    return out


def test_training_loop_resumed_after_sigkill_is_bit_identical():
    rng = np.random.default_rng(7)
    shapes = [(33, 17), (5,), (4, 4, 4)]
    p0 = [rng.standard_normal(sh).astype(np.float32) for sh in shapes]
    grads = [[rng.standard_normal(sh).astype(np.float32) for sh in shapes] for _ in range(6)]
    names = ["train/p%d" % i for i in range(len(shapes))]

    ref = Server([], name="train-ref")
    cr = tensord.Client(ref.url)
    for n, p in zip(names, p0):
        cr.put(n, p)
    _adamw_steps(cr, names, grads)
    want = _everything(cr, "train/")
    _stop_and_check(ref)

    state = tempfile.mkdtemp(prefix="tensord-it-train-")
    try:
        a = Server(["--state-dir", state, "--checkpoint-every", "0"], name="train-a")
        ca = tensord.Client(a.url)
        for n, p in zip(names, p0):
            ca.put(n, p)
        _adamw_steps(ca, names, grads[:3])
        assert ca.checkpoint()["tensors"] >= len(names) * 4
        a.kill()
        b = Server(["--state-dir", state], name="train-b")
        cb = tensord.Client(b.url)
        _adamw_steps(cb, names, grads[3:])
        got = _everything(cb, "train/")
        _stop_and_check(b)
    finally:
        shutil.rmtree(state, ignore_errors=True)
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        assert np.array_equal(got[k], want[k]), k  # bit-identical, not close


def test_eight_concurrent_checkpoints_all_succeed():
    state = tempfile.mkdtemp(prefix="tensord-it-concurrent-")
    try:
        s = Server(["--state-dir", state, "--checkpoint-every", "0"], name="concurrent")
        c = tensord.Client(s.url)
        for i in range(4):
            c.put("cc/t%d" % i, np.full((256, 256), i, np.float32))
        results = [None] * 8

        def one(k):
            results[k] = requests.post(s.url + "/v1/checkpoint", timeout=60)

        threads = [threading.Thread(target=one, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert [r.status_code for r in results] == [200] * 8, [r.text for r in results]
        assert all(r.json()["tensors"] == 4 for r in results)
        assert not [f for f in os.listdir(state) if ".tmp" in f], os.listdir(state)
        s.kill()
        b = Server(["--state-dir", state], name="concurrent-restart")
        cb = tensord.Client(b.url)
        for i in range(4):
            np.testing.assert_array_equal(cb.get("cc/t%d" % i), np.full((256, 256), i, np.float32))
        _stop_and_check(b)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def two_tenant_config(memory_bytes=1 << 30):
    return {"partitions": [{"name": "p", "share": 1.0, "workqueue_limit": 2}],
            "tenants": [{"name": "alice", "token_sha256": sha(TOKENS["alice"]), "partition": "p",
                         "memory_bytes": memory_bytes},
                        {"name": "bob", "token_sha256": sha(TOKENS["bob"]), "partition": "p"}]}


def test_a_torn_state_file_is_skipped_and_the_rest_loads():
    state = tempfile.mkdtemp(prefix="tensord-it-torn-")
    cfg = write_config(two_tenant_config())
    try:
        a = Server(["--state-dir", state, "--config", cfg], name="torn-a")
        alice = tensord.Client(a.url, token=TOKENS["alice"])
        bob = tensord.Client(a.url, token=TOKENS["bob"])
        alice.put("a/x", np.ones((100, 100), np.float32))
        bob.put("b/y", np.arange(7, dtype=np.int32))
        _stop_and_check(a)  # the shutdown checkpoint writes both
        path = os.path.join(state, "alice.safetensors")
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.truncate(size // 2)
        b = Server(["--state-dir", state, "--config", cfg], name="torn-b")
        assert any("checkpoint skipped" in l and "alice" in l for l in b.lines), b.stderr_tail()
        bob = tensord.Client(b.url, token=TOKENS["bob"])
        np.testing.assert_array_equal(bob.get("b/y"), np.arange(7, dtype=np.int32))
        alice = tensord.Client(b.url, token=TOKENS["alice"])
        with pytest.raises(tensord.TensordError) as e:
            alice.get("a/x")
        assert e.value.status == 404  # nothing of the torn file was loaded
        _stop_and_check(b)
    finally:
        shutil.rmtree(state, ignore_errors=True)
        os.unlink(cfg)


def test_a_checkpoint_over_a_shrunk_quota_still_loads():
    state = tempfile.mkdtemp(prefix="tensord-it-quota-")
    cfg = write_config(two_tenant_config())
    small = write_config(two_tenant_config(memory_bytes=4096))
    try:
        a = Server(["--state-dir", state, "--config", cfg], name="quota-a")
        alice = tensord.Client(a.url, token=TOKENS["alice"])
        x = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)  # 16 KiB
        alice.put("q/x", x)
        _stop_and_check(a)
        b = Server(["--state-dir", state, "--config", small], name="quota-b")
        assert any("past the tenant's memory quota" in l for l in b.lines), b.stderr_tail()
        alice = tensord.Client(b.url, token=TOKENS["alice"])
        np.testing.assert_array_equal(alice.get("q/x"), x)
        with pytest.raises(tensord.TensordError) as e:
            alice.put("q/more", np.ones(16, np.float32))
        assert e.value.status == 429 and e.value.code == "quota_exceeded"
        _stop_and_check(b)
    finally:
        shutil.rmtree(state, ignore_errors=True)
        os.unlink(cfg)
        os.unlink(small)
