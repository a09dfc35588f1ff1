#!/usr/bin/env bash
# Split-K sweep for the cost model's fix-up term: long K over few tiles, each shape on a fixed config
# with the number of K ranges forced (TESSERA_GEMM_SPLITS), then the heuristic's own pick; cuBLASLt
# in the same process for every line (bench/ab.py). Usage: bench/splitk_sweep.sh TESSERA_CLI
set -uo pipefail  # a refused variant prints its error and the sweep goes on
bin=${1:?usage: bench/splitk_sweep.sh path/to/tessera}
here=$(cd "$(dirname "$0")" && pwd)
ab() { python3 "$here/ab.py" --bin "$bin" --iters 30 "$@"; }
c128=sm90_128x128x64_s6_coop
c64=sm90_64x64x64_s13_c1x2_coop
c128x64=sm90_128x64x64_s8_c1x2_coop
c256=sm90_128x256x64_s4_c2_coop
for s in 1 8 16 33 66 128; do TESSERA_GEMM_SPLITS=$s ab --label "s$s" "128x128x65536:tn:--config=$c128"; done
for s in 8 16 33; do TESSERA_GEMM_SPLITS=$s ab --label "s$s" "128x128x65536:tn:--config=$c64"; done
for s in 4 8 16 33; do TESSERA_GEMM_SPLITS=$s ab --label "s$s" "256x256x32768:tn:--config=$c128" "256x256x32768:tn:--config=$c128x64"; done
for s in 2 4 8; do TESSERA_GEMM_SPLITS=$s ab --label "s$s" "512x512x16384:tn:--config=$c128" "512x512x16384:tn:--config=$c128x64"; done
for s in 1 2; do TESSERA_GEMM_SPLITS=$s ab --label "s$s" "1024x1024x8192:tn:--config=$c128" "1024x1024x8192:tn:--config=$c128x64"; done
for s in 1 2 4; do TESSERA_GEMM_SPLITS=$s ab --label "s$s" "256x4096x14336:tn:--config=$c256" "128x4096x14336:tn:--config=$c128x64"; done
for s in 1 2 4 8; do TESSERA_GEMM_SPLITS=$s ab --label "s$s" "128x4096x4096:tn:--config=$c128x64" "1024x1024x1024:tn:--config=$c128"; done
# The fix-up's fixed cost: ranges of 1-2 k-tiles
for s in 1 33 66 128; do TESSERA_GEMM_SPLITS=$s ab --label "s$s" "128x128x8192:tn:--config=$c128" "128x128x4096:tn:--config=$c64"; done
ab --label heur 128x128x65536 256x256x32768 512x512x16384 1024x1024x8192 2048x2048x8192 128x4096x14336 256x4096x14336
