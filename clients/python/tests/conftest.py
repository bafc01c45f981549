"""The client's own tests: no tensord server needed (the server-backed ones
are tests/integration/test_client_*.py).

They test the package in this checkout (clients/python goes first on
sys.path), under whichever interpreter runs pytest: the project runs them
under Debian's numpy 1.24 (build/venv) and PyPI's numpy 2.x
(build/tools-venv), see tests/integration/test_client_suite.py.
"""

import os
import sys

import numpy as np

CLIENT_PATH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if sys.path[:1] != [CLIENT_PATH]:
    sys.path.insert(0, CLIENT_PATH)

import tensord  # noqa: E402

assert os.path.dirname(os.path.abspath(tensord.__file__)) == os.path.join(CLIENT_PATH, "tensord"), \
    "testing %s, not this checkout's client" % tensord.__file__


def pytest_report_header(config):
    try:
        import torch
        have_torch = torch.__version__
    except ImportError:
        have_torch = "not installed"
    return "tensord client %s from %s; numpy %s, torch %s" % (
        tensord.__version__, os.path.dirname(tensord.__file__), np.__version__, have_torch)
