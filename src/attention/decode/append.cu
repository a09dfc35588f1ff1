// The KV-cache append (decode.hpp AppendParams): one thread per 16 bytes of K or V.
#include <cuda_runtime.h>

#include <algorithm>

#include "attention/decode/decode.hpp"
#include "attention/decode/kv_rows.hpp"

namespace tessera::attn::decode {
namespace {

__global__ void append_kernel(AppendParams p, int64_t first) {
  const int chunks = p.d / 8;  // 16-byte vectors per row
  int64_t i = first + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(2) * p.batch * p.seqlen_new * p.heads_kv * chunks) return;
  const int c = int(i % chunks);
  i /= chunks;
  const int h = int(i % p.heads_kv);
  i /= p.heads_kv;
  const int t = int(i % p.seqlen_new);
  i /= p.seqlen_new;
  const int b = int(i % p.batch);
  const bool is_v = i >= p.batch;
  const int64_t* ns = is_v ? p.v_new_stride : p.k_new_stride;
  const int64_t* cs = is_v ? p.v_stride : p.k_stride;
  const auto* src = static_cast<const uint16_t*>(is_v ? p.v_new : p.k_new) + b * ns[0] + t * ns[1] + h * ns[2] + 8 * c;
  KvRows rows;
  rows.row = cs[1];
  int64_t base = h * cs[2];
  if (p.block_table) {
    rows.page = cs[0];
    rows.table = p.block_table + b * p.block_table_stride;
    rows.page_size = p.page_size;
    rows.last_page = p.num_pages - 1;
  } else {
    base += b * cs[0];
  }
  const int pos = min(max(p.cache_seqlens[b], 0), p.capacity - p.seqlen_new) + t;  // decode kernel's keys_of
  auto* dst = static_cast<uint16_t*>(is_v ? p.v_cache : p.k_cache) + base + rows.offset(pos) + 8 * c;
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}

}  // namespace

cudaError_t append_kv(const AppendParams& p, int max_sms, cudaStream_t stream) {
  const int64_t total = int64_t(2) * p.batch * p.seqlen_new * p.heads_kv * (p.d / 8);
  constexpr int kThreads = 256;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  const int64_t chunk = max_sms > 0 ? max_sms : std::min<int64_t>(blocks, 1 << 30);
  for (int64_t b0 = 0; b0 < blocks; b0 += chunk) {
    append_kernel<<<unsigned(std::min(chunk, blocks - b0)), kThreads, 0, stream>>>(p, b0 * kThreads);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace tessera::attn::decode
