#!/usr/bin/env python3
"""Which kernels cuBLASLt runs for fp8 e4m3 (torch._scaled_mm, bf16 D): tensor and row-wise scales, promoted
sums (use_fast_accum=False) and fast accumulation, on the shapes the fp8 bars are set on. Prints each kernel's
name (nvjet names carry the tile, K depth x stages, cluster and schedule) and its mean time over 10 calls
under the torch profiler (tessera.bench.kernel_times): what to compare our tile choices and ncu profiles with.
Usage: python bench/fp8_anchor_kernels.py [M N K ...]   (default: 8192^3, 4096^3, 4096x7168x16384)"""
import sys

import torch

from tessera.bench import kernel_times

args = [int(x) for x in sys.argv[1:]]
shapes = [tuple(args[i:i + 3]) for i in range(0, len(args) - 2, 3)] or [(8192, 8192, 8192), (4096, 4096, 4096),
                                                                       (4096, 7168, 16384)]
torch.manual_seed(0)
for m, n, k in shapes:
    a = (torch.randn(m, k, device="cuda") * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda") * 2).to(torch.float8_e4m3fn).t()  # (K, N) column-major
    one = torch.tensor(0.05, device="cuda")
    scales = {"tensor": (one, one),
              "row": (torch.rand(m, 1, device="cuda") + 0.1, torch.rand(1, n, device="cuda") + 0.1)}
    for mode, (sa, sb) in scales.items():
        for fast in (False, True):
            def call():
                return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
            for name, (us, launches) in kernel_times(torch, call, 10).items():
                if launches >= 1:  # the GEMM's kernels, not a one-off of the first call
                    print(f"{m}x{n}x{k} {mode:6s} fast={int(fast)} {name[:100]}  {us / launches:.1f} us  "
                          f"{2 * m * n * k / (us / launches) / 1e6:.0f} TFLOP/s", flush=True)
    del a, b
    torch.cuda.empty_cache()
