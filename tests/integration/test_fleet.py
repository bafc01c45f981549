"""A fleet of tensord hosts with their own addresses (network namespaces,
netfleet.py) behind the front proxy of deploy/kubernetes (Debian's HAProxy,
front_proxy.py), scraped by a real Prometheus, two of them one collective
world meeting in a real redis-server on a fourth host; then the faults an
operator meets: a host SIGKILLed and restarted from its state dir, a link
cut in the middle of a cross-host collective, the rendezvous store lost
while the world is formed and while it must form again, a slow host.

Each test prints its figures ("fleet:" lines; bench/README.md keeps them)
and puts the fleet back as it found it. Root and `ip netns` are needed:
elsewhere the tests skip, saying so."""
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import types

import pytest
import requests
import yaml

from conftest import Server, _stop_and_check, tenants_config
from front_proxy import FrontProxy, free_port
from netfleet import Fleet, Redis

HOSTS = ["h1", "h2", "h3"]
WORLD = {"h1": 0, "h2": 1}  # host: its rank (--rank-offset); h3 serves alone
TOKENS = {"t%02d" % i: "fleet-token-%02d" % i for i in range(24)}
TIMEOUT_S = 4  # --collective-timeout
PORT = 8080
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FRONT_PROXY = os.path.join(REPO, "deploy", "kubernetes", "base", "front-proxy.yaml")
ALL_REDUCE = {"program": {"nodes": [{"id": "s", "op": "dist.all_reduce", "args": ["x"], "outputs": ["s"]}],
                          "outputs": ["s"]},
              "ranks": 2, "inputs": {"x": {"dtype": "float32", "shape": [2], "data": [1, 2]}}}


def auth(tenant):
    return {"Authorization": "Bearer " + TOKENS[tenant]}


def figure(text):
    print("fleet: " + text)


def p(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class Prometheus:
    """Debian's prometheus in the root namespace, scraping every host each second."""

    def __init__(self, targets):
        exe = shutil.which("prometheus") or ("/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)
        if exe is None:
            print("prometheus not installed (Debian package prometheus): skipping")
            pytest.skip("prometheus not installed")
        self.tmp = tempfile.mkdtemp(prefix="tensord-fleet-prom-")
        with open(os.path.join(self.tmp, "prometheus.yml"), "w") as f:
            json.dump({"global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
                       "scrape_configs": [{"job_name": "tensord", "static_configs": [{"targets": targets}]}]}, f)
        self.url = "http://127.0.0.1:%d" % free_port()
        self.proc = subprocess.Popen([exe, "--config.file=" + os.path.join(self.tmp, "prometheus.yml"),
                                      "--storage.tsdb.path=" + os.path.join(self.tmp, "data"),
                                      "--web.listen-address=" + self.url[len("http://"):], "--log.level=warn"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up(self):
        """{instance: 0 or 1} of the last scrapes (empty until Prometheus answers)."""
        try:
            r = requests.get(self.url + "/api/v1/query", params={"query": 'up{job="tensord"}'}, timeout=2)
        except requests.ConnectionError:
            return {}
        return {s["metric"]["instance"]: int(s["value"][1]) for s in r.json()["data"]["result"]}

    def wait_up(self, want, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.up()
            if all(got.get(k) == v for k, v in want.items()):
                return
            time.sleep(0.1)
        raise AssertionError("prometheus up %s, wanted %s" % (self.up(), want))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(20)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def fleet():
    net = Fleet(HOSTS + ["store"])
    ctx = types.SimpleNamespace(net=net, hosts={}, proxy=None, prom=None, redis=None)
    fd, cfg = tempfile.mkstemp(prefix="tensord-fleet-cfg-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(tenants_config(TOKENS), f)
    try:
        ctx.redis = Redis(net, "store")

        def start(name, state_dir=None):
            extra = ["--config", cfg, "--collective-timeout", str(TIMEOUT_S)]
            if name in WORLD:
                extra += ["--ranks", "1", "--world-size", "2", "--rank-offset", str(WORLD[name]),
                          "--rendezvous", ctx.redis.url]
            ctx.hosts[name] = Server(extra, name="fleet-" + name, listen="%s:%d" % (net.addr(name), PORT),
                                     prefix=net.prefix(name), state_dir=state_dir)
            return ctx.hosts[name]
        ctx.start = start
        for name in HOSTS:
            start(name)
        with open(FRONT_PROXY) as f:
            (cm,) = [d for d in yaml.safe_load_all(f) if d and d["kind"] == "ConfigMap"]
        ctx.proxy = FrontProxy(cm["data"], ["%s:%d" % (net.addr(n), PORT) for n in HOSTS])
        ctx.prom = Prometheus(["%s:%d" % (net.addr(n), PORT) for n in HOSTS])
        ctx.homes = find_homes(ctx)
        yield ctx
    finally:
        failures = []
        for stop in [lambda: ctx.proxy and ctx.proxy.stop(), lambda: ctx.prom and ctx.prom.stop()] + \
                [(lambda s: lambda: _stop_and_check(s))(s) for s in ctx.hosts.values()] + \
                [lambda: ctx.redis and ctx.redis.kill()]:
            try:
                stop()
            except BaseException as e:  # the rest is still cleaned up
                failures.append(e)
        net.close()
        os.unlink(cfg)
        if failures:
            raise failures[0]


def find_homes(ctx):
    """{tenant: host}: where the tensor each tenant PUT through the proxy landed."""
    for i, t in enumerate(TOKENS):
        r = requests.put(ctx.proxy.url + "/v1/tensors/where", headers=auth(t), timeout=10,
                         json={"dtype": "float32", "shape": [1], "data": [i]})
        assert r.status_code in (200, 201), r.text
    homes = {}
    for t in TOKENS:
        have = [n for n, s in ctx.hosts.items()
                if requests.get(s.url + "/v1/tensors/where", headers=auth(t), timeout=10).status_code == 200]
        assert len(have) == 1, (t, have)
        homes[t] = have[0]
    return homes


def tenants_of(ctx, host):
    return [t for t, h in ctx.homes.items() if h == host]


def proxy_get(ctx, tenant, path="/v1/tensors/where", timeout=10, **headers):
    return requests.get(ctx.proxy.url + path, headers=dict(auth(tenant), **headers), timeout=timeout)


def test_every_tenant_has_one_home_behind_the_proxy_and_prometheus_scrapes_every_host(fleet):
    per_host = {h: len(tenants_of(fleet, h)) for h in HOSTS}
    figure("tenants per home %s (consistent hashing on Authorization)" % per_host)
    assert all(per_host.values()), per_host  # 24 tokens: a host with none is a (2/3)^24 chance
    for i, t in enumerate(TOKENS):
        for k in range(3):
            rid = "fleet-%s-%d" % (t, k)
            r = proxy_get(fleet, t, **{"X-Request-Id": rid})
            assert r.status_code == 200, r.text
            assert r.headers["X-Request-Id"] == rid
            assert r.json()["data"] == [i], "always the same home"
        other = next(h for h in HOSTS if h != fleet.homes[t])
        r = requests.get(fleet.hosts[other].url + "/v1/tensors/where", headers=auth(t), timeout=10)
        assert r.status_code == 404, "the tenant's tensors live at its home only"
    fleet.prom.wait_up({"%s:%d" % (fleet.net.addr(h), PORT): 1 for h in HOSTS})


class Background:
    """Requests of `tenants` through the proxy, one after another, until stopped."""

    def __init__(self, ctx, tenants):
        self.ctx, self.tenants = ctx, tenants
        self.codes, self.lat = [], []
        self.stop_ = threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        i = 0
        while not self.stop_.is_set():
            t = self.tenants[i % len(self.tenants)]
            i += 1
            t0 = time.monotonic()
            try:
                self.codes.append(proxy_get(self.ctx, t).status_code)
            except requests.RequestException as e:
                self.codes.append(repr(e))
            self.lat.append(time.monotonic() - t0)

    def stop(self):
        self.stop_.set()
        self.th.join(30)
        assert not self.th.is_alive()


def test_a_killed_host_is_503_at_once_for_its_tenants_only_and_serves_again_from_its_state_dir(fleet):
    victim = "h3"
    mine, others = tenants_of(fleet, victim), [t for t in TOKENS if fleet.homes[t] != victim]
    t = mine[0]
    r = requests.put(fleet.proxy.url + "/v1/tensors/kept", headers=auth(t), timeout=10,
                     json={"dtype": "float32", "shape": [3], "data": [1, 2, 3]})
    assert r.status_code in (200, 201), r.text
    assert requests.post(fleet.proxy.url + "/v1/checkpoint", headers=auth(t), timeout=30).status_code == 200
    bg = Background(fleet, others)
    try:
        time.sleep(0.5)
        old = fleet.hosts[victim]
        old.proc.kill()
        killed = time.monotonic()
        while True:
            r = proxy_get(fleet, t, "/v1/tensors/kept")
            if r.status_code != 200:
                break
            assert time.monotonic() - killed < 10, "the proxy kept answering 200 for a dead home"
        failover = time.monotonic() - killed
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "unavailable" and r.headers["Retry-After"] == "5"
        for m in mine:  # every tenant of the dead home, every time, at once
            for _ in range(3):
                t0 = time.monotonic()
                r = proxy_get(fleet, m)
                assert r.status_code == 503 and time.monotonic() - t0 < 1.0, r.text
        fleet.prom.wait_up({"%s:%d" % (fleet.net.addr(victim), PORT): 0})
        seen_down = time.monotonic() - killed
        old.proc.wait(10)
        fleet.start(victim, state_dir=old.state_dir)
        started = time.monotonic()
        while True:
            r = proxy_get(fleet, t, "/v1/tensors/kept")
            if r.status_code == 200:
                break
            assert r.status_code == 503 and time.monotonic() - started < 15, r.text
            time.sleep(0.05)
        back = time.monotonic() - started
        assert r.json()["data"] == [1, 2, 3], "restored from the state dir"
        time.sleep(0.5)
    finally:
        bg.stop()
        if not fleet.hosts[victim].alive():  # the fleet as it was, for the tests after
            fleet.start(victim, state_dir=fleet.hosts[victim].state_dir)
    bad = [c for c in bg.codes if c != 200]
    figure("SIGKILLed host: its tenants 503 after %.3f s, Prometheus up=0 after %.1f s, served again %.2f s after "
           "the restart printed 'listening'; other tenants: %d requests, %d not 200, p99 %.1f ms"
           % (failover, seen_down, back, len(bg.codes), len(bad), 1e3 * p(bg.lat, 0.99)))
    assert not bad, bad[:5]
    assert failover < 3, failover
    fleet.prom.wait_up({"%s:%d" % (fleet.net.addr(victim), PORT): 1})


LONG_LOOP = {"program": {
    "inputs": {"i": {"dtype": "int64", "shape": []}, "x": {"dtype": "float32", "shape": [4]}},
    "nodes": [{"id": "w", "op": "while_loop", "args": ["i", "x"], "outputs": ["i2", "x2"],
               "kwargs": {"max_iters": 10 ** 9},
               "cond": {"inputs": {"i": {"dtype": "int64", "shape": []}, "x": {"dtype": "float32", "shape": [4]}},
                        "nodes": [{"id": "c", "op": "lt", "args": ["i", 10 ** 8], "outputs": ["b"]}],
                        "outputs": ["b"]},
               "body": {"inputs": {"i": {"dtype": "int64", "shape": []}, "x": {"dtype": "float32", "shape": [4]}},
                        "nodes": [{"id": "a", "op": "add", "args": ["i", 1], "outputs": ["j"]},
                                  {"id": "s", "op": "dist.all_reduce", "args": ["x"], "kwargs": {"op": "avg"},
                                   "outputs": ["y"]}],
                        "outputs": ["j", "y"]}}],
    "outputs": ["x2"]},
    "inputs": {"i": {"dtype": "int64", "shape": [], "data": [0]},
               "x": {"dtype": "float32", "shape": [4], "data": [1, 1, 1, 1]}},
    "ranks": 2}


def run_on(ctx, host, body, timeout=60):
    t = tenants_of(ctx, host)[0]
    return requests.post(ctx.hosts[host].url + "/v1/run", json=body, headers=auth(t), timeout=timeout)


def wait_world(ctx, timeout=30):
    """Seconds until an all_reduce across h1 and h2 succeeds again (each failure must be a clean 503/504)."""
    t0 = time.monotonic()
    while True:
        r = run_on(ctx, "h1", ALL_REDUCE)
        if r.status_code == 200:
            assert r.json()["outputs"]["s"]["data"] == [2, 4]
            return time.monotonic() - t0, r
        assert r.status_code in (503, 504), r.text
        assert ".cc:" not in r.text and "gloo/" not in r.text, r.text
        assert time.monotonic() - t0 < timeout, "the world did not form again: " + r.text
        time.sleep(0.1)


def cut_during_a_collective(ctx):
    """Cut h2's link while h1 coordinates a long loop of all_reduces; (answer, seconds from the cut)."""
    out = {}
    th = threading.Thread(target=lambda: out.update(r=run_on(ctx, "h1", LONG_LOOP, timeout=120),
                                                    t=time.monotonic()))
    th.start()
    time.sleep(1.0)
    ctx.net.cut("h2")
    cut = time.monotonic()
    th.join(60)
    assert not th.is_alive(), "the collective never answered"
    return out["r"], out["t"] - cut


def test_a_cut_link_fails_the_collective_in_its_timeout_naming_the_rank_and_the_world_forms_again(fleet):
    wait_world(fleet)
    try:
        r, took = cut_during_a_collective(fleet)
        assert r.status_code in (503, 504), r.text
        msg = r.json()["error"]["message"]
        assert "group world" in msg and "(seq " in msg and "[1]" in msg, msg
        assert ".cc:" not in msg, msg
        assert took < TIMEOUT_S + 3, took
        # The surviving host serves meanwhile: its tenants through the proxy,
        # its own rank's collectives; the cut host's tenants get 503.
        for t in tenants_of(fleet, "h1"):
            assert proxy_get(fleet, t).status_code == 200
        one = dict(ALL_REDUCE, ranks=[0])
        assert run_on(fleet, "h1", one).status_code == 200
        t0 = time.monotonic()
        r2 = proxy_get(fleet, tenants_of(fleet, "h2")[0])
        unreachable = time.monotonic() - t0
        assert r2.status_code == 503, r2.text
        # The timeout left the flight recorder in the state dir, for fr_trace.
        assert os.path.isfile(os.path.join(fleet.hosts["h1"].state_dir, "flight-recorder", "rank_0"))
    finally:
        fleet.net.heal("h2")
    reform, _ = wait_world(fleet)
    figure("cut link mid-collective: %d after %.2f s (--collective-timeout %d): %s; a tenant of the cut host got 503 "
           "after %.2f s; the world formed again %.2f s after the link came back"
           % (r.status_code, took, TIMEOUT_S, msg, unreachable, reform))
    # Its tenants are served again once the proxy's 5 s mark runs out.
    deadline = time.monotonic() + 15
    while proxy_get(fleet, tenants_of(fleet, "h2")[0]).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def assert_store_unavailable(r, redis):
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] == "unavailable", err
    assert "rendezvous store " + redis.url in err["message"], err
    assert "gloo/" not in err["message"] and ".cc:" not in err["message"], err
    assert int(r.headers["Retry-After"]) >= 1


def test_a_lost_rendezvous_store_is_503_naming_it_and_the_world_forms_again_when_it_returns(fleet):
    wait_world(fleet)
    fleet.redis.kill()
    try:
        # Formed: the world needs no store to keep serving.
        r = run_on(fleet, "h1", ALL_REDUCE)
        assert r.status_code == 200, r.text
        # Forming: a cut breaks the world, which must form again, without a store.
        r, _ = cut_during_a_collective(fleet)
        assert r.status_code in (503, 504), r.text
        fleet.net.heal("h2")
        deadline = time.monotonic() + 30
        while True:
            t0 = time.monotonic()
            r = run_on(fleet, "h1", ALL_REDUCE)
            took = time.monotonic() - t0
            assert r.status_code in (503, 504), r.text
            assert ".cc:" not in r.text and "gloo/" not in r.text, r.text
            if "rendezvous store" in r.text:
                break
            assert time.monotonic() < deadline, r.text
            time.sleep(0.2)
        assert_store_unavailable(r, fleet.redis)
        assert took < TIMEOUT_S + 2, "no hang: %.2f s" % took
        assert requests.get(fleet.hosts["h1"].url + "/healthz", timeout=5).status_code == 200
    finally:
        fleet.net.heal("h2")
        if fleet.redis.proc.poll() is not None:
            fleet.redis.start()
    reform, _ = wait_world(fleet)
    wait_all_served(fleet)
    figure("redis lost: a formed world kept serving; forming again answered 503 in %.2f s: %s; the world formed "
           "again %.2f s after redis came back (empty)" % (took, r.json()["error"]["message"], reform))


def wait_all_served(ctx, timeout=15):
    """Until every tenant's home answers through the proxy (a home back up is
    marked up after two good health checks)."""
    deadline = time.monotonic() + timeout
    for t in TOKENS:
        while proxy_get(ctx, t, "/v1/info").status_code != 200:
            assert time.monotonic() < deadline, "tenant %s's home is not served" % t
            time.sleep(0.1)


def test_a_slow_host_makes_its_tenants_slower_and_loses_nothing(fleet):
    slow = "h3"
    wait_all_served(fleet)
    # 2048 floats a tenant: ~10 KB answers, which a throttled link delays
    # by tens of ms each (a tiny one would fit tbf's burst).
    for i, t in enumerate(TOKENS):
        r = requests.put(fleet.proxy.url + "/v1/tensors/slow", headers=auth(t), timeout=10,
                         json={"dtype": "float32", "shape": [2048], "data": [i + 0.5] * 2048})
        assert r.status_code in (200, 201), r.text

    def measure(rounds=8):
        lat = {"slow": [], "others": []}
        codes = []
        for _ in range(rounds):
            for i, t in enumerate(TOKENS):
                t0 = time.monotonic()
                r = proxy_get(fleet, t, "/v1/tensors/slow")
                lat["slow" if fleet.homes[t] == slow else "others"].append(time.monotonic() - t0)
                codes.append(r.status_code)
                if r.status_code == 200:
                    assert r.json()["data"][0] == i + 0.5
        return lat, codes

    base, base_codes = measure()
    how = fleet.net.slow(slow)
    try:
        loaded, codes = measure()
    finally:
        fleet.net.unslow(slow)
    ms = lambda xs, q: 1e3 * p(xs, q)  # noqa: E731
    figure("slow host (%s): its tenants p50 %.2f -> %.2f ms, p99 %.2f -> %.2f ms; other tenants p99 %.2f -> %.2f ms; "
           "proxy p99 %.2f -> %.2f ms; %d requests, %d not 200"
           % (how, ms(base["slow"], 0.5), ms(loaded["slow"], 0.5), ms(base["slow"], 0.99), ms(loaded["slow"], 0.99),
              ms(base["others"], 0.99), ms(loaded["others"], 0.99), ms(base["slow"] + base["others"], 0.99),
              ms(loaded["slow"] + loaded["others"], 0.99), len(codes), sum(c != 200 for c in codes)))
    assert set(base_codes) == {200} and set(codes) == {200}, "nothing lost"
    assert p(loaded["slow"], 0.5) > 2 * p(base["slow"], 0.5), "the slow link slowed its tenants"
