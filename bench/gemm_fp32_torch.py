#!/usr/bin/env python3
"""fp32 operands from Python as users call them: tessera.matmul(precision="tf32" | "tf32x3") against
torch.matmul on the same tensors (tf32: torch with allow_tf32; tf32x3: torch's plain fp32), one call
between CUDA events, median of 20 after 5 warm-up, three rounds alternating the libraries (the middle
one reported), plus each result's relative error against an fp64 product.
Usage: python bench/gemm_fp32_torch.py OUT.json"""
import json, sys, torch, tessera
from one_call import middle
torch.manual_seed(0)
rows = []
shapes = [(8192, 8192, 8192, "tn"), (4096, 4096, 4096, "tn"), (8192, 8192, 8192, "nn"), (4096, 14336, 4096, "tn"),
          (16384, 4096, 4096, "tn"), (1024, 4096, 4096, "tn"), (128, 4096, 4096, "tn"), (2048, 2048, 2048, "tn"),
          (6144, 6144, 6144, "tn"), (3000, 3000, 3000, "nn")]
for m, n, k, lay in shapes:
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(n, k, device="cuda").t() if lay == "tn" else torch.randn(k, n, device="cuda")
    ref = (a.double() @ b.double())
    for prec in ["tf32", "tf32x3"]:
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        t_tessera, t_torch = middle(lambda: tessera.matmul(a, b, precision=prec), lambda: torch.matmul(a, b))
        et = ((tessera.matmul(a, b, precision=prec).double() - ref).norm() / ref.norm()).item()
        eo = ((torch.matmul(a, b).double() - ref).norm() / ref.norm()).item()
        fl = 2.0 * m * n * k
        row = dict(m=m, n=n, k=k, layout=lay, precision=prec, tessera_us=t_tessera, torch_us=t_torch, ratio=t_torch / t_tessera,
                   tessera_tflops=fl / t_tessera / 1e6, torch_tflops=fl / t_torch / 1e6, tessera_err=et, torch_err=eo)
        rows.append(row)
        print(f"{m}x{n}x{k} {lay} {prec:7s} tessera {t_tessera:9.1f} us {fl/t_tessera/1e6:7.1f} TF  torch({'tf32' if prec=='tf32' else 'fp32'}) {t_torch:9.1f} us {fl/t_torch/1e6:7.1f} TF  ratio {t_torch/t_tessera:.3f}  err {et:.2e} vs {eo:.2e}", flush=True)
    del a, b, ref
    torch.cuda.empty_cache()
torch.backends.cuda.matmul.allow_tf32 = False
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), open(sys.argv[1], "w"), indent=1)
