"""The client type-checks under ``mypy --strict`` (API.md 12; it ships
py.typed), with build/tools-venv's mypy (scripts/install-pytools.sh), from
the repository root as users' tools see it and with the package's own
configuration (clients/python/pyproject.toml)."""

import os
import subprocess

import pytest

from conftest import CLIENT_PATH, REPO

MYPY = os.path.join(REPO, "build", "tools-venv", "bin", "mypy")


@pytest.mark.parametrize("how", ["strict-flag", "package-config"])
def test_mypy_strict_is_clean(how, tmp_path):
    if not os.access(MYPY, os.X_OK):
        why = "%s is not there (make pytools: scripts/install-pytools.sh)" % MYPY
        print("skipping: " + why)
        pytest.skip(why)
    cache = ["--cache-dir", str(tmp_path / "mypy-cache")]
    if how == "strict-flag":
        cmd, cwd = [MYPY, "--strict"] + cache + [os.path.join("clients", "python", "tensord")], REPO
    else:
        cmd, cwd = [MYPY] + cache + ["tensord"], CLIENT_PATH
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.stdout.startswith("Success: no issues found in"), proc.stdout
    n = int(proc.stdout.split(" in ")[1].split()[0])
    assert n == len([f for f in os.listdir(os.path.join(CLIENT_PATH, "tensord")) if f.endswith(".py")])
