"""docker/: the Grafana dashboard and Prometheus config against the real
binary, and a real Prometheus (Debian's /usr/bin/prometheus) scraping it.
Docker itself is not needed: the files are checked statically."""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import REPO

DOCKER = os.path.join(REPO, "docker")
DASHBOARD = os.path.join(DOCKER, "grafana", "dashboards", "tensord.json")
PROM_CONFIG = os.path.join(DOCKER, "prometheus", "prometheus.yml")
METRIC_RE = re.compile(r"\b((?:tensord|process)_[a-zA-Z0-9_]+)\b")
PROGRAM = {"nodes": [{"id": "m", "op": "mul", "args": [{"dtype": "float32", "shape": [2], "data": [1, 2]}, 2.0],
                      "outputs": ["y"]}], "outputs": ["y"]}


def dashboard_exprs(dash):
    exprs = []
    for p in dash["panels"]:
        exprs += [t["expr"] for t in p.get("targets", [])]
    for v in dash["templating"]["list"]:
        q = v.get("query")
        if isinstance(q, dict):
            exprs.append(q["query"])
        elif v.get("type") == "query":
            exprs.append(q)
    return exprs


def exported_names(text):
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()[:4]
            names.add(name)
            if kind == "histogram":
                names |= {name + "_bucket", name + "_sum", name + "_count"}
            if kind == "summary":
                names |= {name + "_sum", name + "_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, 1)[0])
    return names


def test_dashboard_json_is_grafana_shaped():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    assert dash["uid"] == "tensord"
    names = {v["name"] for v in dash["templating"]["list"]}
    assert {"instance", "tenant", "partition"} <= names
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    exprs = " ".join(dashboard_exprs(dash))
    for needed in ("histogram_quantile(0.99", "_bucket", "rate(tensord_tenant_busy_seconds_total",
                   "tensord_partition_workqueue_limit", "tensord_tenant_memory_limit_bytes", "tensord_op_seconds"):
        assert needed in exprs, needed
    for p in dash["panels"]:
        for t in p["targets"]:
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]


def test_every_dashboard_metric_is_exported(server):
    r = requests.post(server.url + "/v1/run", json={"program": PROGRAM}, timeout=30)
    assert r.status_code == 200, r.text
    scrape = requests.get(server.url + "/metrics", timeout=10)
    assert scrape.status_code == 200
    exported = exported_names(scrape.text)
    with open(DASHBOARD) as f:
        used = set(METRIC_RE.findall(" ".join(dashboard_exprs(json.load(f)))))
    assert used, "no metric names found in the dashboard"
    missing = sorted(used - exported)
    assert not missing, "dashboard uses metrics /metrics does not export: %s" % missing


def test_provisioning_files_parse():
    for sub in ("datasources", "dashboards"):
        d = os.path.join(DOCKER, "grafana", "provisioning", sub)
        files = [f for f in os.listdir(d) if f.endswith(".yaml")]
        assert files, d
        for f in files:
            text = open(os.path.join(d, f)).read()
            assert text.startswith("apiVersion: 1"), f
    assert "tensord:8080" in open(PROM_CONFIG).read()
    docker = open(os.path.join(DOCKER, "Dockerfile")).read()
    assert "HEALTHCHECK" in docker and "/readyz" in docker and "USER tensord" in docker
    with open(os.path.join(DOCKER, "config.example.json")) as f:
        json.load(f)


def test_promtool_checks_the_scrape_config():
    promtool = shutil.which("promtool")
    if not promtool:
        print("promtool not installed (Debian package prometheus): skipping")
        pytest.skip("promtool not installed (Debian package prometheus)")
    out = subprocess.run([promtool, "check", "config", PROM_CONFIG], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_checks_the_scrape(server):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool not installed (Debian package prometheus)")
    text = requests.get(server.url + "/metrics", timeout=10).text
    out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


# ---------------------------------------------------------------- a real Prometheus

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def query(base, q):
    r = requests.get(base + "/api/v1/query", params={"query": q}, timeout=5)
    r.raise_for_status()
    body = r.json()
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_real_prometheus_scrapes_tensord(server):
    binary = shutil.which("prometheus") or ("/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)
    if not binary:
        print("prometheus not installed (Debian package prometheus): skipping")
        pytest.skip("prometheus not installed (Debian package prometheus)")
    tmp = tempfile.mkdtemp(prefix="tensord-prom-")
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: tensord\n    static_configs:\n"
                "      - targets: ['%s:%d']\n" % (server.host, server.port))
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    log = open(os.path.join(tmp, "prometheus.log"), "w+")
    proc = subprocess.Popen([binary, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, "data"),
                             "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        build = []
        while time.time() < deadline and not build:
            assert proc.poll() is None, "prometheus exited: %s" % open(log.name).read()[-2000:]
            try:
                build = query(base, "tensord_build_info")
            except requests.RequestException:
                pass
            if not build:
                time.sleep(0.5)
        assert build, "prometheus never scraped tensord_build_info; log:\n%s" % open(log.name).read()[-2000:]
        assert build[0]["metric"]["job"] == "tensord" and build[0]["value"][1] == "1"
        assert build[0]["metric"]["backend"] == "cpu"
        # Traffic to rate over, then rate() needs two scrapes inside the window.
        rate = []
        while time.time() < deadline and not rate:
            requests.get(server.url + "/v1/info", timeout=10)
            rate = query(base, 'sum(rate(tensord_http_requests_total{route="/v1/info"}[10s]))')
            if not rate:
                time.sleep(0.5)
        assert rate, "rate() over tensord_http_requests_total returned nothing"
        assert float(rate[0]["value"][1]) > 0
        q = query(base, "histogram_quantile(0.99, sum by (le) (rate(tensord_http_request_duration_seconds_bucket[10s])))")
        assert q and q[0]["value"][1] != "NaN"
    finally:
        proc.kill()
        proc.wait(10)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
