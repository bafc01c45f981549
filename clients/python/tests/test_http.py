"""The client's HTTP plumbing against a small fake HTTP server: retries after
Retry-After, the timeout and deadlines, bodies sent from the arrays' memory,
answers read into one buffer on a kept-alive connection, one Client shared
by threads, a job waited on by polling with a plain progress line."""

import base64
import http.server
import json
import threading
import time

import numpy as np
import pytest

import tensord
from tensord import safetensors as st


# ---------------------------------------------------------------- HTTP plumbing (a fake server)

class FakeHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _reply(self, status, body, ctype="application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        srv = self.server
        srv.hits.append((self.path, self.client_address[1]))
        if self.path.startswith("/busy"):
            left = srv.busy.get(self.path, 0)
            if left > 0:
                srv.busy[self.path] = left - 1
                err = {"error": {"code": "queue_full", "message": "full", "request_id": "q"}}
                hdr = [("Retry-After", "0")] if "noretryafter" not in self.path else []
                return self._reply(503 if "503" in self.path else 429, json.dumps(err).encode(), headers=hdr)
            return self._reply(200, b'{"ok": true}')
        if self.path.startswith("/v1/tensors/"):
            blob = st.encode({"t": srv.tensor})
            return self._reply(200, blob, "application/vnd.safetensors")
        if self.path.startswith("/v1/jobs/job-7"):
            srv.job_polls += 1
            state = ["queued", "running", "running", "succeeded"][min(srv.job_polls - 1, 3)]
            doc = {"id": "job-7", "state": state, "queue_ms": 1.5, "run_ms": 20.0 * srv.job_polls}
            if state == "succeeded":
                y = np.array([1.0, 2.5], np.float32)
                doc["outputs"] = {"y": {"dtype": "float32", "shape": [2],
                                        "b64": base64.b64encode(y.tobytes()).decode()}}
                doc["job"] = {"id": "job-7", "queue_ms": 0.0, "run_ms": 0.0}
            return self._reply(200, json.dumps(doc).encode())
        if self.path == "/slow":
            time.sleep(1.5)
            return self._reply(200, b"{}")
        self._reply(404, b'{"error": {"code": "not_found", "message": "no"}}')

    def do_PUT(self):
        n = int(self.headers["Content-Length"])
        body = self.rfile.read(n)
        self.server.bodies.append((self.headers.get("Transfer-Encoding"), n, body))
        self._reply(201, b"{}")


@pytest.fixture
def fake(local_http):
    return local_http(FakeHandler, hits=[], busy={}, bodies=[], job_polls=0,
                      tensor=np.arange(300000, dtype=np.float32).reshape(1000, 300))


def test_retries_turn_429_into_success(fake):
    c = tensord.Client(fake.url, retries=3)
    fake.busy["/busy/a"] = 3
    assert c._request("GET", "/busy/a").json() == {"ok": True}
    assert sum(1 for p, _ in fake.hits if p == "/busy/a") == 4
    fake.busy["/busy/b"] = 4  # one more than the retries
    with pytest.raises(tensord.QueueFull) as e:
        c._request("GET", "/busy/b")
    assert e.value.retry_after == 0.0 and e.value.status == 429
    assert sum(1 for p, _ in fake.hits if p == "/busy/b") == 4


def proxy_env(monkeypatch, proxy, no_proxy=None):
    for k in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
              "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy)
    if no_proxy:
        monkeypatch.setenv("NO_PROXY", no_proxy)


def test_the_environments_proxy_is_honoured(fake, monkeypatch):
    # The session reads the environment once, not on every request: what it
    # read must still send the request through the proxy (the fake is the
    # proxy here: a proxied request's target is the absolute URL).
    proxy_env(monkeypatch, fake.url)
    c = tensord.Client("http://tensord.invalid:9", retries=0)
    for _ in range(2):
        with pytest.raises(tensord.NotFound):
            c._request("GET", "/via/proxy")
    assert [p for p, _ in fake.hits] == ["http://tensord.invalid:9/via/proxy"] * 2
    assert not c.session.trust_env, "requests would read os.environ again on every request"


def test_no_proxy_is_honoured(fake, monkeypatch):
    proxy_env(monkeypatch, "http://127.0.0.1:9", no_proxy="127.0.0.1")
    c = tensord.Client(fake.url, retries=0)
    fake.busy["/busy/np"] = 0
    assert c._request("GET", "/busy/np").json() == {"ok": True}
    assert [p for p, _ in fake.hits] == ["/busy/np"]


def test_retries_zero_raises_at_once(fake):
    c = tensord.Client(fake.url, retries=0)
    fake.busy["/busy/c"] = 1
    with pytest.raises(tensord.QueueFull):
        c._request("GET", "/busy/c")
    assert sum(1 for p, _ in fake.hits if p == "/busy/c") == 1


def test_503_without_retry_after_backs_off(fake):
    c = tensord.Client(fake.url, retries=1)
    fake.busy["/busy/503/noretryafter"] = 1
    t0 = time.monotonic()
    assert c._request("GET", "/busy/503/noretryafter").status_code == 200
    assert time.monotonic() - t0 >= 0.9  # the default first wait, 1 s


def test_timeout_covers_the_deadline(fake):
    c = tensord.Client(fake.url, timeout=0.5, retries=0)
    assert c._timeouts(None) == (0.5, 0.5)
    assert c._timeouts(30000) == (0.5, 30.0 + tensord.DEADLINE_MARGIN_S)
    with pytest.raises(tensord.ClientTimeout):
        c._request("GET", "/slow")
    assert c._request("GET", "/slow", deadline_ms=1000).status_code == 200


def test_large_bodies_go_out_from_the_arrays(fake):
    c = tensord.Client(fake.url)
    big = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)  # 2 MiB: sent as parts
    c.put("big", big)
    te, n, body = fake.bodies[-1]
    assert te is None and n == len(body)  # Content-Length, not chunked
    assert body == st.encode({"big": big})


def test_answers_are_read_into_one_buffer_on_a_kept_alive_connection(fake):
    c = tensord.Client(fake.url)
    a = c.get("x")
    b = c.get("x")
    assert np.array_equal(a, fake.tensor) and a.flags.writeable
    assert a.base is not None  # a view of the receive buffer
    ports = {port for p, port in fake.hits if p.startswith("/v1/tensors/")}
    assert len(ports) == 1, "the connection was not reused: %s" % ports
    a[0, 0] = -1.0
    assert b[0, 0] == 0.0


def test_one_client_shared_by_threads(fake):
    c = tensord.Client(fake.url)
    errors = []

    def worker():
        try:
            for _ in range(5):
                assert np.array_equal(c.get("x"), fake.tensor)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len({port for p, port in fake.hits}) == 4  # one session (connection) per thread
    c.close()


def test_job_wait_polls_and_shows_a_plain_progress_line(fake, monkeypatch, capsys):
    from tensord import jobs
    monkeypatch.setattr(jobs, "_tqdm", lambda: None)  # as without tqdm
    c = tensord.Client(fake.url)
    job = tensord.Job(c, "job-7")
    assert job.wait(progress=True, stream=False) == "succeeded"
    assert fake.job_polls == 4 and job.done()
    err = capsys.readouterr().err
    assert "job job-7: queued" in err and "job job-7: succeeded, queue 2 ms, run 80 ms" in err, err
    assert err.endswith("\n")
    out = job.result()
    assert out["y"].tolist() == [1.0, 2.5] and out["y"].flags.writeable
    assert c.last_job == {"id": "job-7", "queue_ms": 1.5, "run_ms": 80.0}  # the top-level times
    assert job.status() == "succeeded" and fake.job_polls == 4  # an ended job is not asked again
