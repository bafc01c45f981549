"""KServe v2 inference over captured graphs (API.md 11), spoken on the wire
as Triton's HTTP client (tritonclient.http) speaks it: a JSON request, or a
JSON header followed by the binary tensor data with
Inference-Header-Content-Length and no Content-Type; binary outputs parsed
from the response the same way."""

import json
import re
import uuid

import numpy as np
import pytest
import requests

from conftest import server_with_config, tenants_config

NP = {"BOOL": np.bool_, "UINT8": np.uint8, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
      "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64}


def f32(shape):
    return {"dtype": "float32", "shape": list(shape)}


def affine_program(n):
    """y = 3x + 1 (FP32 [n]) and t = sum(y) (FP32 [])."""
    return {"inputs": {"x": f32([n])},
            "nodes": [{"id": "m", "op": "mul", "args": ["x", 3.0], "outputs": ["m"]},
                      {"id": "a", "op": "add", "args": ["m", 1.0], "outputs": ["y"]},
                      {"id": "s", "op": "sum", "args": ["y"], "outputs": ["t"]}],
            "outputs": ["y", "t"]}


def two_input_program():
    """z = a * b (FP32 [2, 3]); w = a + 1 (FP32 [2, 3])."""
    return {"inputs": {"a": f32([2, 3]), "b": f32([2, 3])},
            "nodes": [{"id": "m", "op": "mul", "args": ["a", "b"], "outputs": ["z"]},
                      {"id": "p", "op": "add", "args": ["a", 1.0], "outputs": ["w"]}],
            "outputs": ["z", "w"]}


def dtypes_program():
    spec = lambda dt, n: {"dtype": dt, "shape": [n]}
    return {"inputs": {"i": spec("int32", 3), "b": spec("bool", 3), "h": spec("float16", 2),
                       "bf": spec("bfloat16", 2), "u": spec("uint8", 2), "d": spec("float64", 2),
                       "l": spec("int64", 2)},
            "nodes": [{"id": "n1", "op": "add", "args": ["i", 1], "outputs": ["i1"]},
                      {"id": "n2", "op": "logical_not", "args": ["b"], "outputs": ["nb"]},
                      {"id": "n3", "op": "mul", "args": ["h", 2.0], "outputs": ["h2"]},
                      {"id": "n4", "op": "mul", "args": ["bf", 2.0], "outputs": ["bf2"]},
                      {"id": "n5", "op": "add", "args": ["u", 1], "outputs": ["u1"]},
                      {"id": "n6", "op": "neg", "args": ["d"], "outputs": ["nd"]},
                      {"id": "n7", "op": "mul", "args": ["l", 2], "outputs": ["l2"]}],
            "outputs": ["i1", "nb", "h2", "bf2", "u1", "nd", "l2"]}


def dtypes_inputs(bf16_type):
    """dtypes_program()'s inputs: {name: (array, datatype)}; BF16 values as `bf16_type` arrays."""
    return {"i": (np.array([1, -2, 2147483646], np.int32), "INT32"),
            "b": (np.array([True, False, True]), "BOOL"),
            "h": (np.array([0.5, -1.25], np.float16), "FP16"),
            "bf": (np.array([1.5, -0.25], bf16_type), "BF16"),
            "u": (np.array([0, 254], np.uint8), "UINT8"),
            "d": (np.array([1e300, -2.5]), "FP64"),
            "l": (np.array([2 ** 40, -3], np.int64), "INT64")}


# dtypes_program()'s outputs for dtypes_inputs().
DTYPES_WANT = {"i1": [2, -1, 2147483647], "nb": [False, True, False], "h2": [1.0, -2.5], "bf2": [3.0, -0.5],
               "u1": [1, 255], "nd": [-1e300, 2.5], "l2": [2 ** 41, -6]}


def capture(url, program, name=None, headers=None):
    body = {"program": program}
    if name is not None:
        body["name"] = name
    r = requests.post(url + "/v1/graphs", json=body, headers=headers or {}, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()


def model_name():
    return "m_" + uuid.uuid4().hex[:10]


# ---------------------------------------------------------- Triton-like wire

def bf16_bits(values):
    """bfloat16 bytes of values exactly representable in bfloat16."""
    f = np.asarray(values, np.float32)
    return (f.view(np.uint32) >> 16).astype("<u2")


def from_bf16_bits(raw):
    return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)


def infer_body(inputs, outputs=None, binary_output=None, rid=None, params=None):
    """inputs: [(name, array, datatype, binary)]; outputs: [(name, binary or None)].
    Returns (body bytes, headers) as tritonclient.http builds them."""
    req = {}
    if rid is not None:
        req["id"] = rid
    req["inputs"] = []
    blobs = []
    for name, arr, dt, binary in inputs:
        d = {"name": name, "shape": list(np.shape(arr)), "datatype": dt}
        if binary:
            raw = arr.tobytes() if dt != "BF16" else bf16_bits(arr).tobytes()
            d["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            d["data"] = np.asarray(arr).flatten().tolist()
        req["inputs"].append(d)
    if outputs is not None:
        req["outputs"] = []
        for name, binary in outputs:
            o = {"name": name}
            if binary is not None:
                o["parameters"] = {"binary_data": binary}
            req["outputs"].append(o)
    p = dict(params or {})
    if binary_output is not None:
        p["binary_data_output"] = binary_output
    if p:
        req["parameters"] = p
    header = json.dumps(req).encode()
    headers = {"Inference-Header-Content-Length": str(len(header))} if blobs else {}
    return header + b"".join(blobs), headers


def parse_infer(r):
    """(header JSON, {name: array}, {name: was binary}) from an infer response."""
    assert r.status_code == 200, r.text
    hl = r.headers.get("Inference-Header-Content-Length")
    content = r.content
    if hl is None:
        assert r.headers["Content-Type"].startswith("application/json")
        hdr, pos = json.loads(content), len(content)
    else:
        n = int(hl)
        hdr, pos = json.loads(content[:n]), n
    out, binary = {}, {}
    for o in hdr["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        dt = o["datatype"]
        if size is not None:
            raw = content[pos:pos + size]
            assert len(raw) == size
            pos += size
            arr = from_bf16_bits(raw) if dt == "BF16" else np.frombuffer(raw, NP[dt])
            binary[o["name"]] = True
        else:
            arr = np.array(o["data"], np.float32 if dt == "BF16" else NP[dt])
            binary[o["name"]] = False
        out[o["name"]] = arr.reshape(o["shape"])
    assert pos == len(content), "response has %d bytes after its outputs" % (len(content) - pos)
    return hdr, out, binary


def infer(url, model, inputs, headers=None, **kw):
    body, h = infer_body(inputs, **kw)
    h.update(headers or {})
    return requests.post("%s/v2/models/%s/infer" % (url, model), data=body, headers=h, timeout=60)


def assert_error(r, status, needle=None):
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"error"} and isinstance(body["error"], str), body
    if needle:
        assert needle in body["error"], body


# ------------------------------------------------------------------ tests

def test_server_metadata(base_url):
    r = requests.get(base_url + "/v2", timeout=10)
    assert r.status_code == 200
    meta = r.json()
    assert meta["name"] == "tensord" and meta["version"]
    assert "binary_tensor_data" in meta["extensions"]
    assert meta["version"] == requests.get(base_url + "/v1/info", timeout=10).json()["version"]


def test_model_metadata_by_name_id_and_version(base_url):
    name = model_name()
    g = capture(base_url, affine_program(4), name)
    assert g["name"] == name
    assert requests.get(base_url + "/v1/graphs/" + g["id"], timeout=10).json()["name"] == name
    for model in (name, g["id"]):
        for prefix in ("/v2/models/%s" % model, "/v2/models/%s/versions/1" % model):
            r = requests.get(base_url + prefix, timeout=10)
            assert r.status_code == 200, r.text
            meta = r.json()
            assert meta["name"] == name and meta["versions"] == ["1"] and meta["platform"] == "tensord"
            assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [4]}]
            assert meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [4]},
                                       {"name": "t", "datatype": "FP32", "shape": []}]
            assert requests.get(base_url + prefix + "/ready", timeout=10).status_code == 200
    assert_error(requests.get(base_url + "/v2/models/%s/versions/2" % name, timeout=10), 404, "version")
    assert_error(requests.get(base_url + "/v2/models/%s/versions/2/ready" % name, timeout=10), 404)
    unnamed = capture(base_url, affine_program(2))
    assert unnamed["name"] is None
    assert requests.get(base_url + "/v2/models/" + unnamed["id"], timeout=10).json()["name"] == unnamed["id"]


def test_json_infer_matches_replay(base_url):
    name = model_name()
    g = capture(base_url, affine_program(5), name)
    x = np.arange(5, dtype=np.float32) - 2.5
    r = infer(base_url, name, [("x", x, "FP32", False)], rid="req-7")
    hdr, out, binary = parse_infer(r)
    assert hdr["model_name"] == name and hdr["id"] == "req-7"
    assert [o["name"] for o in hdr["outputs"]] == ["y", "t"] and not any(binary.values())
    np.testing.assert_allclose(out["y"], 3 * x + 1, rtol=1e-6)
    np.testing.assert_allclose(out["t"], (3 * x + 1).sum(), rtol=1e-5)
    assert out["t"].shape == ()
    replay = requests.post(base_url + "/v1/graphs/%s/replay" % g["id"],
                           json={"inputs": {"x": {"dtype": "float32", "shape": [5], "data": x.tolist()}}},
                           timeout=30).json()
    assert replay["outputs"]["y"]["data"] == hdr["outputs"][0]["data"]
    # Both routes ran the same graph: it counts both replays.
    assert requests.get(base_url + "/v1/graphs/" + g["id"], timeout=10).json()["replays"] == 2


def test_nested_json_data_and_id_absent(base_url):
    name = model_name()
    capture(base_url, two_input_program(), name)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 2.0, np.float32)
    body = {"inputs": [{"name": "a", "shape": [2, 3], "datatype": "FP32", "data": a.tolist()},
                       {"name": "b", "shape": [2, 3], "datatype": "FP32", "data": b.flatten().tolist()}]}
    r = requests.post(base_url + "/v2/models/%s/infer" % name, json=body, timeout=30)
    hdr, out, _ = parse_infer(r)
    assert "id" not in hdr
    np.testing.assert_array_equal(out["z"], a * b)
    np.testing.assert_array_equal(out["w"], a + 1)


def test_binary_inputs_without_content_type(base_url):
    name = model_name()
    capture(base_url, two_input_program(), name)
    a = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    body, headers = infer_body([("a", a, "FP32", True), ("b", b, "FP32", True)])
    assert "Content-Type" not in headers
    r = requests.post(base_url + "/v2/models/%s/infer" % name, data=body, headers=headers, timeout=30)
    assert r.request.headers.get("Content-Type") is None
    _, out, binary = parse_infer(r)
    assert not any(binary.values())
    np.testing.assert_array_equal(out["z"], a * b)
    # The same as application/octet-stream.
    headers["Content-Type"] = "application/octet-stream"
    r = requests.post(base_url + "/v2/models/%s/infer" % name, data=body, headers=headers, timeout=30)
    np.testing.assert_array_equal(parse_infer(r)[1]["w"], a + 1)


def test_binary_outputs(base_url):
    name = model_name()
    capture(base_url, affine_program(8), name)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    r = infer(base_url, name, [("x", x, "FP32", True)], binary_output=True)
    assert r.headers["Content-Type"] == "application/octet-stream"
    hdr, out, binary = parse_infer(r)
    assert binary == {"y": True, "t": True}
    assert hdr["outputs"][0]["parameters"]["binary_data_size"] == 32
    assert "data" not in hdr["outputs"][0]
    np.testing.assert_allclose(out["y"], 3 * x + 1, rtol=1e-6)


def test_mixed_inputs_outputs_and_per_output_setting_wins(base_url):
    name = model_name()
    capture(base_url, two_input_program(), name)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, 12, dtype=np.float32).reshape(2, 3)
    # Request-wide binary, but w asks for JSON: the per-output setting wins.
    r = infer(base_url, name, [("a", a, "FP32", True), ("b", b, "FP32", False)],
              outputs=[("w", False), ("z", None)], binary_output=True)
    hdr, out, binary = parse_infer(r)
    assert [o["name"] for o in hdr["outputs"]] == ["w", "z"]
    assert binary == {"w": False, "z": True}
    np.testing.assert_array_equal(out["z"], a * b)
    np.testing.assert_array_equal(out["w"], a + 1)
    # And the other way round: JSON by default, z binary.
    r = infer(base_url, name, [("a", a, "FP32", False), ("b", b, "FP32", True)],
              outputs=[("z", True), ("w", None)])
    _, out, binary = parse_infer(r)
    assert binary == {"z": True, "w": False}
    np.testing.assert_array_equal(out["z"], a * b)


def test_output_selection(base_url):
    name = model_name()
    capture(base_url, affine_program(3), name)
    x = np.ones(3, np.float32)
    hdr, out, _ = parse_infer(infer(base_url, name, [("x", x, "FP32", False)], outputs=[("t", None)]))
    assert list(out) == ["t"] and len(hdr["outputs"]) == 1
    assert out["t"] == pytest.approx(12.0)


def test_datatypes_binary_and_json(base_url):
    name = model_name()
    capture(base_url, dtypes_program(), name)
    meta = requests.get(base_url + "/v2/models/" + name, timeout=10).json()
    dts = {t["name"]: t["datatype"] for t in meta["inputs"] + meta["outputs"]}
    assert dts == {"i": "INT32", "b": "BOOL", "h": "FP16", "bf": "BF16", "u": "UINT8", "d": "FP64",
                   "l": "INT64", "i1": "INT32", "nb": "BOOL", "h2": "FP16", "bf2": "BF16", "u1": "UINT8",
                   "nd": "FP64", "l2": "INT64"}
    vals = dtypes_inputs(np.float32)
    want = DTYPES_WANT
    for binary in (False, True):
        inputs = [(k, v, dt, binary) for k, (v, dt) in vals.items()]
        _, out, was_binary = parse_infer(infer(base_url, name, inputs, binary_output=binary))
        assert set(was_binary.values()) == {binary}
        for k, w in want.items():
            np.testing.assert_array_equal(out[k], np.array(w, out[k].dtype), err_msg=k)


def test_wrong_shape_datatype_and_inputs_are_400(base_url):
    name = model_name()
    capture(base_url, two_input_program(), name)
    a = np.zeros((2, 3), np.float32)
    cases = [
        ([("a", np.zeros((3, 2), np.float32), "FP32", False), ("b", a, "FP32", False)], "shape"),
        ([("a", a, "FP64", False), ("b", a, "FP32", False)], "datatype"),
        ([("a", a.astype(np.float64), "FP64", True), ("b", a, "FP32", True)], "datatype"),
        ([("a", a, "FP32", False)], "missing input 'b'"),
        ([("a", a, "FP32", False), ("b", a, "FP32", False), ("c", a, "FP32", False)], "unknown input 'c'"),
        ([("a", a, "FP32", False), ("a", a, "FP32", False), ("b", a, "FP32", False)], "twice"),
        ([("a", a, "float32", False), ("b", a, "FP32", False)], "datatype"),
        ([("a", a, "BYTES", False), ("b", a, "FP32", False)], "datatype"),
    ]
    for inputs, needle in cases:
        assert_error(infer(base_url, name, inputs), 400, needle)
    ok = [("a", a, "FP32", False), ("b", a, "FP32", False)]
    assert_error(infer(base_url, name, ok, outputs=[("nope", None)]), 400, "unknown output 'nope'")
    assert_error(infer(base_url, name, ok, outputs=[("z", None), ("z", None)]), 400, "twice")
    # The shape says 6 elements, the data has 5.
    body = {"inputs": [{"name": "a", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3, 4, 5]},
                       {"name": "b", "shape": [2, 3], "datatype": "FP32", "data": a.flatten().tolist()}]}
    assert_error(requests.post(base_url + "/v2/models/%s/infer" % name, json=body, timeout=10), 400, "elements")
    # A replay through /v1 of the same wrong shape is 409 (API.md 4.3); KServe says 400.
    g = requests.get(base_url + "/v2/models/" + name, timeout=10).json()
    assert g["name"] == name


def test_unknown_model_is_404(base_url):
    for path in ("/v2/models/nope-%s" % uuid.uuid4().hex[:6], "/v2/models/g-999999/ready"):
        assert_error(requests.get(base_url + path, timeout=10), 404, "unknown model")
    body, headers = infer_body([("x", np.zeros(2, np.float32), "FP32", False)])
    r = requests.post(base_url + "/v2/models/nope/infer", data=body, headers=headers, timeout=10)
    assert_error(r, 404, "unknown model 'nope'")
    # Routes under /v2 that do not exist, and wrong methods, answer in KServe's shape too.
    assert_error(requests.get(base_url + "/v2/models/x/bogus", timeout=10), 404)
    assert_error(requests.put(base_url + "/v2/models/x/infer", data=b"{}", timeout=10), 405)


def binary_request(model_inputs, extra=b"", header_len_delta=0, size_override=None):
    header = {"inputs": []}
    blobs = b""
    for name, arr in model_inputs:
        raw = arr.tobytes()
        header["inputs"].append({"name": name, "shape": list(arr.shape), "datatype": "FP32",
                                 "parameters": {"binary_data_size": size_override or len(raw)}})
        blobs += raw
    h = json.dumps(header).encode()
    return h + blobs + extra, {"Inference-Header-Content-Length": str(len(h) + header_len_delta)}


def test_malformed_bodies_and_headers_are_400(base_url, raw):
    name = model_name()
    capture(base_url, affine_program(4), name)
    url = base_url + "/v2/models/%s/infer" % name
    x = np.ones(4, np.float32)
    post = lambda body, headers=None: requests.post(url, data=body, headers=headers or {}, timeout=10)

    body, h = binary_request([("x", x)])
    assert post(body, h).status_code == 200
    # Body longer than the header and sizes say; shorter; header past the body's end.
    assert_error(post(*binary_request([("x", x)], extra=b"\0\0")), 400, "bytes after")
    assert_error(post(body[:-3], h), 400, "ends")
    assert_error(post(body, {"Inference-Header-Content-Length": str(len(body) + 1)}), 400, "Content-Length")
    # binary_data_size that disagrees with shape and datatype.
    assert_error(post(*binary_request([("x", x)], size_override=12)), 400, "binary_data_size")
    # Header length cutting the JSON; not a number; negative.
    assert_error(post(*binary_request([("x", x)], header_len_delta=-5)), 400)
    for bad in ("abc", "-1", "1e3", "12 x", "0x10", "99999999999999999999999"):
        assert_error(post(body, {"Inference-Header-Content-Length": bad}), 400)
    # A JSON request with binary_data_size and no header: the bytes are not JSON.
    assert_error(post(body), 400)
    # Not JSON; not an object; no inputs; unknown fields; bad parameters.
    for text in (b"", b"{", b"[]", b"null", b'{"inputs": {}}', b'{"inputs": [1]}', b'{"inputz": []}',
                 b'{"inputs": [], "id": 5}', b'{"inputs": [{"name": "x"}]}',
                 b'{"inputs": [{"name": 3, "shape": [4], "datatype": "FP32", "data": [1,2,3,4]}]}',
                 b'{"inputs": [{"name": "x", "shape": [4], "datatype": "FP32"}]}',
                 b'{"inputs": [{"name": "x", "shape": "4", "datatype": "FP32", "data": [1,2,3,4]}]}',
                 b'{"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [1,2,3,"a"]}]}',
                 b'{"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [1,2,3,4], "extra": 1}]}',
                 b'{"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [1,2,3,4],'
                 b' "parameters": {"binary_data_size": 16}}]}',
                 b'{"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [1,2,3,4],'
                 b' "parameters": {"shared_memory_region": "r"}}]}',
                 b'{"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [1,2,3,4]}],'
                 b' "parameters": {"binary_data_output": "yes"}}',
                 b'{"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [1,2,3,4]}],'
                 b' "outputs": [{"name": "t", "parameters": {"classification": 2}}]}',
                 b'{"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [1,2,3,4]}],'
                 b' "outputs": {"name": "t"}}',
                 b'\xff\xfe{}'):
        assert_error(post(text, {"Content-Type": "application/json"}), 400)
    # A compressed body (tritonclient's request_compression_algorithm) is refused by name.
    assert_error(post(body, dict(h, **{"Content-Encoding": "gzip"})), 400, "gzip")
    # The server is fine after all that, and on raw bytes too.
    r = raw.request("POST", "/v2/models/%s/infer" % name, body=b'{"inputs": [',
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status == 400 and isinstance(r.json()["error"], str)
    assert post(body, h).status_code == 200


def test_bool_binary_bytes_must_be_0_or_1(base_url):
    name = model_name()
    prog = {"inputs": {"b": {"dtype": "bool", "shape": [3]}},
            "nodes": [{"id": "n", "op": "logical_not", "args": ["b"], "outputs": ["y"]}], "outputs": ["y"]}
    capture(base_url, prog, name)
    header = json.dumps({"inputs": [{"name": "b", "shape": [3], "datatype": "BOOL",
                                     "parameters": {"binary_data_size": 3}}]}).encode()
    url = base_url + "/v2/models/%s/infer" % name
    h = {"Inference-Header-Content-Length": str(len(header))}
    assert_error(requests.post(url, data=header + b"\x01\x02\x00", headers=h, timeout=10), 400, "BOOL")
    _, out, _ = parse_infer(requests.post(url, data=header + b"\x01\x00\x00", headers=h, timeout=10))
    np.testing.assert_array_equal(out["y"], [False, True, True])


def test_dtype_kserve_lacks_answers_metadata_but_not_inference(base_url):
    name = model_name()
    prog = {"inputs": {"x": {"dtype": "complex64", "shape": [2]}},
            "nodes": [{"id": "n", "op": "neg", "args": ["x"], "outputs": ["y"]}], "outputs": ["y"]}
    capture(base_url, prog, name)
    meta = requests.get(base_url + "/v2/models/" + name, timeout=10).json()
    assert meta["inputs"][0]["datatype"] == "complex64"
    assert_error(requests.get(base_url + "/v2/models/%s/ready" % name, timeout=10), 400, "complex64")
    body = {"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1, 2]}]}
    assert_error(requests.post(base_url + "/v2/models/%s/infer" % name, json=body, timeout=10), 400, "complex64")


def test_names_unique_validated_and_freed(base_url):
    name = model_name()
    g = capture(base_url, affine_program(2), name)
    r = requests.post(base_url + "/v1/graphs", json={"program": affine_program(2), "name": name}, timeout=10)
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
    for bad in ("", "a/b", "a b", "ü", "..", ".", "g-12", "x" * 129, 5, ["a"]):
        r = requests.post(base_url + "/v1/graphs", json={"program": affine_program(2), "name": bad}, timeout=10)
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["error"]["code"] == "bad_request"
    assert requests.delete(base_url + "/v1/graphs/" + g["id"], timeout=10).status_code == 204
    assert_error(requests.get(base_url + "/v2/models/" + name, timeout=10), 404)
    g2 = capture(base_url, affine_program(3), name)  # the name is free again
    assert requests.get(base_url + "/v2/models/" + name, timeout=10).json()["inputs"][0]["shape"] == [3]
    assert g2["id"] != g["id"]
    ok = capture(base_url, affine_program(1), "a.B_c-9" + uuid.uuid4().hex[:4])
    assert requests.get(base_url + "/v2/models/" + ok["name"], timeout=10).status_code == 200


def test_keep_alive_many_infers_and_replay_metric(base_url):
    name = model_name()
    capture(base_url, affine_program(16), name)
    metric = re.compile(r'^tensord_graph_replays_total\{state="succeeded",tenant="default"\} (\S+)$', re.M)
    before = float(metric.search(requests.get(base_url + "/metrics", timeout=10).text).group(1))
    rng = np.random.default_rng(3)
    with requests.Session() as s:
        for i in range(30):
            x = rng.standard_normal(16).astype(np.float32)
            body, h = infer_body([("x", x, "FP32", i % 2 == 0)], binary_output=i % 3 == 0)
            r = s.post(base_url + "/v2/models/%s/infer" % name, data=body, headers=h, timeout=30)
            np.testing.assert_allclose(parse_infer(r)[1]["y"], 3 * x + 1, rtol=1e-6)
    after = float(metric.search(requests.get(base_url + "/metrics", timeout=10).text).group(1))
    assert after - before >= 30
    assert 'route="/v2/models/{model}/infer"' in requests.get(base_url + "/metrics", timeout=10).text


# ---------------------------------------------------------- tenants

TOKENS = {"alice": "kserve-alice-token", "bob": "kserve-bob-token"}


@pytest.fixture(scope="module")
def tenant_server():
    with server_with_config(tenants_config(TOKENS, workqueue_limit=2), "kserve-tenants") as srv:
        yield srv


def auth(name):
    return {"Authorization": "Bearer " + TOKENS[name]}


def test_other_tenants_model_is_invisible(tenant_server):
    url = tenant_server.url
    g = capture(url, affine_program(2), "shared-name", headers=auth("alice"))
    x = np.ones(2, np.float32)
    for model in ("shared-name", g["id"]):
        assert_error(requests.get(url + "/v2/models/" + model, headers=auth("bob"), timeout=10), 404)
        assert_error(requests.get(url + "/v2/models/%s/ready" % model, headers=auth("bob"), timeout=10), 404)
        assert_error(infer(url, model, [("x", x, "FP32", False)], headers=auth("bob")), 404)
        _, out, _ = parse_infer(infer(url, model, [("x", x, "FP32", True)], headers=auth("alice")))
        np.testing.assert_array_equal(out["y"], [4, 4])
    # Names are per tenant: bob may use the same one for his own graph.
    capture(url, affine_program(3), "shared-name", headers=auth("bob"))
    meta = requests.get(url + "/v2/models/shared-name", headers=auth("bob"), timeout=10).json()
    assert meta["inputs"][0]["shape"] == [3]


def test_v2_routes_need_a_token_and_answer_kserve_errors(tenant_server):
    url = tenant_server.url
    for path in ("/v2", "/v2/models/x", "/v2/models/x/ready"):
        r = requests.get(url + path, timeout=10)
        assert_error(r, 401)
        assert r.headers.get("WWW-Authenticate", "").startswith("Bearer")
        assert requests.get(url + path, headers={"Authorization": "Bearer nope"}, timeout=10).status_code == 401
    assert_error(requests.post(url + "/v2/models/x/infer", data=b"{}", timeout=10), 401)
    assert requests.get(url + "/v2", headers=auth("bob"), timeout=10).status_code == 200
    # Health stays open, and other routes keep tensord's error shape.
    assert requests.get(url + "/v2/health/ready", timeout=10).status_code == 200
    assert requests.get(url + "/v1/graphs/x", timeout=10).json()["error"]["code"] == "unauthenticated"


def test_oversized_infer_is_413_in_kserve_shape(raw_small):
    body = json.dumps({"inputs": [{"name": "x", "shape": [400], "datatype": "FP32", "data": [0] * 400}]})
    r = raw_small.request("POST", "/v2/models/m/infer", body=body)
    assert r.status == 413, r
    assert isinstance(r.json()["error"], str)
    r = raw_small.request("POST", "/v1/run", body=body)
    assert r.status == 413 and r.json()["error"]["code"] == "payload_too_large"
