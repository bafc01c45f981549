"""deploy/kubernetes: every variant renders with kustomize (kubectl's), validates
against Kubernetes 1.34's schemas (kubernetes-validate, strict) and yamllint;
the server's flags in the rendered StatefulSets are flags of the real binary,
and the CPU variant's command line starts it; the alert rules are docker/'s;
the front proxy's haproxy.cfg, run by Debian's HAProxy in front of a real server,
sends every tenant to one home and answers 503 with Retry-After for a tenant
whose home is down. The tools come from the tools venv
(scripts/install-pytools.sh); a test without its tool skips, saying so."""
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest
import requests
import websocket
import yaml

from conftest import REPO, Server, _stop_and_check, server_binary
from front_proxy import FrontProxy, free_port

DEPLOY = os.path.join(REPO, "deploy", "kubernetes")
OVERLAYS = ["cpu", "gpu", "gpu-dra", "world", "autoscale"]
TOOLS = os.path.join(REPO, "build", "tools-venv", "bin")
K8S_VERSION = "1.34.0"
# The Prometheus Operator's kinds: CRDs, which kubernetes-validate has no schema for.
CRD_KINDS = {"PodMonitor", "PrometheusRule"}


def tool(name):
    path = os.path.join(TOOLS, name)
    if not os.access(path, os.X_OK):
        print("%s not in %s (make pytools installs it): skipping" % (name, TOOLS))
        pytest.skip("%s not installed (make pytools)" % name)
    return path


def render(overlay):
    out = subprocess.run([tool("kubectl"), "kustomize", os.path.join(DEPLOY, "overlays", overlay)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def docs(overlay):
    return [d for d in yaml.safe_load_all(render(overlay)) if d]


def server_container(resources):
    (sts,) = [d for d in resources if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "tensord"]
    (c,) = [c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "tensord"]
    return sts, c


def flag_pairs(args):
    """[(flag, value)] of a tensord command line (every flag takes one value)."""
    assert len(args) % 2 == 0, args
    pairs = list(zip(args[0::2], args[1::2]))
    for flag, value in pairs:
        assert flag.startswith("--"), (flag, args)
        assert not value.startswith("--"), (flag, value)
    return pairs


def help_flags():
    out = subprocess.run([server_binary(), "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", out.stdout, re.M))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_variant_validates_against_kubernetes_1_34(overlay):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(render(overlay))
        f.flush()
        out = subprocess.run([tool("kubernetes-validate"), "-k", K8S_VERSION, "--strict", f.name],
                             capture_output=True, text=True, timeout=300)
    lines = (out.stdout + out.stderr).splitlines()
    passed = [ln for ln in lines if " passed for resource " in ln]
    unknown = [ln for ln in lines if "Couldn't find schema for kind" in ln]
    print("%s: %d resources passed, CRDs not checked by schema: %d" % (overlay, len(passed), len(unknown)))
    assert out.returncode == 0, "\n".join(lines)
    for ln in unknown:
        assert any("kind %s " % k in ln for k in CRD_KINDS), ln
    assert len(passed) + len(unknown) == len(docs(overlay)), "\n".join(lines)


def test_yamllint_is_clean():
    out = subprocess.run([tool("yamllint"), "--strict", "-c", os.path.join(DEPLOY, ".yamllint"), DEPLOY],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_flag_is_one_the_server_has(overlay):
    known = help_flags()
    assert "--rank-offset" in known and "--state-dir" in known, known
    resources = docs(overlay)
    sts, c = server_container(resources)
    flags = dict(flag_pairs(c["args"]))
    assert set(flags) <= known, set(flags) - known
    # Draining (--drain-timeout) and the checkpoint at exit end before the kubelet's SIGKILL.
    assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > int(flags["--drain-timeout"])
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert mounts[claim["metadata"]["name"]] == flags["--state-dir"], "the state dir is the pod's volume"
    assert os.path.dirname(flags["--config"]) == mounts["config"]
    sc = sts["spec"]["template"]["spec"]["securityContext"]
    assert sc["runAsNonRoot"] and sc["runAsUser"] != 0
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    if overlay.startswith("gpu"):
        assert flags["--backend"] == "cuda"
        res = c["resources"]
        assert res.get("limits", {}).get("nvidia.com/gpu") == 1 or res.get("claims"), res
    if overlay == "world":
        assert flags["--rank-offset"] == "$(POD_INDEX)"
        env = {e["name"]: e for e in c["env"]}
        assert env["POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == \
            "metadata.labels['apps.kubernetes.io/pod-index']"
        assert int(flags["--world-size"]) == sts["spec"]["replicas"] * int(flags["--ranks"])
        host = re.match(r"redis://([^:]+):(\d+)$", flags["--rendezvous"])
        assert host, flags["--rendezvous"]
        services = {d["metadata"]["name"]: d for d in resources if d["kind"] == "Service"}
        assert int(host.group(2)) in [p["port"] for p in services[host.group(1)]["spec"]["ports"]]


def test_the_cpu_variant_command_line_starts_the_server():
    resources = docs("cpu")
    _, c = server_container(resources)
    (secret,) = [d for d in resources if d["kind"] == "Secret"]

    config = base64.b64decode(secret["data"]["config.json"])
    json.loads(config)  # the config the pods mount
    fd, cfg_path = tempfile.mkstemp(prefix="tensord-k8s-cfg-", suffix=".json")
    with os.fdopen(fd, "wb") as f:
        f.write(config)
    # The rendered flags as they are, but for the pod's paths and address:
    # the test's config copy, the fixture's own state dir and loopback port.
    args = []
    for flag, value in flag_pairs(c["args"]):
        if flag in ("--listen", "--state-dir"):
            continue
        args += [flag, cfg_path if flag == "--config" else value]
    srv = Server(args, name="k8s-cpu")
    try:
        assert requests.get(srv.url + "/readyz", timeout=10).status_code == 200
        r = requests.get(srv.url + "/v1/info", headers={"Authorization": "Bearer alice"}, timeout=10)
        assert r.status_code == 200, r.text
    finally:
        _stop_and_check(srv)
        os.unlink(cfg_path)


def test_the_alert_rules_are_dockers_and_promtool_accepts_them():
    (rule,) = [d for d in docs("cpu") if d["kind"] == "PrometheusRule"]
    with open(os.path.join(REPO, "docker", "prometheus", "alerts.yml")) as f:
        assert rule["spec"]["groups"] == yaml.safe_load(f)["groups"]
    (pm,) = [d for d in docs("cpu") if d["kind"] == "PodMonitor"]
    _, c = server_container(docs("cpu"))
    ports = [p["name"] for p in c["ports"]]
    assert [e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["http"] and "http" in ports
    promtool = shutil.which("promtool")
    if not promtool:
        print("promtool not installed (Debian package prometheus): skipping its check")
        pytest.skip("promtool not installed")
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        yaml.safe_dump({"groups": rule["spec"]["groups"]}, f)
        f.flush()
        out = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_front_proxy_sends_each_tenant_home_and_503s_a_dead_home():
    (cm,) = [d for d in docs("cpu") if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "tensord-front-proxy"]
    tokens = {"t%d" % i: "token-%d" % i for i in range(8)}
    cfg = {"partitions": [{"name": "p", "share": 1.0, "workqueue_limit": 4}],
           "tenants": [{"name": n, "token_sha256": hashlib.sha256(t.encode()).hexdigest(), "partition": "p"}
                       for n, t in tokens.items()]}
    fd, cfg_path = tempfile.mkstemp(prefix="tensord-k8s-cfg-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    srv = Server(["--config", cfg_path], name="k8s-home")
    dead = free_port()  # the other home: nothing listens there
    proxy = None
    try:
        proxy = FrontProxy(cm["data"], ["127.0.0.1:%d" % srv.port, "127.0.0.1:%d" % dead])
        url = proxy.url
        homes = {}
        for name, token in tokens.items():
            seen = set()
            for i in range(3):
                rid = "k8s-%s-%d" % (name, i)
                r = requests.get(url + "/v1/info", timeout=10,
                                 headers={"Authorization": "Bearer " + token, "X-Request-Id": rid})
                seen.add(r.status_code)
                if r.status_code == 200:
                    assert r.headers["X-Request-Id"] == rid, "the request id passes through"
                else:
                    assert r.status_code == 503, r.text
                    assert r.headers["Retry-After"] == "5"
                    assert r.json()["error"]["code"] == "unavailable"
            assert len(seen) == 1, (name, seen)  # one home for every request
            homes[name] = seen.pop()
        print("front proxy: tenants per home (200: live, 503: dead):",
              {c: sum(1 for v in homes.values() if v == c) for c in (200, 503)})
        assert set(homes.values()) == {200, 503}, homes
        # tensord's own errors pass through unchanged (not turned into 503s).
        r = requests.get(url + "/v1/info", headers={"Authorization": "Bearer nobody"}, timeout=10)
        assert r.status_code in (401, 503)
        live = next(t for n, t in tokens.items() if homes[n] == 200)
        r = requests.get(url + "/v1/tensors/nothing-here", headers={"Authorization": "Bearer " + live}, timeout=10)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
        # A WebSocket (/v1/stream) passes through to the tenant's home.
        ws = websocket.create_connection("ws" + url[len("http"):] + "/v1/stream",
                                         header=["Authorization: Bearer " + live], timeout=10)
        try:
            ws.send(json.dumps({"subscribe": ["metrics"], "interval_ms": 100}))
            assert json.loads(ws.recv())["type"] == "subscribed"
            assert json.loads(ws.recv())["type"] == "metrics"
        finally:
            ws.close()
        # A body streamed through both tiers, larger than any proxy buffer.
        big = {"dtype": "float32", "shape": [1 << 18], "data": [1.5] * (1 << 18)}
        r = requests.put(url + "/v1/tensors/big", json=big, headers={"Authorization": "Bearer " + live}, timeout=30)
        assert r.status_code in (200, 201), r.text
        r = requests.get(url + "/v1/tensors/big", headers={"Authorization": "Bearer " + live}, timeout=30)
        assert r.status_code == 200 and r.json()["data"][-1] == 1.5 and len(r.json()["data"]) == 1 << 18
    finally:
        if proxy:
            proxy.stop()
        _stop_and_check(srv)
        os.unlink(cfg_path)
