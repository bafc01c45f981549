"""Pure-numpy safetensors encoder/decoder (API.md 3.2) and the tensor value conventions.

Everywhere a tensor is accepted you may pass

* a numpy array (its dtype picks the tensord dtype) or anything
  ``numpy.asarray`` takes,
* a torch tensor (any tensord dtype, bfloat16 and float8 included; on any
  device; with or without ``requires_grad``; contiguous or not),
* a :class:`TensorData` (raw bits of a dtype numpy lacks),
* a tuple ``(array, dtype_name)``: if ``array`` has the unsigned integer type
  of the same width as ``dtype_name`` it is taken as raw bits, otherwise its
  values are converted with the server's cast rules (:mod:`tensord.dtypes`).

Decoders return numpy arrays for dtypes numpy has and :class:`TensorData`
for bfloat16 and the float8 types; an MX pair (API.md 7) comes back as one
:class:`tensord.mx.MxTensor`, which the encoders also take.

Layout of what :func:`encode` writes: the header (``__metadata__`` first,
then the tensors in the given order) padded with spaces to a multiple of 8
bytes, then the data without gaps, laid out by element size, largest first
(the given order among equal sizes), as the server's own encoder does. Every
tensor's offset is then a multiple of its element size, so in a body the
server holds 8-byte aligned every tensor is aligned for its type and the
server uses it in place instead of copying it; and the file is still one the
Rust ``safetensors`` crate reads (it refuses gaps).

:func:`encode_parts` gives the same bytes as a list of buffers (the header,
then a ``memoryview`` of each tensor's own memory), which the client sends
as they are: a large tensor is never copied into one request body.
:func:`decode` returns arrays that are views of the buffer it is given (no
copy) unless that buffer is read-only (``bytes``), in which case each tensor
is copied so that results are writable numpy arrays as before.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _torch
from . import mx as _mx
from .dtypes import (DTYPES, KSERVE_ALIASES, NARROW, TAG_TO_NAME, TORCH_ALIASES, TensorData,  # noqa: F401
                     bits_to_float32, canonical_dtype, cast, dtype_name, float_to_bits)

__all__ = ["DTYPES", "TAG_TO_NAME", "NARROW", "KSERVE_ALIASES", "TORCH_ALIASES", "MAX_HEADER_BYTES", "TensorData",
           "SafetensorsError", "bits_to_float32", "float_to_bits", "canonical_dtype", "dtype_name", "cast",
           "host_value", "tensor_buffer", "convert", "from_bytes", "encode_parts", "encode", "decode", "save_file",
           "load_file"]

MAX_HEADER_BYTES = 100 * 1000 * 1000

Tensor = Union[np.ndarray, TensorData]
#: what :func:`host_value` gives: a tensor, or an MX tensor (kept as it is)
HostValue = Union[np.ndarray, TensorData, _mx.MxTensor]


class SafetensorsError(ValueError):
    """A malformed safetensors buffer."""


# ---------------------------------------------------------------- tensor values

def _is_raw_bits(arr: Any, name: str) -> bool:
    name = dtype_name(name)
    if DTYPES[name][2] or not isinstance(arr, np.ndarray):
        return False
    storage = DTYPES[name][1]
    return bool(arr.dtype.kind == "u" and arr.dtype.itemsize == storage.itemsize)


def _convert_to(arr: Any, name: str) -> Tensor:
    if DTYPES[name][2]:
        return cast(arr, name)
    arr = np.asarray(arr)
    if _is_raw_bits(arr, name):
        return TensorData(arr, name)
    return TensorData(float_to_bits(arr, name), name)


def host_value(value: Any, dtype: Any = None) -> HostValue:
    """Normalize an accepted tensor value to a numpy array or a TensorData (no copy
    when no conversion is needed). ``dtype`` asks for a conversion."""
    if isinstance(value, _mx.MxTensor):
        if dtype is not None:
            raise TypeError("an MX tensor cannot be converted to %s" % dtype)
        return value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        arr, name = value
        name = dtype_name(name)
        if _torch.is_tensor(arr):
            arr = _torch.to_host(arr)
        if not isinstance(arr, TensorData):
            arr = np.asarray(arr)
            if _is_raw_bits(arr, name):
                arr = TensorData(arr, name)
        return host_value(arr, dtype if dtype is not None else name)
    if _torch.is_tensor(value):
        value = _torch.to_host(value)
    if isinstance(value, TensorData):
        if dtype is None or dtype_name(dtype) == value.dtype_name:
            return value
        return _convert_to(value.to_float32(), dtype_name(dtype))
    arr = np.asarray(value)
    if dtype is None:
        dtype_name(arr.dtype)  # refuses dtypes the server does not have
        return arr
    return _convert_to(arr, dtype_name(dtype))


def tensor_buffer(value: Any, dtype: Any = None) -> Tuple[str, List[int], memoryview]:
    """``(dtype name, shape, memoryview of the contiguous little-endian bytes)``.

    The memoryview is the value's own memory when it is already contiguous
    and little-endian (no copy), else a fresh contiguous copy.
    """
    v = host_value(value, dtype)
    if isinstance(v, _mx.MxTensor):
        raise TypeError("an MX tensor is two tensors (elements and scale), not one buffer")
    if isinstance(v, TensorData):
        name, arr = v.dtype_name, v.bits
    else:
        name, arr = dtype_name(v.dtype), v
    storage = DTYPES[name][1]
    shape = [int(s) for s in arr.shape]
    if arr.dtype != storage:
        arr = arr.astype(storage)
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return name, shape, arr.reshape(-1).view(np.uint8).data


def convert(value: Any, dtype: Any = None) -> Tuple[str, List[int], bytes]:
    """Normalize a tensor value: returns ``(dtype_name, shape list, contiguous LE bytes)``."""
    name, shape, mv = tensor_buffer(value, dtype)
    return name, shape, mv.tobytes()


def from_bytes(buf: Any, dtype_name_: str, shape: Sequence[int], copy: bool = True) -> Tensor:
    """A numpy array (or TensorData) of raw little-endian bytes.

    ``copy=False`` returns a view of ``buf`` (writable when ``buf`` is).
    """
    name = dtype_name(dtype_name_)
    tag, storage, native = DTYPES[name]
    shape_t = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape_t):
        raise SafetensorsError("negative dimension in shape %s" % list(shape_t))
    n = 1
    for s in shape_t:
        n *= s
    mv = memoryview(buf)
    if mv.nbytes != n * storage.itemsize:
        raise SafetensorsError("%s%s needs %d bytes, got %d" % (name, list(shape_t), n * storage.itemsize, mv.nbytes))
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    arr = np.frombuffer(mv, dtype=storage)
    if copy:
        arr = arr.copy()
    arr = arr.reshape(shape_t)
    if native:
        if arr.dtype.byteorder not in ("=", "|") and arr.dtype != arr.dtype.newbyteorder("="):
            arr = arr.astype(arr.dtype.newbyteorder("="))
        return arr
    return TensorData(arr, name)


# ---------------------------------------------------------------- safetensors

def encode_parts(tensors: Mapping[str, Any], metadata: Optional[Mapping[str, Any]] = None
                 ) -> Tuple[List[Union[bytes, memoryview]], int]:
    """Encode ``{name: tensor}`` (and string metadata) as a list of buffers and the total size.

    The first buffer is the length and header; the others are the tensors'
    bytes in data order, as memoryviews of their own memory where possible.
    ``b"".join(parts)`` is the file.
    """
    md: Dict[str, Any] = dict(metadata or {})
    tensors = _mx.split(dict(tensors), md)  # an MX tensor: two entries and a description
    metadata = md
    entries = []
    for name, value in tensors.items():
        if name == "__metadata__":
            raise ValueError('a tensor may not be named "__metadata__"')
        dname, shape, mv = tensor_buffer(value)
        entries.append((name, dname, shape, mv))
    order = sorted(range(len(entries)), key=lambda i: -DTYPES[entries[i][1]][1].itemsize)
    span: Dict[int, Tuple[int, int]] = {}
    pos = 0
    for i in order:
        span[i] = (pos, pos + entries[i][3].nbytes)
        pos += entries[i][3].nbytes
    header: Dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in metadata.items()}
    for i, (name, dname, shape, mv) in enumerate(entries):
        header[name] = {"dtype": DTYPES[dname][0], "shape": shape, "data_offsets": list(span[i])}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    parts: List[Union[bytes, memoryview]] = [struct.pack("<Q", len(hjson)) + hjson]
    parts.extend(entries[i][3] for i in order if entries[i][3].nbytes)
    return parts, 8 + len(hjson) + pos


def encode(tensors: Mapping[str, Any], metadata: Optional[Mapping[str, Any]] = None) -> bytes:
    """Encode ``{name: tensor}`` (and string metadata) as safetensors bytes."""
    parts, _ = encode_parts(tensors, metadata)
    return b"".join(parts)


def decode(buf: Any, copy: Optional[bool] = None) -> Tuple[Dict[str, Tensor], Dict[str, str]]:
    """Decode a safetensors buffer. Returns ``(tensors, metadata)``; validates offsets.

    ``copy`` None: tensors are views of ``buf`` when it is writable (a
    ``bytearray``, a numpy buffer), copies when it is read-only (``bytes``).
    """
    mv = memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    if copy is None:
        copy = mv.readonly
    if len(mv) < 8:
        raise SafetensorsError("safetensors buffer shorter than 8 bytes")
    (n,) = struct.unpack("<Q", mv[:8])
    if n > MAX_HEADER_BYTES:
        raise SafetensorsError("safetensors header of %d bytes exceeds 100 MB" % n)
    if 8 + n > len(mv):
        raise SafetensorsError("safetensors header length %d exceeds the buffer" % n)
    try:
        header = json.loads(mv[8:8 + n].tobytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise SafetensorsError("bad safetensors header: %s" % e) from None
    if not isinstance(header, dict):
        raise SafetensorsError("safetensors header is not an object")
    data = mv[8 + n:]
    metadata = header.pop("__metadata__", None) or {}
    spans = []
    tensors: Dict[str, Tensor] = {}
    for name, entry in header.items():
        try:
            tag = entry["dtype"]
            shape = entry["shape"]
            begin, end = entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError("bad safetensors entry %r" % name) from None
        if tag not in TAG_TO_NAME:
            raise SafetensorsError("unknown safetensors dtype %r" % tag)
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end <= len(data)):
            raise SafetensorsError("offsets of %r out of range" % name)
        spans.append((begin, end, name))
        tensors[name] = from_bytes(data[begin:end], TAG_TO_NAME[tag], shape, copy=copy)
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0 and e1 > b1 and e0 > b0:
            raise SafetensorsError("tensors %r and %r overlap" % (n0, n1))
    return _mx.join(tensors, metadata), metadata


def save_file(tensors: Mapping[str, Any], path: Union[str, "os.PathLike[str]"], metadata: Optional[Mapping[str, Any]] = None
              ) -> None:
    parts, _ = encode_parts(tensors, metadata)
    with open(path, "wb") as f:
        for p in parts:
            f.write(p)


def load_file(path: Union[str, "os.PathLike[str]"]) -> Tuple[Dict[str, Tensor], Dict[str, str]]:
    """Read a file once into memory the returned arrays are views of."""
    size = os.path.getsize(path)
    buf = np.empty(size, np.uint8)
    with open(path, "rb") as f:
        got = f.readinto(buf.data)
    if got != size:
        raise SafetensorsError("%s: read %d of %d bytes" % (path, got, size))
    return decode(buf, copy=False)
