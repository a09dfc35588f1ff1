// The sm90 GEMM kernel's timeline probe (kernel.cuh and its pieces place the stamps). Compiled in only where
// TESSERA_SM90_PROBE is defined, i.e. by bench/microbench/sm90_timeline.cu, never by the library:
// there every macro below expands to nothing.
#pragma once

namespace tessera::gemm_impl::sm90 {

// Consumer thread 128 stamps %globaltimer (ns) at the consumers' start, at each work item's mainloop
// start and end, and at exit, with the CTA's SM and each item's tile, to see where a launch's time goes;
// per k-tile, the producer's issue and the consumers' `full` and release (the pipeline's latencies).
#ifdef TESSERA_SM90_PROBE
namespace probe {
constexpr int kCtas = 1024, kItems = 16, kKtiles = 256;
constexpr int kMarks = 4, kEpiMarks = 16;
struct Cta {
  unsigned long long entry, start, exit, last, item_begin[kItems], item_end[kItems];
  unsigned long long pm[16], pmc[16];  // TESSERA_SM90_PROBE_PM
  unsigned long long mark[kMarks];  // the last item's split-K steps (TESSERA_SM90_PROBE_MARK)
  unsigned long long epi[kEpiMarks];  // the first item's 16-bit epilogue, SM cycles (TESSERA_SM90_PROBE_EPI)
  int sm, items, tile[kItems];
  // Counters of the recorder (items so far, its k-tiles before this item) and of the producer's
  // thread (k-tiles issued), kept here so that the kernel's pieces in other functions can stamp.
  int ktile0, issued;
};
__device__ Cta ctas[kCtas];
// Per k-tile of a CTA's walk (the first kKtiles): the producer's issue (its `empty` wait passed), the
// consumer's `full` wait passed, and the consumer's release of the stage.
struct Ktile {
  unsigned long long issue, full, release;
};
__device__ Ktile ktiles[kCtas][kKtiles];
__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ bool recorder() { return threadIdx.x == 128 && blockIdx.x < kCtas; }
}  // namespace probe
#define TESSERA_SM90_PROBE_ENTRY()                                                          \
  if (threadIdx.x == 0 && blockIdx.x < probe::kCtas) {                                      \
    unsigned sm;                                                                            \
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));                                         \
    probe::ctas[blockIdx.x].entry = probe::now();                                           \
    probe::ctas[blockIdx.x].sm = int(sm);                                                   \
  }
#define TESSERA_SM90_PROBE_START()                  \
  if (probe::recorder()) {                          \
    probe::ctas[blockIdx.x].start = probe::now();   \
    probe::ctas[blockIdx.x].items = 0;              \
    probe::ctas[blockIdx.x].ktile0 = 0;             \
  }
#define TESSERA_SM90_PROBE_ITEM_BEGIN(tile_)                                            \
  if (probe::recorder() && probe::ctas[blockIdx.x].items < probe::kItems) {             \
    probe::ctas[blockIdx.x].item_begin[probe::ctas[blockIdx.x].items] = probe::now();   \
    probe::ctas[blockIdx.x].tile[probe::ctas[blockIdx.x].items] = (tile_);              \
  }
#define TESSERA_SM90_PROBE_ITEM_END()                                                 \
  if (probe::recorder()) {                                                            \
    probe::Cta& probe_cta = probe::ctas[blockIdx.x];                                  \
    if (probe_cta.items < probe::kItems) probe_cta.item_end[probe_cta.items] = probe::now(); \
    ++probe_cta.items;                                                                \
  }
#define TESSERA_SM90_PROBE_EXIT() \
  if (probe::recorder()) probe::ctas[blockIdx.x].exit = probe::now();
// The producer's thread stamps `issue` (its k-tiles counted in Cta::issued); the consumers'
// recorder `full` and `release` (its k-tiles counted across its items in Cta::ktile0).
#define TESSERA_SM90_PROBE_KTILE(field_, n_) \
  if (blockIdx.x < probe::kCtas && (n_) < probe::kKtiles) probe::ktiles[blockIdx.x][n_].field_ = probe::now();
#define TESSERA_SM90_PROBE_PRODUCER_START() \
  if (blockIdx.x < probe::kCtas) probe::ctas[blockIdx.x].issued = 0;
#define TESSERA_SM90_PROBE_ISSUED()                                                  \
  if (blockIdx.x < probe::kCtas) {                                                   \
    TESSERA_SM90_PROBE_KTILE(issue, probe::ctas[blockIdx.x].issued)                  \
    ++probe::ctas[blockIdx.x].issued;                                                \
  }
#define TESSERA_SM90_PROBE_CONSUMED(field_, kt_) \
  if (probe::recorder()) { TESSERA_SM90_PROBE_KTILE(field_, probe::ctas[blockIdx.x].ktile0 + (kt_)) }
#define TESSERA_SM90_PROBE_ITEM_KTILES(k_count_) \
  if (probe::recorder()) probe::ctas[blockIdx.x].ktile0 += (k_count_);
// The prologue and epilogue, step by step: thread 0 (the producer) stamps pm[i], thread 128 (the
// first consumer) pm[8 + i], each with %globaltimer and the SM's clock (pmc: cycles, finer than the
// timer's 32-256 ns steps); every warp's lane 0 raises `last` as it leaves.
#define TESSERA_SM90_PROBE_PM(i_) \
  if ((threadIdx.x == 0 || threadIdx.x == 128) && blockIdx.x < probe::kCtas) { probe::ctas[blockIdx.x].pm[(i_) + (threadIdx.x ? 8 : 0)] = probe::now(); probe::ctas[blockIdx.x].pmc[(i_) + (threadIdx.x ? 8 : 0)] = clock64(); }
#define TESSERA_SM90_PROBE_LAST() \
  if ((threadIdx.x & 31) == 0 && blockIdx.x < probe::kCtas) atomicMax(&probe::ctas[blockIdx.x].last, probe::now());
// Split-K's steps after the mainloop: 0 partial staged out, 1 fenced, 2 counted in (and waited), 3 folded.
#define TESSERA_SM90_PROBE_MARK(n_) \
  if (probe::recorder()) probe::ctas[blockIdx.x].mark[n_] = probe::now();
// The first item's 16-bit epilogue step by step (epilogue_store.cuh), SM cycles by the recorder: 0 at its
// start, then per sub-tile s: 1 + 2s its buffer free, 2 + 2s filled and fenced, 13 + s (s < 2) its store
// issued; 15 the next item's mainloop start.
#define TESSERA_SM90_PROBE_EPI(i_) \
  if (probe::recorder() && probe::ctas[blockIdx.x].items == 1 && (i_) < probe::kEpiMarks) probe::ctas[blockIdx.x].epi[i_] = clock64();
#else
#define TESSERA_SM90_PROBE_EPI(i_)
#define TESSERA_SM90_PROBE_PM(i_)
#define TESSERA_SM90_PROBE_LAST()
#define TESSERA_SM90_PROBE_MARK(n_)
#define TESSERA_SM90_PROBE_KTILE(field_, n_)
#define TESSERA_SM90_PROBE_PRODUCER_START()
#define TESSERA_SM90_PROBE_ISSUED()
#define TESSERA_SM90_PROBE_CONSUMED(field_, kt_)
#define TESSERA_SM90_PROBE_ITEM_KTILES(k_count_)
#define TESSERA_SM90_PROBE_ENTRY()
#define TESSERA_SM90_PROBE_START()
#define TESSERA_SM90_PROBE_ITEM_BEGIN(tile_)
#define TESSERA_SM90_PROBE_ITEM_END()
#define TESSERA_SM90_PROBE_EXIT()
#endif

}  // namespace tessera::gemm_impl::sm90
