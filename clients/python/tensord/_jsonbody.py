"""JSON bodies whose tensors' base64 text never becomes a Python str.

A 256 MiB tensor's base64 is 341 MB of text; ``json.dumps`` of a dict
holding it as a str scans every character for escapes and ``.decode`` made
that str from the encoder's bytes first: 1.3 s of the 4.3 s a JSON ``put``
took (bench/README.md, "datapath"). Base64 needs no escaping, so the body is
written as JSON text around the encoder's bytes: ``dumps`` replaces each
:class:`RawB64` with a marker string, then the text is cut at the markers
and the bytes go between the pieces, sent as they are (no join for large
bodies).

Answers the other way (:func:`loads`): the body is read into one buffer,
each ``"b64": "..."`` value is decoded by binascii straight from that
buffer and the rest of the text, a few hundred bytes, goes to
``json.loads``. requests' ``.json()`` made three copies of the text first
(its chunks joined, a str, the value's str) and took 3.4 s for 256 MiB
against 1.0 s for the decode itself.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from typing import Any, List, Tuple, Union

Part = Union[bytes, memoryview]


class RawB64:
    """The base64 of a buffer, kept as the encoder's bytes."""
    __slots__ = ("data",)

    def __init__(self, buf: Any) -> None:
        self.data = base64.b64encode(buf)

    def text(self) -> str:
        return self.data.decode("ascii")


def plain(doc: Any) -> Any:
    """``doc`` with every RawB64 as the str it stands for (small bodies, metadata)."""
    if isinstance(doc, RawB64):
        return doc.text()
    if isinstance(doc, dict):
        return {k: plain(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [plain(v) for v in doc]
    return doc


def dumps_parts(doc: Any) -> Tuple[List[Part], int]:
    """``doc`` as JSON: the list of its pieces and their total length."""
    nonce = secrets.token_hex(8)
    raws: List[bytes] = []

    def swap(o: Any) -> Any:
        if isinstance(o, RawB64):
            raws.append(o.data)
            return "tensord-b64-%s-%d" % (nonce, len(raws) - 1)
        if isinstance(o, dict):
            return {k: swap(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [swap(v) for v in o]
        return o

    text = json.dumps(swap(doc)).encode("utf-8")
    if not raws:
        return [text], len(text)
    parts: List[Part] = []
    pos = 0
    for m in re.finditer(rb"tensord-b64-" + nonce.encode("ascii") + rb"-(\d+)", text):
        parts.append(text[pos:m.start()])  # ends with the opening quote
        parts.append(raws[int(m.group(1))])
        pos = m.end()
    parts.append(text[pos:])
    return parts, sum(len(p) for p in parts)


# A "b64" key and the opening quote of its value. A quote inside a JSON
# string is always escaped, so these bytes only occur as a real key.
_B64_KEY = re.compile(rb'"b64"\s*:\s*"')


class DecodedB64:
    """A ``"b64"`` value already decoded (``data``: its bytes)."""
    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def loads(buf: Union[bytes, bytearray]) -> Any:
    """Parses the JSON document in ``buf``; every ``"b64"`` string value
    comes back as a :class:`DecodedB64` of the bytes it encodes."""
    mv = memoryview(buf)
    nonce = secrets.token_hex(8)
    pieces: List[bytes] = []
    decoded: List[bytes] = []
    pos = 0
    m = _B64_KEY.search(buf)
    while m is not None:
        start = m.end()
        close = buf.find(b'"', start)
        if close < 0:
            break  # unterminated: json.loads below says so
        if buf.find(b"\\", start, close) < 0:  # an escaped value is left to json.loads
            pieces.append(bytes(mv[pos:start]))
            pieces.append(("tensord-b64-%s-%d" % (nonce, len(decoded))).encode("ascii"))
            try:
                decoded.append(binascii.a2b_base64(mv[start:close]))
            except binascii.Error as e:
                raise ValueError("bad base64 in the answer: %s" % e) from e
            pos = close
        m = _B64_KEY.search(buf, close + 1)
    if not decoded:
        return json.loads(buf)
    pieces.append(bytes(mv[pos:]))
    doc = json.loads(b"".join(pieces))
    marker = "tensord-b64-%s-" % nonce

    def swap(o: Any) -> Any:
        if isinstance(o, str) and o.startswith(marker):
            return DecodedB64(decoded[int(o[len(marker):])])
        if isinstance(o, dict):
            return {k: swap(v) for k, v in o.items()}
        if isinstance(o, list):
            return [swap(v) for v in o]
        return o

    return swap(doc)
