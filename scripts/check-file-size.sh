#!/usr/bin/env bash
# Small files (STYLE.md 12): no tracked source file (C++, CUDA, Python,
# shell) over 600 lines unless it says why in a comment holding
# "Long file:". Exit 1 naming the files that do not.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=600
long=()
while IFS= read -r f; do
  if [ "$(wc -l < "$f")" -gt "$limit" ] && ! grep -q "Long file:" "$f"; then long+=("$f"); fi
done < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.py' '*.sh')
if [ ${#long[@]} -gt 0 ]; then
  echo "check-file-size: over $limit lines without a 'Long file:' comment saying why: ${long[*]}"
  exit 1
fi
echo "check-file-size: no unexplained file over $limit lines"
