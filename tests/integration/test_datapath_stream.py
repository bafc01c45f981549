"""A JSON body's "b64" value decoded while the body arrives (issue 14,
api/json_b64_stream.h): in any pieces, in any key order, through the exact
fallback (an escape, a bad character), and when the client stops or stalls
inside the value: nothing stored, the tenant's memory where it was, the
server still serving."""

import base64
import json
import socket
import time

import numpy as np
import requests

import tensord
from conftest import Server, _stop_and_check
from test_datapath import listed, memory, put_head, safetensors_body, settle, stall


def b64_body(arr, order=("dtype", "shape", "b64")):
    fields = {"dtype": '"float32"', "shape": json.dumps(list(arr.shape)),
              "b64": '"' + base64.b64encode(arr.tobytes()).decode() + '"'}
    return ("{" + ", ".join('"%s": %s' % (k, fields[k]) for k in order) + "}").encode()


def answer_head(k, got=b"", why="closed without an answer"):
    """Reads from socket `k` until an answer's head has come (after `got`,
    what came already); returns all that came."""
    while b"\r\n\r\n" not in got:
        chunk = k.recv(65536)
        assert chunk, why
        got += chunk
    return got


def send_in_pieces(s, path, body, piece, pause=0.0):
    """PUTs `body` over a raw socket in `piece`-byte writes; returns (status, json)."""
    k = socket.create_connection((s.host, s.port), timeout=30)
    try:
        k.sendall(put_head(path, len(body), "application/json"))
        for i in range(0, len(body), piece):
            k.sendall(body[i:i + piece])
            if pause:
                time.sleep(pause)
        head, rest = answer_head(k).split(b"\r\n\r\n", 1)
        length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
        while len(rest) < length:
            rest += k.recv(65536)
        return int(head.split()[1]), json.loads(rest)
    finally:
        k.close()


def test_values_decoded_in_any_pieces_and_any_order():
    s = Server([], name="datapath-stream")
    try:
        c = tensord.Client(s.url)
        rng = np.random.default_rng(3)
        arr = rng.standard_normal((3, 700001)).astype(np.float32)  # 8.4 MB, not a multiple of 3 bytes per group
        # The value first, the dtype and shape after it; odd pieces with pauses.
        status, out = send_in_pieces(s, "/v1/tensors/late", b64_body(arr, ("b64", "shape", "dtype")), 1 << 19 | 7,
                                     pause=0.002)
        assert status == 201, out
        assert out["shape"] == [3, 700001]
        np.testing.assert_array_equal(c.get("late"), arr)
        assert memory(s.url) == arr.nbytes

        # An escaped '/' ("\\/") is legal JSON: the exact fallback decodes it.
        text = b64_body(arr)
        slash = text.index(b"/", 100)
        escaped = text[:slash] + b"\\" + text[slash:]
        r = requests.put(s.url + "/v1/tensors/esc", data=escaped, headers={"Content-Type": "application/json"},
                         timeout=60)
        assert r.status_code == 201, r.text
        np.testing.assert_array_equal(c.get("esc"), arr)

        # A bad character in the middle: the same 400 as a body read whole.
        bad = text[: len(text) // 2] + b"!" + text[len(text) // 2 + 1:]
        r = requests.put(s.url + "/v1/tensors/bad", data=bad, headers={"Content-Type": "application/json"},
                         timeout=60)
        assert r.status_code == 400, r.text
        msg = r.json()["error"]["message"]
        assert "invalid base64: '!' at offset %d" % (len(text) // 2 - text.index(b'"b64": "') - 8) in msg, msg

        # Too few bytes for the shape: 400 naming both sizes.
        short = b64_body(arr[:, :-1]).replace(b"[3, 700000]", b"[3, 700001]")
        r = requests.put(s.url + "/v1/tensors/short", data=short, headers={"Content-Type": "application/json"},
                         timeout=60)
        assert r.status_code == 400 and "needs %d" % arr.nbytes in r.json()["error"]["message"], r.text

        # The same route with a safetensors body is not touched by the decoder.
        r = requests.put(s.url + "/v1/tensors/st", data=safetensors_body(arr),
                         headers={"Content-Type": "application/vnd.safetensors"}, timeout=60)
        assert r.status_code == 201, r.text
        np.testing.assert_array_equal(c.get("st"), arr)
        assert sorted(t["name"] for t in listed(s.url)) == ["esc", "late", "st"]
        assert settle(s.url, 3 * arr.nbytes) == 3 * arr.nbytes
    finally:
        _stop_and_check(s)


def test_a_client_that_stops_inside_the_value_leaves_nothing():
    s = Server(["--io-timeout", "2"], name="datapath-stream-short")
    try:
        c = tensord.Client(s.url)
        c.put("keep", np.ones(4, np.float32))
        base = memory(s.url)
        arr = np.arange(3 << 20, dtype=np.float32)  # 12 MiB
        body = b64_body(arr)

        # 1. Closed mid-value.
        k = socket.create_connection((s.host, s.port), timeout=10)
        k.sendall(put_head("/v1/tensors/cut", len(body), "application/json") + body[: len(body) // 2])
        k.close()

        # 2. Content-Length promises more than arrives, the client stalls in
        #    the value: closed by the io timeout, not answered.
        got, waited = stall(s, put_head("/v1/tensors/stall", len(body) + 1000, "application/json") + body[:-2])
        assert got == b"", got[:200]
        assert 1.0 <= waited < 6, waited

        # 3. The body ends inside the value (Content-Length honest): 400.
        cut = body[: len(body) // 2]
        r = requests.put(s.url + "/v1/tensors/open", data=cut, headers={"Content-Type": "application/json"},
                         timeout=60)
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request", r.text

        assert [t["name"] for t in listed(s.url)] == ["keep"]
        assert settle(s.url, base) == base
        assert s.alive()
        r = requests.put(s.url + "/v1/tensors/whole", data=body, headers={"Content-Type": "application/json"},
                         timeout=60)
        assert r.status_code == 201, r.text
        np.testing.assert_array_equal(c.get("whole"), arr)
        assert settle(s.url, base + arr.nbytes) == base + arr.nbytes
    finally:
        _stop_and_check(s)


def test_a_client_that_slows_down_mid_body_is_not_cut_off():
    """A large body's reader wakes only once a low-water mark's worth has
    come (SO_RCVLOWAT, set at the pace of the last read): a client that
    slows from loopback speed to a trickle must still count as moving (its
    pieces re-arm the 2 s io timeout), for safetensors and JSON bodies."""
    s = Server(["--io-timeout", "2"], name="datapath-slow")
    try:
        c = tensord.Client(s.url)
        arr = np.random.default_rng(4).standard_normal(3 << 20).astype(np.float32)  # 12 MiB
        for name, body, ctype in [("st", safetensors_body(arr), "application/vnd.safetensors"),
                                  ("js", b64_body(arr), "application/json")]:
            k = socket.create_connection((s.host, s.port), timeout=30)
            try:
                fast = len(body) - (384 << 10)
                k.sendall(put_head("/v1/tensors/" + name, len(body), ctype) + body[:fast])
                t0 = time.time()
                for i in range(fast, len(body), 24 << 10):  # 96 KiB/s for 4 s: twice the io timeout
                    time.sleep(0.25)
                    k.sendall(body[i:i + (24 << 10)])
                took = time.time() - t0
                got = answer_head(k, why="closed without an answer after %.1f s of trickling" % took)
                assert got.split()[1] == b"201", got[:300]
            finally:
                k.close()
            np.testing.assert_array_equal(c.get(name), arr)
    finally:
        _stop_and_check(s)


QUOTA_TOKEN = "quota-token"


def quota_server(name):
    """A server whose one tenant, q, has 24 MiB of memory; (server, auth, q_memory)."""
    import hashlib
    from test_graphs import metric_value
    from test_tenancy import write_config
    cfg = {"partitions": [{"name": "all", "share": 1.0, "workqueue_limit": 2}],
           "tenants": [{"name": "q", "token_sha256": hashlib.sha256(QUOTA_TOKEN.encode()).hexdigest(),
                        "partition": "all", "memory_bytes": 24 << 20}]}
    s = Server(["--config", write_config(cfg)], name=name)
    return (s, {"Authorization": "Bearer " + QUOTA_TOKEN},
            lambda: metric_value(s.url, "tensord_tenant_memory_bytes", {"tenant": "q"}))


def send_until_answered(s, method, path, body, ctype):
    """Sends `body` as q over a raw socket until an answer's head comes;
    returns (answer bytes, body bytes sent before it)."""
    k = socket.create_connection((s.host, s.port), timeout=30)
    try:
        k.sendall(("%s %s HTTP/1.1\r\nHost: t\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
                   "Authorization: Bearer %s\r\n\r\n" % (method, path, ctype, len(body), QUOTA_TOKEN)).encode())
        sent = 0
        got = b""
        k.setblocking(False)
        while sent < len(body) and b"\r\n\r\n" not in got:
            try:
                sent += k.send(body[sent:sent + (1 << 20)])
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                time.sleep(0.01)
            try:
                got += k.recv(65536)
            except BlockingIOError:
                pass
        k.setblocking(True)
        return answer_head(k, got), sent
    finally:
        k.close()


def store_held(s, auth, name, seed):
    """PUTs 16 MiB of q's quota of 24 as stored tensor `name`; returns it."""
    held = np.random.default_rng(seed).standard_normal(4 << 20).astype(np.float32)
    r = requests.put(s.url + "/v1/tensors/" + name, data=safetensors_body(held), timeout=60,
                     headers=dict(auth, **{"Content-Type": "application/vnd.safetensors"}))
    assert r.status_code == 201, r.text
    return held


def assert_refused_early(s, method, path, body, ctype, q_memory, held_bytes):
    """`body` (past q's quota) is answered 429 quota_exceeded at least
    1 MiB before it is all sent, and q's memory settles back to
    `held_bytes`."""
    got, sent = send_until_answered(s, method, path, body, ctype)
    assert got.split()[1] == b"429", (method, path, ctype, got[:300])
    assert b"quota_exceeded" in got, got[:600]
    assert sent < len(body) - (1 << 20), "answered only after the whole body (%s %s %s)" % (method, path, ctype)
    assert settle_to(q_memory, held_bytes) == held_bytes


def test_an_upload_counts_against_the_quota_as_it_arrives():
    """A tensor upload is charged to its tenant while its body arrives
    (HttpServer::set_body_accounts): one that would pass the quota is
    answered 429 quota_exceeded before its body is all sent, for
    safetensors and JSON alike; nothing stays charged, and an upload that
    fits is charged once (its stored tensor's bytes)."""
    s, auth, q_memory = quota_server("datapath-quota")
    try:
        fits = store_held(s, auth, "fits", 5)
        assert q_memory() == fits.nbytes
        # 64 MiB more would pass 24 MiB; far more than the socket buffers hold.
        big = np.ones(16 << 20, np.float32)
        for body, ctype in [(safetensors_body(big), "application/vnd.safetensors"),
                            (b64_body(big), "application/json")]:
            assert_refused_early(s, "PUT", "/v1/tensors/big", body, ctype, q_memory, fits.nbytes)
        assert requests.get(s.url + "/v1/tensors/big", headers=auth, timeout=10).status_code == 404
        # Replacing the stored tensor with one of its size still fits (the
        # body's charge is handed to the stored tensor, not added to it).
        r = requests.put(s.url + "/v1/tensors/other", data=b64_body(big[: 1 << 20]), timeout=60,
                         headers=dict(auth, **{"Content-Type": "application/json"}))
        assert r.status_code == 201, r.text
        assert settle_to(q_memory, fits.nbytes + (4 << 20)) == fits.nbytes + (4 << 20)
    finally:
        _stop_and_check(s)


def run_bodies(arr):
    """A /v1/run request summing `arr` (input "a"), as safetensors and as JSON b64."""
    request = {"program": {"inputs": {"a": {"dtype": "float32", "shape": list(arr.shape)}},
                           "nodes": [{"id": "s", "op": "sum", "args": ["a"], "outputs": ["t"]}],
                           "outputs": ["t"]}}
    st = safetensors_body(arr, name="a", metadata={"request": json.dumps(request)})
    request["inputs"] = {"a": {"dtype": "float32", "shape": list(arr.shape),
                               "b64": base64.b64encode(arr.tobytes()).decode()}}
    return [(st, "application/vnd.safetensors"), (json.dumps(request).encode(), "application/json")]


def test_run_and_upload_bodies_count_against_the_quota_as_they_arrive():
    """/v1/run, /v1/jobs and /v1/tensors:upload bodies are charged to their
    tenant while they arrive, as PUT's are: one that would pass the quota
    is answered 429 before its body is all sent and leaves nothing charged;
    a run's body stays charged while its job holds the inputs and is
    released with them; an upload that fits is charged once."""
    s, auth, q_memory = quota_server("datapath-quota-run")
    try:
        held = store_held(s, auth, "held", 6)
        # 64 MiB more would pass 24 MiB; far more than the socket buffers hold.
        big = np.ones(16 << 20, np.float32)
        for path in ["/v1/run", "/v1/jobs"]:
            for body, ctype in run_bodies(big):
                assert_refused_early(s, "POST", path, body, ctype, q_memory, held.nbytes)
        assert_refused_early(s, "POST", "/v1/tensors:upload", safetensors_body(big, name="big"),
                             "application/vnd.safetensors", q_memory, held.nbytes)
        # Bodies that fit run, and their charge goes with the job's inputs.
        small = np.full(1 << 20, 0.5, np.float32)  # 4 MiB
        for body, ctype in run_bodies(small):
            r = requests.post(s.url + "/v1/run", data=body, timeout=60, headers=dict(auth, **{"Content-Type": ctype}))
            assert r.status_code == 200, r.text
            assert np.asarray(r.json()["outputs"]["t"]["data"]).item() == 0.5 * small.size
            assert settle_to(q_memory, held.nbytes) == held.nbytes
        r = requests.post(s.url + "/v1/tensors:upload", data=safetensors_body(small, name="small"), timeout=60,
                          headers=dict(auth, **{"Content-Type": "application/vnd.safetensors"}))
        assert r.status_code == 200, r.text
        assert settle_to(q_memory, held.nbytes + small.nbytes) == held.nbytes + small.nbytes
    finally:
        _stop_and_check(s)


def settle_to(read, want, timeout=5):
    deadline = time.time() + timeout
    while time.time() < deadline and read() != want:
        time.sleep(0.05)
    return read()
