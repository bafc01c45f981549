"""The tensord dtype table, dtype names, casts and the narrow float formats.

Names are read exactly as the server reads them (``ops/dtype.cpp``): the
PyTorch names (``"float32"``, ``"bfloat16"``, ``"float8_e4m3fn"``, with or
without ``"torch."``), PyTorch's short aliases (``"float"`` is float32,
``"double"`` float64, ``"half"`` float16, ``"int"`` int32, ``"long"`` int64,
``"short"`` int16, ``"cfloat"`` complex64, ``"cdouble"`` complex128) and the
KServe v2 names (``"FP32"``, ``"INT64"``, ``"BF16"``, ...). numpy dtypes and
``torch.dtype`` objects are accepted too; a string is never read as numpy
would read it (numpy's ``"float"`` is float64, the server's is float32).

Values are cast with the server's rules (``ops/convert.cpp``) so that a
conversion done here gives the bits the server would give:

* float -> integer truncates toward zero, NaN gives 0, out-of-range values
  saturate to the type's limits; integer -> narrower integer wraps;
  complex -> real takes the real part; anything -> bool is ``!= 0``.
* the narrow floats (float16, bfloat16, the float8 formats) are reached
  through float32 (a float64 is rounded to float32 first), round to nearest
  even, as ``ops/kernels/float_conv.h`` does: float8_e4m3fn and float8_e5m2
  *saturate* a finite overflow (to +-448 / +-57344), float8_e4m3fn also
  saturates +-inf while float8_e5m2 keeps it, NaN stays NaN;
  float8_e8m0fnu drops the sign, rounds on the exponent (ties up) and maps
  NaN, inf and overflow to its NaN code 0xFF.

numpy has no bfloat16 or float8 types: such a tensor is a :class:`TensorData`
(the raw little-endian bits as ``uint16``/``uint8`` plus the dtype name).
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

# name -> (safetensors tag, numpy storage dtype, native in numpy?)
DTYPES: Dict[str, Tuple[str, np.dtype, bool]] = {
    "bool": ("BOOL", np.dtype(np.bool_), True),
    "uint8": ("U8", np.dtype("<u1"), True),
    "int8": ("I8", np.dtype("<i1"), True),
    "int16": ("I16", np.dtype("<i2"), True),
    "int32": ("I32", np.dtype("<i4"), True),
    "int64": ("I64", np.dtype("<i8"), True),
    "float16": ("F16", np.dtype("<f2"), True),
    "bfloat16": ("BF16", np.dtype("<u2"), False),
    "float32": ("F32", np.dtype("<f4"), True),
    "float64": ("F64", np.dtype("<f8"), True),
    "complex64": ("C64", np.dtype("<c8"), True),
    "complex128": ("C128", np.dtype("<c16"), True),
    "float8_e4m3fn": ("F8_E4M3", np.dtype("<u1"), False),
    "float8_e5m2": ("F8_E5M2", np.dtype("<u1"), False),
    "float8_e8m0fnu": ("F8_E8M0", np.dtype("<u1"), False),
}
TAG_TO_NAME: Dict[str, str] = {v[0]: k for k, v in DTYPES.items()}
NARROW: Tuple[str, ...] = tuple(k for k, v in DTYPES.items() if not v[2])

# KServe v2 datatype names the server accepts as aliases (ops/dtype.cpp).
KSERVE_ALIASES: Dict[str, str] = {
    "BOOL": "bool", "UINT8": "uint8", "INT8": "int8", "INT16": "int16",
    "INT32": "int32", "INT64": "int64", "FP16": "float16", "BF16": "bfloat16",
    "FP32": "float32", "FP64": "float64", "COMPLEX64": "complex64", "COMPLEX128": "complex128",
    "FP8_E4M3": "float8_e4m3fn", "FP8_E5M2": "float8_e5m2", "FP8_E8M0": "float8_e8m0fnu",
}
# PyTorch's short names, as the server reads them (not as numpy does).
TORCH_ALIASES: Dict[str, str] = {
    "float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
    "short": "int16", "cfloat": "complex64", "cdouble": "complex128",
}


def dtype_name(dtype: Any) -> str:
    """The tensord dtype name of a name, an alias, a numpy dtype or a ``torch.dtype``.

    Also accepts a safetensors tag (``"F32"``, ``"F8_E4M3"``) for files read
    from disk. Raises ValueError for anything the server does not have.
    """
    if isinstance(dtype, str):
        name = dtype[6:] if dtype.startswith("torch.") else dtype
        if name in DTYPES:
            return name
        for table in (TORCH_ALIASES, KSERVE_ALIASES, TAG_TO_NAME):
            if name in table:
                return table[name]
        raise ValueError("unknown dtype %r (tensord dtypes: %s)" % (dtype, " ".join(DTYPES)))
    if type(dtype).__module__ == "torch":  # a torch.dtype: str() is "torch.float32"
        name = str(dtype)[6:]
        if name in DTYPES:
            return name
        raise ValueError("%s has no tensord dtype (tensord dtypes: %s)" % (dtype, " ".join(DTYPES)))
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError("unknown dtype %r" % (dtype,)) from None
    if dt == np.dtype(np.bool_):
        return "bool"
    le = dt.newbyteorder("<") if dt.byteorder in (">", "=") else dt
    for k, (_, npdt, native) in DTYPES.items():
        if native and npdt == le:
            return k
    raise ValueError("dtype %s is not supported by tensord" % dt)


# The name this package used first; kept for callers of tensord.safetensors.
canonical_dtype = dtype_name


def element_size(name: str) -> int:
    return DTYPES[dtype_name(name)][1].itemsize


# ---------------------------------------------------------------- float32 -> narrow bits

def _f32_bits(x: np.ndarray) -> np.ndarray:
    """float32 bit patterns (uint64 for headroom) of values, rounded to float32 as the server does."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        x = x.real
    return x.astype(np.float32).view(np.uint32).astype(np.uint64)


def _encode_small_float(a: np.ndarray, mbits: int, bias: int, max_code: int) -> np.ndarray:
    """ops/kernels/float_conv.h encode_small_float on |x| bits ``a`` (finite, non-NaN), vectorized."""
    a = a.astype(np.int64)
    exp_field = a >> 23
    e = exp_field - 127
    m = a & 0x7FFFFF
    emin = 1 - bias
    sig = m | 0x800000
    sub = e < emin
    shift = np.where(sub, 23 - mbits + (emin - e), 23 - mbits)
    ebiased = np.where(sub, 0, e - emin + 1)
    too_small = shift > 40
    s = np.clip(shift, 1, 40)
    q = sig >> s
    rem = sig & ((np.int64(1) << s) - 1)
    half = np.int64(1) << (s - 1)
    q = q + ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    carry = (~sub) & ((q >> (mbits + 1)) != 0)
    q = np.where(carry, q >> 1, q)
    ebiased = ebiased + carry
    code = np.where(sub, q, (ebiased << mbits) | (q & ((1 << mbits) - 1)))
    code = np.minimum(code, max_code)
    code = np.where(too_small | (exp_field == 0) | (a == 0), 0, code)
    return code.astype(np.uint8)


def float_to_bits(x: Any, name: str) -> np.ndarray:
    """Encode values as the raw bits of a narrow float type, bit for bit as the server does.

    ``name`` is ``"bfloat16"``, ``"float8_e4m3fn"``, ``"float8_e5m2"`` or
    ``"float8_e8m0fnu"``; the rules are in this module's docstring.
    """
    name = dtype_name(name)
    u = _f32_bits(x)
    shape = np.shape(u)
    u = u.reshape(-1)
    a = u & 0x7FFFFFFF
    nan = a > 0x7F800000
    inf = a == 0x7F800000
    if name == "bfloat16":
        r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
        r = np.where(nan, (u >> 16) | 0x40, r)
        return r.astype(np.uint16).reshape(shape)
    if name == "float8_e8m0fnu":
        e = a >> 23
        m = a & 0x7FFFFF
        guard = (m & 0x400000) != 0
        sticky = (m & 0x3FFFFF) != 0
        up = np.where(e == 0, 0, e + guard)
        out = np.where(e == 0, (guard & sticky).astype(np.uint64), up)
        out = np.where((a >= 0x7F800000) | (out >= 0xFF), 0xFF, out)
        return out.astype(np.uint8).reshape(shape)
    sign = ((u >> 24) & 0x80).astype(np.uint8)
    if name == "float8_e4m3fn":
        code = _encode_small_float(np.where(nan | inf, 0, a), 3, 7, 0x7E)
        code = np.where(inf, 0x7E, code)
    elif name == "float8_e5m2":
        code = _encode_small_float(np.where(nan | inf, 0, a), 2, 15, 0x7B)
        code = np.where(inf, 0x7C, code)
    else:
        raise ValueError("%s is not a narrow float type" % name)
    code = np.where(nan, 0x7F, code).astype(np.uint8)
    out8: np.ndarray = (sign | code).reshape(shape)
    return out8


# ---------------------------------------------------------------- narrow bits -> float32

def _fp8_table(name: str) -> np.ndarray:
    """float32 values of the 256 codes, as ops/kernels/float_conv.h decodes them."""
    codes = np.arange(256, dtype=np.int64)
    if name == "float8_e8m0fnu":
        vals = np.ldexp(1.0, codes - 127)
        vals[255] = np.nan
        return vals.astype(np.float32)
    ebits, mbits, bias = (4, 3, 7) if name == "float8_e4m3fn" else (5, 2, 15)
    mag = codes & 0x7F
    e = mag >> mbits
    m = mag & ((1 << mbits) - 1)
    vals = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - mbits),
                    np.ldexp(1.0 + m / float(1 << mbits), e - bias))
    negative = (codes & 0x80) != 0
    if name == "float8_e4m3fn":
        vals = np.where(negative, -vals, vals)
        vals[mag == 0x7F] = np.nan  # positive NaN whatever the sign bit, as e4m3fn_to_f32
    else:
        vals[mag == 0x7C] = np.inf
        vals[mag > 0x7C] = np.nan
        vals = np.where(negative, -vals, vals)  # e5m2 negates NaN and inf too
    return vals.astype(np.float32)


_FP8_TABLES: Dict[str, np.ndarray] = {}


def _table(name: str) -> np.ndarray:
    if name not in _FP8_TABLES:
        _FP8_TABLES[name] = _fp8_table(name)
    return _FP8_TABLES[name]


def bits_to_float32(bits: Any, name: str) -> np.ndarray:
    """Decode the raw bits of a narrow float type to float32 (exact)."""
    name = dtype_name(name)
    b: np.ndarray = np.asarray(bits)
    if name == "bfloat16":
        return (b.astype(np.uint32) << 16).view(np.float32)
    return _table(name)[b.astype(np.intp)]


# ---------------------------------------------------------------- casts between numpy dtypes

def _float_to_int(v: np.ndarray, storage: np.dtype) -> np.ndarray:
    info = np.iinfo(storage)
    v = np.asarray(v, dtype=np.float64)
    upper = float(info.max) + 1.0   # 2^k, exact in float64
    lower = float(info.min)         # -2^k or 0, exact
    hi = v >= upper
    lo = v <= lower - 1.0
    nan = np.isnan(v)
    mid = np.where(hi | lo | nan, 0.0, np.trunc(v))
    out = mid.astype(storage)
    out[hi] = info.max
    out[lo] = info.min
    return out


def _to_float16(arr: np.ndarray) -> np.ndarray:
    f = arr.astype(np.float32, copy=False) if arr.dtype != np.float32 else arr
    with np.errstate(over="ignore"):  # overflow gives inf, as on the server
        out = f.astype(np.float16)
    nan = np.isnan(f)
    if nan.any():  # the server keeps the top payload bits and sets the quiet bit
        u = np.ascontiguousarray(f).view(np.uint32)[nan]
        out.view(np.uint16)[nan] = (((u >> 16) & 0x8000) | 0x7E00 | ((u & 0x7FFFFFFF) >> 13 & 0x3FF)).astype(np.uint16)
    return out


def cast(arr: Any, name: str) -> np.ndarray:
    """Cast a numpy array to a tensord dtype numpy has, with the server's cast rules."""
    name = dtype_name(name)
    tag, storage, native = DTYPES[name]
    if not native:
        raise ValueError("%s has no numpy dtype: use TensorData.from_float" % name)
    a: np.ndarray = np.asarray(arr)
    if a.dtype == storage:
        return a
    src = a.dtype.kind
    if src == "c" and storage.kind != "c":
        if storage.kind == "b":
            return np.asarray((a.real != 0) | (a.imag != 0))
        a = a.real
        src = a.dtype.kind
    if storage.kind == "b":
        return np.asarray(a != 0)
    if storage.kind in "iu":
        if src == "f":
            return _float_to_int(a, storage)
        return a.astype(storage)  # integers wrap, bool is 0/1
    if name == "float16":
        return _to_float16(a)
    return a.astype(storage)


class TensorData:
    """A tensor of a dtype numpy lacks: raw bits plus the tensord dtype name.

    ``bits`` is a ``uint16`` (bfloat16) or ``uint8`` (float8) numpy array;
    :meth:`to_float32` decodes it, :meth:`from_float` encodes values the way
    the server does.
    """

    __slots__ = ("bits", "dtype_name")
    bits: np.ndarray
    dtype_name: str

    def __init__(self, bits: Any, dtype_name_: str) -> None:
        name = dtype_name(dtype_name_)
        storage = DTYPES[name][1]
        bits = np.asarray(bits)
        if bits.dtype != storage:
            if bits.dtype.itemsize != storage.itemsize or bits.dtype.kind not in "ui":
                raise TypeError("raw bits for %s must be %s, got %s" % (name, storage, bits.dtype))
            bits = bits.view(storage)
        self.bits = bits
        self.dtype_name = name

    @classmethod
    def from_float(cls, values: Any, dtype_name_: str) -> "TensorData":
        name = dtype_name(dtype_name_)
        return cls(float_to_bits(values, name), name)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.bits.shape)

    @property
    def dtype(self) -> str:
        return self.dtype_name

    @property
    def nbytes(self) -> int:
        return int(self.bits.nbytes)

    def to_float32(self) -> np.ndarray:
        return bits_to_float32(self.bits, self.dtype_name)

    def numpy(self) -> np.ndarray:
        """The values as float32 (what ``torch.Tensor.float().numpy()`` gives)."""
        return self.to_float32()

    def tobytes(self) -> bytes:
        return self.bits.tobytes(order="C")

    def __len__(self) -> int:
        return len(self.bits)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TensorData) and other.dtype_name == self.dtype_name
                and other.bits.shape == self.bits.shape and bool(np.array_equal(other.bits, self.bits)))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "TensorData(dtype=%s, shape=%s, bits=%r)" % (self.dtype_name, list(self.shape), self.bits)
