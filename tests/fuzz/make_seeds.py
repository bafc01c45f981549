#!/usr/bin/python3
"""Regenerates the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/).

The seeds are the tests' own inputs:
  * what the integration tests send to a real server, recorded by running
    them with the record_requests plugin (needs a built server: TENSORD_BIN,
    default build/tensord; or --recorded DIR to reuse a recording);
  * the JSON literals (raw strings) of the C++ unit tests of api/;
  * docker/config.example.json;
  * generated safetensors bodies and JSON tensors of every dtype (numpy and
    the Python client's codec).
Each corpus is kept small (a size budget per target, seeds deduplicated and
spread over request kinds). Files named regress-* are regression inputs of
bugs the fuzzers found: they are kept as they are.

  /usr/bin/python3 tests/fuzz/make_seeds.py [--recorded DIR]
"""

import argparse
import base64
import glob
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
from tensord import safetensors as st  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")
TARGETS = ["json_tensor", "safetensors", "program", "config", "http"]
BUDGET = {  # bytes per corpus, and the largest seed
    "json_tensor": (60_000, 2_048),
    "safetensors": (60_000, 4_096),
    "program": (100_000, 6_144),
    "config": (20_000, 4_096),
    "http": (120_000, 8_192),
}


# ---------------------------------------------------------------- recording

def record(out_dir):
    env = dict(os.environ)
    env["TENSORD_RECORD_DIR"] = out_dir
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TENSORD_BIN", os.path.join(REPO, "build", "tensord"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "record_requests"]
    print("recording:", " ".join(cmd), "(TENSORD_BIN=%s)" % env["TENSORD_BIN"], flush=True)
    # Test failures do not matter here: what was sent is recorded either way.
    subprocess.run(cmd, cwd=os.path.join(REPO, "tests", "integration"), env=env, check=False)


def split_requests(stream):
    """HTTP/1.1 requests in a connection's bytes: [(raw, method, target, headers, body)]."""
    out = []
    pos = 0
    while pos < len(stream):
        end = stream.find(b"\r\n\r\n", pos)
        if end < 0:
            break
        head = stream[pos:end].decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            break
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        body_start = end + 4
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body, p = b"", body_start
            while True:
                le = stream.find(b"\r\n", p)
                if le < 0:
                    return out
                size = int(stream[p:le].split(b";")[0] or b"0", 16)
                p = le + 2
                if size == 0:
                    te = stream.find(b"\r\n\r\n", p - 2)
                    p = te + 4 if te >= 0 else len(stream)
                    break
                body += stream[p:p + size]
                p += size + 2
            body_end = p
        else:
            n = int(headers.get("content-length", "0") or 0)
            body = stream[body_start:body_start + n]
            body_end = body_start + n
            if len(body) < n:
                break
        out.append((stream[pos:body_end], parts[0], parts[1], headers, body))
        pos = body_end
    return out


def split_requests_safe(stream):
    """split_requests, or the requests before the first it cannot frame (the
    tests send malformed ones on purpose)."""
    try:
        return split_requests(stream)
    except ValueError:
        return []


# ---------------------------------------------------------------- sources

def recorded_seeds(rec_dir):
    seeds = {t: [] for t in TARGETS}
    for path in sorted(glob.glob(os.path.join(rec_dir, "config-*.json"))):
        with open(path, "rb") as f:
            seeds["config"].append(("config", f.read()))
    for path in sorted(glob.glob(os.path.join(rec_dir, "conn-*.bin"))):
        with open(path, "rb") as f:
            stream = f.read()
        reqs = split_requests_safe(stream)
        if not reqs:
            # Bytes the tests send that do not frame as HTTP (malformed on
            # purpose): the http target takes them as they are.
            if re.match(rb"[A-Z]+ ", stream):
                seeds["http"].append(("raw", stream[:BUDGET["http"][1]]))
            continue
        # http: the connection's first requests (up to 4, within the size cap).
        raw = b""
        for r in reqs[:4]:
            if len(raw) + len(r[0]) > BUDGET["http"][1]:
                break
            raw += r[0]
        if raw:
            m, t = reqs[0][1], reqs[0][2]
            seeds["http"].append((m + " " + re.sub(r"[0-9a-f]{8,}|job-\d+", "N", t.split("?")[0]), raw))
        for _, method, target, headers, body in reqs:
            ctype = headers.get("content-type", "")
            path = target.split("?")[0]
            if "safetensors" in ctype:
                seeds["safetensors"].append((method + " " + path.split("/")[2] if path.count("/") > 1 else path, body))
                if len(body) >= 8:
                    (n,) = struct.unpack("<Q", body[:8])
                    try:
                        hdr = json.loads(body[8:8 + n])
                        req = hdr.get("__metadata__", {}).get("request")
                        if req:
                            seeds["program"].append(("st-request", req.encode()))
                    except (ValueError, AttributeError, RecursionError):
                        pass
                continue
            if not body:
                continue
            if method == "POST" and (path in ("/v1/run", "/v1/jobs", "/v1/graphs") or path.endswith("/replay")):
                seeds["program"].append((path if not path.endswith("/replay") else "replay", body))
                try:
                    doc = json.loads(body)
                except (ValueError, RecursionError):
                    continue
                if isinstance(doc, dict) and isinstance(doc.get("inputs"), dict):
                    for v in doc["inputs"].values():
                        if isinstance(v, dict) and ("data" in v or "b64" in v):
                            seeds["json_tensor"].append(("input", json.dumps(v).encode()))
            elif method == "PUT" and path.startswith("/v1/tensors/"):
                seeds["json_tensor"].append(("put", body))
    return seeds


RAW_STRING = re.compile(r'R"\((.*?)\)"', re.S)


def unit_test_seeds():
    seeds = {t: [] for t in TARGETS}
    for path in sorted(glob.glob(os.path.join(REPO, "tests", "unit", "api", "*.cpp"))):
        with open(path) as f:
            text = f.read()
        for m in RAW_STRING.finditer(text):
            s = m.group(1)
            try:
                doc = json.loads(s)
            except (ValueError, RecursionError):
                doc = None
            name = os.path.basename(path)
            if name.startswith("json_tensor"):
                seeds["json_tensor"].append(("unit", s.encode()))
            elif name.startswith("program_json") or (isinstance(doc, dict) and ("program" in doc or "nodes" in doc)):
                body = s if not (isinstance(doc, dict) and "nodes" in doc) else json.dumps({"program": doc})
                seeds["program"].append(("unit", body.encode()))
            elif name.startswith("config_json") and doc is not None:
                seeds["config"].append(("unit", s.encode()))
            elif name.startswith("safetensors") and doc is not None:
                h = s.encode()
                seeds["safetensors"].append(("unit", struct.pack("<Q", len(h)) + h + bytes(64)))
    return seeds


def generated_seeds():
    seeds = {t: [] for t in TARGETS}
    rng = np.random.default_rng(15)
    with open(os.path.join(REPO, "docker", "config.example.json"), "rb") as f:
        example = f.read()
    seeds["config"].append(("example", example))
    # The example's tenants moved, added and removed (what a reload sees).
    cfg = json.loads(example)
    cfg["tenants"][1]["partition"] = "batch"
    seeds["config"].append(("moved", json.dumps(cfg).encode()))
    cfg = json.loads(example)
    cfg["partitions"].append({"name": "new", "share": 0.0001, "workqueue_limit": 1})
    cfg["tenants"].append({"name": "bob", "token_sha256": "ab" * 32, "partition": "new", "weight": 0.5,
                           "memory_bytes": 0, "max_queued": 1, "max_running": 1, "admin": False})
    seeds["config"].append(("added", json.dumps(cfg).encode()))
    cfg = json.loads(example)
    del cfg["tenants"][0]
    seeds["config"].append(("removed", json.dumps(cfg).encode()))
    for name, (tag, npdt, native) in st.DTYPES.items():
        for shape in [(), (3,), (2, 3), (1, 0, 2)]:
            n = int(np.prod(shape)) if shape else 1
            if name == "bool":
                arr = rng.integers(0, 2, size=shape).astype(np.bool_)
            elif native:
                arr = (rng.standard_normal(n) * 10).reshape(shape).astype(npdt) if name.startswith(("float", "complex")) \
                    else rng.integers(-5, 100, size=shape).astype(npdt)
                if name.startswith("complex"):
                    arr = arr + 1j * arr
            else:
                arr = (rng.integers(0, 120, size=shape).astype(npdt), name)
            body = st.encode({"t": arr}, {"k": "v"} if shape == (3,) else None)
            seeds["safetensors"].append(("gen " + tag, body))
        # JSON tensors: flat data, nested data, b64.
        flat = rng.integers(0, 2, size=4).tolist() if name == "bool" else [1, 2.5, "nan", "-inf"]
        if name.startswith("int") or name == "uint8":
            flat = [1, -2, 3, 0] if name != "uint8" else [0, 1, 255, 7]
        if name == "bool":
            flat = [True, False, 1, 0]
        if name.startswith("complex"):
            flat = [[1, 2], [0.5, "inf"], [0, 0], [-1, "nan"]]
        seeds["json_tensor"].append(("gen", json.dumps({"dtype": name, "shape": [4], "data": flat}).encode()))
        nested = [flat[:2], flat[2:]]
        seeds["json_tensor"].append(("gen", json.dumps({"dtype": name, "shape": [2, 2], "data": nested}).encode()))
        raw = bytes(rng.integers(0, 2 if name == "bool" else 120, size=4 * npdt.itemsize, dtype=np.uint8))
        seeds["json_tensor"].append(("gen", json.dumps({"dtype": name, "shape": [4],
                                                        "b64": base64.b64encode(raw).decode()}).encode()))
    for s in ['2.5', '7', 'true', '[[1, 2], [3, 4]]', '{"data": [1, 2, 3]}', '{"datatype": "FP32", "shape": [1], '
              '"data": [1], "name": "x"}', '{"dtype": "float32", "shape": [], "data": 1e39}']:
        seeds["json_tensor"].append(("gen", s.encode()))
    # Two tensors with a gap and trailing bytes; an empty file; metadata only.
    h = json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "I64", "shape": [1], "data_offsets": [16, 24]},
                    "__metadata__": {"request": "{}"}}).encode()
    seeds["safetensors"].append(("gen gap", struct.pack("<Q", len(h)) + h + bytes(32)))
    seeds["safetensors"].append(("gen empty", struct.pack("<Q", 2) + b"{}"))
    return seeds


# ---------------------------------------------------------------- selection

def select(items, budget, max_seed):
    """Deduplicated seeds within `budget` bytes, spread over their kinds
    (round robin over kinds, smallest first within a kind)."""
    by_kind, seen = {}, set()
    for kind, data in items:
        if not data or len(data) > max_seed:
            continue
        h = hashlib.sha1(data).hexdigest()
        if h in seen:
            continue
        seen.add(h)
        by_kind.setdefault(kind, []).append(data)
    for k in by_kind:
        by_kind[k].sort(key=lambda d: (len(d), d))
    chosen, total = [], 0
    kinds = sorted(by_kind)
    while kinds:
        left = []
        for k in kinds:
            lst = by_kind[k]
            while lst and total + len(lst[0]) > budget:
                lst.pop(0)
            if lst:
                d = lst.pop(0)
                chosen.append(d)
                total += len(d)
                if lst:
                    left.append(k)
        kinds = left
    return chosen


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recorded", help="a directory recorded earlier (skips running the integration tests)")
    args = ap.parse_args()
    rec_dir = args.recorded
    tmp = None
    if not rec_dir:
        tmp = tempfile.TemporaryDirectory(prefix="tensord-seeds-")
        rec_dir = tmp.name
        record(rec_dir)
    all_seeds = {t: [] for t in TARGETS}
    for source in (recorded_seeds(rec_dir), unit_test_seeds(), generated_seeds()):
        for t in TARGETS:
            all_seeds[t] += source[t]
    for t in TARGETS:
        d = os.path.join(CORPUS, t)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            if not f.startswith("regress-"):
                os.remove(os.path.join(d, f))
        chosen = select(all_seeds[t], *BUDGET[t])
        for data in chosen:
            with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
                f.write(data)
        print("%-12s %4d seeds, %7d bytes (of %d candidates)" % (t, len(chosen), sum(map(len, chosen)),
                                                                 len(all_seeds[t])))
    write_dicts(all_seeds)
    if tmp:
        tmp.cleanup()


# ---------------------------------------------------------------- dictionaries

MAX_DICT_WORDS = 400
JSON_TOKENS = ['"', '{', '}', '[', ']', ':', ',', 'true', 'false', 'null', '-', '0', '1e308', '-1', '1.5',
               '"nan"', '"inf"', '"-inf"', '"\\u0000"', '\\"']


def write_dicts(all_seeds):
    """AFL/libFuzzer dictionaries: JSON tokens, the keys and string values the
    seeds use (op names, dtypes, fields), HTTP words for the http target."""
    # The most used words (in the most seeds), generated names left out.
    count = {}
    for t in ("json_tensor", "program", "config"):
        for _, data in all_seeds[t]:
            for w in set(re.findall(rb'"([A-Za-z_$][A-Za-z0-9_./$-]{0,40})"', data)):
                w = w.decode()
                if not re.search(r"\d{2,}|[0-9a-f]{8,}", w):
                    count[w] = count.get(w, 0) + 1
    words = set(sorted(count, key=lambda w: (-count[w], w))[:MAX_DICT_WORDS])
    words |= {name for name in st.DTYPES} | {v[0] for v in st.DTYPES.values()}
    words |= {"data_offsets", "__metadata__", "request", "response", "dtype", "shape", "data", "b64"}
    json_words = sorted(words)

    def esc(s):  # libFuzzer dictionary escapes: \\, \" and \xNN
        out = ""
        for c in s:
            if c in '\\"':
                out += "\\" + c
            elif " " <= c <= "~":
                out += c
            else:
                out += "".join("\\x%02X" % b for b in c.encode())
        return out

    def dump(name, tokens):
        with open(os.path.join(HERE, name), "w") as f:
            f.write("# Generated by make_seeds.py: JSON tokens and the words of the seeds.\n")
            for i, tok in enumerate(tokens):
                f.write('kw%d="%s"\n' % (i, esc(tok)))

    json_tokens = JSON_TOKENS + ['"%s"' % w for w in json_words]
    dump("json.dict", json_tokens)
    http_words = ["GET ", "PUT ", "POST ", "DELETE ", "HEAD ", "OPTIONS ", " HTTP/1.1\r\n", " HTTP/1.0\r\n", "\r\n",
                  "\r\n\r\n", "Host: t\r\n", "Content-Length: ", "Transfer-Encoding: chunked\r\n",
                  "Content-Type: application/json\r\n", "Content-Type: application/vnd.safetensors\r\n",
                  "Accept: application/vnd.safetensors\r\n", "Connection: close\r\n", "Connection: keep-alive\r\n",
                  "Authorization: Bearer ", "X-Request-Id: ", "Expect: 100-continue\r\n", "Upgrade: websocket\r\n",
                  "/v1/run", "/v1/jobs", "/v1/jobs/job-1", "/v1/tensors/", "/v1/tensors:upload", "/v1/graphs",
                  "/v1/graphs/g-1/replay", "/v1/checkpoint", "/v1/info", "/v1/ops", "/v1/trace", "/v1/stream",
                  "/v1/admin/tenants", "/metrics", "/healthz", "/readyz", "/v2/health/live", "?encoding=b64",
                  "?prefix=", "?format=dot", "%2e%2e", "%00", "0\r\n\r\n", "/v2/models/m/infer",
                  "/v2/models/m/config", "/v2/models/stats", "/v2/models/m/versions/1/stats", "/v2/repository/index",
                  "/v2/systemsharedmemory/region/r/register", "/v2/systemsharedmemory/status",
                  "Content-Encoding: gzip\r\n", "Content-Encoding: deflate\r\n", "Accept-Encoding: gzip\r\n",
                  "Inference-Header-Content-Length: "]
    dump("http.dict", http_words + json_tokens)


if __name__ == "__main__":
    main()
