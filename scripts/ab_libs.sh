#!/usr/bin/env bash
# Same-run A/B of two builds of the library: every line of ARGS_FILE (arguments of `tessera gemm`,
# e.g. "--m 8192 --n 8192 --k 8192 --dtype bf16", run against cuBLASLt; or a whole `attention ...`
# command, timed alone) runs with NEW_DIR's and OLD_DIR's libtessera.so in turns, for ROUNDS rounds,
# so that both see the same clocks. The CLI is
# build/tools/tessera (it loads the library named by LD_LIBRARY_PATH). For a refactor whose SASS
# changed: build the library before and after here, carry both (docs/ARCHITECTURE.md).
# bench/ab_kernel_paths.args covers the sm90 GEMM kernel's paths (tiles, epilogues, dtypes, split-K)
# and the decode attention kernel.
# A change that an override can undo needs one build: pass the same folder twice and the override
# in OLD_ENV (e.g. OLD_ENV=TESSERA_SM90_EPILOGUE=staged), which the old runs get.
# Usage: [OLD_ENV=VAR=VALUE] scripts/ab_libs.sh NEW_DIR OLD_DIR ARGS_FILE [ROUNDS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
new=$(cd "$1" && pwd) old=$(cd "$2" && pwd) args=$3 rounds=${4:-2}
echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): tessera and the anchor per line, new vs old"
for round in $(seq "$rounds"); do
  for v in new old; do
    dir=$new extra=
    [ "$v" = old ] && dir=$old extra=${OLD_ENV:-}
    while read -r line; do
      [ -z "$line" ] && continue
      case "$line" in \#*) continue ;; esac
      cmd="gemm $line --compare cublas"
      case "$line" in attention*) cmd=$line ;; esac
      # shellcheck disable=SC2086
      env $extra LD_LIBRARY_PATH="$dir" build/tools/tessera $cmd 2>&1 |
        grep -iE "^tessera|^cuBLAS|^ratio" | awk '{printf "%s %s %s | ", $1, $2, $4}'
      echo " [$v r$round] $line"
    done < "$args"
  done
done
