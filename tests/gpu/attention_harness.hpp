// The GPU test harness for attention. One case = fresh random Q, K, V (uniform in (-1, 1), never 0,
// seeded from std::random_device or TESSERA_TEST_SEED) placed in the case's layout, with every
// byte of the input allocations that is not an element poisoned with NaN (a read of padding shows
// in O); O and LSE poisoned with 0xFF (NaN) inside guard bands; tessera run; then
//   - the oracle (tools/attention_gpu_reference.hpp): an fp32 reference and a same-precision one
//     from the same inputs; pass when every O element is finite, max|O - ref32| <=
//     2 * max|O_lowp - ref32| + atol(dtype), and |LSE - LSE32| <= 1e-3 (rows with no key: -inf);
//   - guard bands around O and LSE, and O's padding (bytes between heads / rows / batches),
//     byte-for-byte untouched; with lse = null the whole LSE allocation untouched.
// A case expecting a failure status instead checks the status, its message, and that O and LSE
// (with their guards) are byte-for-byte untouched.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>

#include "attention_gpu_reference.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace tessera_test {

enum class AttnLayout {
  BSHD,     // each tensor contiguous [B, S, H, D]
  BHSD,     // each tensor contiguous [B, H, S, D]
  Strided,  // Sq == Sk: Q, K, V slices of one packed [B, S, Hq + 2 Hkv, D] buffer (seq stride
            // (Hq + 2 Hkv) D); else Q [B, H, S, D] with padded rows (seq stride D + 8) and padded
            // batches, K and V slices of a packed [B, Sk, 2, Hkv, D] buffer. O in both: [B, S, H, D]
            // with padded heads (head stride D + 16) and padded batches.
};
const char* layout_name(AttnLayout l);

// The workspace a case passes: none, what attention_workspace_size() asks for, or half of that
// (decode shapes then run with fewer key splits). Poisoned with NaN before the call.
enum class AttnWorkspace { None, Full, Half };

struct AttnCase {
  tessera::DType dtype = tessera::DType::BF16;
  int64_t batch = 2, sq = 1, sk = 1, hq = 2, hkv = 2, d = 64;
  bool causal = false;
  AttnLayout layout = AttnLayout::BSHD;
  float scale = 0.0f;             // softmax_scale (0 = 1 / sqrt(d))
  int64_t window_left = -1, window_right = -1;  // local attention (-1 = unlimited on that side)
  float softcap = 0.0f;                         // > 0: softcap * tanh(s / softcap) on the scaled scores
  bool with_lse = true;           // pass an LSE buffer (else lse = null)
  bool kv_batch_broadcast = false;  // K and V with batch stride 0: one K/V for every batch
  cudaStream_t stream = nullptr;
  bool capture_graph = false;  // capture the call into a CUDA graph on `stream` and replay it
  bool use_c_abi = false;      // tessera_attention_with_workspace instead of tessera::attention
  AttnWorkspace workspace = AttnWorkspace::Full;
  // Applied to the (valid) args just before the call, e.g. to break a rule on real memory.
  std::function<void(tessera::AttentionArgs&)> mutate;
  tessera_status_t expect = TESSERA_STATUS_SUCCESS;
  std::string expect_message;  // substring of the status message when expect != SUCCESS
};

struct AttnOutcome {
  uint64_t seed = 0;
  tessera::Status status;
  bool measured = false;  // the oracle ran (err is set)
  tessera_ref::AttentionErrors err;
  double bound = 0.0;  // 2 * err.max_err_lowp + atol
  std::string problems;  // "" when the case passed
  bool passed() const { return problems.empty(); }
};

AttnOutcome run_attention_case(const AttnCase& c);
std::string describe(const AttnCase& c);

// The fp32 GPU reference against the CPU fp64 reference (tests/common/attention_reference.hpp) on
// the inputs of case `c` (small shapes only: the fp64 reference runs on the host). Fills the
// maximum differences; `problems` is "" when O32 and LSE32 are within 1e-5 / 2e-5 of fp64 (every
// -inf LSE matching) and Olow within the dtype's rounding of it.
struct ReferenceCheck {
  uint64_t seed = 0;
  double max_o32_diff = 0.0, max_olow_diff = 0.0, max_lse_diff = 0.0;
  int64_t empty_rows = 0;  // rows with no visible key (LSE -inf in both)
  std::string problems;
};
ReferenceCheck check_gpu_reference(const AttnCase& c);

}  // namespace tessera_test
