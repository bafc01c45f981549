"""Triton's system shared memory extension (API.md 11.1) driven by
tritonclient.http and tritonclient.utils.shared_memory (PyPI): regions
registered by one tenant, infer inputs read from and outputs written to them
without the socket, every bound checked, another tenant's region unknown.
Skips, saying why, where tritonclient is not installed."""

import os
import uuid

import numpy as np
import pytest
import requests

from conftest import server_with_config, tenants_config
from test_kserve import affine_program, capture, model_name

httpclient = pytest.importorskip(
    "tritonclient.http", reason="tritonclient is not installed for this interpreter: run the suite under "
                                "build/venv (make integration, scripts/install-pytools.sh)")
shm = pytest.importorskip("tritonclient.utils.shared_memory", reason="tritonclient's shared_memory is missing")
from tritonclient.utils import InferenceServerException  # noqa: E402

TOKENS = {"alice": "shm-alice-token", "bob": "shm-bob-token"}


@pytest.fixture(scope="module")
def srv():
    cfg = tenants_config(TOKENS)
    with server_with_config(cfg, "triton-shm") as s:
        yield s


def hdr(name):
    return {"Authorization": "Bearer " + TOKENS[name]}


@pytest.fixture(scope="module")
def tc(srv):
    c = httpclient.InferenceServerClient(url=srv.url.split("://", 1)[1], network_timeout=60)
    yield c
    c.close()


@pytest.fixture
def region():
    """A fresh POSIX shm object (tritonclient's utility); destroyed after the test."""
    made = []

    def make(byte_size):
        key = "/it_%s" % uuid.uuid4().hex[:12]
        h = shm.create_shared_memory_region("r_" + key[4:], key, byte_size)
        made.append(h)
        return key, h

    yield make
    for h in made:
        shm.destroy_shared_memory_region(h)


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def test_register_status_infer_unregister(tc, srv, region):
    h = hdr("alice")
    name = model_name()
    capture(srv.url, affine_program(16), name, headers=h)
    assert "system_shared_memory" in tc.get_server_metadata(headers=h)["extensions"]
    x = np.arange(16, dtype=np.float32)
    in_key, in_h = region(x.nbytes)
    out_key, out_h = region(256)  # room for y (64 bytes) at offset 128
    shm.set_shared_memory_region(in_h, [x])
    fds = fd_count(srv.pid)
    tc.register_system_shared_memory("in", in_key, x.nbytes, headers=h)
    tc.register_system_shared_memory("out", out_key, 256, headers=h)
    assert fd_count(srv.pid) == fds + 2
    st = {r["name"]: r for r in tc.get_system_shared_memory_status(headers=h)}
    assert st["in"] == {"name": "in", "key": in_key, "offset": 0, "byte_size": x.nbytes}
    assert tc.get_system_shared_memory_status(region_name="out", headers=h)[0]["byte_size"] == 256

    i = httpclient.InferInput("x", [16], "FP32")
    i.set_shared_memory("in", x.nbytes)
    o = httpclient.InferRequestedOutput("y", binary_data=True)
    o.set_shared_memory("out", 64, offset=128)
    t = httpclient.InferRequestedOutput("t", binary_data=True)
    res = tc.infer(name, [i], outputs=[o, t], headers=h)
    out = res.get_output("y")
    assert "data" not in out  # in the region, not in the answer (as Triton answers)
    assert out["parameters"]["shared_memory_region"] == "out" and out["parameters"]["shared_memory_byte_size"] == 64
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out_h, np.float32, [16], offset=128), 3 * x + 1)
    np.testing.assert_array_equal(res.as_numpy("t"), np.float32((3 * x + 1).sum()))
    # A second infer sees the region's new contents.
    shm.set_shared_memory_region(in_h, [x * 2])
    tc.infer(name, [i], outputs=[o], headers=h)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out_h, np.float32, [16], offset=128), 6 * x + 1)

    tc.unregister_system_shared_memory("in", headers=h)
    assert [r["name"] for r in tc.get_system_shared_memory_status(headers=h)] == ["out"]
    with pytest.raises(InferenceServerException) as ei:
        tc.infer(name, [i], headers=h)
    assert ei.value.status() == "400" and "unknown shared memory region 'in'" in ei.value.message()
    tc.unregister_system_shared_memory(headers=h)  # all
    assert tc.get_system_shared_memory_status(headers=h) == []
    assert fd_count(srv.pid) == fds  # closed


def test_bounds_and_bad_registrations(tc, srv, region):
    h = hdr("alice")
    name = model_name()
    capture(srv.url, affine_program(16), name, headers=h)
    key, hd = region(64)
    cases = [
        (lambda: tc.register_system_shared_memory("a", key, 128, headers=h), "past the end"),
        (lambda: tc.register_system_shared_memory("a", key, 32, offset=48, headers=h), "past the end"),
        (lambda: tc.register_system_shared_memory("a", "/no_such_%s" % uuid.uuid4().hex, 8, headers=h),
         "cannot be opened"),
        (lambda: tc.register_system_shared_memory("a", "/../etc/passwd", 8, headers=h), "is not a shared memory name"),
        (lambda: tc.register_system_shared_memory("a", "etc", 8, headers=h), "is not a shared memory name"),
        (lambda: tc.register_system_shared_memory("a", "/nccl-1234", 8, headers=h), "is not a shared memory name"),
        (lambda: tc.register_system_shared_memory("a", "/sem.x", 8, headers=h), "is not a shared memory name"),
        (lambda: tc.register_system_shared_memory("a", key, 0, headers=h), "byte_size"),
        (lambda: tc.get_system_shared_memory_status(region_name="nope", headers=h), "unknown shared memory region"),
    ]
    for call, needle in cases:
        with pytest.raises(InferenceServerException) as ei:
            call()
        assert needle in ei.value.message(), ei.value.message()
        assert "/dev/shm" not in ei.value.message()  # no path the caller did not send
    tc.register_system_shared_memory("a", key, 64, headers=h)
    with pytest.raises(InferenceServerException) as ei:
        tc.register_system_shared_memory("a", key, 64, headers=h)
    assert ei.value.status() == "409"
    # Slices past the region, sizes that disagree with the input.
    for size, off, needle in ((64, 8, "outside"), (32, 0, "disagrees"), (128, 0, "disagrees")):
        i = httpclient.InferInput("x", [16], "FP32")
        i.set_shared_memory("a", size, offset=off)
        with pytest.raises(InferenceServerException) as ei:
            tc.infer(name, [i], headers=h)
        assert ei.value.status() == "400" and needle in ei.value.message(), ei.value.message()
    o = httpclient.InferRequestedOutput("y")
    o.set_shared_memory("a", 32)  # y needs 64 bytes
    i = httpclient.InferInput("x", [16], "FP32")
    i.set_shared_memory("a", 64)
    with pytest.raises(InferenceServerException) as ei:
        tc.infer(name, [i], outputs=[o], headers=h)
    assert "shared_memory_byte_size is 32" in ei.value.message()
    # The object shrinks after registration: a 400, not a crash.
    os.truncate("/dev/shm" + key, 16)
    with pytest.raises(InferenceServerException) as ei:
        tc.infer(name, [i], headers=h)
    assert ei.value.status() == "400" and "smaller" in ei.value.message()
    assert srv.alive()
    tc.unregister_system_shared_memory(headers=h)


def test_malformed_register_bodies(srv):
    url = srv.url + "/v2/systemsharedmemory/region/r/register"
    h = hdr("alice")
    for body in (b"{", b"[]", b'{"key": 1, "byte_size": 8}', b'{"key": "/x"}', b'{"key": "/x", "byte_size": -1}',
                 b'{"key": "/x", "byte_size": 8, "offset": "0"}', b'{"key": "/x", "byte_size": 8, "extra": 1}'):
        r = requests.post(url, data=body, headers=h, timeout=10)
        assert r.status_code == 400 and isinstance(r.json()["error"], str), (body, r.text)
    assert requests.post(url, data=b'{"key": "/x", "byte_size": 8}', timeout=10).status_code == 401


def test_another_tenants_region_is_unknown(tc, srv, region):
    key, hd = region(64)
    tc.register_system_shared_memory("mine", key, 64, headers=hdr("alice"))
    b = hdr("bob")
    assert tc.get_system_shared_memory_status(headers=b) == []
    with pytest.raises(InferenceServerException) as ei:
        tc.get_system_shared_memory_status(region_name="mine", headers=b)
    assert ei.value.status() == "404"
    name = model_name()
    capture(srv.url, affine_program(16), name, headers=b)
    i = httpclient.InferInput("x", [16], "FP32")
    i.set_shared_memory("mine", 64)
    with pytest.raises(InferenceServerException) as ei:
        tc.infer(name, [i], headers=b)
    assert "unknown shared memory region 'mine'" in ei.value.message()
    # bob cannot take alice's key while she holds it, and his unregister does not touch hers.
    with pytest.raises(InferenceServerException) as ei:
        tc.register_system_shared_memory("his", key, 64, headers=b)
    assert "cannot be registered" in ei.value.message()
    tc.unregister_system_shared_memory(headers=b)
    assert [r["name"] for r in tc.get_system_shared_memory_status(headers=hdr("alice"))] == ["mine"]
    tc.unregister_system_shared_memory(headers=hdr("alice"))
