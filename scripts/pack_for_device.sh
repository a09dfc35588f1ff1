#!/usr/bin/env bash
# Packs what the lent GPU machine runs into one archive, built here so that no device time goes to
# compiling: libtessera.so, the CLI, the GPU tests and the Python package (tessera._C built for the
# device's Python, 3.12 by default, with nanobind from PyPI). The device has no network; carry the
# archive's folder (ignored, e.g. .devcarry/, listed in .git/info/exclude) and unpack it there:
#   tar -xJf .devcarry/build.tar.xz && export LD_LIBRARY_PATH=$PWD/build PYTHONPATH=$PWD/build/python
# Usage: scripts/pack_for_device.sh [OUT=.devcarry/build.tar.xz] [PYTHON=python3.12]
# (~25 MB: the library and the module each hold every kernel; the device's copy limit is 64 MiB.)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.devcarry/build.tar.xz}
py=${2:-python3.12}
if ! "$py" --version > /dev/null 2>&1; then  # a pyenv shim of a version not selected: its own binary
  for cand in "$(pyenv root 2> /dev/null)"/versions/3.12*/bin/python3.12; do [ -x "$cand" ] && py=$cand; done
fi
"$py" --version > /dev/null 2>&1 || { echo "pack_for_device: no $py here (pass a Python path)" >&2; exit 1; }
nb=.devcarry/nanobind
mkdir -p "$(dirname "$out")" "$nb"
if [ ! -d "$nb/nanobind" ]; then
  "$py" -m pip download --quiet --disable-pip-version-check --no-deps nanobind -d "$nb/wheel"
  "$py" -m zipfile -e "$nb"/wheel/nanobind-*.whl "$nb"
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_TOOLS=ON \
  -DTESSERA_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$py" "-Dnanobind_DIR=$PWD/$nb/nanobind/cmake" > /dev/null
ninja -C build tessera_shared tessera_cli tessera_gpu_tests _C
tar -cf - build/libtessera.so build/tools/tessera build/tests/tessera_gpu_tests build/python/tessera |
  xz -1 -T2 > "$out"
ls -la "$out"
