#!/usr/bin/env bash
# Same-run A/B of a kernel-source change, on the GPU machine (after scripts/gpu_check.sh has built
# build/): keeps the library built from the tree as it is ("new"), rebuilds it with FILE replaced by
# OLD ("old", e.g. `git show HEAD:src/gemm/sm90/kernel.cuh > old.cuh`), restores FILE, then runs every
# line of ARGS_FILE (arguments of `tessera gemm`, e.g. "--m 8192 --n 8192 --k 8192 --dtype bf16") on
# both libraries in turns for ROUNDS rounds, so that both see the same clocks. What a refactor whose
# SASS changed needs before it lands (docs/ARCHITECTURE.md); the rebuild costs minutes of device time.
# Usage: scripts/ab_kernel.sh FILE OLD ARGS_FILE [ROUNDS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
file=$1 old=$2 args=$3 rounds=${4:-2}
work=$(mktemp -d)
mkdir -p "$work/new" "$work/old"
cp build/libtessera.so "$work/new/"
cp "$file" "$work/file.keep"
trap 'cp "$work/file.keep" "$file"' EXIT
cp "$old" "$file"
ninja -C build tessera_shared > "$work/rebuild.log" 2>&1 || { tail -20 "$work/rebuild.log"; exit 1; }
cp build/libtessera.so "$work/old/"
cp "$work/file.keep" "$file"
ninja -C build tessera_shared > "$work/rebuild2.log" 2>&1 || { tail -20 "$work/rebuild2.log"; exit 1; }
scripts/ab_libs.sh "$work/new" "$work/old" "$args" "$rounds"
