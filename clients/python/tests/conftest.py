"""The client's own tests: no tensord server needed (the server-backed ones
are tests/integration/test_client_*.py), but for test_mx_torch_export.py,
which needs torch.export from PyPI's torch and starts build/tensord itself.

They test the package in this checkout (clients/python goes first on
sys.path), under whichever interpreter runs pytest: the project runs them
under Debian's numpy 1.24 (build/venv) and PyPI's numpy 2.x
(build/tools-venv), see tests/integration/test_client_suite.py.
"""

import http.server
import os
import sys
import threading

import numpy as np
import pytest

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


@pytest.fixture
def torch():
    """torch, for the tests that take it; a skip saying why where this
    interpreter has none (the project runs the suite with and without)."""
    try:
        import torch as module
    except ImportError:
        print("skipping: torch is not importable by this interpreter")
        pytest.skip("torch is not importable by this interpreter")
    return module


@pytest.fixture
def local_http():
    """start(handler_class, **attributes) -> a threaded http.server on
    127.0.0.1 with the attributes set and .url; each is shut down after the
    test (the fake servers of the transport tests)."""
    started = []

    def start(handler, **attributes):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        for k, v in attributes.items():
            setattr(srv, k, v)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        srv.url = "http://127.0.0.1:%d" % srv.server_address[1]
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()
