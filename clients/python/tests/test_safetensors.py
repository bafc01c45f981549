"""The safetensors layout the server's zero-copy path needs: aligned, gapless
offsets, views of the received buffer, bodies sent from the arrays' own
memory, malformed files refused, files saved and loaded."""

import json
import struct

import numpy as np
import pytest

from tensord import TensorData
from tensord import safetensors as st


def f32(vals):
    return np.array(vals, dtype=np.float32)


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
