"""The front proxy of deploy/kubernetes (its ConfigMap's haproxy.cfg and
unavailable.json) run by Debian's HAProxy on this machine: the config's
homes become the given addresses, its port a free one, its files and
abstract sockets this run's own. The ConfigMap is written for two homes;
more (or fewer) are made from home 0's lines, the way its comment tells an
operator to."""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import requests

HOME_SECTION = re.compile(r"^listen home-(\d+)  # per home\n(?:  .*\n)*", re.M)


def haproxy_binary():
    exe = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.access("/usr/sbin/haproxy", os.X_OK) else None)
    if not exe:
        print("haproxy not installed (Debian package haproxy; scripts/install-deps.sh): skipping")
        pytest.skip("haproxy not installed")
    return exe


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_conf(cfg, homes, tmp, listen_port):
    """The ConfigMap's haproxy.cfg with `homes` ("host:port", home i first) as its servers."""
    assert re.findall(r"server tensord-\d+ (tensord-\d+\.tensord-peers:8080) check", cfg) == \
        ["tensord-0.tensord-peers:8080", "tensord-1.tensord-peers:8080"], "the ConfigMap's homes changed"
    sections = {m.group(1): m.group(0) for m in HOME_SECTION.finditer(cfg)}
    assert set(sections) == {"0", "1"}, sections
    cfg = HOME_SECTION.sub("", cfg).rstrip("\n") + "\n"
    for i, h in enumerate(homes):
        cfg += "\n" + sections["0"].replace("home-0", "home-%d" % i).replace("tensord-0 ", "tensord-%d " % i) \
            .replace("tensord-0.tensord-peers:8080", h)
    out = []
    for line in cfg.splitlines(keepends=True):
        if "# per home" in line and line.lstrip().startswith("server home-"):
            if "home-0" in line:  # home 0's line stands for every home's
                out.extend(line.replace("home-0", "home-%d" % i) for i in range(len(homes)))
        else:
            out.append(line)
    cfg = "".join(out)
    assert "tensord-peers" not in cfg, cfg
    # This run's own abstract sockets: another run on the machine has its own.
    cfg = cfg.replace("abns@tensord-home-", "abns@%s-home-" % os.path.basename(tmp))
    cfg = cfg.replace("bind :8080", "bind 127.0.0.1:%d" % listen_port)
    return cfg.replace("/usr/local/etc/haproxy/", tmp + "/")


class FrontProxy:
    """Debian's HAProxy running the ConfigMap's config in front of `homes`."""

    def __init__(self, data, homes):
        self.exe = haproxy_binary()
        self.tmp = tempfile.mkdtemp(prefix="tensord-front-proxy-")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        path = os.path.join(self.tmp, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(local_conf(data["haproxy.cfg"], homes, self.tmp, self.port))
        with open(os.path.join(self.tmp, "unavailable.json"), "w") as f:
            f.write(data["unavailable.json"])
        check = subprocess.run([self.exe, "-c", "-f", path], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr
        self.logf = open(os.path.join(self.tmp, "haproxy.log"), "w+")
        self.proc = subprocess.Popen([self.exe, "-f", path, "-db"], stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while True:
            try:
                requests.get(self.url + "/proxy-healthz", timeout=2)
                return
            except requests.ConnectionError:
                assert self.proc.poll() is None and time.time() < deadline, "haproxy did not start: " + self.log()
                time.sleep(0.1)

    def log(self):
        with open(self.logf.name) as f:
            return f.read()[-3000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.logf.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
