"""The JSON transport (tensord/_jsonbody.py), no tensord server needed:
request bodies are JSON text around each tensor's base64 bytes, byte for
byte what json.dumps would write, sent with a Content-Length; answers decode
each "b64" value straight from the bytes, large ones as they arrive."""

import http.server
import json

import numpy as np
import pytest

import tensord


class Recorder(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_PUT(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        self.server.bodies.append((self.headers.get("Transfer-Encoding"), n, body))
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


@pytest.fixture
def recorder(local_http):
    return local_http(Recorder, bodies=[])


def test_large_json_bodies_carry_the_encoders_base64_bytes(recorder):
    # 2 MiB: sent as its pieces, not joined
    c = tensord.Client(recorder.url, transport="json")
    big = np.random.default_rng(1).standard_normal((512, 1024)).astype(np.float32)
    c.put("big", big)
    te, n, body = recorder.bodies[-1]
    assert te is None and n == len(body)
    assert body == json.dumps(tensord.to_json_tensor(big)).encode()
    doc = json.loads(body)
    assert np.array_equal(tensord.from_json_tensor(doc), big)


def test_json_body_pieces_match_json_dumps_for_nested_and_lookalike_values():
    from tensord import _jsonbody
    a = np.arange(7, dtype=np.int16)
    b = np.ones((3, 2), np.float64)
    doc = {"program": {"nodes": [], "note": "tensord-b64-0000-0 \u00e9\""},
           "inputs": {"a": {"dtype": "int16", "shape": [7], "b64": _jsonbody.RawB64(memoryview(a).cast("B"))},
                      "b": [{"b64": _jsonbody.RawB64(memoryview(b).cast("B"))}, 3, None]}}
    parts, total = _jsonbody.dumps_parts(doc)
    text = b"".join(bytes(p) for p in parts)
    assert total == len(text)
    assert text == json.dumps(_jsonbody.plain(doc)).encode()
    assert len(parts) == 5  # three pieces of text around two tensors' bytes


def test_answers_decode_each_b64_value_straight_from_the_bytes():
    """_jsonbody.loads: the same document json.loads gives, each "b64" value
    its decoded bytes; values it cannot take on the fast path (escaped text)
    and lookalikes inside strings are json.loads' to decode."""
    from tensord import _jsonbody
    import base64 as b64mod

    a = np.arange(1000, dtype=np.float32).tobytes()
    b = bytes(range(256)) * 3
    doc = {"outputs": {"w": {"dtype": "float32", "shape": [1000], "b64": b64mod.b64encode(a).decode()},
                       "v": {"dtype": "uint8", "shape": [768], "b64": b64mod.b64encode(b).decode()}},
           "name": 'x\\"b64\\": \\"QUJD', "job": {"id": "j1"}}
    for text in (json.dumps(doc), json.dumps(doc, indent=2), json.dumps(doc, separators=(",", ":"))):
        for buf in (text.encode(), bytearray(text.encode())):
            got = _jsonbody.loads(buf)
            assert got["name"] == doc["name"] and got["job"] == doc["job"]
            assert got["outputs"]["w"]["b64"].data == a
            assert got["outputs"]["v"]["b64"].data == b
            assert got["outputs"]["w"]["shape"] == [1000]
    # An escaped slash is still base64 once unescaped: left to json.loads.
    esc = b'{"b64": "AAA\\/"}'
    assert _jsonbody.loads(esc)["b64"] == "AAA/"
    assert _jsonbody.loads(b'{"data": [1, 2]}') == {"data": [1, 2]}
    with pytest.raises(ValueError):
        _jsonbody.loads(b'{"b64": "A!==", "x": 1}')
    with pytest.raises(ValueError):
        _jsonbody.loads(b'{"b64": "QUJD')


def test_large_answers_decode_as_they_arrive_whatever_the_chunks():
    """_jsonbody.load_stream: the same result as loads for every read size
    (keys, groups and closing quotes cut anywhere); malformed values and
    answers that stop short are errors, not wrong tensors."""
    import io
    import base64 as b64mod
    from tensord import _jsonbody

    a = np.arange(1000, dtype=np.float32).tobytes()
    b = bytes(range(256)) * 3 + b"xy"
    doc = {"outputs": {"w": {"dtype": "float32", "shape": [1000], "b64": b64mod.b64encode(a).decode()},
                       "v": {"dtype": "uint8", "shape": [770], "b64": b64mod.b64encode(b).decode()}},
           "name": 'x\\"b64\\": \\"QUJD', "job": {"id": "j1"}}
    old = _jsonbody._CHUNK
    try:
        for text in (json.dumps(doc), json.dumps(doc, indent=2), json.dumps(doc).replace('"b64": ', '"b64"  :\n   ')):
            raw = text.encode()
            for chunk in (1, 2, 3, 5, 7, 64, 1000, 1 << 20):
                _jsonbody._CHUNK = chunk
                got = _jsonbody.load_stream(io.BytesIO(raw).readinto, len(raw))
                assert bytes(got["outputs"]["w"]["b64"].data) == a, chunk
                assert bytes(got["outputs"]["v"]["b64"].data) == b, chunk
                assert got["name"] == doc["name"] and got["job"] == doc["job"]
        for bad in (b'{"b64": "QUJ!"}', b'{"b64": "QUJDR"}', b'{"b64": "QUJD', b'{"b64": "QU\\/D"}'):
            for chunk in (1, 3, 100):
                _jsonbody._CHUNK = chunk
                with pytest.raises((ValueError, EOFError)):
                    _jsonbody.load_stream(io.BytesIO(bad).readinto, len(bad))
        short = json.dumps(doc).encode()
        with pytest.raises(EOFError):
            _jsonbody.load_stream(io.BytesIO(short[:-10]).readinto, len(short))
    finally:
        _jsonbody._CHUNK = old
