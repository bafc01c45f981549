"""Stored tensors: round trips of every dtype in every encoding (API.md 3)."""

import base64
import json
import math

import numpy as np
import pytest
import requests

import tensord
from tensord import TensorData, from_json_tensor
from tensord import safetensors as st

SAFETENSORS = "application/vnd.safetensors"
ALL_DTYPES = list(st.DTYPES)
FLOAT_NAMES = ("float16", "float32", "float64")


def tensor_url(base, name):
    return base + "/v1/tensors/" + name


# ---------------------------------------------------------------- samples

def sample(dtype, mode, seed=0):
    """A test tensor of ``dtype``. mode "bits": any bit pattern (sent as b64 or
    safetensors); mode "data": values exactly representable as JSON numbers."""
    rng = np.random.default_rng(seed + ALL_DTYPES.index(dtype))
    if dtype == "bool":
        return rng.integers(0, 2, size=(3, 5)).astype(np.bool_)
    if dtype in ("uint8", "int8", "int16", "int32", "int64"):
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, size=(4, 6), dtype=dtype, endpoint=True)
        a.flat[0], a.flat[1], a.flat[2] = info.min, info.max, 0
        return a
    if dtype in FLOAT_NAMES:
        a = (rng.standard_normal((4, 5)) * 10.0 ** rng.integers(-3, 4, size=(4, 5))).astype(dtype)
        specials = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.finfo(dtype).tiny / 2, np.finfo(dtype).max,
                    np.finfo(dtype).min, np.finfo(dtype).eps]
        a.flat[:len(specials)] = np.array(specials).astype(dtype)
        if mode == "bits":  # a NaN with a payload and a negative NaN: storage is bytes
            u = a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])
            nan_bits = {2: 0x7E01, 4: 0x7FC00123, 8: 0x7FF8000000000ABC}[a.itemsize]
            u.flat[10] = nan_bits
            u.flat[11] = nan_bits | (1 << (8 * a.itemsize - 1))
        return a
    if dtype in ("complex64", "complex128"):
        real = "float32" if dtype == "complex64" else "float64"
        a = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(dtype)
        r = a.view(real)
        r.flat[0], r.flat[3], r.flat[5] = np.nan, np.inf, -np.inf
        return a
    # narrow floats: raw bits
    if dtype == "bfloat16":
        bits = rng.integers(0, 1 << 16, size=(8, 16), dtype=np.uint16)
        bits.flat[:6] = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x3F80]
        t = TensorData(bits, dtype)
    else:
        t = TensorData(np.arange(256, dtype=np.uint8).reshape(16, 16), dtype)
    if mode == "data":  # replace NaN codes by the canonical one the server will produce
        f = t.to_float32()
        t = TensorData.from_float(f, dtype)
    return t


def json_data(value):
    """Nested JSON ``data`` for a tensor value (non-finite floats as strings)."""
    if isinstance(value, TensorData):
        arr = value.to_float32().astype(np.float64)
    else:
        arr = np.asarray(value)

    def conv(x):
        if isinstance(x, list):
            return [conv(e) for e in x]
        if isinstance(x, complex):
            return [conv(x.real), conv(x.imag)]
        if isinstance(x, float):
            if math.isnan(x):
                return "nan"
            if math.isinf(x):
                return "inf" if x > 0 else "-inf"
        return x

    if arr.ndim == 0:
        return conv(arr.item())
    return conv(arr.tolist())


def canon(value):
    """(dtype, shape, nan mask, bits with NaN elements zeroed) for nan-aware exact comparison."""
    name, shape, raw = st.convert(value)
    storage = st.DTYPES[name][1]
    if name in st.NARROW:
        bits = np.frombuffer(raw, dtype=storage).copy()
        mask = np.isnan(st.bits_to_float32(bits, name))
    elif name in FLOAT_NAMES or name.startswith("complex"):
        real = {"float16": "<f2", "float32": "<f4", "float64": "<f8", "complex64": "<f4",
                "complex128": "<f8"}[name]
        f = np.frombuffer(raw, dtype=real)
        mask = np.isnan(f)
        bits = f.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[f.itemsize]).copy()
    else:
        bits = np.frombuffer(raw, dtype=np.uint8).copy()
        mask = np.zeros(bits.shape, bool)
    bits[mask] = 0
    return name, shape, mask, bits


def assert_same(got, expect, exact):
    ename, eshape, _, _ = canon(expect)
    gname, gshape, _, _ = canon(got)
    assert (gname, gshape) == (ename, eshape)
    if exact:
        assert st.convert(got)[2] == st.convert(expect)[2], "bytes differ"
    else:
        _, _, gm, gb = canon(got)
        _, _, em, eb = canon(expect)
        assert np.array_equal(gm, em), "NaN positions differ"
        bad = np.nonzero(gb != eb)[0]
        assert bad.size == 0, "values differ at flat indices %s: got bits %s, want %s" % (
            bad[:8].tolist(), [hex(int(x)) for x in gb[bad[:8]]], [hex(int(x)) for x in eb[bad[:8]]])


# ---------------------------------------------------------------- encodings

def put_tensor(base, name, value, enc):
    dtype, shape, raw = st.convert(value)
    if enc == "data":
        body = json.dumps({"dtype": dtype, "shape": shape, "data": json_data(value)})
        return requests.put(tensor_url(base, name), data=body, headers={"Content-Type": "application/json"})
    if enc == "b64":
        body = json.dumps({"dtype": dtype, "shape": shape, "b64": base64.b64encode(raw).decode()})
        return requests.put(tensor_url(base, name), data=body, headers={"Content-Type": "application/json"})
    if enc == "safetensors":
        body = st.encode({name: value})
        return requests.put(tensor_url(base, name), data=body, headers={"Content-Type": SAFETENSORS})
    raise ValueError(enc)


def get_tensor(base, name, enc):
    if enc == "json":
        r = requests.get(tensor_url(base, name), headers={"Accept": "application/json"})
        assert r.status_code == 200, r.text
        assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
        return from_json_tensor(r.json())
    r = requests.get(tensor_url(base, name), headers={"Accept": SAFETENSORS})
    assert r.status_code == 200, r.text
    assert r.headers.get("Content-Type", "").startswith(SAFETENSORS), r.headers
    tensors, _ = st.decode(r.content)
    assert len(tensors) == 1, list(tensors)
    return next(iter(tensors.values()))


@pytest.mark.parametrize("get_enc", ["json", "safetensors"])
@pytest.mark.parametrize("put_enc", ["data", "b64", "safetensors"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_roundtrip(base_url, uniq, dtype, put_enc, get_enc):
    value = sample(dtype, "data" if put_enc == "data" else "bits")
    name = "%s/%s" % (uniq, dtype)
    r = put_tensor(base_url, name, value, put_enc)
    assert r.status_code == 201, r.text
    got = get_tensor(base_url, name, get_enc)
    # bytes must survive exactly on a binary path; through JSON numbers NaN
    # payloads are canonicalized (all else stays bit-exact, -0.0 included).
    exact = put_enc != "data" and get_enc == "safetensors"
    assert_same(got, value, exact)


@pytest.mark.parametrize("dtype", ["float32", "int64", "complex128", "bfloat16", "bool"])
def test_empty_tensor(base_url, uniq, dtype):
    if dtype == "bfloat16":
        value = TensorData(np.zeros((0, 3), np.uint16), dtype)
    else:
        value = np.zeros((0, 3), dtype=dtype)
    for enc in ("data", "b64", "safetensors"):
        name = "%s/%s" % (uniq, enc)
        r = put_tensor(base_url, name, value, enc)
        assert r.status_code == 201, r.text
        for genc in ("json", "safetensors"):
            assert_same(get_tensor(base_url, name, genc), value, True)


def test_nested_vs_flat(base_url, uniq):
    nested = {"dtype": "float32", "shape": [2, 3], "data": [[1, 2, 3], [4, 5, 6]]}
    flat = {"dtype": "float32", "shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]}
    for n, doc in (("nested", nested), ("flat", flat)):
        r = requests.put(tensor_url(base_url, "%s/%s" % (uniq, n)), json=doc)
        assert r.status_code == 201, r.text
    want = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    for n in ("nested", "flat"):
        got = get_tensor(base_url, "%s/%s" % (uniq, n), "safetensors")
        assert got.dtype == np.float32 and np.array_equal(got, want)
    # 3-d nested
    doc = {"dtype": "int32", "shape": [2, 2, 2], "data": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]}
    assert requests.put(tensor_url(base_url, uniq + "/n3"), json=doc).status_code == 201
    assert np.array_equal(get_tensor(base_url, uniq + "/n3", "json"), np.arange(1, 9, dtype=np.int32).reshape(2, 2, 2))


def test_scalar(base_url, uniq):
    for i, data in enumerate([5.5, [5.5]]):
        r = requests.put(tensor_url(base_url, "%s/s%d" % (uniq, i)), json={"dtype": "float64", "shape": [], "data": data})
        assert r.status_code == 201, r.text
        for enc in ("json", "safetensors"):
            got = get_tensor(base_url, "%s/s%d" % (uniq, i), enc)
            assert got.shape == () and got.dtype == np.float64 and got == 5.5


def test_nan_inf_strings(base_url, uniq):
    doc = {"dtype": "float32", "shape": [5], "data": ["nan", "inf", "-inf", 1.5, -0.0]}
    assert requests.put(tensor_url(base_url, uniq + "/x"), json=doc).status_code == 201
    got = get_tensor(base_url, uniq + "/x", "safetensors")
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf and got[3] == 1.5
    assert got[4] == 0 and np.signbit(got[4])
    # and the JSON encoding of the server gives them back as strings
    r = requests.get(tensor_url(base_url, uniq + "/x"))
    doc = r.json()
    if "data" in doc:
        flat = doc["data"]
        assert flat[0] == "nan" and flat[1] == "inf" and flat[2] == "-inf", flat


@pytest.mark.parametrize("alias,name,value", [
    ("FP32", "float32", [1.5, 2.5]),
    ("FP64", "float64", [1.5, 2.5]),
    ("FP16", "float16", [1.5, 2.5]),
    ("BF16", "bfloat16", [1.5, 2.5]),
    ("INT64", "int64", [1, -2]),
    ("INT32", "int32", [1, -2]),
    ("INT8", "int8", [1, -2]),
    ("UINT8", "uint8", [1, 2]),
    ("BOOL", "bool", [True, False]),
])
def test_kserve_alias(base_url, uniq, alias, name, value):
    r = requests.put(tensor_url(base_url, uniq), json={"dtype": alias, "shape": [2], "data": value})
    assert r.status_code == 201, r.text
    h = requests.head(tensor_url(base_url, uniq))
    assert h.status_code == 200
    assert h.headers["X-Tensor-Dtype"] == name
    got = get_tensor(base_url, uniq, "json")
    if isinstance(got, TensorData):
        assert got.to_float32().tolist() == value
    else:
        assert got.tolist() == value


def test_head_headers(base_url, uniq):
    r = requests.put(tensor_url(base_url, uniq), json={"dtype": "int16", "shape": [2, 3, 1], "data": [1, 2, 3, 4, 5, 6]})
    assert r.status_code == 201
    h = requests.head(tensor_url(base_url, uniq))
    assert h.status_code == 200
    assert h.headers["X-Tensor-Dtype"] == "int16"
    assert tensord.parse_shape_header(h.headers["X-Tensor-Shape"]) == [2, 3, 1], h.headers["X-Tensor-Shape"]
    assert h.content == b""
    assert "X-Request-Id" in h.headers
    h = requests.head(tensor_url(base_url, uniq + "_missing"))
    assert h.status_code == 404


def test_list_prefix(base_url, client, uniq):
    client.put(uniq + "/a/x", np.zeros((2, 3), np.float32))
    client.put(uniq + "/a/y", np.zeros(4, np.int64))
    client.put(uniq + "/b/z", np.zeros(1, np.float64))
    items = client.list(prefix=uniq + "/a/")
    assert sorted(i["name"] for i in items) == [uniq + "/a/x", uniq + "/a/y"], items
    by = {i["name"]: i for i in items}
    assert by[uniq + "/a/x"]["dtype"] == "float32"
    assert list(by[uniq + "/a/x"]["shape"]) == [2, 3]
    assert by[uniq + "/a/x"]["bytes"] == 24
    assert by[uniq + "/a/y"]["bytes"] == 32
    everything = [i["name"] for i in client.list()]
    assert uniq + "/b/z" in everything and uniq + "/a/x" in everything
    assert client.list(prefix=uniq + "/nothing/") == []


def test_delete(base_url, uniq):
    requests.put(tensor_url(base_url, uniq), json={"dtype": "float32", "shape": [1], "data": [1]})
    r = requests.delete(tensor_url(base_url, uniq))
    assert r.status_code == 204, r.text
    assert r.content == b""
    r = requests.get(tensor_url(base_url, uniq))
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    r = requests.delete(tensor_url(base_url, uniq))
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"


def test_put_status_codes(base_url, uniq):
    doc = {"dtype": "float32", "shape": [2], "data": [1, 2]}
    assert requests.put(tensor_url(base_url, uniq), json=doc).status_code == 201
    doc2 = {"dtype": "int64", "shape": [3], "data": [7, 8, 9]}
    assert requests.put(tensor_url(base_url, uniq), json=doc2).status_code == 200
    got = get_tensor(base_url, uniq, "safetensors")
    assert got.dtype == np.int64 and got.tolist() == [7, 8, 9]


def test_upload_many(base_url, uniq):
    tensors = {
        uniq + "/w1": np.arange(6, dtype=np.float32).reshape(2, 3),
        uniq + "/w2": np.arange(4, dtype=np.int64),
        uniq + "/deep/b": TensorData(np.array([0x3F80, 0x4000], np.uint16), "bfloat16"),
    }
    r = requests.post(base_url + "/v1/tensors:upload", data=st.encode(tensors),
                      headers={"Content-Type": SAFETENSORS})
    assert r.status_code in (200, 201), r.text
    for name, value in tensors.items():
        assert_same(get_tensor(base_url, name, "safetensors"), value, True)


@pytest.mark.parametrize("transport", ["safetensors", "json"])
def test_client_roundtrip(server, uniq, transport):
    c = tensord.Client(server.url, transport=transport)
    a = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    assert c.put(uniq + "/a", a) is True
    assert c.put(uniq + "/a", a) is False
    assert np.array_equal(c.get(uniq + "/a"), a)
    assert c.head(uniq + "/a") == ("float32", [3, 4])
    # bf16 by conversion, by raw bits and as a tuple
    c.put(uniq + "/b", np.array([1.0, 2.0, 3.0], np.float32), dtype="bfloat16")
    b = c.get(uniq + "/b")
    assert isinstance(b, TensorData) and b.dtype_name == "bfloat16"
    assert b.bits.tolist() == [0x3F80, 0x4000, 0x4040]
    c.put(uniq + "/c", (np.array([0x3F80], np.uint16), "bfloat16"))
    assert c.get(uniq + "/c").to_float32().tolist() == [1.0]
    c.put(uniq + "/d", np.arange(3), dtype="float16")
    d = c.get(uniq + "/d")
    assert d.dtype == np.float16 and d.tolist() == [0, 1, 2]
    c.delete(uniq + "/a")
    with pytest.raises(tensord.TensordError) as ei:
        c.get(uniq + "/a")
    assert ei.value.status == 404 and ei.value.code == "not_found"
    c.close()


def test_failed_put_keeps_old_value(base_url, uniq):
    old = {"dtype": "float32", "shape": [2], "data": [1, 2]}
    assert requests.put(tensor_url(base_url, uniq), json=old).status_code == 201
    bad = [
        (json.dumps({"dtype": "float32", "shape": [3], "data": [1, 2]}), "application/json"),
        (json.dumps({"dtype": "float32", "shape": [2], "b64": "***"}), "application/json"),
        (b'{"dtype": "float32", "shape": [2], "data": [1, ', "application/json"),
        (st.encode({"a": np.zeros(2, np.float32), "b": np.zeros(2, np.float32)}), SAFETENSORS),
        (st.encode({"a": np.zeros(2, np.float32)})[:-3], SAFETENSORS),
    ]
    for body, ctype in bad:
        r = requests.put(tensor_url(base_url, uniq), data=body, headers={"Content-Type": ctype})
        assert r.status_code == 400, (body[:80], r.status_code, r.text)
        got = get_tensor(base_url, uniq, "safetensors")
        assert got.dtype == np.float32 and got.tolist() == [1, 2], body[:80]


def test_upload_is_atomic(base_url, uniq):
    """An upload with one bad entry stores none of its tensors."""
    good = np.arange(4, dtype=np.float32).tobytes()
    header = {uniq + "/ok1": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
              uniq + "/ok2": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]},
              uniq + "/../bad": {"dtype": "F32", "shape": [2], "data_offsets": [24, 32]}}
    h = json.dumps(header).encode()
    body = len(h).to_bytes(8, "little") + h + good + good
    r = requests.post(base_url + "/v1/tensors:upload", data=body, headers={"Content-Type": SAFETENSORS})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "bad_request"
    for n in ("/ok1", "/ok2"):
        assert requests.get(tensor_url(base_url, uniq + n)).status_code == 404, n
    # same with a bad dtype tag in the last entry
    header[uniq + "/../bad"]["dtype"] = "F99"
    header = {k.replace("/../bad", "/bad"): v for k, v in header.items()}
    h = json.dumps(header).encode()
    body = len(h).to_bytes(8, "little") + h + good + good
    r = requests.post(base_url + "/v1/tensors:upload", data=body, headers={"Content-Type": SAFETENSORS})
    assert r.status_code == 400, r.text
    for n in ("/ok1", "/ok2", "/bad"):
        assert requests.get(tensor_url(base_url, uniq + n)).status_code == 404, n


def test_safetensors_get_is_valid_file(base_url, uniq):
    """GET with Accept safetensors gives a well-formed file: aligned header, in-bounds offsets."""
    a = np.arange(10, dtype=np.int16)
    requests.put(tensor_url(base_url, uniq), data=st.encode({uniq: a}), headers={"Content-Type": SAFETENSORS})
    r = requests.get(tensor_url(base_url, uniq), headers={"Accept": SAFETENSORS})
    buf = r.content
    n = int.from_bytes(buf[:8], "little")
    header = json.loads(buf[8:8 + n])
    entries = {k: v for k, v in header.items() if k != "__metadata__"}
    assert len(entries) == 1
    (entry,) = entries.values()
    assert entry["dtype"] == "I16" and entry["shape"] == [10]
    b, e = entry["data_offsets"]
    assert 8 + n + e == len(buf)
    assert np.array_equal(np.frombuffer(buf[8 + n + b:8 + n + e], "<i2"), a)


def test_large_tensor(client, uniq):
    a = np.random.default_rng(0).standard_normal(16 * 1024 * 1024).astype(np.float32)  # 64 MiB
    client.put(uniq, a)
    assert np.array_equal(client.get(uniq), a)
    client.delete(uniq)


def test_http_transport_features(server, raw, uniq):
    # chunked request body
    def gen():
        yield b'{"dtype":"float32",'
        yield b'"shape":[2],"data":[1,2]}'
    r = requests.put(tensor_url(server.url, uniq + "/chunked"), data=gen(), headers={"Content-Type": "application/json"})
    assert r.status_code == 201, r.text
    # Expect: 100-continue
    import socket
    body = b'{"dtype":"float32","shape":[1],"data":[1]}'
    s = raw.connect(timeout=10)
    try:
        s.sendall(b"PUT /v1/tensors/%s/expect HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (uniq.encode(), len(body)))
        first = s.recv(4096)
        assert first.startswith(b"HTTP/1.1 100"), first
        s.sendall(body)
        reply = s.recv(4096)
        assert reply.startswith(b"HTTP/1.1 201"), reply
    finally:
        s.close()
    # HTTP/1.0 without Host
    reply = raw.send_bytes(b"GET /healthz HTTP/1.0\r\n\r\n")
    assert reply.startswith(b"HTTP/1.0 200") or reply.startswith(b"HTTP/1.1 200"), reply[:100]
    # a query string does not change the route
    assert requests.get(tensor_url(server.url, uniq + "/chunked") + "?x=1").status_code == 200
