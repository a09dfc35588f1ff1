// The skinny GEMM's launcher and its instantiations: A/B dtype x at most 8 or 16 rows of X x 1, 2
// or 3 n8 tiles of W per CTA (w_tiles, skinny.hpp), and 64 rows of X on one n8 tile.
#include "gemm/launch_batched.hpp"
#include "gemm/skinny/kernel.cuh"
#include "gemm/skinny/skinny.hpp"

namespace tessera::gemm_impl::skinny {
namespace {

template <bool BF16, int kMT, bool kHalf, int kNT, int kUnroll>
cudaError_t launch(const Operands& op, const EpilogueParams& epi, int batch, bool dependent_launch, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned((op.rows_w + 8 * kNT - 1) / (8 * kNT)), unsigned(batch));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = dependent_launch ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, skinny_kernel<BF16, kMT, kHalf, kNT, kUnroll>, op, epi);
}

template <bool BF16, int kMT, bool kHalf, int kUnroll>
cudaError_t launch_tiles(const Operands& op, const EpilogueParams& epi, int batch, int w_tiles, bool dependent_launch,
                         cudaStream_t stream) {
  if (w_tiles == 3) return launch<BF16, kMT, kHalf, 3, 2>(op, epi, batch, dependent_launch, stream);
  if (w_tiles == 2) return launch<BF16, kMT, kHalf, 2, 2>(op, epi, batch, dependent_launch, stream);
  return launch<BF16, kMT, kHalf, 1, kUnroll>(op, epi, batch, dependent_launch, stream);
}

// Chunks per step: four keep 2 KB of W per warp in flight with one n8 tile; two with two or three
// tiles (the registers of four would cost a CTA per SM), and with 64 rows of X.
template <bool BF16>
cudaError_t launch_rows(const Operands& op, const EpilogueParams& epi, int batch, int w_tiles, bool dependent_launch,
                        cudaStream_t stream) {
  if (op.rows_x <= 8) return launch_tiles<BF16, 1, true, 4>(op, epi, batch, w_tiles, dependent_launch, stream);
  if (op.rows_x <= 16) return launch_tiles<BF16, 1, false, 4>(op, epi, batch, w_tiles, dependent_launch, stream);
  return launch<BF16, 4, false, 1, 2>(op, epi, batch, dependent_launch, stream);  // w_tiles() gives 1 here
}

}  // namespace

cudaError_t run(int ab_dtype, const GemmParams& p, int w_tiles, bool dependent_launch, cudaStream_t stream) {
  return launch_batched(p, ab_dtype, [&](const GemmParams& q) {
    const bool x_is_a = q.m <= q.n;
    Operands op;
    op.x = x_is_a ? q.a : q.b;
    op.ldx = x_is_a ? q.lda : q.ldb;
    op.batch_stride_x = x_is_a ? q.batch_stride_a : q.batch_stride_b;
    op.w = x_is_a ? q.b : q.a;
    op.ldw = x_is_a ? q.ldb : q.lda;
    op.batch_stride_w = x_is_a ? q.batch_stride_b : q.batch_stride_a;
    op.rows_x = x_is_a ? q.m : q.n;
    op.rows_w = x_is_a ? q.n : q.m;
    op.k = q.k;
    op.x_is_a = x_is_a;
    return ab_dtype == kBF16 ? launch_rows<true>(op, q.epi, q.batch, w_tiles, dependent_launch, stream)
                              : launch_rows<false>(op, q.epi, q.batch, w_tiles, dependent_launch, stream);
  });
}

}  // namespace tessera::gemm_impl::skinny
