"""An optimizer step commits with its program or not at all (API.md 4, 6).

The step writes its new parameters and state into fresh buffers and the job
swaps them into the store only when the whole program succeeds. So: a
program that fails, is cancelled or runs past its deadline after the step
leaves parameters, state and the tenant's memory as they were; readers
running beside a stream of steps see one step's values or the next's, never
a mix; and a step needs room in the quota for its new values beside the old
ones (it fails, committing nothing, when they do not fit).
"""

import hashlib
import os
import threading
import time

import numpy as np
import pytest
import requests

import tensord
from conftest import Server, _stop_and_check
from test_graphs import metric_value
from test_jobs import wait_final
from test_tenancy import write_config


def memory(url, tenant="default"):
    return metric_value(url, "tensord_tenant_memory_bytes", {"tenant": tenant})


def stored_values(client, prefix):
    return {t["name"]: np.asarray(client.get(t["name"])).copy() for t in client.list(prefix)}


def assert_same(after, before):
    assert sorted(after) == sorted(before)
    for k in before:
        assert np.array_equal(after[k], before[k]), k


def adam_node(uniq, node_id="step", grad="g"):
    return {"id": node_id, "op": "optim.adam", "args": [["$stored/%s/w" % uniq], [grad]],
            "kwargs": {"state": uniq + "/s", "lr": 0.1}, "outputs": []}


def first_step(client, uniq, n):
    """Stores w, takes one step (state exists from then on); returns the grad."""
    client.put(uniq + "/w", np.linspace(-1, 1, n, dtype=np.float32))
    g = np.full(n, 0.5, np.float32)
    client.run({"nodes": [adam_node(uniq)], "outputs": []}, inputs={"g": g})
    return g


def test_failure_after_the_step_leaves_values_and_memory(client, server, uniq):
    n = 1 << 16
    g = first_step(client, uniq, n)
    # The step runs first (listed first, no dependencies); then a second
    # step fails in its kernel: its parameter's state has another shape,
    # which only the kernel sees.
    client.put(uniq + "/w2", np.ones(4, np.float32))
    client.put("%s/s/%s/w2/exp_avg" % (uniq, uniq), np.zeros(5, np.float32))
    before, mem = stored_values(client, uniq + "/"), memory(server.url)
    second = {"id": "boom", "op": "optim.adam", "args": [["$stored/%s/w2" % uniq], ["g2"]],
              "kwargs": {"state": uniq + "/s"}, "outputs": []}
    with pytest.raises(tensord.TensordError) as e:
        client.run({"nodes": [adam_node(uniq), second], "outputs": []}, inputs={"g": g, "g2": np.ones(4, np.float32)})
    assert e.value.node == "boom", e.value
    assert e.value.status == 422 and e.value.code == "invalid_argument", e.value
    assert_same(stored_values(client, uniq + "/"), before)
    assert memory(server.url) == mem
    # The parameters still step as before.
    client.run({"nodes": [adam_node(uniq)], "outputs": []}, inputs={"g": g})
    assert not np.array_equal(np.asarray(client.get(uniq + "/w")), before["%s/w" % uniq])
    assert memory(server.url) == mem


def test_cancelled_or_expired_after_the_step_commits_nothing(client, server, uniq):
    n = 1 << 16
    g = first_step(client, uniq, n)
    before, mem = stored_values(client, uniq + "/"), memory(server.url)
    chain = [{"id": "r", "op": "rand", "args": [[300, 300]], "kwargs": {"dtype": "float64", "seed": 1},
              "outputs": ["x0"]}]
    for i in range(3000):  # seconds of matmuls after the step
        chain.append({"id": "m%d" % i, "op": "matmul", "args": ["x%d" % i, "x0"], "outputs": ["x%d" % (i + 1)]})
    prog = {"nodes": [adam_node(uniq, grad="$stored/%s/g" % uniq)] + chain, "outputs": []}
    client.put(uniq + "/g", g)
    before["%s/g" % uniq], mem = g, memory(server.url)
    job = requests.post(server.url + "/v1/jobs", json={"program": prog}, timeout=30).json()["id"]
    deadline = time.time() + 30
    while requests.get(server.url + "/v1/jobs/" + job, timeout=10).json()["state"] == "queued":
        assert time.time() < deadline
        time.sleep(0.01)
    time.sleep(0.3)  # past the step, inside the chain
    requests.delete(server.url + "/v1/jobs/" + job, timeout=10)
    assert wait_final(server.url, job)["state"] == "cancelled"
    assert_same(stored_values(client, uniq + "/"), before)
    assert memory(server.url) == mem
    # Past its deadline mid-chain: 504, nothing committed either.
    with pytest.raises(tensord.TensordError) as e:
        client.run(prog, deadline_ms=300)
    assert e.value.code == "deadline_exceeded", e.value
    assert_same(stored_values(client, uniq + "/"), before)
    assert memory(server.url) == mem


def test_readers_see_one_step_or_the_next(client, server, uniq):
    """SGD with lr 1 and a gradient of ones lowers every element by exactly 1
    per step: any value read (a GET, or a program reading the stored
    tensor) is constant across the tensor and one of the step counts."""
    n, steps = 1 << 20, 20
    client.put(uniq + "/w", np.full(n, 1000, np.float32))
    client.put(uniq + "/g", np.ones(n, np.float32))
    prog = {"nodes": [{"id": "s", "op": "optim.sgd", "args": [["$stored/%s/w" % uniq], ["$stored/%s/g" % uniq]],
                       "kwargs": {"lr": 1.0}, "outputs": []}], "outputs": []}
    spread = {"nodes": [{"id": "hi", "op": "amax", "args": ["$stored/%s/w" % uniq], "outputs": ["hi"]},
                        {"id": "lo", "op": "amin", "args": ["$stored/%s/w" % uniq], "outputs": ["lo"]}],
              "outputs": ["hi", "lo"]}
    seen, problems = [], []
    stop = threading.Event()

    def reader(kind):
        c = tensord.Client(server.url)
        while not stop.is_set():
            if kind == "get":
                w = np.asarray(c.get(uniq + "/w"))
                lo, hi = float(w.min()), float(w.max())
            else:
                out = c.run(spread)
                lo, hi = float(np.asarray(out["lo"])), float(np.asarray(out["hi"]))
            if lo != hi or not (1000 - steps <= lo <= 1000) or lo != int(lo):
                problems.append((kind, lo, hi))
            seen.append(lo)

    threads = [threading.Thread(target=reader, args=(k,)) for k in ("get", "program")]
    for t in threads:
        t.start()
    try:
        for _ in range(steps):
            # Each step after a read or two, so the readers see the values
            # between steps too, not only the first or the last.
            want, deadline = len(seen) + 2, time.time() + 30
            while len(seen) < want and time.time() < deadline and not problems:
                time.sleep(0.001)
            client.run(prog)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not problems, problems[:5]
    assert len(set(seen)) >= steps // 2, sorted(set(seen))
    w = np.asarray(client.get(uniq + "/w"))
    assert w.min() == w.max() == 1000 - steps


QUOTA = 80 * 1024
N = 4096  # float32: 16 KiB a tensor


@pytest.fixture(scope="module")
def quota_server():
    token = "optim-quota-token"
    path = write_config({"partitions": [{"name": "p", "share": 1.0, "workqueue_limit": 1}],
                         "tenants": [{"name": "q", "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
                                      "partition": "p", "memory_bytes": QUOTA}]})
    srv = Server(["--config", path], name="optim-quota")
    srv.token = token
    yield srv
    _stop_and_check(srv)
    os.unlink(path)


def test_a_step_needs_room_for_its_new_values(quota_server):
    """w (16 KiB) and Adam's state (32 KiB and a step scalar) fit the 80 KiB
    quota; a step needs new w and state (48 KiB more) beside the old until it
    commits: the first step (old w, new w, new state: 64 KiB) fits, the
    second (96 KiB) is 429 and changes nothing."""
    c = tensord.Client(quota_server.url, token=quota_server.token)
    url = quota_server.url
    c.put("w", np.linspace(-1, 1, N, dtype=np.float32))
    prog = {"nodes": [{"id": "step", "op": "optim.adam", "args": [["$stored/w"], ["g"]], "kwargs": {"state": "s"},
                       "outputs": []}], "outputs": []}
    g = np.full(N, 0.25, np.float32)  # a request input: not charged
    c.run(prog, inputs={"g": g})
    before = stored_values(c, "")
    assert set(before) == {"w", "s/w/step", "s/w/exp_avg", "s/w/exp_avg_sq"}
    mem = memory(url, "q")
    assert mem == 3 * N * 4 + 4
    with pytest.raises(tensord.TensordError) as e:
        c.run(prog, inputs={"g": g})
    assert e.value.status == 429 and e.value.code == "quota_exceeded", e.value
    assert_same(stored_values(c, ""), before)
    assert memory(url, "q") == mem
