#!/usr/bin/env python3
"""Run the whole ladder on this machine's GPU and write the results.

    python3 examples/ladder/run_ladder.py --build-dir build --out bench/results --md docs/ladder.md

Every `ladder_*` executable found in the build folder runs with `--bench` (each verifies its output
against cuBLAS / the fp32 reference before timing it, and times its anchor in the same process).
Extra runs show one rung's parameter: rung 03 with 2 and 4 stages, rung 05 without the swizzle.
If PyTorch is importable, torch SDPA (flash and cuDNN backends, fp16, BHSD) is timed on the
attention rungs' shapes in the same run. If `ncu` is on PATH, rung 05's two variants are profiled
for shared-memory bank conflicts.

Writes <out>/ladder_<gpu>_<UTC time>.json (everything), the Markdown tables to --md, and a PNG
(matplotlib, if installed) next to the JSON and, with --md, as ladder.png beside the Markdown.
Only the standard library is required.
"""
import argparse
import csv
import datetime as dt
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

GEMM_PLOT_SIZE = 4096  # the GEMM panel shows each rung at 4096^3 (rounded to its granularity)

# One line per rung for the tables (what the rung adds); names match the folders.
CONCEPTS = {
    "01_cute_basics": "CuTe layouts, copy + MMA atoms, operands global -> registers",
    "02_smem_tiling": "shared-memory tiles reused by the CTA's warps",
    "03_multistage": "cp.async multistage pipeline (3 stages)",
    "03_multistage_2stages": "... with 2 stages",
    "03_multistage_4stages": "... with 4 stages",
    "04_ldmatrix_regpipe": "ldmatrix + register double buffer",
    "05_swizzle": "Swizzle<3,3,3> shared memory (no bank conflicts)",
    "05_swizzle_off": "... the same kernel without the swizzle",
    "06_smem_epilogue": "smem-staged epilogue, 128-bit coalesced stores",
    "07_int8_mma": "int8 mma.sync m16n8k32 (s8 x s8 -> s32)",
    "08_tma_wgmma": "Hopper: TMA loads + WGMMA, one warpgroup",
    "09_warp_specialized": "producer/consumer warp specialisation, mbarrier pipeline, setmaxnreg",
    "10_persistent_streamk": "persistent tile scheduler, raster/swizzle, stream-K",
    "11_tma_store_epilogue": "stmatrix + TMA-store epilogue",
    "12_flash_attention2": "FlashAttention-2 forward (online softmax, P in registers)",
    "13_flash_attention_hopper": "FlashAttention forward on Hopper (TMA + WGMMA)",
}

# Extra invocations: (binary rung name, extra args).
EXTRA_RUNS = {
    "03_multistage": [["--stages", "2"], ["--stages", "4"]],
    "05_swizzle": [["--variant", "noswizzle"]],
}

NCU_METRICS = [
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def find_binaries(build_dir, only):
    found = {}
    for root, _dirs, files in os.walk(build_dir):
        if "CMakeFiles" in root:
            continue
        for f in files:
            p = os.path.join(root, f)
            if f.startswith("ladder_") and "." not in f and os.access(p, os.X_OK) and os.path.isfile(p):
                name = f[len("ladder_"):]
                if name == "harness":
                    continue
                found.setdefault(name, p)
    names = sorted(found)
    if only:
        names = [n for n in names if any(n == o or n.startswith(o) for o in only)]
    return [(n, found[n]) for n in names]


def run_binary(path, args, timeout=900):
    cmd = [path] + args
    log("$ " + " ".join(cmd))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"cmd": cmd, "rc": None, "error": "timeout", "records": []}
    records = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if p.stderr.strip():
        log(p.stderr.rstrip())
    return {"cmd": cmd, "rc": p.returncode, "stderr": p.stderr[-4000:], "records": records}


def gpu_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60).stdout.strip().splitlines()
        if out:
            name, driver = [x.strip() for x in out[0].split(",", 1)]
            return name, driver
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown_gpu", None


def git_commit(repo):
    """TESSERA_COMMIT (as the other benches: a copied tree's git may be stale), else git."""
    if os.environ.get("TESSERA_COMMIT"):
        return os.environ["TESSERA_COMMIT"]
    try:
        return subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


# ---- torch SDPA -----------------------------------------------------------------------------
def time_sdpa(shapes, iters=20):
    """shapes: list of (B, H, S, D, causal). Returns {key: {backend: {...}}} or an error string."""
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
        return None, f"torch not importable ({e.__class__.__name__}: {e})"
    if not torch.cuda.is_available():
        return None, "torch has no CUDA device"
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": getattr(SDPBackend, "CUDNN_ATTENTION", None)}
    results = {}
    for (B, H, S, D, causal) in shapes:
        key = f"{B}x{H}x{S}x{D}{'_causal' if causal else ''}"
        q, k, v = (torch.rand(B, H, S, D, device="cuda", dtype=torch.float16) * 2 - 1 for _ in range(3))
        flop = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        entry = {}
        for bname, backend in backends.items():
            if backend is None:
                entry[bname] = {"error": "backend not in this torch"}
                continue
            try:
                with sdpa_kernel([backend]):
                    fn = lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                    for _ in range(3):
                        fn()
                    torch.cuda.synchronize()
                    times = []
                    for _ in range(iters):
                        e0 = torch.cuda.Event(enable_timing=True)
                        e1 = torch.cuda.Event(enable_timing=True)
                        e0.record()
                        fn()
                        e1.record()
                        e1.synchronize()
                        times.append(e0.elapsed_time(e1))
                ms = statistics.median(times)
                entry[bname] = {"ms": ms, "tflops": flop / ms * 1e-9}
            except Exception as e:  # noqa: BLE001 - an unavailable backend raises RuntimeError
                entry[bname] = {"error": f"{e.__class__.__name__}: {str(e).splitlines()[0][:200]}"}
        results[key] = entry
        del q, k, v
    return results, f"torch {torch.__version__}"


def sdpa_key(rec):
    B, H, S, D = rec["shape"]
    return f"{B}x{H}x{S}x{D}{'_causal' if rec.get('causal') else ''}"


# ---- ncu ------------------------------------------------------------------------------------
def ncu_bank_conflicts(binary):
    ncu = shutil.which("ncu")
    if not ncu or not binary:
        return None
    out = {}
    for variant in ("swizzle", "noswizzle"):
        cmd = [ncu, "--metrics", ",".join(NCU_METRICS), "-k", "regex:gemm_kernel", "--launch-count", "1",
               "--csv", binary, "--size", "4096", "4096", "4096", "--iters", "1", "--variant", variant]
        log("$ " + " ".join(cmd))
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            out[variant] = {"error": "timeout"}
            continue
        metrics = {}
        text = p.stdout
        start = text.find('"ID"')
        if start >= 0:
            for row in csv.DictReader(io.StringIO(text[start:])):
                name, value = row.get("Metric Name"), row.get("Metric Value")
                if name in NCU_METRICS and value is not None:
                    try:
                        metrics[name] = float(value.replace(",", ""))
                    except ValueError:
                        metrics[name] = value
        if not metrics:
            tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
            metrics = {"error": " | ".join(tail) or f"ncu rc {p.returncode}"}
        out[variant] = metrics
    return out


# ---- output ---------------------------------------------------------------------------------
def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def gemm_label(shape):
    M, N, K = shape
    return f"{M}³" if M == N == K else f"{M}x{N}x{K}"


def write_markdown(path, meta, records, sdpa, ncu, png_name):
    L = []
    L.append("# The ladder, measured")
    L.append("")
    L.append(f"Generated by `examples/ladder/run_ladder.py` on **{meta['gpu']}** (driver {meta.get('driver')}), "
             f"{meta['utc']} UTC, commit `{meta.get('commit')}`. Every number below comes from this one run; "
             "each rung was verified against its oracle (cuBLAS for GEMM, an fp32 reference for attention) "
             "before it was timed, and its anchor was timed in the same process, alternating with the rung. "
             "Times are medians of CUDA-event timings. What each rung teaches: "
             "[examples/ladder/README.md](../examples/ladder/README.md).")
    L.append("")
    if png_name:
        L.append(f"![the climb]({png_name})")
        L.append("")
    gemm = [r for r in records if r.get("kind", "").startswith("gemm")]
    if gemm:
        sizes = []
        for r in gemm:
            lab = gemm_label(r["shape"])
            if lab not in sizes:
                sizes.append(lab)
        L.append("## GEMM (C = A·Bᵀ, fp16 in / fp32 accumulate / fp16 out; rung 07: s8 -> s32)")
        L.append("")
        L.append("Each cell: rung TFLOP/s (TOP/s for int8) / cuBLAS from the same run / ratio.")
        L.append("")
        L.append("| rung | what it adds | " + " | ".join(sizes) + " |")
        L.append("|---|---|" + "---|" * len(sizes))
        by_rung = {}
        for r in gemm:
            by_rung.setdefault(r["rung"], {})[gemm_label(r["shape"])] = r
        for rung, cells in by_rung.items():
            row = [f"`{rung}`", CONCEPTS.get(rung, "")]
            for s in sizes:
                r = cells.get(s)
                if r is None:
                    row.append("")
                elif not r.get("ok"):
                    row.append("FAILED verification")
                else:
                    ratio = r["tflops"] / r["anchor_tflops"] if r.get("tflops") and r.get("anchor_tflops") else None
                    row.append(f"{fmt(r.get('tflops'))} / {fmt(r.get('anchor_tflops'))} / "
                               f"{'-' if ratio is None else f'{ratio:.0%}'}")
            L.append("| " + " | ".join(row) + " |")
        L.append("")
    attn = [r for r in records if r.get("kind") == "attention"]
    if attn:
        L.append("## Attention forward (fp16, BHSD, B·S = 16384 tokens, H = 16)")
        L.append("")
        L.append("TFLOP/s with 4·B·H·S²·D FLOP (halved when causal). Reference = the harness's naive fp32 "
                 "oracle; SDPA = torch.nn.functional.scaled_dot_product_attention in the same run.")
        L.append("")
        L.append("| rung | B x H x S x D | causal | rung | reference | SDPA flash | SDPA cuDNN | rung / best SDPA |")
        L.append("|---|---|---|---|---|---|---|---|")
        for r in attn:
            sd = (sdpa or {}).get(sdpa_key(r), {})
            fl = sd.get("flash", {}).get("tflops")
            cu = sd.get("cudnn", {}).get("tflops")
            best = max([x for x in (fl, cu) if x], default=None)
            ratio = r["tflops"] / best if best and r.get("tflops") else None
            B, H, S, D = r["shape"]
            val = fmt(r.get("tflops")) if r.get("ok") else "FAILED verification"
            L.append(f"| `{r['rung']}` | {B}x{H}x{S}x{D} | {'yes' if r.get('causal') else 'no'} | {val} | "
                     f"{fmt(r.get('anchor_tflops'), 2)} | {fmt(fl)} | {fmt(cu)} | "
                     f"{'-' if ratio is None else f'{ratio:.0%}'} |")
        if sdpa is None:
            L.append("")
            L.append(f"SDPA not measured: {meta.get('sdpa_note')}.")
        L.append("")
    if ncu:
        L.append("## Rung 05: shared-memory bank conflicts (Nsight Compute, one 4096³ launch)")
        L.append("")
        L.append("| variant | " + " | ".join(f"`{m}`" for m in NCU_METRICS) + " |")
        L.append("|---|" + "---|" * len(NCU_METRICS))
        for v, m in ncu.items():
            if "error" in m:
                L.append(f"| {v} | ncu failed: {m['error']} |" + " |" * (len(NCU_METRICS) - 1))
            else:
                L.append(f"| {v} | " + " | ".join(f"{m.get(k, '-'):,.0f}" if isinstance(m.get(k), float)
                                                 else str(m.get(k, "-")) for k in NCU_METRICS) + " |")
        L.append("")
    failed = [f"`{x['name']}` (rc {x['rc']})" for x in meta["runs"] if x["rc"] not in (0, 77)]
    skipped = [f"`{x['name']}`" for x in meta["runs"] if x["rc"] == 77]
    if failed:
        L.append("**Failed:** " + ", ".join(failed))
        L.append("")
    if skipped:
        L.append("Skipped (exit 77: no GPU, or not this GPU's architecture): " + ", ".join(skipped))
        L.append("")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(L))
    log(f"wrote {path}")


def plot(path, records, sdpa):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        log(f"no plot: matplotlib not importable ({e})")
        return False
    gemm = [r for r in records if r.get("kind", "").startswith("gemm") and r.get("ok") and r.get("tflops")]
    # the size closest to 4096 per rung
    pick = {}
    for r in gemm:
        d = abs(r["shape"][0] - GEMM_PLOT_SIZE)
        if r["rung"] not in pick or d < abs(pick[r["rung"]]["shape"][0] - GEMM_PLOT_SIZE):
            pick[r["rung"]] = r
    attn = [r for r in records if r.get("kind") == "attention" and r.get("ok") and r.get("tflops")]
    fig, axes = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [3, 1.3]})
    ax = axes[0]
    names = list(pick)
    xs = range(len(names))
    f16 = [i for i, n in enumerate(names) if pick[n]["kind"] == "gemm_f16"]
    s8 = [i for i, n in enumerate(names) if pick[n]["kind"] == "gemm_s8"]
    # a parameter variant of a rung (e.g. 03 with 2 stages, 05 without swizzle) is drawn lighter
    variant = [n not in CONCEPTS or CONCEPTS[n].startswith("...") for n in names]
    main16 = [i for i in f16 if not variant[i]]
    var16 = [i for i in f16 if variant[i]]
    ax.bar(main16, [pick[names[i]]["tflops"] for i in main16], color="tab:blue", label="rung (fp16)")
    if var16:
        ax.bar(var16, [pick[names[i]]["tflops"] for i in var16], color="tab:blue", alpha=0.4,
               label="variant of the rung before")
    ax.bar([i for i in s8], [pick[names[i]]["tflops"] for i in s8], color="tab:orange", label="rung (int8, TOP/s)")
    anchors16 = [pick[names[i]]["anchor_tflops"] for i in f16 if pick[names[i]].get("anchor_tflops")]
    if anchors16:
        ax.axhline(statistics.median(anchors16), color="tab:blue", ls="--",
                   label=f"cuBLAS fp16 ({statistics.median(anchors16):.0f})")
    for i in s8:
        a = pick[names[i]].get("anchor_tflops")
        if a:
            ax.plot([i - 0.4, i + 0.4], [a, a], color="tab:orange", ls="--", label=f"cuBLAS int8 ({a:.0f})")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"GEMM rungs at ~{GEMM_PLOT_SIZE}³")
    ax.legend(fontsize=8)
    ax = axes[1]
    if attn:
        cfgs = []
        for r in attn:
            c = (r["shape"][2], bool(r.get("causal")))
            if c not in cfgs:
                cfgs.append(c)
        rungs = []
        for r in attn:
            if r["rung"] not in rungs:
                rungs.append(r["rung"])
        width = 0.8 / max(1, len(cfgs))
        for j, c in enumerate(cfgs):
            vals = []
            for rn in rungs:
                m = [r for r in attn if r["rung"] == rn and (r["shape"][2], bool(r.get("causal"))) == c]
                vals.append(m[0]["tflops"] if m else 0)
            xs2 = [i + (j - (len(cfgs) - 1) / 2) * width for i in range(len(rungs))]
            ax.bar(xs2, vals, width, label=f"S={c[0]}{' causal' if c[1] else ''}")
            # the best SDPA backend for this configuration, as a tick over the bar
            for x, rn in zip(xs2, rungs):
                m = [r for r in attn if r["rung"] == rn and (r["shape"][2], bool(r.get("causal"))) == c]
                if m and sdpa:
                    sd = sdpa.get(sdpa_key(m[0]), {})
                    best = max([v.get("tflops") or 0 for v in sd.values()], default=0)
                    if best:
                        ax.plot([x - width / 2, x + width / 2], [best, best], color="black", lw=2)
        ax.plot([], [], color="black", lw=2, label="best torch SDPA")
        ax.set_xticks(range(len(rungs)))
        ax.set_xticklabels(rungs, rotation=20, ha="right", fontsize=8)
        ax.legend(fontsize=7)
    ax.set_title("attention rungs (black: SDPA)")
    ax.set_ylabel("TFLOP/s")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    log(f"wrote {path}")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True, help="CMake build folder holding the ladder_* executables")
    ap.add_argument("--out", required=True, help="folder for the result JSON and PNG")
    ap.add_argument("--md", help="Markdown file to (over)write with the tables, e.g. docs/ladder.md")
    ap.add_argument("--only", nargs="+", help="rung names (or prefixes, e.g. 05) to run")
    ap.add_argument("--no-sdpa", action="store_true", help="do not time torch SDPA")
    ap.add_argument("--no-ncu", action="store_true", help="do not profile rung 05 with ncu")
    args = ap.parse_args()

    bins = find_binaries(args.build_dir, args.only)
    if not bins:
        log(f"no ladder_* executables under {args.build_dir} (build with -DTESSERA_BUILD_LADDER=ON)")
        return 2
    gpu, driver = gpu_name()
    now = dt.datetime.now(dt.timezone.utc)
    meta = {"gpu": gpu, "driver": driver, "utc": now.strftime("%Y-%m-%d %H:%M"),
            "commit": git_commit(os.path.dirname(os.path.abspath(__file__))), "runs": []}
    records = []
    for name, path in bins:
        runs = [[]] + EXTRA_RUNS.get(name, [])
        for extra in runs:
            res = run_binary(path, ["--bench"] + extra)
            meta["runs"].append({"name": name + ("" if not extra else " " + " ".join(extra)), "rc": res["rc"],
                                 "stderr": res.get("stderr", "")})
            records.extend(res["records"])
    sdpa = None
    shapes = sorted({(r["shape"][0], r["shape"][1], r["shape"][2], r["shape"][3], bool(r.get("causal")))
                     for r in records if r.get("kind") == "attention"})
    if shapes and not args.no_sdpa:
        sdpa, note = time_sdpa(shapes)
        meta["sdpa_note"] = note
        log(f"SDPA: {note}")
    ncu = None
    if not args.no_ncu:
        b05 = dict(bins).get("05_swizzle")
        if b05 and shutil.which("ncu"):
            ncu = ncu_bank_conflicts(b05)
        elif b05:
            log("ncu not on PATH: no bank-conflict counts")
    os.makedirs(args.out, exist_ok=True)
    tag = re.sub(r"[^A-Za-z0-9]+", "_", gpu).strip("_") + "_" + now.strftime("%Y%m%dT%H%MZ")
    json_path = os.path.join(args.out, f"ladder_{tag}.json")
    png_path = os.path.join(args.out, f"ladder_{tag}.png")
    have_png = plot(png_path, records, sdpa)
    png_name = None
    if have_png and args.md:
        md_dir = os.path.dirname(os.path.abspath(args.md))
        os.makedirs(md_dir, exist_ok=True)
        shutil.copyfile(png_path, os.path.join(md_dir, "ladder.png"))
        png_name = "ladder.png"
    with open(json_path, "w") as f:
        json.dump({"meta": meta, "records": records, "sdpa": sdpa, "ncu_rung05": ncu}, f, indent=1)
    log(f"wrote {json_path}")
    if args.md:
        write_markdown(args.md, meta, records, sdpa, ncu, png_name)
    bad = [x for x in meta["runs"] if x["rc"] not in (0, 77)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
