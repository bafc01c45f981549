"""Reading tensord's answers: the wire helpers that :mod:`tensord.client` and
:mod:`tensord.jobs` share (private; imports neither of them).

- decoding API.md 3.1 JSON tensors (:func:`from_json_tensor`, re-exported
  as ``tensord.from_json_tensor``) and the outputs of a ``/v1/run``-like
  answer (``_decode_output``, ``_collect_outputs``);
- reading a ``stream=True`` answer's body into one buffer straight from
  the socket (``_read_body``) and decoding a JSON answer, its ``"b64"``
  tensors included, as it arrives (``_json_doc``); failures while reading
  raise the client's errors (``ClientTimeout``, ``TransportError``,
  ``TensordError`` ``bad_response``).
"""

from __future__ import annotations

import binascii
import http.client
import math
import socket
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np
import requests

from . import _jsonbody
from . import mx as _mx
from . import safetensors as st
from .dtypes import TensorData, dtype_name
from .errors import ClientTimeout, TensordError, TransportError


# ---------------------------------------------------------------- JSON tensors and outputs

def _flatten(data: Any) -> List[Any]:
    if isinstance(data, list):
        out: List[Any] = []
        for d in data:
            if isinstance(d, list):
                out.extend(_flatten(d))
            else:
                out.append(d)
        return out
    return [data]


def _num(x: Any) -> Any:
    if isinstance(x, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "+inf": math.inf}[x.lower()]
    return x


def from_json_tensor(obj: Mapping[str, Any]) -> Any:
    """Decode an API.md 3.1 JSON tensor into a numpy array (or TensorData, or an MxTensor)."""
    if _mx.is_mx_json(obj):
        return _mx.MxTensor.from_parts(obj, from_json_tensor(obj["elements"]), from_json_tensor(obj["scale"]))
    name = dtype_name(obj["dtype"])
    shape = [int(s) for s in obj.get("shape", [])]
    if "b64" in obj:
        b64 = obj["b64"]
        if isinstance(b64, _jsonbody.DecodedB64):  # decoded while the answer was read: its own buffer
            raw = b64.data
            return st.from_bytes(raw if isinstance(raw, (np.ndarray, bytearray)) else bytearray(raw), name, shape, copy=False)
        # binascii straight from the str: base64.b64decode copies it to bytes first
        return st.from_bytes(bytearray(binascii.a2b_base64(b64)), name, shape, copy=False)
    data = obj.get("data")
    storage = st.DTYPES[name][1]
    if name in ("complex64", "complex128"):
        def pairs(d: Any) -> List[complex]:
            if isinstance(d, list) and len(d) == 2 and not isinstance(d[0], list):
                return [complex(_num(d[0]), _num(d[1]))]
            out: List[complex] = []
            for e in (d if isinstance(d, list) else [d]):
                out.extend(pairs(e))
            return out
        arr = np.array(pairs(data), dtype=storage)
    else:
        flat = [_num(v) for v in _flatten(data)]
        if name in st.NARROW:
            return TensorData.from_float(np.array(flat, dtype=np.float64).reshape(shape), name)
        if name == "bool":
            arr = np.array(flat, dtype=np.bool_)
        elif storage.kind in "iu":
            arr = np.array([int(v) for v in flat], dtype=storage)
        else:
            arr = np.array(flat, dtype=np.float64).astype(storage)
    return arr.reshape(shape)


def _decode_output(v: Any) -> Any:
    """One output of a JSON answer: a tensor, or ``{"per_rank": [...]}`` (API.md 8) as a list."""
    if isinstance(v, dict) and isinstance(v.get("per_rank"), list):
        return [_decode_output(t) for t in v["per_rank"]]
    return from_json_tensor(v)


def _collect_outputs(described: Mapping[str, Any], tensors: Mapping[str, Any]) -> Dict[str, Any]:
    """The outputs of a /v1/run-like answer, in the answer's order.

    ``described`` is the JSON ``outputs`` (tensors inline for a JSON answer,
    their dtype and shape for a safetensors one); ``tensors`` the file's
    tensors of a safetensors answer, where an output that differs across
    ranks is ``<name>/<i>`` (API.md 8) and comes back as a list.
    """
    out: Dict[str, Any] = {}
    used = set()
    for k, v in described.items():
        if k in tensors:
            out[k] = tensors[k]
            used.add(k)
        elif isinstance(v, dict) and isinstance(v.get("per_rank"), list):
            parts = ["%s/%d" % (k, i) for i in range(len(v["per_rank"]))]
            if parts and all(p in tensors for p in parts):
                out[k] = [tensors[p] for p in parts]
                used.update(parts)
            elif all(_inline(t) for t in v["per_rank"]):
                out[k] = _decode_output(v)
        elif _inline(v):
            out[k] = _decode_output(v)
    for k, t in tensors.items():  # a tensor the description does not name
        if k not in used and k not in out:
            out[k] = t
    return out


def _inline(v: Any) -> bool:
    """Whether a described output carries its data (not only its dtype and shape)."""
    return isinstance(v, dict) and ("data" in v or "b64" in v or ("mx" in v and "elements" in v))


# ---------------------------------------------------------------- reading answers

def _json_doc(resp: requests.Response) -> Any:
    """A JSON answer, its ``"b64"`` tensors decoded straight from the bytes
    read (``_jsonbody``): no str of the text is ever made, and a large
    answer is decoded a chunk at a time as it arrives."""
    try:
        n = _readable_length(resp)
        if n is not None and n >= _STREAM_JSON_BYTES:
            return _consume(resp, lambda readinto: _jsonbody.load_stream(readinto, n))
        return _jsonbody.loads(_read_body(resp, bytearray))
    except (ValueError, EOFError) as e:
        raise TensordError(resp.status_code, "bad_response", "the answer is not JSON: %s" % e) from e


_STREAM_JSON_BYTES = 4 << 20  # JSON answers this large are decoded as they arrive


def _text_buffer(n: int) -> Any:
    """A writable buffer of ``n`` bytes with ``find`` (for JSON text): a
    huge-page mapping when large (``_jsonbody.huge_mapping``)."""
    return bytearray(n) if n < (4 << 20) else _jsonbody.huge_mapping(n)


def _readable_length(resp: requests.Response) -> Optional[int]:
    """The length of a ``stream=True`` answer still to be read from its
    socket (a Content-Length, no content coding), else None."""
    # requests marks a body not read yet with _content = False; types-requests declares bytes | None
    if resp._content is not False:  # type: ignore[comparison-overlap]  # noqa: SLF001 - read already
        return None
    length = resp.headers.get("Content-Length")
    if length is None or resp.headers.get("Content-Encoding", "identity").lower() != "identity":
        return None
    return int(length)


def _consume(resp: requests.Response, use: Callable[[Callable[[memoryview], int]], Any]) -> Any:
    """Calls ``use(readinto)`` on the answer's socket (http.client's
    ``readinto``: bytes go straight into the caller's buffer), maps
    transport failures to the client's errors, then hands the connection
    back to the pool."""
    raw = resp.raw
    fp = getattr(raw, "_fp", None)
    readinto = fp.readinto if isinstance(fp, http.client.HTTPResponse) else raw.readinto
    try:
        result = use(readinto)
    except socket.timeout as e:
        raise ClientTimeout(0, "client_timeout", "timed out reading the answer: %s" % e) from e
    except (OSError, http.client.HTTPException, requests.RequestException) as e:
        raise TransportError(0, "connection_error", "reading the answer failed: %s" % e) from e
    except EOFError as e:
        raise TransportError(0, "connection_error", str(e)) from e
    except ValueError:
        resp.close()  # not the answer it claims to be: the connection is not reused
        raise
    resp._content = b""  # noqa: SLF001 - consumed: the connection goes back to the pool
    resp._content_consumed = True  # type: ignore[attr-defined]  # noqa: SLF001 - not in types-requests
    release = getattr(raw, "release_conn", None)
    if release is not None:
        release()
    return result


def _read_body(resp: requests.Response, kind: Any = None) -> Any:
    """The body of a ``stream=True`` response, read into one writable buffer.

    With a Content-Length the bytes go from the socket straight into a numpy
    buffer (http.client's ``readinto``), which the decoded tensors are then
    views of (``kind=bytearray``: a buffer with ``find``, for text);
    otherwise (or when a response hook already read the body) it is
    requests' own ``content``.
    """
    n = _readable_length(resp)
    if n is None:
        return resp.content
    if kind is bytearray:
        buf = _text_buffer(n)
        mv = memoryview(buf)
    else:
        arr = np.empty(n, np.uint8)
        buf, mv = arr, arr.data

    def fill(readinto: Callable[[memoryview], int]) -> Any:
        pos = 0
        while pos < n:
            k = readinto(mv[pos:])
            if not k:
                raise EOFError("the connection closed after %d of %d bytes of the answer" % (pos, n))
            pos += k
        return buf

    return _consume(resp, fill)
