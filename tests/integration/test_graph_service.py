"""A capture is a job on the tenant's partition (issue 13, "a graph service
beside the engine"): counted in tensord_jobs_total like any job, queued
behind the partition's running jobs, cancelled while queued when its client
goes away (and then no graph exists), and its errors answered as before."""

import json
import socket
import threading
import time

import requests

from conftest import Server
from test_graphs import affine_program, metric_value
from test_shutdown import start_long_job


def jobs_total(url, state):
    return metric_value(url, "tensord_jobs_total", {"tenant": "default", "state": state})


def capture_body(name=None):
    body = {"program": affine_program(8)}
    if name:
        body["name"] = name
    return json.dumps(body)


def test_a_capture_is_counted_as_a_job(server):
    before = jobs_total(server.url, "succeeded")
    r = requests.post(server.url + "/v1/graphs", data=capture_body())
    assert r.status_code == 201, r.text
    assert r.headers["Location"] == "/v1/graphs/" + r.json()["id"]
    assert jobs_total(server.url, "succeeded") == before + 1
    bad = requests.post(server.url + "/v1/graphs",
                        data=json.dumps({"program": {"inputs": {}, "nodes": [{"id": "n", "op": "no_such_op",
                                                                               "args": [], "outputs": ["y"]}],
                                                     "outputs": ["y"]}}))
    assert bad.status_code == 404, bad.text  # as before captures were jobs
    assert bad.json()["error"]["code"] == "unknown_op" and bad.json()["error"]["node"] == "n"
    requests.delete(server.url + "/v1/graphs/" + r.json()["id"])


def test_a_capture_waits_behind_the_partitions_jobs_and_is_cancelled_with_its_client():
    srv = Server(["--workqueue-limit", "1", "--threads", "1"], name="capture-queue")
    try:
        url = srv.url
        job = start_long_job(url)  # holds the partition's one runner
        # A capture queues behind it: no answer while the long job runs.
        done = {}
        t = threading.Thread(target=lambda: done.setdefault("r", requests.post(url + "/v1/graphs",
                                                                               data=capture_body("queued"))))
        t.start()
        time.sleep(0.5)
        assert t.is_alive(), "the capture was answered while the partition's runner was busy"
        # A second capture whose client goes away while it is queued: cancelled, no graph.
        cancelled_before = jobs_total(url, "cancelled")
        host, port = url.replace("http://", "").split(":")
        s = socket.create_connection((host, int(port)))
        body = capture_body("gone").encode()
        s.sendall(b"POST /v1/graphs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(0.3)
        s.close()
        deadline = time.time() + 10
        while time.time() < deadline and jobs_total(url, "cancelled") < cancelled_before + 1:
            time.sleep(0.05)
        assert jobs_total(url, "cancelled") == cancelled_before + 1
        # The long job ends; the first capture then runs and answers 201.
        assert requests.delete(url + "/v1/jobs/" + job).status_code in (200, 202, 204)
        t.join(timeout=30)
        assert not t.is_alive()
        assert done["r"].status_code == 201, done["r"].text
        assert done["r"].json()["name"] == "queued"
        # The cancelled capture left nothing: its name is free.
        again = requests.post(url + "/v1/graphs", data=capture_body("gone"))
        assert again.status_code == 201, again.text
    finally:
        srv.stop()
