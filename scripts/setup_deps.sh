#!/usr/bin/env bash
# Installs the CuTe / CUTLASS 4.2 headers from PyPI (nvidia-cutlass==4.2.0.0, --no-deps) into
# deps/cutlass. Nothing is vendored: the repository only names the version it needs.
# Idempotent: does nothing when the headers are already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/deps/cutlass"
inc="$dest/cutlass_library/source/include"
if [ -f "$inc/cute/tensor.hpp" ]; then
  echo "setup_deps: CuTe headers present at $inc"
  exit 0
fi
py=${PYTHON:-python3}
echo "setup_deps: installing nvidia-cutlass==4.2.0.0 (headers only) into $dest"
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" nvidia-cutlass==4.2.0.0
[ -f "$inc/cute/tensor.hpp" ] || { echo "setup_deps: headers not found under $inc" >&2; exit 1; }
echo "setup_deps: done ($inc)"
