"""Collectives inside captured graphs (API.md 4.3 and 8).

Servers with --ranks 2, 3 and 4: a graph captured with "ranks" holds a
replay plan per rank; each replay runs them on the rank workers, answers as
an SPMD /v1/run of the same program does (checked against that and numpy),
and records its collectives again: new seq numbers in the flight recorder,
equal across ranks, increasing from one replay to the next, and
tensord_collective_ops_total grows by the replay's collectives. Malformed
captures and replays are refused before any rank enters a collective.
"""

import json
import struct

import numpy as np
import pytest
import requests

from conftest import Server, _stop_and_check
from test_collectives import dec, enc  # the JSON tensor helpers of the SPMD tests

RANKS = (2, 3, 4)
I64 = {"dtype": "int64", "shape": []}


@pytest.fixture(scope="module")
def servers():
    srvs = {r: Server(["--ranks", str(r), "--collective-timeout", "10"], name="granks%d" % r) for r in RANKS}
    yield srvs
    for s in srvs.values():
        _stop_and_check(s)


def spec(a):
    a = np.asarray(a)
    return {"dtype": a.dtype.name, "shape": list(a.shape)}


def node(nid, opname, args, out, **kwargs):
    n = {"id": nid, "op": opname, "args": args, "outputs": [out] if out else []}
    if kwargs:
        n["kwargs"] = kwargs
    return n


def capture(url, program, inputs, ranks):
    return requests.post(url + "/v1/graphs", json={"program": program, "inputs": inputs, "ranks": ranks}, timeout=60)


def replay(url, gid, inputs, **extra):
    body = {"inputs": inputs}
    body.update(extra)
    return requests.post(url + "/v1/graphs/%s/replay" % gid, json=body, timeout=60)


def run(url, program, inputs, ranks):
    return requests.post(url + "/v1/run", json={"program": program, "inputs": inputs, "ranks": ranks}, timeout=60)


def ok(r):
    assert r.status_code == 200, r.text
    return r.json()["outputs"]


def values(out):
    """An output as the list of each rank's value (a replicated one: [value])."""
    if "per_rank" in out:
        return [dec(t) for t in out["per_rank"]]
    assert out.get("replicated") is True, out
    return [dec(out)]


def recorder(url):
    return requests.get(url + "/v1/flight-recorder").json()["ranks"]


def metric(url, name, op, group="world"):
    for line in requests.get(url + "/metrics").text.splitlines():
        if line.startswith(name + "{") and 'group="%s"' % group in line and 'op="%s"' % op in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def new_seqs(before, after, R, group="world"):
    """Each rank's (seq, profiling_name) of the collectives recorded since `before`."""
    out = []
    for r in map(str, range(R)):
        new = after[r]["entries"][len(before[r]["entries"]):]
        assert all(e["state"] == "completed" for e in new), new
        out.append([(e["collective_seq_id"], e["profiling_name"]) for e in new if e["process_group"][0] == group])
    return out


def every_collective(R):
    """A program with each collective (every all_reduce op), an uneven
    all_gather, and its inputs for ranks 0..R-1 (x per rank, s sharded)."""
    rng = np.random.default_rng(R)
    xs = [rng.integers(1, 4, size=(R * 2, 3)).astype(np.float64) for _ in range(R)]
    whole = np.arange((2 * R + 1) * 2, dtype=np.float64).reshape(2 * R + 1, 2)  # uneven over R ranks
    nodes = [node("n_" + op, "dist.all_reduce", ["x"], "r_" + op, op=op) for op in ("sum", "avg", "max", "min", "prod")]
    nodes += [node("g", "dist.all_gather", ["s"], "g"), node("m", "mul", ["s", 2.0], "m"),
              node("rs", "dist.reduce_scatter", ["x"], "rs", op="sum"),
              node("b", "dist.broadcast", ["x"], "b", src=R - 1), node("a2a", "dist.all_to_all", ["x"], "t")]
    outputs = ["r_sum", "r_avg", "r_max", "r_min", "r_prod", "g", "m", "rs", "b", "t"]
    program = {"nodes": nodes, "outputs": outputs}
    parts = np.array_split(whole, R, axis=0)  # torch.tensor_split: the first ranks one row longer
    stack = np.stack(xs)
    want = {"r_sum": [stack.sum(0)], "r_avg": [stack.mean(0)], "r_max": [stack.max(0)], "r_min": [stack.min(0)],
            "r_prod": [stack.prod(0)], "g": [whole], "m": [p * 2 for p in parts],
            "rs": np.split(stack.sum(0), R, axis=0), "b": [xs[R - 1]],
            "t": [np.concatenate([np.split(xs[src], R)[r] for src in range(R)]) for r in range(R)]}
    decl = {"x": {"dtype": "float64", "shape": [R * 2, 3]}, "s": {"per_rank": [spec(p) for p in parts]}}
    inputs = {"x": {"per_rank": [enc(x) for x in xs]}, "s": {"shard": enc(whole), "dim": 0}}
    return program, decl, inputs, want


@pytest.mark.parametrize("R", RANKS)
def test_every_collective_in_a_replayed_graph_matches_run_and_numpy(servers, R):
    s = servers[R]
    program, decl, inputs, want = every_collective(R)
    r = capture(s.url, program, decl, R)
    assert r.status_code == 201, r.text
    gid = r.json()["id"]
    info = requests.get(s.url + "/v1/graphs/" + gid).json()
    assert info["ranks"] == list(range(R)) and info["group"] == "world" and info["bytes"] > 0
    by_run = ok(run(s.url, program, inputs, R))
    ops = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
    counts = {"all_reduce": 5, "all_gather": 1, "reduce_scatter": 1, "broadcast": 1, "all_to_all": 1}
    seqs = []
    for _ in range(2):
        before, m0 = recorder(s.url), {op: metric(s.url, "tensord_collective_ops_total", op) for op in ops}
        out = ok(replay(s.url, gid, inputs))
        for name, w in want.items():
            assert ("per_rank" in out[name]) == ("per_rank" in by_run[name]), name  # the same form as /v1/run
            got = values(out[name])
            assert len(got) == len(w), name
            for g, e, rr in zip(got, w, values(by_run[name])):
                np.testing.assert_allclose(g, e, rtol=1e-12, err_msg=name)
                np.testing.assert_array_equal(g, rr, err_msg=name)
        for op in ops:
            assert metric(s.url, "tensord_collective_ops_total", op) == m0[op] + counts[op], op
        per_rank = new_seqs(before, recorder(s.url), R)
        assert all(sq == per_rank[0] for sq in per_rank)  # equal across ranks
        ids = [seq for seq, _ in per_rank[0]]
        assert len(ids) == 9 and ids == list(range(ids[0], ids[0] + 9))
        seqs.append(ids)
    assert seqs[1][0] == seqs[0][-1] + 1  # the second replay records them again, after the first
    assert requests.get(s.url + "/v1/graphs/" + gid).json()["replays"] == 2
    assert requests.delete(s.url + "/v1/graphs/" + gid).status_code == 204


@pytest.mark.parametrize("R", RANKS)
def test_a_collective_inside_a_while_loop_in_a_replayed_graph(servers, R):
    s = servers[R]
    f = {"dtype": "float32"}
    loop = {"id": "w", "op": "while_loop", "args": ["i", "x"], "outputs": ["i2", "x2"],
            "cond": {"inputs": {"i": I64, "x": f}, "nodes": [node("c", "lt", ["i", 3], "b")], "outputs": ["b"]},
            "body": {"inputs": {"i": I64, "x": f},
                     "nodes": [node("a", "add", ["i", 1], "j"), node("s", "dist.all_reduce", ["x"], "y"),
                               node("h", "mul", ["y", 0.5], "z")],
                     "outputs": ["j", "z"]}}
    program = {"nodes": [loop], "outputs": ["x2"]}
    r = capture(s.url, program, {"i": I64, "x": {"dtype": "float32", "shape": [2]}}, R)
    assert r.status_code == 201, r.text
    gid = r.json()["id"]
    last = None
    for k in range(2):
        xs = [np.array([1.0, 2.0], np.float32) * (r + 1 + k) for r in range(R)]
        inputs = {"i": enc(np.array(0)), "x": {"per_rank": [enc(x) for x in xs]}}
        want = sum(xs) * 0.5 * (R * 0.5) ** 2  # trip 1 sums the ranks', trips 2 and 3 equal values
        by_run = values(ok(run(s.url, {"inputs": {"i": I64, "x": f}, **program}, inputs, R))["x2"])
        before = recorder(s.url)
        got = values(ok(replay(s.url, gid, inputs))["x2"])
        assert len(got) == len(by_run) == R
        for g, rr in zip(got, by_run):
            np.testing.assert_allclose(g, want, rtol=1e-6)
            np.testing.assert_array_equal(g, rr)
        per_rank = new_seqs(before, recorder(s.url), R)
        assert all(sq == per_rank[0] for sq in per_rank)
        assert [name for _, name in per_rank[0]] == ["gloo:all_reduce"] * 3
        ids = [seq for seq, _ in per_rank[0]]
        assert ids == list(range(ids[0], ids[0] + 3))
        if last is not None:
            assert ids[0] > last
        last = ids[-1]


def test_a_subgroup_graph_and_replicated_inputs(servers):
    s = servers[4]
    program = {"nodes": [node("a", "dist.all_reduce", ["x"], "y"), node("m", "mul", ["x", 3.0], "z"),
                         node("g", "dist.all_gather", ["p"], "q")], "outputs": ["y", "z", "q"]}
    r = capture(s.url, program, {"x": {"dtype": "float32", "shape": [2]}, "p": {"dtype": "float32", "shape": [1]}},
                [3, 1])
    assert r.status_code == 201, r.text
    gid = r.json()["id"]
    info = requests.get(s.url + "/v1/graphs/" + gid).json()
    assert info["ranks"] == [3, 1] and info["group"] == "ranks:3,1"
    before = recorder(s.url)
    out = ok(replay(s.url, gid, {"x": enc(np.array([1.0, 2.0], np.float32)),
                                 "p": {"per_rank": [enc(np.array([5.0], np.float32)),
                                                    enc(np.array([7.0], np.float32))]}}))
    # A replicated input keeps its outputs replicated, as in /v1/run.
    np.testing.assert_array_equal(values(out["y"]), [[2.0, 4.0]])
    np.testing.assert_array_equal(values(out["z"]), [[3.0, 6.0]])
    np.testing.assert_array_equal(values(out["q"]), [[5.0, 7.0]])
    after = recorder(s.url)
    assert new_seqs(before, after, 4, "ranks:3,1")[3] == new_seqs(before, after, 4, "ranks:3,1")[1] != []
    assert new_seqs(before, after, 4, "ranks:3,1")[0] == []
    # The same replay with x per rank: y's sum is the ranks', z differs across ranks.
    out = ok(replay(s.url, gid, {"x": {"per_rank": [enc(np.ones(2, np.float32)), enc(np.full(2, 2, np.float32))]},
                                 "p": {"shard": enc(np.array([1.0, 2.0], np.float32)), "dim": 0}}))
    np.testing.assert_array_equal(values(out["y"]), [[3.0, 3.0]])
    np.testing.assert_array_equal(values(out["z"]), [[3.0, 3.0], [6.0, 6.0]])
    np.testing.assert_array_equal(values(out["q"]), [[1.0, 2.0]])
    # "ranks" in a replay must name the graph's group.
    assert ok(replay(s.url, gid, {"x": enc(np.ones(2, np.float32)), "p": enc(np.ones(1, np.float32))},
                     ranks=[3, 1]))
    r = replay(s.url, gid, {"x": enc(np.ones(2, np.float32)), "p": enc(np.ones(1, np.float32))}, ranks=[1, 3])
    assert r.status_code == 400 and "ranks:3,1" in r.json()["error"]["message"], r.text


def test_safetensors_replay_names_each_ranks_part(servers):
    s = servers[2]
    program = {"nodes": [node("m", "mul", ["x", 2.0], "y"), node("s", "dist.all_reduce", ["x"], "z")],
               "outputs": ["y", "z"]}
    gid = capture(s.url, program, {"x": {"dtype": "float32", "shape": [2]}}, 2).json()["id"]
    r = requests.post(s.url + "/v1/graphs/%s/replay" % gid, headers={"Accept": "application/vnd.safetensors"},
                      json={"inputs": {"x": {"per_rank": [enc(np.ones(2, np.float32)),
                                                          enc(np.full(2, 3, np.float32))]}}}, timeout=60)
    assert r.status_code == 200, r.text
    n = struct.unpack("<Q", r.content[:8])[0]
    header = json.loads(r.content[8:8 + n])
    assert {"y/0", "y/1", "z"} <= set(header)
    resp = json.loads(header["__metadata__"]["response"])
    assert "per_rank" in resp["outputs"]["y"] and resp["outputs"]["z"]["shape"] == [2]
    base = 8 + n
    z = np.frombuffer(r.content[base + header["z"]["data_offsets"][0]:base + header["z"]["data_offsets"][1]],
                      np.float32)
    np.testing.assert_array_equal(z, [4.0, 4.0])


def test_a_rank_that_fails_fails_the_replay_and_the_graph_recovers(servers):
    s = servers[2]
    bad = {"dtype": "float32", "shape": [1, 2, 2], "data": ["nan"] * 4}
    good = np.eye(2, dtype=np.float32)[None]
    program = {"nodes": [node("e", "linalg.eigvalsh", ["a"], "w"), node("s", "dist.all_reduce", ["w"], "t")],
               "outputs": ["t"]}
    gid = capture(s.url, program, {"a": spec(good)}, 2).json()["id"]
    r = replay(s.url, gid, {"a": {"per_rank": [enc(good), bad]}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "numerical_error", r.text
    out = ok(replay(s.url, gid, {"a": {"per_rank": [enc(good), enc(good)]}}))
    np.testing.assert_allclose(values(out["t"]), [[[2.0, 2.0]]])
    assert requests.get(s.url + "/v1/graphs/" + gid).json()["replays"] == 1


def test_a_graph_without_ranks_is_unchanged_and_takes_no_spmd_inputs(servers):
    s = servers[2]
    program = {"nodes": [node("a", "dist.all_reduce", ["x"], "y")], "outputs": ["y"]}
    r = requests.post(s.url + "/v1/graphs", json={"program": program, "inputs": {"x": spec(np.ones(2, np.float32))}})
    assert r.status_code == 201 and "ranks" not in r.json(), r.text
    gid = r.json()["id"]
    out = ok(replay(s.url, gid, {"x": enc(np.array([1.0, 2.0], np.float32))}))
    assert "replicated" not in out["y"]
    np.testing.assert_array_equal(dec(out["y"]), [1.0, 2.0])  # a group of one rank
    for body in ({"inputs": {"x": enc(np.ones(2, np.float32))}, "ranks": 2},
                 {"inputs": {"x": {"per_rank": [enc(np.ones(2, np.float32))] * 2}}}):
        r = requests.post(s.url + "/v1/graphs/%s/replay" % gid, json=body, timeout=30)
        assert r.status_code == 400 and "without \"ranks\"" in r.json()["error"]["message"], r.text


def test_kserve_infer_of_an_spmd_graph_is_refused(servers):
    s = servers[2]
    program = {"nodes": [node("a", "dist.all_reduce", ["x"], "y")], "outputs": ["y"]}
    r = requests.post(s.url + "/v1/graphs", json={"program": program, "inputs": {"x": spec(np.ones(2, np.float32))},
                                                  "ranks": 2, "name": "spmd-model"})
    assert r.status_code == 201, r.text
    r = requests.post(s.url + "/v2/models/spmd-model/infer", json={
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": [1, 2]}]})
    assert r.status_code == 400 and "ranks" in r.json()["error"], r.text


X2 = {"dtype": "float32", "shape": [2]}
ALL_REDUCE = {"nodes": [node("a", "dist.all_reduce", ["x"], "y")], "outputs": ["y"]}


@pytest.mark.parametrize("inputs,ranks,frag", [
    ({"x": X2}, 3, "world has 2"),                            # the world has 2 ranks
    ({"x": X2}, [0, 2], "outside the world"),
    ({"x": X2}, [1, 1], "listed twice"),
    ({"x": X2}, [], "empty"),
    ({"x": X2}, 0, "ranks"),
    ({"x": {"per_rank": [X2]}}, 2, "1 per_rank declarations for a group of 2"),
    ({"x": {"per_rank": [X2] * 3}}, 2, "3 per_rank declarations for a group of 2"),
    ({"x": {"per_rank": []}}, 2, "non-empty"),
    ({"x": {"per_rank": [X2, {"dtype": "float32"}]}}, 2, "shape"),
    ({"x": {"per_rank": [X2, X2], "dim": 0}}, 2, "no other field"),
    ({"x": {"per_rank": [X2, X2]}}, None, "needs \"ranks\""),
])
def test_malformed_captures_are_400(servers, inputs, ranks, frag):
    body = {"program": ALL_REDUCE, "inputs": inputs}
    if ranks is not None:
        body["ranks"] = ranks
    r = requests.post(servers[2].url + "/v1/graphs", json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert frag in r.json()["error"]["message"], r.text


def test_a_pool_is_refused_with_ranks(servers):
    s = servers[2]
    gid = capture(s.url, ALL_REDUCE, {"x": X2}, 2).json()["id"]
    r = requests.post(s.url + "/v1/graphs", json={"program": ALL_REDUCE, "inputs": {"x": X2}, "pool": gid})
    assert r.status_code == 400 and "ranks" in r.json()["error"]["message"], r.text
    r = requests.post(s.url + "/v1/graphs", json={"program": ALL_REDUCE, "inputs": {"x": X2}, "ranks": 2,
                                                  "pool": gid})
    assert r.status_code == 400, r.text


def test_ranks_on_another_server_are_refused(tmp_path):
    s = Server(["--ranks", "2", "--world-size", "4", "--rendezvous", "file://%s" % tmp_path], name="half-world")
    try:
        r = capture(s.url, ALL_REDUCE, {"x": X2}, 4)
        assert r.status_code == 400 and "other servers are not supported yet" in r.json()["error"]["message"], r.text
        r = capture(s.url, ALL_REDUCE, {"x": X2}, [0, 1])
        assert r.status_code == 201, r.text
    finally:
        _stop_and_check(s)


def test_shapes_that_disagree_across_ranks_are_422_naming_the_node(servers):
    s = servers[3]
    before = recorder(s.url)
    decl = {"x": {"per_rank": [X2, X2, {"dtype": "float32", "shape": [3]}]}}
    r = capture(s.url, ALL_REDUCE, decl, 3)
    assert r.status_code == 422 and r.json()["error"]["code"] == "shape_mismatch", r.text
    assert r.json()["error"]["node"] == "a"
    decl = {"x": {"per_rank": [X2, X2, {"dtype": "float64", "shape": [2]}]}}
    r = capture(s.url, ALL_REDUCE, decl, 3)
    assert r.status_code == 422 and r.json()["error"]["code"] == "dtype_mismatch", r.text
    after = recorder(s.url)
    assert [len(after[k]["entries"]) for k in after] == [len(before[k]["entries"]) for k in before]


def test_malformed_replays(servers):
    s = servers[2]
    program = {"nodes": [node("a", "dist.all_reduce", ["x"], "y"), node("g", "dist.all_gather", ["p"], "q"),
                         node("m", "mul", ["x", 2.0], "m")],
               "outputs": ["y", "q", "m"]}
    decl = {"x": X2, "p": {"per_rank": [{"dtype": "float32", "shape": [2]}, {"dtype": "float32", "shape": [1]}]}}
    gid = capture(s.url, program, decl, 2).json()["id"]
    x = enc(np.ones(2, np.float32))
    p = {"shard": enc(np.arange(3, dtype=np.float32)), "dim": 0}
    out = ok(replay(s.url, gid, {"x": x, "p": p}))
    np.testing.assert_array_equal(values(out["q"]), [[0.0, 1.0, 2.0]])
    before = recorder(s.url)
    cases = [
        ({"x": x}, 400, "p"),                                               # a missing input
        ({"x": x, "p": p, "z": x}, 400, "z"),                               # an unknown one
        ({"x": {"per_rank": [x]}, "p": p}, 400, "1 per_rank tensors for a group of 2"),
        ({"x": {"per_rank": [x, x, x]}, "p": p}, 400, "3 per_rank tensors"),
        ({"x": x, "p": {"shard": enc(np.arange(4, dtype=np.float32)), "dim": 0}}, 409, "rank 1"),
        ({"x": enc(np.ones(3, np.float32)), "p": p}, 409, "rank 0"),
        ({"x": enc(np.ones(2, np.float64)), "p": p}, 409, ""),
        ({"x": x, "p": {"shard": enc(np.arange(3, dtype=np.float32)), "dim": 4}}, 400, "out of range"),
    ]
    for inputs, status, frag in cases:
        r = replay(s.url, gid, inputs)
        assert r.status_code == status, (inputs, r.text)
        assert frag in r.json()["error"]["message"], r.text
    r = replay(s.url, gid, {"x": x, "p": p}, spmd_part={"members": [1], "key": "k"})
    assert r.status_code == 400 and "spmd_part" in r.json()["error"]["message"], r.text
    r = replay(s.url, gid, {"x": x, "p": p}, store={"y": "gs/y"})
    assert r.status_code == 200, r.text  # a replicated output may be stored
    r = replay(s.url, gid, {"x": {"per_rank": [x, enc(np.zeros(2, np.float32))]}, "p": p}, store={"y": "gs/y2"})
    assert r.status_code == 200, r.text  # all_reduce's result is replicated whatever its operand
    # Whether an output may be stored depends on the replay's inputs, as in /v1/run.
    r = replay(s.url, gid, {"x": {"per_rank": [x, enc(np.zeros(2, np.float32))]}, "p": p}, store={"m": "gs/m"})
    assert r.status_code == 422 and "differs across ranks" in r.json()["error"]["message"], r.text
    assert requests.get(s.url + "/v1/tensors/gs/m").status_code == 404
    r = replay(s.url, gid, {"x": x, "p": p}, store={"m": "gs/m"})
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(dec(requests.get(s.url + "/v1/tensors/gs/m").json()), [2.0, 2.0])
    r = replay(s.url, gid, {"x": x, "p": p}, store={"nope": "gs/x"})
    assert r.status_code == 400 and "not a program output" in r.json()["error"]["message"], r.text
    after = recorder(s.url)  # two collectives for each replay that ran, none for a refused one
    assert [len(after[k]["entries"]) for k in after] == [len(before[k]["entries"]) + 6 for k in before]


def test_concurrent_replays_and_spmd_runs_keep_the_ranks_in_step(servers):
    """Replays of one SPMD graph (its gate: one at a time) interleaved with
    SPMD runs (one SPMD job at a time): every answer right, every rank's
    seqs the same."""
    from concurrent.futures import ThreadPoolExecutor
    R = 3
    s = servers[R]
    program = {"nodes": [node("a", "dist.all_reduce", ["x"], "y"), node("g", "dist.all_gather", ["y"], "z")],
               "outputs": ["z"]}
    gid = capture(s.url, program, {"x": X2}, R).json()["id"]
    before = recorder(s.url)

    def one(k):
        xs = [np.full(2, k + r, np.float32) for r in range(R)]
        inputs = {"x": {"per_rank": [enc(x) for x in xs]}}
        r = replay(s.url, gid, inputs) if k % 2 else run(s.url, program, inputs, R)
        return values(ok(r)["z"]), np.tile(sum(xs), R)

    with ThreadPoolExecutor(6) as pool:
        for got, want in pool.map(one, range(12)):
            np.testing.assert_array_equal(got, [want])
    per_rank = new_seqs(before, recorder(s.url), R)
    assert all(sq == per_rank[0] for sq in per_rank) and len(per_rank[0]) == 24
    ids = [seq for seq, _ in per_rank[0]]
    assert ids == list(range(ids[0], ids[0] + 24))
