#!/usr/bin/env bash
# Installs, idempotently, the Debian packages tensord needs to build, test and
# benchmark. Only what is missing is installed; nothing is downloaded outside
# Debian's archive. Never installs libboost-dev (1.74): it conflicts with 1.81.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libboost1.81-all-dev rapidjson-dev prometheus-cpp-dev libgloo-dev
  libopenblas-dev liblapacke-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3-numpy python3-requests python3-websocket python3-pytest
  python3-torch jupyter-nbconvert python3-ipykernel prometheus wrk
  clang clang-format libclang-rt-14-dev python3-tqdm python3-venv
  python3-setuptools python3-wheel python3-pip-whl python3-setuptools-whl
  redis-server libhiredis-dev clang-tidy zlib1g-dev nginx-light haproxy iproute2 python3-yaml
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# prometheus, nginx and haproxy, the packages, start services on Debian; tests run their own.
if command -v systemctl >/dev/null 2>&1; then
  $SUDO systemctl disable --now prometheus nginx haproxy >/dev/null 2>&1 || true
fi
echo "install-deps: done"
