"""Process lifecycle: state dir restore across restarts, checkpoints,
SIGTERM draining, readiness, and /metrics validity under promtool."""

import os
import shutil
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest
import requests

import tensord
from conftest import Server, _stop_and_check, server_binary


def test_state_dir_survives_restart():
    state = tempfile.mkdtemp(prefix="tensord-it-restart-")
    try:
        a = Server(["--state-dir", state], name="restart-1")
        c = tensord.Client(a.url)
        x = np.arange(12, dtype=np.float64).reshape(3, 4) / 7.0
        c.put("ckpt/x", x)
        c.put("ckpt/i", np.array([1, -2, 3], dtype=np.int16))
        info = c.checkpoint()
        assert info["tensors"] == 2
        c.put("ckpt/after", np.ones(2, np.float32))  # saved by the SIGTERM checkpoint
        c.close()
        _stop_and_check(a)
        assert os.path.exists(os.path.join(state, "default.safetensors"))
        assert not any(f.endswith(".tmp") for f in os.listdir(state))

        b = Server(["--state-dir", state], name="restart-2")
        c = tensord.Client(b.url)
        np.testing.assert_array_equal(c.get("ckpt/x"), x)
        got = c.get("ckpt/i")
        assert got.dtype == np.int16 and list(got) == [1, -2, 3]
        np.testing.assert_array_equal(c.get("ckpt/after"), np.ones(2, np.float32))
        c.close()
        _stop_and_check(b)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_corrupt_state_is_skipped_with_a_log_line():
    """A corrupt checkpoint is reported and skipped (API.md 10), never
    half-loaded, and the server serves; the file stays for an operator."""
    state = tempfile.mkdtemp(prefix="tensord-it-corrupt-")
    try:
        path = os.path.join(state, "default.safetensors")
        with open(path, "wb") as f:
            f.write(b"\xff" * 64)
        s = Server(["--state-dir", state, "--checkpoint-every", "0"], name="corrupt")
        assert any("checkpoint skipped" in l for l in s.lines), s.stderr_tail()
        listed = requests.get(s.url + "/v1/tensors?prefix=", timeout=10).json()["tensors"]
        assert listed == []
        s.kill()
        with open(path, "rb") as f:
            assert f.read() == b"\xff" * 64
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_checkpoint_without_state_dir_is_unavailable():
    # conftest's servers always have a state dir: start one without by hand.
    p = subprocess.Popen([server_binary(), "--listen", "127.0.0.1:0", "--backend", "cpu"], stderr=subprocess.PIPE)
    try:
        line = p.stderr.readline().decode()
        url = line.split("listening on ")[1].strip()
        r = requests.post(url + "/v1/checkpoint", timeout=10)
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "unavailable"
    finally:
        p.terminate()
        assert p.wait(30) == 0


def test_bad_flags_exit_2():
    binary = server_binary()
    for args in (["--listen", "nohost"], ["--backend", "tpu"], ["--threads", "-3"], ["--bogus"],
                 ["--max-body-bytes", "x"]):
        p = subprocess.run([binary] + args, capture_output=True, timeout=30)
        assert p.returncode == 2, (args, p.stderr)
        assert b"usage" in p.stderr


def test_version_and_help():
    binary = server_binary()
    p = subprocess.run([binary, "--version"], capture_output=True, timeout=30)
    assert p.returncode == 0 and p.stdout.startswith(b"tensord ")
    p = subprocess.run([binary, "--help"], capture_output=True, timeout=30)
    assert p.returncode == 0 and b"--listen" in p.stdout


def test_readiness_and_info(server):
    assert requests.get(server.url + "/readyz", timeout=10).status_code == 200
    info = requests.get(server.url + "/v1/info", timeout=10).json()
    assert info["backend"] == "cpu"
    assert info["partitions"][0]["workqueue_limit"] >= 1
    assert "cpu" in info["compiled_backends"]
    assert "fake" not in info["compiled_backends"]  # the test-only backend is not in the binary


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_metrics_pass_promtool(server, client, uniq):
    client.put(uniq + "/m", np.ones(3, np.float32))
    client.run({"nodes": [{"id": "a", "op": "add", "args": ["$stored/" + uniq + "/m", 1.0], "outputs": ["y"]}],
                "outputs": ["y"]})
    text = requests.get(server.url + "/metrics", timeout=10).text
    p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
    # promtool exits 0 when the exposition is valid; lint remarks go to stdout.
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    for family in ("tensord_build_info", "tensord_http_requests_total", "tensord_http_request_duration_seconds_bucket",
                   "tensord_jobs_total", "tensord_job_queue_seconds_bucket", "tensord_job_run_seconds_bucket",
                   "tensord_op_launches_total", "tensord_op_seconds_bucket", "tensord_partition_workqueue_limit",
                   "tensord_partition_inflight", "tensord_tenant_busy_seconds_total", "tensord_tenant_memory_bytes",
                   "process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"):
        assert family in text, family
    assert 'tensord_op_launches_total{backend="cpu",op="add"}' in text


def test_sigterm_drains_inflight_request():
    s = Server([], name="drain")
    c = tensord.Client(s.url)
    big = np.random.default_rng(0).standard_normal((200, 64, 64)).astype(np.float64)
    big = big + big.transpose(0, 2, 1)
    result = {}

    def work():
        try:
            result["w"] = c.eigvalsh(big)
        except Exception as e:  # noqa: BLE001
            result["err"] = e

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.05)
    _stop_and_check(s)
    t.join(30)
    # Either the request finished before SIGTERM arrived or it was drained:
    # it must not have been cut off mid-way with a connection error.
    if "err" in result:
        assert isinstance(result["err"], tensord.TensordError) and result["err"].status in (503,), result["err"]
    else:
        assert result["w"].shape == (200, 64)


def test_backend_choice_without_gpu(server):
    """A CUDA-enabled build starts without a driver: auto falls back to cpu
    with a log line saying why, and an explicit --backend cuda exits 2
    saying why."""
    info = requests.get(server.url + "/v1/info", timeout=10).json()
    p = subprocess.Popen([server_binary(), "--listen", "127.0.0.1:0", "--backend", "auto"], stderr=subprocess.PIPE)
    before = []
    try:
        line = p.stderr.readline().decode()
        while line and "listening on" not in line:
            before.append(line)
            line = p.stderr.readline().decode()
        assert "listening on" in line, before
        url = line.split("listening on ")[1].strip()
        auto_info = requests.get(url + "/v1/info", timeout=10).json()
    finally:
        p.terminate()
        assert p.wait(30) == 0
    if auto_info["backend"] == "cuda":
        pytest.skip("a CUDA device is present: nothing to check about the fallback")
    assert auto_info["backend"] == "cpu"
    if "cuda" in info["compiled_backends"]:
        fallback = [l for l in before if "serving on the CPU" in l]
        assert fallback and "reason=" in fallback[0], before
    r = subprocess.run([server_binary(), "--listen", "127.0.0.1:0", "--backend", "cuda"], capture_output=True,
                       timeout=60)
    assert r.returncode == 2
    assert b"not available" in r.stderr and b"reason=" in r.stderr
    print("compiled backends:", info["compiled_backends"])
