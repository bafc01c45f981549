#!/usr/bin/python3
"""Prints "KEY PATH" for each source path read from stdin: KEY hashes what
clang-tidy's verdict on that file depends on (the file preprocessed with its
compile command, every header included; the command's flags; .clang-tidy;
the clang-tidy version), with the checkout's path taken out so a fresh clone
elsewhere (CI) finds the same keys. scripts/run-tidy.sh skips files whose key
was clean before.

  scripts/tidy_keys.py COMPILE_COMMANDS_JSON SOURCE_ROOT JOBS < paths
"""
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys


def main():
    db_path, root, jobs = sys.argv[1], os.path.abspath(sys.argv[2]), int(sys.argv[3])
    with open(db_path) as f:
        db = {e["file"]: e for e in json.load(f)}
    common = hashlib.sha256()
    with open(os.path.join(root, ".clang-tidy"), "rb") as f:
        common.update(f.read())
    common.update(subprocess.run(["clang-tidy", "--version"], capture_output=True).stdout)
    common.update(os.environ.get("TIDY_EXTRA_KEY", "").encode())

    def key(path):
        e = db[path]
        args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
        out, i = [], 0
        while i < len(args):
            if args[i] == "-o":
                i += 2
                continue
            if args[i] == "-c":
                i += 1
                continue
            out.append(args[i])
            i += 1
        out = [a for a in out if a != path] + ["-E", "-P", path]
        pre = subprocess.run(out, cwd=e["directory"], capture_output=True)
        if pre.returncode != 0:
            return None  # let clang-tidy itself say what is wrong
        h = common.copy()
        h.update(" ".join(a for a in out[1:]).replace(root, "@ROOT@").encode())
        h.update(b"\0")
        h.update(pre.stdout.replace(root.encode(), b"@ROOT@"))
        return h.hexdigest()

    paths = [p.strip() for p in sys.stdin if p.strip()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        for path, k in zip(paths, ex.map(key, paths)):
            print("%s %s" % (k or "uncached", path))


if __name__ == "__main__":
    main()
