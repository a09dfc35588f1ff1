"""Host CPU time per call (time.process_time over 3000 calls, a sync every 500) of tessera against torch on
the same tensors: a decode-shaped attention call (B 2, Sq 1, KV 2048, 16/4 heads, d 128) and a small matmul.
Needs torch with CUDA and the tessera package (PYTHONPATH=build/python). Prints one line per call kind."""
import time

import torch
import torch.nn.functional as F

import tessera

dev = "cuda"
def cpu_us(fn, n=3000):
    for _ in range(200): fn()
    torch.cuda.synchronize()
    t0 = time.process_time(); w0 = time.perf_counter()
    for i in range(n):
        fn()
        if i % 500 == 499: torch.cuda.synchronize()
    torch.cuda.synchronize()
    return 1e6 * (time.process_time() - t0) / n, 1e6 * (time.perf_counter() - w0) / n
q = torch.randn(2, 1, 16, 128, device=dev, dtype=torch.bfloat16)
k = torch.randn(2, 2048, 4, 128, device=dev, dtype=torch.bfloat16); v = torch.randn_like(k)
qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
a = torch.randn(2, 2048, device=dev, dtype=torch.bfloat16); w = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
for name, fn in [("tessera.attention decode", lambda: tessera.attention(q, k, v, causal=True)),
                 ("sdpa decode", lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)),
                 ("tessera.matmul 2x2048x2048", lambda: tessera.matmul(a, w.t())),
                 ("torch.matmul 2x2048x2048", lambda: torch.matmul(a, w.t()))]:
    c, wl = cpu_us(fn)
    print(f"{name:30s} cpu {c:6.2f} us  wall {wl:6.2f} us")
