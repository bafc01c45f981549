"""Control flow in programs (API.md 4.2) against numpy references."""

import threading
import time

import numpy as np
import pytest

from tensord import TensordError


def f32(shape):
    return {"dtype": "float32", "shape": list(shape)}


def sub(inputs, nodes, outputs):
    return {"inputs": inputs, "nodes": nodes, "outputs": outputs}


def cond_program(n=4):
    return {
        "inputs": {"p": {"dtype": "bool", "shape": []}, "x": f32([n])},
        "nodes": [{"id": "c", "op": "cond", "args": ["p", "x"], "outputs": ["y"],
                   "then": sub({"a": f32([n])}, [{"id": "m", "op": "mul", "args": ["a", 2.0], "outputs": ["r"]}], ["r"]),
                   "else": sub({"a": f32([n])}, [{"id": "g", "op": "neg", "args": ["a"], "outputs": ["r"]}], ["r"])}],
        "outputs": ["y"],
    }


def while_program(max_iters=None):
    carries = {"i": {"dtype": "int64", "shape": []}, "x": f32([3]), "n": {"dtype": "int64", "shape": []}}
    node = {"id": "l", "op": "while_loop", "args": ["i", "x", "n"], "outputs": ["i2", "x2", "n2"],
            "cond": sub(carries, [{"id": "c", "op": "lt", "args": ["i", "n"], "outputs": ["b"]}], ["b"]),
            "body": sub(carries, [{"id": "a", "op": "add", "args": ["i", 1], "outputs": ["j"]},
                                  {"id": "m", "op": "mul", "args": ["x", 1.5], "outputs": ["y"]}], ["j", "y", "n"])}
    if max_iters is not None:
        node["kwargs"] = {"max_iters": max_iters}
    return {"inputs": carries, "nodes": [node], "outputs": ["i2", "x2"]}


def test_cond_both_branches(client):
    x = np.array([1, -2, 3, 4], np.float32)
    for p in (True, False):
        out = client.run(cond_program(), inputs={"p": np.array(p), "x": x})
        np.testing.assert_allclose(out["y"], x * 2 if p else -x)


def test_while_loop(client):
    x = np.array([1, 2, 3], np.float32)
    out = client.run(while_program(), inputs={"i": np.array(0), "x": x, "n": np.array(4)})
    assert int(out["i2"]) == 4
    np.testing.assert_allclose(out["x2"], x * 1.5 ** 4, rtol=1e-6)


def test_runaway_while_loop_is_504(client):
    with pytest.raises(TensordError) as e:
        client.run(while_program(max_iters=50), inputs={"i": np.array(0), "x": np.ones(3, np.float32),
                                                        "n": np.array(10 ** 9)})
    assert e.value.status == 504 and e.value.code == "deadline_exceeded"


def test_deadline_reaches_a_running_loop(client):
    t0 = time.time()
    with pytest.raises(TensordError) as e:
        client.run(while_program(), inputs={"i": np.array(0), "x": np.ones(3, np.float32), "n": np.array(10 ** 12)},
                   deadline_ms=300)
    assert e.value.code == "deadline_exceeded"
    assert time.time() - t0 < 20


def test_cancel_reaches_a_running_loop(client):
    import json
    import requests
    body = {"program": while_program(), "inputs": {
        "i": {"dtype": "int64", "shape": [], "data": 0}, "x": {"dtype": "float32", "shape": [3], "data": [1, 1, 1]},
        "n": {"dtype": "int64", "shape": [], "data": 10 ** 12}}}
    r = requests.post(client.url + "/v1/jobs", data=json.dumps(body))
    assert r.status_code == 202, r.text
    jid = r.json()["id"]
    time.sleep(0.3)
    requests.delete(client.url + "/v1/jobs/" + jid)
    for _ in range(100):
        st = requests.get(client.url + "/v1/jobs/" + jid).json()
        if st["state"] not in ("queued", "running"):
            break
        time.sleep(0.05)
    assert st["state"] == "cancelled", st


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_cumsum_along_dim1(client, reverse):
    xs = np.random.rand(2, 5).astype(np.float32)
    init = np.zeros(2, np.float32)
    prog = {"inputs": {"init": f32([2]), "xs": f32([2, 5])},
            "nodes": [{"id": "s", "op": "scan", "args": ["init", "xs"], "kwargs": {"dim": 1, "reverse": reverse},
                       "outputs": ["c", "ys"],
                       "body": sub({"c": f32([2]), "x": f32([2])},
                                   [{"id": "a", "op": "add", "args": ["c", "x"], "outputs": ["c2"]},
                                    {"id": "m", "op": "mul", "args": ["c2", 2.0], "outputs": ["y"]}],
                                   ["c2", "y"])}],
            "outputs": ["c", "ys"]}
    out = client.run(prog, inputs={"init": init, "xs": xs})
    src = xs[:, ::-1] if reverse else xs
    ref = np.cumsum(src, axis=1)
    if reverse:
        ref = ref[:, ::-1]
    np.testing.assert_allclose(out["c"], xs.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(out["ys"], 2 * ref, rtol=1e-5)


def test_map_over_dim0(client):
    xs = np.random.rand(6, 4).astype(np.float32)
    prog = {"inputs": {"xs": f32([6, 4])},
            "nodes": [{"id": "m", "op": "map", "args": ["xs"], "outputs": ["ys"],
                       "body": sub({"x": f32([4])}, [{"id": "s", "op": "sum", "args": ["x"], "outputs": ["y"]}], ["y"])}],
            "outputs": ["ys"]}
    out = client.run(prog, inputs={"xs": xs})
    np.testing.assert_allclose(out["ys"], xs.sum(axis=1), rtol=1e-5)


def test_associative_scan_cummax(client):
    xs = np.random.rand(7, 3).astype(np.float32)
    prog = {"inputs": {"xs": f32([7, 3])},
            "nodes": [{"id": "a", "op": "associative_scan", "args": ["xs"], "kwargs": {"dim": 0}, "outputs": ["ys"],
                       "combine_fn": sub({"l": f32([3]), "r": f32([3])},
                                         [{"id": "m", "op": "maximum", "args": ["l", "r"], "outputs": ["o"]}], ["o"])}],
            "outputs": ["ys"]}
    out = client.run(prog, inputs={"xs": xs})
    np.testing.assert_allclose(out["ys"], np.maximum.accumulate(xs, axis=0))


def test_nested_cond_in_while_in_scan(client):
    s = {"dtype": "float32", "shape": []}
    i64 = {"dtype": "int64", "shape": []}
    cnd = {"id": "cn", "op": "cond", "args": ["pos", "c", "x"], "outputs": ["c3"],
           "then": sub({"c": s, "x": s}, [{"id": "a", "op": "add", "args": ["c", "x"], "outputs": ["r"]}], ["r"]),
           "else": sub({"c": s, "x": s}, [{"id": "b", "op": "sub", "args": ["c", "x"], "outputs": ["r"]}], ["r"])}
    wl = {"id": "w", "op": "while_loop", "args": [{"dtype": "int64", "shape": [], "data": 0}, "c", "x"],
          "outputs": ["k1", "c1", "x1"],
          "cond": sub({"k": i64, "c": s, "x": s}, [{"id": "lt", "op": "lt", "args": ["k", 3], "outputs": ["b"]}], ["b"]),
          "body": sub({"k": i64, "c": s, "x": s},
                      [{"id": "inc", "op": "add", "args": ["k", 1], "outputs": ["k2"]},
                       {"id": "gt", "op": "gt", "args": ["x", 0.0], "outputs": ["pos"]}, cnd], ["k2", "c3", "x"])}
    prog = {"inputs": {"init": s, "xs": f32([4])},
            "nodes": [{"id": "s", "op": "scan", "args": ["init", "xs"], "outputs": ["c", "ys"],
                       "body": sub({"c": s, "x": s}, [wl, {"id": "cp", "op": "mul", "args": ["c1", 1.0],
                                                           "outputs": ["y"]}], ["c1", "y"])}],
            "outputs": ["c", "ys"]}
    xs = np.array([1, -2, 4, -0.5], np.float32)
    out = client.run(prog, inputs={"init": np.array(0, np.float32), "xs": xs})
    ref = np.cumsum(3 * np.abs(xs))
    np.testing.assert_allclose(out["ys"], ref, rtol=1e-6)
    np.testing.assert_allclose(out["c"], ref[-1], rtol=1e-6)


def test_builder_cond_and_while(client):
    p = client.program()
    x = p.input("x", "float32", [4])
    pred = p.input("p", "bool", [])
    y = p.cond(pred, [x], then=lambda b, a: b.mul(a, 3.0), else_=lambda b, a: b.add(a, 1.0))
    p.output(y)
    x0 = np.arange(4, dtype=np.float32)
    out = client.run(p.build(), inputs={"x": x0, "p": np.array(True)})
    np.testing.assert_allclose(out[list(out)[0]], x0 * 3)


def test_branch_signature_mismatch_rejected_before_running(client):
    prog = cond_program()
    prog["nodes"][0]["else"] = sub({"a": f32([4])}, [{"id": "s", "op": "sum", "args": ["a"], "outputs": ["r"]}], ["r"])
    with pytest.raises(TensordError) as e:
        client.run(prog, inputs={"p": np.array(True), "x": np.ones(4, np.float32)})
    assert e.value.status == 400 and e.value.code == "invalid_program"
    assert e.value.node == "c"


def test_bad_subprogram_shapes(client):
    prog = cond_program()
    prog["nodes"][0]["then"]["inputs"] = {"a": f32([5])}
    with pytest.raises(TensordError) as e:
        client.run(prog, inputs={"p": np.array(True), "x": np.ones(4, np.float32)})
    assert e.value.status == 400 and e.value.code == "invalid_program"
    body = while_program()
    body["nodes"][0]["body"]["outputs"] = ["j", "n", "n"]
    with pytest.raises(TensordError) as e:
        client.run(body, inputs={"i": np.array(0), "x": np.ones(3, np.float32), "n": np.array(3)})
    assert e.value.status == 400


def test_pred_must_be_bool_scalar(client):
    prog = cond_program()
    prog["inputs"]["p"] = f32([])
    with pytest.raises(TensordError) as e:
        client.run(prog, inputs={"p": np.array(1, np.float32), "x": np.ones(4, np.float32)})
    assert e.value.status == 422


# ---- associative_scan: the parallel (Hillis-Steele) path, its fallback.

def scan_program(dtypes, shape, combine_nodes, combine_out, dim=0, reverse=False, slice_shape=None):
    """ys_k = associative_scan(xs_k...) with combine_fn(l0.., r0..)."""
    if slice_shape is None:
        slice_shape = [s for i, s in enumerate(shape) if i != (dim % len(shape))]
    k = len(dtypes)
    cin = {}
    for side in "lr":
        for i, dt in enumerate(dtypes):
            cin[f"{side}{i}"] = {"dtype": dt, "shape": list(slice_shape)}
    return {"inputs": {f"x{i}": {"dtype": dt, "shape": list(shape)} for i, dt in enumerate(dtypes)},
            "nodes": [{"id": "a", "op": "associative_scan", "args": [[f"x{i}" for i in range(k)]],
                       "kwargs": {"dim": dim, "reverse": reverse}, "outputs": [f"y{i}" for i in range(k)],
                       "combine_fn": sub(cin, combine_nodes, combine_out)}],
            "outputs": [f"y{i}" for i in range(k)]}


def binary(op, dtype, shape, **kw):
    return scan_program([dtype], shape, [{"id": "c", "op": op, "args": ["l0", "r0"], "outputs": ["o"]}], ["o"], **kw)


def op_launches(client, op):
    for line in client.metrics().splitlines():
        if line.startswith(f'tensord_op_launches_total{{backend="cpu",op="{op}"}}'):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 17, 1000])
def test_associative_scan_parallel_matches_numpy(client, n):
    rng = np.random.default_rng(n)
    x = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    out = client.run(binary("add", "float32", [n, 3]), inputs={"x0": x})
    np.testing.assert_allclose(out["y0"], np.cumsum(x.astype(np.float64), axis=0), rtol=1e-4, atol=1e-4)
    xi = rng.integers(1, 3, n).astype(np.int64) if n < 60 else np.ones(n, np.int64)
    out = client.run(binary("mul", "int64", [n]), inputs={"x0": xi})
    np.testing.assert_array_equal(out["y0"], np.cumprod(xi))
    out = client.run(binary("maximum", "float32", [n, 3]), inputs={"x0": x})
    np.testing.assert_array_equal(out["y0"], np.maximum.accumulate(x, axis=0))


@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_dim1_reverse(client, reverse):
    x = np.random.default_rng(1).uniform(-1, 1, (2, 33, 4)).astype(np.float32)
    out = client.run(binary("add", "float32", [2, 33, 4], dim=1, reverse=reverse), inputs={"x0": x})
    ref = np.flip(np.cumsum(np.flip(x, 1), 1), 1) if reverse else np.cumsum(x, 1)
    np.testing.assert_allclose(out["y0"], ref, rtol=1e-5, atol=1e-5)


AFFINE = [{"id": "aa", "op": "mul", "args": ["l0", "r0"], "outputs": ["a"]},
          {"id": "ab", "op": "mul", "args": ["r0", "l1"], "outputs": ["t"]},
          {"id": "bb", "op": "add", "args": ["t", "r1"], "outputs": ["b"]}]


@pytest.mark.parametrize("n,reverse", [(17, False), (1000, False), (1000, True)])
def test_associative_scan_non_commutative_affine(client, n, reverse):
    # (a1, b1) then (a2, b2) = (a1 a2, a2 b1 + b2): x -> a2 (a1 x + b1) + b2.
    rng = np.random.default_rng(2)
    a = rng.uniform(0.9, 1.1, n).astype(np.float32)
    b = rng.uniform(-1, 1, n).astype(np.float32)
    out = client.run(scan_program(["float32", "float32"], [n], AFFINE, ["a", "b"], reverse=reverse),
                     inputs={"x0": a, "x1": b})
    ra, rb = np.empty(n), np.empty(n)
    order = range(n - 1, -1, -1) if reverse else range(n)
    acc = None
    for i in order:
        acc = (float(a[i]), float(b[i])) if acc is None else (acc[0] * a[i], a[i] * acc[1] + b[i])
        ra[i], rb[i] = acc
    np.testing.assert_allclose(out["y0"], ra, rtol=1e-4)
    np.testing.assert_allclose(out["y1"], rb, rtol=1e-4, atol=1e-4)


def test_associative_scan_takes_the_parallel_path(client):
    # cummin over 1000 elements: ceil(log2 1000) = 10 launches of the
    # combine's minimum (one per level), not 999.
    x = np.random.default_rng(3).uniform(size=1000).astype(np.float32)
    before = op_launches(client, "minimum")
    out = client.run(binary("minimum", "float32", [1000]), inputs={"x0": x})
    np.testing.assert_array_equal(out["y0"], np.minimum.accumulate(x))
    assert op_launches(client, "minimum") - before == 10


def test_associative_scan_unbatchable_combine_falls_back(client):
    # (1, 3) slices: o = l + sum(r, dim=0, keepdim) is l + r per slice, but a
    # batched sum would reduce over the batch: runs sequentially (n-1 sums).
    n = 40
    x = np.random.default_rng(4).uniform(-1, 1, (n, 1, 3)).astype(np.float32)
    nodes = [{"id": "s", "op": "sum", "args": ["r0"], "kwargs": {"dim": 0, "keepdim": True}, "outputs": ["t"]},
             {"id": "o", "op": "add", "args": ["l0", "t"], "outputs": ["o"]}]
    before = op_launches(client, "sum")
    out = client.run(scan_program(["float32"], [n, 1, 3], nodes, ["o"]), inputs={"x0": x})
    np.testing.assert_allclose(out["y0"], np.cumsum(x, 0), rtol=1e-5, atol=1e-5)
    assert op_launches(client, "sum") - before == n - 1


def test_associative_scan_multi_input_mixed_dtypes(client):
    n = 100
    x = np.random.default_rng(5).uniform(size=n).astype(np.float32)
    nodes = [{"id": "s", "op": "add", "args": ["l0", "r0"], "outputs": ["s"]},
             {"id": "k", "op": "add", "args": ["l1", "r1"], "outputs": ["k"]}]
    out = client.run(scan_program(["float32", "int32"], [n], nodes, ["s", "k"]),
                     inputs={"x0": x, "x1": np.ones(n, np.int32)})
    np.testing.assert_allclose(out["y0"], np.cumsum(x), rtol=1e-5)
    np.testing.assert_array_equal(out["y1"], np.arange(1, n + 1))


def test_associative_scan_bad_combine_rejected(client):
    # combine_fn returning the wrong shape, and a combine that declares the
    # wrong slice shape: 400 before running.
    bad = scan_program(["float32"], [5, 3], [{"id": "s", "op": "sum", "args": ["r0"], "outputs": ["o"]}], ["o"])
    with pytest.raises(TensordError) as e:
        client.run(bad, inputs={"x0": np.zeros((5, 3), np.float32)})
    assert e.value.status == 400 and e.value.code == "invalid_program"
    wrong = binary("add", "float32", [5, 3], slice_shape=[4])
    with pytest.raises(TensordError) as e:
        client.run(wrong, inputs={"x0": np.zeros((5, 3), np.float32)})
    assert e.value.status == 400 and e.value.code == "invalid_program"


def test_associative_scan_in_a_captured_graph(client):
    # The batched combine variants are compiled once, with the graph, and
    # reused: every replay is parallel (10 launches) and matches numpy.
    g = client.capture(binary("minimum", "float32", [1000]), {"x0": ("float32", [1000])})
    rng = np.random.default_rng(6)
    for _ in range(3):
        x = rng.uniform(size=1000).astype(np.float32)
        before = op_launches(client, "minimum")
        out = g.replay(x0=x)
        np.testing.assert_array_equal(out["y0"], np.minimum.accumulate(x))
        assert op_launches(client, "minimum") - before == 10


def test_a_value_listed_twice_in_outputs(client):
    """API.md 4: outputs may name one value more than once; the answer names it once."""
    prog = {"inputs": {"x": f32([3])},
            "nodes": [{"id": "a", "op": "add", "args": ["x", 1.0], "outputs": ["y"]}],
            "outputs": ["y", "y"]}
    out = client.run(prog, inputs={"x": np.array([1, 2, 3], np.float32)})
    assert list(out) == ["y"]
    np.testing.assert_array_equal(out["y"], [2, 3, 4])


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_body_returns_its_carry_as_its_y(client, reverse):
    """torch's cumsum-by-scan idiom: the body returns the new carry twice (carry and y)."""
    xs = np.random.default_rng(5).random(6).astype(np.float32)
    prog = {"inputs": {"init": f32([]), "xs": f32([6])},
            "nodes": [{"id": "s", "op": "scan", "args": ["init", "xs"], "kwargs": {"reverse": reverse},
                       "outputs": ["c", "ys"],
                       "body": sub({"c": f32([]), "x": f32([])},
                                   [{"id": "a", "op": "add", "args": ["c", "x"], "outputs": ["c2"]}],
                                   ["c2", "c2"])}],
            "outputs": ["c", "ys"]}
    out = client.run(prog, inputs={"init": np.array(0, np.float32), "xs": xs})
    src = xs[::-1] if reverse else xs
    ref = np.cumsum(src)
    if reverse:
        ref = ref[::-1]
    np.testing.assert_allclose(out["ys"], ref, rtol=1e-6)
    np.testing.assert_allclose(out["c"], xs.sum(), rtol=1e-6)
    # And captured: the replay plan takes the same program.
    g = client.capture(prog, {"init": ("float32", []), "xs": ("float32", [6])})
    rep = g.replay(init=np.array(0, np.float32), xs=xs)
    np.testing.assert_allclose(rep["ys"], out["ys"], rtol=0, atol=0)
