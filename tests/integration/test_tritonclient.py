"""Triton's own Python client (tritonclient.http, from PyPI) against the real
binary (API.md 11, 11.1): every call a Triton user makes of a tensord model,
binary (tritonclient's default) and JSON tensors, compression both ways,
errors surfacing as InferenceServerException with tensord's message, tokens
through the client's headers, tenants kept apart.

The venv that has tritonclient is made by scripts/install-pytools.sh; the
Makefile runs the suite under it. Under another interpreter these tests skip,
saying so."""

import gzip
import json
import socket
import time
import zlib

import numpy as np
import pytest
import requests

from conftest import server_with_config, tenants_config
from test_datapath_stream import answer_head
from test_kserve import (DTYPES_WANT, affine_program, capture, dtypes_inputs, dtypes_program, model_name,
                         two_input_program)

httpclient = pytest.importorskip(
    "tritonclient.http", reason="tritonclient is not installed for this interpreter: run the suite under "
                                "build/venv (make integration, scripts/install-pytools.sh)")
import ml_dtypes  # noqa: E402  (tritonclient's dependency: its BF16 arrays)
from tritonclient.utils import InferenceServerException  # noqa: E402

TOKENS = {"alice": "triton-alice-token", "bob": "triton-bob-token"}


def hostport(url):
    return url.split("://", 1)[1]


@pytest.fixture(scope="module")
def srv():
    """A server with two tenants on one partition, and a small body limit for the compression checks."""
    cfg = tenants_config(TOKENS, memory_bytes={"alice": 64 << 20, "bob": 2 << 20})
    with server_with_config(cfg, "tritonclient", ["--max-body-bytes", str(16 << 20)]) as s:
        yield s


def hdr(name):
    return {"Authorization": "Bearer " + TOKENS[name]}


@pytest.fixture(scope="module")
def tc(srv):
    c = httpclient.InferenceServerClient(url=hostport(srv.url), concurrency=4, network_timeout=60)
    yield c
    c.close()


@pytest.fixture(scope="module")
def affine(srv):
    name = model_name()
    capture(srv.url, affine_program(4), name, headers=hdr("alice"))
    return name


def ii(name, arr, dt, binary=True):
    i = httpclient.InferInput(name, list(arr.shape), dt)
    i.set_data_from_numpy(arr, binary_data=binary)
    return i


def test_health_metadata_config_index(tc, srv, affine):
    h = hdr("alice")
    assert tc.is_server_live(headers=h) and tc.is_server_ready(headers=h)
    assert tc.is_model_ready(affine, headers=h)
    assert tc.is_model_ready(affine, model_version="1", headers=h)
    meta = tc.get_server_metadata(headers=h)
    assert meta["name"] == "tensord"
    assert set(meta["extensions"]) == {"binary_tensor_data", "model_configuration", "statistics",
                                       "model_repository", "system_shared_memory"}
    mm = tc.get_model_metadata(affine, headers=h)
    assert mm["platform"] == "tensord" and mm["versions"] == ["1"]
    assert [(t["name"], t["datatype"], t["shape"]) for t in mm["inputs"]] == [("x", "FP32", [4])]
    cfg = tc.get_model_config(affine, headers=h)
    assert cfg["name"] == affine and cfg["platform"] == "tensord" and cfg["max_batch_size"] == 0
    assert [(t["name"], t["data_type"], t["dims"]) for t in cfg["input"]] == [("x", "TYPE_FP32", [4])]
    assert sorted((t["name"], t["data_type"]) for t in cfg["output"]) == [("t", "TYPE_FP32"), ("y", "TYPE_FP32")]
    assert cfg["model_transaction_policy"] == {"decoupled": False}
    assert cfg["instance_group"][0]["name"] == "p"
    assert tc.get_model_config(affine, model_version="1", headers=h) == cfg
    index = tc.get_model_repository_index(headers=h)
    assert {"name": affine, "version": "1", "state": "READY", "reason": ""} in index
    assert all(m["state"] == "READY" for m in index)


def test_infer_binary_and_json_with_output_selection(tc, affine):
    x = np.array([1, 2, 3, 4], np.float32)
    for binary_in in (True, False):
        for binary_out in (True, False):
            res = tc.infer(affine, [ii("x", x, "FP32", binary_in)],
                           outputs=[httpclient.InferRequestedOutput("y", binary_data=binary_out)],
                           headers=hdr("alice"), request_id="r-%d%d" % (binary_in, binary_out))
            np.testing.assert_array_equal(res.as_numpy("y"), 3 * x + 1)
            assert res.as_numpy("t") is None  # not asked for
            r = res.get_response()
            assert r["id"] == "r-%d%d" % (binary_in, binary_out) and r["model_name"] == affine
    res = tc.infer(affine, [ii("x", x, "FP32")], headers=hdr("alice"))  # no outputs named: all of them
    np.testing.assert_array_equal(res.as_numpy("t"), np.float32((3 * x + 1).sum()))


def test_async_infer(tc, affine):
    reqs = [tc.async_infer(affine, [ii("x", np.full(4, k, np.float32), "FP32")], headers=hdr("alice"))
            for k in range(8)]
    for k, r in enumerate(reqs):
        np.testing.assert_array_equal(r.get_result().as_numpy("y"), np.full(4, 3 * k + 1, np.float32))


def test_datatypes_bf16_fp16_int64_bool(tc, srv):
    name = model_name()
    capture(srv.url, dtypes_program(), name, headers=hdr("alice"))
    vals = dtypes_inputs(ml_dtypes.bfloat16)
    want = DTYPES_WANT
    for binary in (True, False):
        # tritonclient sends BF16 only as binary data.
        inputs = [ii(k, v, dt, binary or dt == "BF16") for k, (v, dt) in vals.items()]
        outs = [httpclient.InferRequestedOutput(k, binary_data=binary or k == "bf2") for k in want]
        res = tc.infer(name, inputs, outputs=outs, headers=hdr("alice"))
        for k, w in want.items():
            got = res.as_numpy(k)
            if k == "bf2":
                assert got.dtype == ml_dtypes.bfloat16
            np.testing.assert_array_equal(got.astype(np.float64) if k == "bf2" else got,
                                          np.array(w, np.float64 if k == "bf2" else got.dtype),
                                          err_msg="%s binary=%s" % (k, binary))


def test_compression_both_ways(tc, affine):
    x = np.arange(4, dtype=np.float32)
    for req_alg in (None, "gzip", "deflate"):
        for resp_alg in (None, "gzip", "deflate"):
            res = tc.infer(affine, [ii("x", x, "FP32")], headers=hdr("alice"),
                           request_compression_algorithm=req_alg, response_compression_algorithm=resp_alg)
            np.testing.assert_array_equal(res.as_numpy("y"), 3 * x + 1, err_msg="%s/%s" % (req_alg, resp_alg))


def test_compressed_answers_say_so(srv, affine):
    x = np.arange(4, dtype=np.float32)
    body = json.dumps({"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": x.tolist()}]}).encode()
    for alg, unpack in (("gzip", gzip.decompress), ("deflate", zlib.decompress)):
        r = requests.post(srv.url + "/v2/models/%s/infer" % affine, data=body, stream=True,
                          headers=dict(hdr("alice"), **{"Accept-Encoding": alg}), timeout=30)
        assert r.status_code == 200 and r.headers["Content-Encoding"] == alg
        out = json.loads(unpack(r.raw.read()))
        assert out["outputs"][0]["data"] == (3 * x + 1).tolist()
        meta = requests.get(srv.url + "/v2/models/" + affine, headers=dict(hdr("alice"), **{"Accept-Encoding": alg}),
                            stream=True, timeout=30)
        assert meta.headers["Content-Encoding"] == alg and json.loads(unpack(meta.raw.read()))["name"] == affine


def ten_gib_bomb():
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    mib = bytes(1 << 20)
    member = b"".join(z.compress(mib) for _ in range(1024)) + z.flush()
    return member * 10


def test_bad_compressed_bodies(srv, affine):
    url = srv.url + "/v2/models/%s/infer" % affine
    h = hdr("alice")
    ok = json.dumps({"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}).encode()
    cases = [("gzip", b"this is not gzip", 400, "not valid gzip"),
             ("gzip", gzip.compress(ok)[:-12], 400, "ends before"),
             ("deflate", gzip.compress(ok), 400, "not valid deflate"),
             ("br", ok, 400, "not supported"),
             # Inflates past --max-body-bytes (16 MiB): 413, nothing kept.
             ("gzip", gzip.compress(b" " * (64 << 20)), 413, "limit")]
    for enc, body, status, needle in cases:
        r = requests.post(url, data=body, headers=dict(h, **{"Content-Encoding": enc}), timeout=60)
        assert r.status_code == status, (enc, r.status_code, r.text)
        assert needle in r.json()["error"], r.text
    # The tenant's memory is back where it was, and the server answers.
    assert tenant_bytes(srv.url, "alice") < (1 << 20)
    assert requests.post(url, data=gzip.compress(ok), headers=dict(h, **{"Content-Encoding": "gzip"}),
                         timeout=30).status_code == 200


def answer_to_a_partial_body(srv, path, body, sent, token, encoding):
    """Sends a request announcing all of `body` with only its first `sent`
    bytes, then waits (the rest never comes): returns (status, error text).
    A server that read the whole compressed body before inflating it would
    wait here until its body timeout."""
    k = socket.create_connection((srv.host, srv.port), timeout=20)
    try:
        k.sendall(("POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                   "Content-Encoding: %s\r\nAuthorization: Bearer %s\r\n\r\n"
                   % (path, len(body), encoding, token)).encode() + body[:sent])
        head, rest = answer_head(k, why="no answer before the body's end").split(b"\r\n\r\n", 1)
        length = int([ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")][0])
        while len(rest) < length:
            chunk = k.recv(65536)
            assert chunk, head
            rest += chunk
        return int(head.split()[1]), json.loads(rest)["error"]
    finally:
        k.close()


def test_compressed_bodies_are_inflated_as_they_arrive(srv, affine):
    """BodyKind::kInflated: the session inflates a compressed infer body as
    it comes, so a bomb, a body that is not gzip and one past the tenant's
    quota are answered while most of the body is still to come, and nothing
    stays charged."""
    path = "/v2/models/%s/infer" % affine
    bomb = ten_gib_bomb()  # ten gzip members of 1 GiB of zeros: ~10 MB on the wire, under the 16 MiB limit
    assert len(bomb) < (16 << 20)
    t0 = time.monotonic()
    assert answer_to_a_partial_body(srv, path, bomb, 1 << 20, TOKENS["alice"], "gzip")[0] == 413
    assert time.monotonic() - t0 < 10
    status, error = answer_to_a_partial_body(srv, path, b"not gzip at all" * 70000, 1 << 16, TOKENS["alice"], "gzip")
    assert status == 400 and "not valid gzip" in error, error
    # bob: a 2 MiB quota; 64 MiB of spaces in ~64 KB, of which the first half is sent.
    bob_model = model_name()
    capture(srv.url, affine_program(4), bob_model, headers=hdr("bob"))
    held = tenant_bytes(srv.url, "bob")
    spaces = gzip.compress(b" " * (64 << 20))
    status, error = answer_to_a_partial_body(srv, "/v2/models/%s/infer" % bob_model, spaces, len(spaces) // 2,
                                             TOKENS["bob"], "gzip")
    assert status == 429 and "as it inflates" in error, error
    assert tenant_bytes(srv.url, "bob") == held
    assert tenant_bytes(srv.url, "alice") < (1 << 20)
    # A compressed body that fits, sent slowly in small pieces, inflates to the same answer.
    x = np.arange(4, dtype=np.float32)
    ok = gzip.compress(json.dumps({"inputs": [{"name": "x", "shape": [4], "datatype": "FP32",
                                                "data": x.tolist()}]}).encode())
    k = socket.create_connection((srv.host, srv.port), timeout=20)
    try:
        k.sendall(("POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\nContent-Encoding: gzip\r\n"
                   "Authorization: Bearer %s\r\n\r\n" % (path, len(ok), TOKENS["alice"])).encode())
        for i in range(0, len(ok), 7):
            k.sendall(ok[i:i + 7])
            time.sleep(0.002)
        head, rest = answer_head(k).split(b"\r\n\r\n", 1)
        assert head.split()[1] == b"200", head
    finally:
        k.close()


def tenant_bytes(url, tenant):
    m = requests.get(url + "/metrics", timeout=10).text
    line = [ln for ln in m.splitlines() if ln.startswith("tensord_tenant_memory_bytes{") and 'tenant="%s"' % tenant in ln]
    assert line, m[:2000]
    return float(line[0].rsplit(" ", 1)[1])


def test_inflation_past_the_tenants_quota_is_429(srv):
    # bob: a 2 MiB quota; the body limit is 16 MiB. A body that inflates to 4 MiB fits the limit, not the quota.
    name = model_name()
    capture(srv.url, affine_program(4), name, headers=hdr("bob"))
    held = tenant_bytes(srv.url, "bob")
    r = requests.post(srv.url + "/v2/models/%s/infer" % name, data=gzip.compress(b" " * (4 << 20)),
                      headers=dict(hdr("bob"), **{"Content-Encoding": "gzip"}), timeout=60)
    assert r.status_code == 429 and "quota" in r.json()["error"], r.text
    assert tenant_bytes(srv.url, "bob") == held  # nothing kept
    x = np.arange(4, dtype=np.float32)
    ok = json.dumps({"inputs": [{"name": "x", "shape": [4], "datatype": "FP32", "data": x.tolist()}]}).encode()
    r = requests.post(srv.url + "/v2/models/%s/infer" % name, data=zlib.compress(ok),
                      headers=dict(hdr("bob"), **{"Content-Encoding": "deflate"}), timeout=60)
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == (3 * x + 1).tolist()


def test_errors_surface_with_tensords_message(tc, affine):
    h = hdr("alice")
    cases = [
        (lambda: tc.infer(affine, [ii("x", np.zeros(3, np.float32), "FP32")], headers=h), "400", "shape"),
        (lambda: tc.infer(affine, [ii("x", np.zeros(4, np.float64), "FP64")], headers=h), "400", "datatype"),
        (lambda: tc.infer(affine, [ii("nope", np.zeros(4, np.float32), "FP32")], headers=h), "400", "nope"),
        (lambda: tc.infer(affine, [ii("x", np.zeros(4, np.float32), "FP32")],
                          outputs=[httpclient.InferRequestedOutput("zz")], headers=h), "400", "zz"),
        (lambda: tc.infer("no-such-model", [ii("x", np.zeros(4, np.float32), "FP32")], headers=h), "404",
         "unknown model 'no-such-model'"),
        (lambda: tc.get_model_metadata("no-such-model", headers=h), "404", "unknown model"),
        (lambda: tc.get_model_config("no-such-model", headers=h), "404", "unknown model"),
        (lambda: tc.get_model_config(affine, model_version="2", headers=h), "404", "no version '2'"),
        (lambda: tc.get_inference_statistics("no-such-model", headers=h), "404", "unknown model"),
        (lambda: tc.load_model(affine, headers=h), "400", "/v1/graphs"),
        (lambda: tc.unload_model(affine, headers=h), "400", "DELETE /v1/graphs"),
        (lambda: tc.get_server_metadata(), "401", ""),
        (lambda: tc.get_server_metadata(headers={"Authorization": "Bearer wrong"}), "401", ""),
    ]
    for call, status, needle in cases:
        with pytest.raises(InferenceServerException) as ei:
            call()
        assert ei.value.status() == status, (status, ei.value)
        assert needle in ei.value.message(), ei.value.message()
    assert tc.is_model_ready(affine, headers=h)  # unload kept the model


def test_statistics_count_each_stage(tc, srv):
    name = model_name()
    capture(srv.url, two_input_program(), name, headers=hdr("alice"))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    before = tc.get_inference_statistics(name, headers=hdr("alice"))["model_stats"][0]
    assert before["name"] == name and before["inference_count"] == 0 and before["last_inference"] == 0
    n = 5
    for _ in range(n):
        tc.infer(name, [ii("a", a, "FP32"), ii("b", a, "FP32")], headers=hdr("alice"))
    with pytest.raises(InferenceServerException):
        tc.infer(name, [ii("a", a, "FP32")], headers=hdr("alice"))  # b missing: a failure
    st = tc.get_inference_statistics(name, headers=hdr("alice"))["model_stats"][0]
    assert st["version"] == "1"
    assert st["inference_count"] == n and st["execution_count"] == n
    s = st["inference_stats"]
    assert s["success"]["count"] == n and s["fail"]["count"] == 1
    for stage in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert s[stage]["count"] == n, stage
        assert 0 < s[stage]["ns"] < s["success"]["ns"], (stage, s)
    assert sum(s[k]["ns"] for k in ("queue", "compute_input", "compute_infer", "compute_output")) <= s["success"]["ns"]
    assert st["last_inference"] > 1.6e12  # ms since the epoch
    every = tc.get_inference_statistics(headers=hdr("alice"))["model_stats"]
    assert name in [m["name"] for m in every]
    # The same figures in Prometheus, with tenant and model labels.
    m = requests.get(srv.url + "/metrics", timeout=10).text
    want = 'tensord_model_requests_total{model="%s",outcome="success",tenant="alice"} %d' % (name, n)
    assert want in m, [ln for ln in m.splitlines() if name in ln]
    assert 'tensord_model_stage_seconds_total{model="%s",stage="compute_infer",tenant="alice"}' % name in m


def test_other_tenants_models_are_invisible(tc, affine):
    b = hdr("bob")
    assert affine not in [m["name"] for m in tc.get_model_repository_index(headers=b)]
    assert affine not in [m["name"] for m in tc.get_inference_statistics(headers=b)["model_stats"]]
    for call in (lambda: tc.get_model_metadata(affine, headers=b), lambda: tc.get_model_config(affine, headers=b),
                 lambda: tc.get_inference_statistics(affine, headers=b),
                 lambda: tc.infer(affine, [ii("x", np.zeros(4, np.float32), "FP32")], headers=b)):
        with pytest.raises(InferenceServerException) as ei:
            call()
        assert ei.value.status() == "404" and "unknown model" in ei.value.message()
    assert not tc.is_model_ready(affine, headers=b)


def test_malformed_extension_requests(srv, affine):
    url, h = srv.url, hdr("alice")
    for body in (b"{", b"[]", b'{"ready": "yes"}'):
        r = requests.post(url + "/v2/repository/index", data=body, headers=h, timeout=10)
        assert r.status_code == 400 and isinstance(r.json()["error"], str), r.text
    assert requests.post(url + "/v2/repository/index", data=b'{"ready": true}', headers=h, timeout=10).ok
    for path in ("/v2/models/%s/versions/0/config" % affine, "/v2/models/%s/versions/x/stats" % affine,
                 "/v2/models/%s/config/extra" % affine, "/v2/models//config", "/v2/models/%2e%2e/config"):
        r = requests.get(url + path, headers=h, timeout=10)
        assert r.status_code in (400, 404) and isinstance(r.json()["error"], str), (path, r.status_code, r.text)
    assert requests.post(url + "/v2/models/%s/config" % affine, headers=h, timeout=10).status_code == 405
    assert requests.get(url + "/v2/health/live", timeout=10).status_code == 200
