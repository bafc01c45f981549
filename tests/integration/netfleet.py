"""Hosts with their own addresses on this machine: one network namespace
per host, each with a veth link (eth0) on a bridge in the root namespace,
which holds the bridge's address and runs what sits outside the hosts
(the test's clients, the front proxy, Prometheus). Cutting a host's link,
slowing it, and killing what runs there are what the fleet tests do.

Needs root and iproute2 (`ip netns`); a Fleet made elsewhere skips the
test, saying why. Names carry this process's id, so concurrent runs do not
meet; what an earlier run left (it was killed) is removed first."""
import os
import re
import shutil
import socket
import subprocess
import time

import pytest

PREFIX = "tdf"


def _ip(*args, check=True):
    out = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise AssertionError("ip %s: %s" % (" ".join(args), out.stderr.strip()))
    return out


def _skip(why):
    print("fleet tests: %s: skipping" % why)
    pytest.skip(why)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _remove_stale():
    """Namespaces and bridges of earlier runs whose process is gone."""
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(PREFIX + r"(\d+)-", name)
        if m and not _pid_alive(int(m.group(1))):
            _kill_in(name)
            _ip("netns", "del", name, check=False)
    for line in _ip("-o", "link", "show", "type", "bridge", check=False).stdout.splitlines():
        m = re.search(r"\d+: (" + PREFIX + r"(\d+)br):", line)
        if m and not _pid_alive(int(m.group(2))):
            _ip("link", "del", m.group(1), check=False)


def _kill_in(ns):
    pids = _ip("netns", "pids", ns, check=False).stdout.split()
    for p in pids:
        try:
            os.kill(int(p), 9)
        except (ProcessLookupError, ValueError):
            pass


def _free_subnet():
    used = _ip("-o", "-4", "addr", check=False).stdout
    for third in range(os.getpid() % 200, os.getpid() % 200 + 200):
        net = "10.213.%d" % (third % 250)
        if (net + ".") not in used:
            return net
    _skip("no free 10.213.x.0/24 subnet")


class Fleet:
    """Namespaces named after `hosts`, host i at <subnet>.(i+1)."""

    def __init__(self, hosts):
        if os.geteuid() != 0:
            _skip("network namespaces need root (ip netns)")
        if shutil.which("ip") is None:
            _skip("iproute2 is not installed (scripts/install-deps.sh installs it)")
        self.tag = "%s%d" % (PREFIX, os.getpid())
        probe = self.tag + "-probe"
        out = _ip("netns", "add", probe, check=False)
        if out.returncode != 0:
            _skip("ip netns add failed: %s" % out.stderr.strip())
        _ip("netns", "del", probe)
        _remove_stale()
        self.subnet = _free_subnet()
        self.bridge = self.tag + "br"
        self.names = list(hosts)
        self.made = []
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", self.subnet + ".254/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i, name in enumerate(self.names):
                ns = self.ns(name)
                _ip("netns", "add", ns)
                self.made.append(ns)
                outside = self.tag + name[:4]
                _ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("link", "set", outside, "master", self.bridge, "up")
                _ip("-n", ns, "addr", "add", "%s.%d/24" % (self.subnet, i + 1), "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def ns(self, name):
        return "%s-%s" % (self.tag, name)

    def addr(self, name):
        return "%s.%d" % (self.subnet, self.names.index(name) + 1)

    def prefix(self, name):
        """The command prefix that runs a program on host `name`."""
        return ["ip", "netns", "exec", self.ns(name)]

    def cut(self, name):
        _ip("-n", self.ns(name), "link", "set", "eth0", "down")

    def heal(self, name):
        _ip("-n", self.ns(name), "link", "set", "eth0", "up")

    def slow(self, name):
        """Slow host `name`'s link: netem's delay where the kernel has it, else a
        token bucket of 1 Mbit/s (answers queue behind each other). Returns what it did."""
        dev = ["tc", "qdisc", "add", "dev", "eth0", "root"]
        netem = subprocess.run(self.prefix(name) + dev + ["netem", "delay", "20ms", "5ms"],
                               capture_output=True, text=True, timeout=30)
        if netem.returncode == 0:
            return "netem delay 20ms +-5ms"
        tbf = subprocess.run(self.prefix(name) + dev + ["tbf", "rate", "1mbit", "burst", "1600", "latency", "2s"],
                             capture_output=True, text=True, timeout=30)
        assert tbf.returncode == 0, "neither netem (%s) nor tbf (%s)" % (netem.stderr.strip(), tbf.stderr.strip())
        return "tbf rate 1mbit: this kernel has no netem (%s)" % netem.stderr.strip()

    def unslow(self, name):
        subprocess.run(self.prefix(name) + ["tc", "qdisc", "del", "dev", "eth0", "root"], capture_output=True,
                       timeout=30)

    def wait_port(self, name, port, timeout=10):
        deadline = time.time() + timeout
        while True:
            try:
                with socket.create_connection((self.addr(name), port), timeout=0.5):
                    return
            except OSError:
                assert time.time() < deadline, "nothing accepts connections at %s:%d" % (self.addr(name), port)
                time.sleep(0.05)

    def close(self):
        for ns in self.made:
            _kill_in(ns)
            _ip("netns", "del", ns, check=False)
        self.made = []
        _ip("link", "del", self.bridge, check=False)


class Redis:
    """redis-server on host `name` of a fleet, port 6379, no persistence
    (one that comes back is empty, as a restarted pod without a volume)."""

    def __init__(self, fleet, name):
        self.exe = shutil.which("redis-server")
        if self.exe is None:
            _skip("redis-server is not installed (scripts/install-deps.sh installs it)")
        self.fleet, self.name = fleet, name
        self.url = "redis://%s:6379" % fleet.addr(name)
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(self.fleet.prefix(self.name) + [
            self.exe, "--port", "6379", "--bind", self.fleet.addr(self.name), "--save", "", "--appendonly", "no",
            "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.fleet.wait_port(self.name, 6379)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
