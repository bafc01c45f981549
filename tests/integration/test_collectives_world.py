"""A world across two server processes (API.md 8) joined through a real
redis-server (Gloo's RedisStore), on loopback: an all_reduce, a
data-parallel AdamW step, the flight recorder on both sides, then one
server SIGKILLed mid-collective and the other answering 504 within the
collective timeout while it keeps serving.
"""

import shutil
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest
import requests

from conftest import Server, _stop_and_check

torch = pytest.importorskip("torch")

TIMEOUT_S = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis():
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (scripts/install-deps.sh installs it)")
    port = free_port()
    p = subprocess.Popen([exe, "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.02)
    yield "redis://127.0.0.1:%d" % port
    p.terminate()
    p.wait(10)


def world_server(redis, offset, name):
    return Server(["--ranks", "1", "--world-size", "2", "--rank-offset", str(offset), "--rendezvous", redis,
                   "--collective-timeout", str(TIMEOUT_S)], name=name)


@pytest.fixture(scope="module")
def world(redis):
    a = world_server(redis, 0, "world-a")
    b = world_server(redis, 1, "world-b")
    yield a, b
    _stop_and_check(a)
    if b.alive():
        _stop_and_check(b)


def enc(a):
    a = np.asarray(a)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": a.reshape(-1).tolist()}


def dec(t):
    return np.array(t["data"], dtype=np.float32).reshape(t["shape"])


def post(url, body, timeout=60):
    return requests.post(url + "/v1/run", json=body, timeout=timeout)


def test_info_and_an_all_reduce_across_servers(world):
    a, b = world
    assert requests.get(a.url + "/v1/info").json()["ranks"] == {"local": 1, "world": 2, "offset": 0}
    assert requests.get(b.url + "/v1/info").json()["ranks"] == {"local": 1, "world": 2, "offset": 1}
    xs = [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * r for r in range(2)]
    prog = {"nodes": [{"id": "s", "op": "dist.all_reduce", "args": ["x"], "outputs": ["s"]},
                      {"id": "g", "op": "dist.all_gather", "args": ["x"], "kwargs": {"dim": 1}, "outputs": ["g"]},
                      {"id": "m", "op": "mul", "args": ["x", 3.0], "outputs": ["m"]}],
            "outputs": ["s", "g", "m"]}
    r = post(a.url, {"program": prog, "ranks": 2, "inputs": {"x": {"per_rank": [enc(x) for x in xs]}}})
    assert r.status_code == 200, r.text
    out = r.json()["outputs"]
    np.testing.assert_array_equal(dec(out["s"]), xs[0] + xs[1])
    assert out["s"]["replicated"] is True
    np.testing.assert_array_equal(dec(out["g"]), np.concatenate(xs, axis=1))
    for got, x in zip(out["m"]["per_rank"], xs):
        np.testing.assert_array_equal(dec(got), x * 3)
    # Both servers recorded the collectives, with the same seqs.
    fa = requests.get(a.url + "/v1/flight-recorder?rank=0").json()
    fb = requests.get(b.url + "/v1/flight-recorder?rank=1").json()
    assert fb["rank"] == 1 and requests.get(b.url + "/v1/flight-recorder?rank=0").status_code == 404
    seqs = [[(e["collective_seq_id"], e["profiling_name"], e["state"]) for e in f["entries"]] for f in (fa, fb)]
    assert seqs[0] == seqs[1] and seqs[0][-2:] == [(seqs[0][-2][0], "gloo:all_reduce", "completed"),
                                                   (seqs[0][-2][0] + 1, "gloo:all_gather", "completed")]


def test_only_the_offset_0_server_coordinates(world):
    a, b = world
    prog = {"nodes": [{"id": "s", "op": "dist.all_reduce", "args": ["x"], "outputs": ["s"]}], "outputs": ["s"]}
    r = post(b.url, {"program": prog, "ranks": 2, "inputs": {"x": enc(np.ones(2, np.float32))}})
    assert r.status_code == 400 and "rank-offset is 0" in r.json()["error"]["message"], r.text
    # Its own rank alone is fine.
    r = post(b.url, {"program": prog, "ranks": [1], "inputs": {"x": enc(np.ones(2, np.float32))}})
    assert r.status_code == 200, r.text


def test_a_data_parallel_adamw_step_across_servers(world):
    a, b = world
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    grads = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2)]
    # Each server holds its replica of the parameters (as each DDP rank does).
    for s in (a, b):
        assert requests.put(s.url + "/v1/tensors/dp/w", json=enc(w0)).status_code in (200, 201)
    prog = {"nodes": [{"id": "ar", "op": "dist.all_reduce", "args": ["g"], "kwargs": {"op": "avg"}, "outputs": ["gm"]},
                      {"id": "step", "op": "optim.adamw", "args": [["$stored/dp/w"], ["gm"]],
                       "kwargs": {"state": "dp/opt", "lr": 0.01}, "outputs": []}],
            "outputs": []}
    for step in range(2):
        r = post(a.url, {"program": prog, "ranks": 2, "inputs": {"g": {"per_rank": [enc(g) for g in grads]}}})
        assert r.status_code == 200, r.text
    p = torch.nn.Parameter(torch.tensor(w0))
    opt = torch.optim.AdamW([p], lr=0.01)
    for step in range(2):
        p.grad = torch.tensor(np.mean(grads, axis=0))
        opt.step()
    want = p.detach().numpy()
    wa = dec(requests.get(a.url + "/v1/tensors/dp/w").json())
    wb = dec(requests.get(b.url + "/v1/tensors/dp/w").json())
    np.testing.assert_array_equal(wa, wb)
    np.testing.assert_allclose(wa, want, rtol=2e-6, atol=1e-7)


def test_a_rank_whose_server_never_joined_is_named(tmp_path):
    # A world of two through a file store where rank 1's server never
    # started: 503 naming the rank, after the lookup's few seconds; the
    # server's own rank still serves.
    a = Server(["--ranks", "1", "--world-size", "2", "--rendezvous", "file://%s" % tmp_path,
                "--collective-timeout", "2"], name="world-lonely")
    try:
        prog = {"nodes": [{"id": "s", "op": "dist.all_reduce", "args": ["x"], "outputs": ["s"]}], "outputs": ["s"]}
        r = post(a.url, {"program": prog, "ranks": 2, "inputs": {"x": enc(np.ones(2, np.float32))}})
        assert r.status_code == 503, r.text
        assert "rank 1" in r.json()["error"]["message"]
        r = post(a.url, {"program": prog, "ranks": [0], "inputs": {"x": enc(np.ones(2, np.float32))}})
        assert r.status_code == 200, r.text
    finally:
        _stop_and_check(a)


@pytest.mark.parametrize("args", [
    ["--world-size", "2"],                                      # a world beyond this server needs --rendezvous
    ["--world-size", "2", "--rank-offset", "2", "--rendezvous", "file:///tmp"],  # ranks outside the world
    ["--rendezvous", "tcp://x:1"],
    ["--rendezvous", "redis://127.0.0.1:1"],                    # nothing listens there
])
def test_bad_world_flags_exit_2(args):
    import os
    from conftest import server_binary
    p = subprocess.run([server_binary(), "--listen", "127.0.0.1:0"] + args, capture_output=True, timeout=30)
    assert p.returncode == 2, p.stderr.decode()


def test_sigkill_of_a_peer_mid_collective_is_504_within_the_timeout(world):
    a, b = world
    i64 = {"dtype": "int64", "shape": []}
    f32 = {"dtype": "float32", "shape": [4]}
    loop = {"id": "w", "op": "while_loop", "args": ["i", "x"], "outputs": ["i2", "x2"], "kwargs": {"max_iters": 10 ** 9},
            "cond": {"inputs": {"i": i64, "x": f32},
                     "nodes": [{"id": "c", "op": "lt", "args": ["i", 10 ** 8], "outputs": ["b"]}], "outputs": ["b"]},
            "body": {"inputs": {"i": i64, "x": f32},
                     "nodes": [{"id": "a", "op": "add", "args": ["i", 1], "outputs": ["j"]},
                               {"id": "s", "op": "dist.all_reduce", "args": ["x"], "kwargs": {"op": "avg"},
                                "outputs": ["y"]}],
                     "outputs": ["j", "y"]}}
    body = {"program": {"inputs": {"i": i64, "x": f32}, "nodes": [loop], "outputs": ["x2"]},
            "inputs": {"i": enc(np.array(0)), "x": enc(np.ones(4, np.float32))}, "ranks": 2}
    result = {}

    def call():
        t0 = time.time()
        result["r"] = post(a.url, body, timeout=120)
        result["t"] = time.time()
    th = threading.Thread(target=call)
    th.start()
    time.sleep(1.0)  # the loop's collectives are running on both servers
    b.proc.send_signal(signal.SIGKILL)
    killed = time.time()
    th.join(60)
    assert not th.is_alive()
    r = result["r"]
    assert r.status_code == 504, r.text
    err = r.json()["error"]
    assert err["code"] == "deadline_exceeded"
    assert "world" in err["message"] and "seq" in err["message"] and "1" in err["message"], err
    assert result["t"] - killed < TIMEOUT_S + 3
    # The flight recorder shows how far this server's rank got, and was
    # written to the state dir.
    fa = requests.get(a.url + "/v1/flight-recorder?rank=0").json()
    assert int(fa["pg_status"]["world"]["last_enqueued_collective"]) > 1
    import json
    import os
    with open(os.path.join(a.state_dir, "flight-recorder-rank0.json")) as f:
        saved = json.load(f)
    assert saved["version"] == "2.10" and saved["rank"] == 0 and saved["entries"]
    assert saved["pg_status"]["world"]["last_enqueued_collective"] == fa["pg_status"]["world"]["last_enqueued_collective"]
    # The survivor keeps serving, collectives of its own ranks included.
    r = post(a.url, {"program": {"nodes": [{"id": "s", "op": "dist.all_reduce", "args": ["x"], "outputs": ["s"]}],
                                 "outputs": ["s"]},
                     "ranks": [0], "inputs": {"x": enc(np.ones(2, np.float32))}})
    assert r.status_code == 200, r.text
    assert requests.get(a.url + "/healthz").status_code == 200
