#!/usr/bin/env bash
# Python package test (CI runs it; needs neither a GPU nor torch): builds and installs the package
# with pip (scikit-build-core + nanobind; this compiles the CUDA kernels) into a virtual environment,
# then runs tests/python. The torch/GPU tests skip cleanly unless torch and an sm_80+ GPU are present.
#
#   VENV=<dir>          the virtual environment (default build-python/venv; created with
#                       --system-site-packages so an installed torch is used)
#   BUILD_DIR=<dir>     the CMake build folder, kept for incremental rebuilds (default build-python/cmake);
#                       scripts/test.sh's folder (build) works too: its kernel objects are reused
#   JOBS=<n>            parallel compile jobs (default: nproc)
#   PYTHON=<python3>    the interpreter that creates the venv
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-build-python/venv}
build=${BUILD_DIR:-build-python/cmake}
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)}

[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv --system-site-packages "$venv"
py="$venv/bin/python"
pip=("$py" -m pip --disable-pip-version-check)

# Build requirements (pyproject's, plus cmake/ninja from PyPI only where the system ones are too old),
# installed here so that pip can build without isolation and reuse $build between runs.
"${pip[@]}" install --quiet "scikit-build-core>=0.10" "nanobind>=2.0" "pytest>=7"
mapfile -t extra < <("$py" -c 'from scikit_build_core.build import get_requires_for_build_wheel as g
for r in g():
    if not r.startswith(("scikit-build-core", "nanobind")): print(r)')
[ ${#extra[@]} -eq 0 ] || "${pip[@]}" install --quiet "${extra[@]}"

"${pip[@]}" install --no-build-isolation --config-settings=build-dir="$build" .
"$py" -c 'import tessera; print("tessera", tessera.__version__, "configs:", [n for n, _ in tessera.configs()])'
"$py" -m pytest tests/python -p no:cacheprovider -rs -q
