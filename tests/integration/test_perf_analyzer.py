"""Triton's perf_analyzer (the perf-analyzer wheel from PyPI, installed by
scripts/install-pytools.sh as build/venv/bin/perf_analyzer) against the real
binary (API.md 11.1): it reads the model's metadata and configuration, sends
binary infer requests with Expect and Inference-Header-Content-Length, and
reads the statistics extension before and after each window to show the
server-side breakdown. Skips, saying why, where the tool is not installed."""

import csv
import os
import subprocess
import tempfile

import pytest
import requests

from conftest import REPO, server_with_config, tenants_config
from test_kserve import affine_program, capture, model_name

PERF_ANALYZER = os.environ.get("TENSORD_PERF_ANALYZER", os.path.join(REPO, "build", "venv", "bin", "perf_analyzer"))
TOKEN = "perf-analyzer-token"

pytestmark = pytest.mark.skipif(not os.access(PERF_ANALYZER, os.X_OK),
                                reason="perf_analyzer not installed at %s (scripts/install-pytools.sh)" % PERF_ANALYZER)


@pytest.fixture(scope="module")
def srv():
    cfg = tenants_config({"pa": TOKEN})
    with server_with_config(cfg, "perf-analyzer") as s:
        yield s


def run_pa(url, model, *extra, timeout=240):
    out_csv = tempfile.mktemp(prefix="tensord-pa-", suffix=".csv")
    cmd = [PERF_ANALYZER, "-m", model, "-u", url.split("://", 1)[1], "-i", "http",
           "-H", "Authorization: Bearer " + TOKEN, "--measurement-mode", "count_windows",
           "--measurement-request-count", "200", "--stability-percentage", "100", "--max-trials", "10",
           "-f", out_csv, "--verbose-csv"] + list(extra)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, text=True)
    rows = []
    if os.path.exists(out_csv):
        with open(out_csv) as f:
            rows = list(csv.DictReader(f))
        os.unlink(out_csv)
    return p.returncode, p.stdout, rows


def stats(url, model):
    r = requests.get("%s/v2/models/%s/stats" % (url, model), headers={"Authorization": "Bearer " + TOKEN}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["model_stats"][0]


def test_perf_analyzer_runs_to_completion_with_the_server_breakdown(srv):
    name = model_name()
    capture(srv.url, affine_program(64), name, headers={"Authorization": "Bearer " + TOKEN})
    before = stats(srv.url, name)
    rc, out, rows = run_pa(srv.url, name)
    print(out)
    assert rc == 0, out
    assert "Throughput:" in out and "infer/sec" in out, out
    # The server-side section appears only when /v2 lists "statistics" and the stats route answers.
    assert "Server:" in out and "compute infer" in out and "queue" in out, out
    assert len(rows) == 1, rows
    row = rows[0]
    assert float(row["Inferences/Second"]) > 0
    for col in ("Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output"):
        assert col in row, row
    after = stats(srv.url, name)
    done = after["inference_count"] - before["inference_count"]
    assert done >= 200, (before, after)  # at least one window's requests, all counted by the server
    assert after["inference_stats"]["fail"]["count"] == before["inference_stats"]["fail"]["count"]


def test_perf_analyzer_concurrency_and_async(srv):
    name = model_name()
    capture(srv.url, affine_program(4), name, headers={"Authorization": "Bearer " + TOKEN})
    rc, out, rows = run_pa(srv.url, name, "--concurrency-range", "2", "--async")
    assert rc == 0, out
    assert "Concurrency: 2" in out and "Server:" in out, out


def test_perf_analyzer_reports_an_unknown_model(srv):
    rc, out, _ = run_pa(srv.url, "no-such-model", timeout=60)
    assert rc != 0
    assert "unknown model 'no-such-model'" in out, out
