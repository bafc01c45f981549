"""A world of two servers whose rendezvous store (a real redis-server) goes
away and comes back: a world already formed keeps serving; one that must
form while redis is gone answers 503 unavailable naming the store, with
Retry-After, at once, with none of Gloo's source paths in the message; once
redis is back (empty: no persistence) the servers write their addresses
again and the world forms without restarting them."""
import shutil
import socket
import subprocess
import time

import pytest
import requests

from conftest import Server, _stop_and_check

TIMEOUT_S = 5
PROG = {"nodes": [{"id": "s", "op": "dist.all_reduce", "args": ["x"], "outputs": ["s"]}], "outputs": ["s"]}
BODY = {"program": PROG, "ranks": 2, "inputs": {"x": {"dtype": "float32", "shape": [2], "data": [1, 2]}}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self):
        self.exe = shutil.which("redis-server")
        if self.exe is None:
            print("redis-server is not installed (scripts/install-deps.sh installs it): skipping")
            pytest.skip("redis-server is not installed")
        self.port = free_port()
        self.url = "redis://127.0.0.1:%d" % self.port
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([self.exe, "--port", str(self.port), "--save", "", "--appendonly", "no",
                                      "--bind", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(250):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise AssertionError("redis-server did not start")

    def kill(self):
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def world():
    redis = Redis()
    servers = [Server(["--ranks", "1", "--world-size", "2", "--rank-offset", str(r), "--rendezvous", redis.url,
                       "--collective-timeout", str(TIMEOUT_S)], name="store-%d" % r) for r in range(2)]
    yield redis, servers
    for s in servers:
        _stop_and_check(s)
    if redis.proc.poll() is None:
        redis.kill()


def all_reduce(a, timeout=60):
    t0 = time.monotonic()
    r = requests.post(a.url + "/v1/run", json=BODY, timeout=timeout)
    return r, time.monotonic() - t0


def assert_store_unavailable(r, redis):
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] == "unavailable", err
    assert "rendezvous store " + redis.url in err["message"] or "has not joined" in err["message"], err
    assert "gloo/" not in err["message"] and ".cc:" not in err["message"], "no internal paths: " + err["message"]
    assert int(r.headers["Retry-After"]) >= 1


def test_a_formed_world_keeps_serving_without_its_store(world):
    redis, (a, _) = world
    r, _ = all_reduce(a)
    assert r.status_code == 200, r.text
    redis.kill()
    for _ in range(3):
        r, took = all_reduce(a)
        assert r.status_code == 200, r.text
        assert r.json()["outputs"]["s"]["data"] == [2.0, 4.0]
    print("a formed world without redis: all_reduce in %.3f s" % took)


def test_a_world_that_must_form_without_its_store_fails_by_name_and_forms_once_it_is_back(world):
    redis, (a, _) = world
    redis.kill()
    r, took = all_reduce(a)
    assert_store_unavailable(r, redis)
    assert "rendezvous store " + redis.url in r.json()["error"]["message"], r.text
    assert took < TIMEOUT_S, "the store's loss is reported at once, not at a timeout (%.2f s)" % took
    redis.start()  # empty: the servers' addresses are gone with the old one
    t0 = time.monotonic()
    while True:
        r, _ = all_reduce(a)
        if r.status_code == 200:
            break
        assert_store_unavailable(r, redis)
        assert time.monotonic() - t0 < 30, "the world did not form again after redis came back: " + r.text
        time.sleep(0.2)
    assert r.json()["outputs"]["s"]["data"] == [2.0, 4.0]
    print("redis back: the world formed again in %.2f s (redis lost while forming: 503 in %.3f s)"
          % (time.monotonic() - t0, took))
