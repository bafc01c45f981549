"""The client's own tests (clients/python/tests, no server needed) under both
of the project's Python stacks (API.md 12: numpy 1.24 and 2.x):

- build/venv: Debian's python3 and packages (numpy 1.24, torch),
- build/tools-venv: a plain venv from PyPI (numpy 2.x, no torch),
- build/torch-venv: torch 2.15, torchao, ml-dtypes and safetensors from
  PyPI (scripts/install-torch.sh): the MX interop tests
  (test_mx_torchao.py, test_mx_torch_export.py) must run there, none
  skipped.

Each runs pytest in its own interpreter, as a subprocess; a stack that is
not there (scripts/install-pytools.sh and install-torch.sh make them)
skips, saying why.
"""

import os
import re
import subprocess

import pytest

from conftest import CLIENT_PATH, REPO

STACKS = {
    # name: (interpreter, the numpy major version it must have)
    "debian-numpy1": (os.path.join(REPO, "build", "venv", "bin", "python"), 1),
    "pypi-numpy2": (os.path.join(REPO, "build", "tools-venv", "bin", "python"), 2),
    "torch-2.15": (os.path.join(REPO, "build", "torch-venv", "bin", "python"), 2),
}
# The stack whose packages the MX interop tests need: none of them may skip there.
FULL_STACK = "torch-2.15"


def skip(why):
    print("skipping: " + why)
    pytest.skip(why)


def clean_env():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_client_tests_pass_under(stack):
    py, numpy_major = STACKS[stack]
    if not os.access(py, os.X_OK):
        skip("%s is not there (make pytools / make torch-venv: scripts/install-pytools.sh, install-torch.sh)" % py)
    probe = subprocess.run([py, "-c", "import numpy, pytest; print(numpy.__version__)"], capture_output=True,
                           text=True, timeout=120, env=clean_env())
    if probe.returncode != 0:
        skip("%s cannot import numpy and pytest: %s" % (py, probe.stderr.strip()[-300:]))
    version = probe.stdout.strip()
    assert int(version.split(".")[0]) == numpy_major, "%s has numpy %s, not %d.x" % (py, version, numpy_major)
    proc = subprocess.run([py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests"],
                          capture_output=True, text=True, timeout=900, cwd=CLIENT_PATH, env=clean_env())
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    print("clients/python/tests under %s (numpy %s):\n%s" % (py, version, proc.stdout[-1500:]))
    assert proc.returncode == 0, tail
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) >= 50, "fewer tests than the client has:\n" + tail
    assert "error" not in proc.stdout.splitlines()[-1], tail
    if stack == FULL_STACK:
        skipped = [line for line in proc.stdout.splitlines()
                   if line.startswith("SKIPPED") and ("test_mx_torchao" in line or "test_mx_torch_export" in line)]
        assert not skipped, "MX interop tests skipped where torchao is installed:\n" + "\n".join(skipped)
