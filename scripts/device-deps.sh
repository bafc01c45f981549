#!/usr/bin/env bash
# Packs the Debian build dependencies that a CUDA machine without them needs
# to build tensord (headers, libraries, CMake and pkg-config files of the
# packages below) into one archive, for a machine that cannot reach Debian's
# archive (the lent GPU machine: scripts/device-gpu.sh unpacks it there with
# --skip-old-files, so nothing the machine already has is replaced).
#
#   bash scripts/device-deps.sh [OUT]   (default .device/debdeps.tar.xz)
set -euo pipefail

OUT=${1:-.device/debdeps.tar.xz}
PKGS=(
  libboost1.81-dev rapidjson-dev
  prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprometheus-cpp-push1.0
  libcivetweb-dev libcivetweb1 libcurl4-openssl-dev libcurl4 zlib1g-dev  # prometheus-cpp-config.cmake finds them
  libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0
  liblapacke liblapacke-dev liblapack3 libblas3 libtmglib3 libgfortran5 libquadmath0
  libgtest-dev libgmock-dev libgloo-dev libgloo0 libhiredis0.14 libhiredis-dev libibverbs1 libnl-route-3-200 libnl-3-200
  pkgconf pkgconf-bin libpkgconf3
)

list=$(mktemp)
trap 'rm -f "$list"' EXIT
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    { echo "device-deps: $p is not installed (run scripts/install-deps.sh)" >&2; exit 1; }
  # Files and links only; docs, man pages and Debian's bookkeeping stay behind.
  dpkg -L "$p" | while read -r f; do
    if [ -f "$f" ] || [ -L "$f" ]; then
      case "$f" in
        /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/*) ;;
        */libgtest*.a | */libgmock*.a) echo "${f#/}" ;;
        *.a) ;; # static BLAS/LAPACK: tens of MiB that the build never links
        *) echo "${f#/}" ;;
      esac
    fi
  done >>"$list"
done
# Debian's BLAS/LAPACK are picked through the alternatives system: take its links.
for a in /etc/alternatives/*; do
  case "$(readlink "$a")" in *openblas-pthread/*.a) ;; *openblas-pthread/*) echo "${a#/}" >>"$list" ;; esac
done

mkdir -p "$(dirname "$OUT")"
sort -u "$list" | tar -C / -cf - -T - | xz -T0 -6 >"$OUT"
echo "device-deps: $(sort -u "$list" | wc -l) files, $(du -h "$OUT" | cut -f1) in $OUT"
