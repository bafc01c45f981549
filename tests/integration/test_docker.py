"""docker/ against the project (issue 18): the Dockerfile, the compose file,
the Prometheus config and alert rules, and the Grafana dashboard must agree
with each other, with CMakeLists.txt and with what a running server exports.
Docker itself is not needed (nor run): the files are checked statically, the
metric names against the real binary, the rules with promtool and a real
Prometheus (Debian's package; skipped, saying so, where it is absent)."""

import fnmatch
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest
import requests
import yaml

from conftest import REPO
from test_dashboard import DASHBOARD, PROGRAM, dashboard_exprs, exported_names, free_port, query

DOCKER = os.path.join(REPO, "docker")
DOCKERFILE = os.path.join(DOCKER, "Dockerfile")
COMPOSE = os.path.join(DOCKER, "compose.yaml")
PROM_CONFIG = os.path.join(DOCKER, "prometheus", "prometheus.yml")
ALERTS = os.path.join(DOCKER, "prometheus", "alerts.yml")
METRIC_RE = re.compile(r"\b((?:tensord|process)_[a-zA-Z0-9_]+)\b")

# libboost-dev (the distribution's default Boost) per base image release:
# what `apt-get install libboost-dev` gives the Dockerfile's build stage.
UBUNTU_BOOST = {"ubuntu22.04": "1.74", "ubuntu24.04": "1.83", "ubuntu25.04": "1.83"}


def read(path):
    with open(path) as f:
        return f.read()


def load_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)


def version(text):
    return tuple(int(x) for x in text.split("."))


def dockerfile_arg(name):
    m = re.search(r'^ARG %s="?([^"\n]+)"?$' % name, read(DOCKERFILE), re.M)
    assert m, "Dockerfile has no ARG %s" % name
    return m.group(1)


def cmake_cache_default(name):
    m = re.search(r'^set\(%s "?([^" )]*)"? CACHE' % name, read(os.path.join(REPO, "CMakeLists.txt")), re.M)
    assert m, "CMakeLists.txt sets no cache variable %s" % name
    return m.group(1)


def alert_rules():
    rules = []
    for g in load_yaml(ALERTS)["groups"]:
        rules += g["rules"]
    return rules


# ------------------------------------------------------------ static

def test_compose_paths_exist_and_match_the_image():
    compose = load_yaml(COMPOSE)
    svc = compose["services"]
    build = svc["tensord"]["build"]
    context = os.path.normpath(os.path.join(DOCKER, build["context"]))
    assert context == REPO, "the build context must be the repository root"
    assert os.path.isfile(os.path.join(context, build["dockerfile"]))
    mounts = {}
    for name, s in svc.items():
        for v in s.get("volumes", []):
            src, dst = v.split(":")[:2]
            mounts[dst] = (name, src)
            if src.startswith("."):
                assert os.path.exists(os.path.join(DOCKER, src)), "%s mounts missing %s" % (name, src)
            else:
                assert src in compose["volumes"], "%s: named volume %s is not declared" % (name, src)
    docker = read(DOCKERFILE)
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", docker, re.M).group(1))
    config = cmd[cmd.index("--config") + 1]
    state = cmd[cmd.index("--state-dir") + 1]
    port = cmd[cmd.index("--listen") + 1].rsplit(":", 1)[1]
    assert mounts[config] == ("tensord", "./config.example.json")
    assert mounts[state][0] == "tensord" and not mounts[state][1].startswith("."), "state: a named volume"
    assert "EXPOSE %s" % port in docker
    assert any(p.endswith(":" + port) for p in svc["tensord"]["ports"])
    # Prometheus reads the config and the rules where compose puts them.
    prom_cmd = " ".join(svc["prometheus"]["command"])
    prom_cfg = re.search(r"--config.file=(\S+)", prom_cmd).group(1)
    assert mounts[prom_cfg] == ("prometheus", "./prometheus/prometheus.yml")
    for rf in load_yaml(PROM_CONFIG)["rule_files"]:
        assert not os.path.isabs(rf), "rule files relative to prometheus.yml work in both places"
        assert os.path.isfile(os.path.join(os.path.dirname(PROM_CONFIG), rf)), rf
        assert mounts[os.path.join(os.path.dirname(prom_cfg), rf)][0] == "prometheus", rf
    # The scrape target is the tensord service on the server's port.
    targets = [t for sc in load_yaml(PROM_CONFIG)["scrape_configs"] for st in sc["static_configs"]
               for t in st["targets"]]
    assert targets == ["tensord:%s" % port]
    # Grafana: the datasource is the prometheus service, dashboards where provisioning looks.
    ds = load_yaml(os.path.join(DOCKER, "grafana", "provisioning", "datasources", "prometheus.yaml"))
    assert ds["datasources"][0]["url"] == "http://prometheus:9090"
    assert any(p.endswith(":9090") for p in svc["prometheus"]["ports"])
    prov = load_yaml(os.path.join(DOCKER, "grafana", "provisioning", "dashboards", "tensord.yaml"))
    assert mounts[prov["providers"][0]["options"]["path"]] == ("grafana", "./grafana/dashboards")


def test_state_dir_is_created_and_owned_by_the_servers_user():
    docker = read(DOCKERFILE)
    runtime = docker[docker.index("AS runtime"):]
    state = json.loads(re.search(r"^CMD (\[.*\])$", docker, re.M).group(1))
    state = state[state.index("--state-dir") + 1]
    user = re.search(r"^USER (\S+)$", runtime, re.M).group(1)
    assert user != "root"
    assert re.search(r"useradd [^\n]*\b%s\b" % user, runtime)
    mk = re.search(r"mkdir -p [^\n&]*%s" % re.escape(state), runtime)
    own = re.search(r"chown -R %s:%s (\S+)" % (user, user), runtime)
    assert mk, "the runtime stage does not create %s" % state
    assert own and (state + "/").startswith(own.group(1).rstrip("/") + "/"), "%s is not chowned to %s" % (state, user)
    assert runtime.index(own.group(0)) < runtime.index("USER " + user), "chown must run before USER"


def test_boost_requirement_is_a_range_the_image_and_ci_satisfy():
    cmake = read(os.path.join(REPO, "CMakeLists.txt"))
    assert not re.search(r"find_package\(Boost \$\{TENSORD_BOOST_MIN\}[^)]*EXACT", cmake)
    assert re.search(r"find_package\(Boost \$\{TENSORD_BOOST_MIN\} REQUIRED\)", cmake)
    lo, hi = version(cmake_cache_default("TENSORD_BOOST_MIN")), version(cmake_cache_default("TENSORD_BOOST_MAX"))
    assert cmake_cache_default("TENSORD_BOOST_VERSION") == "", "no exact pin by default"
    assert lo < hi
    ubuntu = dockerfile_arg("UBUNTU")
    assert ubuntu in UBUNTU_BOOST, "unknown base image %s: add its libboost-dev version" % ubuntu
    assert "libboost-dev" in read(DOCKERFILE), "the image installs the distribution's default Boost"
    image = version(UBUNTU_BOOST[ubuntu])
    assert lo <= image < hi, "the image's Boost %s is outside [%s, %s)" % (image, lo, hi)
    hdr = "/usr/include/boost/version.hpp"
    if os.path.exists(hdr):
        here = version(re.search(r'BOOST_LIB_VERSION "([0-9_]+)"', read(hdr)).group(1).replace("_", "."))
        assert lo <= here < hi, "this machine's Boost %s is outside the range" % (here,)


def test_image_build_flags_and_cuda_architectures():
    docker = read(DOCKERFILE)
    configure = re.search(r"RUN cmake --preset release(.*?)&&", docker, re.S).group(1)
    assert "-DTENSORD_WERROR=OFF" in configure
    assert "CMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" in configure
    archs = dockerfile_arg("CUDA_ARCHITECTURES").split(";")
    nums = {int(re.match(r"\d+", a).group(0)) for a in archs}
    # Data-center and workstation GPUs: A100, A10/A40, L4/L40S, H100/H200, B200, RTX PRO Blackwell.
    assert {80, 86, 89, 90, 100, 120} <= nums, archs
    assert any(a.endswith("-virtual") or "-" not in a for a in archs), "PTX for later GPUs"
    # The C++ unit test checks the runtime decision over the same list.
    unit = read(os.path.join(REPO, "tests", "unit", "ops", "cuda_arch_test.cpp"))
    assert 'kImage = "%s"' % ";".join(archs) in unit
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc:
        print("nvcc not installed: not checking the list against nvcc --list-gpu-arch")
        return
    known = set(subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60).stdout.split())
    for n in nums:
        assert "compute_%d" % n in known, "nvcc here does not know compute_%d" % n


def test_dockerignore_keeps_build_dirs_out():
    path = os.path.join(REPO, ".dockerignore")
    pats = [l.strip() for l in read(path).splitlines() if l.strip() and not l.startswith("#")]

    def ignored(rel):
        return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(rel.split("/")[0], p) for p in pats)

    for rel in ("build", "build-asan", "build-debug/CMakeCache.txt", ".git", "api/__pycache__",
                "clients/python/examples/quickstart.nbconvert.ipynb"):
        assert ignored(rel), "%s reaches the image's build context" % rel
    # What the image's build needs still goes in.
    for rel in ("CMakeLists.txt", "CMakePresets.json", "api/kserve_json.cpp", "server/main.cpp", "ops/cuda/cuda_backend.cu"):
        assert os.path.exists(os.path.join(REPO, rel)) and not ignored(rel), rel
    for d in os.listdir(REPO):
        if os.path.isfile(os.path.join(REPO, d, "CMakeLists.txt")) and d not in ("build",) and not d.startswith("build"):
            assert not ignored(d), "the source folder %s is ignored" % d


# ------------------------------------------------------------ against a server

def test_alert_and_dashboard_metrics_are_exported(server):
    r = requests.post(server.url + "/v1/run", json={"program": PROGRAM}, timeout=30)
    assert r.status_code == 200, r.text
    assert requests.post(server.url + "/v1/checkpoint", timeout=30).status_code == 200
    exported = exported_names(requests.get(server.url + "/metrics", timeout=10).text)
    rules = alert_rules()
    names = {r["alert"] for r in rules}
    assert {"TensordDown", "TensordHigh5xxRate", "TensordQueueSaturated", "TensordCheckpointFailing"} <= names
    used = set(METRIC_RE.findall(" ".join(r["expr"] for r in rules)))
    used |= set(METRIC_RE.findall(" ".join(dashboard_exprs(json.load(open(DASHBOARD))))))
    assert "tensord_checkpoints_total" in used and "tensord_partition_workqueue_limit" in used
    missing = sorted(used - exported)
    assert not missing, "alerts or dashboard use metrics /metrics does not export: %s" % missing
    # Label values the rules filter on are the ones the server writes.
    text = requests.get(server.url + "/metrics", timeout=10).text
    assert re.search(r'^tensord_checkpoints_total\{result="error"', text, re.M)
    assert re.search(r'^tensord_http_requests_total\{code="\d{3}"', text, re.M)
    for r in rules:
        assert r["annotations"]["summary"] and r["labels"]["severity"] in ("warning", "critical"), r["alert"]


def test_promtool_checks_the_rules_and_the_config():
    promtool = shutil.which("promtool")
    if not promtool:
        print("promtool not installed (Debian package prometheus): skipping")
        pytest.skip("promtool not installed (Debian package prometheus)")
    for args in (["check", "rules", ALERTS], ["check", "config", PROM_CONFIG]):
        out = subprocess.run([promtool] + args, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
    out = subprocess.run([promtool, "check", "config", PROM_CONFIG], capture_output=True, text=True, timeout=60)
    assert "1 rule files found" in out.stdout + out.stderr


def test_real_prometheus_evaluates_every_rule(server):
    binary = shutil.which("prometheus")
    if not binary:
        print("prometheus not installed (Debian package prometheus): skipping")
        pytest.skip("prometheus not installed (Debian package prometheus)")
    tmp = tempfile.mkdtemp(prefix="tensord-prom-rules-")
    shutil.copy(ALERTS, os.path.join(tmp, "alerts.yml"))
    cfg = load_yaml(PROM_CONFIG)
    cfg["global"]["evaluation_interval"] = "1s"
    cfg["global"]["scrape_interval"] = "1s"
    cfg["scrape_configs"][0]["static_configs"] = [{"targets": ["%s:%d" % (server.host, server.port)]}]
    with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
        yaml.safe_dump(cfg, f)
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    log = open(os.path.join(tmp, "prometheus.log"), "w+")
    proc = subprocess.Popen([binary, "--config.file=" + os.path.join(tmp, "prometheus.yml"),
                             "--storage.tsdb.path=" + os.path.join(tmp, "data"),
                             "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        rules = []
        while time.time() < deadline:
            assert proc.poll() is None, "prometheus exited: %s" % open(log.name).read()[-2000:]
            try:
                groups = requests.get(base + "/api/v1/rules", timeout=5).json()["data"]["groups"]
                rules = [r for g in groups for r in g["rules"]]
                if rules and all(r.get("lastEvaluation", "").startswith("20") for r in rules) and \
                        query(base, 'up{job="tensord"}'):
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        assert len(rules) == len(alert_rules()), rules
        bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
        assert not bad, "rules that do not evaluate: %s" % bad
        # The server is up: TensordDown is not firing (its expression selects nothing).
        up = query(base, 'up{job="tensord"}')
        assert up and up[0]["value"][1] == "1"
        assert not query(base, 'up{job="tensord"} == 0')
    finally:
        proc.kill()
        proc.wait(10)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
