#!/usr/bin/env python3
"""fp32 operands from Python as users call them: tessera.matmul(precision="tf32" | "tf32x3") against
torch.matmul on the same tensors (tf32: torch with allow_tf32; tf32x3: torch's plain fp32), one call
between CUDA events, median of 20 after 5 warm-up, three rounds alternating the libraries (the middle
one reported), plus each result's relative error against an fp64 product.
Usage: python bench/gemm_fp32_torch.py OUT.json"""
import json, sys, torch, tessera
torch.manual_seed(0)
def t_events(fn, iters=20, warm=5):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts)//2] * 1e3
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
        tt = []; to = []
        for r in range(3):
            tt.append(t_events(lambda: tessera.matmul(a, b, precision=prec)))
            to.append(t_events(lambda: torch.matmul(a, b)))
        tt.sort(); to.sort()
        et = ((tessera.matmul(a, b, precision=prec).double() - ref).norm() / ref.norm()).item()
        eo = ((torch.matmul(a, b).double() - ref).norm() / ref.norm()).item()
        fl = 2.0 * m * n * k
        row = dict(m=m, n=n, k=k, layout=lay, precision=prec, tessera_us=tt[1], torch_us=to[1], ratio=to[1] / tt[1],
                   tessera_tflops=fl / tt[1] / 1e6, torch_tflops=fl / to[1] / 1e6, tessera_err=et, torch_err=eo)
        rows.append(row)
        print(f"{m}x{n}x{k} {lay} {prec:7s} tessera {tt[1]:9.1f} us {fl/tt[1]/1e6:7.1f} TF  torch({'tf32' if prec=='tf32' else 'fp32'}) {to[1]:9.1f} us {fl/to[1]/1e6:7.1f} TF  ratio {to[1]/tt[1]:.3f}  err {et:.2e} vs {eo:.2e}", flush=True)
    del a, b, ref
    torch.cuda.empty_cache()
torch.backends.cuda.matmul.allow_tf32 = False
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), open(sys.argv[1], "w"), indent=1)
