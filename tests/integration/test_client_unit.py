"""The Python client's own logic, no tensord server needed (API.md 2, 3, 12).

dtype names against the server's table in ops/dtype.cpp, narrow-float
encodings against the rules of ops/kernels/float_conv.h and an independent
nearest-even reference, the safetensors layout the server's zero-copy path
needs, error mapping, torch conversions, and the HTTP plumbing (retries after
Retry-After, bodies sent from the arrays' memory, answers read into one
buffer on a kept-alive connection) against a small fake HTTP server.
"""

import email.utils
import http.server
import json
import os
import pickle
import re
import struct
import threading
import time
import warnings

import numpy as np
import pytest

import tensord
from tensord import TensorData, dtypes
from tensord import safetensors as st
from conftest import REPO

try:
    import torch
except ImportError:  # the torch cases say so when they skip
    torch = None


def need_torch():
    if torch is None:
        print("skipping: torch is not importable by this interpreter")
        pytest.skip("torch is not importable by this interpreter")


# ---------------------------------------------------------------- dtype names

def server_dtype_names():
    """(name -> dtype enum) of every name ops/dtype.cpp's dtype_from_name accepts."""
    src = open(os.path.join(REPO, "ops", "dtype.cpp")).read()
    info = re.findall(r'\{DType::(k\w+), "(\w+)", "(\w+)", "(\w+)", \d+\}', src)
    aliases = re.findall(r'\{"(\w+)", DType::(k\w+)\}', src)
    assert len(info) == 15 and aliases, "ops/dtype.cpp changed shape: update this test"
    enum_to_name = {e: name for e, name, _, _ in info}
    names = {}
    for e, name, tag, kserve in info:
        names[name] = name
        names["torch." + name] = name
        names[kserve] = name
    for alias, e in aliases:
        names[alias] = enum_to_name[e]
    tags = {tag: name for e, name, tag, _ in info}
    return names, tags


def test_dtype_names_are_the_servers():
    names, tags = server_dtype_names()
    for text, want in names.items():
        assert tensord.dtype_name(text) == want, text
    # the names the issue found wrong: PyTorch's meaning, not numpy's
    assert tensord.dtype_name("float") == "float32"
    assert tensord.dtype_name("int") == "int32"
    assert tensord.dtype_name("cfloat") == "complex64"
    assert tensord.dtype_name("double") == "float64" and tensord.dtype_name("long") == "int64"
    for tag, name in tags.items():
        assert st.DTYPES[name][0] == tag
    for bad in ("float128", "f4", "uint16", "complex32", "str"):
        with pytest.raises(ValueError):
            tensord.dtype_name(bad)


def test_dtype_names_of_numpy_and_torch():
    assert tensord.dtype_name(np.float32) == "float32"
    assert tensord.dtype_name(np.dtype(">i8")) == "int64"
    assert tensord.dtype_name(np.bool_) == "bool"
    with pytest.raises(ValueError):
        tensord.dtype_name(np.uint16)
    need_torch()
    assert tensord.dtype_name(torch.bfloat16) == "bfloat16"
    assert tensord.dtype_name(torch.float) == "float32"
    assert tensord.dtype_name(torch.cfloat) == "complex64"
    with pytest.raises(ValueError):
        tensord.dtype_name(torch.complex32)


def test_put_with_alias_dtype_converts_like_the_server():
    # "float" is float32 and "int" int32 in the request and in the local conversion
    name, shape, raw = st.convert(np.array([1.7, -2.7, np.nan, 1e30]), "int")
    assert name == "int32"
    assert np.frombuffer(raw, "<i4").tolist() == [1, -2, 0, 2 ** 31 - 1]  # trunc, NaN 0, saturate
    name, _, raw = st.convert(np.array([-1.5, 300.0]), "uint8")
    assert np.frombuffer(raw, np.uint8).tolist() == [0, 255]
    name, _, raw = st.convert(np.array([300], np.int64), "int8")
    assert np.frombuffer(raw, np.int8).tolist() == [44]  # integers wrap
    name, _, raw = st.convert(np.array([1 + 2j]), "float")
    assert name == "float32" and np.frombuffer(raw, "<f4").tolist() == [1.0]
    # float64 -> float16 goes through float32 (two roundings), as the server's casts do
    x = 1 + 2.0 ** -11 + 2.0 ** -40
    assert np.float16(x) != np.float16(1.0)  # numpy's single rounding
    name, _, raw = st.convert(np.array([x]), "half")
    assert name == "float16" and np.frombuffer(raw, "<f2").tolist() == [1.0]


# ---------------------------------------------------------------- narrow floats

def f32(vals):
    return np.array(vals, np.float32)


@pytest.mark.parametrize("name,cases", [
    ("float8_e4m3fn", [(448, 0x7E), (464, 0x7E), (500, 0x7E), (1e30, 0x7E), (np.inf, 0x7E), (-np.inf, 0xFE),
                       (-1e9, 0xFE), (np.nan, 0x7F), (-np.nan, 0xFF), (0.0, 0x00), (-0.0, 0x80),
                       (2.0 ** -9, 0x01), (2.0 ** -10, 0x00), (1.5 * 2.0 ** -9, 0x02), (1.0, 0x38),
                       (1.0625, 0x38), (1.1875, 0x3A), (1e-45, 0x00), (-3.0, 0xC4)]),
    ("float8_e5m2", [(57344, 0x7B), (61440, 0x7B), (1e9, 0x7B), (np.inf, 0x7C), (-np.inf, 0xFC),
                     (-1e9, 0xFB), (np.nan, 0x7F), (-np.nan, 0xFF), (1.0, 0x3C), (2.0 ** -16, 0x01),
                     (2.0 ** -17, 0x00), (1.125, 0x3C), (1.375, 0x3E)]),
    ("float8_e8m0fnu", [(1.0, 127), (1.5, 128), (1.49, 127), (0.75, 127), (-4.0, 129), (0.0, 0),
                        (np.nan, 0xFF), (np.inf, 0xFF), (-np.inf, 0xFF), (2.0 ** 127, 254),
                        (1.5 * 2.0 ** 127, 0xFF), (2.0 ** -127, 0), (2.0 ** -126, 1)]),
    ("bfloat16", [(1.0, 0x3F80), (3.4e38, 0x7F80), (np.inf, 0x7F80), (-2.0, 0xC000), (np.nan, 0x7FC0),
                  (1.00390625, 0x3F80), (1.01171875, 0x3F82)]),
])
def test_narrow_float_encoding_matches_the_server_rules(name, cases):
    vals = f32([v for v, _ in cases])
    got = dtypes.float_to_bits(vals, name).tolist()
    want = [c for _, c in cases]
    assert got == want, [(v, hex(g), hex(w)) for (v, w), g in zip(cases, got) if g != w]


def test_float8_saturates_where_pytorch_overflows():
    """The issue: the client gave NaN/inf on overflow while the server saturates."""
    big = TensorData.from_float(f32([1e4, -1e4]), "float8_e4m3fn").to_float32()
    assert big.tolist() == [448.0, -448.0]
    big = TensorData.from_float(f32([1e6, -1e6, np.inf]), "float8_e5m2").to_float32()
    assert big.tolist() == [57344.0, -57344.0, np.inf]
    assert np.isnan(TensorData.from_float(f32([np.nan]), "float8_e4m3fn").to_float32()).all()


def nearest_even_reference(x, name):
    """Independent scalar reference: clamp |x| to the largest finite value, pick
    the nearest representable value, ties to the even code."""
    table = dtypes.bits_to_float32(np.arange(128, dtype=np.uint8), name).astype(np.float64)
    finite = [(float(v), c) for c, v in enumerate(table) if np.isfinite(v)]
    a = min(abs(float(np.float32(x))), finite[-1][0])
    best = min(finite, key=lambda vc: (abs(vc[0] - a), vc[1] % 2))
    return best[1] | (0x80 if np.signbit(np.float32(x)) else 0)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_encoding_against_a_reference(name):
    rng = np.random.default_rng(3)
    top = 448.0 if name == "float8_e4m3fn" else 57344.0
    x = np.concatenate([rng.uniform(-1.2 * top, 1.2 * top, 3000),
                        rng.standard_normal(3000) * 10.0 ** rng.integers(-8, 3, 3000)]).astype(np.float32)
    # every midpoint between neighbouring codes (the ties) and every code's own value
    vals = dtypes.bits_to_float32(np.arange(128, dtype=np.uint8), name).astype(np.float64)
    vals = vals[np.isfinite(vals)]
    mids = ((vals[1:] + vals[:-1]) / 2).astype(np.float32)
    x = np.concatenate([x, mids, -mids, vals.astype(np.float32)])
    got = dtypes.float_to_bits(x, name)
    want = np.array([nearest_even_reference(v, name) for v in x], np.uint8)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(x[i]), hex(got[i]), hex(want[i])) for i in bad[:10]]


@pytest.mark.parametrize("name", st.NARROW)
def test_narrow_floats_roundtrip_every_code(name):
    bits = np.arange(256 if name != "bfloat16" else 65536, dtype=np.uint8 if name != "bfloat16" else np.uint16)
    f = dtypes.bits_to_float32(bits, name)
    back = dtypes.float_to_bits(f, name)
    ok = ~np.isnan(f)
    assert np.array_equal(back[ok], bits[ok])
    assert np.isnan(dtypes.bits_to_float32(back[~ok], name)).all()


def test_json_data_of_float8_is_read_as_the_server_would():
    # a JSON number past the range saturates, as the server's JSON reader does
    t = tensord.from_json_tensor({"dtype": "float8_e4m3fn", "shape": [3], "data": [1000, "-inf", "nan"]})
    assert t.bits.tolist() == [0x7E, 0xFE, 0x7F]


# ---------------------------------------------------------------- safetensors

def header_of(blob):
    (n,) = struct.unpack("<Q", blob[:8])
    return n, json.loads(blob[8:8 + n])


def mixed_tensors():
    rng = np.random.default_rng(0)
    return {
        "flag": np.array([True, False, True]),
        "i8": np.arange(5, dtype=np.int8),
        "h": rng.standard_normal(3).astype(np.float16),
        "bf": TensorData.from_float(f32([1, 2, 3]), "bfloat16"),
        "f": rng.standard_normal((2, 3)).astype(np.float32),
        "z": (rng.standard_normal(3) + 1j).astype(np.complex128),
        "c": (rng.standard_normal(2) + 1j).astype(np.complex64),
        "scalar": np.float64(2.5),
        "empty": np.zeros((0, 4), np.float32),
        "e4": TensorData.from_float(f32([0.5, 448]), "float8_e4m3fn"),
        "i64T": np.arange(12, dtype=np.int64).reshape(3, 4).T,  # not contiguous
        "big_endian": np.arange(3, dtype=">f4"),
    }


def test_safetensors_offsets_are_aligned_and_gapless():
    tensors = mixed_tensors()
    blob = st.encode(tensors)
    n, header = header_of(blob)
    assert n % 8 == 0, "the data section must start 8-byte aligned"
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        size = st.DTYPES[st.TAG_TO_NAME[entry["dtype"]]][1].itemsize
        b, e = entry["data_offsets"]
        assert b % size == 0, (name, b, size)  # aligned for its element type: the server uses it in place
        spans.append((b, e))
    spans.sort()
    assert spans[0][0] == 0 and all(e0 == b1 for (_, e0), (b1, _) in zip(spans, spans[1:]))  # no gaps
    assert spans[-1][1] == len(blob) - 8 - n
    assert list(k for k in header) == list(tensors)  # header keeps the caller's order


def test_safetensors_roundtrip_and_views():
    tensors = mixed_tensors()
    blob = st.encode(tensors, metadata={"request": {"a": 1}})
    back, meta = st.decode(bytearray(blob))
    assert json.loads(meta["request"]) == {"a": 1}
    for name, value in tensors.items():
        got = back[name]
        if isinstance(value, TensorData):
            assert got == value, name
        else:
            want = np.asarray(value)
            assert got.dtype == want.dtype.newbyteorder("=") and got.shape == want.shape, name
            assert np.array_equal(got, want), name
    # views of a writable buffer: no copy, writable; of bytes: writable copies
    buf = np.frombuffer(bytearray(blob), np.uint8)
    views, _ = st.decode(buf)
    assert np.shares_memory(views["f"], buf) and views["f"].flags.writeable
    assert views["f"].ctypes.data % 8 == 0 or buf.ctypes.data % 8 != 0
    copies, _ = st.decode(blob)
    assert not np.shares_memory(copies["f"], buf) and copies["f"].flags.writeable
    copies["f"][0, 0] = 7.0


def test_encode_parts_send_the_arrays_own_memory():
    big = np.arange(1 << 16, dtype=np.float32)
    parts, total = st.encode_parts({"big": big, "small": np.ones(3, np.int8)})
    assert total == sum(memoryview(p).nbytes for p in parts) == len(st.encode({"big": big, "small": np.ones(3, np.int8)}))
    data = [p for p in parts[1:] if memoryview(p).nbytes == big.nbytes]
    assert len(data) == 1
    assert np.frombuffer(data[0], np.uint8).ctypes.data == big.ctypes.data  # a view, not a copy


def test_safetensors_rejects_malformed():
    blob = st.encode({"a": np.zeros(2, np.float32)})
    for bad in (blob[:4], blob[:-1], struct.pack("<Q", 10 ** 9) + blob[8:]):
        with pytest.raises(st.SafetensorsError):
            st.decode(bad)
    n, header = header_of(blob)
    header["b"] = {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}
    h = json.dumps(header).encode()
    with pytest.raises(st.SafetensorsError):
        st.decode(struct.pack("<Q", len(h)) + h + blob[8 + n:] + bytes(8))


def test_save_and_load_file(tmp_path):
    tensors = mixed_tensors()
    path = tmp_path / "x.safetensors"
    st.save_file(tensors, path)
    back, _ = st.load_file(path)
    assert np.array_equal(back["f"], tensors["f"]) and back["bf"] == tensors["bf"]
    assert back["f"].flags.writeable


# ---------------------------------------------------------------- errors

class FakeResponse:
    def __init__(self, status, body, headers=None):
        self.status_code = status
        self.headers = headers or {}
        self.content = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.text = self.content.decode()
        self.reason = "Reason"

    def json(self):
        return json.loads(self.content)


ALL_CODES = {
    "bad_request": (tensord.BadRequest, 400), "invalid_program": (tensord.InvalidProgram, 400),
    "unauthenticated": (tensord.Unauthenticated, 401), "forbidden": (tensord.Forbidden, 403),
    "not_found": (tensord.NotFound, 404), "unknown_op": (tensord.UnknownOp, 404),
    "conflict": (tensord.Conflict, 409), "payload_too_large": (tensord.PayloadTooLarge, 413),
    "shape_mismatch": (tensord.ShapeMismatch, 422), "dtype_mismatch": (tensord.DtypeMismatch, 422),
    "invalid_argument": (tensord.InvalidArgument, 422), "numerical_error": (tensord.NumericalError, 422),
    "quota_exceeded": (tensord.QuotaExceeded, 429), "queue_full": (tensord.QueueFull, 429),
    "cancelled": (tensord.Cancelled, 499), "internal": (tensord.Internal, 500),
    "unavailable": (tensord.Unavailable, 503), "deadline_exceeded": (tensord.DeadlineExceeded, 504),
}


@pytest.mark.parametrize("code", sorted(ALL_CODES))
def test_every_error_code_has_its_class(code):
    cls, status = ALL_CODES[code]
    assert issubclass(cls, tensord.TensordError) and cls.__name__ in tensord.__all__
    resp = FakeResponse(status, {"error": {"code": code, "message": "m", "node": "n3", "request_id": "r1"}},
                        {"X-Request-Id": "r0", "Retry-After": "7"} if status == 429 else {"X-Request-Id": "r0"})
    e = tensord.TensordError.from_response(resp)
    assert type(e) is cls
    assert (e.status, e.code, e.message, e.node, e.request_id) == (status, code, "m", "n3", "r1")
    assert e.retry_after == (7.0 if status == 429 else None)
    # a failed job's error object has no HTTP status: the code's own is used
    j = tensord.errors.error_from_body(None, {"code": code, "message": "m"})
    assert type(j) is cls and j.status == status
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is cls and again.retry_after == e.retry_after and again.node == "n3"


def test_error_without_a_code_and_retry_after_forms():
    e = tensord.TensordError.from_response(FakeResponse(502, b"<html>bad gateway</html>"))
    assert type(e) is tensord.TensordError and e.code == "http_502" and "bad gateway" in e.message
    e = tensord.TensordError.from_response(FakeResponse(404, {"error": "model 'm' not found"}))
    assert type(e) is tensord.NotFound and e.message == "model 'm' not found"  # KServe v2 form
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= tensord.errors.parse_retry_after(when) <= 31
    assert tensord.errors.parse_retry_after("soon") is None
    assert tensord.errors.parse_retry_after(None) is None


# ---------------------------------------------------------------- torch

def test_torch_values_are_sent_as_their_bits():
    need_torch()
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3).requires_grad_()
    name, shape, raw = st.convert(x.t())  # requires_grad and not contiguous
    assert (name, shape) == ("float32", [3, 2])
    assert np.frombuffer(raw, "<f4").tolist() == x.detach().t().contiguous().reshape(-1).tolist()
    b = torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16)
    name, shape, raw = st.convert(b)
    assert name == "bfloat16" and np.frombuffer(raw, "<u2").tolist() == b.view(torch.int16).numpy().view(np.uint16).tolist()
    c = torch.tensor([1 + 2j], dtype=torch.complex64).conj()  # a conjugate view
    assert np.frombuffer(st.convert(c)[2], "<c8").tolist() == [1 - 2j]
    with pytest.raises(ValueError), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch calls complex32 experimental
        st.convert(torch.zeros(2, dtype=torch.complex32))


def test_torch_results_share_the_received_memory():
    need_torch()
    from tensord import _torch
    arr = np.arange(4, dtype=np.float32)
    t = _torch.from_host(arr)
    assert t.dtype == torch.float32 and t.data_ptr() == arr.ctypes.data
    bf = _torch.from_host(TensorData(np.array([0x3F80, 0xC000], np.uint16), "bfloat16"))
    assert bf.dtype == torch.bfloat16 and bf.float().tolist() == [1.0, -2.0]
    f8 = TensorData(np.array([0x38], np.uint8), "float8_e4m3fn")
    got = _torch.from_host(f8)
    if getattr(torch, "float8_e4m3fn", None) is None:
        assert got is f8  # this torch has no float8: the value stays TensorData
    else:
        assert got.dtype == torch.float8_e4m3fn and got.float().tolist() == [1.0]


# ---------------------------------------------------------------- HTTP plumbing (a fake server)

class FakeHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _reply(self, status, body, ctype="application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        srv = self.server
        srv.hits.append((self.path, self.client_address[1]))
        if self.path.startswith("/busy"):
            left = srv.busy.get(self.path, 0)
            if left > 0:
                srv.busy[self.path] = left - 1
                err = {"error": {"code": "queue_full", "message": "full", "request_id": "q"}}
                hdr = [("Retry-After", "0")] if "noretryafter" not in self.path else []
                return self._reply(503 if "503" in self.path else 429, json.dumps(err).encode(), headers=hdr)
            return self._reply(200, b'{"ok": true}')
        if self.path.startswith("/v1/tensors/"):
            blob = st.encode({"t": srv.tensor})
            return self._reply(200, blob, "application/vnd.safetensors")
        if self.path.startswith("/v1/jobs/job-7"):
            srv.job_polls += 1
            state = ["queued", "running", "running", "succeeded"][min(srv.job_polls - 1, 3)]
            doc = {"id": "job-7", "state": state, "queue_ms": 1.5, "run_ms": 20.0 * srv.job_polls}
            if state == "succeeded":
                y = np.array([1.0, 2.5], np.float32)
                doc["outputs"] = {"y": {"dtype": "float32", "shape": [2],
                                        "b64": __import__("base64").b64encode(y.tobytes()).decode()}}
                doc["job"] = {"id": "job-7", "queue_ms": 0.0, "run_ms": 0.0}
            return self._reply(200, json.dumps(doc).encode())
        if self.path == "/slow":
            time.sleep(1.5)
            return self._reply(200, b"{}")
        self._reply(404, b'{"error": {"code": "not_found", "message": "no"}}')

    def do_PUT(self):
        n = int(self.headers["Content-Length"])
        body = self.rfile.read(n)
        self.server.bodies.append((self.headers.get("Transfer-Encoding"), n, body))
        self._reply(201, b"{}")


@pytest.fixture
def fake():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHandler)
    srv.hits, srv.busy, srv.bodies, srv.job_polls = [], {}, [], 0
    srv.tensor = np.arange(300000, dtype=np.float32).reshape(1000, 300)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    srv.url = "http://127.0.0.1:%d" % srv.server_address[1]
    yield srv
    srv.shutdown()
    srv.server_close()


def test_retries_turn_429_into_success(fake):
    c = tensord.Client(fake.url, retries=3)
    fake.busy["/busy/a"] = 3
    assert c._request("GET", "/busy/a").json() == {"ok": True}
    assert sum(1 for p, _ in fake.hits if p == "/busy/a") == 4
    fake.busy["/busy/b"] = 4  # one more than the retries
    with pytest.raises(tensord.QueueFull) as e:
        c._request("GET", "/busy/b")
    assert e.value.retry_after == 0.0 and e.value.status == 429
    assert sum(1 for p, _ in fake.hits if p == "/busy/b") == 4


def test_retries_zero_raises_at_once(fake):
    c = tensord.Client(fake.url, retries=0)
    fake.busy["/busy/c"] = 1
    with pytest.raises(tensord.QueueFull):
        c._request("GET", "/busy/c")
    assert sum(1 for p, _ in fake.hits if p == "/busy/c") == 1


def test_503_without_retry_after_backs_off(fake):
    c = tensord.Client(fake.url, retries=1)
    fake.busy["/busy/503/noretryafter"] = 1
    t0 = time.monotonic()
    assert c._request("GET", "/busy/503/noretryafter").status_code == 200
    assert time.monotonic() - t0 >= 0.9  # the default first wait, 1 s


def test_timeout_covers_the_deadline(fake):
    c = tensord.Client(fake.url, timeout=0.5, retries=0)
    assert c._timeouts(None) == (0.5, 0.5)
    assert c._timeouts(30000) == (0.5, 30.0 + tensord.DEADLINE_MARGIN_S)
    with pytest.raises(tensord.ClientTimeout):
        c._request("GET", "/slow")
    assert c._request("GET", "/slow", deadline_ms=1000).status_code == 200


def test_large_bodies_go_out_from_the_arrays(fake):
    c = tensord.Client(fake.url)
    big = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)  # 2 MiB: sent as parts
    c.put("big", big)
    te, n, body = fake.bodies[-1]
    assert te is None and n == len(body)  # Content-Length, not chunked
    assert body == st.encode({"big": big})


def test_answers_are_read_into_one_buffer_on_a_kept_alive_connection(fake):
    c = tensord.Client(fake.url)
    a = c.get("x")
    b = c.get("x")
    assert np.array_equal(a, fake.tensor) and a.flags.writeable
    assert a.base is not None  # a view of the receive buffer
    ports = {port for p, port in fake.hits if p.startswith("/v1/tensors/")}
    assert len(ports) == 1, "the connection was not reused: %s" % ports
    a[0, 0] = -1.0
    assert b[0, 0] == 0.0


def test_one_client_shared_by_threads(fake):
    c = tensord.Client(fake.url)
    errors = []

    def worker():
        try:
            for _ in range(5):
                assert np.array_equal(c.get("x"), fake.tensor)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len({port for p, port in fake.hits}) == 4  # one session (connection) per thread
    c.close()


def test_job_wait_polls_and_shows_a_plain_progress_line(fake, monkeypatch, capsys):
    from tensord import jobs
    monkeypatch.setattr(jobs, "_tqdm", lambda: None)  # as without tqdm
    c = tensord.Client(fake.url)
    job = tensord.Job(c, "job-7")
    assert job.wait(progress=True, stream=False) == "succeeded"
    assert fake.job_polls == 4 and job.done()
    err = capsys.readouterr().err
    assert "job job-7: queued" in err and "job job-7: succeeded, queue 2 ms, run 80 ms" in err, err
    assert err.endswith("\n")
    out = job.result()
    assert out["y"].tolist() == [1.0, 2.5] and out["y"].flags.writeable
    assert c.last_job == {"id": "job-7", "queue_ms": 1.5, "run_ms": 80.0}  # the top-level times
    assert job.status() == "succeeded" and fake.job_polls == 4  # an ended job is not asked again


# ---------------------------------------------------------------- MX tensors (no server)

def test_mx_tensor_dequantize_from_the_spec():
    """Codes chosen by hand from OCP MX v1.0's tables: the client's reference
    decodes them, packed in the documented bit order."""
    from tensord.mx import MxTensor
    # mxfp4_e2m1 codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; 8..15 their negatives.
    codes = list(range(16)) * 2
    packed = bytes((codes[2 * j] | (codes[2 * j + 1] << 4)) for j in range(16))
    q = MxTensor("mxfp4_e2m1", np.frombuffer(packed, np.uint8).reshape(1, 16), np.array([[128]], np.uint8), [1, 32])
    want = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)
    want = np.concatenate([want, -want] * 2) * 2
    np.testing.assert_array_equal(q.dequantize()[0], want)
    # mxfp6_e3m2: 0b011111 = 28 (the largest), 0b000001 = 2^-2 * 1/4 (subnormal), sign bit 0b100000.
    c = [0x1F, 0x01, 0x21, 0x00] * 8
    words = [c[4 * j] | c[4 * j + 1] << 6 | c[4 * j + 2] << 12 | c[4 * j + 3] << 18 for j in range(8)]
    raw = b"".join(struct.pack("<I", w)[:3] for w in words)
    q6 = MxTensor("mxfp6_e3m2", np.frombuffer(raw, np.uint8).reshape(24), np.array([127], np.uint8), [32])
    np.testing.assert_array_equal(q6.dequantize()[:4], np.array([28, 0.0625, -0.0625, 0], np.float32))
    # e4m3: 0x7F is NaN; e5m2: 0x7C inf; scale 255 NaN for its whole block.
    q8 = MxTensor("mxfp8_e4m3", np.array([0x7F, 0x38] + [0] * 30, np.uint8), np.array([127], np.uint8), [32])
    d8 = q8.dequantize()
    assert np.isnan(d8[0]) and d8[1] == 1.0
    q5 = MxTensor("mxfp8_e5m2", np.array([0x7C, 0xFC] + [0] * 62, np.uint8), np.array([127, 255], np.uint8), [64])
    d5 = q5.dequantize()
    assert d5[0] == np.inf and d5[1] == -np.inf and np.isnan(d5[32:]).all()


def test_mx_tensor_codecs_round_trip_and_refuse_bad_parts():
    from tensord.mx import MxTensor
    rng = np.random.default_rng(0)
    q = MxTensor("mxfp6_e2m3", rng.integers(0, 256, (24, 3), dtype=np.uint8),
                 rng.integers(0, 256, (2, 3), dtype=np.uint8), [32, 3], block_size=16, axis=0)
    body = st.encode({"w": q, "p": np.ones(2, np.float32)})
    tensors, meta = st.decode(body)
    assert tensors["w"] == q and set(tensors) == {"w", "p"} and meta == {}
    assert tensord.from_json_tensor(json.loads(json.dumps(tensord.to_json_tensor(q)))) == q
    assert tensord.from_json_tensor(json.loads(json.dumps(tensord.to_json_tensor(q, b64=False)))) == q
    with pytest.raises(ValueError):
        MxTensor("mxfp6_e2m3", np.zeros((24, 3), np.uint8), np.zeros((3, 3), np.uint8), [32, 3], 16, 0)
    with pytest.raises(ValueError):
        MxTensor("mxfp5", np.zeros(16, np.uint8), np.zeros(1, np.uint8), [32])
    with pytest.raises(TypeError):
        MxTensor("mxfp8_e4m3", np.zeros(32, np.float32), np.zeros(1, np.uint8), [32])
