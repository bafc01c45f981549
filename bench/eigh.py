#!/usr/bin/python3
"""Batched eigh: tensord's CPU kernel vs torch.linalg.eigh vs numpy.linalg.eigh.

Same float32 inputs for all (symmetric, seeded), median of REPS runs each,
eigenvectors included; torch is every torch benchlib.torch_peers finds
(PyPI's 2.15, the peer; Debian's 1.13, the old column), each in its own
interpreter (bench/torch_peer.py) in the same run. Then the whole round
trip through the Python client (safetensors over HTTP to a fresh
build/tensord) against the peer torch called locally. Builds nothing:
expects build/ (``make bench`` builds it first).

Environment: TENSORD_BUILD (default <repo>/build), EIGH_REPS (default 7).
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, where set, are dropped for this one
command (they slow numpy's and torch's OpenBLAS here; see bench/README.md).
"""

import os
import re
import subprocess
import sys
import tempfile
import threading
import time

if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_L2_SIZE"):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import numpy as np  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BUILD = os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build"))
REPS = int(os.environ.get("EIGH_REPS", "7"))
CASES = [(10000, 8), (10000, 16), (10000, 32), (1000, 64), (100, 256)]
THREADS = 2

sys.path.insert(0, os.path.join(REPO, "clients", "python"))
sys.path.insert(0, os.path.join(REPO, "bench"))
from benchlib import run_torch_peer, torch_peers  # noqa: E402
from tensord import Client  # noqa: E402


def inputs(batch, n, seed=0):
    a = np.random.default_rng(seed).standard_normal((batch, n, n), dtype=np.float32)
    return np.ascontiguousarray((a + a.transpose(0, 2, 1)) * np.float32(0.5))


def median_ms(fn, reps=REPS):
    fn()  # warm-up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts))


def tensord_kernel_ms(a):
    exe = os.path.join(BUILD, "bench", "eigh_kernel_bench")
    if not os.access(exe, os.X_OK):
        sys.exit("bench/eigh.py: %s not found: build first (make bench / ninja -C build eigh_kernel_bench)" % exe)
    with tempfile.NamedTemporaryFile(suffix=".f32") as f:
        a.tofile(f.name)
        out = subprocess.run([exe, "--n", str(a.shape[1]), "--batch", str(a.shape[0]), "--input", f.name,
                              "--reps", str(REPS), "--threads", str(THREADS)],
                             check=True, capture_output=True, text=True).stdout
    m = re.search(r'"median_ms": ([0-9.]+).*"path": "(\w+)".*"isa": "(\w+)".*"max_residual": ([-0-9.e+]+)', out)
    return float(m.group(1)), "%s/%s" % (m.group(2), m.group(3)), float(m.group(4))


class Server:
    def __init__(self):
        exe = os.path.join(BUILD, "tensord")
        self.state = tempfile.mkdtemp(prefix="tensord-bench-")
        self.proc = subprocess.Popen([exe, "--listen", "127.0.0.1:0", "--backend", "cpu", "--state-dir", self.state],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.url = None
        ready = threading.Event()

        def read():
            for raw in iter(self.proc.stderr.readline, b""):
                m = re.search(r"listening on (http://\S+)", raw.decode("utf-8", "replace"))
                if m and self.url is None:
                    self.url = m.group(1).rstrip("/")
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(30) or self.url is None:
            self.proc.kill()
            sys.exit("bench/eigh.py: tensord did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def peer_ms(peers, a):
    """Each peer's median ms of torch.linalg.eigh(a), in its own interpreter."""
    with tempfile.NamedTemporaryFile(suffix=".npy") as f:
        np.save(f.name, a)
        return [run_torch_peer(py, "eigh", "--npy", f.name, "--reps", REPS, "--threads", THREADS)["result"]["ms"]
                for _, py in peers]


def main():
    peers = torch_peers()
    if not peers:
        sys.exit("bench/eigh.py: no interpreter with torch (make torch-venv; Debian: python3-torch)")
    labels = [label for label, _ in peers]
    print("batched eigh, float32, eigenvalues + eigenvectors; median of %d runs (ms); %s with %d threads, "
          "numpy %s" % (REPS, ", ".join(labels), THREADS, np.__version__))
    hdr = "%-12s %10s " % ("batch x n", "tensord") + " ".join("%12s" % l for l in labels) + " %10s " % "numpy" + \
        " ".join("%15s" % ("vs " + l) for l in labels) + " %10s  %s" % ("vs numpy", "kernel (max residual)")
    print(hdr)
    print("-" * len(hdr))
    for batch, n in CASES:
        a = inputs(batch, n)
        t_ms, isa, res = tensord_kernel_ms(a)
        torch_ms = peer_ms(peers, a)
        numpy_ms = median_ms(lambda: np.linalg.eigh(a))
        print("%-12s %10.2f " % ("%dx%d" % (batch, n), t_ms) + " ".join("%12.2f" % m for m in torch_ms) +
              " %10.2f " % numpy_ms + " ".join("%14.1fx" % (m / t_ms) for m in torch_ms) +
              " %9.1fx  %s (%.1e)" % (numpy_ms / t_ms, isa, res))
        sys.stdout.flush()

    # The whole round trip from the Python client vs the peer torch called locally.
    batch, n = 10000, 16
    a = inputs(batch, n, seed=1)
    srv = Server()
    try:
        c = Client(srv.url)
        w, v = c.eigh(a)
        resid = float(np.abs(a @ v - v * w[:, None, :]).max())
        rt_ms = median_ms(lambda: c.eigh(a))
    finally:
        srv.stop()
    torch_ms = peer_ms(peers, a)
    print()
    print("client round trip (safetensors over HTTP), %dx%dx%d float32: tensord %.2f ms; local %s (max |A v - v w| "
          "%.1e)" % (batch, n, n, rt_ms, ", ".join("%s %.2f ms: %.1fx" % (l, m, m / rt_ms)
                                                    for l, m in zip(labels, torch_ms)), resid))


if __name__ == "__main__":
    main()
