// Argument rules of the attention entries (implemented in api.cpp); host-only, for the CPU tests and
// the KV-cache entry (kvcache.cpp).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "tessera/tessera.hpp"

namespace tessera::attn {

Status validate(const AttentionArgs& args);

// One [outer, seq, heads, head_dim] operand: strides (outer, seq, head) in elements, head dim contiguous.
// packed (varlen): one [seq, heads, head_dim] tensor of packed sequences, outer = 1 and stride[0] = 0;
// the caller's strides are (token, head), stride[1] and stride[2] here, and the messages name them so.
struct Operand {
  const char* name;
  const void* ptr;
  const int64_t* stride;
  int64_t outer, seq, heads;
  const char* outer_name = "batch";
  bool packed = false;
};
// Non-null, 16-byte aligned, strides >= 0 and multiples of 8 elements, offsets within 2^62.
Status check_operand(const Operand& t, int64_t head_dim);
// Each size >= 1 and small enough for 32-bit tile coordinates.
Status check_sizes(std::initializer_list<std::pair<const char*, int64_t>> sizes);
// dtype, max_sms, head_dim, heads, softmax_scale, window, softcap.
Status check_common(DType dtype, int64_t heads_q, int64_t heads_kv, int64_t head_dim, float softmax_scale,
                    int64_t window_left, int64_t window_right, float softcap, int max_sms);
// O written once, LSE aligned, neither overlapping the inputs (nor each other).
Status check_output(const Operand& o, const float* lse, int64_t head_dim, std::initializer_list<Operand> inputs);
// A workspace pointer and size (null only with 0 bytes; 256-byte aligned).
Status validate_workspace(const void* workspace, size_t workspace_bytes);
// The [lo, hi) bytes an operand spans.
std::pair<uintptr_t, uintptr_t> span(const Operand& t, int64_t head_dim, int64_t elem_bytes);

}  // namespace tessera::attn
