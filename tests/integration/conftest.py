"""Integration-test fixtures: start the real tensord binary and talk to it.

Environment:
  TENSORD_BIN   path of the server binary (default <repo>/build/tensord)
"""

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
CLIENT_PATH = os.path.join(REPO, "clients", "python")
if CLIENT_PATH not in sys.path:
    sys.path.insert(0, CLIENT_PATH)

import tensord  # noqa: E402

LISTEN_RE = re.compile(r'listening on (http://[^\s"]+)')  # a text or a JSON log line
START_TIMEOUT = 30
STOP_TIMEOUT = 30


def server_binary():
    return os.environ.get("TENSORD_BIN", os.path.join(REPO, "build", "tensord"))


class Server:
    """A running tensord process."""

    def __init__(self, extra_args=(), name="server", listen="127.0.0.1:0", prefix=(), state_dir=None):
        """prefix: a command the server runs under (`ip netns exec NS`); state_dir: one to reuse (a restart)."""
        self.binary = server_binary()
        if not (os.path.isfile(self.binary) and os.access(self.binary, os.X_OK)):
            pytest.fail("tensord binary not found at %s: build it with `ninja -C build tensord` "
                        "or set TENSORD_BIN" % self.binary, pytrace=False)
        self.name = name
        self.state_dir = state_dir or tempfile.mkdtemp(prefix="tensord-it-state-")
        self.args = list(prefix) + [self.binary, "--listen", listen, "--backend", "cpu",
                     "--state-dir", self.state_dir] + list(extra_args)
        self.lines = []
        self._ready = threading.Event()
        self.url = None
        env = dict(os.environ)
        # ASan: report leaks and make them fatal (non-zero exit code).
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=env)
        self.pid = self.proc.pid
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if not self._ready.wait(START_TIMEOUT) or self.url is None:
            rc = self.proc.poll()
            self.kill()
            pytest.fail("tensord did not print 'listening on' within %ds (exit code %s); args %s; stderr:\n%s"
                        % (START_TIMEOUT, rc, self.args, self.stderr_tail()), pytrace=False)
        m = re.match(r"http://([^:/]+):(\d+)", self.url)
        self.host, self.port = m.group(1), int(m.group(2))

    def _read_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            if self.url is None:
                m = LISTEN_RE.search(line)
                if m:
                    self.url = m.group(1).rstrip("/")
                    self._ready.set()
        self._ready.set()  # process ended

    def stderr_tail(self, n=80):
        return "\n".join(self.lines[-n:])

    def rss_kb(self):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self):
        """SIGTERM, wait; return (exit code or None on timeout, stderr tail)."""
        if self.proc.poll() is not None:
            return self.proc.returncode, self.stderr_tail()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = None
        self._reader.join(5)
        return rc, self.stderr_tail()


def _stop_and_check(srv):
    was_alive = srv.alive()
    rc, tail = srv.stop()
    assert was_alive, "tensord (%s) died during the tests, exit code %s; stderr:\n%s" % (srv.name, rc, tail)
    assert rc is not None, "tensord (%s) did not exit within %ds of SIGTERM; stderr:\n%s" % (srv.name, STOP_TIMEOUT, tail)
    assert rc == 0, "tensord (%s) exited with code %s after SIGTERM (leak or crash?); stderr:\n%s" % (srv.name, rc, tail)
    # UBSan reports do not change the exit code unless halt_on_error is set: look for them.
    reports = [l for l in srv.lines if "runtime error:" in l or "Sanitizer" in l]
    assert not reports, "tensord (%s) sanitizer reports:\n%s" % (srv.name, "\n".join(reports[:20]))


def tenants_config(tokens, partition="p", workqueue_limit=4, memory_bytes=None):
    """A --config with one partition and a tenant per {name: token} (memory_bytes: {name: quota})."""
    tenants = []
    for name, token in tokens.items():
        t = {"name": name, "token_sha256": hashlib.sha256(token.encode()).hexdigest(), "partition": partition}
        if memory_bytes and name in memory_bytes:
            t["memory_bytes"] = memory_bytes[name]
        tenants.append(t)
    return {"partitions": [{"name": partition, "share": 1.0, "workqueue_limit": workqueue_limit}],
            "tenants": tenants}


@contextlib.contextmanager
def server_with_config(cfg, name, extra_args=()):
    """A Server started with `cfg` written to a temporary --config file; stopped, checked and removed after."""
    fd, path = tempfile.mkstemp(prefix="tensord-it-cfg-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    srv = Server(["--config", path] + list(extra_args), name=name)
    try:
        yield srv
    finally:
        _stop_and_check(srv)
        os.unlink(path)


@pytest.fixture(scope="session")
def server():
    """The shared server process (``.url``, ``.pid``, ``.host``, ``.port``, ``.rss_kb()``)."""
    srv = Server(name="main")
    yield srv
    _stop_and_check(srv)


@pytest.fixture(scope="session")
def base_url(server):
    return server.url


@pytest.fixture(scope="session")
def small_body_server():
    """A second server with --max-body-bytes 1024."""
    srv = Server(["--max-body-bytes", "1024"], name="small-body")
    yield srv
    _stop_and_check(srv)


@pytest.fixture
def client(server):
    c = tensord.Client(server.url, timeout=60)
    yield c
    c.close()


@pytest.fixture
def json_client(server):
    c = tensord.Client(server.url, timeout=60, transport="json")
    yield c
    c.close()


@pytest.fixture
def uniq():
    """A unique tensor-name prefix so tests do not depend on each other."""
    return "t%s" % uuid.uuid4().hex[:12]


# ---------------------------------------------------------------- raw HTTP

class RawResponse:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # lower-case keys
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return "RawResponse(%s %s, headers=%r, body=%r)" % (self.status, self.reason, self.headers, self.body[:500])


class Raw:
    """Helpers to send exactly the bytes we want (no URL normalization)."""

    def __init__(self, host, port):
        self.host = host
        self.port = port

    def connect(self, timeout=30):
        return socket.create_connection((self.host, self.port), timeout=timeout)

    def send_bytes(self, data, timeout=30):
        """Send raw bytes, half-close, read until the server closes. Returns the bytes read."""
        s = self.connect(timeout)
        try:
            try:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            chunks = []
            while True:
                try:
                    b = s.recv(65536)
                except (ConnectionResetError, socket.timeout):
                    break
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks)
        finally:
            s.close()

    def request(self, method, path, body=b"", headers=None, timeout=60):
        """Send one HTTP/1.1 request (Connection: close) and parse the response."""
        if isinstance(body, str):
            body = body.encode("utf-8")
        hdrs = {"Host": "%s:%d" % (self.host, self.port), "Connection": "close"}
        if body or method in ("POST", "PUT"):
            hdrs["Content-Length"] = str(len(body))
        for k, v in (headers or {}).items():
            hdrs[k] = v
        head = "%s %s HTTP/1.1\r\n" % (method, path)
        head += "".join("%s: %s\r\n" % (k, v) for k, v in hdrs.items()) + "\r\n"
        s = self.connect(timeout)
        try:
            try:
                s.sendall(head.encode("latin-1") + body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer (e.g. 413) before reading everything
            data = b""
            while True:
                try:
                    b = s.recv(65536)
                except ConnectionResetError:
                    break
                if not b:
                    break
                data += b
                resp = _try_parse(data, method)
                if resp is not None:
                    return resp
            resp = _try_parse(data, method, eof=True)
            if resp is None:
                raise ConnectionError("no complete HTTP response to %s %s; got %r" % (method, path, data[:300]))
            return resp
        finally:
            s.close()


def _try_parse(data, method, eof=False):
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = data[:end].decode("latin-1").split("\r\n")
    parts = head[0].split(" ", 2)
    status = int(parts[1])
    reason = parts[2] if len(parts) > 2 else ""
    headers = {}
    for line in head[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    rest = data[end + 4:]
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return RawResponse(status, reason, headers, b"")
    if "content-length" in headers:
        n = int(headers["content-length"])
        if len(rest) >= n:
            return RawResponse(status, reason, headers, rest[:n])
        return RawResponse(status, reason, headers, rest) if eof else None
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = b""
        pos = 0
        while True:
            nl = rest.find(b"\r\n", pos)
            if nl < 0:
                return None
            size = int(rest[pos:nl].split(b";")[0], 16)
            if size == 0:
                return RawResponse(status, reason, headers, body)
            if len(rest) < nl + 2 + size + 2:
                return None
            body += rest[nl + 2:nl + 2 + size]
            pos = nl + 2 + size + 2
    return RawResponse(status, reason, headers, rest) if eof else None


@pytest.fixture(scope="session")
def raw(server):
    return Raw(server.host, server.port)


@pytest.fixture(scope="session")
def raw_small(small_body_server):
    return Raw(small_body_server.host, small_body_server.port)


def wait_healthy(url, timeout=10):
    import requests
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            r = requests.get(url + "/healthz", timeout=5)
            if r.status_code == 200:
                return True
            last = r.status_code
        except requests.RequestException as e:
            last = e
        time.sleep(0.1)
    raise AssertionError("server not healthy: %s" % last)
