#!/usr/bin/env python3
"""fp8 operands from Python as users call them: tessera.matmul(a_e4m3, b_e4m3, scale_a=..., scale_b=...,
out_dtype=torch.bfloat16) against torch._scaled_mm on the same tensors (per-tensor and row-wise scales;
promoted sums against use_fast_accum=False, precision="fast_accum" against use_fast_accum=True). One
call between CUDA events, median of 20 after 5 warm-up, three rounds alternating the libraries (the
middle one reported), plus the relative difference of the two results.
Usage: python bench/gemm_fp8_torch.py OUT.json"""
import json, sys, torch, tessera
from one_call import middle
torch.manual_seed(0)
rows = []
shapes = [(8192, 8192, 8192), (4096, 4096, 4096), (4096, 14336, 4096), (16384, 4096, 4096), (1024, 4096, 4096),
          (2048, 2048, 2048), (128, 4096, 4096)]
for m, n, k in shapes:
    a = (torch.randn(m, k, device="cuda") * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda") * 2).to(torch.float8_e4m3fn).t()  # (K, N) column-major: _scaled_mm's layout
    fl = 2.0 * m * n * k
    for mode in ["tensor", "row"]:
        if mode == "tensor":
            sa = torch.tensor(0.05, device="cuda"); sb = torch.tensor(0.02, device="cuda")
        else:
            sa = torch.rand(m, 1, device="cuda") / 16 + 0.01; sb = torch.rand(1, n, device="cuda") / 16 + 0.01
        for fast in [False, True]:
            prec = "fast_accum" if fast else None
            f = lambda: tessera.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, precision=prec)
            g = lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
            try:
                ref = g().float()
            except Exception as ex:  # a torch build without this scaling
                print(f"{m}x{n}x{k} {mode} fast={fast}: torch._scaled_mm unavailable: {ex}".splitlines()[0], flush=True)
                continue
            diff = ((f().float() - ref).norm() / ref.norm()).item()
            tt, to = middle(f, g)
            rows.append(dict(m=m, n=n, k=k, scales=mode, fast_accum=fast, tessera_us=tt, torch_us=to, ratio=to / tt,
                             tessera_tflops=fl / tt / 1e6, torch_tflops=fl / to / 1e6, rel_diff=diff))
            print(f"{m}x{n}x{k} {mode:6s} fast={int(fast)} tessera {tt:8.1f} us {fl/tt/1e6:7.1f} TF  torch._scaled_mm "
                  f"{to:8.1f} us {fl/to/1e6:7.1f} TF  ratio {to/tt:.3f}  diff {diff:.1e}", flush=True)
    del a, b
    torch.cuda.empty_cache()
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), open(sys.argv[1], "w"), indent=1)
