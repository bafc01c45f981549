"""matmul with an MX operand (API.md 7, docs/api-notes.md "MX") against the
real binary: a stored or in-program MX tensor on either side (or both),
blocks along or across the contraction, batches; the result is float32 and
matches numpy's matmul of the client's spec dequantize (written from the
spec, not from the server) within float32 summation error. A non-float32
partner is 422 dtype_mismatch, a bad shape 422 shape_mismatch, and other
ops still refuse MX operands."""

import numpy as np
import pytest

import tensord


def data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def quantized(c, x, fmt, axis=-1, block_size=32, name=None):
    prog = {"nodes": [{"id": "q", "op": "mx.quantize", "args": ["x", fmt],
                       "kwargs": {"axis": axis, "block_size": block_size, "scale_rounding": "rceil"},
                       "outputs": ["q"]}], "outputs": ["q"]}
    kw = {"store": {"q": name}, "return_": ["q"]} if name else {}
    return c.run(prog, inputs={"x": x}, **kw)["q"]


def check(got, a, b):
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    mag = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert got.dtype == np.float32 and got.shape == want.shape
    assert (np.abs(got - want) <= 2e-6 * mag + 1e-30).all()


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1"])
@pytest.mark.parametrize("axis", [0, -1])
def test_stored_mx_weight_on_the_right(client, uniq, fmt, axis):
    w = data((64, 96), 1)
    name = "mxmm/%s/w" % uniq
    q = quantized(client, w, fmt, axis=axis, name=name)
    x = data((5, 64), 2)
    r = client.run({"nodes": [{"id": "y", "op": "matmul", "args": ["x", "$stored/" + name], "outputs": ["y"]}],
                    "outputs": ["y"]}, inputs={"x": x})
    check(r["y"], x, q.dequantize())


def test_mx_on_the_left_both_sides_and_batches(client):
    a = data((2, 3, 64), 3)
    b = data((64, 32), 4)
    prog = {"nodes": [
        {"id": "qa", "op": "mx.quantize", "args": ["a", "mxfp8_e5m2"], "outputs": ["qa"]},
        {"id": "qb", "op": "mx.quantize", "args": ["b", "mxfp4_e2m1"], "kwargs": {"axis": 0}, "outputs": ["qb"]},
        {"id": "l", "op": "matmul", "args": ["qa", "b"], "outputs": ["l"]},
        {"id": "r", "op": "matmul", "args": ["a", "qb"], "outputs": ["r"]},
        {"id": "both", "op": "matmul", "args": ["qa", "qb"], "outputs": ["both"]},
    ], "outputs": ["qa", "qb", "l", "r", "both"]}
    out = client.run(prog, inputs={"a": a, "b": b})
    da, db = out["qa"].dequantize(), out["qb"].dequantize()
    check(out["l"], da, b)
    check(out["r"], a, db)
    check(out["both"], da, db)
    assert out["both"].shape == (2, 3, 32)


def test_refusals(client):
    w = data((64, 32), 5)
    base = [{"id": "q", "op": "mx.quantize", "args": ["w", "mxfp8_e4m3"], "kwargs": {"axis": 0}, "outputs": ["q"]}]

    def run(extra, **inputs):
        return client.run({"nodes": base + extra, "outputs": [extra[-1]["id"]]}, inputs=dict(w=w, **inputs))

    with pytest.raises(tensord.DtypeMismatch) as e:
        run([{"id": "y", "op": "matmul", "args": ["x", "q"], "outputs": ["y"]}], x=data((3, 64)).astype(np.float64))
    assert e.value.status == 422 and "float32" in str(e.value)
    with pytest.raises(tensord.DtypeMismatch):
        run([{"id": "y", "op": "matmul", "args": ["q", "x"], "outputs": ["y"]}], x=data((32, 2)).astype(np.float16))
    with pytest.raises(tensord.ShapeMismatch) as e:
        run([{"id": "y", "op": "matmul", "args": ["x", "q"], "outputs": ["y"]}], x=data((3, 63)))
    assert e.value.status == 422
    # Other ops still refuse an MX operand, naming mx.dequantize.
    with pytest.raises(tensord.DtypeMismatch) as e:
        run([{"id": "y", "op": "mul", "args": ["x", "q"], "outputs": ["y"]}], x=data((64, 32)))
    assert e.value.status == 422 and "mx.dequantize" in str(e.value)
