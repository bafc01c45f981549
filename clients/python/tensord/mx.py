"""MX (microscaling) tensors, API.md 7: packed element bits, e8m0 block scales
and their description, as the server stores and sends them.

:class:`MxTensor` holds

* ``format``: ``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp6_e2m3"``,
  ``"mxfp6_e3m2"`` or ``"mxfp4_e2m1"``,
* ``block_size`` (32 by default), ``axis`` (as given, may be negative),
  ``shape`` (the logical shape),
* ``elements``: ``uint8``, the logical shape with the block axis packed to
  ``len * bits / 8`` bytes; every 1-D fiber along the axis is one
  little-endian bit stream, element i in stream bits ``[i*b, i*b+b)`` with
  its code's bit 0 first (FP4: element 2j in the low nibble of byte j; FP6:
  elements 4j..4j+3 in bytes 3j..3j+2 as ``c0 | c1<<6 | c2<<12 | c3<<18``),
* ``scale``: ``uint8`` e8m0 codes (2^(code-127), 255 is NaN), the logical
  shape with the axis divided by ``block_size``.

:meth:`MxTensor.dequantize` gives the float32 values, computed here from the
OCP MX v1.0 definitions (not by the server). In safetensors an MX tensor is
``<name>`` (U8) + ``<name>.scale`` (F8_E8M0) + ``__metadata__["<name>"]``;
in JSON ``{"mx", "block_size", "axis", "shape", "elements", "scale"}``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Sequence, Tuple

import numpy as np

# name -> (bits, exponent bits, mantissa bits, bias, e4m3-style NaN, e5m2-style inf/NaN)
FORMATS: Dict[str, Tuple[int, int, int, int, bool, bool]] = {
    "mxfp8_e4m3": (8, 4, 3, 7, True, False),
    "mxfp8_e5m2": (8, 5, 2, 15, False, True),
    "mxfp6_e2m3": (6, 2, 3, 1, False, False),
    "mxfp6_e3m2": (6, 3, 2, 3, False, False),
    "mxfp4_e2m1": (4, 2, 1, 1, False, False),
}


def _packed_len(fmt: str, n: int) -> int:
    return n * FORMATS[fmt][0] // 8


class MxTensor:
    """An MX tensor: packed element bits, e8m0 scales and the description."""

    __slots__ = ("format", "block_size", "axis", "shape", "elements", "scale")

    def __init__(self, format: str, elements: Any, scale: Any, shape: Sequence[int], block_size: int = 32,
                 axis: int = -1) -> None:
        if format not in FORMATS:
            raise ValueError("unknown MX format %r; expected one of %s" % (format, ", ".join(FORMATS)))
        self.format = format
        self.block_size = int(block_size)
        self.axis = int(axis)
        self.shape = tuple(int(s) for s in shape)
        bits = getattr(scale, "bits", scale)  # a TensorData of float8_e8m0fnu: its raw bits
        el, sc = np.asarray(elements), np.asarray(bits)
        for what, a in (("elements", el), ("scale", sc)):
            if a.dtype.itemsize != 1 or a.dtype.kind not in "ui":
                raise TypeError("MX %s must be uint8 bytes, got %s" % (what, a.dtype))
        self.elements = np.ascontiguousarray(el.view(np.uint8))
        self.scale = np.ascontiguousarray(sc.view(np.uint8))
        nd = len(self.shape)
        if nd == 0 or not -nd <= self.axis < nd:
            raise ValueError("axis %d out of range for shape %s" % (self.axis, list(self.shape)))
        ax = self.axis % nd
        n = self.shape[ax]
        if self.block_size <= 0 or n % self.block_size:
            raise ValueError("axis length %d is not a multiple of block_size %d" % (n, self.block_size))
        want_el = list(self.shape)
        want_el[ax] = _packed_len(format, n)
        want_sc = list(self.shape)
        want_sc[ax] = n // self.block_size
        if list(self.elements.shape) != want_el:
            raise ValueError("elements must be uint8%s for %s%s, got %s" % (want_el, format, list(self.shape),
                                                                             list(self.elements.shape)))
        if list(self.scale.shape) != want_sc:
            raise ValueError("scale must be %s for %s%s, got %s" % (want_sc, format, list(self.shape),
                                                                     list(self.scale.shape)))

    # -- description
    def metadata(self) -> Dict[str, Any]:
        return {"mx": self.format, "block_size": self.block_size, "axis": self.axis, "shape": list(self.shape)}

    def metadata_json(self) -> str:
        """The ``__metadata__`` value, written as the server writes it."""
        return json.dumps(self.metadata(), separators=(",", ":"))

    @classmethod
    def from_parts(cls, description: Any, elements: Any, scale: Any) -> "MxTensor":
        d = json.loads(description) if isinstance(description, str) else description
        return cls(d["mx"], elements, scale, d["shape"], d["block_size"], d["axis"])

    @property
    def nbytes(self) -> int:
        return int(self.elements.nbytes + self.scale.nbytes)

    @property
    def dtype(self) -> str:
        return self.format

    # -- values
    def codes(self) -> np.ndarray:
        """The element codes (uint32), the logical shape."""
        bits = FORMATS[self.format][0]
        ax = self.axis % len(self.shape)
        el = np.moveaxis(self.elements, ax, -1)
        lead = el.shape[:-1]
        b = el.reshape(-1, el.shape[-1]).astype(np.uint32)
        if bits == 8:
            c = b
        elif bits == 4:
            c = np.stack([b & 0xF, b >> 4], axis=-1).reshape(b.shape[0], -1)
        else:
            g = b.reshape(b.shape[0], -1, 3)
            w = g[..., 0] | (g[..., 1] << 8) | (g[..., 2] << 16)
            c = np.stack([(w >> (6 * k)) & 0x3F for k in range(4)], axis=-1).reshape(b.shape[0], -1)
        return np.moveaxis(c.reshape(lead + (c.shape[-1],)), -1, ax)

    def dequantize(self) -> np.ndarray:
        """The float32 values: element value times 2^(scale-127); NaN where the scale is 255."""
        bits, ebits, mbits, bias, e4m3_nan, e5m2_inf = FORMATS[self.format]
        code = self.codes()
        mag = code & ((1 << (bits - 1)) - 1)
        neg = (code >> (bits - 1)) & 1
        e = (mag >> mbits).astype(np.int64)
        m = (mag & ((1 << mbits) - 1)).astype(np.float64)
        v = np.where(e == 0, m * 2.0 ** (1 - bias - mbits), (1.0 + m / 2.0 ** mbits) * np.exp2(e - bias))
        if e4m3_nan:
            v = np.where(mag == 0x7F, np.nan, v)
        if e5m2_inf:
            v = np.where(mag == 0x7C, np.inf, np.where(mag > 0x7C, np.nan, v))
        v = np.where(neg == 1, -v, v)
        ax = self.axis % len(self.shape)
        sc = np.exp2(self.scale.astype(np.float64) - 127.0)
        sc = np.where(self.scale == 255, np.nan, sc)
        sc = np.repeat(sc, self.block_size, axis=ax)
        return (v * sc).astype(np.float32)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, MxTensor) and other.metadata() == self.metadata()
                and np.array_equal(other.elements, self.elements) and np.array_equal(other.scale, self.scale))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "MxTensor(%s, shape=%s, block_size=%d, axis=%d, %d bytes)" % (
            self.format, list(self.shape), self.block_size, self.axis, self.nbytes)


def is_mx_json(obj: Any) -> bool:
    return isinstance(obj, dict) and "mx" in obj


def split(tensors: Dict[str, Any], metadata: Dict[str, str]) -> Dict[str, Any]:
    """``{name: value}`` with every MxTensor as its two safetensors entries;
    their descriptions go into ``metadata``."""
    if not any(isinstance(v, MxTensor) for v in tensors.values()):
        return tensors
    out: Dict[str, Any] = {}
    for name, v in tensors.items():
        if isinstance(v, MxTensor):
            if name in metadata:
                raise ValueError("MX tensor %r: its name is a metadata key already" % name)
            metadata[name] = v.metadata_json()
            out[name] = v.elements
            out[name + ".scale"] = (v.scale, "float8_e8m0fnu")
        else:
            out[name] = v
    return out


def join(tensors: Dict[str, Any], metadata: Dict[str, str]) -> Dict[str, Any]:
    """The decoder's side of :func:`split` (the server's rules): a metadata
    value naming a tensor that is a JSON object with an ``"mx"`` key joins
    ``<name>`` and ``<name>.scale``."""
    found = {}
    for key, text in metadata.items():
        if key not in tensors or key + ".scale" not in tensors:
            continue
        try:
            d = json.loads(text)
        except ValueError:
            continue
        if is_mx_json(d):
            found[key] = d
    if not found:
        return tensors
    out: Dict[str, Any] = {}
    for name, v in tensors.items():
        if name in found:
            out[name] = MxTensor.from_parts(found[name], v, tensors[name + ".scale"])
        elif name.endswith(".scale") and name[:-6] in found:
            continue
        else:
            out[name] = v
    for key in found:
        metadata.pop(key, None)
    return out
