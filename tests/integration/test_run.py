"""Programs (POST /v1/run), eigh, and the service routes (API.md 4, 5, 9)."""

import json
import random
import re
import uuid

import numpy as np
import pytest
import requests

import tensord
from tensord import safetensors as st

SAFETENSORS = "application/vnd.safetensors"


def jt(arr):
    """JSON tensor (b64) of a numpy array."""
    return tensord.to_json_tensor(arr)


def run_json(base, body, **kw):
    return requests.post(base + "/v1/run", data=json.dumps(body), headers={"Content-Type": "application/json"}, **kw)


def outputs_of(resp):
    assert resp.status_code == 200, resp.text
    doc = resp.json()
    return {k: tensord.from_json_tensor(v) for k, v in doc["outputs"].items()}, doc


# ---------------------------------------------------------------- a 13-node program

BIG_NODES = [
    {"id": "n1", "op": "add", "args": ["x", 1.5], "outputs": ["a1"]},
    {"id": "n2", "op": "mul", "args": ["a1", "x"], "outputs": ["a2"]},
    {"id": "n3", "op": "exp", "args": ["x"], "outputs": ["e"]},
    {"id": "n4", "op": "matmul", "args": ["a2", "y"], "outputs": ["mm"]},
    {"id": "n5", "op": "transpose", "args": ["mm", 0, 1], "outputs": ["t"]},
    {"id": "n6", "op": "reshape", "args": ["t", [2, -1]], "outputs": ["r"]},
    {"id": "n7", "op": "gt", "args": ["r", 0.0], "outputs": ["c"]},
    {"id": "n8", "op": "where", "args": ["c", "r", "mm"], "outputs": ["w"]},
    {"id": "n9", "op": "amax", "args": ["w"], "kwargs": {"dim": 1}, "outputs": ["am"]},
    {"id": "n10", "op": "mean", "args": ["w"], "kwargs": {"dim": 0}, "outputs": ["me"]},
    {"id": "n11", "op": "cat", "args": [["w", "mm"]], "kwargs": {"dim": 0}, "outputs": ["ct"]},
    {"id": "n12", "op": "sum", "args": ["ct"], "outputs": ["total"]},
    {"id": "n13", "op": "sum", "args": ["e"], "kwargs": {"dim": [0, 1], "keepdim": True}, "outputs": ["es"]},
]
BIG_OUTPUTS = ["am", "me", "ct", "total", "es", "e"]


def big_program(shuffle_seed=None):
    nodes = [dict(n) for n in BIG_NODES]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(nodes)
    return {"inputs": {"x": {"dtype": "float32", "shape": [2, 3]}, "y": {"dtype": "float32", "shape": [3, 4]}},
            "nodes": nodes, "outputs": list(BIG_OUTPUTS)}


def big_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((2, 3)).astype(np.float32),
            "y": rng.standard_normal((3, 4)).astype(np.float32)}


def big_reference(x, y):
    a1 = x + np.float32(1.5)
    a2 = a1 * x
    e = np.exp(x)
    mm = a2 @ y
    t = mm.T
    r = t.reshape(2, -1)
    c = r > 0
    w = np.where(c, r, mm)
    return {"am": w.max(axis=1), "me": w.mean(axis=0), "ct": np.concatenate([w, mm], 0),
            "total": np.float32(np.concatenate([w, mm], 0).sum()), "es": e.sum(axis=(0, 1), keepdims=True), "e": e}


def check_big(out, ref):
    assert set(out) >= set(BIG_OUTPUTS), sorted(out)
    for k in BIG_OUTPUTS:
        got = np.asarray(out[k])
        want = np.asarray(ref[k], dtype=np.float32)
        assert got.dtype == np.float32, (k, got.dtype)
        assert got.shape == want.shape, (k, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("transport", ["safetensors", "json"])
def test_big_program(server, transport):
    c = tensord.Client(server.url, transport=transport)
    inp = big_inputs()
    out = c.run(big_program(), inputs=inp)
    check_big(out, big_reference(**inp))
    job = c.last_job
    assert isinstance(job, dict) and "id" in job
    for k in ("queue_ms", "run_ms", "program_sha256", "backend"):
        assert k in job, job
    assert job["backend"]["name"] == "cpu"
    c.close()


def test_big_program_raw_json(base_url):
    inp = big_inputs(3)
    resp = run_json(base_url, {"program": big_program(), "inputs": {k: jt(v) for k, v in inp.items()}})
    out, doc = outputs_of(resp)
    check_big(out, big_reference(**inp))


def test_nodes_out_of_order(client):
    inp = big_inputs(1)
    ref = big_reference(**inp)
    for seed in (1, 2, 3):
        prog = big_program(shuffle_seed=seed)
        prog["nodes"].reverse()
        check_big(client.run(prog, inputs=inp), ref)


def test_same_program_same_sha(client):
    inp = big_inputs(1)
    client.run(big_program(), inputs=inp)
    sha1 = client.last_job["program_sha256"]
    client.run(big_program(), inputs=big_inputs(2))
    assert client.last_job["program_sha256"] == sha1
    assert re.fullmatch(r"[0-9a-f]{64}", sha1)


def test_store_and_return(client, uniq):
    inp = big_inputs(4)
    ref = big_reference(**inp)
    out = client.run(big_program(), inputs=inp, store={"total": uniq + "/total", "ct": uniq + "/ct"})
    # default return: every output not stored
    assert set(out) == set(BIG_OUTPUTS) - {"total", "ct"}, sorted(out)
    np.testing.assert_allclose(client.get(uniq + "/total"), ref["total"], rtol=1e-5)
    np.testing.assert_allclose(client.get(uniq + "/ct"), ref["ct"], rtol=1e-5)
    assert client.head(uniq + "/ct") == ("float32", [4, 4])
    # explicit return selection
    out = client.run(big_program(), inputs=inp, return_=["am"])
    assert set(out) == {"am"}
    np.testing.assert_allclose(out["am"], ref["am"], rtol=1e-5)
    # a stored output can also be returned
    out = client.run(big_program(), inputs=inp, store={"me": uniq + "/me"}, return_=["me", "total"])
    assert set(out) == {"me", "total"}
    np.testing.assert_allclose(client.get(uniq + "/me"), out["me"])


def test_stored_and_inline_args(client, uniq):
    base = np.array([[10, 20, 30], [40, 50, 60]], np.float32)
    client.put(uniq + "/base", base)
    x = np.ones((2, 3), np.float32)
    prog = {"inputs": {"x": {"dtype": "float32", "shape": [2, 3]}},
            "nodes": [
                {"id": "a", "op": "add", "args": ["$stored/%s/base" % uniq, "x"], "outputs": ["s"]},
                {"id": "b", "op": "mul", "args": ["s", {"dtype": "float32", "shape": [3], "data": [1, 2, 3]}],
                 "outputs": ["m"]},
                {"id": "c", "op": "sub", "args": ["m", {"dtype": "float32", "shape": [], "data": 1}],
                 "outputs": ["r"]},
            ],
            "outputs": ["r"]}
    out = client.run(prog, inputs={"x": x})
    np.testing.assert_array_equal(out["r"], (base + x) * np.array([1, 2, 3], np.float32) - 1)


def test_program_without_inputs(client):
    prog = {"inputs": {},
            "nodes": [{"id": "z", "op": "zeros", "args": [[2, 3]], "kwargs": {"dtype": "int64"}, "outputs": ["z"]},
                      {"id": "o", "op": "ones", "args": [[2, 3]], "kwargs": {"dtype": "int64"}, "outputs": ["o"]},
                      {"id": "s", "op": "add", "args": ["z", "o"], "outputs": ["s"]},
                      {"id": "f", "op": "to", "args": ["s"], "kwargs": {"dtype": "float32"}, "outputs": ["f"]}],
            "outputs": ["s", "f"]}
    out = client.run(prog)
    assert out["s"].dtype == np.int64 and out["s"].tolist() == [[1, 1, 1]] * 2
    assert out["f"].dtype == np.float32


def nan_matrix():
    a = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
    a = a + a.T
    a[:, 1] = np.nan
    a[1, :] = np.nan
    return a


def test_failed_program_commits_nothing(client, uniq):
    """A program storing an output whose later node fails at run time stores nothing."""
    prog = {"inputs": {"a": {"dtype": "float32", "shape": [3, 3]}},
            "nodes": [{"id": "s", "op": "mul", "args": ["a", 2.0], "outputs": ["s"]},
                      {"id": "eig", "op": "linalg.eigh", "args": ["s"], "outputs": ["w", "v"]}],
            "outputs": ["s", "w", "v"]}
    with pytest.raises(tensord.TensordError) as ei:
        client.run(prog, inputs={"a": nan_matrix()}, store={"s": uniq + "/s"})
    assert ei.value.status == 422 and ei.value.code == "numerical_error", ei.value
    assert ei.value.node == "eig"
    with pytest.raises(tensord.TensordError) as ei:
        client.get(uniq + "/s")
    assert ei.value.status == 404
    # and an existing stored tensor is left unchanged
    old = np.full((3, 3), 7.0, np.float32)
    client.put(uniq + "/s", old)
    with pytest.raises(tensord.TensordError):
        client.run(prog, inputs={"a": nan_matrix()}, store={"s": uniq + "/s"})
    np.testing.assert_array_equal(client.get(uniq + "/s"), old)


def copy_program(uniq):
    return {"inputs": {"a": {"dtype": "float32", "shape": [4]}, "b": {"dtype": "float32", "shape": [3, 3]}},
            "nodes": [{"id": "cp", "op": "copy_", "args": ["$stored/%s/x" % uniq, "a"], "outputs": []},
                      {"id": "eig", "op": "linalg.eigvalsh", "args": ["b"], "outputs": ["w"]}],
            "outputs": ["w"]}


def test_copy_into_stored_commits_on_success(client, uniq):
    client.put(uniq + "/x", np.zeros(4, np.float32))
    new = np.array([1, 2, 3, 4], np.float32)
    client.run(copy_program(uniq), inputs={"a": new, "b": np.eye(3, dtype=np.float32)})
    np.testing.assert_array_equal(client.get(uniq + "/x"), new)


def test_copy_into_stored_rolled_back_on_failure(client, uniq):
    old = np.array([9, 8, 7, 6], np.float32)
    client.put(uniq + "/x", old)
    with pytest.raises(tensord.TensordError) as ei:
        client.run(copy_program(uniq), inputs={"a": np.array([1, 2, 3, 4], np.float32), "b": nan_matrix()})
    assert ei.value.status == 422 and ei.value.code == "numerical_error", ei.value
    np.testing.assert_array_equal(client.get(uniq + "/x"), old)


# ---------------------------------------------------------------- eigh

def hermitian(dtype, batch, n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(batch + (n, n))
    a = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
    return a.astype(dtype)


@pytest.mark.parametrize("transport", ["safetensors", "json"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("shape", [((7,), 8), ((2, 3), 5), ((), 16), ((4,), 1), ((3,), 33)])
def test_eigh(server, dtype, shape, transport):
    batch, n = shape
    c = tensord.Client(server.url, transport=transport)
    a = hermitian(dtype, batch, n, seed=n)
    w, v = c.eigh(a)
    real = np.float32 if dtype in ("float32", "complex64") else np.float64
    assert w.dtype == real and w.shape == batch + (n,)
    assert v.dtype == np.dtype(dtype) and v.shape == batch + (n, n)
    tol = 1e-4 if real == np.float32 else 1e-10
    a64 = a.astype(np.complex128)
    v64 = v.astype(np.complex128)
    scale = max(1.0, np.abs(a64).max()) * n
    resid = np.abs(a64 @ v64 - v64 * w.astype(np.float64)[..., None, :]).max()
    assert resid <= tol * scale, resid
    ortho = np.abs(np.conj(np.swapaxes(v64, -1, -2)) @ v64 - np.eye(n)).max()
    assert ortho <= tol * n, ortho
    assert np.all(np.diff(w, axis=-1) >= 0), "eigenvalues not ascending"
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a64), atol=tol * scale)
    w2 = c.eigvalsh(a)
    np.testing.assert_allclose(w2, w, atol=tol * scale)
    c.close()


def test_eigh_upper(client):
    a = hermitian("float64", (3,), 6, seed=5)
    lower_only = np.tril(a)
    upper_only = np.triu(a)
    w_l, _ = client.eigh(lower_only, UPLO="L")
    w_u, _ = client.eigh(upper_only, UPLO="U")
    ref = np.linalg.eigvalsh(a)
    np.testing.assert_allclose(w_l, ref, atol=1e-10)
    np.testing.assert_allclose(w_u, ref, atol=1e-10)


# ---------------------------------------------------------------- service routes

def test_info(client):
    info = client.info()
    for k in ("version", "backend", "devices"):
        assert k in info, info
    backend = info["backend"]
    name = backend["name"] if isinstance(backend, dict) else backend
    assert name == "cpu"
    assert isinstance(info["devices"], list) and len(info["devices"]) >= 1


def _ops_by_name(doc):
    if isinstance(doc, dict) and "ops" in doc:
        doc = doc["ops"]
    if isinstance(doc, dict):
        return {k: (v if isinstance(v, dict) else {"signature": v}) for k, v in doc.items()}
    return {o["name"]: o for o in doc}


def test_ops(client):
    ops = _ops_by_name(client.ops())
    for name in ("add", "mul", "exp", "sum", "matmul", "transpose", "reshape", "where", "amax", "mean", "cat",
                 "linalg.eigh", "linalg.eigvalsh", "copy_", "to", "zeros"):
        assert name in ops, name
    for name, o in ops.items():
        assert o.get("signature"), (name, o)
    assert "UPLO" in json.dumps(ops["linalg.eigh"])


DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
          "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"]


def test_ops_lists_control_flow_and_dtype_lists(client):
    """Issue 13: /v1/ops lists the control-flow ops, and every op's dtypes
    as a list of dtype names (not prose)."""
    ops = _ops_by_name(client.ops())
    subprograms = {"cond": ["then", "else"], "while_loop": ["cond", "body"], "scan": ["body"], "map": ["body"],
                   "associative_scan": ["combine_fn"]}
    for name, subs in subprograms.items():
        assert name in ops, name
        o = ops[name]
        assert o["dtypes"] == DTYPES, (name, o["dtypes"])
        assert o["subprograms"] == subs, (name, o)
        assert o["signature"].startswith(name + "("), o
        assert "cpu" in o["backends"], o
    for name, o in ops.items():
        assert isinstance(o["dtypes"], list) and o["dtypes"], (name, o["dtypes"])
        assert all(d in DTYPES for d in o["dtypes"]), (name, o["dtypes"])
        assert o["dtypes"] == [d for d in DTYPES if d in o["dtypes"]], (name, "in dtype order")
    assert ops["linalg.eigh"]["dtypes"] == ["float32", "float64", "complex64", "complex128"]
    assert "bool" not in ops["sub"]["dtypes"] and "complex64" in ops["sub"]["dtypes"]


def test_ops_dtype_lists_say_what_runs(client):
    """A dtype an op lists runs; one it leaves out is refused with 4xx."""
    ops = _ops_by_name(client.ops())
    x = np.array([[1, 2], [3, 4]])
    for name in ("relu", "neg"):
        for dt in ("int32", "float32"):
            assert dt in ops[name]["dtypes"]
            prog = {"inputs": {"x": {"dtype": dt, "shape": [2, 2]}},
                    "nodes": [{"id": "n", "op": name, "args": ["x"], "outputs": ["y"]}], "outputs": ["y"]}
            out = client.run(prog, inputs={"x": x.astype(dt)})
            assert out["y"].shape == (2, 2)
    assert "bool" not in ops["neg"]["dtypes"]
    prog = {"inputs": {"x": {"dtype": "bool", "shape": [2]}},
            "nodes": [{"id": "n", "op": "neg", "args": ["x"], "outputs": ["y"]}], "outputs": ["y"]}
    with pytest.raises(tensord.TensordError) as e:
        client.run(prog, inputs={"x": np.array([True, False])})
    assert 400 <= e.value.status < 500


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/v2/health/live", "/v2/health/ready"])
def test_health(base_url, path):
    r = requests.get(base_url + path)
    assert r.status_code == 200, r.text
    assert "X-Request-Id" in r.headers


def test_metrics(base_url, uniq):
    requests.put(base_url + "/v1/tensors/" + uniq + "/m", json={"dtype": "float32", "shape": [1], "data": [1]})
    requests.get(base_url + "/v1/tensors/" + uniq + "/m")
    requests.get(base_url + "/v1/tensors/" + uniq + "/nonexistent")
    r = requests.get(base_url + "/metrics")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain")
    text = r.text
    assert re.search(r"^tensord_build_info\{[^}]*version=\"[^\"]+\"[^}]*\} 1(\.0+)?$", text, re.M) or \
        re.search(r"^tensord_build_info\{[^}]*\} 1", text, re.M), "no tensord_build_info"
    assert 'backend="cpu"' in re.search(r"^tensord_build_info\{.*$", text, re.M).group(0)
    lines = [l for l in text.splitlines() if l.startswith("tensord_http_requests_total{")]
    assert lines, "no tensord_http_requests_total"
    tensor_lines = [l for l in lines if 'route="/v1/tensors/{name}"' in l]
    assert tensor_lines, lines
    assert any('method="PUT"' in l for l in tensor_lines)
    assert any('code="404"' in l for l in tensor_lines)
    assert uniq not in text, "a raw path leaked into metric labels"
    assert "# TYPE tensord_http_requests_total counter" in text
    assert "tensord_http_request_duration_seconds_bucket" in text


def test_request_id(base_url):
    r = requests.get(base_url + "/healthz")
    rid = r.headers.get("X-Request-Id")
    assert rid
    r2 = requests.get(base_url + "/healthz")
    assert r2.headers.get("X-Request-Id") != rid
    mine = "test-" + uuid.uuid4().hex
    for method, path in (("GET", "/healthz"), ("GET", "/v1/info"), ("GET", "/v1/tensors/does/not/exist"),
                         ("GET", "/no/such/route"), ("POST", "/v1/run")):
        r = requests.request(method, base_url + path, headers={"X-Request-Id": mine}, data=b"{" if method == "POST" else None)
        assert r.headers.get("X-Request-Id") == mine, (method, path, r.status_code, r.headers)
        if r.status_code >= 400:
            assert r.json()["error"].get("request_id") in (None, mine)


def test_concurrent_clients(server, uniq):
    """Many clients at once: every answer is right and the server stays up."""
    import threading

    errors = []

    def worker(k):
        try:
            c = tensord.Client(server.url, transport="safetensors" if k % 2 else "json")
            for i in range(15):
                inp = big_inputs(100 * k + i)
                check_big(c.run(big_program(shuffle_seed=i), inputs=inp), big_reference(**inp))
                name = "%s/w%d/%d" % (uniq, k, i)
                c.put(name, inp["x"])
                assert np.array_equal(c.get(name), inp["x"])
                c.delete(name)
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert requests.get(server.url + "/healthz").status_code == 200


# ---------------------------------------------------------------- PyTorch semantics (checked against torch 1.13+)

def _bf16(vals):
    return tensord.TensorData.from_float(np.array(vals, np.float32), "bfloat16")


_rng = np.random.default_rng(7)
_A = _rng.standard_normal((2, 1, 3, 4)).astype(np.float32)
_B = _rng.standard_normal((5, 4, 2)).astype(np.float32)
_V = _rng.standard_normal(4).astype(np.float32)
_M = _rng.standard_normal((4, 3)).astype(np.float32)

# (id, op, args (input names or literals), kwargs, inputs, expected numpy array or (status, codes))
SEMANTICS = [
    ("add_i32_i64", "add", ["a", "b"], {}, {"a": np.array([1], np.int32), "b": np.array([1], np.int64)}, np.array([2], np.int64)),
    ("add_i64_f32", "add", ["a", "b"], {}, {"a": np.array([1], np.int64), "b": np.array([1.5], np.float32)}, np.array([2.5], np.float32)),
    ("add_f16_f32", "add", ["a", "b"], {}, {"a": np.array([1], np.float16), "b": np.array([1.5], np.float32)}, np.array([2.5], np.float32)),
    ("add_i64_pyfloat", "add", ["a", 1.5], {}, {"a": np.array([1], np.int64)}, np.array([2.5], np.float32)),
    ("add_f16_pyfloat", "add", ["a", 1.0], {}, {"a": np.array([1], np.float16)}, np.array([2], np.float16)),
    ("add_i8_wraps", "add", ["a", 100], {}, {"a": np.array([100], np.int8)}, np.array([-56], np.int8)),
    ("add_u8_i8", "add", ["a", "b"], {}, {"a": np.array([1], np.uint8), "b": np.array([1], np.int8)}, np.array([2], np.int16)),
    ("add_bool_bool", "add", ["a", "b"], {}, {"a": np.array([True]), "b": np.array([True])}, np.array([True])),
    ("add_bf16_f16", "add", ["a", "b"], {}, {"a": _bf16([1.0]), "b": np.array([1.0], np.float16)}, np.array([2.0], np.float32)),
    ("mul_f32_c64", "mul", ["a", "b"], {}, {"a": np.array([2], np.float32), "b": np.array([1j], np.complex64)}, np.array([2j], np.complex64)),
    ("add_0dim_f64_f32", "add", ["a", "b"], {}, {"a": np.array(1.0, np.float64), "b": np.array([1.5], np.float32)}, np.array([2.5], np.float32)),
    ("div_int_true_division", "div", ["a", "b"], {}, {"a": np.array([3], np.int64), "b": np.array([2], np.int64)}, np.array([1.5], np.float32)),
    ("sum_i32_gives_i64", "sum", ["a"], {}, {"a": np.array([1, 2], np.int32)}, np.array(3, np.int64)),
    ("sum_bool_gives_i64", "sum", ["a"], {}, {"a": np.array([True, True])}, np.array(2, np.int64)),
    ("sum_negative_dim", "sum", ["a"], {"dim": -1}, {"a": np.arange(6, dtype=np.float32).reshape(2, 3)}, np.array([3, 12], np.float32)),
    ("amax_bool", "amax", ["a"], {}, {"a": np.array([True, False])}, np.array(True)),
    ("argmax_dim", "argmax", ["a"], {"dim": 1}, {"a": np.array([[1, 5, 2], [7, 0, 9]], np.int64)}, np.array([1, 2], np.int64)),
    ("where_promotes", "where", ["c", "a", "b"], {}, {"c": np.array([True, False]), "a": np.array([1], np.int64), "b": np.array([2.5], np.float32)},
     np.array([1, 2.5], np.float32)),
    ("cat_promotes", "cat", [["a", "b"]], {}, {"a": np.array([1], np.int64), "b": np.array([1.5], np.float32)}, np.array([1, 1.5], np.float32)),
    ("to_int_truncates", "to", ["a"], {"dtype": "int64"}, {"a": np.array([2.5, 3.5, -2.5], np.float32)}, np.array([2, 3, -2], np.int64)),
    ("transpose_negative", "transpose", ["a", -1, -2], {}, {"a": np.arange(6, dtype=np.int32).reshape(1, 2, 3)},
     np.arange(6, dtype=np.int32).reshape(1, 2, 3).transpose(0, 2, 1)),
    ("matmul_batched_broadcast", "matmul", ["a", "b"], {}, {"a": _A, "b": _B}, np.matmul(_A, _B)),
    ("matmul_vec_mat", "matmul", ["v", "m"], {}, {"v": _V, "m": _M}, _V @ _M),
    ("matmul_vec_vec", "matmul", ["v", "w"], {}, {"v": _V, "w": _V}, np.array(_V @ _V, np.float32)),
    ("mean_int_is_error", "mean", ["a"], {}, {"a": np.array([1, 2], np.int64)}, (422, ("invalid_argument", "dtype_mismatch"))),
    ("amax_empty_dim_is_error", "amax", ["a"], {"dim": 0}, {"a": np.zeros((0, 3), np.float32)}, (422, ("invalid_argument",))),
]


@pytest.mark.parametrize("case", SEMANTICS, ids=[c[0] for c in SEMANTICS])
def test_pytorch_semantics(json_client, case):
    cid, op, args, kwargs, inputs, expect = case
    prog = {"inputs": {k: {"dtype": tensord.client.dtype_name_of(v), "shape": tensord.client.shape_of(v)}
                       for k, v in inputs.items()},
            "nodes": [{"id": "n", "op": op, "args": args, "kwargs": kwargs, "outputs": ["y"]}],
            "outputs": ["y"]}
    if isinstance(expect, tuple):
        with pytest.raises(tensord.TensordError) as ei:
            json_client.run(prog, inputs=inputs)
        assert ei.value.status == expect[0] and ei.value.code in expect[1], ei.value
        assert ei.value.node == "n"
        return
    y = json_client.run(prog, inputs=inputs)["y"]
    assert isinstance(y, np.ndarray), y
    assert y.dtype == expect.dtype, (y.dtype, expect.dtype)
    assert y.shape == expect.shape, (y.shape, expect.shape)
    if expect.dtype.kind in "fc":
        np.testing.assert_allclose(y, expect, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(y, expect)
