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

PyTorch's and numpy's own MX types (imported only when these are called;
``import tensord`` needs neither):

* :func:`to_torchao` / :func:`from_torchao`: torchao's MX tensor
  (``torchao.prototype.mx_formats.mx_tensor.MXTensor``, torchao 0.18),
* :meth:`MxTensor.elements_as_ml_dtypes`, :meth:`MxTensor.scale_as_ml_dtypes`
  and :meth:`MxTensor.from_ml_dtypes`: the element codes and scales as
  ml_dtypes arrays (``float8_e4m3fn``, ``float8_e5m2``, ``float6_e2m3fn``,
  ``float6_e3m2fn``, ``float4_e2m1fn``; ``float8_e8m0fnu``), one code per
  byte.

Each keeps the bits: the values torchao's ``dequantize()`` gives in float32
are the same float32 numbers as :meth:`MxTensor.dequantize` (NaN where it
has NaN). What the other side cannot represent is a ``ValueError`` saying
so (see :func:`to_torchao`).
"""

from __future__ import annotations

import importlib
import json
import math
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


#: format -> the ml_dtypes type of one element code (one code per byte, in its low bits)
ML_DTYPES: Dict[str, str] = {
    "mxfp8_e4m3": "float8_e4m3fn",
    "mxfp8_e5m2": "float8_e5m2",
    "mxfp6_e2m3": "float6_e2m3fn",
    "mxfp6_e3m2": "float6_e3m2fn",
    "mxfp4_e2m1": "float4_e2m1fn",
}
#: the ml_dtypes (and torch) type of the scales
SCALE_ML_DTYPE = "float8_e8m0fnu"


def _packed_len(fmt: str, n: int) -> int:
    return n * FORMATS[fmt][0] // 8


def _require(module: str, package: str, what: str) -> Any:
    """``module`` imported now (by name, untyped, as tensord._torch does), or
    an ImportError naming the PyPI package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError("%s needs %s, which is not installed: pip install %s" % (what, package, package)) from e


def _pack(fmt: str, codes: np.ndarray, ax: int) -> np.ndarray:
    """The inverse of :meth:`MxTensor.codes`: element codes (one per item,
    the logical shape) packed along axis ``ax`` as :class:`MxTensor` holds them."""
    bits = FORMATS[fmt][0]
    c = np.moveaxis(np.asarray(codes).astype(np.uint32), ax, -1)
    lead = c.shape[:-1]
    n = c.shape[-1]
    if n * bits % 8 or (bits == 6 and n % 4):
        raise ValueError("%d %s elements along the axis are not whole bytes" % (n, fmt))
    c = c.reshape(int(np.prod(lead, dtype=np.int64)), n)
    b: np.ndarray
    if bits == 8:
        b = c
    elif bits == 4:
        b = c[:, 0::2] | (c[:, 1::2] << 4)
    else:
        g = c.reshape(c.shape[0], n // 4, 4)
        w = g[..., 0] | (g[..., 1] << 6) | (g[..., 2] << 12) | (g[..., 3] << 18)
        b = np.stack([(w >> (8 * k)) & 0xFF for k in range(3)], axis=-1).reshape(c.shape[0], -1)
    b = b.astype(np.uint8).reshape(lead + (b.shape[-1],))
    return np.ascontiguousarray(np.moveaxis(b, -1, ax))


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
        with np.errstate(over="ignore"):  # a scale near 2^127 times a large element is inf, as the spec has it
            return (v * sc).astype(np.float32)

    # -- ml_dtypes (numpy's float8 / float6 / float4 / e8m0 types)
    def elements_as_ml_dtypes(self) -> np.ndarray:
        """The element codes unpacked, one per byte, as an array of the
        format's ml_dtypes type (:data:`ML_DTYPES`: ``float8_e4m3fn``,
        ``float8_e5m2``, ``float6_e2m3fn``, ``float6_e3m2fn``,
        ``float4_e2m1fn``), the logical shape; its ``.astype(np.float32)``
        is the element values before scaling. A new array."""
        ml = _require("ml_dtypes", "ml-dtypes", "MxTensor.elements_as_ml_dtypes")
        return self.codes().astype(np.uint8).view(getattr(ml, ML_DTYPES[self.format]))

    def scale_as_ml_dtypes(self) -> np.ndarray:
        """The scales as an ``ml_dtypes.float8_e8m0fnu`` array (a copy), the
        logical shape with the block axis divided by ``block_size``; its
        ``.astype(np.float32)`` is 2^(code-127), NaN for code 255."""
        ml = _require("ml_dtypes", "ml-dtypes", "MxTensor.scale_as_ml_dtypes")
        return self.scale.copy().view(getattr(ml, SCALE_ML_DTYPE))

    @classmethod
    def from_ml_dtypes(cls, elements: Any, scale: Any, block_size: int = 32, axis: int = -1) -> "MxTensor":
        """An MX tensor from ml_dtypes arrays: ``elements`` (the logical
        shape; its dtype, one of :data:`ML_DTYPES`, names the format) and
        ``scale`` (``float8_e8m0fnu``, the axis divided by ``block_size``),
        the inverse of :meth:`elements_as_ml_dtypes` / :meth:`scale_as_ml_dtypes`.
        Another dtype, a shape that does not fit, or a code with bits set
        above the format's width is a ValueError."""
        ml = _require("ml_dtypes", "ml-dtypes", "MxTensor.from_ml_dtypes")
        el, sc = np.asarray(elements), np.asarray(scale)
        by_dtype = {np.dtype(getattr(ml, t)): f for f, t in ML_DTYPES.items()}
        fmt = by_dtype.get(el.dtype)
        if fmt is None:
            raise ValueError("MX elements must be one of ml_dtypes' %s, got %s"
                             % (", ".join(ML_DTYPES.values()), el.dtype))
        if sc.dtype != np.dtype(getattr(ml, SCALE_ML_DTYPE)):
            raise ValueError("MX scale must be ml_dtypes.%s, got %s" % (SCALE_ML_DTYPE, sc.dtype))
        if el.ndim == 0 or not -el.ndim <= int(axis) < el.ndim:
            raise ValueError("axis %d out of range for shape %s" % (int(axis), list(el.shape)))
        codes = el.view(np.uint8)
        bits = FORMATS[fmt][0]
        if bits < 8 and codes.size and int(codes.max()) >> bits:
            raise ValueError("%s elements hold codes wider than %d bits" % (el.dtype, bits))
        return cls(fmt, _pack(fmt, codes, int(axis) % el.ndim), sc.view(np.uint8), el.shape, block_size, axis)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, MxTensor) and other.metadata() == self.metadata()
                and np.array_equal(other.elements, self.elements) and np.array_equal(other.scale, self.scale))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "MxTensor(%s, shape=%s, block_size=%d, axis=%d, %d bytes)" % (
            self.format, list(self.shape), self.block_size, self.axis, self.nbytes)


# ---------------------------------------------------------------- torchao

def _torchao_elem_dtypes(torch: Any) -> Dict[str, Any]:
    """format -> torchao's ``elem_dtype``: torch's float8 dtypes, torchao's
    fp6 names, torch.float4_e2m1fn_x2 (as torchao 0.18 spells them)."""
    consts = _require("torchao.prototype.mx_formats.constants", "torchao", "tensord.mx's torchao interop")
    return {
        "mxfp8_e4m3": torch.float8_e4m3fn,
        "mxfp8_e5m2": torch.float8_e5m2,
        "mxfp6_e2m3": consts.DTYPE_FP6_E2M3,
        "mxfp6_e3m2": consts.DTYPE_FP6_E3M2,
        "mxfp4_e2m1": torch.float4_e2m1fn_x2,
    }


def to_torchao(q: MxTensor, orig_dtype: Any = None, kernel_preference: Any = None) -> Any:
    """``q`` as torchao's MX tensor (``torchao.prototype.mx_formats.mx_tensor.MXTensor``),
    the same bits (copied), on the CPU.

    torchao's layout: ``qdata`` in the logical shape, the block axis last:
    FP8 as ``torch.float8_e4m3fn`` / ``float8_e5m2``; FP6 ``uint8``, one
    code per byte in bits 0-5 (torchao does not pack FP6); FP4 ``uint8``
    with the last dimension halved, element 2j in the low nibble of byte j
    (tensord's FP4 bytes as they are). ``scale`` is ``torch.float8_e8m0fnu``
    of shape ``shape[:-1] + (shape[-1] // block_size,)``, not swizzled.
    ``elem_dtype`` is torch's dtype for FP8 and FP4
    (``torch.float4_e2m1fn_x2``) and torchao's ``"fp6_e2m3"`` /
    ``"fp6_e3m2"`` for FP6. ``orig_dtype`` (``torch.float32`` by default, or
    ``torch.bfloat16``) is the tensor's dtype and what its
    ``dequantize()`` returns; in float32 those are the values of
    :meth:`MxTensor.dequantize`, bit for bit (NaN where it is NaN).
    ``kernel_preference`` defaults to torchao's ``KernelPreference.EMULATED``
    (its matmuls dequantize, so they run on any device).

    Blocks along the first axis of a 2-D tensor become torchao's transposed
    layout (what ``MXTensor.t()`` gives: ``qdata`` and ``scale`` transposed
    views, as torchao holds a linear layer's weight). Anything else torchao
    cannot represent is a ValueError: blocks along any other axis that is
    not the last (torchao blocks the last dimension), and a transposed 2-D
    tensor with a dimension of 1 (torchao then takes it for a contiguous
    one and gets FP4's shape, or its blocks, wrong). ``q`` not an
    :class:`MxTensor` is a ValueError too.
    """
    if not isinstance(q, MxTensor):
        raise ValueError("to_torchao takes a tensord.mx.MxTensor, got %s" % type(q).__name__)
    torch = _require("torch", "torch", "to_torchao")
    mxt = _require("torchao.prototype.mx_formats.mx_tensor", "torchao", "to_torchao")
    if orig_dtype is None:
        orig_dtype = torch.float32
    if orig_dtype not in (torch.float32, torch.bfloat16):
        raise ValueError("torchao's MX tensors have orig_dtype torch.float32 or torch.bfloat16, not %s" % orig_dtype)
    if kernel_preference is None:
        kernel_preference = _require("torchao.quantization.quantize_.common.kernel_preference", "torchao",
                                     "to_torchao").KernelPreference.EMULATED
    nd = len(q.shape)
    ax = q.axis % nd
    transposed = ax != nd - 1
    if transposed and (nd != 2 or ax != 0):
        raise ValueError("torchao's MXTensor blocks the last dimension (or the first of a 2-D tensor, as its "
                         "transposed layout); it cannot represent blocks along axis %d of shape %s"
                         % (q.axis, list(q.shape)))
    elements, scale, codes = q.elements, q.scale, None
    if FORMATS[q.format][0] == 6:
        codes = q.codes().astype(np.uint8)
    if transposed:
        if 1 in q.elements.shape:
            raise ValueError("torchao cannot represent blocks along axis 0 of shape %s: its transposed layout "
                             "needs both dimensions (packed too) above 1, or it is taken for a contiguous one"
                             % list(q.shape))
        elements, scale = elements.T, scale.T
        codes = None if codes is None else codes.T
    data = np.ascontiguousarray(elements if codes is None else codes).copy()
    qdata = torch.from_numpy(data)
    if q.format.startswith("mxfp8"):
        qdata = qdata.view(_torchao_elem_dtypes(torch)[q.format])
    sc = torch.from_numpy(np.ascontiguousarray(scale).copy()).view(torch.float8_e8m0fnu)
    t = mxt.MXTensor(qdata, sc, _torchao_elem_dtypes(torch)[q.format], q.block_size, orig_dtype,
                     kernel_preference, None, False)
    return t.t() if transposed else t


def from_torchao(t: Any) -> MxTensor:
    """torchao's MX tensor (``torchao.prototype.mx_formats.mx_tensor.MXTensor``)
    as an :class:`MxTensor`, the same bits (copied to the host), the inverse
    of :func:`to_torchao`.

    torchao's contiguous layout gives ``axis=-1``; its transposed 2-D layout
    (``MXTensor.t()``: ``qdata`` not contiguous, its transpose contiguous)
    gives ``axis=0``; swizzled scales (``is_swizzled_scales=True``, the
    cuBLAS tile layout) are put back in row order. ``orig_dtype`` and
    ``kernel_preference`` are not kept (tensord's MX tensors dequantize to
    float32). A ValueError: ``t`` not a torchao MXTensor (a DTensor: take
    its ``full_tensor()`` first; NVFP4Tensor is not MX), an element dtype
    tensord lacks, ``qdata`` / ``scale`` of another dtype or shape than that
    dtype needs, FP6 codes above 6 bits, or a layout neither contiguous nor
    transposed.
    """
    torch = _require("torch", "torch", "from_torchao")
    mxt = _require("torchao.prototype.mx_formats.mx_tensor", "torchao", "from_torchao")
    if not isinstance(t, mxt.MXTensor):
        raise ValueError("from_torchao takes torchao's MXTensor (torchao.prototype.mx_formats), got %s"
                         % type(t).__name__)
    fmt = next((f for f, d in _torchao_elem_dtypes(torch).items() if t.elem_dtype == d), None)
    if fmt is None:
        raise ValueError("torchao MXTensor with elem_dtype %r: tensord has no such MX format (%s)"
                         % (t.elem_dtype, ", ".join(FORMATS)))
    bits = FORMATS[fmt][0]
    qdata, scale, block_size = t.qdata.detach(), t.scale.detach(), int(t.block_size)
    want = t.elem_dtype if bits == 8 else torch.uint8
    if qdata.dtype != want:
        raise ValueError("torchao %s qdata must be %s, got %s" % (fmt, want, qdata.dtype))
    if scale.dtype != torch.float8_e8m0fnu:
        raise ValueError("torchao MX scale must be torch.float8_e8m0fnu, got %s" % scale.dtype)
    if qdata.dim() == 0:
        raise ValueError("torchao MX qdata is 0-d")
    transposed = False
    if not qdata.is_contiguous():
        if qdata.dim() != 2 or not qdata.t().is_contiguous():
            raise ValueError("torchao MX qdata of shape %s and strides %s is neither contiguous nor transposed"
                             % (list(qdata.shape), list(qdata.stride())))
        transposed = True
        qdata, scale = qdata.t(), scale.t()
    # now torchao's contiguous layout: blocks along the last dimension
    shape = list(qdata.shape)
    if bits == 4:
        shape[-1] *= 2
    if block_size <= 0 or shape[-1] % block_size:
        raise ValueError("torchao MX tensor of shape %s: block_size %d does not divide the last dimension"
                         % (shape, block_size))
    if t.is_swizzled_scales:
        if len(shape) < 2:
            raise ValueError("torchao MX tensor of shape %s with swizzled scales" % shape)
        utils = _require("torchao.prototype.mx_formats.utils", "torchao", "from_torchao")
        rows, cols = math.prod(shape[:-1]), shape[-1] // block_size
        if scale.numel() < rows * cols:
            raise ValueError("torchao MX swizzled scale of %d codes for %d x %d blocks"
                             % (scale.numel(), rows, cols))
        scale = utils.from_blocked(scale.contiguous(), rows, cols).reshape(*shape[:-1], cols)
    host = qdata.cpu().contiguous().view(torch.uint8).numpy()
    sc = scale.cpu().contiguous().view(torch.uint8).numpy()
    if bits == 6:
        if host.size and int(host.max()) >> 6:
            raise ValueError("torchao %s qdata holds codes wider than 6 bits" % fmt)
        host = _pack(fmt, host, host.ndim - 1)
    if transposed:
        host, sc, shape = host.T, sc.T, shape[::-1]
    return MxTensor(fmt, np.ascontiguousarray(host), np.ascontiguousarray(sc), shape, block_size,
                    0 if transposed else -1)


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
