"""MX tensors (API.md 7) without a server: dequantized from codes chosen by hand
from OCP MX v1.0's tables, and their safetensors and JSON codecs."""

import json
import struct

import numpy as np
import pytest

import tensord
from tensord import safetensors as st


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
