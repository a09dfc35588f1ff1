// Where one launch of an sm90 GEMM configuration spends its time, per CTA: the kernel compiled with
// its timeline probe (TESSERA_SM90_PROBE, gemm/sm90/kernel.cuh) stamps %globaltimer at CTA entry,
// the consumers' start, every work item's mainloop start and end, and exit. Prints a summary (launch
// spread, first-tile start, mainloop and epilogue times, finish-time spread, per-SM-group finish
// times) and, with --dump, one line per CTA.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DCFG=14 \
//     -Isrc -Iinclude -isystem <cutlass>/include bench/microbench/sm90_timeline.cu -lcuda -o sm90_timeline
//   ./sm90_timeline M N K [--stream-k | --splits S] [--flush] [--dump] [--ktiles]   (bf16, A and B K-major, D bf16 row-major)
//   --splits S: split-K with S ranges (the "epilogue" row then holds publish, wait and fold)
//   --flush: overwrite 256 MB before the measured launch, so that its operands come from DRAM
//   ONE_TILE=0 keeps a one-wave launch on the general kernel (else the row's one-tile kernel runs it;
//     the probe indexes CTAs by blockIdx.x, so read one-tile runs with a single row of tiles, M <= BM)
//   REPS=R (with -DWITH_CUBLAS): R alternating launches of ours and cuBLASLt's, between stamps and as
//     the suite times them (an event pair around each), and ours' D checked against cuBLASLt's
//   --ktiles: the pipeline per k-tile (a CTA's first probe::kKtiles): a load's latency (producer's
//     issue -> consumers' `full` passed), the loads in flight at each issue, the consumers' hold
//     (`full` -> release) and the refill's delay (release of a stage -> the producer's next issue into it)
//
// Every run also prints the prologue and epilogue step by step (TESSERA_SM90_PROBE_PM: globaltimer
// and SM cycles from each CTA's own entry; the first load's issue and landing), and the GPU's own
// gaps around the launch: a spin kernel keeps the GPU busy while the host enqueues a stamp kernel,
// the launch and another stamp kernel, so "between stamps" is the launch's cost on the GPU with no
// host time in it (an empty kernel of the same shape costs ~3.7 us between stamps on an H100, two
// stamps back to back ~1.7). TWICE=1 runs the kernel twice between the stamps (is its code warm?).
// Built with -DWITH_CUBLAS it times cuBLASLt's kernel for the same problem between the same stamps:
//   nvcc ... -DCFG=13 -DWITH_CUBLAS -Itools bench/microbench/sm90_timeline.cu tools/cublaslt_gemm.cpp \
//     tools/gemm_problem.cpp tools/args.cpp tools/json.cpp tools/run_common.cpp -Lbuild -ltessera \
//     -lcublasLt -lcublas -lcuda
//
// CFG is a row id of src/gemm/sm90/configs.def. The probe adds a few instructions to one thread per
// CTA; compare its kernel time with the library's before trusting small differences.
#define TESSERA_SM90_PROBE
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "check.hpp"
#include "gemm/sm90/launch.cuh"
#ifdef WITH_CUBLAS
#include "cublaslt_gemm.hpp"
#endif

#ifndef CFG
#define CFG 14
#endif

namespace gi = tessera::gemm_impl;
namespace probe = gi::sm90::probe;

__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = __float2bfloat16(float(h & 0xffff) / 32768.0f - 1.0f);
  }
}

__global__ void stamp(unsigned long long* t) {
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(*t));
}
__device__ unsigned long long stamps[2];
// Keeps the GPU busy while the host enqueues what follows, so that the gaps below are the GPU's.
__global__ void spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

static double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s M N K [--stream-k | --splits S] [--flush] [--dump] [--ktiles]\n", argv[0]);
    return 2;
  }
  const int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
  bool stream_k = false, dump = false, flush = false, ktiles = false;
  int splits = 1;
  for (int i = 4; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--splits") && i + 1 < argc) splits = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--stream-k")) stream_k = true;
    if (!std::strcmp(argv[i], "--flush")) flush = true;
    if (!std::strcmp(argv[i], "--dump")) dump = true;
    if (!std::strcmp(argv[i], "--ktiles")) ktiles = true;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  __nv_bfloat16 *a, *b, *d;
  CHECK(cudaMalloc(&a, size_t(M) * K * 2));
  CHECK(cudaMalloc(&b, size_t(N) * K * 2));
  CHECK(cudaMalloc(&d, size_t(M) * N * 2));
  fill<<<1024, 256>>>(a, size_t(M) * K, 1);
  fill<<<1024, 256>>>(b, size_t(N) * K, 2);
  CHECK(cudaGetLastError());

  gi::GemmParams p;
  p.m = M, p.n = N, p.k = K, p.batch = 1;
  p.a = a, p.lda = K, p.b = b, p.ldb = K;
  p.epi.d = d, p.epi.ldd = N, p.epi.d_dtype = gi::kBF16, p.epi.d_vec = p.epi.d_tma = N % 8 == 0;
  // INTERLEAVE=I: the same bytes and FLOPs as I batches of M x N/I x K whose B rows interleave (batch
  // b's row j is B's row I j + b, A broadcast): each tile's weight rows spread over I times the address
  // range. Is the one-wave launch's tail a property of each tile's contiguous 1 MB of weights?
  if (const char* il = std::getenv("INTERLEAVE")) {
    const int I = std::atoi(il);
    p.n = N / I, p.batch = I, p.ldb = int64_t(K) * I, p.batch_stride_b = K, p.batch_stride_a = 0;
    p.epi.ldd = N / I, p.epi.batch_stride_d = int64_t(M) * (N / I);
  }
  // The launch as gemm/launch_plan.cpp would plan it for this config (the microbench calls the
  // launcher directly, bypassing the plan, to time one config).
  using Shape = gi::sm90::ConfigShape<CFG>;
  gi::sm90::Launch dec;
  dec.stream_k = stream_k;
  dec.splits = splits;
  dec.clusters = gi::sm90::prepare<CFG, gi::kBF16, true, true>(prop.multiProcessorCount);
  if (dec.clusters <= 0) CHECK(cudaError_t(-dec.clusters));
  dec.epi_mode = gi::sm90::epilogue_mode(gi::sm90::supports_flip(Shape::BM, Shape::BN, Shape::Pingpong), gi::kBF16,
                                         p.epi, splits, gi::sm90::kEpiAuto);
  gi::sm90::Grid grid;
  gi::sm90::grid_of({Shape::BM, Shape::BN, Shape::BK, Shape::ClusterM, Shape::ClusterN}, p.m, p.n, p.k, p.batch, splits,
                    stream_k, dec.clusters, &grid);
  const bool one_round = grid.sched.units <= dec.clusters;
  dec.fold_parallel = splits > 1 && one_round && gi::sm90::supports_parallel_fold(Shape::BM, Shape::BN, Shape::Pingpong);
  dec.one_tile = !(std::getenv("ONE_TILE") && !std::strcmp(std::getenv("ONE_TILE"), "0")) &&  // ONE_TILE=0: the general kernel
                 gi::sm90::supports_one_tile(Shape::BM, Shape::BN, Shape::Pingpong) && splits == 1 &&
                 grid.sched.sk_units == 0 && one_round && dec.epi_mode == gi::sm90::kEpiTma;
  void* ws = nullptr;
  if (stream_k) {  // one BM x BN fp32 partial and a flag per CTA: generous for every config
    CHECK(cudaMalloc(&ws, size_t(prop.multiProcessorCount) * (256 * 256 * 4 + 4)));
    dec.workspace = ws;
  } else if (splits > 1) {  // every tile's partials, then a counter or flags per tile (gemm_impl::splitk_bytes)
    const size_t tiles = size_t((M + Shape::BM - 1) / Shape::BM + 1) * ((N + Shape::BN - 1) / Shape::BN + 1);
    CHECK(cudaMalloc(&ws, tiles * splits * (Shape::BM * Shape::BN * 4 + 8)));
    dec.workspace = ws;
  }
  auto run = [&] { CHECK((gi::sm90::launch<CFG, gi::kBF16, true, true>(p, dec, 0))); };
  for (int i = 0; i < 5; ++i) run();
  CHECK(cudaDeviceSynchronize());
  static probe::Cta zero[probe::kCtas];
  CHECK(cudaMemcpyToSymbol(probe::ctas, zero, sizeof(zero)));
  static probe::Ktile zero_k[probe::kCtas][probe::kKtiles];
  CHECK(cudaMemcpyToSymbol(probe::ktiles, zero_k, sizeof(zero_k)));
  if (flush) {  // evict the operands from the 50 MB L2
    void* junk = nullptr;
    CHECK(cudaMalloc(&junk, size_t(256) << 20));
    CHECK(cudaMemset(junk, 1, size_t(256) << 20));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(junk));
  }
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  unsigned long long* st = nullptr;
  CHECK(cudaGetSymbolAddress((void**)&st, stamps));
  // `launch` between two stamp kernels, behind a spin kernel that keeps the GPU busy while the host
  // enqueues them: stamps[0] and stamps[1] are then the GPU's own times around it.
  auto between_stamps = [&](auto&& launch) {
    spin<<<1, 1>>>(200000);
    stamp<<<1, 1>>>(st);
    launch();
    stamp<<<1, 1>>>(st + 1);
  };
  dec.dependent_launch = false;
  CHECK(cudaEventRecord(e0));
  between_stamps([&] {
    if (std::getenv("TWICE")) run();  // the same kernel just before: is its code warm?
    run();
  });
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  static probe::Cta c[probe::kCtas];
  CHECK(cudaMemcpyFromSymbol(c, probe::ctas, sizeof(c)));
  static probe::Ktile kt[probe::kCtas][probe::kKtiles];  // per k-tile stamps (every run records them)
  CHECK(cudaMemcpyFromSymbol(kt, probe::ktiles, sizeof(kt)));

  unsigned long long hs[2];
  CHECK(cudaMemcpyFromSymbol(hs, stamps, sizeof(hs)));
#ifdef WITH_CUBLAS
  {  // the same problem through cuBLASLt between the same stamps
    tessera_cli::GemmProblem q;
    q.m = M, q.n = N, q.k = K, q.op_a = tessera::Op::T, q.op_b = tessera::Op::N, q.layout = "tn";
    q.a = {tessera::DType::BF16, K, M, false, K, 1, 0};
    q.b = {tessera::DType::BF16, K, N, false, K, 1, 0};
    q.d = {tessera::DType::BF16, M, N, true, N, 1, 0};
    tessera_cli::LtHandle h;
    tessera_cli::LtGemm lt(h.get(), q, tessera::DType::BF16, tessera_cli::kCublasLtWorkspaceBytes);
    void* lws; CHECK(cudaMalloc(&lws, tessera_cli::kCublasLtWorkspaceBytes));
    for (int i = 0; i < 5; ++i) lt.run(a, b, nullptr, d, lws, 0);
    double best = 1e9, sum = 0;
    for (int r = 0; r < 5; ++r) {
      between_stamps([&] { lt.run(a, b, nullptr, d, lws, 0); });
      unsigned long long cs[2];
      CHECK(cudaMemcpyFromSymbol(cs, stamps, sizeof(cs)));
      best = std::min(best, (double(cs[1]) - double(cs[0])) * 1e-3), sum += (double(cs[1]) - double(cs[0])) * 1e-3;
    }
    std::printf("  cuBLASLt between stamps: min %.2f us, mean %.2f us (5 launches)\n", best, sum / 5);
    // REPS=R: R alternating launches of ours and cuBLASLt's, (a) each between stamps, (b) as the suite
    // times them (an event pair around each launch, everything enqueued back to back, ours with PDL).
    if (const char* reps_env = std::getenv("REPS")) {
      const int R = std::atoi(reps_env);
      std::vector<double> ours_s, lt_s, ours_e, lt_e;
      for (int r = 0; r < R; ++r) {
        unsigned long long cs[2];
        dec.dependent_launch = false;
        between_stamps(run);
        CHECK(cudaMemcpyFromSymbol(cs, stamps, sizeof(cs)));
        ours_s.push_back((double(cs[1]) - double(cs[0])) * 1e-3);
        between_stamps([&] { lt.run(a, b, nullptr, d, lws, 0); });
        CHECK(cudaMemcpyFromSymbol(cs, stamps, sizeof(cs)));
        lt_s.push_back((double(cs[1]) - double(cs[0])) * 1e-3);
      }
      dec.dependent_launch = true;
      std::vector<cudaEvent_t> ev(4 * R);
      for (auto& e : ev) CHECK(cudaEventCreate(&e));
      for (int r = 0; r < R; ++r) {
        CHECK(cudaEventRecord(ev[4 * r]));
        run();
        CHECK(cudaEventRecord(ev[4 * r + 1]));
        CHECK(cudaEventRecord(ev[4 * r + 2]));
        lt.run(a, b, nullptr, d, lws, 0);
        CHECK(cudaEventRecord(ev[4 * r + 3]));
      }
      CHECK(cudaDeviceSynchronize());
      for (int r = 0; r < R; ++r) {
        float x, y;
        CHECK(cudaEventElapsedTime(&x, ev[4 * r], ev[4 * r + 1]));
        CHECK(cudaEventElapsedTime(&y, ev[4 * r + 2], ev[4 * r + 3]));
        ours_e.push_back(x * 1e3), lt_e.push_back(y * 1e3);
      }
      auto q = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return std::make_pair(v[v.size() / 2], v.front()); };
      std::printf("  REPS %d  between stamps median/min: ours %.2f/%.2f  cuBLASLt %.2f/%.2f | events: ours %.2f/%.2f  cuBLASLt %.2f/%.2f  ratio(events) %.3f\n",
                  R, q(ours_s).first, q(ours_s).second, q(lt_s).first, q(lt_s).second, q(ours_e).first, q(ours_e).second,
                  q(lt_e).first, q(lt_e).second, q(lt_e).first / q(ours_e).first);
      // Ours against cuBLASLt's D (bf16; a relative Frobenius error like the suite's check).
      if (!std::getenv("INTERLEAVE")) {
      std::vector<__nv_bfloat16> d1(size_t(M) * N), d2(size_t(M) * N);
      CHECK(cudaMemset(d, 0xff, size_t(M) * N * 2));
      run();
      CHECK(cudaMemcpy(d1.data(), d, d1.size() * 2, cudaMemcpyDeviceToHost));
      lt.run(a, b, nullptr, d, lws, 0);
      CHECK(cudaMemcpy(d2.data(), d, d2.size() * 2, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (size_t i = 0; i < d1.size(); ++i) {
        const double x = __bfloat162float(d1[i]), y = __bfloat162float(d2[i]);
        num += (x - y) * (x - y), den += y * y;
      }
      std::printf("  D vs cuBLASLt: relative Frobenius error %.2e (%s)\n", std::sqrt(num / den), std::sqrt(num / den) < 1e-2 ? "ok" : "WRONG");
      }
    }
  }
#endif
  int ctas = 0;
  unsigned long long t0 = ~0ull, t_end = 0, t_last = 0;
  for (int i = 0; i < probe::kCtas; ++i)
    if (c[i].entry) ++ctas, t0 = std::min(t0, c[i].entry), t_end = std::max(t_end, c[i].exit), t_last = std::max(t_last, c[i].last);
  std::vector<double> entry, first_wait, exit_t, mainloop, epi, items;
  std::map<int, std::vector<double>> exit_by_group;  // SMs in groups of 16 ids (roughly a GPC)
  for (int i = 0; i < ctas; ++i) {
    const probe::Cta& x = c[i];
    entry.push_back((x.entry - t0) * 1e-3);
    exit_t.push_back((x.exit - t0) * 1e-3);
    exit_by_group[x.sm / 16].push_back((x.exit - t0) * 1e-3);
    items.push_back(x.items);
    if (x.items > 0) first_wait.push_back((x.item_begin[0] - t0) * 1e-3);
    for (int j = 0; j < std::min(x.items, probe::kItems); ++j) {
      mainloop.push_back((x.item_end[j] - x.item_begin[j]) * 1e-3);
      const unsigned long long next = j + 1 < x.items ? x.item_begin[j + 1] : x.exit;
      epi.push_back((next - x.item_end[j]) * 1e-3);
    }
  }
  std::printf("%s config %d  %dx%dx%d  %s (splits %d)%s  %.1f us (events)  %d CTAs on %d SMs, span %.1f us (globaltimer), last warp out %.1f us\n",
              prop.name, CFG, M, N, K, stream_k ? "stream-K" : "data-parallel", splits, flush ? ", L2 flushed" : "", ms * 1e3, ctas,
              prop.multiProcessorCount, (t_end - t0) * 1e-3, (t_last - t0) * 1e-3);
  std::printf("  stamp kernel before -> first CTA entry %.2f us, last warp out -> stamp kernel after %.2f us (between stamps %.2f us)\n",
              (double(t0) - double(hs[0])) * 1e-3, (double(hs[1]) - double(t_last)) * 1e-3, (double(hs[1]) - double(hs[0])) * 1e-3);
  auto row = [](const char* name, std::vector<double> v, const char* more = "") {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    std::printf("  %-34s min %8.2f  median %8.2f  max %8.2f us%s\n", name, v.front(), v[v.size() / 2], v.back(), more);
  };
  row("CTA entry (from the first)", entry);
  row("first item's mainloop start", first_wait);
  row("mainloop per item", mainloop);
  row("epilogue + next item's wait", epi);
  row("CTA exit", exit_t);
  {  // the prologue step by step (TESSERA_SM90_PROBE_PM), from each CTA's own entry
    const char* names[16] = {"", "t0 barriers set up", "t0 cluster arrive + grid wait", "t0 producer regs", "",
                             "t0 views built", "t0 first item walked", "t0 past cluster wait", "", "t128 past the set-up",
                             "t128 cluster arrive + grid wait", "t128 consumer regs", "t128 epilogue (before store wait)", "", "", ""};
    for (int j = 0; j < 16; ++j) {
      if (!*names[j]) continue;  // 0 and 8: the entries themselves
      std::vector<double> v, cy;
      for (int i = 0; i < ctas; ++i)
        if (c[i].pm[j]) {
          v.push_back((double(c[i].pm[j]) - double(c[i].entry)) * 1e-3);
          cy.push_back(double(c[i].pmc[j]) - double(c[i].pmc[j < 8 ? 0 : 8]));  // SM cycles from the same thread's mark 0
        }
      if (cy.empty()) continue;
      std::sort(cy.begin(), cy.end());
      char more[64];
      std::snprintf(more, sizeof(more), "  (cycles median %.0f max %.0f)", cy[cy.size() / 2], cy.back());
      row(names[j], v, more);
    }
    std::vector<double> issued, landed, started;
    for (int i = 0; i < ctas; ++i) {
      started.push_back((double(c[i].start) - double(c[i].entry)) * 1e-3);
      if (!kt[i][0].issue) continue;
      issued.push_back((double(kt[i][0].issue) - double(c[i].entry)) * 1e-3);
      landed.push_back((double(kt[i][0].full) - double(c[i].entry)) * 1e-3);
    }
    row("first load issued", issued);
    row("consumers past the cluster wait", started);
    row("first load landed", landed);
  }
  if (splits > 1) {  // the split-K steps of each CTA's last item (probe marks)
    std::vector<double> staged, fenced, counted, folded;
    for (int i = 0; i < ctas; ++i) {
      const probe::Cta& x = c[i];
      if (!x.mark[0] || x.items < 1) continue;
      staged.push_back((x.mark[0] - x.item_end[std::min(x.items, probe::kItems) - 1]) * 1e-3);
      fenced.push_back((x.mark[1] - x.mark[0]) * 1e-3);
      counted.push_back((x.mark[2] - x.mark[1]) * 1e-3);
      if (x.mark[3]) folded.push_back((x.mark[3] - x.mark[2]) * 1e-3);
    }
    row("split-K: partial staged out", staged);
    row("split-K: fence + barrier", fenced);
    row("split-K: count in (+ wait)", counted);
    row("split-K: parallel fold", folded);
  }
  {  // the first item's 16-bit epilogue (TESSERA_SM90_PROBE_EPI), SM cycles from its start
    // Four sub-tiles at most (BN 256 in 64-column ones, or 96 in 32-column ones): marks 9-12 stay unused.
    const char* names[probe::kEpiMarks] = {"", "epi sub 0 buffer free", "epi sub 0 filled", "epi sub 1 buffer free",
                                           "epi sub 1 filled", "epi sub 2 buffer free", "epi sub 2 filled",
                                           "epi sub 3 buffer free", "epi sub 3 filled", "", "", "", "",
                                           "epi sub 0 issued (issuer)", "epi sub 1 issued (issuer)",
                                           "epi -> next mainloop start"};
    for (int j = 1; j < probe::kEpiMarks; ++j) {
      std::vector<double> cy;
      for (int i = 0; i < ctas; ++i)
        if (c[i].epi[0] && c[i].epi[j]) cy.push_back(double(c[i].epi[j]) - double(c[i].epi[0]));
      if (cy.empty() || !*names[j]) continue;
      std::sort(cy.begin(), cy.end());
      std::printf("  %-34s min %8.0f  median %8.0f  max %8.0f cycles from the epilogue's start\n", names[j], cy.front(),
                  cy[cy.size() / 2], cy.back());
    }
  }
  row("items per CTA", items);
  std::printf("  exit by SM id / 16:");
  for (auto& [g, v] : exit_by_group) std::printf("  [%d] n=%zu med %.1f max %.1f", g, v.size(), median(v), *std::max_element(v.begin(), v.end()));
  std::printf("\n");
  if (ktiles) {
    constexpr int S = gi::sm90::ConfigShape<CFG>::Stages;
    std::vector<double> latency, in_flight, hold, refill, latency_first;
    for (int i = 0; i < ctas; ++i) {
      int n = 0;
      while (n < probe::kKtiles && kt[i][n].issue && kt[i][n].full && kt[i][n].release) ++n;
      for (int j = 0; j < n; ++j) {
        (j < S ? latency_first : latency).push_back((kt[i][j].full - kt[i][j].issue) * 1e-3);
        hold.push_back((kt[i][j].release - kt[i][j].full) * 1e-3);
        if (j + S < n) refill.push_back((kt[i][j + S].issue - kt[i][j].release) * 1e-3);
        int f = 0;  // issued before this one and not yet landed
        for (int q = 0; q < j; ++q) f += kt[i][q].full > kt[i][j].issue;
        if (j >= S) in_flight.push_back(f);
      }
    }
    row("load latency, first ring (issue->full)", latency_first);
    row("load latency, steady", latency);
    row("loads in flight at an issue (steady)", in_flight);
    row("consumer hold (full->release)", hold);
    row("refill delay (release->issue)", refill);
  }
  if (dump) {
    for (int i = 0; i < ctas; ++i) {
      const probe::Cta& x = c[i];
      std::printf("cta %3d sm %3d entry %7.2f start %7.2f", i, x.sm, (x.entry - t0) * 1e-3, (x.start - t0) * 1e-3);
      for (int j = 0; j < std::min(x.items, probe::kItems); ++j)
        std::printf(" | tile %4d %7.2f-%7.2f", x.tile[j], (x.item_begin[j] - t0) * 1e-3, (x.item_end[j] - t0) * 1e-3);
      std::printf(" | exit %7.2f\n", (x.exit - t0) * 1e-3);
    }
  }
  return 0;
}
