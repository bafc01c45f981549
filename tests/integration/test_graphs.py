"""Graphs: capture once, replay many (API.md 4.3)."""

import json
import re

import numpy as np
import pytest
import requests

from tensord import TensordError


def f32(shape):
    return {"dtype": "float32", "shape": list(shape)}


def affine_program(n):
    return {"inputs": {"x": f32([n])},
            "nodes": [{"id": "m", "op": "mul", "args": ["x", 3.0], "outputs": ["y"]},
                      {"id": "a", "op": "add", "args": ["y", 1.0], "outputs": ["z"]},
                      {"id": "s", "op": "sum", "args": ["z"], "outputs": ["t"]}],
            "outputs": ["z", "t"]}


def cond_program(n):
    sub = lambda nodes: {"inputs": {"a": f32([n])}, "nodes": nodes, "outputs": ["r"]}
    return {"inputs": {"x": f32([n])},
            "nodes": [{"id": "sm", "op": "sum", "args": ["x"], "outputs": ["s"]},
                      {"id": "gt", "op": "gt", "args": ["s", 0.0], "outputs": ["p"]},
                      {"id": "c", "op": "cond", "args": ["p", "x"], "outputs": ["y"],
                       "then": sub([{"id": "m", "op": "mul", "args": ["a", 2.0], "outputs": ["r"]}]),
                       "else": sub([{"id": "g", "op": "neg", "args": ["a"], "outputs": ["r"]}])}],
            "outputs": ["y"]}


def tenant_memory(url):
    text = requests.get(url + "/metrics").text
    m = re.search(r'^tensord_tenant_memory_bytes\{[^}]*tenant="default"[^}]*\} (\S+)$', text, re.M)
    assert m, "no tensord_tenant_memory_bytes for default"
    return float(m.group(1))


def test_replay_many_times_with_new_inputs(client):
    g = client.capture(affine_program(64), {"x": ("float32", [64])})
    info = g.info()
    assert info["nodes"] == 3 and info["bytes"] > 0 and info["replays"] == 0 and info["is_capturing"] is False
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.standard_normal(64).astype(np.float32)
        out = g.replay(x=x)
        np.testing.assert_allclose(out["z"], 3 * x + 1, rtol=1e-6)
        np.testing.assert_allclose(out["t"], (3 * x + 1).sum(), rtol=1e-4, atol=1e-4)
    assert g.info()["replays"] == 50
    g.delete()


def test_json_transport_replay(json_client):
    g = json_client.capture(affine_program(4), {"x": ("float32", [4])})
    out = g.replay(x=np.arange(4, dtype=np.float32), return_=["t"])
    assert list(out) == ["t"]
    np.testing.assert_allclose(out["t"], 3 * 6 + 4)
    g.delete()


def test_captured_cond_takes_the_branch_of_the_data(client):
    g = client.capture(cond_program(5), {"x": ("float32", [5])})
    rng = np.random.default_rng(1)
    for i in range(30):
        x = rng.standard_normal(5).astype(np.float32) + (2 if i % 2 else -2)
        out = g.replay(x=x)
        np.testing.assert_allclose(out["y"], 2 * x if x.sum() > 0 else -x, rtol=1e-6)
    g.delete()


def test_two_graphs_sharing_a_pool_interleaved(client):
    g1 = client.capture(affine_program(32), {"x": ("float32", [32])})
    g2 = client.capture(cond_program(32), {"x": ("float32", [32])}, pool=g1)
    assert g2.info()["pool"] == g1.id
    rng = np.random.default_rng(2)
    for i in range(20):
        x = rng.standard_normal(32).astype(np.float32)
        a = g1.replay(x=x)
        b = g2.replay(x=x)
        np.testing.assert_allclose(a["z"], 3 * x + 1, rtol=1e-6)
        np.testing.assert_allclose(b["y"], 2 * x if x.sum() > 0 else -x, rtol=1e-6)
    g1.delete()
    # the pool lives on with g2
    x = np.ones(32, np.float32)
    np.testing.assert_allclose(g2.replay(x=x)["y"], 2 * x)
    g2.delete()


def test_two_graphs_sharing_a_pool_replayed_concurrently(server):
    """Replays of graphs that share a pool run one at a time (the runner holds
    the pool's run mutex), whatever the clients do: four clients at once,
    each output right for its own input."""
    import tensord as td
    from concurrent.futures import ThreadPoolExecutor
    c0 = td.Client(server.url, timeout=60)
    g1 = c0.capture(affine_program(256), {"x": ("float32", [256])})
    g2 = c0.capture(cond_program(256), {"x": ("float32", [256])}, pool=g1)

    def worker(seed):
        c = td.Client(server.url, timeout=60)
        h1, h2 = c.graph(g1.id), c.graph(g2.id)
        rng = np.random.default_rng(seed)
        for i in range(25):
            x = rng.standard_normal(256).astype(np.float32)
            if (i + seed) % 2:
                np.testing.assert_allclose(h1.replay(x=x)["z"], 3 * x + 1, rtol=1e-6)
            else:
                np.testing.assert_allclose(h2.replay(x=x)["y"], 2 * x if x.sum() > 0 else -x, rtol=1e-6)
        c.close()
        return True

    with ThreadPoolExecutor(4) as ex:
        assert all(ex.map(worker, range(4)))
    assert g1.info()["replays"] + g2.info()["replays"] == 100
    g2.delete()
    g1.delete()
    c0.close()


def test_large_json_bodies_replay_and_run(json_client, server):
    """A body over 64 KiB starts its request on the handler pool instead of
    the io thread (docs/api-notes.md): same answers either way."""
    n = 20000  # ~200 KiB of JSON numbers
    g = json_client.capture(affine_program(n), {"x": ("float32", [n])})
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    out = g.replay(x=x)
    np.testing.assert_allclose(out["z"], 3 * x + 1, rtol=1e-6)
    body = {"program": affine_program(n), "inputs": {"x": {"dtype": "float32", "shape": [n], "data": x.tolist()}}}
    r = requests.post(server.url + "/v1/run", json=body, timeout=60)
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()["outputs"]["z"]["data"], np.float32), 3 * x + 1, rtol=1e-6)
    with pytest.raises(TensordError) as e:
        g.replay(x=np.ones(n + 1, np.float32))
    assert e.value.status == 409
    g.delete()


def test_shape_or_dtype_change_is_409(client):
    g = client.capture(affine_program(8), {"x": ("float32", [8])})
    with pytest.raises(TensordError) as e:
        g.replay(x=np.ones(9, np.float32))
    assert e.value.status == 409 and e.value.code == "conflict"
    with pytest.raises(TensordError) as e:
        g.replay(x=np.ones(8, np.float64))
    assert e.value.status == 409
    np.testing.assert_allclose(g.replay(x=np.ones(8, np.float32))["z"], np.full(8, 4.0))
    g.delete()


def test_missing_input_is_400(client):
    g = client.capture(affine_program(8), {"x": ("float32", [8])})
    with pytest.raises(TensordError) as e:
        g.replay()
    assert e.value.status == 400
    with pytest.raises(TensordError) as e:
        g.replay(x=np.ones(8, np.float32), extra=np.ones(1, np.float32))
    assert e.value.status == 400
    g.delete()


def test_delete_frees_memory(client, server):
    before = tenant_memory(server.url)
    g = client.capture(affine_program(1 << 16), {"x": ("float32", [1 << 16])})
    during = tenant_memory(server.url)
    assert during - before >= 4 * (1 << 16), (before, during)
    g.replay(x=np.ones(1 << 16, np.float32))
    g.delete()
    after = tenant_memory(server.url)
    assert after <= before + 1024, (before, during, after)


def test_unknown_graph_is_404(client, server):
    for method, path in (("GET", "/v1/graphs/g-999999"), ("DELETE", "/v1/graphs/g-999999"),
                         ("POST", "/v1/graphs/g-999999/replay")):
        r = requests.request(method, server.url + path, data="{}" if method == "POST" else None)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"]["code"] == "not_found"
    g = client.capture(affine_program(2), {"x": ("float32", [2])})
    g.delete()
    r = requests.get(server.url + "/v1/graphs/" + g.id)
    assert r.status_code == 404


def test_is_capturing_while_a_long_capture_runs(server):
    """The id is reserved before the program compiles: GET shows the graph
    with is_capturing true until the capture ends (a 100000-node chain takes
    a few hundred ms to validate and plan); a replay meanwhile is 409, never
    a run of a half-built graph."""
    import threading

    first = requests.post(server.url + "/v1/graphs", data=json.dumps({"program": affine_program(2)}))
    assert first.status_code == 201
    requests.delete(server.url + "/v1/graphs/" + first.json()["id"])
    # Ids are sequential; integration tests run one at a time.
    gid = "g-%d" % (int(first.json()["id"][2:]) + 1)
    n = 100000
    nodes = [{"id": "n%d" % i, "op": "neg", "args": ["x" if i == 0 else "v%d" % (i - 1)], "outputs": ["v%d" % i]}
             for i in range(n)]
    body = json.dumps({"program": {"inputs": {"x": f32([16])}, "nodes": nodes, "outputs": ["v%d" % (n - 1)]},
                       "name": "long-capture"})
    done = {}
    t = threading.Thread(target=lambda: done.setdefault("r", requests.post(server.url + "/v1/graphs", data=body)))
    t.start()
    seen, conflicts = [], []
    with requests.Session() as s:
        while t.is_alive():
            r = s.get(server.url + "/v1/graphs/" + gid)
            if r.status_code == 200 and r.json()["is_capturing"]:
                seen.append(r.json())
                rr = s.post(server.url + "/v1/graphs/%s/replay" % gid, data=json.dumps({"inputs": {}}))
                if rr.status_code == 409:
                    conflicts.append(rr.json()["error"]["message"])
            else:
                assert r.status_code in (200, 404), r.text
    t.join()
    r = done["r"]
    assert r.status_code == 201, r.text
    assert r.json()["id"] == gid
    assert seen, "never saw the capture in progress"
    assert seen[0]["id"] == gid and seen[0]["name"] == "long-capture" and seen[0]["pool"] == gid
    assert seen[0]["replays"] == 0 and seen[0]["bytes"] == 0
    assert seen[-1]["nodes"] in (0, n)
    assert all("capturing" in m for m in conflicts), conflicts
    info = requests.get(server.url + "/v1/graphs/" + gid).json()
    assert info["is_capturing"] is False and info["nodes"] == n and info["bytes"] > 0
    assert requests.delete(server.url + "/v1/graphs/" + gid).status_code == 204
    # A capture that fails (here while compiling) frees the id it reserved.
    prog = cond_program(4)
    prog["nodes"][2]["else"]["inputs"] = {"a": f32([3])}
    bad = requests.post(server.url + "/v1/graphs", data=json.dumps({"program": prog}))
    assert bad.status_code == 400
    assert requests.get(server.url + "/v1/graphs/g-%d" % (int(gid[2:]) + 1)).status_code == 404


def test_capture_rejects_bad_programs(server):
    prog = cond_program(4)
    prog["nodes"][2]["else"]["inputs"] = {"a": f32([3])}
    r = requests.post(server.url + "/v1/graphs", data=json.dumps({"program": prog, "inputs": {"x": f32([4])}}))
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_program"
    r = requests.post(server.url + "/v1/graphs", data=json.dumps({"program": affine_program(4),
                                                                  "inputs": {"x": {"dtype": "nope", "shape": [4]}}}))
    assert r.status_code == 400
    r = requests.post(server.url + "/v1/graphs", data=json.dumps({"program": affine_program(4), "pool": "g-0"}))
    assert r.status_code == 404
    r = requests.post(server.url + "/v1/graphs", data="{")
    assert r.status_code == 400


def test_dot_dump(client):
    g = client.capture(cond_program(3), {"x": ("float32", [3])})
    dot = g.dot()
    assert dot.startswith("digraph") and "cond" in dot and "cluster_" in dot and "->" in dot
    r = requests.get(client.url + "/v1/graphs/%s?format=dot" % g.id)
    assert r.headers["Content-Type"].startswith("text/vnd.graphviz")
    g.delete()


def test_builder_capture(client):
    p = client.program()
    x = p.input("x", "float32", [4])
    y = p.add(x, 1.0)
    p.output(y)
    g = client.capture(p, {"x": ("float32", [4])})
    out = g.replay(x=np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(list(out.values())[0], np.arange(4) + 1)
    g.delete()


def metric_value(url, name, labels):
    text = requests.get(url + "/metrics").text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all('%s="%s"' % kv in line for kv in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_graph_metrics(client, server):
    before_caps = metric_value(server.url, "tensord_graph_captures_total", {"tenant": "default"})
    before_ok = metric_value(server.url, "tensord_graph_replays_total", {"tenant": "default", "state": "succeeded"})
    before_live = metric_value(server.url, "tensord_graphs", {"tenant": "default"})
    g = client.capture(affine_program(8), {"x": ("float32", [8])})
    for _ in range(3):
        g.replay(x=np.ones(8, np.float32))
    assert metric_value(server.url, "tensord_graph_captures_total", {"tenant": "default"}) == before_caps + 1
    assert metric_value(server.url, "tensord_graph_replays_total",
                        {"tenant": "default", "state": "succeeded"}) == before_ok + 3
    assert metric_value(server.url, "tensord_graphs", {"tenant": "default"}) == before_live + 1
    g.delete()
    assert metric_value(server.url, "tensord_graphs", {"tenant": "default"}) == before_live


def test_a_replay_reports_the_sha256_of_the_program_it_captured(base_url):
    prog = affine_program(4)
    x = {"dtype": "float32", "shape": [4], "data": [1, 2, 3, 4]}
    r = requests.post(base_url + "/v1/run", json={"program": prog, "inputs": {"x": x}}, timeout=30)
    assert r.status_code == 200, r.text
    sha = r.json()["job"]["program_sha256"]
    r = requests.post(base_url + "/v1/graphs", json={"program": prog, "inputs": {"x": f32([4])}}, timeout=30)
    assert r.status_code in (200, 201), r.text
    gid = r.json()["id"]
    try:
        r = requests.post(base_url + "/v1/graphs/%s/replay" % gid, json={"inputs": {"x": x}}, timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["job"]["program_sha256"] == sha and re.fullmatch(r"[0-9a-f]{64}", sha)
        other = affine_program(4)
        other["nodes"][0]["args"][1] = 4.0
        r = requests.post(base_url + "/v1/graphs", json={"program": other, "inputs": {"x": f32([4])}}, timeout=30)
        assert r.status_code in (200, 201), r.text
        r2 = requests.post(base_url + "/v1/graphs/%s/replay" % r.json()["id"], json={"inputs": {"x": x}}, timeout=30)
        assert r2.status_code == 200 and r2.json()["job"]["program_sha256"] not in ("", sha), r2.text
        requests.delete(base_url + "/v1/graphs/" + r.json()["id"], timeout=30)
    finally:
        requests.delete(base_url + "/v1/graphs/" + gid, timeout=30)
