"""Decode attention (a few query tokens against a long KV cache) as a CUDA graph replays it:
tessera.attention vs torch SDPA's cuDNN, flash and memory-efficient backends (issue 26).

    python -m tessera.bench attention --decode [--hbm-gbs 3350] [--json FILE] [--quick] [--pages 16,64,256] [--sq 1,4,8]

bf16, layout [B, H, S, D] (SDPA's) with enable_gqa for SDPA; the KV-cache columns time
tessera.attention_with_kvcache on the same keys as a contiguous cache [B, Sk, Hkv, D] ("cache") and as
pages of it in random order ("paged<size>", with its time over the contiguous cache's), not causal (SDPA aligns a causal mask
top-left when Sq != Sk, tessera bottom-right; with Sq = 1 both see every key). Per shape: 20 calls
captured in one graph per backend, K/V rotated over enough copies that L2 never holds them, median
of the replays; before each capture the memory freed so far is scrubbed while the GPU idles
(bench.settle). Reports us per call, GB/s of K/V + Q/O bytes, % of --hbm-gbs, and tessera's ratio to
the best SDPA backend (> 1: tessera faster). Every output is checked against SDPA's.
"""
import argparse
import json
import statistics
import sys

from .bench import capture_graph

# (batch, Sq, Sk, Hq, Hkv, D)
def full_shapes(sqs=(1, 4)):
    """The full grid at these query lengths (K + V at most 2 GiB)."""
    return [(b, sq, sk, hq, hkv, d)
            for d in (128, 64)
            for (hq, hkv) in ((32, 8), (64, 8), (32, 32))
            for b in (1, 8, 32)
            for sk in (1024, 8192, 32768)
            for sq in sqs
            if b * hkv * sk * d * 4 <= (2 << 30)]


FULL = full_shapes()
QUICK = [(1, 1, 8192, 32, 8, 128), (8, 1, 32768, 64, 8, 128), (1, 1, 32768, 32, 8, 128), (32, 1, 4096, 32, 8, 128),
         (8, 4, 8192, 32, 8, 128), (8, 1, 8192, 32, 8, 128), (8, 2, 8192, 32, 8, 128), (8, 8, 8192, 32, 8, 128),
         (1, 16, 8192, 32, 8, 128), (4, 1, 8192, 32, 32, 128), (8, 1, 8192, 32, 8, 64), (1, 1, 131072, 32, 8, 128),
         (128, 1, 1024, 32, 8, 128), (16, 1, 16384, 64, 8, 64)]


def hbm_peak_gbs(name):
    """The datasheet HBM bandwidth of the GPUs this bench is run on (GB/s); an unknown GPU gets H100 SXM's."""
    for key, gbs in (("H200", 4800.0), ("H100 PCIe", 2000.0), ("H100 NVL", 3900.0), ("H100", 3350.0),
                     ("A100-SXM4-80GB", 2039.0), ("A100", 1555.0)):
        if key in name:
            return gbs
    return 3350.0


def summary(rows, hbm_gbs):
    """Issue 26's bars over measured rows (dicts with batch, sq, sk, hq, hkv, d, kv_mb, tessera_us, gbs and,
    where an SDPA backend ran, ratio): the Sq = 1 geomean against the best SDPA backend and its lowest
    shape; the lowest % of the HBM peak among Sq = 1 calls with >= 256 MB of K/V; and the largest time of
    a Sq > 1 call over the Sq = 1 call of the same batch, keys, heads and head dim. Lines of text."""
    def name(r):
        return f"B{r['batch']} Sq{r['sq']} Sk{r['sk']} {r['hq']}/{r['hkv']} d{r['d']}"
    lines = []
    one = [r for r in rows if r["sq"] == 1 and r.get("ratio")]
    if one:
        low = min(one, key=lambda r: r["ratio"])
        gm = statistics.geometric_mean([r["ratio"] for r in one])
        lines.append(f"Sq = 1 vs best SDPA backend: geomean {gm:.3f} over {len(one)} shapes (bar 1.0); "
                     f"lowest {low['ratio']:.3f} ({name(low)})")
    big = [r for r in rows if r["sq"] == 1 and r["kv_mb"] >= 256]
    if big:
        low = min(big, key=lambda r: r["gbs"])
        lines.append(f"Sq = 1 with K/V >= 256 MB: lowest {100 * low['gbs'] / hbm_gbs:.1f}% of {hbm_gbs:.0f} GB/s "
                     f"(bar 85%; {name(low)}) over {len(big)} shapes")
    base = {(r["batch"], r["sk"], r["hq"], r["hkv"], r["d"]): r["tessera_us"] for r in rows if r["sq"] == 1}
    over = [(r["tessera_us"] / base[k], r) for r in rows if r["sq"] > 1
            for k in [(r["batch"], r["sk"], r["hq"], r["hkv"], r["d"])] if k in base]
    if over:
        x, worst = max(over, key=lambda t: t[0])
        lines.append(f"Sq > 1 over Sq = 1: worst {x:.2f}x (bar 1.3; {name(worst)}) over {len(over)} shapes")
    return lines


def capture(torch, fn):
    """fn() as one CUDA graph, warmed once (plans, workspace, backend set-up) and captured after the
    memory freed so far is scrubbed (bench.settle: a previous shape's K/V or the fp32 reference)."""
    return capture_graph(torch, fn, warmup=1)[0]


def replay_us(torch, graph, calls, reps=15):
    graph.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        e0.record()
        graph.replay()
        e1.record()
        e1.synchronize()
        out.append(e0.elapsed_time(e1) * 1000 / calls)
    return statistics.median(out)


def plot(rows, hbm_gbs, title, path):
    """% of the HBM peak per shape for tessera, its paged runs and the SDPA backends (PNG; False without
    matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [f"B{r['batch']} Sq{r['sq']} Sk{r['sk']} {r['hq']}/{r['hkv']} d{r['d']}" for r in rows]
    kv = [r["kv_mb"] * 1e6 + 4 * r["batch"] * r["hq"] * r["sq"] * r["d"] for r in rows]  # bytes moved
    series = ["tessera", "cache"] + sorted({k[:-3] for r in rows for k in r if k.startswith("paged") and k.endswith("_us")},
                                  key=lambda k: int(k[5:])) + ["cudnn", "flash", "efficient"]
    fig, ax = plt.subplots(figsize=(max(8, 0.6 * len(rows)), 5))
    width = 0.8 / len(series)
    for i, key in enumerate(series):
        pct = [100 * b / (r[key + "_us"] * 1e3) / hbm_gbs if r.get(key + "_us") else 0 for r, b in zip(rows, kv)]
        ax.bar([x + i * width for x in range(len(rows))], pct, width, label=key)
    ax.set_ylabel(f"% of HBM peak ({hbm_gbs:.0f} GB/s)")
    ax.set_title(title)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))], names, rotation=60, ha="right", fontsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tessera.bench attention --decode", description=__doc__.split("\n\n")[0])
    p.add_argument("--hbm-gbs", type=float, default=None,
                   help="HBM peak in GB/s for the %% columns (default: by GPU name, H100 SXM 3350, H200 4800)")
    p.add_argument("--json")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--sq", default="1,4",
                   help="query tokens per sequence in the full grid, comma-separated (default: %(default)s)")
    p.add_argument("--pages", default="16,64,256",
                   help="also time tessera.attention_with_kvcache on a paged copy of the cache (pages in random "
                        "order) at these page sizes, comma-separated ('' = none)")
    args = p.parse_args(argv)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import tessera

    if not torch.cuda.is_available():
        print("tessera.bench attention --decode: no GPU (torch sees no CUDA device); nothing measured", file=sys.stderr)
        return 3
    dev = torch.device("cuda")
    if args.hbm_gbs is None:
        args.hbm_gbs = hbm_peak_gbs(torch.cuda.get_device_name())
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    rows = []
    calls = 20
    for (b, sq, sk, hq, hkv, d) in (QUICK if args.quick else full_shapes([int(x) for x in args.sq.split(",") if x])):
        kv_bytes = 2 * b * hkv * sk * d * 2
        copies = max(1, min(calls, -(-200_000_000 // kv_bytes)))  # >= 200 MB touched per replay
        g = torch.Generator(device=dev).manual_seed(0)
        q = torch.rand(b, hq, sq, d, device=dev, generator=g, dtype=torch.bfloat16) - 0.5
        ks = [torch.rand(b, hkv, sk, d, device=dev, generator=g, dtype=torch.bfloat16) - 0.5 for _ in range(copies)]
        vs = [torch.rand(b, hkv, sk, d, device=dev, generator=g, dtype=torch.bfloat16) - 0.5 for _ in range(copies)]
        ref = F.scaled_dot_product_attention(q.float(), ks[0].float(), vs[0].float(), enable_gqa=hkv != hq)
        row = dict(batch=b, sq=sq, sk=sk, hq=hq, hkv=hkv, d=d, kv_mb=round(kv_bytes / 1e6, 1))

        out = tessera.attention(q, ks[0], vs[0], layout="bhsd")
        row["tessera_err"] = float((out.float() - ref).abs().max())
        row["tessera_us"] = replay_us(torch, capture(torch, lambda: [
            tessera.attention(q, ks[i % copies], vs[i % copies], layout="bhsd") for i in range(calls)]), calls)
        # The same keys through attention_with_kvcache (q as [B, Sq, Hq, D]): a contiguous cache
        # [B, Sk, Hkv, D], then pages of it in random order, each timed against the contiguous cache
        # (the same layout and call: what paging alone costs).
        qs = q.transpose(1, 2).contiguous()
        lens = torch.full((b,), sk, dtype=torch.int32, device=dev)
        kc = [k.transpose(1, 2).contiguous() for k in ks]
        vc = [v.transpose(1, 2).contiguous() for v in vs]
        o = tessera.attention_with_kvcache(qs, kc[0], vc[0], cache_seqlens=lens)
        row["cache_err"] = float((o.transpose(1, 2).float() - ref).abs().max())
        row["cache_us"] = round(replay_us(torch, capture(torch, lambda: [
            tessera.attention_with_kvcache(qs, kc[i % copies], vc[i % copies], cache_seqlens=lens)
            for i in range(calls)]), calls), 2)
        for page in [int(x) for x in args.pages.split(",") if x]:
            if sk % page:
                continue
            perm = torch.randperm(b * sk // page, device=dev)
            kp = [x.view(b * sk // page, page, hkv, d)[perm].contiguous() for x in kc]  # page perm[i] holds what page i held
            vp = [x.view(b * sk // page, page, hkv, d)[perm].contiguous() for x in vc]
            table = torch.argsort(perm).to(torch.int32).view(b, sk // page)
            o = tessera.attention_with_kvcache(qs, kp[0], vp[0], cache_seqlens=lens, block_table=table)
            row[f"paged{page}_err"] = float((o.transpose(1, 2).float() - ref).abs().max())
            row[f"paged{page}_us"] = round(replay_us(torch, capture(torch, lambda: [
                tessera.attention_with_kvcache(qs, kp[i % copies], vp[i % copies], cache_seqlens=lens, block_table=table)
                for i in range(calls)]), calls), 2)
            row[f"paged{page}_x"] = round(row[f"paged{page}_us"] / row["cache_us"], 3)
            del kp, vp
        del kc, vc
        best = None
        for name, be in backends.items():
            try:
                with sdpa_kernel(be):
                    o = F.scaled_dot_product_attention(q, ks[0], vs[0], enable_gqa=hkv != hq)
                    t = replay_us(torch, capture(torch, lambda: [
                        F.scaled_dot_product_attention(q, ks[i % copies], vs[i % copies], enable_gqa=hkv != hq)
                        for i in range(calls)]), calls)
                row[name + "_us"] = round(t, 2)
                row[name + "_err"] = float((o.float() - ref).abs().max())
                if best is None or t < best[1]:
                    best = (name, t)
            except RuntimeError as e:  # the backend cannot run this shape
                row[name + "_us"] = None
                row[name + "_why"] = str(e).splitlines()[0][:120]
        bytes_moved = kv_bytes + 2 * b * hq * sq * d * 2
        row["tessera_us"] = round(row["tessera_us"], 2)
        row["gbs"] = round(bytes_moved / row["tessera_us"] / 1e3, 1)
        row["hbm_pct"] = round(100 * row["gbs"] / args.hbm_gbs, 1)
        if best:
            row["best"] = best[0]
            row["best_us"] = round(best[1], 2)
            row["ratio"] = round(best[1] / row["tessera_us"], 3)
            row["best_gbs"] = round(bytes_moved / best[1] / 1e3, 1)
        ok = row["tessera_err"] < 2e-2
        row["ok"] = ok
        rows.append(row)
        ok = ok and all(row[key] < 2e-2 for key in row if key.startswith(("paged", "cache")) and key.endswith("_err"))
        row["ok"] = ok
        paged = " ".join(f"p{key[5:-3]} {row[key]} ({row['paged' + key[5:-3] + '_x']}x)" for key in row
                         if key.startswith("paged") and key.endswith("_us"))
        print(f"B{b:<3} Sq{sq:<2} Sk{sk:<6} {hq}/{hkv} d{d}: tessera {row['tessera_us']:8.2f} us "
              f"({row['gbs']:7.1f} GB/s, {row['hbm_pct']:5.1f}%)  best SDPA {row.get('best')} "
              f"{row.get('best_us')} us  ratio {row.get('ratio')}  err {row['tessera_err']:.2e}"
              + f"  cache {row['cache_us']} us" + (f"  paged: {paged}" if paged else "") + ("" if ok else "  MISMATCH"), flush=True)
        del ks, vs
        torch.cuda.empty_cache()
    ratios = [r["ratio"] for r in rows if r.get("ratio")]
    gm = statistics.geometric_mean(ratios) if ratios else None
    print(f"geomean tessera vs best SDPA backend: {gm:.3f} over {len(ratios)} shapes; lowest "
          f"{min(ratios):.3f}" if ratios else "no SDPA anchor ran")
    bars = summary(rows, args.hbm_gbs)
    for line in bars:
        print(line)
    paged_x = {}
    for r in rows:
        for key in r:
            if key.startswith("paged") and key.endswith("_x"):
                paged_x.setdefault(key[5:-2], []).append(r[key])
    for page, xs in paged_x.items():
        print(f"paged {page} over the contiguous cache: median {statistics.median(xs):.3f}x, worst {max(xs):.3f}x "
              f"over {len(xs)} shapes")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "geomean": gm,
                       "paged_over_cache": {p: {"median": statistics.median(xs), "worst": max(xs)} for p, xs in paged_x.items()},
                       "hbm_gbs": args.hbm_gbs, "summary": bars, "rows": rows}, f, indent=1)
        plot(rows, args.hbm_gbs, f"decode attention, {torch.cuda.get_device_name()}",
             args.json.rsplit(".", 1)[0] + ".png")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
