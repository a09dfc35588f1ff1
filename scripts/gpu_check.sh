#!/usr/bin/env bash
# GPU truth in one call (run on the lent H100/H200 with the build carried, or it builds):
#   scripts/gpu_check.sh [all|tests|bench|gemm|attention|sanitize|host|python|decode|pytest|ptx|ladder] [extra args for bench/gemm_suite.py]
#   (bench = the GEMM and attention benchmarks; gemm / attention = one of them; host = the host-cost
#   microbenchmark; python = the Python package's benchmarks against torch, decode attention included;
#   decode = only the decode-attention benchmark (DECODE_ATTN_ARGS=--quick); pytest = its tests; ptx = the
#   sm80 families run from their PTX, CUDA_FORCE_PTX_JIT=1, as on a GPU newer than their SASS; ladder = the
#   examples/ladder rungs, verified and timed: docs/ladder.md's tables)
# The results name the commit from git, or TESSERA_COMMIT=<hash> when set: pass it where the tree was
# copied with a stale .git (the lent machine's copy has reported an older HEAD than the tree it ran).
# Writes under $OUT (default ./gpu_out): gpu.txt, tests.log, sanitize.log, bench.log and the
# benchmark's JSON + Markdown. Never changes clocks, power or MIG settings.
# A machine with no network and no GoogleTest (the lent device): carry the CuTe headers
# (deps/cutlass/cutlass_library/source/include) and a copy of GoogleTest (include/gtest,
# lib/libgtest*.a) in an ignored folder, and export GTEST_ROOT=<that folder>; the whole build takes
# ~150 s on 16 cores; or build here and carry scripts/pack_for_device.sh's archive (unpacked into
# build/, the Python module included: no device time spent compiling). bench/ab.py (same-run A/B of
# a few shapes) and bench/microbench/sm90_timeline.cu (per-CTA timelines) are the tools for a change
# under study.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
shift || true
out=${OUT:-gpu_out}
mkdir -p "$out"
build=${BUILD_DIR:-build}
export LD_LIBRARY_PATH="$PWD/$build:${LD_LIBRARY_PATH:-}"  # the CLI and GPU tests use libtessera.so
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "${TESSERA_COMMIT:-unknown}")
export TESSERA_COMMIT=${TESSERA_COMMIT:-$commit}
export TESSERA_TUNE_CACHE=""  # measure the heuristic's choices, not a `tessera tune` cache left on the machine
status=0

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  echo "commit $TESSERA_COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
} >"$out/gpu.txt" 2>&1
cat "$out/gpu.txt"

if [ ! -x "$build/tests/tessera_gpu_tests" ] || [ ! -x "$build/tools/tessera" ]; then
  echo "== building (no carried build found)"
  JOBS=$(nproc) BUILD_DIR=$build scripts/setup_deps.sh >/dev/null && cmake -S . -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release ${TESSERA_CMAKE_ARGS:-} >/dev/null && ninja -C "$build" >"$out/build.log" 2>&1 ||
    { echo "build failed"; grep -B2 -A12 -m3 "error" "$out/build.log"; tail -30 "$out/build.log"; exit 1; }
  # NANOBIND_DIR=<nanobind package folder>: also the Python module (tessera._C) for python3, into
  # $build/python/tessera (a failure here leaves the library build as it is).
  if [ -n "${NANOBIND_DIR:-}" ]; then
    cmake -S . -B "$build" -DTESSERA_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$(command -v python3)" \
      "-Dnanobind_DIR=$NANOBIND_DIR/cmake" >>"$out/build.log" 2>&1 && ninja -C "$build" _C >>"$out/build.log" 2>&1 ||
      { echo "Python module build failed"; tail -30 "$out/build.log"; }
  fi
fi

if [ "$mode" = all ] || [ "$mode" = tests ]; then
  echo "== GPU tests"
  "$build/tests/tessera_gpu_tests" --gtest_brief=1 >"$out/tests.log" 2>&1 || status=1
  tail -25 "$out/tests.log"
  # On Hopper the sm90 attention family is the default; run the attention suite again on the sm80
  # family so that both stay covered.
  if nvidia-smi --query-gpu=compute_cap --format=csv,noheader | grep -q "^9.0"; then
    echo "== GPU attention tests, sm80 family (TESSERA_ATTN_ARCH=80)"
    TESSERA_ATTN_ARCH=80 "$build/tests/tessera_gpu_tests" --gtest_brief=1 --gtest_filter='*Attn*' \
      >"$out/tests_attn_sm80.log" 2>&1 || status=1
    tail -8 "$out/tests_attn_sm80.log"
    # Causal d = 64 runs the 128-row tile up to 1024 query rows (attention/api.cpp): its 192-row
    # tile at every sequence pair too.
    echo "== GPU attention tests, d64 on fa3_sm90_d64_192x128"
    TESSERA_ATTN_CONFIG=fa3_sm90_d64_192x128 "$build/tests/tessera_gpu_tests" --gtest_brief=1 \
      --gtest_filter='*AttnCross*/d64_*' >"$out/tests_attn_d64_192.log" 2>&1 || status=1
    tail -4 "$out/tests_attn_d64_192.log"
  fi
  # Decode calls combine their key splits in the decode kernel where a launch slot has counters; the
  # combine kernel (no counters) on the same cases.
  echo "== GPU decode tests, splits combined by the second kernel (TESSERA_ATTN_DYNAMIC=0)"
  TESSERA_ATTN_DYNAMIC=0 "$build/tests/tessera_gpu_tests" --gtest_brief=1 \
    --gtest_filter='*AttnDecode*:*KvCache*:*AttnWindow*' >"$out/tests_decode_combine_kernel.log" 2>&1 || status=1
  tail -4 "$out/tests_decode_combine_kernel.log"
fi

if [ "$mode" = all ] || [ "$mode" = sanitize ]; then
  echo "== compute-sanitizer (memcheck, racecheck) on small cases"
  {
    for cfg in sm90_128x192x64_s5_c2_coop sm90_128x256x64_s4_c2_coop sm90_64x256x64_s5_c2_pingpong sm90_128x128x64_s6_coop sm90_128x64x64_s8_c1x2_coop sm90_64x96x64_s10_c2_coop sm90_64x64x64_s13_c2_coop sm90_64x64x64_s13_c1x2_coop sm90_192x128x64_s4_c1x2_coop sm90_192x192x64_s4_c2_coop sm80_128x256x64_s3_w8 sm80_64x64x32_s3_w4 simt_fallback; do
      for tool in memcheck racecheck; do
        echo "-- $tool $cfg"
        compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 200 --n 136 --k 72 \
          --batch 2 --dtype bf16 --layout tn --beta 0.5 --bias row --config $cfg --verify --iters 1 --warmup 0 ||
          echo "SANITIZER_FAIL $tool $cfg"
        case $cfg in sm90_*)  # beta = 0 with an aligned 16-bit D: the TMA-store epilogue
          echo "-- $tool $cfg TMA store"
          compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 200 --n 136 --k 72 \
            --batch 2 --dtype bf16 --layout nt --bias col --activation silu --config $cfg --verify --iters 1 \
            --warmup 0 ||
            echo "SANITIZER_FAIL $tool $cfg TMA store";;
        esac
      done
    done
    for arch in "" 80; do  # the device's default family, then the sm80 one
      for d in 64 128; do
        for tool in memcheck racecheck; do
          echo "-- $tool attention d$d causal, ragged, family ${arch:-default}"
          TESSERA_ATTN_ARCH=$arch compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" attention \
            --b 2 --hq 4 --hkv 2 --sq 200 --sk 177 --d $d --causal --dtype bf16 --verify --iters 1 --warmup 0 ||
            echo "SANITIZER_FAIL $tool attention d$d ${arch:-default}"
        done
      done
    done
    # decode: split keys merged in the kernel (wide CTAs at d64), two row tiles on shared rings, wide CTAs
    # sharing a KV head, a wide cluster combine
    for tool in memcheck racecheck; do
      for shape in "--b 1 --hq 8 --hkv 2 --sq 1 --sk 3000 --d 64" "--b 2 --hq 32 --hkv 4 --sq 4 --sk 1000 --d 128 --causal" \
                   "--b 1 --hq 48 --hkv 4 --sq 3 --sk 700 --d 64" "--b 8 --hq 64 --hkv 8 --sq 1 --sk 2000 --d 64"; do
        echo "-- $tool attention decode $shape"
        compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" attention $shape --dtype bf16 --verify \
          --iters 1 --warmup 0 || echo "SANITIZER_FAIL $tool attention decode $shape"
      done
    done
    for tool in memcheck racecheck; do  # varlen: ragged sequences, bad cu_seqlens clamped, every family's row
      echo "-- $tool attention varlen"
      compute-sanitizer --tool $tool --error-exitcode 9 "$build/tests/tessera_gpu_tests" --gtest_brief=1 \
        --gtest_filter='AttnVarlen.BadCuSeqlensAreClamped:AttnVarlen.GraphCAbiBudgetNoLse' ||
        echo "SANITIZER_FAIL $tool attention varlen"
    done
    for cfg in sm90_128x128x64_s6_coop sm90_128x64x64_s8_c1x2_coop sm90_64x96x64_s10_c2_coop sm90_64x64x64_s13_c2_coop sm90_64x64x64_s13_c1x2_coop; do
      for tool in memcheck racecheck; do  # the flipped orientation: transposed sub-tiles, C by ldmatrix.trans
        echo "-- $tool $cfg+flip"
        compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 200 --n 136 \
          --k 72 --batch 2 --dtype bf16 --layout tn --beta 0.5 --bias row --activation gelu --config $cfg+flip --verify \
          --iters 1 --warmup 0 || echo "SANITIZER_FAIL $tool $cfg flipped"
      done
    done
    for cfg in sm90_128x256x64_s4_c2_coop sm90_128x192x64_s5_c2_coop sm90_128x128x64_s6_coop sm90_128x64x64_s8_c1x2_coop sm90_64x96x64_s10_c2_coop sm90_64x64x64_s13_c2_coop sm90_64x64x64_s13_c1x2_coop; do
      for tool in memcheck racecheck; do  # the one-tile kernel: one wave, a plain epilogue, batches in the grid
        for flip in "" +flip; do
          case $cfg$flip in sm90_128x256*+flip|sm90_128x192*+flip) continue;; esac  # no transposed store there
          echo "-- $tool $cfg$flip one-tile"
          compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 200 --n 136 --k 72 \
            --batch 2 --dtype bf16 --layout tn --config $cfg$flip --verify --iters 1 --warmup 0 ||
            echo "SANITIZER_FAIL $tool $cfg$flip one-tile"
        done
      done
    done
    for cfg in sm90_128x128x64_s6_coop sm90_128x256x64_s4_c2_coop sm90_64x256x64_s5_c2_pingpong; do  # split-K fix-up, 5 ranges (> one group of 4)
      for tool in memcheck racecheck; do
        echo "-- $tool $cfg split-K 5"
        TESSERA_GEMM_SPLITS=5 compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 300 \
          --n 520 --k 1000 --batch 2 --dtype bf16 --layout nt --beta 0.5 --config $cfg --verify --iters 1 --warmup 0 ||
          echo "SANITIZER_FAIL $tool $cfg split-K"
      done
    done
    for cfg in sm90_128x256x64_s4_c2_coop sm90_128x128x64_s6_coop sm90_128x64x64_s8_c1x2_coop; do
      for tool in memcheck racecheck; do  # 8-bit operands: K-major copies (K = 72), int32 sums, scaled fp8 sums
        echo "-- $tool $cfg int8 / e4m3"
        compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 200 --n 136 --k 72 \
          --batch 2 --dtype int8 --layout tn --config $cfg --verify --iters 1 --warmup 0 ||
          echo "SANITIZER_FAIL $tool $cfg int8"
        compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 200 --n 136 --k 128 \
          --batch 2 --dtype int8 --layout nn --scales row --out-dtype bf16 --bias row --activation gelu --config $cfg \
          --verify --iters 1 --warmup 0 || echo "SANITIZER_FAIL $tool $cfg int8 dequantised"
        compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 200 --n 136 --k 72 \
          --batch 2 --dtype e4m3 --layout tn --scales row --fast-accum --config $cfg --verify --iters 1 --warmup 0 ||
          echo "SANITIZER_FAIL $tool $cfg e4m3"
        case $cfg in sm90_128x256*) ;; *)  # promoted fp8 sums, split-K over them
          TESSERA_GEMM_SPLITS=3 compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm \
            --m 200 --n 136 --k 1000 --dtype e5m2 --layout tn --beta 0.5 --bias col --config $cfg --verify --iters 1 \
            --warmup 0 || echo "SANITIZER_FAIL $tool $cfg e5m2 promoted split-K"
          # block scales (their own kernels): ragged K blocks and rows, split-K folding scaled sums
          TESSERA_GEMM_SPLITS=3 compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm \
            --m 200 --n 136 --k 1000 --dtype e4m3 --scales block --d-row-major --layout nn --beta 0.5 --bias col \
            --config $cfg --verify --iters 1 --warmup 0 || echo "SANITIZER_FAIL $tool $cfg e4m3 block split-K";;
        esac
      done
    done
    # Split-K in one round (one tile or cluster tile, 33 ranges): the parallel fold of the narrow
    # tiles (every range waits for the others and folds its share), and a wide tile's serial fold.
    for cfg in sm90_128x128x64_s6_coop sm90_64x64x64_s13_c2_coop sm90_128x64x64_s8_c1x2_coop sm90_64x256x64_s5_c2_pingpong; do
      for tool in memcheck racecheck; do
        echo "-- $tool $cfg split-K 33, one round"
        TESSERA_GEMM_SPLITS=33 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm \
          --m 120 --n 60 --k 2100 --dtype bf16 --layout tn --beta 0.5 --bias col --config $cfg --verify --iters 1 \
          --warmup 0 || echo "SANITIZER_FAIL $tool $cfg split-K one round"
      done
    done
    for tool in memcheck racecheck; do  # ping-pong: several tiles per CTA, the warpgroups alternating
      echo "-- $tool ping-pong, 140 tiles"
      compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 8960 --n 256 --k 200 \
        --dtype bf16 --layout tn --beta 0.5 --bias row --config sm90_64x256x64_s5_c2_pingpong --verify --iters 1 \
        --warmup 0 || echo "SANITIZER_FAIL $tool ping-pong"
    done
    for tool in memcheck racecheck; do  # a 16-bit D whose rows end mid-chunk, padded: the threads' stores
      echo "-- $tool ragged padded 16-bit D"
      compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 130 --n 390 --k 72 --batch 2 \
        --dtype bf16 --layout tn --d-row-major --ldd 400 --beta 0.5 --config sm90_128x128x64_s6_coop --verify \
        --iters 1 --warmup 0 || echo "SANITIZER_FAIL $tool ragged padded D"
    done
    for tool in memcheck racecheck; do  # a decode launch with the L2 warm-up at entry (more k-tiles than K has)
      echo "-- $tool L2 warm-up, decode pairs"
      TESSERA_GEMM_L2_WARM=16 compute-sanitizer --tool $tool --error-exitcode 9 "$build/tools/tessera" gemm --m 128 \
        --n 1024 --k 520 --batch 2 --dtype bf16 --layout tn --beta 0.5 --verify --iters 1 --warmup 0 \
        || echo "SANITIZER_FAIL $tool L2 warm-up"
    done
    echo "-- memcheck padded path (unaligned K)"
    compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tools/tessera" gemm --m 130 --n 70 --k 33 \
      --dtype f16 --layout nt --verify --iters 1 --warmup 0 || echo "SANITIZER_FAIL memcheck padded"
  } >"$out/sanitize.log" 2>&1
  grep -E "ERROR SUMMARY|SANITIZER_FAIL|PASS|FAIL" "$out/sanitize.log" | sort | uniq -c
  grep -q SANITIZER_FAIL "$out/sanitize.log" && status=1
fi

if [ "$mode" = all ] || [ "$mode" = bench ] || [ "$mode" = gemm ]; then
  echo "== mma.sync ceiling"
  if [ -x "$build/mma_sync_peak" ] || nvcc -O3 -gencode=arch=compute_80,code=sm_90 \
      bench/microbench/mma_sync_peak.cu -o "$build/mma_sync_peak" 2>/dev/null; then
    "$build/mma_sync_peak" | tee -a "$out/gpu.txt"
  fi
  echo "== benchmark vs cuBLASLt"
  PYTHONUNBUFFERED=1 python3 bench/gemm_suite.py --bin "$build/tools/tessera" --out "$out/results" "$@" 2>&1 | tee "$out/bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

if [ "$mode" = all ] || [ "$mode" = bench ] || [ "$mode" = attention ]; then
  echo "== attention benchmark vs torch SDPA (flash, cuDNN)"
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 python3 bench/attention_bench.py --lib "$build/libtessera.so" --out "$out/results" ${ATTN_ARGS:-} 2>&1 |
    tee "$out/attention.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  # ATTN_ARCH80=1: the same suite on the sm80 (mma.sync) family, for a same-run comparison on Hopper.
  if [ -n "${ATTN_ARCH80:-}" ]; then
    echo "== attention benchmark, sm80 family (TESSERA_ATTN_ARCH=80)"
    # shellcheck disable=SC2086
    TESSERA_ATTN_ARCH=80 PYTHONUNBUFFERED=1 python3 bench/attention_bench.py --lib "$build/libtessera.so" \
      --out "$out/results" --tag sm80 ${ATTN_ARGS:-} 2>&1 | tee -a "$out/attention.log"
  fi
  # Alternative configurations to compare in the same call: ATTN_VARIANTS="config:head_dims ...".
  for v in ${ATTN_VARIANTS:-}; do
    echo "== attention variant ${v%%:*} (head dims ${v##*:})"
    # shellcheck disable=SC2086
    TESSERA_ATTN_CONFIG=${v%%:*} PYTHONUNBUFFERED=1 python3 bench/attention_bench.py --lib "$build/libtessera.so" \
      --out "$out/results" --head-dims "${v##*:}" --tag "${v%%:*}" ${ATTN_ARGS:-} 2>&1 | tee -a "$out/attention.log"
  done
fi

if [ "$mode" = host ]; then
  echo "== host cost per call (bench/microbench/host_overhead.cu)"
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/microbench/host_overhead.cu -Iinclude \
    -L"$build" -ltessera -lcublasLt -o "$build/host_overhead" && "$build/host_overhead" 128 4096 4096 | tee "$out/host.txt" &&
    "$build/host_overhead" 64 64 64 | tee -a "$out/host.txt" || status=1
fi

if [ "$mode" = pytest ]; then
  echo "== Python tests (tests/python)"
  PYTHONPATH="$PWD/$build/python:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 python3 -m pytest tests/python \
    -p no:cacheprovider -q -rs 2>&1 | tail -25 | tee "$out/pytest.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

if [ "$mode" = python ]; then
  export PYTHONPATH="$PWD/$build/python:${PYTHONPATH:-}"
  echo "== host cost per Python call (bench/host_cost.py)"
  PYTHONUNBUFFERED=1 python3 bench/host_cost.py --json "$out/host_cost.json" 2>&1 | tee "$out/host_cost.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  echo "== decode-step GEMMs replayed from CUDA graphs (bench/decode_gemm.py)"
  PYTHONUNBUFFERED=1 python3 bench/decode_gemm.py --json "$out/decode_gemm.json" ${DECODE_ARGS:-} 2>&1 | tee "$out/decode_gemm.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

if [ "$mode" = python ] || [ "$mode" = decode ]; then
  echo "== decode attention replayed from CUDA graphs vs SDPA (python -m tessera.bench attention --decode)"
  # shellcheck disable=SC2086
  PYTHONPATH="$PWD/$build/python:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 python3 -m tessera.bench attention --decode \
    --json "$out/decode_attention.json" ${DECODE_ATTN_ARGS:-} 2>&1 | tee "$out/decode_attention.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

if [ "$mode" = ptx ]; then
  # The sm80 kernels and the CUDA-core fallback from their compute_80 PTX: the driver JIT-compiles
  # them, as it would on a cc 10.x / 12.x GPU (the sm_90a kernels have no PTX: the filters keep to
  # the sm80 families).
  echo "== sm80 families from PTX (CUDA_FORCE_PTX_JIT=1)"
  CUDA_FORCE_PTX_JIT=1 TESSERA_ATTN_ARCH=80 timeout 500 "$build/tests/tessera_ptx_check" >"$out/ptx.log" 2>&1 ||
    status=1
  grep -c "^ok" "$out/ptx.log"; grep -E "FAIL|failure" "$out/ptx.log"
fi

if [ "$mode" = all ] || [ "$mode" = ladder ]; then
  # The learning ladder: every rung verified, timed beside cuBLAS / SDPA; docs/ladder.md's tables.
  echo "== ladder"
  if [ -d "$build/examples/ladder" ]; then
    mkdir -p "$out/results"
    timeout 300 python3 examples/ladder/run_ladder.py --build-dir "$build" --out "$out/results" \
      --md "$out/results/ladder.md" >"$out/ladder.log" 2>&1 || status=1
    tail -3 "$out/ladder.log"
  else
    echo "no ladder in $build (-DTESSERA_BUILD_LADDER=OFF)"
  fi
fi

# The lease returns at most 8 files: pack the benchmark outputs (JSON, Markdown, PNG) into one.
if [ -d "$out/results" ]; then
  tar -czf "$out/results.tgz" -C "$out" results && rm -rf "$out/results"
fi
exit $status
