"""SPMD requests and collectives on local ranks (API.md 8) against numpy.

Servers with --ranks 2, 3 and 4 (CPU rank workers over Gloo on loopback):
every collective and reduction, uneven shards, subgroups, a collective
inside a while_loop, a data-parallel AdamW step on stored params, the
flight recorder (seq equal across ranks and increasing), the metrics, and
malformed requests answered before any rank enters a collective.
"""

import time

import numpy as np
import pytest
import requests

from conftest import Server, _stop_and_check

torch = pytest.importorskip("torch")

RANKS = (2, 3, 4)
DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64}


@pytest.fixture(scope="module")
def servers():
    srvs = {r: Server(["--ranks", str(r), "--collective-timeout", "10"], name="ranks%d" % r) for r in RANKS}
    yield srvs
    for s in srvs.values():
        _stop_and_check(s)


def enc(a):
    a = np.asarray(a)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": a.reshape(-1).tolist()}


def dec(t):
    return np.array(t["data"], dtype=DTYPES.get(t["dtype"], np.float32)).reshape(t["shape"])


def node(nid, opname, args, out, **kwargs):
    n = {"id": nid, "op": opname, "args": args, "outputs": [out] if out else []}
    if kwargs:
        n["kwargs"] = kwargs
    return n


def run(url, nodes, outputs, inputs, ranks, **extra):
    body = {"program": {"nodes": nodes, "outputs": outputs}, "inputs": inputs, "ranks": ranks}
    body.update(extra)
    return requests.post(url + "/v1/run", json=body, timeout=60)


def ok(r):
    assert r.status_code == 200, r.text
    return r.json()["outputs"]


def per_rank(out):
    assert "per_rank" in out, out
    return [dec(t) for t in out["per_rank"]]


def replicated(out):
    assert out.get("replicated") is True, out
    return dec(out)


def test_info_lists_the_ranks(servers):
    for r, s in servers.items():
        assert requests.get(s.url + "/v1/info").json()["ranks"] == {"local": r, "world": r, "offset": 0}


@pytest.mark.parametrize("R", RANKS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_all_reduce_every_op(servers, R, dtype):
    rng = np.random.default_rng(R)
    xs = [rng.integers(-5, 6, size=(3, 4)).astype(dtype) for _ in range(R)]
    ops = ["sum", "max", "min", "prod"] + (["avg"] if dtype.startswith("float") else [])
    nodes = [node("n_" + op, "dist.all_reduce", ["x"], "r_" + op, op=op) for op in ops]
    out = ok(run(servers[R].url, nodes, ["r_" + op for op in ops], {"x": {"per_rank": [enc(x) for x in xs]}}, R))
    stack = np.stack(xs)
    want = {"sum": stack.sum(0), "max": stack.max(0), "min": stack.min(0), "prod": stack.prod(0),
            "avg": stack.mean(0)}
    for op in ops:
        got = replicated(out["r_" + op])
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, want[op].astype(dtype), rtol=1e-6, err_msg=op)


@pytest.mark.parametrize("R", RANKS)
@pytest.mark.parametrize("dim", [0, 1])
def test_uneven_shards_all_gather_back_to_the_whole(servers, R, dim):
    whole = np.arange(7 * 5, dtype=np.float32).reshape(7, 5) if dim == 0 else \
        np.arange(5 * 7, dtype=np.float32).reshape(5, 7)
    nodes = [node("g", "dist.all_gather", ["x"], "g", dim=dim), node("m", "mul", ["x", 2.0], "m")]
    out = ok(run(servers[R].url, nodes, ["g", "m"], {"x": {"shard": enc(whole), "dim": dim}}, R))
    np.testing.assert_array_equal(replicated(out["g"]), whole)
    parts = np.array_split(whole, R, axis=dim)  # torch.tensor_split's split: first ranks one longer
    for got, want in zip(per_rank(out["m"]), parts):
        np.testing.assert_array_equal(got, want * 2)


@pytest.mark.parametrize("R", RANKS)
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("op", ["sum", "avg", "max", "min", "prod"])
def test_reduce_scatter(servers, R, dim, op):
    rng = np.random.default_rng(7)
    shape = (R * 2, 3) if dim == 0 else (3, R * 2)
    xs = [rng.integers(1, 4, size=shape).astype(np.float64) for _ in range(R)]
    out = ok(run(servers[R].url, [node("rs", "dist.reduce_scatter", ["x"], "y", op=op, dim=dim)], ["y"],
                 {"x": {"per_rank": [enc(x) for x in xs]}}, R))
    stack = np.stack(xs)
    full = {"sum": stack.sum(0), "avg": stack.mean(0), "max": stack.max(0), "min": stack.min(0),
            "prod": stack.prod(0)}[op]
    for got, want in zip(per_rank(out["y"]), np.split(full, R, axis=dim)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("R", RANKS)
def test_broadcast_from_every_rank_and_all_to_all(servers, R):
    xs = [np.full((R, 2), r + 1, np.int64) * np.arange(1, R + 1)[:, None] for r in range(R)]
    nodes = [node("b%d" % s, "dist.broadcast", ["x"], "b%d" % s, src=s) for s in range(R)]
    nodes.append(node("a2a", "dist.all_to_all", ["x"], "t"))
    outs = ["b%d" % s for s in range(R)] + ["t"]
    out = ok(run(servers[R].url, nodes, outs, {"x": {"per_rank": [enc(x) for x in xs]}}, R))
    for s in range(R):
        np.testing.assert_array_equal(replicated(out["b%d" % s]), xs[s])
    for r, got in enumerate(per_rank(out["t"])):
        np.testing.assert_array_equal(got, np.concatenate([xs[src][r:r + 1] for src in range(R)]))


def test_a_subgroup_in_its_order_and_a_barrier(servers):
    s = servers[4]
    xs = [np.array([10.0, 1.0]), np.array([30.0, 3.0])]
    nodes = [node("bar", "dist.barrier", [], None), node("g", "dist.all_gather", ["x"], "g"),
             node("b", "dist.broadcast", ["x"], "b", src=0)]
    out = ok(run(s.url, nodes, ["g", "b"], {"x": {"per_rank": [enc(x) for x in xs]}}, [3, 1]))
    np.testing.assert_array_equal(replicated(out["g"]), np.concatenate(xs))
    np.testing.assert_array_equal(replicated(out["b"]), xs[0])  # src 0: the group's first rank, 3
    fr = requests.get(s.url + "/v1/flight-recorder?rank=3").json()
    assert "ranks:3,1" in fr["pg_config"]
    assert fr["pg_config"]["ranks:3,1"]["ranks"] == "[3, 1]"
    assert not [e for e in requests.get(s.url + "/v1/flight-recorder?rank=0").json()["entries"]
                if e["process_group"][0] == "ranks:3,1"]


def test_a_collective_inside_a_while_loop(servers):
    R = 3
    s = servers[R]
    i64 = {"dtype": "int64", "shape": []}
    f = {"dtype": "float32"}
    loop = {"id": "w", "op": "while_loop", "args": ["i", "x"], "outputs": ["i2", "x2"],
            "cond": {"inputs": {"i": i64, "x": f}, "nodes": [node("c", "lt", ["i", 3], "b")], "outputs": ["b"]},
            "body": {"inputs": {"i": i64, "x": f},
                     "nodes": [node("a", "add", ["i", 1], "j"), node("s", "dist.all_reduce", ["x"], "y"),
                               node("h", "mul", ["y", 0.5], "z")],
                     "outputs": ["j", "z"]}}
    xs = [np.array([1.0, 2.0], np.float32) * (r + 1) for r in range(R)]
    body = {"program": {"inputs": {"i": i64, "x": f}, "nodes": [loop], "outputs": ["x2"]},
            "inputs": {"i": enc(np.array(0)), "x": {"per_rank": [enc(x) for x in xs]}}, "ranks": R}
    before = requests.get(s.url + "/v1/flight-recorder").json()["ranks"]
    r = requests.post(s.url + "/v1/run", json=body, timeout=60)
    got_ref = sum(xs) * 0.5  # trip 1: every rank holds the same value from here on
    for _ in range(2):
        got_ref = got_ref * R * 0.5
    for got in per_rank(ok(r)["x2"]):  # a loop's results come back per rank (conservative)
        np.testing.assert_allclose(got, got_ref, rtol=1e-6)
    after = requests.get(s.url + "/v1/flight-recorder").json()["ranks"]
    for rank in map(str, range(R)):
        new = after[rank]["entries"][len(before[rank]["entries"]):]
        assert [e["profiling_name"] for e in new] == ["gloo:all_reduce"] * 3
        assert all(e["state"] == "completed" for e in new)


def test_seq_is_equal_across_ranks_and_increasing(servers):
    R = 4
    s = servers[R]
    before = {k: len(v["entries"]) for k, v in requests.get(s.url + "/v1/flight-recorder").json()["ranks"].items()}
    for _ in range(2):
        ok(run(s.url, [node("a", "dist.all_reduce", ["x"], "y"), node("g", "dist.all_gather", ["y"], "z")], ["z"],
               {"x": enc(np.ones(3, np.float32))}, R))
    dumps = requests.get(s.url + "/v1/flight-recorder").json()["ranks"]
    assert sorted(dumps) == [str(r) for r in range(R)]
    seqs = []
    for r in range(R):
        d = dumps[str(r)]
        assert d["version"] == "2.10" and d["rank"] == r
        world = [e for e in d["entries"][before[str(r)]:] if e["process_group"][0] == "world"]
        ids = [e["collective_seq_id"] for e in world]
        assert len(ids) == 4 and ids == list(range(ids[0], ids[0] + 4)) and ids[0] >= 1
        for e in world:
            assert e["state"] == "completed" and e["retired"] is True
            assert e["input_dtypes"] == ["Float"] and e["timeout_ms"] == 10000
            assert e["time_discovered_completed_ns"] >= e["time_discovered_started_ns"] >= e["time_created_ns"]
        seqs.append([(e["collective_seq_id"], e["profiling_name"]) for e in world])
        assert d["pg_status"]["world"]["last_completed_collective"] == str(ids[-1])
    assert all(sq == seqs[0] for sq in seqs)


def test_metrics_count_collectives(servers):
    s = servers[2]

    def metric(name, op):
        for line in requests.get(s.url + "/metrics").text.splitlines():
            if line.startswith(name + "{") and 'group="world"' in line and 'op="%s"' % op in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    ops0, bytes0 = metric("tensord_collective_ops_total", "broadcast"), \
        metric("tensord_collective_bytes_total", "broadcast")
    ok(run(s.url, [node("b", "dist.broadcast", ["x"], "y", src=1)], ["y"], {"x": enc(np.zeros(10, np.float64))}, 2))
    assert metric("tensord_collective_ops_total", "broadcast") == ops0 + 1
    assert metric("tensord_collective_bytes_total", "broadcast") == bytes0 + 2 * 80


def test_data_parallel_adamw_step_matches_torch_on_the_mean_gradient(servers):
    R = 2
    s = servers[R]
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    grads = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(R)]
    assert requests.put(s.url + "/v1/tensors/dp/w", json=enc(w0)).status_code in (200, 201)
    nodes = [node("ar", "dist.all_reduce", ["g"], "gm", op="avg"),
             {"id": "step", "op": "optim.adamw", "args": [["$stored/dp/w"], ["gm"]],
              "kwargs": {"state": "dp/opt", "lr": 0.01}, "outputs": []}]
    ok(run(s.url, nodes, [], {"g": {"per_rank": [enc(g) for g in grads]}}, R))
    got = dec(requests.get(s.url + "/v1/tensors/dp/w").json())
    p = torch.nn.Parameter(torch.tensor(w0))
    opt = torch.optim.AdamW([p], lr=0.01)
    p.grad = torch.tensor(np.mean(grads, axis=0))
    opt.step()
    np.testing.assert_allclose(got, p.detach().numpy(), rtol=2e-6, atol=1e-7)
    # The optimizer straight on per-rank gradients would commit rank 0's view: refused.
    r = run(s.url, nodes[1:], [], {"gm": {"per_rank": [enc(g) for g in grads]}}, R)
    assert r.status_code == 422 and r.json()["error"]["node"] == "step", r.text
    np.testing.assert_array_equal(dec(requests.get(s.url + "/v1/tensors/dp/w").json()), got)


def test_ranks_that_disagree_are_422_before_any_collective(servers):
    s = servers[3]
    before = requests.get(s.url + "/v1/flight-recorder").json()["ranks"]
    t0 = time.time()
    r = run(s.url, [node("a", "dist.all_reduce", ["x"], "y")], ["y"],
            {"x": {"shard": enc(np.arange(7, dtype=np.float32)), "dim": 0}}, 3)
    assert time.time() - t0 < 5
    assert r.status_code == 422 and r.json()["error"]["code"] == "shape_mismatch" and r.json()["error"]["node"] == "a"
    r = run(s.url, [node("a", "dist.broadcast", ["x"], "y")], ["y"],
            {"x": {"per_rank": [enc(np.ones(2, np.float32)), enc(np.ones(2, np.float64)),
                                enc(np.ones(2, np.float32))]}}, 3)
    assert r.status_code == 422 and r.json()["error"]["code"] == "dtype_mismatch", r.text
    after = requests.get(s.url + "/v1/flight-recorder").json()["ranks"]
    assert [len(after[k]["entries"]) for k in after] == [len(before[k]["entries"]) for k in before]


def test_a_rank_that_fails_stops_the_others_and_the_group_recovers(servers):
    s = servers[2]
    # Rank 1's matrix is NaN: its eigh fails while rank 0 waits in the all_reduce after it.
    bad = {"dtype": "float32", "shape": [1, 2, 2], "data": ["nan"] * 4}
    good = np.eye(2, dtype=np.float32)[None]
    nodes = [node("e", "linalg.eigvalsh", ["a"], "w"), node("s", "dist.all_reduce", ["w"], "t")]
    t0 = time.time()
    r = run(s.url, nodes, ["t"], {"a": {"per_rank": [enc(good), bad]}}, 2)
    assert r.status_code == 422 and r.json()["error"]["code"] == "numerical_error", r.text
    assert time.time() - t0 < 8  # well within the 10 s collective timeout
    out = ok(run(s.url, nodes, ["t"], {"a": {"per_rank": [enc(good), enc(good)]}}, 2))
    np.testing.assert_allclose(replicated(out["t"]), [[2.0, 2.0]])


@pytest.mark.parametrize("body,status", [
    ({"ranks": 0}, 400),
    ({"ranks": "all"}, 400),
    ({"ranks": []}, 400),
    ({"ranks": 3}, 400),             # the world has 2
    ({"ranks": [0, 2]}, 400),        # rank 2 is outside it
    ({"ranks": [1, 1]}, 400),
    ({"ranks": 2, "inputs": {"x": {"per_rank": [{"dtype": "float32", "shape": [1], "data": [1]}]}}}, 400),
    ({"ranks": 2, "inputs": {"x": {"shard": {"dtype": "float32", "shape": [2], "data": [1, 2]}, "dim": 3}}}, 400),
    ({"ranks": 2, "inputs": {"x": {"shard": {"dtype": "float32", "shape": [], "data": 1}}}}, 400),
    ({"ranks": 2, "inputs": {"x": {"per_rank": [], "shard": {"dtype": "float32", "shape": [2], "data": [1, 2]}}}}, 400),
    ({"ranks": 2, "inputs": {"x": {"per_rank": [{"dtype": "float32", "shape": [1], "data": [1]}] * 2, "dim": 0}}}, 400),
    ({"ranks": 2, "inputs": {"x": {"per_rank": [{"dtype": "float32", "shape": [1], "data": [1]}] * 2, "x": 1}}}, 400),
    ({"inputs": {"x": {"per_rank": [{"dtype": "float32", "shape": [1], "data": [1]}] * 2}}}, 400),  # no ranks
])
def test_malformed_spmd_requests(servers, body, status):
    req = {"program": {"nodes": [node("a", "dist.all_reduce", ["x"], "y")], "outputs": ["y"]},
           "inputs": {"x": {"dtype": "float32", "shape": [1], "data": [1]}}}
    req.update(body)
    r = requests.post(servers[2].url + "/v1/run", json=req, timeout=30)
    assert r.status_code == status, r.text
    assert r.json()["error"]["message"]


@pytest.mark.parametrize("nodes,code", [
    ([node("b", "dist.broadcast", ["x"], "y", src=2)], "invalid_argument"),
    ([node("a", "dist.all_reduce", ["x"], "y", op="mean")], "invalid_argument"),
    ([node("h", "to", ["x"], "h", dtype="float16"), node("a", "dist.all_reduce", ["h"], "y")], "invalid_argument"),
    ([node("r", "dist.reduce_scatter", ["x"], "y")], "shape_mismatch"),  # 3 rows over 2 ranks
    ([node("a", "dist.all_to_all", ["x"], "y", dim=5)], "invalid_argument"),
])
def test_invalid_collectives_are_422_naming_the_node(servers, nodes, code):
    r = run(servers[2].url, nodes, ["y"], {"x": enc(np.ones((3, 2), np.float32))}, 2)
    assert r.status_code == 422 and r.json()["error"]["code"] == code, r.text
    assert r.json()["error"]["node"] == nodes[-1]["id"]


def test_storing_a_per_rank_value_is_refused(servers):
    r = run(servers[2].url, [node("m", "mul", ["x", 2.0], "y")], ["y"],
            {"x": {"per_rank": [enc(np.ones(2, np.float32)), enc(np.zeros(2, np.float32))]}}, 2,
            store={"y": "spmd/y"})
    assert r.status_code == 422 and "differs across ranks" in r.json()["error"]["message"]
    assert requests.get(servers[2].url + "/v1/tensors/spmd/y").status_code == 404


def test_safetensors_reply_names_each_ranks_part(servers):
    r = run(servers[2].url, [node("m", "mul", ["x", 2.0], "y"), node("s", "dist.all_reduce", ["x"], "z")],
            ["y", "z"], {"x": {"per_rank": [enc(np.ones(2, np.float32)), enc(np.full(2, 3, np.float32))]}}, 2)
    ok(r)
    r = requests.post(servers[2].url + "/v1/run", headers={"Accept": "application/vnd.safetensors"}, json={
        "program": {"nodes": [node("m", "mul", ["x", 2.0], "y"), node("s", "dist.all_reduce", ["x"], "z")],
                    "outputs": ["y", "z"]},
        "inputs": {"x": {"per_rank": [enc(np.ones(2, np.float32)), enc(np.full(2, 3, np.float32))]}}, "ranks": 2})
    assert r.status_code == 200, r.text
    import json
    import struct
    n = struct.unpack("<Q", r.content[:8])[0]
    header = json.loads(r.content[8:8 + n])
    assert {"y/0", "y/1", "z"} <= set(header)
    resp = json.loads(header["__metadata__"]["response"])
    assert "per_rank" in resp["outputs"]["y"] and resp["outputs"]["z"]["shape"] == [2]


def test_flight_recorder_route(servers):
    s = servers[2]
    assert requests.get(s.url + "/v1/flight-recorder?rank=2").status_code == 404
    assert requests.get(s.url + "/v1/flight-recorder?rank=x").status_code == 400
    assert requests.get(s.url + "/v1/flight-recorder?rank=-1").status_code == 400
    d = requests.get(s.url + "/v1/flight-recorder?rank=1").json()
    assert d["rank"] == 1 and d["version"] == "2.10" and "entries" in d and "pg_status" in d
