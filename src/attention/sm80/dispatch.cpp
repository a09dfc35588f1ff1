// Run-time selection among the compiled sm_80 attention instantiations.
#include <array>

#include "attention/sm80/config_shape.hpp"
#include "attention/sm80/launch.hpp"

namespace tessera::attn::sm80 {
namespace {

using LaunchFn = cudaError_t (*)(const AttnParams&, cudaStream_t);
struct Row {
  int id;
  std::array<LaunchFn, 4> fn;  // [bf16][causal]
};

template <int Cfg>
constexpr Row row() {
  return Row{Cfg, {&launch<Cfg, false, false>, &launch<Cfg, false, true>, &launch<Cfg, true, false>,
                   &launch<Cfg, true, true>}};
}

const Row kRows[] = {
#define TESSERA_ATTN_CONFIG(id, ...) row<id>(),
#include "attention/configs.def"
#undef TESSERA_ATTN_CONFIG
};

}  // namespace

cudaError_t run(int cfg, bool bf16, bool causal, const AttnParams& p, cudaStream_t stream) {
  for (const Row& r : kRows)
    if (r.id == cfg) return r.fn[(bf16 ? 2 : 0) + (causal ? 1 : 0)](p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace tessera::attn::sm80
