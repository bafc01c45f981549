"""dtype names against the server's table in ops/dtype.cpp, and the narrow-float
encodings against the rules of ops/kernels/float_conv.h and an independent
nearest-even reference (API.md 3; no server needed)."""

import os
import re

import numpy as np
import pytest

import tensord
from tensord import TensorData, dtypes
from tensord import safetensors as st

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

# ---------------------------------------------------------------- dtype names

def server_dtype_names():
    """(name -> dtype enum) of every name ops/dtype.cpp's dtype_from_name accepts."""
    path = os.path.join(REPO, "ops", "dtype.cpp")
    if not os.path.isfile(path):  # the client folder on its own, outside the repository
        print("skipping: %s is not there to compare with" % path)
        pytest.skip("%s is not there to compare with" % path)
    src = open(path).read()
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


def test_dtype_names_of_numpy():
    assert tensord.dtype_name(np.float32) == "float32"
    assert tensord.dtype_name(np.dtype(">i8")) == "int64"
    assert tensord.dtype_name(np.bool_) == "bool"
    with pytest.raises(ValueError):
        tensord.dtype_name(np.uint16)


def test_dtype_names_of_torch(torch):
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
