"""Async jobs: POST /v1/jobs, GET /v1/jobs/{id}, DELETE /v1/jobs/{id}."""

import time

import numpy as np
import pytest
import requests

from conftest import Server, _stop_and_check


def chain_program(n_nodes, size):
    """A program of n_nodes matmuls chained (long enough to cancel mid-way)."""
    nodes = [{"id": "r", "op": "rand", "args": [[size, size]], "kwargs": {"dtype": "float64", "seed": 1},
              "outputs": ["x0"]}]
    for i in range(n_nodes):
        nodes.append({"id": "m%d" % i, "op": "matmul", "args": ["x%d" % i, "x0"], "outputs": ["x%d" % (i + 1)]})
    nodes.append({"id": "s", "op": "sum", "args": ["x%d" % n_nodes], "outputs": ["total"]})
    return {"nodes": nodes, "outputs": ["total"]}


def wait_final(url, job_id, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = requests.get(url + "/v1/jobs/" + job_id, timeout=10)
        assert r.status_code == 200, r.text
        body = r.json()
        if body["state"] in ("succeeded", "failed", "cancelled"):
            return body
        time.sleep(0.02)
    raise AssertionError("job %s did not finish" % job_id)


@pytest.fixture(scope="module")
def serial_server():
    srv = Server(["--workqueue-limit", "1"], name="serial")
    yield srv
    _stop_and_check(srv)


def test_job_succeeds_and_keeps_outputs(server):
    prog = {"nodes": [{"id": "a", "op": "add", "args": ["x", 1.5], "outputs": ["y"]}], "outputs": ["y"]}
    r = requests.post(server.url + "/v1/jobs",
                      json={"program": prog, "inputs": {"x": {"dtype": "float32", "shape": [3], "data": [1, 2, 3]}}},
                      timeout=10)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    assert r.headers["Location"] == "/v1/jobs/" + job_id
    body = wait_final(server.url, job_id)
    assert body["state"] == "succeeded"
    assert body["outputs"]["y"]["data"] == [2.5, 3.5, 4.5]
    assert body["job"]["id"] == job_id and body["queue_ms"] >= 0 and body["run_ms"] >= 0
    # Still there on a second read.
    assert wait_final(server.url, job_id)["outputs"]["y"]["data"] == [2.5, 3.5, 4.5]


def test_job_failure_reports_code_and_node(server):
    prog = {"nodes": [{"id": "bad", "op": "linalg.eigh", "args": ["x"], "outputs": ["w", "v"]}], "outputs": ["w"]}
    x = {"dtype": "float64", "shape": [2, 2], "data": [[1, "nan"], ["nan", 1]]}
    r = requests.post(server.url + "/v1/jobs", json={"program": prog, "inputs": {"x": x}}, timeout=10)
    assert r.status_code == 202
    body = wait_final(server.url, r.json()["id"])
    assert body["state"] == "failed"
    assert body["error"]["code"] == "numerical_error"
    assert body["error"]["node"] == "bad"
    assert "outputs" not in body


def test_invalid_program_is_rejected_synchronously(server):
    prog = {"nodes": [{"id": "n", "op": "add", "args": ["nope", 1]}]}
    r = requests.post(server.url + "/v1/jobs", json={"program": prog}, timeout=10)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_program"


def test_unknown_job_404(server):
    for method in ("GET", "DELETE"):
        r = requests.request(method, server.url + "/v1/jobs/job-999999", timeout=10)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_cancel_queued_and_running(serial_server):
    url = serial_server.url
    long_job = requests.post(url + "/v1/jobs", json={"program": chain_program(300, 300)}, timeout=10).json()["id"]
    queued = requests.post(url + "/v1/jobs", json={"program": chain_program(2, 8)}, timeout=10).json()["id"]
    # The limit-1 partition runs the long job; the second waits.
    r = requests.delete(url + "/v1/jobs/" + queued, timeout=10)
    assert r.status_code == 200
    assert r.json()["state"] == "cancelled"
    assert wait_final(url, queued)["state"] == "cancelled"
    # Cancel the running one: it stops at its next node boundary.
    t0 = time.time()
    requests.delete(url + "/v1/jobs/" + long_job, timeout=10)
    body = wait_final(url, long_job)
    assert body["state"] == "cancelled", body
    assert body["error"]["code"] == "cancelled"
    assert time.time() - t0 < 5
    # The partition is free again.
    again = requests.post(url + "/v1/jobs", json={"program": chain_program(1, 4)}, timeout=10).json()["id"]
    assert wait_final(url, again)["state"] == "succeeded"


def test_client_disconnect_cancels_run(serial_server):
    """A /v1/run whose client goes away is cancelled: the limit-1 partition
    is free long before the abandoned job would have finished."""
    import json
    import socket
    from urllib.parse import urlparse

    u = urlparse(serial_server.url)
    body = json.dumps({"program": chain_program(6000, 300)}).encode()  # ~6 s if it ran to the end
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall(b"POST /v1/run HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
              % len(body) + body)
    time.sleep(0.5)  # the job is running now
    s.close()
    t0 = time.time()
    r = requests.post(serial_server.url + "/v1/run", json={"program": chain_program(1, 4)}, timeout=30)
    assert r.status_code == 200
    assert time.time() - t0 < 3.0, "the abandoned job kept the partition busy"
    metrics = requests.get(serial_server.url + "/metrics", timeout=10).text
    assert 'state="cancelled"' in metrics


def test_a_job_is_queued_when_its_202_says_so(base_url):
    # POST /v1/jobs never runs the job before its 202 (a short /v1/run may
    # run on the request's thread): the answer's "queued" is true when sent,
    # and the job ends after it, as GET shows.
    tiny = {"program": {"nodes": [{"id": "a", "op": "add", "args": ["x", 1.0], "outputs": ["y"]}],
                        "outputs": ["y"]},
            "inputs": {"x": {"dtype": "float32", "shape": [2], "data": [1, 2]}}}
    for body in (tiny, {"program": chain_program(30, 200)}):
        for _ in range(5):
            r = requests.post(base_url + "/v1/jobs", json=body, timeout=30)
            assert r.status_code == 202, r.text
            assert r.json()["state"] == "queued", r.text
            done = wait_final(base_url, r.json()["id"])
            assert done["state"] == "succeeded", done
            assert ran_on(base_url, r.json()["id"]).startswith("runner "), "run on the request's thread"


def ran_on(url, job_id, timeout=5):
    """The name of the thread /v1/trace shows the job's run span on."""
    deadline = time.time() + timeout
    while True:
        evs = requests.get(url + "/v1/trace", timeout=10).json()["traceEvents"]
        names = {e["tid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
        spans = [e for e in evs if e["ph"] == "X" and e.get("cat") == "job" and e["args"].get("job") == job_id]
        if spans:
            return names[spans[0]["tid"]]
        assert time.time() < deadline, "no run span for %s" % job_id
        time.sleep(0.02)
