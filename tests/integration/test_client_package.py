"""The Python client as a user gets it (API.md 12): a venv with Debian's
packages visible, ``pip install --no-index --no-build-isolation`` of a copy of
clients/python, and client code run by that venv's python from outside the
repository against real servers.

Each test runs a script in the venv (cwd: a temp dir; the script first
checks that ``tensord`` is the installed copy, not the repository's) that
asserts what it checks and prints ``OK``; the test asserts it exited 0.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import CLIENT_PATH, REPO, Server, _stop_and_check
from test_tenancy import sha, write_config


# ---------------------------------------------------------------- the venv

@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """(python of a venv with clients/python installed offline, its site-packages, a work dir)."""
    root = tmp_path_factory.mktemp("client-venv")
    env_dir = root / "venv"
    proc = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        why = "cannot create a venv with %s (Debian: apt-get install python3-venv): %s" % (
            sys.executable, (proc.stderr or proc.stdout).strip()[-500:])
        print("skipping: " + why)
        pytest.skip(why)
    py = str(env_dir / "bin" / "python")
    if subprocess.run([py, "-m", "pip", "--version"], capture_output=True, timeout=120).returncode != 0:
        why = "the venv has no pip (Debian: python3-venv brings ensurepip's wheels)"
        print("skipping: " + why)
        pytest.skip(why)
    # Install from a copy of the folder alone: it must build offline from nothing else
    # (and pip's in-tree build leaves nothing in the repository).
    src = root / "src"
    shutil.copytree(CLIENT_PATH, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = clean_env()
    proc = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-cache-dir",
                           str(src)], capture_output=True, text=True, timeout=600, cwd=str(root), env=env)
    assert proc.returncode == 0, "pip install failed:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-3000:])
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, timeout=60, env=env).stdout.strip()
    work = root / "work"
    work.mkdir()
    return py, site, str(work)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env.update(extra)
    return env


PRELUDE = r'''
import json, os, sys, threading, time
import numpy as np
import tensord

assert os.path.dirname(os.path.abspath(tensord.__file__)) == os.path.join(os.environ["EXPECT_SITE"], "tensord"), \
    "imported %s, not the installed copy" % tensord.__file__
assert not os.path.abspath(tensord.__file__).startswith(os.environ["REPO"] + os.sep)
URL = os.environ["TENSORD_URL"]


def f32(shape):
    return {"dtype": "float32", "shape": list(shape)}


def sub(inputs, nodes, outputs):
    return {"inputs": inputs, "nodes": nodes, "outputs": outputs}


# A while_loop of n trips (i += 1, x *= 1.5): a job as long as we like.
CARRIES = {"i": {"dtype": "int64", "shape": []}, "x": f32([3]), "n": {"dtype": "int64", "shape": []}}
LOOP = {"inputs": CARRIES, "outputs": ["i2"], "nodes": [{
    "id": "loop", "op": "while_loop", "args": ["i", "x", "n"], "outputs": ["i2", "x2", "n2"],
    "kwargs": {"max_iters": 10 ** 12},
    "cond": sub(CARRIES, [{"id": "c", "op": "lt", "args": ["i", "n"], "outputs": ["b"]}], ["b"]),
    "body": sub(CARRIES, [{"id": "a", "op": "add", "args": ["i", 1], "outputs": ["j"]},
                          {"id": "m", "op": "mul", "args": ["x", 1.5], "outputs": ["y"]}], ["j", "y", "n"])}]}


def loop_inputs(n):
    return {"i": np.array(0), "x": np.ones(3, np.float32), "n": np.array(int(n))}


def trips_for(c, seconds):
    """Trips of LOOP that take about `seconds` on this server (its run_ms, the
    faster of two runs of at least 0.3 s: a busy machine gives longer runs)."""
    n = 20000
    while True:
        c.run(LOOP, inputs=loop_inputs(n))
        dt = c.last_job["run_ms"] / 1e3
        if dt > 0.3:
            c.run(LOOP, inputs=loop_inputs(n))
            dt = min(dt, c.last_job["run_ms"] / 1e3)
            return int(n * seconds / dt)
        n *= 4


def wait_state(job, states, timeout=30):
    end = time.time() + timeout
    while job.status() not in states:
        assert time.time() < end, "job %s never reached %s" % (job, states)
        time.sleep(0.01)


def metric(url, name, **labels):
    text = tensord.Client(url).metrics()
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{"):
            lab = line[len(name) + 1:line.index("}")]
            if all(('%s="%s"' % kv) in lab.split(",") for kv in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
    return total
'''


def run_script(venv, body, timeout=300, **env_extra):
    py, site, work = venv
    env = clean_env(EXPECT_SITE=site, REPO=REPO, **env_extra)
    code = PRELUDE + "\n" + textwrap.dedent(body) + "\nprint('OK')\n"
    proc = subprocess.run([py, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("OK"), \
        "client script failed (rc %s):\n--- stdout\n%s\n--- stderr\n%s" % (proc.returncode, proc.stdout[-4000:],
                                                                          proc.stderr[-8000:])
    return proc


# ---------------------------------------------------------------- tests

def test_installed_from_the_folder_alone(venv):
    py, site, work = venv
    proc = run_script(venv, """
        import importlib.metadata as md
        assert md.version("tensord") == tensord.__version__
        reqs = " ".join(md.requires("tensord"))
        assert "numpy" in reqs and "requests" in reqs, reqs
        assert os.path.isfile(os.path.join(os.path.dirname(tensord.__file__), "py.typed"))
        assert "torch" not in sys.modules, "importing tensord must not import torch"
        for name in ("QueueFull", "QuotaExceeded", "NotFound", "ShapeMismatch", "DtypeMismatch", "InvalidProgram",
                     "BadRequest", "DeadlineExceeded", "Cancelled", "Unavailable", "Unauthenticated", "UnknownOp",
                     "Forbidden", "Conflict", "PayloadTooLarge", "InvalidArgument", "NumericalError", "Internal"):
            assert issubclass(getattr(tensord, name), tensord.TensordError), name
    """, TENSORD_URL="http://unused")
    assert proc.returncode == 0
    # the install put nothing into the repository
    assert not os.path.exists(os.path.join(CLIENT_PATH, "tensord.egg-info")) or \
        subprocess.run(["git", "-C", REPO, "check-ignore", "-q", "clients/python/tensord.egg-info"]).returncode == 0


def test_torch_in_and_out(venv, server):
    run_script(venv, """
        import torch
        c = tensord.Client(URL)
        prog = {"nodes": [{"id": "m", "op": "mul", "args": ["x", 2], "outputs": ["y"]},
                          {"id": "s", "op": "sum", "args": ["x"], "outputs": ["t"]}], "outputs": ["y", "t"]}

        # float32 with requires_grad, not contiguous: results are torch, no grad
        x = torch.arange(12, dtype=torch.float32).reshape(3, 4).requires_grad_()
        out = c.run(prog, inputs={"x": x.t()})
        assert isinstance(out["y"], torch.Tensor) and out["y"].dtype == torch.float32, out
        assert not out["y"].requires_grad
        assert torch.equal(out["y"], x.detach().t() * 2) and out["t"].item() == 66.0
        out["y"][0, 0] = 5.0  # writable

        # bfloat16 in, bfloat16 out, bit for bit
        b = torch.tensor([[1.5, -2.25], [3.0, 1e-3]], dtype=torch.bfloat16, requires_grad=True)
        yb = c.run(prog, inputs={"x": b})["y"]
        assert yb.dtype == torch.bfloat16 and torch.equal(yb, b.detach() * 2), yb

        # stored bfloat16 from torch: numpy side sees TensorData, as_torch sees torch
        c.put("pkg/bf", b)
        got = c.get("pkg/bf")
        assert isinstance(got, tensord.TensorData) and got.dtype_name == "bfloat16"
        assert got.bits.tolist() == b.detach().view(torch.int16).numpy().view(np.uint16).tolist()
        tb = c.get("pkg/bf", as_torch=True)
        assert tb.dtype == torch.bfloat16 and torch.equal(tb, b.detach())
        ct = tensord.Client(URL, as_torch=True)
        assert isinstance(ct.get("pkg/bf"), torch.Tensor)
        n = ct.run(prog, inputs={"x": np.ones(2, np.float32)})["y"]
        assert isinstance(n, torch.Tensor)
        # numpy in, numpy out (as before)
        y = c.run(prog, inputs={"x": np.ones(2, np.float32)})["y"]
        assert isinstance(y, np.ndarray)
        c.delete("pkg/bf")

        # every dtype the server has round-trips from torch
        for dt in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                   torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128):
            v = (torch.arange(6) % 3).to(dt).reshape(2, 3)
            c.put("pkg/d", v.t())
            back = c.get("pkg/d", as_torch=True)
            assert back.dtype == dt and torch.equal(back, v.t()), (dt, back)
        c.delete("pkg/d")

        # eigh: a named tuple, as torch.linalg.eigh
        a = torch.randn(5, 6, 6, dtype=torch.float64)
        a = a + a.transpose(-1, -2)
        res = c.eigh(a)
        assert isinstance(res, tuple) and type(res).__name__ == "EighResult"
        assert res._fields == ("eigenvalues", "eigenvectors")
        ref = torch.linalg.eigh(a)
        assert torch.allclose(res.eigenvalues, ref.eigenvalues, atol=1e-10)
        w, v = res
        assert torch.allclose(a @ v, v * w.unsqueeze(-2), atol=1e-9)
        wn = c.eigh(a.numpy()).eigenvalues
        assert isinstance(wn, np.ndarray)
    """, TENSORD_URL=server.url)


def test_submit_wait_result_cancel(venv, server):
    proc = run_script(venv, """
        c = tensord.Client(URL)
        n = trips_for(c, 1.5)

        job = c.submit(LOOP, inputs=loop_inputs(n))
        assert isinstance(job, tensord.Job) and job.id
        assert job.status() in ("queued", "running", "succeeded")
        assert job.wait(timeout=0.05) in ("queued", "running")  # returns at the timeout
        try:
            job.result(timeout=0.05)
            raise AssertionError("result() before the end")
        except TimeoutError:
            pass
        assert job.wait(progress=True) == "succeeded"
        assert job.status() == "succeeded" and job.done()
        out = job.result()
        assert int(out["i2"]) == n, out
        assert c.last_job and c.last_job["id"] == job.id

        # the same job seen by polling alone, and through another handle
        j2 = c.submit(LOOP, inputs=loop_inputs(1000))
        assert j2.wait(stream=False) == "succeeded" and int(c.job(j2.id).result()["i2"]) == 1000

        # cancel a long one
        long = c.submit(LOOP, inputs=loop_inputs(10 ** 11))
        wait_state(long, ("running",))
        long.cancel()
        assert long.wait(timeout=30) == "cancelled"
        try:
            long.result()
            raise AssertionError("a cancelled job has no result")
        except tensord.Cancelled as e:
            assert e.code == "cancelled" and e.status == 499, e

        # a failed job raises its typed error, with the node
        bad = {"nodes": [{"id": "bad", "op": "linalg.eigh", "args": ["x"], "outputs": ["w", "v"]}], "outputs": ["w"]}
        j = c.submit(bad, inputs={"x": np.array([[1.0, np.nan], [np.nan, 1.0]])})
        try:
            j.result()
            raise AssertionError("no error")
        except tensord.NumericalError as e:
            assert e.node == "bad" and e.status == 422 and e.code == "numerical_error"
        assert j.status() == "failed"

        # torch in, torch out through a job too
        import torch
        tj = c.submit({"nodes": [{"id": "m", "op": "mul", "args": ["x", 3], "outputs": ["y"]}], "outputs": ["y"]},
                      inputs={"x": torch.ones(4, dtype=torch.bfloat16)})
        y = tj.result()["y"]
        assert y.dtype == torch.bfloat16 and y.tolist() == [3.0] * 4
    """, TENSORD_URL=server.url)
    assert "job " in proc.stderr, proc.stderr  # the progress bar


def test_local_casts_give_the_servers_bits(venv, server):
    """float8 (saturating), bfloat16, float16 and float -> int conversions done by the
    client are bit for bit the server's `to` op, over random float32 bit patterns
    (NaN payloads, infinities, subnormals, overflow) and float64 values."""
    run_script(venv, """
        from tensord import dtypes
        c = tensord.Client(URL)
        rng = np.random.default_rng(0)
        bits = rng.integers(0, 2 ** 32, 100000, dtype=np.uint64).astype(np.uint32)
        specials = [448, 464, 480, 1e9, -1e9, np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 57344, 61440, 1.5,
                    2.0 ** -127, 1.5 * 2.0 ** -126, 2.0 ** -149, 65520, -65504]
        x32 = np.concatenate([bits.view(np.float32), np.array(specials, np.float32),
                              (rng.standard_normal(10000) * 100).astype(np.float32)])
        x64 = np.concatenate([rng.standard_normal(10000) * 10.0 ** rng.integers(-6, 12, 10000),
                              [1 + 2.0 ** -11 + 2.0 ** -40, np.nan, np.inf, -1.5, 2.5, 1e30]])

        def server_cast(x, name):
            prog = {"inputs": {"x": {"dtype": tensord.dtype_name(x.dtype), "shape": [len(x)]}},
                    "nodes": [{"id": "t", "op": "to", "args": ["x"], "kwargs": {"dtype": name}, "outputs": ["y"]}],
                    "outputs": ["y"]}
            y = c.run(prog, inputs={"x": x})["y"]
            return y.bits if isinstance(y, tensord.TensorData) else y.view(np.uint8)

        for x in (x32, x64):
            for name in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "bfloat16", "float16", "int8", "uint8",
                         "int32", "int64"):
                if x is x32 and name.startswith(("int", "uint")):
                    continue
                want = server_cast(x, name)
                got = tensord.safetensors.host_value(x, name)
                got = got.bits if isinstance(got, tensord.TensorData) else got.view(np.uint8)
                bad = np.nonzero(got != want)[0]
                assert bad.size == 0, (name, x.dtype, "differing bytes at", bad[:8].tolist())
        # and the saturation itself, seen from the server's side
        assert server_cast(np.array([1e4, -np.inf], np.float32), "float8_e4m3fn").tolist() == [0x7E, 0xFE]
    """, TENSORD_URL=server.url)


@pytest.fixture(scope="module")
def tiny_server():
    """Tenant "tiny": max_queued 1, max_running 1 on a limit-1 partition; "root" is admin."""
    cfg = {
        "partitions": [{"name": "one", "share": 0.5, "workqueue_limit": 1},
                       {"name": "other", "share": 0.5, "workqueue_limit": 2}],
        "tenants": [{"name": "tiny", "token_sha256": sha("tiny-token"), "partition": "one",
                     "max_queued": 1, "max_running": 1},
                    {"name": "root", "token_sha256": sha("root-token"), "partition": "other", "admin": True}],
    }
    path = write_config(cfg)
    srv = Server(["--config", path], name="client-tiny")
    yield srv
    _stop_and_check(srv)
    os.unlink(path)


def test_retries_turn_429_into_success(venv, tiny_server):
    run_script(venv, """
        c = tensord.Client(URL, token="tiny-token", retries=0)
        n = trips_for(c, 2.0)
        small = {"nodes": [{"id": "a", "op": "add", "args": ["x", 1], "outputs": ["y"]}], "outputs": ["y"]}
        x = np.arange(3, dtype=np.float32)

        blocker = c.submit(LOOP, inputs=loop_inputs(n))      # runs
        wait_state(blocker, ("running",))
        queued = c.submit(LOOP, inputs=loop_inputs(n // 4))  # waits: the queue is full now

        # retries=0: the first 429 raises, with what the server said
        try:
            c.run(small, inputs={"x": x})
            raise AssertionError("expected 429")
        except tensord.QueueFull as e:
            assert e.status == 429 and e.code == "queue_full", e
            assert isinstance(e.retry_after, float) and 1 <= e.retry_after <= 60, e.retry_after
            assert e.request_id and e.request_id == c.last_request_id, (e.request_id, c.last_request_id)
        try:
            c.submit(small, inputs={"x": x})
            raise AssertionError("expected 429")
        except tensord.QueueFull:
            pass

        # retries: the same call waits Retry-After between tries and succeeds
        before = metric(URL, "tensord_http_requests_total", route="/v1/run", code="429")
        patient = tensord.Client(URL, token="tiny-token", retries=30)
        t0 = time.time()
        out = patient.run(small, inputs={"x": x})
        took = time.time() - t0
        assert np.array_equal(out["y"], x + 1), out
        after = metric(URL, "tensord_http_requests_total", route="/v1/run", code="429")
        assert after - before >= 1, (before, after)   # it did meet 429s...
        assert took >= 0.9, took                       # ...and waited Retry-After
        assert blocker.wait(60) == "succeeded" and queued.wait(60) == "succeeded"
    """, TENSORD_URL=tiny_server.url)


def test_a_deadline_outlives_the_client_timeout(venv, server):
    run_script(venv, """
        c = tensord.Client(URL)
        n = trips_for(c, 4.0)
        short = tensord.Client(URL, timeout=1)
        t0 = time.time()
        try:
            short.run(LOOP, inputs=loop_inputs(n))
            raise AssertionError("a ~4 s run within a 1 s read timeout (took %.1f s)" % (time.time() - t0))
        except tensord.ClientTimeout as e:
            assert isinstance(e, tensord.TransportError) and e.status == 0
        waited = time.time() - t0
        assert 0.9 < waited < 3.5, waited
        # with a deadline the same client waits for the answer, past its timeout
        t0 = time.time()
        out = short.run(LOOP, inputs=loop_inputs(n), deadline_ms=120000)
        took = time.time() - t0
        assert int(out["i2"]) == n, out
        assert took > 1.2 and short.last_job["run_ms"] > 1000, (took, short.last_job)
    """, TENSORD_URL=server.url)


def test_typed_errors_with_their_fields(venv, server):
    run_script(venv, """
        c = tensord.Client(URL)
        def expect(cls, fn, **fields):
            try:
                fn()
            except cls as e:
                assert type(e) is cls, (type(e), cls)
                assert isinstance(e, tensord.TensordError)
                for k, v in fields.items():
                    assert getattr(e, k) == v, (cls.__name__, k, getattr(e, k), v)
                assert e.request_id, e
                assert e.retry_after is None
                return e
            raise AssertionError("no %s" % cls.__name__)

        add = {"inputs": {"a": f32([2, 3]), "b": f32([4])},
               "nodes": [{"id": "n3", "op": "add", "args": ["a", "b"], "outputs": ["y"]}], "outputs": ["y"]}
        e = expect(tensord.ShapeMismatch, lambda: c.run(add, inputs={"a": np.zeros((2, 3), np.float32),
                                                                     "b": np.zeros(4, np.float32)}),
                   status=422, code="shape_mismatch", node="n3")
        assert e.request_id == c.last_request_id
        e = expect(tensord.UnknownOp, lambda: c.run({"nodes": [{"id": "q", "op": "matmull", "args": [], "outputs": ["y"]}],
                                                     "outputs": ["y"]}), status=404, code="unknown_op")
        assert "matmul" in e.message
        expect(tensord.InvalidProgram, lambda: c.run({"nodes": [{"id": "n", "op": "neg", "args": ["nope"],
                                                                 "outputs": ["y"]}], "outputs": ["y"]}),
               status=400, code="invalid_program")
        expect(tensord.NotFound, lambda: c.get("pkg/no/such"), status=404, code="not_found")
        expect(tensord.NotFound, lambda: c.job("job-does-not-exist"), status=404)
        expect(tensord.DeadlineExceeded, lambda: c.run(LOOP, inputs=loop_inputs(10 ** 11), deadline_ms=200),
               status=504, code="deadline_exceeded")
        try:
            c.run({"inputs": {"a": {"dtype": "int64", "shape": [2]}},
                   "nodes": [{"id": "mn", "op": "mean", "args": ["a"], "outputs": ["y"]}], "outputs": ["y"]},
                  inputs={"a": np.array([1, 2])})
            raise AssertionError("mean of int64")
        except (tensord.InvalidArgument, tensord.DtypeMismatch) as e:
            assert e.status == 422 and e.node == "mn" and e.code in ("invalid_argument", "dtype_mismatch")
        expect(tensord.BadRequest, lambda: c.run({"nodes": "not a list", "outputs": []}), status=400, code="bad_request")

        # a captured graph: Conflict on other shapes; a context manager that deletes it
        p = c.program()
        xv = p.input("x", "float", [4])            # "float" is float32, as the server reads it
        p.output(p.mul(xv, 3.0))
        with c.capture(p) as g:
            y = list(g.replay(x=np.ones(4, np.float32)).values())[0]
            assert y.dtype == np.float32 and y.tolist() == [3.0] * 4
            expect(tensord.Conflict, lambda: g.replay(x=np.ones(5, np.float32)), status=409, code="conflict")
        expect(tensord.NotFound, lambda: c.graph(g.id), status=404)
        try:
            with c.capture(p) as g2:
                raise KeyError("inside")
        except KeyError:
            pass
        expect(tensord.NotFound, lambda: c.graph(g2.id), status=404)

        # one client shared by threads
        errors = []
        def worker(k):
            try:
                for i in range(10):
                    v = np.full(8, k * 100 + i, np.float32)
                    assert np.array_equal(c.run({"nodes": [{"id": "a", "op": "add", "args": ["x", 1], "outputs": ["y"]}],
                                                 "outputs": ["y"]}, inputs={"x": v})["y"], v + 1)
            except Exception as e:
                errors.append(repr(e))
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        [t.start() for t in ts]
        [t.join(120) for t in ts]
        assert not errors, errors
    """, TENSORD_URL=server.url)


def test_auth_errors_are_typed(venv, tiny_server):
    run_script(venv, """
        try:
            tensord.Client(URL, token="wrong").info()
            raise AssertionError("no 401")
        except tensord.Unauthenticated as e:
            assert e.status == 401 and e.code == "unauthenticated" and e.request_id
        c = tensord.Client(URL, token="tiny-token")
        try:
            c._request("GET", "/v1/admin/tenants")
            raise AssertionError("no 403")
        except tensord.Forbidden as e:
            assert e.status == 403 and e.code == "forbidden"
        admin = tensord.Client(URL, token="root-token")
        assert [t for t in admin._request("GET", "/v1/admin/tenants").json()["tenants"] if t["name"] == "tiny"]
    """, TENSORD_URL=tiny_server.url)
