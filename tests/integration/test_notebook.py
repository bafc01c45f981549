"""Execute the quickstart notebook headlessly against the test server."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import CLIENT_PATH

NOTEBOOK = os.path.join(CLIENT_PATH, "examples", "quickstart.ipynb")


def _nbconvert_cmd():
    try:
        import nbconvert  # noqa: F401
        import ipykernel  # noqa: F401
    except ImportError as e:
        return None, "nbconvert/ipykernel not importable by %s: %s" % (sys.executable, e)
    return [sys.executable, "-m", "nbconvert"], None


def test_quickstart_notebook(server, tmp_path):
    cmd, why = _nbconvert_cmd()
    if cmd is None:
        print("skipping: " + why)
        pytest.skip(why)
    out = tmp_path / "quickstart.out.ipynb"
    env = dict(os.environ, TENSORD_URL=server.url, TENSORD_CLIENT_PATH=CLIENT_PATH)
    # run the kernel with the same interpreter as the tests (it has numpy and requests)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(cmd + ["--to", "notebook", "--execute", "--ExecutePreprocessor.kernel_name=python3",
                                 "--ExecutePreprocessor.timeout=300", "--output", str(out), NOTEBOOK],
                          cwd=os.path.dirname(NOTEBOOK), env=env, capture_output=True, text=True, timeout=600)
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    assert proc.returncode == 0, "nbconvert failed:\n%s\n%s" % (ansi.sub("", proc.stdout[-4000:]),
                                                                ansi.sub("", proc.stderr)[-6000:])
    nb = json.loads(out.read_text())
    errors = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []))
    assert "done" in text
