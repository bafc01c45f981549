"""MX tensors (API.md 7) as stored tensors against the real binary: one value
from mx.quantize, stored, fetched (JSON and safetensors), listed, uploaded,
deleted, counted at their packed size, checkpointed and restored bit-exactly;
the wire form (`<name>` U8 + `<name>.scale` F8_E8M0 + __metadata__), and
malformed bodies refused with nothing stored. Values are checked against the
client's numpy dequantize, written from the spec, not from the server."""

import json
import time
import os
import shutil
import struct
import tempfile

import numpy as np
import pytest
import requests

import tensord
from conftest import Server, _stop_and_check
from test_graphs import metric_value

FORMATS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1"]
BITS = {"mxfp8_e4m3": 8, "mxfp8_e5m2": 8, "mxfp6_e2m3": 6, "mxfp6_e3m2": 6, "mxfp4_e2m1": 4}
ST = {"Content-Type": "application/vnd.safetensors"}


def quantize(c, x, fmt, block_size=32, axis=-1, rounding="floor", store=None):
    prog = {"nodes": [{"id": "q", "op": "mx.quantize", "args": ["x", fmt],
                       "kwargs": {"block_size": block_size, "axis": axis, "scale_rounding": rounding},
                       "outputs": ["q"]},
                      {"id": "d", "op": "mx.dequantize", "args": ["q"], "outputs": ["d"]}],
            "outputs": ["q", "d"]}
    kw = {"store": {"q": store}, "return_": ["q", "d"]} if store else {}
    r = c.run(prog, inputs={"x": x}, **kw)
    return r["q"], r["d"]


def data(shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-8, 8, shape))
    return x.astype(np.float32)


def st_header(body):
    (n,) = struct.unpack("<Q", body[:8])
    return json.loads(body[8:8 + n])


def st_file(entries, metadata=None):
    """A safetensors body from (name, tag, shape, bytes) entries, by hand."""
    header, pos, blobs = {}, 0, []
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, tag, shape, raw in entries:
        header[name] = {"dtype": tag, "shape": shape, "data_offsets": [pos, pos + len(raw)]}
        pos += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rounding", ["floor", "rceil"])
def test_quantize_returns_one_mx_value(client, fmt, rounding, uniq):
    x = data((4, 96))
    x[1, :32] = 0.0
    x[2, 5] = np.nan  # only that block's scale is NaN
    name = "mx/%s/q" % uniq
    q, d = quantize(client, x, fmt, rounding=rounding, store=name)
    assert isinstance(q, tensord.MxTensor)
    assert (q.format, q.block_size, q.axis, q.shape) == (fmt, 32, -1, (4, 96))
    assert q.elements.shape == (4, 96 * BITS[fmt] // 8) and q.scale.shape == (4, 3)
    assert q.scale[2, 0] == 255 and (q.scale[2, 1:] != 255).all()
    # The client's spec reference and the server agree bit for bit.
    ref = q.dequantize()
    assert d.dtype == np.float32 and d.shape == x.shape
    np.testing.assert_array_equal(ref.view(np.uint32)[~np.isnan(ref)], d.view(np.uint32)[~np.isnan(d)])
    assert np.array_equal(np.isnan(ref), np.isnan(d)) and np.isnan(d[2, :32]).all()
    assert (d[1, :32] == 0).all()
    got = client.get(name)
    assert got == q


def test_other_axis_and_block_size(client, uniq):
    x = data((64, 3), seed=1)
    q, d = quantize(client, x, "mxfp6_e2m3", block_size=16, axis=0)
    assert q.elements.shape == (48, 3) and q.scale.shape == (4, 3) and q.axis == 0
    np.testing.assert_array_equal(q.dequantize(), d)
    # Stored and fetched as safetensors and as JSON (data and b64).
    client.put("mx/%s/a0" % uniq, q)
    assert client.get("mx/%s/a0" % uniq) == q
    cj = tensord.Client(client.url, transport="json")
    assert cj.get("mx/%s/a0" % uniq) == q
    body = requests.get(client.url + "/v1/tensors/mx/%s/a0" % uniq).json()
    assert body["mx"] == "mxfp6_e2m3" and body["shape"] == [64, 3] and body["axis"] == 0
    assert body["elements"]["dtype"] == "uint8" and body["scale"]["dtype"] == "float8_e8m0fnu"
    assert tensord.from_json_tensor(body) == q
    r = requests.put(client.url + "/v1/tensors/mx/%s/fromjson" % uniq, data=json.dumps(body))
    assert r.status_code == 201, r.text
    assert client.get("mx/%s/fromjson" % uniq) == q
    cj.close()


def test_list_head_delete_and_packed_memory(uniq):
    s = Server(["--checkpoint-every", "0"], name="mx-memory")
    try:
        c = tensord.Client(s.url)
        before = metric_value(s.url, "tensord_tenant_memory_bytes", {"tenant": "default"})
        q, _ = quantize(c, data((8, 256)), "mxfp4_e2m1", store="m/q")
        packed = 8 * 128 + 8 * 8
        # The reply's tensors (the float32 "d" returned) are released once
        # it is sent, a moment after the client has read it.
        deadline = time.time() + 5
        while True:
            after = metric_value(s.url, "tensord_tenant_memory_bytes", {"tenant": "default"})
            if after - before == packed or time.time() > deadline:
                break
            time.sleep(0.05)
        assert after - before == packed
        [info] = c.list("m/")
        assert info == {"name": "m/q", "dtype": "mxfp4_e2m1", "shape": [8, 256], "bytes": packed,
                        "block_size": 32, "axis": -1}
        h = requests.head(s.url + "/v1/tensors/m/q").headers
        assert h["X-Tensor-Dtype"] == "mxfp4_e2m1" and h["X-Tensor-Shape"] == "8,256"
        assert h["X-Tensor-Bytes"] == str(packed) and h["X-Tensor-Mx-Block-Size"] == "32"
        c.delete("m/q")
        assert c.list("m/") == []
        assert metric_value(s.url, "tensord_tenant_memory_bytes", {"tenant": "default"}) == before
        c.close()
    finally:
        _stop_and_check(s)


def test_wire_form_and_save_load_save_identical(client, uniq):
    name = "mx/%s/w" % uniq
    q, _ = quantize(client, data((2, 64)), "mxfp8_e4m3", store=name)
    body = requests.get(client.url + "/v1/tensors/" + name, headers={"Accept": ST[ "Content-Type"]}).content
    h = st_header(body)
    assert h[name]["dtype"] == "U8" and h[name]["shape"] == [2, 64]
    assert h[name + ".scale"]["dtype"] == "F8_E8M0" and h[name + ".scale"]["shape"] == [2, 2]
    assert json.loads(h["__metadata__"][name]) == {"mx": "mxfp8_e4m3", "block_size": 32, "axis": -1,
                                                   "shape": [2, 64]}
    # Loaded back (PUT and upload) and saved again: the same bytes.
    assert requests.put(client.url + "/v1/tensors/" + name, data=body, headers=ST).status_code == 200
    again = requests.get(client.url + "/v1/tensors/" + name, headers={"Accept": ST["Content-Type"]}).content
    assert again == body
    r = requests.post(client.url + "/v1/tensors:upload", data=body, headers=ST)
    assert r.status_code == 200 and r.json()["stored"][0]["dtype"] == "mxfp8_e4m3"
    assert requests.get(client.url + "/v1/tensors/" + name, headers={"Accept": ST["Content-Type"]}).content == body
    # The client's encoder writes the same file the server does.
    assert tensord.safetensors.encode({name: q}) == body


def test_upload_many_and_run_inputs(client, uniq):
    p = "mx/%s/" % uniq
    qa, _ = quantize(client, data((3, 32), 2), "mxfp4_e2m1")
    qb, db = quantize(client, data((32, 2), 3), "mxfp6_e3m2", axis=0)
    client.upload({p + "a": qa, p + "b": qb, p + "plain": np.arange(4, dtype=np.float32)})
    listed = {t["name"]: t for t in client.list(p)}
    assert listed[p + "a"]["dtype"] == "mxfp4_e2m1" and listed[p + "b"]["axis"] == 0
    assert listed[p + "plain"]["dtype"] == "float32" and p + "a.scale" not in listed
    # An MX program input, by safetensors and by JSON.
    prog = {"nodes": [{"id": "d", "op": "mx.dequantize", "args": ["q"], "outputs": ["d"]}], "outputs": ["d"]}
    np.testing.assert_array_equal(client.run(prog, inputs={"q": qb})["d"], db)
    cj = tensord.Client(client.url, transport="json")
    np.testing.assert_array_equal(cj.run(prog, inputs={"q": qb})["d"], db)
    cj.close()


def test_ops_refuse_mx_operands(client, uniq):
    name = "mx/%s/r" % uniq
    quantize(client, data((1, 32)), "mxfp8_e5m2", store=name)
    with pytest.raises(tensord.DtypeMismatch) as e:
        client.run({"nodes": [{"id": "a", "op": "add", "args": ["$stored/" + name, 1.0], "outputs": ["a"]}],
                    "outputs": ["a"]})
    assert e.value.status == 422 and "mx.dequantize" in str(e.value)
    with pytest.raises(tensord.DtypeMismatch):
        client.run({"nodes": [{"id": "d", "op": "mx.dequantize", "args": ["x"], "outputs": ["d"]}],
                    "outputs": ["d"]}, inputs={"x": np.zeros((1, 32), np.uint8)})
    with pytest.raises(tensord.ShapeMismatch):
        quantize(client, data((2, 30)), "mxfp8_e4m3")


def _bad_files(name):
    el = bytes(range(32))  # mxfp4 [2, 32]: 2 x 16 bytes
    sc = bytes([127, 128])
    good = {"mx": "mxfp4_e2m1", "block_size": 32, "axis": -1, "shape": [2, 32]}

    def f(meta, el_shape=(2, 16), sc_shape=(2, 1), el_raw=el, sc_raw=sc, sc_tag="F8_E8M0", scale=True):
        entries = [(name, "U8", list(el_shape), el_raw)]
        if scale:
            entries.append((name + ".scale", sc_tag, list(sc_shape), sc_raw))
        return st_file(entries, {name: meta if isinstance(meta, str) else json.dumps(meta)})

    return {
        "good": f(good),
        "unknown format": f(dict(good, mx="mxfp5")),
        "block_size not an int": f(dict(good, block_size="32")),
        "block_size 0": f(dict(good, block_size=0)),
        "odd fp4 block": f(dict(good, block_size=1, shape=[2, 32])),
        "axis out of range": f(dict(good, axis=2)),
        "unknown key": f(dict(good, colour="red")),
        "missing shape": f({k: v for k, v in good.items() if k != "shape"}),
        "invalid json": f('{"mx": "mxfp4_e2m1", '),
        "scale count": f(good, sc_shape=(2, 2), sc_raw=bytes(4)),
        "packed size": f(dict(good, shape=[2, 64])),
        "elements dtype": st_file([(name, "I8", [2, 16], el), (name + ".scale", "F8_E8M0", [2, 1], sc)],
                                  {name: json.dumps(good)}),
        "scale dtype": f(good, sc_tag="U8"),
        "no scale entry": f(good, scale=False),
        "length not a multiple": f(dict(good, shape=[2, 30]), el_shape=(2, 15), el_raw=el[:30]),
    }


def test_malformed_mx_bodies_are_400_and_store_nothing(client, uniq):
    name = "mx/%s/bad" % uniq
    files = _bad_files(name)
    assert requests.put(client.url + "/v1/tensors/" + name, data=files.pop("good"), headers=ST).status_code == 201
    before = client.get(name)
    for why, body in files.items():
        for method, url in (("PUT", "/v1/tensors/" + name), ("POST", "/v1/tensors:upload")):
            r = requests.request(method, client.url + url, data=body, headers=ST)
            assert r.status_code == 400, (why, method, r.status_code, r.text)
            assert r.json()["error"]["code"] == "bad_request", why
    assert client.get(name) == before
    assert [t["name"] for t in client.list("mx/%s/" % uniq)] == [name]
    # An upload with one bad MX tensor among good ones commits none.
    good = tensord.safetensors.encode({"mx/%s/ok" % uniq: before})
    bad = _bad_files("mx/%s/ok2" % uniq)["scale count"]
    t_ok, m_ok = tensord.safetensors.decode(good)
    h = st_header(bad)
    mixed = st_file([("mx/%s/ok" % uniq, "U8", [2, 16], before.elements.tobytes()),
                     ("mx/%s/ok.scale" % uniq, "F8_E8M0", [2, 1], before.scale.tobytes()),
                     ("mx/%s/ok2" % uniq, "U8", [2, 16], bytes(32)),
                     ("mx/%s/ok2.scale" % uniq, "F8_E8M0", [2, 2], bytes(4))],
                    {"mx/%s/ok" % uniq: before.metadata_json(),
                     "mx/%s/ok2" % uniq: h["__metadata__"]["mx/%s/ok2" % uniq]})
    r = requests.post(client.url + "/v1/tensors:upload", data=mixed, headers=ST)
    assert r.status_code == 400, r.text
    assert [t["name"] for t in client.list("mx/%s/" % uniq)] == [name]
    assert t_ok["mx/%s/ok" % uniq] == before and m_ok == {}


def test_malformed_mx_json_is_400(client, uniq):
    name = "mx/%s/badjson" % uniq
    q, _ = quantize(client, data((2, 32)), "mxfp8_e4m3")
    good = tensord.to_json_tensor(q)
    cases = {
        "unknown format": dict(good, mx="fp8"),
        "missing scale": {k: v for k, v in good.items() if k != "scale"},
        "scale shape": dict(good, scale={"dtype": "float8_e8m0fnu", "shape": [2, 2], "data": [1, 1, 1, 1]}),
        "elements dtype": dict(good, elements={"dtype": "int8", "shape": [2, 32], "b64": good["elements"]["b64"]}),
        "shape": dict(good, shape=[2, 64]),
        "axis type": dict(good, axis="last"),
        "nested mx": dict(good, elements=good),
    }
    for why, body in cases.items():
        r = requests.put(client.url + "/v1/tensors/" + name, data=json.dumps(body))
        assert r.status_code == 400, (why, r.text)
        assert r.json()["error"]["code"] == "bad_request"
    r = requests.put(client.url + "/v1/tensors/" + name, data=json.dumps(good))
    assert r.status_code == 201 and client.get(name) == q


def test_plain_metadata_naming_a_tensor_is_left_alone(client, uniq):
    """Metadata that is not an MX description (no "mx" key) keeps the entries plain."""
    name = "mx/%s/plain" % uniq
    body = st_file([(name, "U8", [4], bytes(4))], {name: "a note"})
    assert requests.put(client.url + "/v1/tensors/" + name, data=body, headers=ST).status_code == 201
    assert client.list(name)[0]["dtype"] == "uint8"


def test_checkpoint_restart_is_bit_exact():
    state = tempfile.mkdtemp(prefix="tensord-it-mx-")
    try:
        a = Server(["--state-dir", state, "--checkpoint-every", "0"], name="mx-ckpt-1")
        c = tensord.Client(a.url)
        qs = {}
        for i, fmt in enumerate(FORMATS):
            qs["ck/" + fmt], _ = quantize(c, data((4, 64), i), fmt, rounding="rceil" if i % 2 else "floor",
                                         store="ck/" + fmt)
        qs["ck/axis0"], _ = quantize(c, data((32, 5), 9), "mxfp4_e2m1", axis=0, store="ck/axis0")
        # Named like the checkpoint's own metadata keys of old: no clash.
        qs["format"], _ = quantize(c, data((1, 32), 10), "mxfp8_e4m3", store="format")
        qs["tenant"], _ = quantize(c, data((1, 32), 11), "mxfp8_e5m2", store="tenant")
        c.put("ck/plain", np.arange(6, dtype=np.float32))
        info = c.checkpoint()
        assert info["tensors"] == len(qs) + 1
        path = os.path.join(state, "default.safetensors")
        first = open(path, "rb").read()
        h = st_header(first)
        assert h["ck/mxfp6_e2m3.scale"]["dtype"] == "F8_E8M0"
        assert json.loads(h["__metadata__"]["ck/axis0"])["axis"] == 0
        c.close()
        _stop_and_check(a)

        b = Server(["--state-dir", state, "--checkpoint-every", "0"], name="mx-ckpt-2")
        c = tensord.Client(b.url)
        for n, q in qs.items():
            assert c.get(n) == q, n
        assert {t["name"] for t in c.list("")} == set(qs) | {"ck/plain"}
        c.checkpoint()
        assert open(path, "rb").read() == first  # save -> load -> save
        c.close()
        _stop_and_check(b)
    finally:
        shutil.rmtree(state, ignore_errors=True)
