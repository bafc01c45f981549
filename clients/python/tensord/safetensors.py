"""Pure-numpy safetensors encoder/decoder and the tensord dtype table.

Convention for dtypes numpy does not have (``bfloat16``, ``float8_e4m3fn``,
``float8_e5m2``, ``float8_e8m0fnu``): such a tensor is a :class:`TensorData`,
which holds the raw little-endian bit patterns as an unsigned integer numpy
array (``uint16`` for bfloat16, ``uint8`` for the float8 types) in ``.bits``
and the tensord dtype name in ``.dtype_name``.  ``TensorData.to_float32()``
decodes the values.  Everywhere a tensor is accepted you may pass

* a numpy array (its dtype picks the tensord dtype),
* a :class:`TensorData`,
* a tuple ``(array, dtype_name)``: if ``array`` has the unsigned integer type
  of the same width as ``dtype_name`` it is taken as raw bits, otherwise its
  values are converted (round to nearest even; see :func:`convert`).

Everything a decoder returns is a numpy array for dtypes numpy has, and a
:class:`TensorData` for the four narrow float types above.
"""

import json
import struct

import numpy as np

# name -> (safetensors tag, numpy storage dtype, native?)
DTYPES = {
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
TAG_TO_NAME = {v[0]: k for k, v in DTYPES.items()}
NARROW = tuple(k for k, v in DTYPES.items() if not v[2])

# KServe v2 datatype names accepted as aliases (API.md 3.1).
KSERVE_ALIASES = {
    "BOOL": "bool", "UINT8": "uint8", "INT8": "int8", "INT16": "int16",
    "INT32": "int32", "INT64": "int64", "FP16": "float16", "BF16": "bfloat16",
    "FP32": "float32", "FP64": "float64",
}

MAX_HEADER_BYTES = 100 * 1000 * 1000


class SafetensorsError(ValueError):
    """A malformed safetensors buffer."""


def canonical_dtype(name):
    """Return the tensord dtype name for a name, a KServe alias, a tag or a numpy dtype."""
    if isinstance(name, str):
        if name in DTYPES:
            return name
        if name in KSERVE_ALIASES:
            return KSERVE_ALIASES[name]
        if name in TAG_TO_NAME:
            return TAG_TO_NAME[name]
        try:
            dt = np.dtype(name)
        except TypeError:
            raise ValueError("unknown dtype %r" % (name,))
    else:
        dt = np.dtype(name)
    dt = dt.newbyteorder("<") if dt.byteorder == ">" else dt
    for k, (_, npdt, native) in DTYPES.items():
        if native and npdt == dt.newbyteorder("<"):
            return k
    if dt == np.dtype(np.bool_):
        return "bool"
    raise ValueError("dtype %s is not supported by tensord" % dt)


# ---------------------------------------------------------------- narrow floats

def _fp8_table(name):
    """float64 values of all 256 codes of a float8 format."""
    codes = np.arange(256, dtype=np.int64)
    if name == "float8_e8m0fnu":
        vals = np.ldexp(1.0, codes - 127).astype(np.float64)
        vals[255] = np.nan
        return vals
    if name == "float8_e4m3fn":
        ebits, mbits, bias = 4, 3, 7
    elif name == "float8_e5m2":
        ebits, mbits, bias = 5, 2, 15
    else:
        raise ValueError(name)
    sign = np.where(codes >> 7, -1.0, 1.0)
    e = (codes >> mbits) & ((1 << ebits) - 1)
    m = codes & ((1 << mbits) - 1)
    normal = np.ldexp(1.0 + m / float(1 << mbits), e - bias)
    sub = np.ldexp(m / float(1 << mbits), 1 - bias)
    vals = sign * np.where(e == 0, sub, normal)
    emax = (1 << ebits) - 1
    if name == "float8_e4m3fn":
        vals[(e == emax) & (m == (1 << mbits) - 1)] = np.nan
    else:
        vals[(e == emax) & (m == 0)] = sign[(e == emax) & (m == 0)] * np.inf
        vals[(e == emax) & (m != 0)] = np.nan
    return vals


_FP8_TABLES = {}


def _table(name):
    if name not in _FP8_TABLES:
        _FP8_TABLES[name] = _fp8_table(name)
    return _FP8_TABLES[name]


def bits_to_float32(bits, dtype_name):
    """Decode raw bits of a narrow float type to float32."""
    bits = np.asarray(bits)
    if dtype_name == "bfloat16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return _table(dtype_name)[bits.astype(np.int64)].astype(np.float32)


def float_to_bits(x, dtype_name):
    """Encode float values to raw bits (round to nearest even).

    bfloat16 rounds like PyTorch.  float8_e4m3fn gives NaN past its largest
    finite value (+half an ulp), float8_e5m2 gives inf, as PyTorch's casts do;
    float8_e8m0fnu takes the nearest power of two.
    """
    x = np.asarray(x)
    if dtype_name == "bfloat16":
        f = x.astype(np.float32)
        b = f.view(np.uint32).astype(np.uint64)
        r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
        nan = np.isnan(f)
        r[nan] = ((b[nan] >> 16).astype(np.uint16) & 0x8000) | 0x7FC0
        return r
    x = x.astype(np.float64)
    table = _table(dtype_name)
    if dtype_name == "float8_e8m0fnu":
        with np.errstate(divide="ignore", invalid="ignore"):
            e = np.round(np.log2(np.abs(x)))
        e = np.clip(np.nan_to_num(e, nan=0.0, posinf=128, neginf=-127), -127, 127)
        out = (e + 127).astype(np.uint8)
        out[np.isnan(x) | np.isinf(x)] = 0xFF
        return out
    pos_codes = np.arange(128)
    pos_vals = table[:128]
    finite = np.isfinite(pos_vals)
    pos_codes, pos_vals = pos_codes[finite], pos_vals[finite]
    top = pos_vals[-1]
    next_val = top + (top - pos_vals[-2])          # the value one ulp past the max
    over_code = 0x7F if dtype_name == "float8_e4m3fn" else 0x7C
    vals = np.append(pos_vals, next_val)
    codes = np.append(pos_codes, over_code)
    a = np.abs(x)
    idx = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
    lo, hi = vals[idx - 1], vals[idx]
    pick_hi = (a - lo > hi - a) | ((a - lo == hi - a) & (codes[idx] % 2 == 0))
    out = np.where(pick_hi, codes[idx], codes[idx - 1]).astype(np.uint8)
    out[a > next_val] = over_code
    out |= np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    nan_code = 0x7F if dtype_name == "float8_e4m3fn" else 0x7F
    out[np.isnan(x)] = nan_code
    return out


class TensorData:
    """A tensor of a dtype numpy lacks: raw bits plus the tensord dtype name."""

    __slots__ = ("bits", "dtype_name")

    def __init__(self, bits, dtype_name):
        dtype_name = canonical_dtype(dtype_name)
        storage = DTYPES[dtype_name][1]
        bits = np.asarray(bits)
        if bits.dtype != storage:
            if bits.dtype.itemsize != storage.itemsize or bits.dtype.kind not in "ui":
                raise TypeError("raw bits for %s must be %s, got %s" % (dtype_name, storage, bits.dtype))
            bits = bits.view(storage)
        self.bits = bits
        self.dtype_name = dtype_name

    @classmethod
    def from_float(cls, values, dtype_name):
        dtype_name = canonical_dtype(dtype_name)
        return cls(float_to_bits(values, dtype_name), dtype_name)

    @property
    def shape(self):
        return self.bits.shape

    @property
    def dtype(self):
        return self.dtype_name

    def to_float32(self):
        return bits_to_float32(self.bits, self.dtype_name)

    def tobytes(self):
        return self.bits.tobytes(order="C")

    def __eq__(self, other):
        return (isinstance(other, TensorData) and other.dtype_name == self.dtype_name
                and other.bits.shape == self.bits.shape and np.array_equal(other.bits, self.bits))

    def __repr__(self):
        return "TensorData(dtype=%s, shape=%s, bits=%r)" % (self.dtype_name, list(self.shape), self.bits)


def convert(value, dtype=None):
    """Normalize a tensor value: returns (dtype_name, shape list, contiguous LE bytes).

    ``value`` is a numpy array / array-like, a TensorData, or (array, dtype_name).
    ``dtype`` (optional) asks for a conversion.
    """
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        arr, name = value
        return convert(TensorData(arr, name) if _is_raw_bits(arr, name) else np.asarray(arr), name)
    if isinstance(value, TensorData):
        if dtype is not None and canonical_dtype(dtype) != value.dtype_name:
            return convert(value.to_float32(), dtype)
        return value.dtype_name, list(value.bits.shape), value.tobytes()
    arr = np.asarray(value)
    name = canonical_dtype(dtype) if dtype is not None else canonical_dtype(arr.dtype)
    tag, storage, native = DTYPES[name]
    if native:
        arr = arr.astype(storage, copy=False)
        return name, list(arr.shape), arr.tobytes(order="C")
    if _is_raw_bits(arr, name):
        bits = arr.view(storage)
    else:
        bits = float_to_bits(arr, name)
    return name, list(arr.shape), np.asarray(bits).tobytes(order="C")


def _is_raw_bits(arr, name):
    name = canonical_dtype(name)
    storage = DTYPES[name][1]
    arr = np.asarray(arr)
    return (not DTYPES[name][2]) and arr.dtype.kind == "u" and arr.dtype.itemsize == storage.itemsize


def from_bytes(buf, dtype_name, shape):
    """Build a numpy array (or TensorData) from raw little-endian bytes."""
    dtype_name = canonical_dtype(dtype_name)
    tag, storage, native = DTYPES[dtype_name]
    shape = tuple(int(s) for s in shape)
    n = 1
    for s in shape:
        n *= s
    if len(buf) != n * storage.itemsize:
        raise SafetensorsError("%s%s needs %d bytes, got %d" % (dtype_name, list(shape), n * storage.itemsize, len(buf)))
    arr = np.frombuffer(bytes(buf), dtype=storage).reshape(shape).copy()
    if native:
        return arr.astype(arr.dtype.newbyteorder("="), copy=False)
    return TensorData(arr, dtype_name)


# ---------------------------------------------------------------- safetensors

def encode(tensors, metadata=None):
    """Encode ``{name: tensor}`` (and string metadata) as safetensors bytes."""
    header = {}
    chunks = []
    offset = 0
    for name, value in tensors.items():
        dtype_name, shape, raw = convert(value)
        header[name] = {"dtype": DTYPES[dtype_name][0], "shape": shape,
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {k: (v if isinstance(v, str) else json.dumps(v))
                                  for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    return struct.pack("<Q", len(hjson)) + hjson + b"".join(chunks)


def decode(buf):
    """Decode safetensors bytes. Returns ``(tensors, metadata)``; validates offsets."""
    buf = memoryview(buf)
    if len(buf) < 8:
        raise SafetensorsError("safetensors buffer shorter than 8 bytes")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > MAX_HEADER_BYTES:
        raise SafetensorsError("safetensors header of %d bytes exceeds 100 MB" % n)
    if 8 + n > len(buf):
        raise SafetensorsError("safetensors header length %d exceeds the buffer" % n)
    try:
        header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise SafetensorsError("bad safetensors header: %s" % e)
    if not isinstance(header, dict):
        raise SafetensorsError("safetensors header is not an object")
    data = buf[8 + n:]
    metadata = header.pop("__metadata__", None) or {}
    spans = []
    tensors = {}
    for name, entry in header.items():
        try:
            tag = entry["dtype"]
            shape = entry["shape"]
            b, e = entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError("bad safetensors entry %r" % name)
        if tag not in TAG_TO_NAME:
            raise SafetensorsError("unknown safetensors dtype %r" % tag)
        if not (0 <= b <= e <= len(data)):
            raise SafetensorsError("offsets of %r out of range" % name)
        spans.append((b, e, name))
        tensors[name] = from_bytes(data[b:e], TAG_TO_NAME[tag], shape)
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise SafetensorsError("tensors %r and %r overlap" % (n0, n1))
    return tensors, metadata


def save_file(tensors, path, metadata=None):
    with open(path, "wb") as f:
        f.write(encode(tensors, metadata))


def load_file(path):
    with open(path, "rb") as f:
        return decode(f.read())
