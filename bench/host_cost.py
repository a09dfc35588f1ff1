#!/usr/bin/env python3
"""Host cost of one Python call, layer by layer, against torch on the same tensors (issue 24).

    python bench/host_cost.py [--json FILE]

For tessera.matmul / tessera.attention and torch.matmul / SDPA: host CPU time per call
(time.perf_counter and time.thread_time around N back-to-back calls of a problem the GPU finishes
faster than the host can issue it), the cost of each layer of tessera's eager call (tensor
allocation, stream lookup, the single library crossing, the custom-op dispatch the eager path
skips), and back-to-back GPU time per call of 128x4096x4096 between two events, with programmatic
dependent launch on and off. Needs torch with CUDA and the tessera package.
"""
import argparse
import json
import os
import statistics
import sys
import time


def per_call_us(fn, n=2000, rounds=7, sync=None):
    """Median over rounds of the host microseconds per call of n back-to-back calls (wall, thread CPU)."""
    walls, cpus = [], []
    for _ in range(rounds):
        if sync:
            sync()
        w0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(n):
            fn()
        w1, c1 = time.perf_counter(), time.thread_time()
        walls.append((w1 - w0) * 1e6 / n)
        cpus.append((c1 - c0) * 1e6 / n)
    if sync:
        sync()
    return statistics.median(walls), statistics.median(cpus)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write the numbers here")
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("host_cost: no CUDA device", file=sys.stderr)
        return 3
    import tessera
    from tessera import _C, _torch as tt

    sync = torch.cuda.synchronize
    dev = torch.device("cuda")
    rows = {}

    def report(name, wall_cpu):
        rows[name] = {"wall_us": round(wall_cpu[0], 3), "cpu_us": round(wall_cpu[1], 3)}
        print(f"{name:58s} wall {wall_cpu[0]:8.2f} us   cpu {wall_cpu[1]:8.2f} us")

    for (m, n, k) in [(64, 64, 64), (128, 4096, 4096)]:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        b = w.t()
        ref = torch.matmul(a, b)
        got = tessera.matmul(a, b)
        err = ((got.float() - ref.float()).norm() / ref.float().norm()).item()
        assert err < 2e-2, f"tessera.matmul {m}x{n}x{k}: relative error {err}"
        tag = f"{m}x{n}x{k}"
        report(f"torch.matmul {tag}", per_call_us(lambda: torch.matmul(a, b), sync=sync))
        report(f"tessera.matmul {tag} (eager path)", per_call_us(lambda: tessera.matmul(a, b), sync=sync))
        report(f"torch.ops.tessera.matmul {tag} (custom op)",
               per_call_us(lambda: torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0), sync=sync))
        d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        idx = a.get_device()
        stream = tt._raw_stream(idx)
        report(f"  layer: _C.matmul_tensors {tag} (crossing+plan+launch)",
               per_call_us(lambda: _C.matmul_tensors(a, b, None, d, 1.0, 0.0, None, 0, 0, 0, True, stream, 0),
                           sync=sync))
        report("  layer: torch.empty (M, N)",
               per_call_us(lambda: torch.empty((m, n), dtype=torch.bfloat16, device=a.device)))
        report("  layer: a.new_empty((M, N))", per_call_us(lambda: a.new_empty((m, n))))
        report("  layer: _raw_stream + get_device", per_call_us(lambda: tt._raw_stream(a.get_device())))
        report("  layer: _eager(a, b) checks", per_call_us(lambda: tt._eager(a, b)))
        report("  layer: torch.cuda.current_stream().cuda_stream",
               per_call_us(lambda: torch.cuda.current_stream().cuda_stream))

    # Attention: a small causal problem, host-bound.
    q = torch.randn(1, 128, 8, 64, device=dev, dtype=torch.bfloat16)
    kk = torch.randn(1, 128, 8, 64, device=dev, dtype=torch.bfloat16)
    vv = torch.randn(1, 128, 8, 64, device=dev, dtype=torch.bfloat16)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, kk, vv))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    o_ref = sdpa(qt, kt, vt, is_causal=True).transpose(1, 2)
    o = tessera.attention(q, kk, vv, causal=True)
    err = ((o.float() - o_ref.float()).norm() / o_ref.float().norm()).item()
    assert err < 2e-2, f"tessera.attention: relative error {err}"
    report("SDPA 1x128x8x64 causal (bhsd views)", per_call_us(lambda: sdpa(qt, kt, vt, is_causal=True), sync=sync))
    report("tessera.attention 1x128x8x64 causal (eager path)",
           per_call_us(lambda: tessera.attention(q, kk, vv, causal=True), sync=sync))
    report("torch.ops.tessera.attention (custom op)",
           per_call_us(lambda: torch.ops.tessera.attention(q, kk, vv, True, 0.0, False, "bshd", 0), sync=sync))

    # Back-to-back GPU time per call: 20 calls of 128x4096x4096 between two events, on the current
    # (legacy default) stream and on a side stream, PDL on and off.
    a = torch.randn(128, 4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16).t()

    def b2b(fn, reps=15):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(reps):
            sync()
            e0.record()
            for _ in range(20):
                fn()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) * 1000 / 20)
        return statistics.median(times)

    side = torch.cuda.Stream()
    for pdl in ("1", "0"):
        os.environ["TESSERA_GEMM_PDL"] = pdl
        tessera.reread_environment()
        for sname, s in (("current stream", torch.cuda.current_stream()), ("side stream", side)):
            with torch.cuda.stream(s):
                tm = b2b(lambda: torch.matmul(a, b))
                ts = b2b(lambda: tessera.matmul(a, b))
                # The custom op (the general path, what tessera.matmul was before the eager path).
                to = b2b(lambda: torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0))
            rows[f"b2b 128x4096x4096 PDL={pdl} {sname}"] = {"torch_us": round(tm, 2), "tessera_us": round(ts, 2),
                                                           "custom_op_us": round(to, 2)}
            print(f"back-to-back 128x4096x4096 PDL={pdl} {sname:15s} torch {tm:7.2f} us/call   "
                  f"tessera {ts:7.2f} us/call   ratio {tm / ts:5.3f}   (custom op {to:7.2f})")
    os.environ.pop("TESSERA_GEMM_PDL", None)
    tessera.reread_environment()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
