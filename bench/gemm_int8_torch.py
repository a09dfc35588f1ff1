#!/usr/bin/env python3
"""int8 operands from Python as users call them: tessera.matmul(a_int8, b_int8) against torch._int_mm (int32
out, cuBLASLt int8) and, with row-wise scales, against torch._scaled_mm's absence for int8 emulated as
torch._int_mm + the dequantising multiply (what a user without tessera runs). One call between CUDA
events, median of 20 after 5 warm-up, three rounds alternating the libraries (the middle one reported);
int32 results checked for exact equality with torch._int_mm.
Usage: python bench/gemm_int8_torch.py OUT.json"""
import json, sys, torch, tessera
from one_call import middle
torch.manual_seed(0)
rows = []
shapes = [(8192, 8192, 8192), (4096, 4096, 4096), (4096, 14336, 4096), (16384, 4096, 4096), (1024, 4096, 4096),
          (2048, 2048, 2048), (6144, 6144, 6144), (128, 4096, 4096), (32, 4096, 4096)]
for m, n, k in shapes:
    a = torch.randint(-128, 128, (m, k), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (n, k), device="cuda", dtype=torch.int8).t()  # (K, N), K-major: what _int_mm wants
    sa = torch.rand(m, 1, device="cuda") / 64 + 1e-3
    sb = torch.rand(1, n, device="cuda") / 64 + 1e-3
    exact = bool(torch.equal(tessera.matmul(a, b), torch._int_mm(a, b)))
    fl = 2.0 * m * n * k
    tt, to = middle(lambda: tessera.matmul(a, b), lambda: torch._int_mm(a, b))
    row = dict(m=m, n=n, k=k, mode="s32", tessera_us=tt, torch_us=to, ratio=to / tt, tessera_tops=fl / tt / 1e6,
               torch_tops=fl / to / 1e6, exact=exact)
    rows.append(row)
    print(f"{m}x{n}x{k} s32      tessera {tt:9.1f} us {fl/tt/1e6:7.1f} TOPS  torch._int_mm {to:9.1f} us {fl/to/1e6:7.1f} TOPS  ratio {to/tt:.3f}  exact {exact}", flush=True)
    deq = lambda: (torch._int_mm(a, b).float() * sa * sb).to(torch.bfloat16)
    ref = deq()
    got = tessera.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    err = ((got.float() - ref.float()).norm() / ref.float().norm()).item()
    tt, to = middle(lambda: tessera.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), deq)
    rows.append(dict(m=m, n=n, k=k, mode="rowwise_bf16", tessera_us=tt, torch_us=to, ratio=to / tt,
                     tessera_tops=fl / tt / 1e6, torch_tops=fl / to / 1e6, rel_err=err))
    print(f"{m}x{n}x{k} row bf16 tessera {tt:9.1f} us {fl/tt/1e6:7.1f} TOPS  _int_mm+scale {to:9.1f} us {fl/to/1e6:7.1f} TOPS  ratio {to/tt:.3f}  err {err:.2e}", flush=True)
    del a, b
    torch.cuda.empty_cache()
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), open(sys.argv[1], "w"), indent=1)
