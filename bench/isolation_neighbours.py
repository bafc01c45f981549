"""The neighbours of bench/isolation.py: what another tenant (the heavy
one) does on its own partition while the light tenant is measured. Each
runs in a child process pinned to the heavy partition's cores until `stop`
is set, counting the units of work it finished in `done` and the 429s it
got in `refused`. Bodies are made before the load starts, so the clients
spend their CPU on the socket only."""

import base64
import json
import os
import signal
import threading
import time

import numpy as np
import requests

from benchlib import (b64_put_body, close_rudely, f32_bytes, f32_file, matmul_program, raw_connect, raw_head,
                      read_head, safetensors_body)

KINDS = {
    "compute": "4 clients of 200x200 float64 matmul chains (40 nodes)",
    "eigh": "2 clients of a batched float64 eigh made on the server (256 x 48x48)",
    "eigh-json": "2 clients of a batched float64 eigh on a 4.5 MiB JSON b64 input",
    "eigh-safetensors": "2 clients of a batched float64 eigh on a 4.5 MiB safetensors input",
    "upload": "2 uploaders (JSON b64 PUT, safetensors upload) and 2 downloaders of MIB MiB",
    "download": "4 downloaders of MIB MiB (JSON b64, safetensors)",
    "storm": "16 clients of small matmul jobs against max_queued 4 (429s included)",
    "rude": "2 slow readers of MIB MiB (8 KiB receive buffer) and 2 clients that cut MIB MiB bodies short",
    "reload": "SIGHUP every 200 ms, and checkpoints of 4 x MIB MiB back to back",
}

EIGH_B, EIGH_N = 256, 48


def describe(kind, mib):
    return KINDS[kind].replace("MIB", str(mib))


def max_queued(kind):
    """The heavy tenant's max_queued for this neighbour."""
    return 4 if kind == "storm" else 64


EIGH_NODES = [{"id": "e", "op": "linalg.eigh", "args": ["a"], "kwargs": {"UPLO": "L"}, "outputs": ["w", "v"]}]


def eigh_made_here():
    return {"program": {"nodes": [{"id": "r", "op": "rand", "args": [[EIGH_B, EIGH_N, EIGH_N]],
                                   "kwargs": {"dtype": "float64", "seed": 2}, "outputs": ["a"]}] + EIGH_NODES,
                        "outputs": ["w"]}}


def eigh_input():
    a = np.random.default_rng(3).standard_normal((EIGH_B, EIGH_N, EIGH_N))
    return (a + a.transpose(0, 2, 1)).astype(np.float64).tobytes()


def eigh_json_body():
    return json.dumps({"program": {"nodes": EIGH_NODES, "outputs": ["w"]},
                       "inputs": {"a": {"dtype": "float64", "shape": [EIGH_B, EIGH_N, EIGH_N],
                                        "b64": base64.b64encode(eigh_input()).decode()}}}).encode()


def eigh_safetensors_body():
    request = json.dumps({"program": {"nodes": EIGH_NODES, "outputs": ["w"]}})
    return safetensors_body({"a": ("F64", [EIGH_B, EIGH_N, EIGH_N], eigh_input())}, {"request": request})


class Neighbour:
    def __init__(self, url, token, stop, done, refused):
        self.url, self.token, self.stop, self.done, self.refused = url, token, stop, done, refused

    def session(self):
        s = requests.Session()
        s.headers["Authorization"] = "Bearer " + self.token
        return s

    def count(self, status):
        if status in (200, 201):
            with self.done.get_lock():
                self.done.value += 1
        elif status == 429:
            with self.refused.get_lock():
                self.refused.value += 1

    def loop(self, fn, clients):
        """`clients` threads calling fn(session, i) back to back until stopped."""

        def client(k):
            s = self.session()
            i = k
            while not self.stop.is_set():
                try:
                    self.count(fn(s, i))
                except (requests.RequestException, OSError):
                    if self.stop.is_set():
                        return  # the server is going away
                    time.sleep(0.01)
                i += 1

        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def post(self, path, body, ctype="application/json"):
        return lambda s, i: s.post(self.url + path, data=body, headers={"Content-Type": ctype},
                                   timeout=120).status_code


def store_big(n, s, url, mib):
    """The tensors big/j<k> (JSON b64) and big/s<k>_a, _b (safetensors) the downloaders read."""
    raw = f32_bytes(mib, 1)
    half = len(raw) // 2
    for k in range(n):
        s.put(url + "/v1/tensors/big/j%d" % k, data=b64_put_body(raw), headers={"Content-Type": "application/json"},
              timeout=120).raise_for_status()
        s.post(url + "/v1/tensors:upload", data=f32_file({"big/s%d_a" % k: raw[:half], "big/s%d_b" % k: raw[half:]}),
               headers={"Content-Type": "application/vnd.safetensors"}, timeout=120).raise_for_status()
    return raw


def download(url):
    def fn(s, i):
        k = i % 2
        if i % 4 < 2:
            r = s.get(url + "/v1/tensors/big/j%d?encoding=b64" % k, timeout=120)
        else:
            r = s.get(url + "/v1/tensors/big/s%d_a" % k, headers={"Accept": "application/vnd.safetensors"},
                      timeout=120)
        r.content
        return r.status_code
    return fn


def run_upload(n, mib):
    raw = store_big(2, n.session(), n.url, mib)
    json_body = b64_put_body(raw)
    half = len(raw) // 2
    st = [f32_file({"big/s%d_a" % k: raw[:half], "big/s%d_b" % k: raw[half:]}) for k in range(2)]

    def up(s, i):
        k = i % 2
        if (i // 2) % 2 == 0:
            return s.put(n.url + "/v1/tensors/big/j%d" % k, data=json_body,
                         headers={"Content-Type": "application/json"}, timeout=120).status_code
        return s.post(n.url + "/v1/tensors:upload", data=st[k], headers={"Content-Type": "application/vnd.safetensors"},
                      timeout=120).status_code

    threads = [threading.Thread(target=n.loop, args=(up, 2)), threading.Thread(target=n.loop, args=(download(n.url), 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_rude(n, mib):
    store_big(2, n.session(), n.url, mib)
    body = f32_bytes(mib, 4)

    def slow_reader(s, i):
        sock = raw_connect(n.url, rcvbuf=8192)
        try:
            sock.sendall(raw_head("GET", "/v1/tensors/big/j%d?encoding=b64" % (i % 2), n.token))
            status, _, _ = read_head(sock)
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline and not n.stop.is_set():
                if not sock.recv(4096):
                    break
                time.sleep(0.005)
        finally:
            close_rudely(sock, rst=i % 2 == 1)
        return status

    def cut_short(s, i):
        sock = raw_connect(n.url, timeout=10)
        try:
            sock.sendall(raw_head("PUT", "/v1/tensors/cut", n.token, len(body), "application/vnd.safetensors"))
            sock.sendall(body[:len(body) // 2])
        finally:
            close_rudely(sock, rst=i % 2 == 1)
        return 200  # a body cut short, as meant

    threads = [threading.Thread(target=n.loop, args=(slow_reader, 2)),
               threading.Thread(target=n.loop, args=(cut_short, 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_reload(n, mib, server_pid):
    s = n.session()
    raw = f32_bytes(mib, 5)
    for k in range(4):
        s.put(n.url + "/v1/tensors/ck/%d" % k, data=f32_file({"ck/%d" % k: raw}),
              headers={"Content-Type": "application/vnd.safetensors"}, timeout=120).raise_for_status()

    def hup():
        while not n.stop.is_set():
            os.kill(server_pid, signal.SIGHUP)
            n.count(200)
            n.stop.wait(0.2)

    t = threading.Thread(target=hup)
    t.start()
    n.loop(n.post("/v1/checkpoint", b""), 1)
    t.join()


def run(kind, url, token, mib, cpus, server_pid, stop, done, refused):
    """The neighbour `kind`, in a child process pinned to `cpus`."""
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:
            pass
    n = Neighbour(url, token, stop, done, refused)
    if kind == "compute":
        n.loop(n.post("/v1/run", json.dumps(matmul_program()).encode()), 4)
    elif kind == "eigh":
        n.loop(n.post("/v1/run", json.dumps(eigh_made_here()).encode()), 2)
    elif kind == "eigh-json":
        n.loop(n.post("/v1/run", eigh_json_body()), 2)
    elif kind == "eigh-safetensors":
        n.loop(n.post("/v1/run", eigh_safetensors_body(), "application/vnd.safetensors"), 2)
    elif kind == "upload":
        run_upload(n, mib)
    elif kind == "download":
        store_big(2, n.session(), url, mib)
        n.loop(download(url), 4)
    elif kind == "storm":
        n.loop(n.post("/v1/run", json.dumps(matmul_program(n=4, size=128)).encode()), 16)
    elif kind == "rude":
        run_rude(n, mib)
    elif kind == "reload":
        run_reload(n, mib, server_pid)
    else:
        raise ValueError(kind)
