"""The package as pyproject.toml declares it (API.md 12): numpy, requests and
websocket-client required with lower bounds, torch and tqdm extras that
``import tensord`` never imports, a clear error naming the extra where torch
is needed, Graph in its own module, no import circle inside the package."""

import ast
import os
import subprocess
import sys
import textwrap

import pytest

import tensord

PACKAGE = os.path.dirname(os.path.abspath(tensord.__file__))
CLIENT_PATH = os.path.dirname(PACKAGE)


def run_python(code):
    """Runs ``code`` in a fresh interpreter (this one) that imports this checkout's tensord."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env["PYTHONPATH"] = CLIENT_PATH
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=CLIENT_PATH)
    assert proc.returncode == 0, "exit %d\n%s\n%s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


# ---------------------------------------------------------------- pyproject.toml

def project():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        print("skipping: tomllib needs Python 3.11")
        pytest.skip("tomllib needs Python 3.11")
    with open(os.path.join(CLIENT_PATH, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def split_requirement(req):
    for op in (">=", "==", "~=", "<=", "!=", "<", ">"):
        if op in req:
            name, _, rest = req.partition(op)
            return name.strip(), op, rest.strip()
    return req.strip(), "", ""


def test_dependencies_are_lower_bounds_and_torch_tqdm_are_extras():
    proj = project()
    deps = dict((n, (op, v)) for n, op, v in map(split_requirement, proj["dependencies"]))
    assert set(deps) == {"numpy", "requests", "websocket-client"}, deps
    for name, (op, version) in deps.items():
        assert op == ">=" and version, "%s: a lower bound, not %r (a library)" % (name, op + version)
    assert deps["numpy"][1].startswith("1."), "numpy 1.24 (Debian 12) is supported: the bound must admit it"
    extras = proj["optional-dependencies"]
    assert [split_requirement(r)[0] for r in extras["torch"]] == ["torch"]
    assert [split_requirement(r)[0] for r in extras["progress"]] == ["tqdm"]
    for reqs in extras.values():
        assert all(split_requirement(r)[1] == ">=" for r in reqs), reqs
    assert "Typing :: Typed" in proj["classifiers"]
    assert os.path.isfile(os.path.join(PACKAGE, "py.typed"))


# ---------------------------------------------------------------- optional torch and tqdm

BLOCK_EXTRAS = '''
import importlib.abc, sys

class NoExtras(importlib.abc.MetaPathFinder):
    """As if torch and tqdm were not installed."""
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "tqdm"):
            raise ImportError("No module named %r (blocked by the test)" % name)
        return None

sys.meta_path.insert(0, NoExtras())
'''


def test_import_works_without_torch_and_tqdm():
    out = run_python(BLOCK_EXTRAS + '''
import pkgutil
import numpy as np
import tensord
for m in pkgutil.iter_modules(tensord.__path__):  # every module imports without them
    __import__("tensord." + m.name)
assert "torch" not in sys.modules and "tqdm" not in sys.modules

try:
    tensord.Client("http://127.0.0.1:9", as_torch=True)
except ImportError as e:
    msg = str(e)
else:
    raise AssertionError("as_torch=True without torch did not raise")
assert "tensord[torch]" in msg and "PyTorch" in msg, msg
try:
    tensord._torch.from_host(np.ones(2, np.float32))  # a torch result asked for per call
except ImportError as e:
    assert "tensord[torch]" in str(e), e
else:
    raise AssertionError("from_host without torch did not raise")

from tensord import jobs
assert jobs._tqdm() is None  # progress falls back to a plain line
c = tensord.Client("http://127.0.0.1:9")  # numpy in, numpy out: torch is never needed
assert tensord.safetensors.decode(tensord.safetensors.encode({"x": np.arange(3.0)}))[0]["x"].tolist() == [0, 1, 2]
print("OK", msg)
''')
    assert out.startswith("OK ")


def test_import_does_not_load_torch_even_when_installed():
    out = run_python('''
import sys
import tensord
print("torch" in sys.modules, "tqdm" in sys.modules)
''')
    assert out.split() == ["False", "False"]


# ---------------------------------------------------------------- modules

def module_imports(path):
    """The package modules a module imports when it is imported (its top-level
    ``from . import x`` / ``from .x import y``; imports inside functions are lazy)."""
    tree = ast.parse(open(path).read(), path)
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
    return found


def package_graph():
    names = {f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py") and f != "__init__.py"}
    graph = {n: module_imports(os.path.join(PACKAGE, n + ".py")) & names for n in names}
    return graph


def test_no_import_circle_inside_the_package():
    graph = package_graph()
    assert "client" in graph and "jobs" in graph and "_wire" in graph
    done, path = set(), []

    def visit(n):
        if n in path:
            raise AssertionError("import circle: %s" % " -> ".join(path[path.index(n):] + [n]))
        if n in done:
            return
        path.append(n)
        for m in sorted(graph[n]):
            visit(m)
        path.pop()
        done.add(n)

    for n in sorted(graph):
        visit(n)
    assert "client" not in graph["jobs"] and "client" not in graph["_wire"] and "jobs" not in graph["_wire"]
    assert graph["graph"] <= {"errors"}, graph["graph"]


def test_graph_has_its_own_module():
    import tensord.graph
    import tensord.program
    assert tensord.Graph is tensord.graph.Graph and tensord.Graph.__module__ == "tensord.graph"
    assert tensord.program.Graph is tensord.Graph  # where it lived before, still importable
    assert tensord.from_json_tensor is tensord._wire.from_json_tensor
