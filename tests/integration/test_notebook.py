"""Execute every example notebook headlessly against the test server.

Each notebook reads TENSORD_URL, asserts what it shows, and prints "done"
in its last cell; a notebook added to clients/python/examples without a
case here fails test_every_notebook_is_run.
"""

import glob
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import CLIENT_PATH

EXAMPLES = os.path.join(CLIENT_PATH, "examples")
NOTEBOOKS = ["quickstart.ipynb", "graphs_control_flow.ipynb", "training.ipynb", "jobs_and_stream.ipynb",
             "errors.ipynb"]
# text each notebook must print besides "done" (what it is about happened)
EXPECT = {
    "quickstart.ipynb": ["EighResult", "max residual"],
    "graphs_control_flow.ipynb": ["replays: 4", "trips, x =", "per call, end to end"],
    "training.ipynb": ["loss:", "state: ['exp_avg', 'exp_avg_sq', 'step']"],
    "jobs_and_stream.ipynb": ["succeeded trips:", "result() raised Cancelled cancelled 499", "latest metrics snapshot"],
    "errors.ipynb": ["ShapeMismatch", "node=n3", "UnknownOp", "DeadlineExceeded", "ClientTimeout", "Cancelled",
                     "BadRequest", "TransportError"],
}


def _nbconvert_cmd():
    try:
        import nbconvert  # noqa: F401
        import ipykernel  # noqa: F401
    except ImportError as e:
        return None, "nbconvert/ipykernel not importable by %s: %s" % (sys.executable, e)
    return [sys.executable, "-m", "nbconvert"], None


def test_every_notebook_is_run():
    found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(EXAMPLES, "*.ipynb")))
    assert found == sorted(NOTEBOOKS), "notebooks in %s: %s; cases here: %s" % (EXAMPLES, found, NOTEBOOKS)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook(server, tmp_path, name):
    cmd, why = _nbconvert_cmd()
    if cmd is None:
        print("skipping: " + why)
        pytest.skip(why)
    out = tmp_path / name.replace(".ipynb", ".out.ipynb")
    env = dict(os.environ, TENSORD_URL=server.url, TENSORD_CLIENT_PATH=CLIENT_PATH)
    # run the kernel with the same interpreter as the tests (it has numpy and requests)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(cmd + ["--to", "notebook", "--execute", "--ExecutePreprocessor.kernel_name=python3",
                                 "--ExecutePreprocessor.timeout=300", "--output", str(out),
                                 os.path.join(EXAMPLES, name)],
                          cwd=EXAMPLES, env=env, capture_output=True, text=True, timeout=600)
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    assert proc.returncode == 0, "nbconvert failed:\n%s\n%s" % (ansi.sub("", proc.stdout[-4000:]),
                                                                ansi.sub("", proc.stderr)[-6000:])
    nb = json.loads(out.read_text())
    errors = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []))
    last = "".join("".join(o.get("text", "")) for o in nb["cells"][-1].get("outputs", []))
    assert "done" in last, last
    for needle in EXPECT[name]:
        assert needle in text, "%s: %r not in the outputs:\n%s" % (name, needle, text[-3000:])
