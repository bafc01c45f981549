"""JSON request bodies whose tensors' base64 text never becomes a Python str.

A 256 MiB tensor's base64 is 341 MB of text; ``json.dumps`` of a dict
holding it as a str scans every character for escapes and ``.decode`` made
that str from the encoder's bytes first: 1.3 s of the 4.3 s a JSON ``put``
took (bench/README.md, "datapath"). Base64 needs no escaping, so the body is
written as JSON text around the encoder's bytes: ``dumps`` replaces each
:class:`RawB64` with a marker string, then the text is cut at the markers
and the bytes go between the pieces, sent as they are (no join for large
bodies).
"""
from __future__ import annotations

import base64
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
