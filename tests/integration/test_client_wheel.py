"""The client the way users install it (API.md 12): a wheel built with PyPA's
``build`` (build/tools-venv), installed into a fresh plain venv (no system
site packages) whose pip resolves numpy, requests and websocket-client from
PyPI (pip's cache reused), then imported from outside the repository and
used against the real server, with neither torch nor tqdm installed.

Needs build/tools-venv (scripts/install-pytools.sh), /usr/bin/python3's venv
module and PyPI; without them it skips, saying why.
"""

import json
import os
import shutil
import subprocess
import textwrap
import urllib.request
import zipfile

import pytest

from conftest import CLIENT_PATH, REPO

TOOLS_PY = os.path.join(REPO, "build", "tools-venv", "bin", "python")
SYSTEM_PY = "/usr/bin/python3"


def skip(why):
    print("skipping: " + why)
    pytest.skip(why)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PIP_NO_INDEX", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def pypi_reachable():
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    try:
        with urllib.request.urlopen(index + "/numpy/", timeout=20) as resp:
            return resp.status == 200, index
    except OSError as e:
        return False, "%s: %s" % (index, e)


def run(cmd, timeout, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=kw.pop("env", clean_env()), **kw)
    assert proc.returncode == 0, "%s failed (exit %d):\n%s\n%s" % (
        " ".join(cmd), proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:])
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel PyPA's build makes of a copy of clients/python (nothing is written into the checkout)."""
    if not os.access(TOOLS_PY, os.X_OK):
        skip("%s is not there (make pytools: scripts/install-pytools.sh)" % TOOLS_PY)
    if subprocess.run([TOOLS_PY, "-c", "import build"], capture_output=True, timeout=60).returncode != 0:
        skip("build/tools-venv has no PyPA build module")
    ok, where = pypi_reachable()
    if not ok:
        skip("PyPI is not reachable (%s): the isolated build and the plain venv need it" % where)
    root = tmp_path_factory.mktemp("client-wheel")
    src = root / "src"
    shutil.copytree(CLIENT_PATH, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    out = root / "dist"
    run([TOOLS_PY, "-m", "build", "--wheel", "--outdir", str(out), str(src)], timeout=600, cwd=str(root))
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    print("wheel: %s, %d bytes" % (wheels[0].name, wheels[0].stat().st_size))
    return wheels[0]


@pytest.fixture(scope="module")
def venv(wheel):
    """(python of a fresh plain venv with the wheel installed from PyPI's dependencies, a work dir)."""
    root = wheel.parent.parent
    env_dir = root / "venv"
    proc = subprocess.run([SYSTEM_PY, "-m", "venv", str(env_dir)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        skip("cannot create a venv with %s (Debian: apt-get install python3-venv): %s"
             % (SYSTEM_PY, (proc.stderr or proc.stdout).strip()[-500:]))
    py = str(env_dir / "bin" / "python")
    with open(env_dir / "pyvenv.cfg") as f:
        assert "include-system-site-packages = false" in f.read()
    run([py, "-m", "pip", "install", str(wheel)], timeout=900, cwd=str(root))
    work = root / "work"
    work.mkdir()
    return py, str(work)


def test_the_wheel_holds_the_typed_package_and_its_requirements(wheel):
    assert wheel.name.startswith("tensord-") and wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = z.read(meta_name).decode()
    pkg = sorted(n for n in names if n.startswith("tensord/"))
    want = sorted("tensord/" + f for f in os.listdir(os.path.join(CLIENT_PATH, "tensord"))
                  if f.endswith(".py") or f == "py.typed")
    assert pkg == want, "the wheel's package differs from the source: %s" % sorted(set(pkg) ^ set(want))
    assert not [n for n in names if n.startswith("tests/")], "the client's tests are not part of the wheel"
    requires = sorted(line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:"))
    plain = [r for r in requires if ";" not in r]
    assert sorted(r.split(">=")[0] for r in plain) == ["numpy", "requests", "websocket-client"], requires
    specs = [r.split(";")[0] for r in requires]
    assert all(">=" in r and "==" not in r for r in specs), requires  # lower bounds, not pins
    assert any(r.startswith("torch>=") and 'extra == "torch"' in r for r in requires), requires
    assert any(r.startswith("tqdm>=") and 'extra == "progress"' in r for r in requires), requires
    assert "Classifier: Typing :: Typed" in meta


def test_a_plain_venv_gets_the_dependencies_from_pypi_and_no_extras(venv):
    py, work = venv
    listed = json.loads(run([py, "-m", "pip", "list", "--format", "json"], timeout=120, cwd=work))
    have = {p["name"].lower(): p["version"] for p in listed}
    for dep in ("tensord", "numpy", "requests", "websocket-client"):
        assert dep in have, "%s not installed: %s" % (dep, sorted(have))
    assert "torch" not in have and "tqdm" not in have, sorted(have)
    assert int(have["numpy"].split(".")[0]) >= 2, "PyPI's numpy today is 2.x, got %s" % have["numpy"]


SCRIPT = r'''
import os, sys
import numpy as np
import tensord

here = os.path.dirname(os.path.abspath(tensord.__file__))
assert here.startswith(sys.prefix + os.sep) and "site-packages" in here, here
assert not here.startswith(os.environ["REPO"] + os.sep), here
assert os.path.isfile(os.path.join(here, "py.typed"))
assert "torch" not in sys.modules and "tqdm" not in sys.modules

c = tensord.Client(os.environ["TENSORD_URL"])
assert c.health()
x = np.arange(6, dtype=np.float32).reshape(2, 3)
c.put("wheel/x", x)
np.testing.assert_array_equal(c.get("wheel/x"), x)
p = c.program()
a = p.input("a", "float32", [2, 3])
p.output(p.add(p.mul(a, 2.0), "$stored/wheel/x"))
out = c.run(p.build(), inputs={"a": np.ones((2, 3), np.float32)})
np.testing.assert_array_equal(next(iter(out.values())), 2.0 + x)
job = c.submit(p.build(), inputs={"a": x})
assert job.wait(timeout=60, progress=True) == "succeeded"    # no tqdm: a plain line on stderr
np.testing.assert_array_equal(next(iter(job.result().values())), 3.0 * x)
with c.capture(p.build()) as g:
    np.testing.assert_array_equal(next(iter(g.replay(a=x).values())), 3.0 * x)
try:
    c.get("wheel/missing")
except tensord.NotFound as e:
    assert e.status == 404 and e.code == "not_found"
else:
    raise AssertionError("no NotFound")
try:
    tensord.Client(os.environ["TENSORD_URL"], as_torch=True)
except ImportError as e:
    assert "tensord[torch]" in str(e), e
else:
    raise AssertionError("as_torch=True without torch did not raise")
c.delete("wheel/x")
print("OK numpy", np.__version__)
'''


def test_the_installed_wheel_talks_to_the_server(venv, server):
    py, work = venv
    script = os.path.join(work, "use_wheel.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent(SCRIPT))
    out = run([py, script], timeout=300, cwd=work, env=clean_env(TENSORD_URL=server.url, REPO=REPO))
    assert out.startswith("OK numpy 2."), out
