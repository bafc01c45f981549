#!/usr/bin/env bash
# PyTorch 2.15 from PyPI, the lightest install that imports torch and runs
# CPU ops, for PyTorch's flight-recorder analyzer over tensord's dumps
# (tests/integration/test_fr_trace.py):
#   build/torch-venv     a plain venv from /usr/bin/python3 (no system site
#                        packages), scripts/torch-constraints.txt
# The Linux torch wheel's dependency list pulls several GB of nvidia-* CUDA
# wheels. Here the wheel goes in with --no-deps; its CUDA libraries come
# from the CUDA 13 toolkit in /usr/local/cuda, except the four the toolkit
# lacks or has too old (cuFile, cuSPARSELt, NVSHMEM, NCCL: their wheels are
# named in the constraints; torch's RPATH finds them in site-packages). The
# loader must see the toolkit before the interpreter starts, so bin/python
# and bin/python3 are wrappers that set LD_LIBRARY_PATH and exec the real
# interpreter (bin/python3.11, beside pyvenv.cfg, so the venv holds).
# download.pytorch.org's CPU-only wheels would avoid all of this, but that
# host cannot be reached from our machines (only PyPI and Debian can).
# Idempotent: a venv whose stamp matches the constraints and this script is
# kept. Every wheel is kept in ~/.cache/tensord/wheels (pip's own cache
# kept none of them in our runs), so a rebuild downloads nothing and
# installs from there.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TORCH_VENV:-build/torch-venv}
CONSTRAINTS=scripts/torch-constraints.txt
CACHE=${TENSORD_CACHE:-$HOME/.cache/tensord}
CUDA_LIB=${CUDA_LIB:-/usr/local/cuda/lib64}
PY=python3.11
stamp="$(sha256sum "$CONSTRAINTS" "$0" | sha256sum | cut -c1-16)"

if [ -f "$VENV/.stamp" ] && [ "$(cat "$VENV/.stamp")" = "$stamp" ]; then
  echo "install-torch: $VENV up to date"
  exit 0
fi
if [ ! -d "$CUDA_LIB" ]; then
  echo "install-torch: $CUDA_LIB not found (torch's wheel needs the CUDA 13 toolkit's libraries)" >&2
  exit 1
fi
mkdir -p build "$CACHE/wheels"
pip_opts=(-q --disable-pip-version-check -c "$CONSTRAINTS")

rm -rf "$VENV"
/usr/bin/python3 -m venv "$VENV"
# Every wheel into the kept folder (pip skips those already there), then
# installed from that folder alone.
mapfile -t pins < <(grep -E '^[A-Za-z0-9]' "$CONSTRAINTS")
"$VENV/bin/pip" download "${pip_opts[@]}" --no-deps --only-binary=:all: -d "$CACHE/wheels" "${pins[@]}"
"$VENV/bin/pip" install "${pip_opts[@]}" --no-deps --no-index --find-links "$CACHE/wheels" "${pins[@]}"

# The wrappers: the toolkit's libraries for torch's, then the real
# interpreter (whose path keeps the venv: pyvenv.cfg is beside it).
real="$(readlink -f "$VENV/bin/$PY")"
ln -sf "$real" "$VENV/bin/$PY"
for name in python python3; do
  rm -f "$VENV/bin/$name"
  cat > "$VENV/bin/$name" <<SH
#!/bin/sh
# PyTorch's CUDA libraries from the CUDA toolkit (scripts/install-torch.sh).
LD_LIBRARY_PATH="$CUDA_LIB\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$(dirname "\$0")/$PY" "\$@"
SH
  chmod +x "$VENV/bin/$name"
done
"$VENV/bin/python" -c 'import torch, numpy; x = torch.arange(6.0).reshape(2, 3); assert float((x @ x.T).sum()) == 83.0; assert numpy.__version__.startswith("2.")' ||
  { echo "install-torch: torch does not import or run in $VENV" >&2; exit 1; }
"$VENV/bin/python" -m torch.distributed.flight_recorder.fr_trace --help >/dev/null ||
  { echo "install-torch: fr_trace does not start in $VENV" >&2; exit 1; }
echo "$stamp" > "$VENV/.stamp"
echo "install-torch: $VENV ready ($(du -sh "$VENV" | cut -f1))"
