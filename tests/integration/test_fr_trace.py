"""PyTorch's own flight-recorder analyzer over tensord's dumps (API.md 8).

Each case runs the real `python -m torch.distributed.flight_recorder.fr_trace`
(torch 2.15 in build/torch-venv, scripts/install-torch.sh) as a subprocess
over real dumps: the pickles `GET /v1/flight-recorder?rank=R&format=pickle`
answers, saved as <folder>/rank_<R>, and the files a collective timeout
leaves in <state-dir>/flight-recorder/. Healthy 2- and 4-rank runs match
every collective; a rank that skips a collective or sends another shape
(ranks whose loops run a different number of trips) and a collective that
timed out waiting for a rank are each named by the analyzer, with the group
and the seq.
"""

import json
import os
import pickle
import shutil
import subprocess
import tempfile
import time

import numpy as np
import pytest
import requests

from conftest import REPO, Server, _stop_and_check

TORCH_PY = os.path.join(REPO, "build", "torch-venv", "bin", "python")
PREFIX = "rank_"
SANITIZED = os.environ.get("TENSORD_SANITIZED") == "1"

if not os.access(TORCH_PY, os.X_OK):
    reason = "%s is absent: run scripts/install-torch.sh for torch 2.15's fr_trace" % TORCH_PY
    print("test_fr_trace: skipped: " + reason)
    pytest.skip(reason, allow_module_level=True)


def enc(a):
    a = np.asarray(a)
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": a.reshape(-1).tolist()}


def node(nid, opname, args, out, **kwargs):
    n = {"id": nid, "op": opname, "args": args, "outputs": [out] if out else []}
    if kwargs:
        n["kwargs"] = kwargs
    return n


def run(url, nodes, outputs, inputs, ranks, program_inputs=None):
    program = {"nodes": nodes, "outputs": outputs}
    if program_inputs:
        program["inputs"] = program_inputs
    body = {"program": program, "inputs": inputs, "ranks": ranks}
    return requests.post(url + "/v1/run", json=body, timeout=120)


def fr_trace(folder, *extra):
    """fr_trace's exit code and its output (its logger writes to stderr)."""
    p = subprocess.run([TORCH_PY, "-m", "torch.distributed.flight_recorder.fr_trace", folder, "--prefix", PREFIX]
                       + list(extra), capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def load_db(path):
    """The analyzer's -o output: (types, Database), its namedtuples from torch."""
    code = ("import pickle, sys, json\n"
            "types, db = pickle.load(open(sys.argv[1], 'rb'))\n"
            "print(json.dumps([[c.collective_seq_id, c.collective_name, c.pass_check, c.group_id,"
            " sorted(c.expected_ranks)] for c in db.collectives]))\n"
            "print(json.dumps([[g.id, g.desc, g.size] for g in db.groups]))\n"
            "print(len(db.ncclcalls))\n")
    p = subprocess.run([TORCH_PY, "-c", code, path], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    return json.loads(lines[0]), json.loads(lines[1]), int(lines[2])


def save_route_dumps(srv, ranks, folder):
    """The route's pickles, saved under the names fr_trace wants."""
    os.makedirs(folder, exist_ok=True)
    for g in ranks:
        r = requests.get(srv.url + "/v1/flight-recorder?rank=%d&format=pickle" % g)
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"] == "application/octet-stream"
        assert "rank_%d" % g in r.headers.get("Content-Disposition", "")
        d = pickle.loads(r.content)  # plain types only: loads without torch
        assert d["version"] == "2.10" and d["rank"] == g
        with open(os.path.join(folder, PREFIX + str(g)), "wb") as f:
            f.write(r.content)


def wait_settled(srv, ranks, count, timeout=10):
    """Until every rank has `count` entries, each retired (a survivor's
    entry may retire just after the answer)."""
    until = time.time() + timeout
    while True:
        dumps = [requests.get(srv.url + "/v1/flight-recorder?rank=%d" % g).json() for g in ranks]
        if all(len(d["entries"]) >= count and all(e["retired"] for e in d["entries"]) for d in dumps):
            return dumps
        if time.time() > until:
            return dumps
        time.sleep(0.05)


def ranks_of(n):
    return list(range(n))


@pytest.fixture
def folder():
    """A folder for the route's dumps (created by save_route_dumps), in a
    scratch folder that also takes fr_trace's -o output."""
    d = tempfile.mkdtemp(prefix="tensord-fr-")
    yield os.path.join(d, "dumps")
    shutil.rmtree(d, ignore_errors=True)


def healthy_program(R):
    x = np.arange(R * 2 * 3, dtype=np.float32).reshape(R * 2, 3)
    nodes = [node("a", "dist.all_reduce", ["x"], "a"),
             node("g", "dist.all_gather", ["a"], "g"),
             node("rs", "dist.reduce_scatter", ["x"], "rs"),
             node("b", "dist.broadcast", ["x"], "b", src=R - 1),
             node("t", "dist.all_to_all", ["x"], "t"),
             node("bar", "dist.barrier", [], None),
             node("a2", "dist.all_reduce", ["rs"], "a2", op="max")]
    names = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "barrier", "all_reduce"]
    return nodes, ["g", "b", "t", "a2"], {"x": enc(x)}, names


@pytest.mark.parametrize("R", [2, 4])
def test_a_healthy_run_matches_every_collective(R, folder):
    s = Server(["--ranks", str(R), "--collective-timeout", "30"], name="fr-healthy%d" % R)
    try:
        nodes, outs, inputs, names = healthy_program(R)
        for _ in range(2):
            r = run(s.url, nodes, outs, inputs, R)
            assert r.status_code == 200, r.text
        expected = [("world", n) for n in names] * 2
        if R == 4:
            # A subgroup in its own order, and the world again after it.
            r = run(s.url, [node("a", "dist.all_reduce", ["x"], "y"), node("g", "dist.all_gather", ["y"], "z")],
                    ["z"], {"x": enc(np.ones(3, np.float32))}, [3, 1])
            assert r.status_code == 200, r.text
            expected += [("ranks:3,1", "all_reduce"), ("ranks:3,1", "all_gather")]
        wait_settled(s, ranks_of(R), 2 * len(names))
        save_route_dumps(s, ranks_of(R), folder)
        out_db = os.path.join(os.path.dirname(folder), "db.pkl")
        rc, out = fr_trace(folder, "-o", out_db)
        assert rc == 0, out
        for bad in ("has errors", "Not all ranks", "MISMATCH", "mismatch", "Traceback", "cannot decide"):
            assert bad not in out, out
        collectives, groups, calls = load_db(out_db)
        assert all(c[2] for c in collectives), collectives  # pass_check
        got = [(c[3], c[1]) for c in collectives]
        # fr_trace names groups <name><hash of its ranks>; the collectives
        # of a group come in seq order.
        for gname in ("world", "ranks:3,1"):
            want = ["gloo:" + n for g, n in expected if g == gname]
            seen = [c[1] for c in collectives if c[3] == gname]
            assert seen == want, (gname, got)
            seqs = [c[0] for c in collectives if c[3] == gname]
            assert seqs == list(range(1, len(want) + 1)), (gname, seqs)
        assert len(collectives) == len(expected)
        assert sorted(set(c[4][0] for c in collectives if c[3] == "world")) == [0]
        assert all(c[4] == list(range(R)) for c in collectives if c[3] == "world")
        assert calls == sum(R if g == "world" else 2 for g, _ in expected)  # one per rank per collective
        assert {g[1] for g in groups} == ({"world"} if R == 2 else {"world", "ranks:3,1"}), groups
        # -j prints every rank's entries side by side.
        rc, out = fr_trace(folder, "-j")
        assert rc == 0, out
        assert out.count("all_reduce(") >= 4 * R, out
    finally:
        _stop_and_check(s)


I64 = {"dtype": "int64", "shape": []}
F32 = {"dtype": "float32"}


def uneven_loop(trips, after):
    """A while_loop of all_reduces whose trip count is each rank's own `n`,
    then `after`: the planner cannot see that the ranks part ways, so they
    meet at run time, at different collectives of the same seq."""
    loop = {"id": "w", "op": "while_loop", "args": ["i", "n", "x"], "outputs": ["i2", "n2", "x2"],
            "cond": {"inputs": {"i": I64, "n": I64, "x": F32}, "nodes": [node("c", "lt", ["i", "n"], "b")],
                     "outputs": ["b"]},
            "body": {"inputs": {"i": I64, "n": I64, "x": F32},
                     "nodes": [node("a", "add", ["i", 1], "j"), node("s", "dist.all_reduce", ["x"], "y")],
                     "outputs": ["j", "n", "y"]}}
    inputs = {"i": enc(np.array(0)), "n": {"per_rank": [enc(np.array(t)) for t in trips]},
              "x": enc(np.ones(2, np.float32))}
    return [loop] + after, inputs, {"i": I64, "n": I64, "x": F32}


AFTER = {
    # Rank 1 skips the loop's third all_reduce: its seq 3 is the all_gather.
    "skip": ([node("g", "dist.all_gather", ["x2"], "out")],
             "Expected collective type: 'all_reduce' does not match found collective type: 'all_gather'"),
    # Rank 1's seq 3 is an all_reduce of another shape.
    "shape": ([node("d", "cat", [["x2", "x2"]], "xx"), node("r", "dist.all_reduce", ["xx"], "out")],
              "Expected input sizes: '[[2]]' does not match found input sizes: '[[4]]'"),
}


@pytest.mark.parametrize("kind", sorted(AFTER))
def test_a_rank_that_skips_a_collective_or_sends_another_shape_is_named(kind, folder):
    R = 3
    s = Server(["--ranks", str(R), "--collective-timeout", "30"], name="fr-" + kind)
    try:
        after, message = AFTER[kind]
        nodes, inputs, program_inputs = uneven_loop([3, 2, 3], after)
        r = run(s.url, nodes, ["out"], inputs, R, program_inputs=program_inputs)
        assert r.status_code == 422, r.text  # the fingerprint exchange finds it, at once
        assert "seq 3" in r.json()["error"]["message"], r.text
        dumps = wait_settled(s, ranks_of(R), 3)
        assert [len(d["entries"]) for d in dumps] == [3, 3, 3], dumps
        save_route_dumps(s, ranks_of(R), folder)
        rc, out = fr_trace(folder)
        assert rc == 0, out
        # Seqs 1 and 2 matched; seq 3 is named, in the world group, rank 1
        # the culprit.
        assert "Collective sequence number: 3 has errors" in out, out
        for seq in (1, 2):
            assert "sequence number: %d " % seq not in out, out
        assert "group info: world:world" in out, out
        assert "collective: gloo:all_reduce" in out, out
        assert "Culprit rank 1;" in out and message in out, out
        assert "Culprit rank 0;" not in out and "Culprit rank 2;" not in out, out
    finally:
        _stop_and_check(s)


def test_a_timed_out_collective_names_the_missing_rank(folder):
    # Rank 1 leaves the loop after 2 trips, rank 0 goes on to a third
    # all_reduce and waits there until the collective timeout: the request
    # is 504 and the flight recorders land in the state dir.
    timeout_s = 10 if SANITIZED else 3
    s = Server(["--ranks", "2", "--collective-timeout", str(timeout_s)], name="fr-timeout")
    try:
        nodes, inputs, program_inputs = uneven_loop([3, 2], [])
        t0 = time.time()
        r = run(s.url, nodes, ["x2"], inputs, 2, program_inputs=program_inputs)
        assert r.status_code == 504, r.text
        assert time.time() - t0 < timeout_s + 30
        state = os.path.join(s.state_dir, "flight-recorder")
        until = time.time() + 10
        while time.time() < until and sorted(os.listdir(state) if os.path.isdir(state) else []) != ["rank_0", "rank_1"]:
            time.sleep(0.05)
        assert sorted(os.listdir(state)) == ["rank_0", "rank_1"], os.listdir(state)  # nothing else in the folder
        assert os.path.isfile(os.path.join(s.state_dir, "flight-recorder-rank0.json"))
        # The state dir's files, as they are.
        rc, out = fr_trace(state)
        assert rc == 0, out
        assert "Not all ranks joining collective, sequence number: 3" in out, out
        assert "missing ranks: {1}" in out, out
        assert "group info: world" in out, out
        assert "collective: gloo:all_reduce" in out, out
        # Without --prefix, fr_trace infers it from the folder's names.
        rc2, out2 = fr_trace_noprefix(state)
        assert rc2 == 0 and "missing ranks: {1}" in out2, out2
        # The route's pickles say the same.
        wait_settled(s, [0, 1], 2)
        save_route_dumps(s, [0, 1], folder)
        rc, out = fr_trace(folder)
        assert rc == 0 and "Not all ranks joining collective, sequence number: 3" in out, out
        assert "missing ranks: {1}" in out, out
    finally:
        _stop_and_check(s)


def fr_trace_noprefix(folder):
    p = subprocess.run([TORCH_PY, "-m", "torch.distributed.flight_recorder.fr_trace", folder],
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


@pytest.fixture(scope="module")
def two_ranks():
    s = Server(["--ranks", "2"], name="fr-route")
    yield s
    _stop_and_check(s)


@pytest.mark.parametrize("query,status", [
    ("format=pickle", 400),              # the pickle is one rank's file
    ("rank=0&format=yaml", 400),
    ("rank=0&format=", 400),
    ("rank=0&format=PICKLE", 400),
    ("rank=0&format=pickle%00", 400),
    ("rank=x&format=pickle", 400),
    ("rank=-1&format=pickle", 400),
    ("rank=9999999999&format=pickle", 400),
    ("rank=2&format=pickle", 404),       # not local
    ("format=json", 200),
    ("rank=1&format=json", 200),
])
def test_malformed_format_and_rank(two_ranks, query, status):
    r = requests.get(two_ranks.url + "/v1/flight-recorder?" + query)
    assert r.status_code == status, r.text
    if status != 200:
        err = r.json()["error"]
        assert err["code"] == ("not_found" if status == 404 else "bad_request") and err["message"], err
    else:
        assert r.headers["Content-Type"].startswith("application/json")
