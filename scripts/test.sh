#!/usr/bin/env bash
# The test command (README; .ci/run calls it): fetch the CuTe headers, build every shipped kernel,
# check the kernels (no register spills, tensor-core instructions present), run all tests.
# GPU tests skip cleanly without a GPU; CPU tests always run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
scripts/setup_deps.sh
# Tests and tools explicitly on: scripts/test_python.sh may have configured this folder without them.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_TOOLS=ON
ninja -C "$build" -j "$jobs"
python3 scripts/check_kernels.py "$build/libtessera.a"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
