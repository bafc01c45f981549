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
