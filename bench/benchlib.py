"""What the bench scripts share: starting the real binary on a free
loopback port, percentiles, and rewriting their own section of
bench/README.md."""

import os
import re
import subprocess
import threading

HERE = os.path.dirname(os.path.abspath(__file__))


def start_server(binary, args=()):
    """Starts `binary --listen 127.0.0.1:0 <args>`; returns (process, "http://host:port").
    The server's stderr is drained in the background."""
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:0"] + list(args), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    line = p.stderr.readline().decode()
    m = re.search(r"listening on (http://\S+)", line)
    if not m:
        p.kill()
        raise SystemExit("server did not start: " + line)
    threading.Thread(target=lambda: [None for _ in iter(p.stderr.readline, b"")], daemon=True).start()
    return p, m.group(1)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def write_readme_section(head, body):
    """Replaces the section that starts with the line `head` ("## name") in
    bench/README.md with `body` (which starts with `head`), keeping its
    place; appends it when the README has no such section."""
    path = os.path.join(HERE, "README.md")
    old = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    body = body.rstrip("\n") + "\n"
    m = re.search(r"^" + re.escape(head) + r"[ \t]*$", old, re.M)
    if m:
        nxt = old.find("\n## ", m.end())
        old = old[:m.start()] + body + (old[nxt:] if nxt >= 0 else "")
    else:
        old = old.rstrip("\n") + "\n\n" + body
    with open(path, "w") as f:
        f.write(old)
