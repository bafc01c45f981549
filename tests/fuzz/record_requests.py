"""pytest plugin for make_seeds.py: records what the integration tests send.

Loaded with ``-p record_requests`` (tests/fuzz on PYTHONPATH) and
TENSORD_RECORD_DIR set. Every client socket's outgoing bytes (requests,
urllib3, raw sockets, websocket-client: all write through socket.socket's
send/sendall) are saved per connection as conn-<n>.bin when it closes, and
every config the tests serialise (a dict with "partitions" or "tenants") as
config-<n>.json. Nothing here changes what the tests do.
"""

import itertools
import json
import os
import socket
import threading

_DIR = os.environ.get("TENSORD_RECORD_DIR")
_MAX_CONN_BYTES = 1 << 20  # a connection's first MiB is plenty for seeds
_lock = threading.Lock()
_streams = {}  # id(sock) -> bytearray
_counter = itertools.count()


def _note(sock, data):
    try:
        b = bytes(data)
    except TypeError:
        return
    with _lock:
        buf = _streams.setdefault(id(sock), bytearray())
        if len(buf) < _MAX_CONN_BYTES:
            buf += b[: _MAX_CONN_BYTES - len(buf)]


def _flush(key):
    with _lock:
        buf = _streams.pop(key, None)
    if buf:
        with open(os.path.join(_DIR, "conn-%06d.bin" % next(_counter)), "wb") as f:
            f.write(buf)


def _is_config(obj):
    return isinstance(obj, dict) and ("partitions" in obj or "tenants" in obj)


def _save_config(text):
    with open(os.path.join(_DIR, "config-%06d.json" % next(_counter)), "w") as f:
        f.write(text)


def pytest_configure(config):
    if not _DIR:
        return
    os.makedirs(_DIR, exist_ok=True)
    orig_send, orig_sendall, orig_close = socket.socket.send, socket.socket.sendall, socket.socket.close

    def send(self, data, *args):
        n = orig_send(self, data, *args)
        _note(self, memoryview(data)[:n] if n else b"")
        return n

    def sendall(self, data, *args):
        _note(self, data)
        return orig_sendall(self, data, *args)

    def close(self):
        _flush(id(self))
        return orig_close(self)

    socket.socket.send, socket.socket.sendall, socket.socket.close = send, sendall, close

    orig_dump, orig_dumps = json.dump, json.dumps

    def dump(obj, fp, *args, **kw):
        if _is_config(obj):
            _save_config(orig_dumps(obj))
        return orig_dump(obj, fp, *args, **kw)

    def dumps(obj, *args, **kw):
        text = orig_dumps(obj, *args, **kw)
        if _is_config(obj):
            _save_config(text)
        return text

    json.dump, json.dumps = dump, dumps


def pytest_unconfigure(config):
    if not _DIR:
        return
    for key in list(_streams):
        _flush(key)
