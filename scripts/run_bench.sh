#!/usr/bin/env bash
# The main job: build tessera (Release) and run the GEMM benchmark suite against cuBLASLt on this
# machine's GPU, writing JSON and Markdown results into bench/results/.
#
#   scripts/run_bench.sh            full suite (bf16 and fp16)
#   scripts/run_bench.sh --quick    6 shapes, bf16
#   (any other arguments go to bench/gemm_suite.py; see its --help)
#
# Exit code: 3 without a GPU; otherwise the suite's (0 = every shape ran and verified).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/setup_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TOOLS=ON
cmake --build build --target tessera_cli  # the CLI and the library; the tests are not needed here

cli=build/tools/tessera
no_gpu() {
  echo "no GPU: the GEMM benchmark needs an NVIDIA GPU (sm_80+)${1:+ ($1)}" >&2
  exit 3
}
# The CLI asks the CUDA runtime itself, which is what the benchmark needs (nvidia-smi may list a
# GPU that this process cannot use, or be missing where the runtime works).
info=$("$cli" info) || no_gpu "\`$cli info\` failed"
if grep -q "no CUDA device" <<<"$info"; then
  no_gpu "$(grep "no CUDA device" <<<"$info")"
fi
cc=$(awk '/compute capability/ { print $3; exit }' <<<"$info")
if [ "${cc%%.*}" -lt 8 ]; then
  no_gpu "device 0 has compute capability $cc"
fi
echo "$info"
echo

status=0
python3 bench/gemm_suite.py --bin "$cli" --out bench/results "$@" || status=$?

# Attention against torch SDPA (flash and cuDNN) runs where torch with CUDA is installed.
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  cmake --build build --target tessera_shared
  attn_args=()
  for a in "$@"; do [ "$a" = --quick ] && attn_args+=(--quick); done
  python3 bench/attention_bench.py --lib build/libtessera.so --out bench/results "${attn_args[@]}" || status=$?
else
  echo "attention benchmark skipped: it needs torch with CUDA (pip install torch)"
fi
exit $status
