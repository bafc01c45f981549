"""The Python client's SPMD support and graph names against the real binary
(API.md 8, 11, 12; issues 16 and 18).

Servers with --ranks 2 and --ranks 3 (CPU rank workers over Gloo on
loopback): ``ranks=`` on run/submit, ``tensord.per_rank`` / ``tensord.shard``
inputs (numpy and torch, uneven shards), replicated outputs as one value and
per-rank outputs as lists in the group's order over both transports, a
data-parallel AdamW step through the client's optimizer helper checked
against torch, typed errors with their fields (the server's 400s for
malformed helper use included), the flight recorder; and graph capture with
``name=`` on the shared server.
"""

import json
import uuid

import numpy as np
import pytest
import requests

import tensord
from conftest import Server, _stop_and_check

try:
    import torch
except ImportError:  # the torch cases say so when they skip
    torch = None

TRANSPORTS = ("safetensors", "json")


def need_torch():
    if torch is None:
        print("skipping: torch is not importable by this interpreter")
        pytest.skip("torch is not importable by this interpreter")


@pytest.fixture(scope="module")
def servers():
    srvs = {r: Server(["--ranks", str(r), "--collective-timeout", "5"], name="client-ranks%d" % r) for r in (2, 3)}
    yield srvs
    for s in srvs.values():
        _stop_and_check(s)


@pytest.fixture(params=TRANSPORTS)
def clients(request, servers):
    """{R: Client} over one transport."""
    cs = {r: tensord.Client(s.url, timeout=60, transport=request.param) for r, s in servers.items()}
    yield cs
    for c in cs.values():
        c.close()


def node(nid, opname, args, out, **kwargs):
    n = {"id": nid, "op": opname, "args": args, "outputs": [out] if out else []}
    if kwargs:
        n["kwargs"] = kwargs
    return n


def prog(nodes, outputs):
    return {"nodes": nodes, "outputs": outputs}


# y differs per rank, z (an all_reduce) is replicated
MUL_AND_SUM = prog([node("m", "mul", ["x", 2.0], "y"), node("s", "dist.all_reduce", ["x"], "z", op="sum")], ["y", "z"])


def assert_per_rank(got, want):
    assert isinstance(got, list), "a per-rank output must be a list, got %r" % (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


# ---------------------------------------------------------------- inputs and results

def test_per_rank_inputs_give_lists_and_replicated_values(clients):
    rng = np.random.default_rng(1)
    for R, c in clients.items():
        xs = [rng.integers(-4, 5, size=(2, 3)).astype(np.float32) for _ in range(R)]
        out = c.run(MUL_AND_SUM, ranks=R, inputs={"x": tensord.per_rank(xs)})
        assert list(out) == ["y", "z"]
        assert_per_rank(out["y"], [2 * x for x in xs])
        assert isinstance(out["z"], np.ndarray), "a replicated output comes back once, not as a list"
        np.testing.assert_array_equal(out["z"], np.sum(xs, axis=0))
        assert out["z"].dtype == np.float32 and out["z"].shape == (2, 3)


def test_a_plain_input_is_replicated_and_so_are_its_results(clients):
    c = clients[3]
    x = np.arange(4, dtype=np.float64)
    out = c.run(prog([node("m", "mul", ["x", 3.0], "y")], ["y"]), ranks=3, inputs={"x": x})
    assert isinstance(out["y"], np.ndarray)
    np.testing.assert_array_equal(out["y"], 3 * x)


@pytest.mark.parametrize("n,dim", [(7, 0), (8, 1), (2, 1)])
def test_uneven_shards_split_as_tensor_split_and_gather_back(clients, n, dim):
    """Shards along ``dim`` (the first ranks one longer); all_gather along the same dim is the whole."""
    c = clients[3]
    whole = np.arange(3 * n, dtype=np.float32).reshape((3, n) if dim == 1 else (n, 3))
    out = c.run(prog([node("m", "mul", ["x", 1.0], "part"), node("g", "dist.all_gather", ["x"], "all", dim=dim)],
                     ["part", "all"]), ranks=3, inputs={"x": tensord.shard(whole, dim=dim)})
    assert_per_rank(out["part"], np.array_split(whole, 3, axis=dim))
    assert [p.shape[dim] for p in out["part"]] == [len(a) for a in np.array_split(np.arange(n), 3)]
    np.testing.assert_array_equal(out["all"], whole)


def test_a_subgroup_answers_in_its_order(clients):
    c = clients[3]
    xs = [np.full(2, 10.0, np.float32), np.full(2, 1.0, np.float32)]
    out = c.run(prog([node("m", "add", ["x", 0.5], "y"), node("g", "dist.all_gather", ["x"], "all")], ["y", "all"]),
                ranks=[2, 0], inputs={"x": tensord.per_rank(xs)})
    assert_per_rank(out["y"], [x + 0.5 for x in xs])
    np.testing.assert_array_equal(out["all"], np.concatenate(xs))  # the group's order, not the ranks'
    group = c.flight_recorder(rank=2)["entries"][-1]["process_group"][0]
    assert group == "ranks:2,0"


def test_return_selects_per_rank_outputs(clients):
    c = clients[2]
    xs = [np.ones(3, np.int64), np.full(3, 4, np.int64)]
    out = c.run(MUL_AND_SUM, ranks=2, inputs={"x": tensord.per_rank(xs)}, return_=["y"])
    assert list(out) == ["y"]
    assert_per_rank(out["y"], [2 * x for x in xs])


def test_mixed_inputs_per_rank_shard_and_plain(clients):
    c = clients[2]
    a = [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
    b = np.arange(4.0).reshape(2, 2)
    bias = np.array([100.0, 200.0])
    p = prog([node("r", "reshape", ["b", [2]], "bf"), node("s1", "add", ["a", "bf"], "t"),
              node("s2", "add", ["t", "bias"], "y"), node("ar", "dist.all_reduce", ["y"], "tot", op="sum")],
             ["y", "tot"])
    out = c.run(p, ranks=2, inputs={"a": tensord.per_rank(a), "b": tensord.shard(b, dim=0), "bias": bias})
    want = [a[i] + b[i] + bias for i in range(2)]
    assert_per_rank(out["y"], want)
    np.testing.assert_array_equal(out["tot"], want[0] + want[1])


def test_safetensors_reply_keeps_names_with_slashes_apart(servers):
    """An ordinary output named like a rank's part ("y/0") stays itself."""
    c = tensord.Client(servers[2].url)
    xs = [np.ones(2, np.float32), np.zeros(2, np.float32)]
    out = c.run(prog([node("m", "mul", ["x", 2.0], "y"), node("s", "dist.all_reduce", ["x"], "a/0", op="max")],
                     ["y", "a/0"]), ranks=2, inputs={"x": tensord.per_rank(xs)})
    assert_per_rank(out["y"], [2 * x for x in xs])
    np.testing.assert_array_equal(out["a/0"], np.ones(2, np.float32))


def test_torch_in_gives_torch_out(clients):
    need_torch()
    c = clients[2]
    xs = [torch.randn(3, 2, requires_grad=True), torch.randn(2, 3).t()]  # with grad; not contiguous
    out = c.run(MUL_AND_SUM, ranks=2, inputs={"x": tensord.per_rank(xs)})
    assert isinstance(out["y"], list) and all(isinstance(t, torch.Tensor) for t in out["y"])
    assert isinstance(out["z"], torch.Tensor)
    for got, x in zip(out["y"], xs):
        torch.testing.assert_close(got, 2 * x.detach(), rtol=0, atol=0)
    torch.testing.assert_close(out["z"], (xs[0] + xs[1]).detach(), rtol=1e-6, atol=1e-6)
    w = torch.arange(10, dtype=torch.bfloat16).reshape(5, 2)
    out = c.run(prog([node("m", "mul", ["x", 1.0], "part"), node("g", "dist.all_gather", ["x"], "all")],
                     ["part", "all"]), ranks=2, inputs={"x": tensord.shard(w)})
    assert [t.dtype for t in out["part"]] == [torch.bfloat16] * 2
    assert [tuple(t.shape) for t in out["part"]] == [(3, 2), (2, 2)]
    assert torch.equal(out["all"], w)


def test_as_torch_and_numpy_inputs(servers):
    need_torch()
    c = tensord.Client(servers[2].url, as_torch=True)
    out = c.run(MUL_AND_SUM, ranks=2, inputs={"x": tensord.per_rank([np.ones(2, np.float32), np.zeros(2, np.float32)])})
    assert all(isinstance(t, torch.Tensor) for t in out["y"]) and isinstance(out["z"], torch.Tensor)
    assert out["y"][0].tolist() == [2.0, 2.0] and out["y"][1].tolist() == [0.0, 0.0]


def test_submit_spmd_replicated_result(clients):
    c = clients[3]
    xs = [np.full(2, i + 1, np.float32) for i in range(3)]
    job = c.submit(prog([node("s", "dist.all_reduce", ["x"], "z", op="avg")], ["z"]), ranks=3,
                   inputs={"x": tensord.per_rank(xs)})
    out = job.result(timeout=60)
    assert isinstance(out["z"], np.ndarray)
    np.testing.assert_allclose(out["z"], np.mean(xs, axis=0))


def test_submit_spmd_per_rank_result(clients):
    c = clients[2]
    xs = [np.ones(2, np.float32), np.zeros(2, np.float32)]
    out = c.submit(MUL_AND_SUM, ranks=2, inputs={"x": tensord.per_rank(xs)}).result(timeout=60)
    assert_per_rank(out["y"], [2 * x for x in xs])


def test_submit_spmd_errors_are_typed(clients):
    """Ranks that disagree are refused when the job is submitted (planning runs
    before anything is queued); a rank failing while the job runs fails the
    job with its typed error, raised by ``result()``."""
    c = clients[2]
    with pytest.raises(tensord.ShapeMismatch) as e:
        c.submit(MUL_AND_SUM, ranks=2, inputs={"x": tensord.per_rank([np.ones(2, np.float32), np.ones(3, np.float32)])})
    assert (e.value.status, e.value.node) == (422, "s")
    good = np.eye(2, dtype=np.float32)[None]
    bad = np.full((1, 2, 2), np.nan, np.float32)  # rank 1's eigh fails while rank 0 waits in the all_reduce
    p = prog([node("e", "linalg.eigvalsh", ["a"], "w"), node("s", "dist.all_reduce", ["w"], "t")], ["t"])
    job = c.submit(p, ranks=2, inputs={"a": tensord.per_rank([good, bad])})
    with pytest.raises(tensord.NumericalError) as e:
        job.result(timeout=60)
    assert e.value.code == "numerical_error" and e.value.node == "e"
    out = c.submit(p, ranks=2, inputs={"a": tensord.per_rank([good, good])}).result(timeout=60)
    np.testing.assert_allclose(out["t"], [[2.0, 2.0]])


# ---------------------------------------------------------------- a data-parallel step

def test_data_parallel_adamw_step_through_the_optimizer_helper(clients):
    """all_reduce(avg) of per-rank gradients, then optim.adamw on the stored
    params, one request per step; the same numbers as torch.optim.AdamW on
    the mean gradient, over two steps (the state carries)."""
    need_torch()
    R, c = 3, clients[3]
    rng = np.random.default_rng(7)
    tag = uuid.uuid4().hex[:8]
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    b0 = rng.standard_normal(3).astype(np.float32)
    c.put("dp%s/w" % tag, w0)
    c.put("dp%s/b" % tag, b0)
    opt = c.optimizer("adamw", ["dp%s/w" % tag, "dp%s/b" % tag], lr=0.01, weight_decay=0.1)
    pw, pb = torch.nn.Parameter(torch.tensor(w0)), torch.nn.Parameter(torch.tensor(b0))
    ref = torch.optim.AdamW([pw, pb], lr=0.01, weight_decay=0.1)
    for _ in range(2):
        gw = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(R)]
        gb = rng.standard_normal(3).astype(np.float32)  # the same on every rank: sent replicated
        opt.step([tensord.per_rank(gw), gb], ranks=R)
        pw.grad, pb.grad = torch.tensor(np.mean(gw, axis=0)), torch.tensor(gb)
        ref.step()
    np.testing.assert_allclose(c.get("dp%s/w" % tag), pw.detach().numpy(), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(c.get("dp%s/b" % tag), pb.detach().numpy(), rtol=2e-6, atol=1e-7)
    assert set(opt.state()["dp%s/w" % tag]) >= {"exp_avg", "exp_avg_sq"}


def test_a_per_rank_gradient_needs_ranks(clients):
    c = clients[2]
    name = "dp%s/w" % uuid.uuid4().hex[:8]
    c.put(name, np.zeros(2, np.float32))
    opt = c.optimizer("sgd", [name], lr=0.1)
    with pytest.raises(ValueError, match="ranks"):
        opt.step([tensord.per_rank([np.ones(2, np.float32)] * 2)])
    # A sum instead of the mean: the step sees 2 * g
    opt.step([tensord.per_rank([np.ones(2, np.float32)] * 2)], ranks=2, reduce="sum")
    np.testing.assert_allclose(c.get(name), [-0.2, -0.2], rtol=1e-6)


# ---------------------------------------------------------------- errors

def test_malformed_helper_use_is_the_servers_typed_400(clients):
    c = clients[3]
    cases = [
        (tensord.per_rank([np.ones(2, np.float32)] * 2), 3, "per_rank tensors for a group of 3"),
        (tensord.shard(np.float32(1.0)), 3, "0-d"),
        (tensord.shard(np.ones(4, np.float32), dim=2), 3, "out of range"),
        (tensord.per_rank([]), 3, "non-empty"),
        (tensord.per_rank([np.ones(2, np.float32)] * 3), None, "need \"ranks\""),
        (np.ones(2, np.float32), [0, 7], "outside the world"),
        (np.ones(2, np.float32), 2, "a subgroup is a list"),
        (np.ones(2, np.float32), [1, 1], "twice"),
    ]
    for x, ranks, words in cases:
        with pytest.raises(tensord.BadRequest) as e:
            c.run(MUL_AND_SUM, ranks=ranks, inputs={"x": x})
        assert e.value.status == 400 and e.value.code == "bad_request", e.value
        assert words in e.value.message, e.value.message
        assert e.value.request_id and e.value.retry_after is None


def test_ranks_that_disagree_are_typed_422_naming_the_node(clients):
    c = clients[2]
    with pytest.raises(tensord.ShapeMismatch) as e:
        c.run(MUL_AND_SUM, ranks=2, inputs={"x": tensord.per_rank([np.ones(2, np.float32), np.ones(3, np.float32)])})
    assert (e.value.status, e.value.code, e.value.node) == (422, "shape_mismatch", "s")
    with pytest.raises(tensord.DtypeMismatch) as e:
        c.run(MUL_AND_SUM, ranks=2, inputs={"x": tensord.per_rank([np.ones(2, np.float32), np.ones(2, np.float64)])})
    assert (e.value.status, e.value.code, e.value.node) == (422, "dtype_mismatch", "s")
    # a store of a per-rank value would commit rank 0's view: refused, naming the node
    name = "spmd%s/y" % uuid.uuid4().hex[:8]
    with pytest.raises(tensord.InvalidArgument) as e:
        c.run(MUL_AND_SUM, ranks=2, store={"y": name},
              inputs={"x": tensord.per_rank([np.ones(2, np.float32), np.zeros(2, np.float32)])})
    assert e.value.status == 422 and "differs across ranks" in e.value.message
    with pytest.raises(tensord.NotFound):
        c.get(name)


def test_a_replay_takes_no_per_rank_inputs(servers):
    c = tensord.Client(servers[2].url)
    p = {"inputs": {"x": {"dtype": "float32", "shape": [2]}}, "nodes": [node("m", "mul", ["x", 2.0], "y")],
         "outputs": ["y"]}
    with c.capture(p) as g:
        with pytest.raises(tensord.BadRequest) as e:
            g.replay(x=tensord.per_rank([np.ones(2, np.float32)] * 2))
        assert e.value.status == 400
        np.testing.assert_array_equal(g.replay(x=np.ones(2, np.float32))["y"], [2.0, 2.0])


def test_a_graph_captured_with_ranks_replays_as_run(clients):
    """``capture(..., ranks=)``: per-rank specs for uneven shards; replays take
    per_rank / shard inputs and answer as ``run(..., ranks=)`` (both transports)."""
    c = clients[3]
    whole = np.arange(7 * 2, dtype=np.float32).reshape(7, 2)
    parts = np.array_split(whole, 3)
    p = prog([node("m", "mul", ["s", 2.0], "part"), node("g", "dist.all_gather", ["s"], "all"),
              node("r", "dist.all_reduce", ["x"], "sum", op="sum")], ["part", "all", "sum"])
    xs = [np.full(2, r + 1, np.float64) for r in range(3)]
    spec = {"s": tensord.per_rank([part for part in parts]), "x": ("float64", [2])}
    with c.capture(p, spec, ranks=3) as g:
        assert g.info()["ranks"] == [0, 1, 2] and g.info()["group"] == "world"
        want = c.run(p, ranks=3, inputs={"s": tensord.shard(whole), "x": tensord.per_rank(xs)})
        for _ in range(2):
            out = g.replay(s=tensord.shard(whole), x=tensord.per_rank(xs))
            assert_per_rank(out["part"], [2 * q for q in parts])
            assert_per_rank(out["part"], want["part"])
            assert isinstance(out["all"], np.ndarray) and isinstance(out["sum"], np.ndarray)
            np.testing.assert_array_equal(out["all"], whole)
            np.testing.assert_array_equal(out["sum"], want["sum"])
            np.testing.assert_array_equal(out["sum"], [6.0, 6.0])
        with pytest.raises(tensord.BadRequest):
            g.replay(s=tensord.shard(whole), x=tensord.per_rank(xs[:2]))
        with pytest.raises(tensord.Conflict):
            g.replay(s=tensord.shard(whole[:6]), x=tensord.per_rank(xs))
    with pytest.raises(tensord.BadRequest):
        c.capture(p, {"s": tensord.per_rank(parts[:2]), "x": ("float64", [2])}, ranks=3)


# ---------------------------------------------------------------- the flight recorder

def test_flight_recorder(clients):
    c = clients[2]
    assert set(c.flight_recorder()["ranks"]) == {"0", "1"}
    seqs = []
    for shape in ([2, 2], [3]):
        c.run(MUL_AND_SUM, ranks=2, inputs={"x": tensord.per_rank([np.ones(shape, np.float32)] * 2)})
        dumps = [c.flight_recorder(rank=r) for r in (0, 1)]
        last = []
        for r, d in enumerate(dumps):
            assert d["rank"] == r and d["version"] == "2.10" and "world" in d["pg_config"]
            e = [x for x in d["entries"] if x["process_group"][0] == "world"][-1]
            assert e["profiling_name"] == "gloo:all_reduce" and e["state"] == "completed"
            assert e["input_sizes"] == [shape] and e["input_dtypes"] == ["Float"]
            last.append((e["pg_id"], e["collective_seq_id"]))
        assert last[0] == last[1], "the same seq on every rank"
        seqs.append(last[0])
    assert seqs[1] == (seqs[0][0], seqs[0][1] + 1), "the group's next seq"
    whole = c.flight_recorder()
    assert whole["ranks"]["1"]["entries"][-1]["collective_seq_id"] == seqs[1][1]
    with pytest.raises(tensord.NotFound) as e:
        c.flight_recorder(rank=2)
    assert e.value.status == 404


# ---------------------------------------------------------------- graph names (API.md 11)

def test_graph_names(client, base_url):
    name = "k-model-%s" % uuid.uuid4().hex[:8]
    p = client.program()
    x = p.input("x", "float32", [3])
    p.output(p.mul(p.add(x, 1.0), 2.0))
    with client.capture(p, name=name) as g:
        assert g.name == name and g.model == name and name in repr(g)
        assert client.graph(g.id).name == name
        meta = requests.get(base_url + "/v2/models/" + name, timeout=10).json()
        assert meta["name"] == name and meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [3]}]
        np.testing.assert_array_equal(list(g.replay(x=np.arange(3, dtype=np.float32)).values())[0], [2, 4, 6])
        with pytest.raises(tensord.Conflict) as e:
            client.capture(p, name=name)
        assert e.value.status == 409 and name in e.value.message
    # deleting the graph frees its name
    with client.capture(p, name=name) as g2:
        assert g2.name == name and g2.id != g.id
    with client.capture(p) as unnamed:
        assert unnamed.name is None and unnamed.model == unnamed.id
        assert client.graph(unnamed.id).name is None


@pytest.mark.parametrize("bad,words", [("g-12", "graph id"), ("a b", "A-Z"), ("..", "dots"), ("", "1 to 128"),
                                       ("x" * 129, "1 to 128"), (5, "string")])
def test_bad_graph_names_are_typed_400(client, bad, words):
    p = {"inputs": {"x": {"dtype": "float32", "shape": [2]}}, "nodes": [node("m", "neg", ["x"], "y")],
         "outputs": ["y"]}
    with pytest.raises(tensord.BadRequest) as e:
        client.capture(p, name=bad)
    assert e.value.status == 400 and words in e.value.message, e.value.message


# ---------------------------------------------------------------- the notebook

def test_data_parallel_notebook(servers, tmp_path):
    """notebooks/data_parallel.ipynb runs headlessly against the --ranks 2 server."""
    import os
    import re
    import subprocess
    import sys
    from conftest import CLIENT_PATH, REPO
    from test_notebook import _nbconvert_cmd
    cmd, why = _nbconvert_cmd()
    if cmd is None:
        print("skipping: " + why)
        pytest.skip(why)
    out = tmp_path / "data_parallel.out.ipynb"
    env = dict(os.environ, TENSORD_URL=servers[2].url, TENSORD_CLIENT_PATH=CLIENT_PATH)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    folder = os.path.join(REPO, "notebooks")
    proc = subprocess.run(cmd + ["--to", "notebook", "--execute", "--ExecutePreprocessor.kernel_name=python3",
                                 "--ExecutePreprocessor.timeout=300", "--output", str(out),
                                 os.path.join(folder, "data_parallel.ipynb")],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    assert proc.returncode == 0, "nbconvert failed:\n%s\n%s" % (ansi.sub("", proc.stdout[-4000:]),
                                                                ansi.sub("", proc.stderr)[-6000:])
    nb = json.loads(out.read_text())
    outputs = [o for cell in nb["cells"] if cell["cell_type"] == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join("".join(o.get("text", "")) for o in outputs)
    for needle in ("y (per rank):", "total (replicated):", "shard rows per rank: [4, 3]", "loss:",
                   "gloo:all_reduce", "done"):
        assert needle in text, "%r not in the notebook's outputs:\n%s" % (needle, text[-3000:])
