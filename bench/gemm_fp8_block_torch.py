#!/usr/bin/env python3
"""Block-scaled fp8 (DeepSeek-V3's recipe) from Python as users call it: tessera.matmul(a_e4m3, b_e4m3,
scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), sa (M, ceil(K/128)) one fp32 scale per row of a and 128-deep
block of K, sb (ceil(K/128), ceil(N/128)) one per 128 x 128 block of b, against torch._scaled_mm with the same
block-wise scales on the same tensors (cuBLASLt's VEC128_32F x BLK128x128_32F, Hopper, CUDA 12.9+).

Layouts are the ones torch's cuBLASLt path checks, and tessera reads the same storage at its strides: a (M, K)
row-major, b (K, N) column-major, sa (M, K/128) with strides (1, M) (outer-dim-major), sb stored as an
(L4, N/128) matrix with strides (1, L4), L4 = round_up(K/128, 4), of which tessera (and _scaled_mm, whose
shape check wants (K/128, N/128)) gets the (K/128, N/128) slice; where _scaled_mm refuses that,
torch.nn.functional.scaled_mm (BlockWise1x128 x BlockWise128x128) gets the whole (L4, N/128). Scales are
spread over a 15x range, so that a block scaled by another block's scale shows in the errors.

One call between CUDA events, median of 20 after 5 warm-up, three rounds alternating the libraries (the middle
one reported); the relative difference of the two results, and of each to an fp32 GEMM of the dequantised
operands (sa, sb applied to a, b widened to fp32). Where torch refuses a shape, why is printed and tessera is
timed alone.
Usage: python bench/gemm_fp8_block_torch.py OUT.json"""
import json, sys, torch, tessera
from one_call import middle, t_events
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False  # the reference: fp32 products and sums
BLOCK = 128
rows = []
shapes = [(4096, 7168, 16384), (8192, 8192, 8192), (4096, 4096, 4096), (2048, 7168, 2048), (128, 7168, 2048),
          (4096, 2112, 7168), (1000, 3000, 1000)]


def cdiv(x, y):
    return -(-x // y)


def scales(rows, cols):
    """Positive fp32 in [0.004, 0.06): a 15x spread (a wrong block is off by about half its value)."""
    return (torch.rand(rows, cols, device="cuda") * 14 + 1) / 256


def torch_block_mm(a, b, sa, sb, sb_l4):
    """torch's block-scaled GEMM and the API that took it: _scaled_mm, else nn.functional.scaled_mm (v2)."""
    errors = []
    try:
        torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        return (lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)), "_scaled_mm", None
    except Exception as ex:
        errors.append(f"_scaled_mm: {ex}".splitlines()[0])
    try:
        from torch.nn.functional import ScalingType, scaled_mm
        g = lambda: scaled_mm(a, b, sa, ScalingType.BlockWise1x128, sb_l4, ScalingType.BlockWise128x128,
                              output_dtype=torch.bfloat16)
        g()
        return g, "nn.functional.scaled_mm", None
    except Exception as ex:
        errors.append(f"nn.functional.scaled_mm: {ex}".splitlines()[0])
    return None, None, "; ".join(errors)


def rel(x, ref):
    return ((x.float() - ref).norm() / ref.norm()).item()


for m, n, k in shapes:
    kb, nb = cdiv(k, BLOCK), cdiv(n, BLOCK)
    l4 = cdiv(kb, 4) * 4
    a = (torch.randn(m, k, device="cuda") * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda") * 2).to(torch.float8_e4m3fn).t()  # (K, N) column-major
    sa = scales(kb, m).t()  # (M, K/128), strides (1, M)
    sb_l4 = torch.ones(nb, l4, device="cuda")
    sb_l4[:, :kb] = scales(nb, kb)
    sb_l4 = sb_l4.t()  # (L4, N/128), strides (1, L4)
    sb = sb_l4[:kb]  # (K/128, N/128), strides (1, L4): the same storage
    fl = 2.0 * m * n * k
    f = lambda: tessera.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    try:
        out = f()
    except Exception as ex:
        print(f"{m}x{n}x{k}: tessera.matmul failed: {ex}".splitlines()[0], flush=True)
        continue
    g, api, why = torch_block_mm(a, b, sa, sb, sb_l4)
    if g is None:
        print(f"{m}x{n}x{k}: torch block-scaled GEMM unavailable: {why}", flush=True)
    # fp32 GEMM of the dequantised operands: a[i, k] * sa[i, k // 128], b[k, j] * sb[k // 128, j // 128].
    ref = ((a.float() * sa.repeat_interleave(BLOCK, 1)[:, :k])
           @ (b.float() * sb.repeat_interleave(BLOCK, 0)[:k].repeat_interleave(BLOCK, 1)[:, :n]))
    tessera_err = rel(out, ref)
    row = dict(m=m, n=n, k=k, tessera_tflops=None, tessera_us=None, torch_us=None, torch_tflops=None, ratio=None,
               torch_api=api, torch_error=why, tessera_ref_err=tessera_err, torch_ref_err=None, rel_diff=None)
    if g is not None:
        other = g().float()
        row.update(torch_ref_err=rel(other, ref), rel_diff=rel(out, other))
        del other
        tt, to = middle(f, g)
        row.update(torch_us=to, torch_tflops=fl / to / 1e6, ratio=to / tt)
    else:
        tt = sorted(t_events(f) for _ in range(3))[1]
    row.update(tessera_us=tt, tessera_tflops=fl / tt / 1e6)
    rows.append(row)
    torch_part = (f"torch ({api}) {row['torch_us']:8.1f} us {row['torch_tflops']:7.1f} TF  ratio {row['ratio']:.3f}  "
                  f"diff {row['rel_diff']:.1e}  torch vs ref {row['torch_ref_err']:.1e}" if g is not None
                  else "torch: unavailable")
    print(f"{m}x{n}x{k} block tessera {tt:8.1f} us {fl/tt/1e6:7.1f} TF  vs ref {tessera_err:.1e}  {torch_part}",
          flush=True)
    del a, b, sa, sb, sb_l4, out, ref, f, g
    torch.cuda.empty_cache()
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), open(sys.argv[1], "w"), indent=1)
