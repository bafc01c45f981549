"""PyTorch interop, used only when torch is there (it is never imported just to look).

A torch tensor is sent as its bytes: detached, moved to the CPU, made
contiguous (conjugate and negative views resolved); bfloat16 and the float8
types travel as their raw bits, so nothing is rounded on the way. Results
come back as ``torch.from_numpy`` views of the received buffer (no copy) on
the device of the call's first torch input.

torch is the ``tensord[torch]`` extra: ``import tensord`` never imports it,
and what needs it (``as_torch=True``) says which extra to install. It is
imported by name (``importlib``) and used untyped, so that the client
type-checks the same with or without torch installed.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Optional

import numpy as np

from .dtypes import DTYPES, TensorData

# tensord dtypes numpy lacks -> the integer type of the same width torch views their bits as
_BITS_VIEW = {"bfloat16": ("int16", np.uint16), "float8_e4m3fn": ("uint8", np.uint8),
              "float8_e5m2": ("uint8", np.uint8), "float8_e8m0fnu": ("uint8", np.uint8)}


def loaded() -> Optional[Any]:
    """The torch module if the program has imported it, else None (no import here)."""
    return sys.modules.get("torch")


#: what to install for torch results (pip's extra; Debian's package)
INSTALL_HINT = "pip install 'tensord[torch]' (Debian: apt-get install python3-torch)"


def require(what: str = "torch results (as_torch=True)") -> Any:
    """The torch module, imported now if need be; an ImportError naming the
    ``tensord[torch]`` extra when it is not installed."""
    torch = loaded()
    if torch is not None:
        return torch
    try:
        return importlib.import_module("torch")
    except ImportError as e:
        raise ImportError("%s need PyTorch, which is not installed: %s" % (what, INSTALL_HINT)) from e


def is_tensor(value: Any) -> bool:
    torch = loaded()
    return torch is not None and isinstance(value, torch.Tensor)


def dtype_name_of(t: Any) -> str:
    name = str(t.dtype)[len("torch."):]
    if name not in DTYPES:
        raise ValueError("torch dtype %s has no tensord dtype (tensord dtypes: %s)" % (t.dtype, " ".join(DTYPES)))
    return name


def to_host(t: Any) -> Any:
    """A tensor's values as a numpy array (or TensorData for bfloat16/float8).

    No copy for a contiguous CPU tensor of a dtype numpy has.
    """
    torch = require()  # imported already: t is a torch tensor
    name = dtype_name_of(t)
    if t.layout != torch.strided:
        t = t.to_dense()
    t = t.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")
    if getattr(t, "is_conj", None) is not None and t.is_conj():
        t = t.resolve_conj()
    if getattr(t, "is_neg", None) is not None and t.is_neg():
        t = t.resolve_neg()
    if name in _BITS_VIEW:
        bits_dtype, np_bits = _BITS_VIEW[name]
        t = t.contiguous().view(getattr(torch, bits_dtype))
        return TensorData(t.numpy().view(np_bits), name)
    return t.numpy()


def from_host(value: Any, device: Any = None) -> Any:
    """A numpy array (or TensorData) as a torch tensor sharing its memory where it can.

    A float8 result under a torch without float8 types stays a TensorData.
    """
    torch = require()
    if isinstance(value, TensorData):
        name = value.dtype_name
        tdtype = getattr(torch, name, None)
        if tdtype is None:
            return value
        bits_dtype, np_bits = _BITS_VIEW[name]
        bits = np.ascontiguousarray(value.bits).view(np.dtype(bits_dtype))
        t = _from_numpy(torch, bits).view(tdtype)
    elif isinstance(value, np.ndarray) or np.isscalar(value):
        arr = np.asarray(value)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("="))
        t = _from_numpy(torch, arr)
    else:
        return value
    if device is not None and t.device != device:
        t = t.to(device)
    return t


def _from_numpy(torch: Any, arr: np.ndarray) -> Any:
    if not arr.flags.writeable:  # torch warns on read-only memory: give it its own copy
        arr = arr.copy()
    return torch.from_numpy(arr)
