// Run-time selection among the compiled attention instantiations of both kernel families.
#include <array>
#include <cstddef>

#include "attention/sm80/launch.hpp"
#include "attention/sm90/launch.hpp"
#include "attention/sm90ws/launch.hpp"

namespace tessera::attn {
namespace {

using LaunchFn = cudaError_t (*)(const AttnParams&, int, cudaStream_t);
struct Row {
  int id;
  std::array<LaunchFn, 4> fn;  // [bf16][causal]
};
#define TESSERA_ATTN_ROW(family, id)                                                                     \
  Row{id, {&family::launch<id, false, false>, &family::launch<id, false, true>, &family::launch<id, true, false>, \
           &family::launch<id, true, true>}},

const Row kSm80[] = {
#define TESSERA_ATTN_CONFIG(id, ...) TESSERA_ATTN_ROW(sm80, id)
#include "attention/configs.def"
#undef TESSERA_ATTN_CONFIG
};
const Row kSm90[] = {
#define TESSERA_ATTN_SM90_CONFIG(id, ...) TESSERA_ATTN_ROW(sm90, id)
#include "attention/configs.def"
#undef TESSERA_ATTN_SM90_CONFIG
};
const Row kSm90Ws[] = {
#define TESSERA_ATTN_SM90WS_CONFIG(id, ...) TESSERA_ATTN_ROW(sm90ws, id)
#include "attention/configs.def"
#undef TESSERA_ATTN_SM90WS_CONFIG
};
#undef TESSERA_ATTN_ROW

template <size_t N>
cudaError_t run_row(const Row (&rows)[N], int cfg, bool bf16, bool causal, const AttnParams& p, int max_sms,
                    cudaStream_t stream) {
  for (const Row& r : rows)
    if (r.id == cfg) return r.fn[(bf16 ? 2 : 0) + (causal ? 1 : 0)](p, max_sms, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

namespace sm80 {
cudaError_t run(int cfg, bool bf16, bool causal, const AttnParams& p, int max_sms, cudaStream_t stream) {
  return run_row(kSm80, cfg, bf16, causal, p, max_sms, stream);
}
}  // namespace sm80
namespace sm90 {
cudaError_t run(int cfg, bool bf16, bool causal, const AttnParams& p, int max_sms, cudaStream_t stream) {
  return run_row(kSm90, cfg, bf16, causal, p, max_sms, stream);
}
}  // namespace sm90
namespace sm90ws {
cudaError_t run(int cfg, bool bf16, bool causal, const AttnParams& p, int max_sms, cudaStream_t stream) {
  return run_row(kSm90Ws, cfg, bf16, causal, p, max_sms, stream);
}
bool supports(const AttnParams& p) {
  auto ok = [&](const int64_t* s, int seq, int heads) {
    auto fits = [](int64_t x, int extent) { return extent == 1 || (x > 0 && x < (int64_t(1) << 36)); };
    return fits(s[1], seq) && fits(s[2], heads) && fits(s[0], tma_batches(p));
  };
  return ok(p.q_stride, p.seqlen_q, p.heads_q) && ok(p.k_stride, p.seqlen_k, p.heads_kv) &&
         ok(p.v_stride, p.seqlen_k, p.heads_kv);
}
}  // namespace sm90ws

}  // namespace tessera::attn
