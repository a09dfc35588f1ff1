"""Benchmarks of the torch ops against PyTorch's own kernels, in one process on the same inputs.

    python -m tessera.bench gemm       [--quick] [--dtypes bf16,fp16] [--out DIR] [--hbm-peak-gbs GB/s]
    python -m tessera.bench attention  [--quick] [--dtypes bf16,fp16] [--out DIR]
    python -m tessera.bench attention --decode [--quick] [--json FILE]   (tessera/decode_bench.py)
    python -m tessera.bench llama      [options: python -m tessera.bench llama --help]

gemm: tessera.matmul vs torch.matmul (cuBLAS). attention: tessera.attention vs
scaled_dot_product_attention with the flash (FlashAttention-2) and the cuDNN backends.
llama: a Hugging Face LlamaForCausalLM with tessera's attention and GEMMs vs the stock one
(tessera/llama_bench.py).
CUDA events, warm-up, median; several input sets rotated so small problems do not time L2.
Every tessera output is checked against the anchor's. Prints a table, writes JSON and (with
matplotlib) a PNG of TFLOP/s and ratio per shape. Needs torch with CUDA (exit 3 otherwise).

gemm also measures the calls as a user makes them, on a (M, K) row-major and b = (N, K).t()
(an nn.Linear weight): one eager call onto an idle GPU (launch cost included), calls queued back
to back, and the host CPU time per call; and one decode step's 57 GEMMs (8 Llama layers + lm_head)
captured in one CUDA graph per library, as achieved weight GB/s.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

EXIT_NO_GPU = 3
GEMM_SQUARE = [1024, 2048, 4096, 6144, 8192, 12288, 16384]
GEMM_LLM_M = [128, 1024, 4096, 16384]
GEMM_LLM_NK = [(4096, 4096), (6144, 4096), (28672, 4096), (4096, 14336), (8192, 8192), (57344, 8192), (8192, 28672)]
GEMM_RAGGED = [1000, 3000, 7777]
# Decode GEMMs of a TinyLlama-sized model (hidden 2048, intermediate 5632, 4 KV heads of 128, vocab 32000):
# q/o, k/v, gate/up, down, lm_head as (N, K).
DECODE_M = [1, 2, 16, 64]
DECODE_NK = [(2048, 2048), (512, 2048), (5632, 2048), (2048, 5632), (32000, 2048)]
DECODE_LAYERS = 8
DECODE_LAYER_NK = [(2048, 2048), (512, 2048), (512, 2048), (2048, 2048), (5632, 2048), (5632, 2048), (2048, 5632)]
HOST_SHAPE = (16, 1024, 1024)  # small enough that the GPU never limits the launch rate
ATTN_SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
ATTN_DIMS = [64, 128, 256]


def gemm_shapes(quick):
    if quick:
        return [(4096, 4096, 4096), (8192, 8192, 8192), (7777, 7777, 7777), (128, 4096, 4096), (1000, 1000, 1000),
                (1, 5632, 2048), (16, 32000, 2048)]
    shapes = [(s, s, s) for s in GEMM_SQUARE] + [(m, n, k) for m in GEMM_LLM_M for n, k in GEMM_LLM_NK]
    shapes += [(s, s, s) for s in GEMM_RAGGED] + [(m, n, k) for m in DECODE_M for n, k in DECODE_NK]
    return list(dict.fromkeys(shapes))


def decode_step_gemms():
    """(N, K) of one decode step's GEMMs in call order: q, k, v, o, gate, up, down per layer, then lm_head."""
    return DECODE_LAYER_NK * DECODE_LAYERS + [DECODE_NK[-1]]


def attention_shapes(quick):
    seqlens, dims = ([2048, 8192], [64, 128]) if quick else (ATTN_SEQLENS, ATTN_DIMS)
    return [(16384 // s, s, 2048 // d, d, causal) for d in dims for s in seqlens for causal in (False, True)]


def cuda_torch(prog):
    """torch, when it is installed and sees a CUDA device; else None, with the reason on stderr."""
    try:
        import torch
    except ImportError:
        print(f"{prog}: needs torch with CUDA", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{prog}: no GPU: torch sees no CUDA device", file=sys.stderr)
        return None
    return torch


def time_ms(torch, fn, sets, iters, warmup):
    """Median milliseconds of fn(inputs) over `iters` calls, cycling through the input sets."""
    for i in range(warmup):
        fn(sets[i % len(sets)])
    start = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        start[i].record()
        fn(sets[i % len(sets)])
        end[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(start, end))


def kernel_times(torch, fn, iters):
    """{kernel name: (GPU us per call of fn, launches per call)} over `iters` calls of fn() under the torch
    profiler, after one call outside it (memcpy / memset entries left out)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        us = e.cuda_time_total if us is None else us
        if us and e.count and not e.key.startswith(("cudaLaunch", "cudaMemcpy", "Memcpy", "Memset")):
            out[e.key] = (us / iters, e.count / iters)
    return out


def single_call_ms(torch, fns, sets, iters, warmup):
    """Median milliseconds of one call issued onto an idle GPU, per function of `fns`: the stream is
    drained before each call, so the host's launch cost is inside the events, as in an eager step that
    waits on its result. The functions alternate call by call, so that all see the same clock, power
    and host history (a single call's time drifts by 5-15% over a run, which timed one library's calls
    and then the other's ranked them by their turn)."""
    for i in range(warmup):
        for fn in fns:
            fn(sets[i % len(sets)])
    times = [[] for _ in fns]
    for i in range(iters):
        order = range(len(fns)) if i % 2 == 0 else reversed(range(len(fns)))  # neither always goes first
        for j in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            fns[j](sets[i % len(sets)])
            end.record()
            torch.cuda.synchronize()
            times[j].append(start.elapsed_time(end))
    return [statistics.median(t) for t in times]


def back_to_back_ms(torch, fns, sets, calls, reps=3):
    """Milliseconds per call of `calls` calls queued back to back between two events (median of `reps`),
    per function of `fns`, their repetitions alternating."""
    for fn in fns:
        fn(sets[0])
    per_call = [[] for _ in fns]
    for r in range(reps):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for j in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for i in range(calls):
                fns[j](sets[i % len(sets)])
            end.record()
            torch.cuda.synchronize()
            per_call[j].append(start.elapsed_time(end) / calls)
    return [statistics.median(t) for t in per_call]


def host_us(torch, fn, sets, calls):
    """Host microseconds per call of `calls` back-to-back calls: wall (perf_counter) and this thread's CPU
    time (thread_time). Meaningful where the GPU keeps up, so the launch queue never fills and blocks."""
    for i in range(3):
        fn(sets[i % len(sets)])
    torch.cuda.synchronize()
    wall, cpu = time.perf_counter(), time.thread_time()
    for i in range(calls):
        fn(sets[i % len(sets)])
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    torch.cuda.synchronize()
    return wall / calls * 1e6, cpu / calls * 1e6


def settle(torch):
    """Hands the allocator's free blocks back to the driver and waits while it scrubs them. The driver
    clears freed device memory in the background, on HBM bandwidth: kernels timed while a few GB are
    being cleared run slower, whichever library they come from, and torch.cuda.graph frees the cache
    as a capture starts (a large fp32 reference computed before a capture is such a few GB)."""
    gc.collect()
    torch.cuda.synchronize()
    held = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    freed = held - torch.cuda.memory_reserved()
    if freed > 0:
        time.sleep(0.01 + 0.005 * freed / (1 << 30))  # idle time in proportion, with margin


def capture_graph(torch, fn, warmup=2):
    """fn() captured in one CUDA graph; returns (graph, fn's output, which each replay rewrites). The
    warm-up runs on a side stream first, as torch's docs require (lazy initialisation, allocator)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    settle(torch)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    torch.cuda.synchronize()
    return graph, out


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def n_sets(torch, bytes_per_set):
    """Enough input copies that one pass over them exceeds twice the L2 (at most 8)."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    return max(1, min(8, math.ceil(2 * l2 / max(1, bytes_per_set))))


def run_gemm(torch, tessera, args, dtype):
    rows = []
    for m, n, k in gemm_shapes(args.quick):
        make = lambda: (torch.randn(m, k, device="cuda", dtype=dtype), torch.randn(k, n, device="cuda", dtype=dtype))
        sets = [make() for _ in range(n_sets(torch, (m * k + k * n) * 2))]
        out_t, out_r = tessera.matmul(*sets[0]), torch.matmul(*sets[0])
        err = ((out_t.float() - out_r.float()).norm() / out_r.float().norm().clamp_min(1e-30)).item()
        t_ms = time_ms(torch, lambda ab: tessera.matmul(*ab), sets, args.iters, args.warmup)
        r_ms = time_ms(torch, lambda ab: torch.matmul(*ab), sets, args.iters, args.warmup)
        flops = 2.0 * m * n * k
        row = {"shape": f"{m}x{n}x{k}", "tessera": flops / t_ms / 1e9, "torch.matmul": flops / r_ms / 1e9,
               "rel_err": err, "ok": err < (1e-2 if dtype == torch.bfloat16 else 2e-3)}
        del sets, out_t, out_r
        row.update(user_call_row(torch, tessera, args, dtype, m, n, k, min(t_ms, r_ms)))
        rows.append(row)
        yield row


def user_call_row(torch, tessera, args, dtype, m, n, k, kernel_ms):
    """tessera.matmul and torch.matmul as an nn.Linear calls them (a row-major, b = weight.t()): one eager
    call onto an idle GPU, and calls back to back; microseconds per call, ratios torch / tessera."""
    make = lambda: (torch.randn(m, k, device="cuda", dtype=dtype), torch.randn(n, k, device="cuda", dtype=dtype).t())
    sets = [make() for _ in range(n_sets(torch, (m * k + k * n) * 2))]
    calls = max(5, min(args.b2b_calls, int(50.0 / max(kernel_ms, 1e-3))))  # ~50 ms of GPU work per repetition
    keys, fns = ("tessera", "torch"), (lambda ab: tessera.matmul(*ab), lambda ab: torch.matmul(*ab))
    row = {}
    for key, ms in zip(keys, single_call_ms(torch, fns, sets, args.eager_calls, args.warmup)):
        row[f"{key}_eager_us"] = 1e3 * ms
    for key, ms in zip(keys, back_to_back_ms(torch, fns, sets, calls)):
        row[f"{key}_b2b_us"] = 1e3 * ms
    row["eager_ratio"] = row["torch_eager_us"] / row["tessera_eager_us"]
    row["b2b_ratio"] = row["torch_b2b_us"] / row["tessera_b2b_us"]
    return row


def run_host_overhead(torch, tessera, args, dtype):
    """Host CPU microseconds per call of both libraries on HOST_SHAPE (the GPU is not the bottleneck)."""
    m, n, k = HOST_SHAPE
    sets = [(torch.randn(m, k, device="cuda", dtype=dtype), torch.randn(n, k, device="cuda", dtype=dtype).t())]
    row = {"shape": f"{m}x{n}x{k}", "calls": args.host_calls}
    for key, fn in (("tessera", lambda ab: tessera.matmul(*ab)), ("torch", lambda ab: torch.matmul(*ab))):
        row[f"{key}_wall_us"], row[f"{key}_cpu_us"] = host_us(torch, fn, sets, args.host_calls)
    # GPU time per call of the same back-to-back loop: equal to the host's wall time where the host is
    # the bottleneck (as intended here), above it where the GPU is.
    fns = (lambda ab: tessera.matmul(*ab), lambda ab: torch.matmul(*ab))
    for key, ms in zip(("tessera", "torch"), back_to_back_ms(torch, fns, sets, args.host_calls)):
        row[f"{key}_b2b_us"] = 1e3 * ms
    return row


def run_decode_graph(torch, tessera, args, dtype):
    """One decode step's GEMMs (decode_step_gemms: 8 layers and lm_head, distinct weights) captured in one
    CUDA graph per library and replayed; ms per replay and achieved GB/s of weight bytes read."""
    gemms = decode_step_gemms()
    weights = [torch.randn(n, k, device="cuda", dtype=dtype) for n, k in gemms]
    weight_bytes = sum(w.numel() * w.element_size() for w in weights)
    rows = []
    for m in DECODE_M:
        xs = {k: torch.randn(m, k, device="cuda", dtype=dtype) for k in {k for _, k in gemms}}
        row = {"m": m, "gemms": len(gemms), "weight_bytes": weight_bytes}
        for key, mm in (("tessera", tessera.matmul), ("torch", torch.matmul)):
            try:
                graph, _ = capture_graph(torch, lambda: [mm(xs[w.shape[1]], w.t()) for w in weights])
                ms = time_ms(torch, lambda _: graph.replay(), [None], args.iters, args.warmup)
                graph = None  # releases its memory pool before the next capture
            except RuntimeError as e:  # reported, not fatal: the other measurements still stand
                row[f"{key}_error"] = str(e).splitlines()[0]
                row[f"{key}_ms"] = row[f"{key}_gbs"] = row[f"{key}_hbm_pct"] = None
                continue
            row[f"{key}_ms"] = ms
            row[f"{key}_gbs"] = weight_bytes / ms / 1e6
            row[f"{key}_hbm_pct"] = 100.0 * row[f"{key}_gbs"] / args.hbm_peak_gbs
        row["ratio"] = row["torch_ms"] / row["tessera_ms"] if row["tessera_ms"] and row["torch_ms"] else None
        rows.append(row)
    return rows


def run_attention(torch, tessera, args, dtype):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    for b, s, h, d, causal in attention_shapes(args.quick):
        make = lambda: [torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(3)]
        sets = [make() for _ in range(n_sets(torch, 3 * b * s * h * d * 2))]
        ours = lambda qkv: tessera.attention(*qkv, causal=causal)

        def sdpa(backend):
            def fn(qkv):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in qkv), is_causal=causal)
            return fn

        row = {"shape": f"{b}x{s}x{h}x{d}", "causal": causal}
        flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
        ref = sdpa(SDPBackend.FLASH_ATTENTION)(sets[0]).transpose(1, 2)
        err = (ours(sets[0]).float() - ref.float()).abs().max().item()
        row["max_err"], row["ok"] = err, err < (3e-2 if dtype == torch.bfloat16 else 5e-3)
        row["tessera"] = flops / time_ms(torch, ours, sets, args.iters, args.warmup) / 1e9
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                row[name] = flops / time_ms(torch, sdpa(backend), sets, args.iters, args.warmup) / 1e9
            except RuntimeError:  # backend unavailable for this shape / build
                row[name] = None
        yield row


def plot(rows, anchors, title, path, ylabel="TFLOP/s", log=False):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [r["shape"] + (" c" if r.get("causal") else "") + f" {r['dtype']}" for r in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, 0.35 * len(rows)), 8), sharex=True)
    width = 0.8 / (1 + len(anchors))
    for i, key in enumerate(["tessera"] + anchors):
        ax1.bar([x + i * width for x in range(len(rows))], [r.get(key) or 0 for r in rows], width, label=key)
    for key in anchors:
        ax2.plot(range(len(rows)), [(r["tessera"] / r[key]) if r.get(key) and r.get("tessera") else float("nan")
                                    for r in rows], "o-", label=f"tessera / {key}")
    ax2.axhline(1.0, color="gray", lw=0.8)
    if log:
        ax1.set_yscale("log")
    ax1.set_ylabel(ylabel), ax2.set_ylabel("ratio"), ax1.legend(), ax2.legend(), ax1.set_title(title)
    ax2.set_xticks(range(len(rows)), names, rotation=90, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m tessera.bench", description=__doc__.split("\n\n")[1])
    p.add_argument("suite", choices=["gemm", "attention", "llama"],
                   help="llama takes its own options: python -m tessera.bench llama --help")
    p.add_argument("--quick", action="store_true", help="a few representative shapes")
    p.add_argument("--dtypes", default="bf16,fp16", help="comma-separated from bf16, fp16")
    p.add_argument("--out", default="tessera_bench_results", help="output folder (default: %(default)s)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--eager-calls", type=int, default=50,
                   help="gemm: single calls onto an idle GPU, each timed alone (default: %(default)s)")
    p.add_argument("--b2b-calls", type=int, default=200, help="gemm: most calls queued back to back (default: %(default)s)")
    p.add_argument("--host-calls", type=int, default=500,
                   help="gemm: calls timed on the host; below the launch queue's depth, so it never blocks (default: %(default)s)")
    p.add_argument("--hbm-peak-gbs", type=float, default=3350.0,
                   help="gemm: HBM peak in GB/s for the decode graph's %% of peak (default: %(default)s, H100 SXM)")
    p.add_argument("--no-decode-graph", action="store_true", help="gemm: skip the decode-step CUDA graph")
    return p.parse_args(argv)


def print_user_summary(rows, extras, hbm_peak_gbs):
    """Geomeans and the lowest shape of the user-view ratios (torch / tessera time: > 1 means tessera is
    faster), the host overhead and the decode graph against the HBM peak."""
    ratios = (("kernel (events per call, queued)", lambda r: r["tessera"] / r["torch.matmul"]),
              ("one eager call", lambda r: r["eager_ratio"]), ("back to back", lambda r: r["b2b_ratio"]))
    for what, ratio in ratios:
        rs = [r for r in rows if r["ok"]]
        if rs:
            low = min(rs, key=ratio)
            print(f"{what}: torch / tessera time geomean {geomean(map(ratio, rs)):.3f} over {len(rs)}, "
                  f"lowest {ratio(low):.3f} at {low['shape']} {low['dtype']}")
    for r in extras.get("decode_graph", []):
        cells = [f"{key} {r[key + '_ms'] * 1e3:.1f} us {r[key + '_gbs']:.0f} GB/s ({r[key + '_hbm_pct']:.1f}% of "
                 f"{hbm_peak_gbs:.0f})" if r.get(key + "_ms") else f"{key} n/a ({r.get(key + '_error')})"
                 for key in ("tessera", "torch")]
        ratio = f"torch / tessera {r['ratio']:.3f}" if r.get("ratio") else ""
        print(f"decode step graph M={r['m']} {r['dtype']} ({r['gemms']} GEMMs, {r['weight_bytes'] / 1e6:.0f} MB of "
              f"weights): {', '.join(cells)}  {ratio}")


def row_line(row, anchors, n):
    ratios = "  ".join(f"vs {a} {row['tessera'] / row[a]:.3f}" for a in anchors if row.get(a))
    speeds = "  ".join(f"{a} {row[a]:.1f}" for a in anchors if row.get(a))
    user = (f"  eager {row['tessera_eager_us']:.1f}/{row['torch_eager_us']:.1f} us ({row['eager_ratio']:.3f})"
            f"  b2b {row['tessera_b2b_us']:.1f}/{row['torch_b2b_us']:.1f} us ({row['b2b_ratio']:.3f})"
            if "eager_ratio" in row else "")
    return (f"[{n:3d}] {row['shape']:>18} {'causal ' if row.get('causal') else ''}{row['dtype']}  "
            f"tessera {row['tessera']:.1f}  {speeds} TFLOP/s  {ratios}{user}  {'OK' if row['ok'] else 'MISMATCH'}")


def run_gemm_extras(torch, tessera, args, dtype, name, extras):
    host = run_host_overhead(torch, tessera, args, dtype)
    host["dtype"] = name
    extras["host_overhead"].append(host)
    print(f"host per call on {host['shape']} {name}: tessera {host['tessera_wall_us']:.1f} us wall "
          f"{host['tessera_cpu_us']:.1f} us cpu, torch {host['torch_wall_us']:.1f} us wall "
          f"{host['torch_cpu_us']:.1f} us cpu (back to back on the GPU: tessera {host['tessera_b2b_us']:.1f} us, "
          f"torch {host['torch_b2b_us']:.1f} us)", flush=True)
    if not args.no_decode_graph:
        for r in run_decode_graph(torch, tessera, args, dtype):
            r["dtype"] = name
            extras["decode_graph"].append(r)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["llama"]:  # its own options and parser
        from . import llama_bench

        return llama_bench.main(argv[1:])
    if argv[:1] == ["attention"] and "--decode" in argv:  # likewise
        from . import decode_bench

        return decode_bench.main([a for a in argv[1:] if a != "--decode"])
    args = parse_args(argv)
    if args.suite == "llama":
        print("tessera.bench: 'llama' must come first: python -m tessera.bench llama [options]", file=sys.stderr)
        return 2
    torch = cuda_torch("tessera.bench")
    if torch is None:
        return EXIT_NO_GPU
    import tessera

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    gemm = args.suite == "gemm"
    anchors = ["torch.matmul"] if gemm else ["flash", "cudnn"]
    runner = run_gemm if gemm else run_attention
    gpu = torch.cuda.get_device_name(0)
    rows = []
    extras = {"host_overhead": [], "decode_graph": []} if gemm else {}
    for name in args.dtypes.split(","):
        for row in runner(torch, tessera, args, dtypes[name]):
            row["dtype"] = name
            rows.append(row)
            print(row_line(row, anchors, len(rows)), flush=True)
        if gemm:
            run_gemm_extras(torch, tessera, args, dtypes[name], name, extras)
    user_cols = ["eager us tessera/torch", "b2b us tessera/torch"] if gemm else []
    print(f"\n| shape | dtype | tessera | {' | '.join(anchors)} | " + " | ".join(f"vs {a}" for a in anchors)
          + "".join(f" | {c}" for c in user_cols) + " |")
    print("|---|---|---:|" + "---:|" * (2 * len(anchors) + len(user_cols)))
    for r in rows:
        shape = r["shape"] + (" causal" if r.get("causal") else "")
        cells = [f"{r[a]:.1f}" if r.get(a) else "-" for a in anchors]
        cells += [f"{r['tessera'] / r[a]:.3f}" if r.get(a) else "-" for a in anchors]
        if gemm:
            cells += [f"{r[f'tessera_{v}_us']:.1f}/{r[f'torch_{v}_us']:.1f} ({r[f'{v}_ratio']:.3f})" for v in ("eager", "b2b")]
        print(f"| {shape} | {r['dtype']} | {r['tessera']:.1f} | " + " | ".join(cells) + " |")
    for a in anchors:
        rs = [r["tessera"] / r[a] for r in rows if r.get(a) and r["ok"]]
        if rs:
            print(f"geometric mean tessera / {a}: {math.exp(sum(map(math.log, rs)) / len(rs)):.3f} over {len(rs)}")
    if gemm:
        print_user_summary(rows, extras, args.hbm_peak_gbs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    stem = out / f"torch_{args.suite}_{'quick' if args.quick else 'full'}_{stamp}"
    meta = {"gpu": gpu, "torch": torch.__version__, "tessera": tessera.__version__, "date": stamp,
            "commit": os.environ.get("TESSERA_COMMIT", ""), "anchors": anchors}
    if gemm:
        meta["hbm_peak_gbs"] = args.hbm_peak_gbs
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows, **extras}, indent=2) + "\n")
    if plot(rows, anchors, f"tessera {args.suite} vs {', '.join(anchors)} — {gpu}", stem.with_suffix(".png")):
        print(f"wrote {stem}.json and {stem}.png")
    else:
        print(f"wrote {stem}.json (no matplotlib: no plot)")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
