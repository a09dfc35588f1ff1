#!/usr/bin/env bash
# Installs the CuTe / CUTLASS 4.2 headers from PyPI (nvidia-cutlass==4.2.0.0, --no-deps) into
# deps/cutlass. Nothing is vendored: the repository only names the version it needs.
# Idempotent: does nothing when the headers are already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/deps/cutlass"
inc="$dest/cutlass_library/source/include"
py=${PYTHON:-python3}
if [ -f "$inc/cute/tensor.hpp" ]; then
  echo "setup_deps: CuTe headers present at $inc"
else
  echo "setup_deps: installing nvidia-cutlass==4.2.0.0 (headers only) into $dest"
  "$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" nvidia-cutlass==4.2.0.0
  [ -f "$inc/cute/tensor.hpp" ] || { echo "setup_deps: headers not found under $inc" >&2; exit 1; }
fi

# cuobjdump + nvdisasm, for scripts/check_kernels.py (spills, HMMA in SASS), when the toolkit
# lacks them. A newer cuobjdump reads older toolkits' binaries.
if ! { command -v cuobjdump && command -v nvdisasm; } >/dev/null &&
   [ ! -x /usr/local/cuda/bin/nvdisasm ] && [ ! -x "$root/deps/cudabin/nvidia/cu13/bin/nvdisasm" ]; then
  echo "setup_deps: installing cuobjdump + nvdisasm (PyPI, 13.2.51) into deps/cudabin"
  "$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$root/deps/cudabin" \
    nvidia-cuda-cuobjdump==13.2.51 nvidia-cuda-nvdisasm==13.2.51
fi
echo "setup_deps: done"
