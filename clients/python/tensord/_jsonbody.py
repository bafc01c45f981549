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
import ctypes
import json
import mmap
import re
import secrets
import sys
import threading
from typing import Any, Callable, Iterator, List, Optional, Tuple, Union

import numpy as np

Part = Union[bytes, memoryview, "RawB64"]
_LAZY_BYTES = 4 << 20  # base64 text this long is encoded piece by piece as it is sent


class RawB64:
    """The base64 of a buffer: encoded whole on demand (``data``), or a
    piece at a time as a large body is sent (``chunks``): no 341 MB bytes
    object for a 256 MiB tensor, whose fresh pages alone cost 0.2-0.3 s."""
    __slots__ = ("buf", "_data")

    CHUNK = 3 << 20  # tensor bytes encoded per piece sent (4 MiB of text)

    def __init__(self, buf: Any) -> None:
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else memoryview(buf)
        self._data: Optional[bytes] = None

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = base64.b64encode(self.buf)
        return self._data

    def __len__(self) -> int:
        return (len(self.buf) + 2) // 3 * 4

    def chunks(self) -> Iterator[bytes]:
        for i in range(0, len(self.buf), self.CHUNK):
            yield binascii.b2a_base64(self.buf[i:i + self.CHUNK], newline=False)

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
    raws: List[Part] = []

    def swap(o: Any) -> Any:
        if isinstance(o, RawB64):
            # Large values are encoded as they are sent (the caller iterates RawB64.chunks).
            raws.append(o if len(o) >= _LAZY_BYTES else o.data)
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
    """A ``"b64"`` value already decoded (``data``: its bytes, or the uint8
    array the streaming decoder wrote them into)."""
    __slots__ = ("data",)

    def __init__(self, data: Union[bytes, np.ndarray]) -> None:
        self.data = data


def loads(buf: Any) -> Any:
    """Parses the JSON document in ``buf`` (bytes, bytearray or mmap: a
    buffer with ``find``); every ``"b64"`` string value comes back as a
    :class:`DecodedB64` of the bytes it encodes."""
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
        return json.loads(buf if isinstance(buf, (bytes, bytearray)) else bytes(mv))
    pieces.append(bytes(mv[pos:]))
    return _swap_markers(json.loads(b"".join(pieces)), nonce, decoded)


def _swap_markers(doc: Any, nonce: str, decoded: List[Any]) -> Any:
    """``doc`` with each marker string ``tensord-b64-<nonce>-<i>`` replaced
    by a :class:`DecodedB64` of ``decoded[i]``."""
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


_CHUNK = 8 << 20  # bytes read at a time while streaming a large answer


def _a2b(chars: Any) -> bytes:
    """Strict base64 decode (binascii's strict mode where Python has it)."""
    try:
        return binascii.a2b_base64(chars, strict_mode=True)
    except TypeError:  # Python < 3.11: no strict mode
        return binascii.a2b_base64(chars)


def huge_mapping(n: int) -> mmap.mmap:
    """An anonymous writable mapping of ``n`` bytes advised huge pages: the
    kernel faults it in 2 MiB at a time, and nothing zero-fills it first
    (a 341 MB bytearray spent 0.33 s zero-filling and faulting 4 KiB pages)."""
    m = mmap.mmap(-1, n)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            m.madvise(advice)
        except OSError:
            pass
    return m


def _out_buffer(n: int) -> Any:
    """A writable uint8 array of ``n`` bytes (a huge-page mapping when
    large, its pages faulted in ahead of the decoder)."""
    if n < (4 << 20):
        return np.empty(n, np.uint8)
    m = huge_mapping(n)
    _populate_async(m)
    return np.frombuffer(m, np.uint8)


_MADV_POPULATE_WRITE = 23  # Linux 5.14+


def _populate_async(m: mmap.mmap) -> None:
    """Faults in a fresh mapping's pages on a second thread: the kernel
    clearing and mapping 256 MiB of new 4 KiB pages one fault at a time took
    0.2 s of a JSON ``get``'s decoding thread (0.09 s when populated at
    once), and ctypes calls run without the GIL, so it overlaps binascii's
    decoding. ``MADV_POPULATE_WRITE`` maps pages without writing them, so
    it never races the decoder's writes. No-op where it is not supported."""
    if not sys.platform.startswith("linux"):
        return
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        export = ctypes.c_char.from_buffer(m)
        addr = ctypes.addressof(export)
        del export  # the thread holds `m` (not an export) until it is done
    except (AttributeError, OSError, TypeError, ValueError):
        return
    threading.Thread(target=lambda mapping: madvise(addr, len(mapping), _MADV_POPULATE_WRITE), args=(m,),
                     name="tensord-populate", daemon=True).start()


class _StreamLoader:
    """The state of :func:`load_stream`: the text outside values so far,
    and the value being decoded."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.got = 0  # bytes of the answer read
        self.text = bytearray()  # the document outside the values, markers in their place
        self.nonce = secrets.token_hex(8)
        self.decoded: List[Any] = []
        self.scan_from = 0  # where the next key search in `text` starts
        self.value: Optional[Any] = None  # the buffer of the value being decoded
        self.out = 0  # bytes of it written
        self.carry = b""  # value characters not yet a whole 4-character group

    def feed(self, buf: Any, a: int, b: int) -> None:
        """Takes ``buf[a:b]`` (``buf`` has ``find``)."""
        while a < b:
            if self.value is None:
                self.text += memoryview(buf)[a:b]
                a = b
                m = _B64_KEY.search(self.text, self.scan_from)
                if m is None:
                    # A key cut by the chunk's end is found next time: search again from its quote.
                    tail = max(self.scan_from, len(self.text) - 4096)
                    quote = self.text.rfind(b'"b64"', tail)
                    self.scan_from = quote if quote >= 0 else max(self.scan_from, len(self.text) - 5)
                    return
                # The value starts at m.end(): what came after it is value text.
                buf = bytes(self.text[m.end():])
                a, b = 0, len(buf)
                del self.text[m.end():]
                self.text += ("tensord-b64-%s-%d" % (self.nonce, len(self.decoded))).encode("ascii")
                # At most this much is left of it; pages are touched only as written.
                self.value = _out_buffer((self.n - self.got + b) * 3 // 4 + 3)
                self.out = 0
                self.carry = b""
                continue
            close = buf.find(b'"', a, b)
            seg: Any = memoryview(buf)[a:b if close < 0 else close]
            if self.carry:
                # First the group the last chunk's end cut: its missing characters.
                end = b if close < 0 else close
                need = min(4 - len(self.carry), end - a)
                group = self.carry + bytes(memoryview(buf)[a:a + need])
                a += need
                if len(group) < 4 and close < 0:
                    self.carry = group
                    return
                self.carry = b""
                try:
                    part = _a2b(group)
                except binascii.Error as e:
                    raise ValueError("bad base64 in the answer: %s" % e) from e
                self._write(part)
                continue
            whole = len(seg) if close >= 0 else len(seg) // 4 * 4
            if whole:
                try:
                    part = _a2b(seg[:whole])
                except binascii.Error as e:
                    raise ValueError("bad base64 in the answer: %s" % e) from e
                self._write(part)
            self.carry = bytes(seg[whole:])
            if close < 0:
                return
            self.decoded.append(self.value[:self.out])
            self.value = None
            self.scan_from = len(self.text)
            a = close  # the closing quote is text again

    def _write(self, part: bytes) -> None:
        assert self.value is not None, "bytes of a b64 value outside one"
        end = self.out + len(part)
        self.value[self.out:end] = np.frombuffer(part, np.uint8)
        self.out = end

    def finish(self) -> Any:
        if self.value is not None:
            raise ValueError("the answer ended inside a b64 value")
        doc = json.loads(bytes(self.text))
        return _swap_markers(doc, self.nonce, self.decoded) if self.decoded else doc


def load_stream(readinto: Callable[[memoryview], int], n: int) -> Any:
    """Parses a JSON answer of ``n`` bytes read with ``readinto`` as it
    arrives: the text outside ``"b64"`` values is kept (a few hundred bytes
    for tensors) and each value is decoded a chunk at a time straight into
    the buffer its tensor views (no copy of the text, no second copy of the
    bytes), while the server goes on sending the next chunk."""
    window = bytearray(min(_CHUNK, max(n, 1)))
    wv = memoryview(window)
    state = _StreamLoader(n)
    while state.got < n:
        k = readinto(wv[:min(len(window), n - state.got)])
        if not k:
            raise EOFError("the answer ended after %d of %d bytes" % (state.got, n))
        state.got += k
        state.feed(window, 0, k)
    return state.finish()
