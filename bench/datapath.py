#!/usr/bin/python3
"""The data path (issue 14, DESIGN.md "Performance targets"): how fast a
large tensor goes in and out of tensord, against the wire itself.

One run, the median of --reps repetitions of each case (at least 3, fewer
than --reps once a case has used --case-budget-s), against --bin:

* curl PUT / GET of a 256 MiB float32 tensor as safetensors
  (application/vnd.safetensors) and as a JSON tensor with a ``b64`` payload
  (``curl -T file``; GET with ``?encoding=b64``), against a C++ socket pair
  (bench/socket_pair.cpp) moving a body of the same size over 127.0.0.1 TCP;
* the Python client's ``put`` / ``get`` of the same array with
  ``transport="safetensors"`` and ``transport="json"``, against Python's own
  socket pair (two threads, ``sendall`` / ``recv_into``) moving the same bytes;
* ``Client.eigh`` of 10000x16x16 float32 end to end against local
  ``torch.linalg.eigh`` (inputs and timing from bench/eigh.py);
* the server's peak RSS during the first upload on a fresh server above its
  idle RSS, as a multiple of the tensor (VmHWM reset through
  /proc/<pid>/clear_refs, or VmRSS sampled where that is not allowed), and
  the same for the first GET of each kind (for information).

Each figure is set against its floor and the issue's target: curl within
1.5x of the C++ socket, the client within 1.5x of the Python socket,
eigh >= 10x torch, peak RSS <= 1.3x the tensor; "ok" or "MISS". Exits 0
whatever the figures (it is a benchmark), 1 if the server dies.

    /usr/bin/python3 bench/datapath.py [--bin build/tensord] [--size-mib 256] [--reps 5]
                                       [--case-budget-s 12] [--eigh-reps 7] [--no-eigh] [--write-readme]

bench/socket_pair is taken from <build>/bench/socket_pair when built there
(bench/CMakeLists.txt), else compiled with g++ -O2 into a temp dir.
"""

import argparse
import base64
import binascii
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
os.environ.setdefault("no_proxy", "127.0.0.1,localhost")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "clients", "python"))

import eigh as eigh_bench  # noqa: E402  (re-execs without OPENBLAS_CORETYPE, as bench/eigh.py does)
import numpy as np  # noqa: E402
import requests  # noqa: E402
import torch  # noqa: E402
from benchlib import RssSampler, proc_status_kib, reset_peak_rss, start_server, write_readme_section  # noqa: E402
from tensord import Client  # noqa: E402
from tensord import safetensors as st  # noqa: E402

SAFETENSORS = "application/vnd.safetensors"
JSON = "application/json"
MIB = 1 << 20

# The targets.
WIRE_TARGET = 1.5     # PUT/GET within 1.5x of the same language's socket
EIGH_TARGET = 10.0    # Client.eigh >= 10x local torch end to end
RSS_TARGET = 1.3      # peak RSS of an upload <= 1.3x the tensor above idle


class ServerDied(Exception):
    pass


# ---------------------------------------------------------------- floors

def socket_pair_exe(build, tmp):
    exe = os.path.join(build, "bench", "socket_pair")
    if os.access(exe, os.X_OK):
        return exe, "build"
    exe = os.path.join(tmp, "socket_pair")
    cxx = os.environ.get("CXX", "g++")
    subprocess.run([cxx, "-O2", "-std=c++20", "-pthread", os.path.join(HERE, "socket_pair.cpp"), "-o", exe],
                   check=True)
    return exe, "g++ -O2"


def cpp_socket_s(exe, nbytes, reps):
    out = subprocess.run([exe, "--bytes", str(nbytes), "--reps", str(reps)], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["median_s"]


def py_socket_s(payload, reps):
    """Median seconds to move `payload` (bytes) over a fresh 127.0.0.1 TCP
    connection: main thread sendall(memoryview), a thread recv_into a
    preallocated buffer of the same size."""
    n = len(payload)
    dst = bytearray(n)
    view = memoryview(dst)
    src = memoryview(payload)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    addr = lsock.getsockname()
    times = []

    def receive():
        conn, _ = lsock.accept()
        got = 0
        while got < n:
            k = conn.recv_into(view[got:], n - got)
            if k == 0:
                raise RuntimeError("early end of stream")
            got += k
        conn.close()

    try:
        for _ in range(reps):
            t0 = time.perf_counter()
            th = threading.Thread(target=receive)
            th.start()
            s = socket.create_connection(addr)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(src)
            th.join()
            times.append(time.perf_counter() - t0)
            s.close()
    finally:
        lsock.close()
    if dst[:4096] != payload[:4096] or dst[-4096:] != payload[-4096:]:
        raise RuntimeError("python socket pair: bytes differ")
    return statistics.median(times)


def curl_sink_s(args, nbytes, reps):
    """Median seconds of curl PUTting a body of `nbytes` (curl `args` name
    it) into a raw HTTP sink: a thread that reads the request head, answers
    100 Continue when asked, recv_into's the body into a preallocated buffer
    and answers 201. curl's own cost of sending: what no server can beat."""
    dst = bytearray(nbytes + (1 << 16))
    view = memoryview(dst)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    port = lsock.getsockname()[1]
    stop = []

    def serve():
        while not stop:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    d = conn.recv(65536)
                    if not d:
                        break
                    head += d
                if not head:
                    continue
                h, rest = head.split(b"\r\n\r\n", 1)
                n = int([l.split(b":", 1)[1] for l in h.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
                if b"100-continue" in h.lower():
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                view[:len(rest)] = rest
                got = len(rest)
                while got < n:
                    k = conn.recv_into(view[got:n], n - got)
                    if k == 0:
                        break
                    got += k
                conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        times = [curl(args + ["http://127.0.0.1:%d/v1/tensors/x" % port])[1] for _ in range(reps)]
    finally:
        stop.append(1)
        lsock.close()
    return statistics.median(times)


# ---------------------------------------------------------------- server

class Server:
    def __init__(self, binary):
        self.proc, self.url = start_server(binary, ["--backend", "cpu"])
        self.pid = self.proc.pid

    def check(self, what, grace=0.0):
        try:
            rc = self.proc.wait(grace) if grace else self.proc.poll()
        except subprocess.TimeoutExpired:
            rc = None
        if rc is not None:
            raise ServerDied("tensord exited with status %s during %s" % (rc, what))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def curl(args):
    """Runs curl; returns (http_code, time_total seconds, server ms or None)."""
    out = subprocess.run(["curl", "-sS", "--noproxy", "*", "-o", "/dev/null",
                          "-w", "%{http_code} %{time_total} %header{server-timing}"] + args,
                         capture_output=True, text=True)
    parts = out.stdout.split()
    if out.returncode != 0 or len(parts) < 2:
        raise RuntimeError("curl %s failed: %s %s" % (" ".join(args), out.stdout, out.stderr.strip()))
    server_ms = None
    if len(parts) > 2 and "dur=" in parts[2]:
        server_ms = float(parts[2].split("dur=")[1].split(";")[0].split(",")[0])
    return int(parts[0]), float(parts[1]), server_ms


class Reps:
    """Runs a case up to --reps times, fewer (but at least MIN_REPS) once
    it has used its --case-budget-s: a case that takes 20 s a go must not
    make the whole run take ten minutes."""

    MIN_REPS = 3

    def __init__(self, reps, budget_s):
        self.reps, self.budget_s = reps, budget_s

    def __call__(self):
        t0 = time.perf_counter()
        for i in range(self.reps):
            if i >= self.MIN_REPS and time.perf_counter() - t0 > self.budget_s:
                return
            yield i


def timed_curl(srv, what, args, reps, ok=(200, 201)):
    """curl `reps` times; returns (median s, median server s or None, the
    server's peak RSS during the first request above its RSS just before it,
    in bytes, and how the peak was taken). Only the first counts: glibc
    keeps some of what a b64 request freed, and later requests reuse it."""
    times, server, extra, how = [], [], [], "VmHWM"
    for _ in reps():
        before = proc_status_kib(srv.pid, "VmRSS")
        reset = reset_peak_rss(srv.pid)
        with RssSampler(srv.pid, interval=0.005 if reset else 0.001) as s:
            try:
                code, t, sms = curl(args)
            except RuntimeError:
                srv.check(what, grace=2.0)
                raise
        srv.check(what)
        if code not in ok:
            raise RuntimeError("%s: HTTP %d" % (what, code))
        hwm = proc_status_kib(srv.pid, "VmHWM") if reset else None
        if not reset:
            how = "sampled VmRSS"
        if before is not None:
            extra.append((max(s.peak_kib, hwm or 0) - before) * 1024)
        times.append(t)
        if sms is not None:
            server.append(sms / 1e3)
    return (statistics.median(times), statistics.median(server) if server else None,
            extra[0] if extra else None, how)


def timed_s(fn, reps):
    """Seconds of each of `reps` calls of fn."""
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def timed(srv, what, fn, reps):
    """Returns (median s, the last result)."""
    times, out = [], None
    for _ in reps():
        out = None
        t0 = time.perf_counter()
        try:
            out = fn()
        except Exception:
            srv.check(what, grace=2.0)
            raise
        times.append(time.perf_counter() - t0)
        srv.check(what)
    return statistics.median(times), out


def client_json_get(c, name, arr):
    """The JSON-transport client's get, as b64. Returns (fn, note): c.get
    itself when it asks for b64; else the client's own plumbing with
    ?encoding=b64 (c.get would fetch numeric `data`: ~1 GB of JSON text for
    256 MiB), said in the note."""
    seen = {}

    def hook(r, *a, **k):
        seen["b64"] = b'"b64"' in r.content[:4096]

    small = np.arange(8, dtype=np.float32)
    c.put(name + "-probe", small)
    c.session.hooks["response"].append(hook)
    try:
        back = c.get(name + "-probe")
    finally:
        c.session.hooks["response"].remove(hook)
    c.delete(name + "-probe")
    if seen.get("b64") and np.array_equal(np.asarray(back), small):
        return (lambda: c.get(name)), ""

    def fetch_b64():
        resp = c._request("GET", c._tensor_url(name) + "?encoding=b64", headers={"Accept": JSON})
        return c._decode_tensor_response(resp)

    return fetch_b64, "c.get asks for numeric data; timed: the client's GET ?encoding=b64 + decode"


# ---------------------------------------------------------------- main

def mark(ok):
    return "ok" if ok else "MISS"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "tensord"))
    ap.add_argument("--build", default=os.environ.get("TENSORD_BUILD", os.path.join(REPO, "build")),
                    help="where to look for bench/socket_pair")
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--case-budget-s", type=float, default=12.0,
                    help="a case stops after this many seconds once it has %d reps" % Reps.MIN_REPS)
    ap.add_argument("--eigh-reps", type=int, default=7)
    ap.add_argument("--no-eigh", action="store_true")
    ap.add_argument("--write-readme", action="store_true", help="write the table to bench/README.md")
    args = ap.parse_args()
    if not os.access(args.bin, os.X_OK):
        print("bench/datapath.py: %s not found: build first (make build)" % args.bin)
        return 0
    if shutil.which("curl") is None:
        print("bench/datapath.py: curl not found")
        return 0

    reps = Reps(args.reps, args.case_budget_s)
    tmp = tempfile.mkdtemp(prefix="tensord-datapath-")
    srv = None
    lines = []

    def emit(s=""):
        print(s)
        sys.stdout.flush()
        lines.append(s)

    try:
        t_start = time.perf_counter()
        nbytes = args.size_mib * MIB
        shape = [args.size_mib * 256, 1024]
        arr = np.random.default_rng(0).standard_normal(shape[0] * shape[1], dtype=np.float32).reshape(shape)
        st_body = st.encode({"x": arr})
        if not isinstance(st_body, (bytes, bytearray)):
            st_body = b"".join(bytes(p) for p in st_body)
        st_path = os.path.join(tmp, "x.safetensors")
        with open(st_path, "wb") as f:
            f.write(st_body)
        b64_body = json.dumps({"dtype": "float32", "shape": shape,
                               "b64": base64.b64encode(arr.data).decode("ascii")}).encode("ascii")
        b64_path = os.path.join(tmp, "x.json")
        with open(b64_path, "wb") as f:
            f.write(b64_body)
        st_len, b64_len = len(st_body), len(b64_body)

        exe, how = socket_pair_exe(args.build, tmp)
        floor_cpp = {"st": cpp_socket_s(exe, st_len, args.reps), "b64": cpp_socket_s(exe, b64_len, args.reps)}
        floor_py = {"st": py_socket_s(st_body, args.reps), "b64": py_socket_s(b64_body, args.reps)}
        # The JSON client cannot beat CPython's base64 codec on the same bytes:
        # the socket plus the codec is its floor (said beside the table).
        b64_text = base64.b64encode(arr.data)
        codec_s = {"enc": statistics.median(timed_s(lambda: base64.b64encode(arr.data), args.reps)),
                   "dec": statistics.median(timed_s(lambda: binascii.a2b_base64(b64_text), args.reps))}
        del b64_text
        del b64_body, st_body

        rows = []  # (what, body bytes, median s, server s, floor s)
        rss = []   # (what, peak bytes above the RSS before, how)
        put_st = ["-T", st_path, "-H", "Content-Type: " + SAFETENSORS]
        put_b64 = ["-T", b64_path, "-H", "Content-Type: " + JSON]
        # Two servers, so that each PUT's first request lands on a fresh one
        # (the RSS before it is the idle RSS): the safetensors PUT then the
        # GETs (the safetensors path keeps no memory), and the b64 PUT, on
        # whose server the client runs.
        idle_kib = None
        for cases in ((("curl PUT safetensors", st_len, put_st, "", floor_cpp["st"]),
                       ("curl GET safetensors", st_len, ["-H", "Accept: " + SAFETENSORS], "", floor_cpp["st"]),
                       ("curl GET json b64", b64_len, ["-H", "Accept: " + JSON], "?encoding=b64", floor_cpp["b64"])),
                      (("curl PUT json b64", b64_len, put_b64, "", floor_cpp["b64"]),)):
            if srv is not None:
                srv.stop()
            srv = Server(args.bin)
            requests.get(srv.url + "/healthz", timeout=10)
            time.sleep(0.2)
            idle_kib = idle_kib or proc_status_kib(srv.pid, "VmRSS")
            for what, body, cargs, query, floor in cases:
                t, server_s, extra, how_rss = timed_curl(srv, what, cargs + [srv.url + "/v1/tensors/x" + query], reps)
                rows.append((what, body, t, server_s, floor))
                rss.append((what, extra, how_rss))
        url = srv.url
        rows.sort(key=lambda r: ("b64" in r[0], "GET" in r[0]))
        rss.sort(key=lambda r: ("b64" in r[0], "GET" in r[0]))

        # the Python client
        notes = []
        c = Client(url)
        t, _ = timed(srv, "client put safetensors", lambda: c.put("x", arr), reps)
        rows.append(("client put safetensors", st_len, t, None, floor_py["st"]))
        t, back = timed(srv, "client get safetensors", lambda: c.get("x"), reps)
        if not np.array_equal(np.asarray(back), arr):
            raise RuntimeError("client get returned other bytes than were put")
        del back
        rows.append(("client get safetensors", st_len, t, None, floor_py["st"]))
        cj = Client(url, transport="json")
        t, _ = timed(srv, "client put json b64", lambda: cj.put("x", arr), reps)
        rows.append(("client put json b64", b64_len, t, None, floor_py["b64"]))
        try:
            get_fn, note = client_json_get(cj, "x", arr)
            t, back = timed(srv, "client get json b64", get_fn, reps)
            if not np.array_equal(np.asarray(back), arr):
                raise RuntimeError("client json get returned other bytes than were put")
            del back
            rows.append(("client get json b64" + (" *" if note else ""), b64_len, t, None, floor_py["b64"]))
            if note:
                notes.append("* " + note)
        except (AttributeError, TypeError) as e:
            notes.append("client get json b64: not measured (%s: %s)" % (type(e).__name__, e))

        # eigh end to end (inputs and timing of bench/eigh.py)
        eigh_row = None
        if not args.no_eigh:
            torch.set_num_threads(eigh_bench.THREADS)
            a = eigh_bench.inputs(10000, 16, seed=1)
            w, v = c.eigh(a)
            w, v = np.asarray(w), np.asarray(v)
            resid = float(np.abs(a @ v - v * w[:, None, :]).max())
            rt_ms = eigh_bench.median_ms(lambda: c.eigh(a), args.eigh_reps)
            srv.check("eigh")
            ta = torch.from_numpy(a)
            torch_ms = eigh_bench.median_ms(lambda: torch.linalg.eigh(ta), args.eigh_reps)
            eigh_row = (rt_ms, torch_ms, resid)
        c.close()
        cj.close()
        srv.check("the run")
        srv.stop()
        srv = None

        # the table
        emit("datapath: %d MiB float32 tensor %s, median of up to %d reps (seconds); floor: a body of the same size "
             "over a 127.0.0.1 TCP socket pair in the same language (C++: bench/socket_pair.cpp, %s; Python: "
             "threads, sendall/recv_into); GB/s of tensor bytes" % (args.size_mib, shape, args.reps, how))
        hdr = "%-26s %9s %9s %7s %9s %9s %8s %7s  %s" % ("what", "body MiB", "median s", "GB/s", "server s",
                                                        "floor s", "x floor", "target", "")
        emit(hdr)
        emit("-" * len(hdr))
        for what, body, t, server_s, floor in rows:
            ratio = t / floor
            emit("%-26s %9.1f %9.3f %7.2f %9s %9.3f %7.1fx %7s  %s" % (
                what, body / MIB, t, nbytes / t / 1e9, "%.3f" % server_s if server_s is not None else "-", floor,
                ratio, "<=%.1fx" % WIRE_TARGET, mark(ratio <= WIRE_TARGET)))
        emit("floors: C++ socket %.3f s (%.2f GB/s) for the safetensors body, %.3f s for the b64 body; "
             "Python socket %.3f s (%.2f GB/s) / %.3f s" % (
                 floor_cpp["st"], st_len / floor_cpp["st"] / 1e9, floor_cpp["b64"], floor_py["st"],
                 st_len / floor_py["st"] / 1e9, floor_py["b64"]))
        emit("server s: the server's Server-Timing total (request headers read to response ready, before it "
             "is written: a PUT's body read and store, a GET's encode)")
        for n in notes:
            emit(n)
        for what, cargs, blen in (("curl PUT safetensors", put_st, st_len), ("curl PUT json b64", put_b64, b64_len)):
            if what in {r[0].rstrip(" *") for r in rows}:
                sink = curl_sink_s(cargs, blen, args.reps)
                t = {r[0].rstrip(" *"): r[2] for r in rows}[what]
                emit("%s against curl PUT into a raw socket sink (curl's own sending, %.3f s): %.1fx" % (what, sink,
                                                                                                        t / sink))
        by_what = {r[0].rstrip(" *"): r[2] for r in rows}
        for what, key, verb in (("client put json b64", "enc", "encode"), ("client get json b64", "dec", "decode")):
            if what in by_what:
                floor2 = floor_py["b64"] + codec_s[key]
                emit("%s against the Python socket plus CPython's base64 %s of the same tensor (%.3f s): "
                     "%.3f s floor, %.1fx" % (what, verb, codec_s[key], floor2, by_what[what] / floor2))
        emit()
        if eigh_row:
            rt_ms, torch_ms, resid = eigh_row
            sp = torch_ms / rt_ms
            emit("Client.eigh 10000x16x16 float32 end to end: %.2f ms; local torch.linalg.eigh (%d threads) %.2f ms: "
                 "%.1fx (target >=%.0fx) %s  (max |A v - v w| %.1e)" % (
                     rt_ms, eigh_bench.THREADS, torch_ms, sp, EIGH_TARGET, mark(sp >= EIGH_TARGET), resid))
        emit("server peak RSS during the first request of each kind above the RSS before it (a fresh server "
             "before each PUT: idle RSS %.0f MiB), x the %d MiB tensor:" % ((idle_kib or 0) / 1024, args.size_mib))
        for what, extra, how_rss in rss:
            if extra is None:
                continue
            ratio = extra / nbytes
            tail = "(target <=%.1fx) %s" % (RSS_TARGET, mark(ratio <= RSS_TARGET)) if "PUT" in what else "(information)"
            emit("  %-24s %7.0f MiB = %5.2fx %s  [%s]" % (what, extra / MIB, ratio, tail, how_rss))
        emit("(%.0f s in all)" % (time.perf_counter() - t_start))
        if args.write_readme:
            write_readme_section("## datapath", "## datapath\n\n```\n" + "\n".join(lines) + "\n```\n")
    except ServerDied as e:
        print("bench/datapath.py: %s" % e)
        return 1
    finally:
        if srv is not None:
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
