"""Benchmarks of the torch ops against PyTorch's own kernels, in one process on the same inputs.

    python -m tessera.bench gemm       [--quick] [--dtypes bf16,fp16] [--out DIR]
    python -m tessera.bench attention  [--quick] [--dtypes bf16,fp16] [--out DIR]

gemm: tessera.matmul vs torch.matmul (cuBLAS). attention: tessera.attention vs
scaled_dot_product_attention with the flash (FlashAttention-2) and the cuDNN backends.
CUDA events, warm-up, median; several input sets rotated so small problems do not time L2.
Every tessera output is checked against the anchor's. Prints a table, writes JSON and (with
matplotlib) a PNG of TFLOP/s and ratio per shape. Needs torch with CUDA (exit 3 otherwise).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import sys
from pathlib import Path

EXIT_NO_GPU = 3
GEMM_SQUARE = [1024, 2048, 4096, 6144, 8192, 12288, 16384]
GEMM_LLM_M = [128, 1024, 4096, 16384]
GEMM_LLM_NK = [(4096, 4096), (6144, 4096), (28672, 4096), (4096, 14336), (8192, 8192), (57344, 8192), (8192, 28672)]
GEMM_RAGGED = [1000, 3000, 7777]
ATTN_SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
ATTN_DIMS = [64, 128, 256]


def gemm_shapes(quick):
    if quick:
        return [(4096, 4096, 4096), (8192, 8192, 8192), (7777, 7777, 7777), (128, 4096, 4096), (1000, 1000, 1000)]
    shapes = [(s, s, s) for s in GEMM_SQUARE] + [(m, n, k) for m in GEMM_LLM_M for n, k in GEMM_LLM_NK]
    return list(dict.fromkeys(shapes + [(s, s, s) for s in GEMM_RAGGED]))


def attention_shapes(quick):
    seqlens, dims = ([2048, 8192], [64, 128]) if quick else (ATTN_SEQLENS, ATTN_DIMS)
    return [(16384 // s, s, 2048 // d, d, causal) for d in dims for s in seqlens for causal in (False, True)]


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
        rows.append({"shape": f"{m}x{n}x{k}", "tessera": flops / t_ms / 1e9, "torch.matmul": flops / r_ms / 1e9,
                     "rel_err": err, "ok": err < (1e-2 if dtype == torch.bfloat16 else 2e-3)})
        yield rows[-1]


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


def plot(rows, anchors, title, path):
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
        ax2.plot(range(len(rows)), [(r["tessera"] / r[key]) if r.get(key) else float("nan") for r in rows], "o-",
                 label=f"tessera / {key}")
    ax2.axhline(1.0, color="gray", lw=0.8)
    ax1.set_ylabel("TFLOP/s"), ax2.set_ylabel("ratio"), ax1.legend(), ax2.legend(), ax1.set_title(title)
    ax2.set_xticks(range(len(rows)), names, rotation=90, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tessera.bench", description=__doc__.split("\n\n")[1])
    p.add_argument("suite", choices=["gemm", "attention"])
    p.add_argument("--quick", action="store_true", help="a few representative shapes")
    p.add_argument("--dtypes", default="bf16,fp16", help="comma-separated from bf16, fp16")
    p.add_argument("--out", default="tessera_bench_results", help="output folder (default: %(default)s)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("tessera.bench: needs torch with CUDA", file=sys.stderr)
        return EXIT_NO_GPU
    if not torch.cuda.is_available():
        print("tessera.bench: no GPU: torch sees no CUDA device", file=sys.stderr)
        return EXIT_NO_GPU
    import tessera

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    anchors = ["torch.matmul"] if args.suite == "gemm" else ["flash", "cudnn"]
    runner = run_gemm if args.suite == "gemm" else run_attention
    gpu = torch.cuda.get_device_name(0)
    rows = []
    for name in args.dtypes.split(","):
        for row in runner(torch, tessera, args, dtypes[name]):
            row["dtype"] = name
            rows.append(row)
            ratios = "  ".join(f"vs {a} {row['tessera'] / row[a]:.3f}" for a in anchors if row.get(a))
            speeds = "  ".join(f"{a} {row[a]:.1f}" for a in anchors if row.get(a))
            print(f"[{len(rows):3d}] {row['shape']:>18} {'causal ' if row.get('causal') else ''}{name}  "
                  f"tessera {row['tessera']:.1f}  {speeds} TFLOP/s  {ratios}  {'OK' if row['ok'] else 'MISMATCH'}",
                  flush=True)
    print(f"\n| shape | dtype | tessera | {' | '.join(anchors)} | " + " | ".join(f"vs {a}" for a in anchors) + " |")
    print("|---|---|---:|" + "---:|" * (2 * len(anchors)))
    for r in rows:
        shape = r["shape"] + (" causal" if r.get("causal") else "")
        cells = [f"{r[a]:.1f}" if r.get(a) else "-" for a in anchors]
        cells += [f"{r['tessera'] / r[a]:.3f}" if r.get(a) else "-" for a in anchors]
        print(f"| {shape} | {r['dtype']} | {r['tessera']:.1f} | " + " | ".join(cells) + " |")
    for a in anchors:
        rs = [r["tessera"] / r[a] for r in rows if r.get(a) and r["ok"]]
        if rs:
            print(f"geometric mean tessera / {a}: {math.exp(sum(map(math.log, rs)) / len(rs)):.3f} over {len(rs)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    stem = out / f"torch_{args.suite}_{'quick' if args.quick else 'full'}_{stamp}"
    meta = {"gpu": gpu, "torch": torch.__version__, "tessera": tessera.__version__, "date": stamp,
            "commit": os.environ.get("TESSERA_COMMIT", ""), "anchors": anchors}
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    if plot(rows, anchors, f"tessera {args.suite} vs {', '.join(anchors)} — {gpu}", stem.with_suffix(".png")):
        print(f"wrote {stem}.json and {stem}.png")
    else:
        print(f"wrote {stem}.json (no matplotlib: no plot)")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
