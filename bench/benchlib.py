"""What the bench scripts share: starting the real binary on a free
loopback port (and waiting for it to be ready), config files and tokens,
a process's RSS, percentiles, the torch interpreters to compare against,
and rewriting their own section of bench/README.md."""

import base64
import hashlib
import json
import os
import random
import re
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))


REPO = os.path.dirname(HERE)

# The torches the benchmarks race, newest first: PyPI's (build/torch-venv,
# scripts/install-torch.sh: `make torch-venv`), the peer, and Debian's
# python3-torch (1.13), kept as the old column so a reader sees what the
# change of peer changed.
TORCH_PYTHONS = [os.path.join(REPO, "build", "torch-venv", "bin", "python"), "/usr/bin/python3"]


def torch_peers():
    """[(label, python)] of the interpreters in TORCH_PYTHONS that import
    torch, newest first; the label is "torch <version>". One that does not
    is left out with a printed reason."""
    peers = []
    for py in TORCH_PYTHONS:
        if not os.access(py, os.X_OK):
            print("torch peer: %s not there (make torch-venv)" % py)
            continue
        p = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 0:
            print("torch peer: %s cannot import torch: %s" % (py, p.stderr.strip()[-200:]))
            continue
        peers.append(("torch " + p.stdout.strip().split("+")[0], py))
    return peers


def run_torch_peer(python, *args, timeout=1800):
    """bench/torch_peer.py under `python` with `args`; its JSON answer."""
    p = subprocess.run([python, os.path.join(HERE, "torch_peer.py")] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit("torch_peer.py under %s failed: %s" % (python, p.stderr[-2000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def start_server(binary, args=(), tail=None, timeout=60.0):
    """Starts `binary --listen 127.0.0.1:0 <args>`; returns (process, "http://host:port").
    Without `tail` the server's stderr goes to a file (read for the
    "listening on" line): a thread of this process draining a pipe would
    take the GIL and a core from the client being timed. With `tail` (a
    collections.deque, or anything with append) stderr is drained in the
    background and its lines, decoded, are appended to it as they come, the
    start-up lines before "listening on" included. Raises SystemExit
    when no "listening on" line comes within `timeout` seconds."""
    if tail is None:
        log = tempfile.TemporaryFile()
        p = subprocess.Popen([binary, "--listen", "127.0.0.1:0"] + list(args), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            log.seek(0)
            text = log.read().decode("utf-8", "replace")
            m = re.search(r"listening on (http://[^\s\"]+)", text)
            if m:
                return p, m.group(1)
            if p.poll() is not None:
                break
            time.sleep(0.02)
        p.kill()
        raise SystemExit("server did not start: " + "\n".join(text.splitlines()[-20:]))
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:0"] + list(args), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    found, seen = [], []
    ready = threading.Event()

    def drain():
        for raw in iter(p.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            tail.append(line)
            if not found:
                seen.append(line)
                m = re.search(r"listening on (http://[^\s\"]+)", line)
                if m:
                    found.append(m.group(1))
                    ready.set()
        ready.set()  # the process ended

    threading.Thread(target=drain, daemon=True).start()
    if not ready.wait(timeout) or not found:
        p.kill()
        raise SystemExit("server did not start: " + "\n".join(seen[-20:]))
    return p, found[0]


def wait_ready(url, timeout=30.0):
    """Polls GET /readyz until it answers 200; raises SystemExit after `timeout` s."""
    import urllib.request
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=5) as r:
                if r.status == 200:
                    return
                last = r.status
        except OSError as e:  # URLError and HTTPError are OSErrors
            last = e
        time.sleep(0.05)
    raise SystemExit("server at %s not ready after %.0f s: %s" % (url, timeout, last))


def token_sha256(token):
    """The hex SHA-256 a config file's `token_sha256` holds for `token`."""
    return hashlib.sha256(token.encode()).hexdigest()


def write_config(cfg):
    """Writes a --config JSON file to a temp path and returns the path (the caller unlinks it)."""
    fd, path = tempfile.mkstemp(prefix="tensord-bench-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    return path


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def write_readme_section(head, body):
    """Replaces the section that starts with the line `head` ("## name") in
    bench/README.md with `body` (which starts with `head`), keeping its
    place; appends it when the README has no such section."""
    path = os.path.join(HERE, "README.md")
    old = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    body = body.rstrip("\n") + "\n"
    m = re.search(r"^" + re.escape(head) + r"[ \t]*$", old, re.M)
    if m:
        nxt = old.find("\n## ", m.end())
        old = old[:m.start()] + body + (old[nxt:] if nxt >= 0 else "")
    else:
        old = old.rstrip("\n") + "\n\n" + body
    with open(path, "w") as f:
        f.write(old)


def proc_status_kib(pid, field):
    """A `kB` field of /proc/<pid>/status (VmRSS, VmHWM, ...) in KiB; None
    when the process is gone or has no such field."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss(pid):
    """Resets the process's VmHWM to its current RSS (writes 5 to
    /proc/<pid>/clear_refs); False where that is not allowed."""
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class RssSampler:
    """Samples VmRSS of `pid` every `interval` seconds in a thread, for where
    VmHWM cannot be reset: `with RssSampler(pid) as s: ...; s.peak_kib`."""

    def __init__(self, pid, interval=0.002):
        self.pid, self.interval, self.peak_kib = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            v = proc_status_kib(self.pid, "VmRSS")
            if v is None:
                return
            self.peak_kib = max(self.peak_kib, v)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        v = proc_status_kib(self.pid, "VmRSS")
        if v is not None:
            self.peak_kib = max(self.peak_kib, v)


# --- raw sockets: what requests cannot do (slow reads, bodies cut short) ---

def raw_connect(url, rcvbuf=None, timeout=30):
    u = urllib.parse.urlparse(url)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect((u.hostname, u.port))
    return s


def raw_head(method, path, token, length=None, ctype=None, extra=""):
    h = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nConnection: close\r\n" % (
        method, path, token)
    if ctype:
        h += "Content-Type: %s\r\n" % ctype
    if length is not None:
        h += "Content-Length: %d\r\n" % length
    return (h + extra + "\r\n").encode()


def read_head(s, buf=b""):
    """Reads up to the end of the response head -> (status, headers dict, rest of buffer)."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed before the response head")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, rest


def close_rudely(s, rst):
    if rst:  # RST instead of FIN
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


# --- request bodies the benchmarks send ---------------------------------------

def f32_bytes(mib, seed):
    rnd = random.Random(seed)
    block = bytes(rnd.getrandbits(8) & 0x3f for _ in range(4096))  # finite float32s
    return (block * ((mib << 20) // 4096 + 1))[:mib << 20]


def safetensors_body(tensors, metadata=None):
    """tensors: {name: (dtype tag, shape, raw bytes)} -> a safetensors file (bytes)."""
    header, off = {}, 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(t[2] for t in tensors.values())


def f32_file(tensors):
    return safetensors_body({k: ("F32", [len(v) // 4], v) for k, v in tensors.items()})


def b64_put_body(raw):
    return b'{"dtype":"float32","shape":[%d],"b64":"' % (len(raw) // 4) + base64.b64encode(raw) + b'"}'


def matmul_program(n=40, size=200, out="t"):
    """A chain of n size x size float64 matmuls, summed into `out`."""
    nodes = [{"id": "r", "op": "rand", "args": [[size, size]], "kwargs": {"dtype": "float64", "seed": 1},
              "outputs": ["x0"]}]
    for i in range(n):
        nodes.append({"id": "m%d" % i, "op": "matmul", "args": ["x%d" % i, "x0"], "outputs": ["x%d" % (i + 1)]})
    nodes.append({"id": "s", "op": "sum", "args": ["x%d" % n], "outputs": [out]})
    return {"program": {"nodes": nodes, "outputs": [out]}}
