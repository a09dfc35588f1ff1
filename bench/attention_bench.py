#!/usr/bin/env python3
"""Attention benchmark: tessera against torch SDPA (flash and cuDNN backends), same process, same inputs.

Loads libtessera.so with ctypes and calls tessera_attention (the C ABI of include/tessera/tessera.h)
on torch tensors: data pointers, strides and torch's current CUDA stream. For every shape of the
suite it times tessera, SDPA with SDPBackend.FLASH_ATTENTION and SDPBackend.CUDNN_ATTENTION (CUDA
events around each call, warm-up, median of --iters; a backend that cannot run a shape is recorded
as None), and verifies tessera's O against the flash output (the cuDNN output when flash cannot run).

Suite (the project issue): 16k tokens in total, hidden 2048: B = 16384 // S, H = 2048 // D for
S in {512, 1024, 2048, 4096, 8192, 16384}, D in {64, 128, 256}, causal and not, bf16 and fp16.
Layout BSHD: tensors [B, S, H, D]; SDPA gets the [B, H, S, D] views .transpose(1, 2) of the same
memory. Inputs: torch.randn.

FLOPs (FlashAttention's convention, DESIGN.md section 6): 4 * B * H * S * S * D, halved for
causal (the exact count of unmasked pairs is S(S+1)/2 per head, 0.003% to 0.1% more for these S;
`tessera attention` reports the exact count).

Prints a line per shape, then a Markdown table and the geometric mean of tessera / flash (overall
and per D); writes JSON (GPU, torch version, commit, date, every row), the Markdown table and a PNG
plot (when matplotlib is installed) to --out.

Exit code: 0 when every shape ran and verified (a shape that does not fit in memory is only
reported), 1 when tessera failed or did not verify on a shape (or the run was interrupted), 2 for a
usage problem or a missing library, 3 without torch or a GPU.
"""

import argparse
import ctypes
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXIT_NO_GPU = 3

TOKENS, HIDDEN = 16384, 2048
SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
HEAD_DIMS = [64, 128, 256]
QUICK_SEQLENS = [2048, 8192]
QUICK_HEAD_DIMS = [64, 128]
DTYPE_NAMES = ["bf16", "fp16"]

# Verification of tessera's O against the reference backend's O (both in the low-precision dtype,
# so the difference is up to about twice either one's rounding error):
#   rel = ||O - ref||_F / ||ref||_F      <= FRO_TOL (the DESIGN.md tolerances)
#   |O - ref| <= ATOL + RTOL * |ref|     elementwise (allclose), which catches a few wrong rows that
#                                        the Frobenius norm of a 16k-token tensor would average out.
FRO_TOL = {"bf16": 1e-2, "fp16": 2e-3}
ATOL = {"bf16": 2e-2, "fp16": 4e-3}
RTOL = {"bf16": 2e-2, "fp16": 4e-3}

# tessera_dtype_t
TESSERA_DTYPE = {"fp16": 0, "bf16": 1}


class AttentionArgs(ctypes.Structure):
    """tessera_attention_args_t, field for field (include/tessera/tessera.h)."""

    _fields_ = [
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),  # float*, may be NULL
        ("dtype", ctypes.c_int),   # tessera_dtype_t (a C enum: int)
        ("batch", ctypes.c_int64),
        ("seqlen_q", ctypes.c_int64),
        ("seqlen_k", ctypes.c_int64),
        ("heads_q", ctypes.c_int64),
        ("heads_kv", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("q_stride", ctypes.c_int64 * 3),  # elements between consecutive batch, sequence and head entries
        ("k_stride", ctypes.c_int64 * 3),
        ("v_stride", ctypes.c_int64 * 3),
        ("o_stride", ctypes.c_int64 * 3),
        ("softmax_scale", ctypes.c_float),  # 0 = 1 / sqrt(head_dim)
        ("causal", ctypes.c_int),
    ]


# sizeof / offsetof on x86-64 Linux (checked with a C compiler against tessera.h).
assert ctypes.sizeof(AttentionArgs) == 200 and AttentionArgs.batch.offset == 48 and AttentionArgs.causal.offset == 196


class TesseraError(RuntimeError):
    pass


class Tessera:
    """The C ABI of libtessera.so."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(str(path))
        self.lib.tessera_attention.argtypes = [ctypes.POINTER(AttentionArgs), ctypes.c_void_p]
        self.lib.tessera_attention.restype = ctypes.c_int
        self.lib.tessera_last_error.argtypes = []
        self.lib.tessera_last_error.restype = ctypes.c_char_p
        self.lib.tessera_status_string.argtypes = [ctypes.c_int]
        self.lib.tessera_status_string.restype = ctypes.c_char_p
        self.lib.tessera_version.argtypes = []
        self.lib.tessera_version.restype = ctypes.c_char_p

    def version(self):
        return self.lib.tessera_version().decode()

    @staticmethod
    def make_args(q, k, v, o, lse, dtype, causal, scale=0.0):
        """Args for [B, S, H, D] tensors (any strides with a unit head-dim stride); lse [B, H, Sq] fp32 or None."""
        for name, t in (("q", q), ("k", k), ("v", v), ("o", o)):
            if t.dim() != 4 or t.stride(3) != 1:
                raise ValueError(f"{name}: expected a [B, S, H, D] tensor with unit stride along D")
        a = AttentionArgs()
        a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
        a.lse = lse.data_ptr() if lse is not None else None
        a.dtype = TESSERA_DTYPE[dtype]
        a.batch, a.seqlen_q, a.heads_q, a.head_dim = q.shape
        a.seqlen_k, a.heads_kv = k.shape[1], k.shape[2]
        for field, t in (("q_stride", q), ("k_stride", k), ("v_stride", v), ("o_stride", o)):
            getattr(a, field)[:] = [t.stride(0), t.stride(1), t.stride(2)]
        a.softmax_scale = scale
        a.causal = 1 if causal else 0
        return a

    def attention(self, args, stream):
        status = self.lib.tessera_attention(ctypes.byref(args), ctypes.c_void_p(stream))
        if status != 0:
            raise TesseraError(f"tessera_attention: {self.lib.tessera_status_string(status).decode()}: "
                               f"{self.lib.tessera_last_error().decode()}")


def git_commit():
    """(short commit, dirty) from TESSERA_COMMIT or git; ("unknown", None) without either."""
    if os.environ.get("TESSERA_COMMIT"):
        return os.environ["TESSERA_COMMIT"], None
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.strip()
        return commit, bool(status)
    except (OSError, subprocess.CalledProcessError):
        return "unknown", None


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def flops(b, h, s, d, causal):
    f = 4.0 * b * h * s * s * d
    return f / 2 if causal else f


def tflops(f, ms):
    return f / (ms * 1e-3) / 1e12 if ms else None


def suite(quick, dtypes, only_dims=None):
    seqlens, head_dims = (QUICK_SEQLENS, QUICK_HEAD_DIMS) if quick else (SEQLENS, HEAD_DIMS)
    if only_dims:
        head_dims = [d for d in head_dims if d in only_dims]
    return [{"b": TOKENS // s, "s": s, "h": HIDDEN // d, "d": d, "causal": causal, "dtype": dt}
            for dt in dtypes for d in head_dims for s in seqlens for causal in (False, True)]


def shape_name(c):
    return f"{c['b']}x{c['s']}x{c['h']}x{c['d']}"


def time_cuda(torch, fn, warmup, iters):
    """Median milliseconds of `fn` over `iters` event pairs after `warmup` calls. Everything is enqueued
    before the one synchronisation, so the GPU runs the samples back to back (no host gaps)."""
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def compare(torch, out, ref, dtype):
    """Errors of `out` against `ref` (both [B, S, H, D]) and whether they pass."""
    o, r = out.float(), ref.float()
    diff = (o - r).abs()
    finite = bool(torch.isfinite(o).all().item())
    max_abs = diff.max().item()
    ref_max = r.abs().max().item()
    rel_fro = (torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r).clamp_min(1e-30)).item()
    beyond = int((diff > ATOL[dtype] + RTOL[dtype] * r.abs()).sum().item())
    ok = finite and rel_fro <= FRO_TOL[dtype] and beyond == 0
    return {"max_abs": max_abs, "max_rel": max_abs / ref_max if ref_max > 0 else None, "rel_fro": rel_fro,
            "elements_beyond_tol": beyond, "finite": finite, "pass": ok}


def run_case(torch, tess, c, index, args):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    dt = torch.bfloat16 if c["dtype"] == "bf16" else torch.float16
    b, s, h, d, causal = c["b"], c["s"], c["h"], c["d"], c["causal"]
    f = flops(b, h, s, d, causal)
    row = {"case": c, "shape": shape_name(c), "flops": f, "tessera_ms": None, "flash_ms": None, "cudnn_ms": None,
           "errors": {}, "verify": None, "verify_ref": None, "status": "ok"}
    gen = torch.Generator(device="cuda").manual_seed(args.seed * 1000003 + index)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dt, generator=gen) for _ in range(3))
    out = torch.empty_like(q)
    lse = None if args.no_lse else torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    stream = torch.cuda.current_stream().cuda_stream

    # tessera
    targs = Tessera.make_args(q, k, v, out, lse, c["dtype"], causal)
    try:
        tess.attention(targs, stream)
        torch.cuda.synchronize()
        row["tessera_ms"] = time_cuda(torch, lambda: tess.attention(targs, stream), args.warmup, args.iters)
    except TesseraError as e:
        row["errors"]["tessera"] = str(e)
        row["status"] = "error"

    # torch SDPA on [B, H, S, D] views of the same memory
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    refs = {}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        def call(backend=backend):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        try:
            with warnings.catch_warnings():  # an unavailable backend warns why before it raises
                warnings.simplefilter("ignore")
                refs[name] = call().transpose(1, 2)  # back to [B, S, H, D]
            torch.cuda.synchronize()
            row[f"{name}_ms"] = time_cuda(torch, call, args.warmup, args.iters)
        except RuntimeError as e:  # no kernel of this backend for the shape / dtype / GPU
            row["errors"][name] = str(e).strip().splitlines()[0][:300] if str(e).strip() else repr(e)
            torch.cuda.synchronize()

    ref_name = "flash" if "flash" in refs else ("cudnn" if "cudnn" in refs else None)
    if row["tessera_ms"] is not None and ref_name:
        # O poisoned with NaN, then one more call: an element tessera does not write shows as non-finite.
        out.fill_(float("nan"))
        tess.attention(targs, stream)
        torch.cuda.synchronize()
        row["verify"] = compare(torch, out, refs[ref_name], c["dtype"])
        row["verify_ref"] = ref_name
        if not row["verify"]["pass"]:
            row["status"] = "verify_failed"
    for name in ("tessera", "flash", "cudnn"):
        row[f"{name}_tflops"] = tflops(f, row[f"{name}_ms"])
    row["ratio_flash"] = (row["tessera_tflops"] / row["flash_tflops"]
                          if row["tessera_tflops"] and row["flash_tflops"] else None)
    row["ratio_cudnn"] = (row["tessera_tflops"] / row["cudnn_tflops"]
                          if row["tessera_tflops"] and row["cudnn_tflops"] else None)
    del q, k, v, out, lse, refs
    return row


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def verify_cell(row):
    v = row["verify"]
    if v is None:
        return "-" if "tessera" not in row["errors"] else "ERROR"
    mark = "" if v["pass"] else " FAIL"
    ref = "" if row["verify_ref"] == "flash" else f" (vs {row['verify_ref']})"
    return f"{v['max_abs']:.1e}{ref}{mark}"


def progress_line(i, n, row):
    c = row["case"]
    head = (f"[{i:>2}/{n}] S={c['s']:<5} B={c['b']:<2} H={c['h']:<2} D={c['d']:<3} "
            f"{'causal' if c['causal'] else 'full  '} {c['dtype']:<4}")
    if "tessera" in row["errors"] or "run" in row["errors"]:
        return f"{head}  ERROR: {row['errors'].get('tessera') or row['errors']['run']}  ({row['seconds']}s)"
    v = row["verify"]
    check = "-" if v is None else (f"err {v['max_abs']:.1e} rel {v['rel_fro']:.1e} "
                                   f"{'OK' if v['pass'] else 'FAIL'}")
    return (f"{head}  tessera {fmt(row['tessera_tflops'], '6.1f')}  flash {fmt(row['flash_tflops'], '6.1f')}  "
            f"cudnn {fmt(row['cudnn_tflops'], '6.1f')} TFLOP/s  vs flash {fmt(row['ratio_flash'], '.3f')}  "
            f"vs cudnn {fmt(row['ratio_cudnn'], '.3f')}  {check}  ({row['seconds']}s)")


def geomean(values):
    values = [x for x in values if x and x > 0]
    return (math.exp(sum(math.log(x) for x in values) / len(values)), len(values)) if values else (None, 0)


def ratios(rows, key, d=None):
    """Ratios of the rows that ran and verified (a wrong result's speed means nothing)."""
    return [r[key] for r in rows if r["status"] == "ok" and r[key] and (d is None or r["case"]["d"] == d)]


def markdown(meta, rows):
    gpu = meta["gpu"]
    dirty = " (dirty tree)" if meta.get("dirty") else ""
    lines = [
        f"# tessera attention vs torch SDPA ({meta['suite']})",
        "",
        f"GPU: {gpu['name']} (cc {gpu['cc']}, {gpu['sms']} SMs) · commit {meta['commit']}{dirty} · {meta['date']} · "
        f"torch {meta['torch']} (CUDA {meta['torch_cuda']}, cuDNN {meta['cudnn']}) · tessera {meta['tessera_version']}",
        "",
        f"tessera kernel family: {meta.get('tessera_attn_family', '?')}"
        + (f" (config {meta['tessera_attn_config']})" if meta.get("tessera_attn_config") else ""),
        "",
        f"16k tokens, hidden 2048 (B = 16384 / S, H = 2048 / D), BSHD, randn inputs, LSE "
        f"{'off' if meta['no_lse'] else 'written'}. CUDA events, median of {meta['iters']} after {meta['warmup']} "
        "warm-up, same process and inputs. TFLOP/s = 4·B·H·S²·D / t, halved for causal (FlashAttention's "
        "convention). Ratios = tessera / backend. Max err: max |O_tessera − O_flash| (bf16/fp16 outputs).",
        "",
        "| shape BxSxHxD | causal | dtype | tessera | flash | cudnn | vs flash | vs cudnn | max err |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        c = row["case"]
        lines.append(f"| {row['shape']} | {'yes' if c['causal'] else 'no'} | {c['dtype']} | "
                     f"{fmt(row['tessera_tflops'], '.1f')} | {fmt(row['flash_tflops'], '.1f')} | "
                     f"{fmt(row['cudnn_tflops'], '.1f')} | {fmt(row['ratio_flash'], '.3f')} | "
                     f"{fmt(row['ratio_cudnn'], '.3f')} | {verify_cell(row)} |")
    lines.append("")
    g, n = geomean(ratios(rows, "ratio_flash"))
    lines.append(f"Geometric mean tessera / flash: **{fmt(g, '.3f')}** over {n} verified shapes")
    for d in meta["head_dims"]:
        g, n = geomean(ratios(rows, "ratio_flash", d))
        lines.append(f"- D={d}: {fmt(g, '.3f')} over {n} shapes")
    g, n = geomean(ratios(rows, "ratio_cudnn"))
    lines.append(f"\nGeometric mean tessera / cuDNN: {fmt(g, '.3f')} over {n} verified shapes")
    unavailable = [(r["shape"], name) for r in rows for name in ("flash", "cudnn") if name in r["errors"]]
    if unavailable:
        lines.append(f"\n{len(unavailable)} backend/shape pairs could not run (None in the table); see the JSON.")
    failed = [r for r in rows if r["status"] in ("error", "verify_failed")]
    if failed:
        lines.append(f"\n**{len(failed)} shape(s) failed or did not verify**; see the table and the JSON.")
    oom = [r["shape"] for r in rows if r["status"] == "oom"]
    if oom:
        lines.append(f"\nOut of memory (not run): {', '.join(oom)}.")
    return "\n".join(lines) + "\n"


def plot(path, meta, rows):
    """TFLOP/s per shape for the three, one panel per (dtype, causal). Returns False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = sorted({(r["case"]["dtype"], r["case"]["causal"]) for r in rows})
    if not panels:
        return False
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8, 0.6 * len(rows) / len(panels) + 4), 3.6 * len(panels)),
                             squeeze=False)
    for ax, (dt, causal) in zip(axes[:, 0], panels):
        sel = [r for r in rows if r["case"]["dtype"] == dt and r["case"]["causal"] == causal]
        x = range(len(sel))
        width = 0.27
        for j, (name, color) in enumerate((("tessera", "tab:red"), ("flash", "tab:blue"), ("cudnn", "tab:green"))):
            ys = [r[f"{name}_tflops"] or 0 for r in sel]
            ax.bar([i + (j - 1) * width for i in x], ys, width, label=name, color=color)
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"S{r['case']['s']}\nD{r['case']['d']}" for r in sel], fontsize=7)
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{dt}, {'causal' if causal else 'non-causal'}")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"attention forward, 16k tokens, hidden 2048 — {meta['gpu']['name']}, commit {meta['commit']}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_outputs(stem, meta, rows):
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(meta, rows))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", default=str(ROOT / "build" / "libtessera.so"), help="libtessera.so (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="S in {2048, 8192}, D in {64, 128}, bf16 only (unless --dtypes)")
    p.add_argument("--dtypes", default=None, help="comma-separated from bf16, fp16 (default: bf16,fp16; --quick: bf16)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output folder (default: %(default)s)")
    p.add_argument("--iters", type=int, default=20, help="timed calls per library and shape (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up calls per library and shape (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: %(default)s)")
    p.add_argument("--no-lse", action="store_true", help="tessera does not write the log-sum-exp (lse = NULL)")
    p.add_argument("--head-dims", default=None,
                   help="comma-separated subset of the suite's head dims (e.g. 128 with TESSERA_ATTN_CONFIG)")
    p.add_argument("--tag", default="", help="text added to the output file names (e.g. a config name)")
    args = p.parse_args(argv)
    args.head_dims = [int(x) for x in args.head_dims.split(",")] if args.head_dims else None
    dtypes = args.dtypes.split(",") if args.dtypes else (["bf16"] if args.quick else list(DTYPE_NAMES))
    dtypes = ["fp16" if x in ("f16", "half") else x for x in dtypes]
    unknown = [x for x in dtypes if x not in DTYPE_NAMES]
    if unknown:
        p.error(f"--dtypes: unknown {', '.join(unknown)} (expected bf16, fp16)")
    if args.iters < 1 or args.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    args.dtypes = dtypes
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("attention_bench: torch is not installed; this benchmark needs torch with CUDA and an NVIDIA GPU",
              file=sys.stderr)
        return EXIT_NO_GPU
    if not torch.cuda.is_available():
        print(f"attention_bench: no GPU: torch {torch.__version__} sees no CUDA device "
              "(this benchmark needs an NVIDIA GPU, sm_80+)", file=sys.stderr)
        return EXIT_NO_GPU
    lib = Path(args.lib)
    if not lib.is_file():
        print(f"attention_bench: no library at {lib}; build it first (cmake -S . -B build -G Ninja && "
              "ninja -C build tessera_shared) or pass --lib", file=sys.stderr)
        return 2
    tess = Tessera(lib)

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    commit, dirty = git_commit()
    started = utc_now()
    cases = suite(args.quick, args.dtypes, args.head_dims)
    meta = {
        "suite": "quick" if args.quick else "full",
        "gpu": {"name": props.name, "cc": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
                "memory_bytes": props.total_memory},
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "commit": commit,
        "dirty": dirty,
        "date": started.isoformat().replace("+00:00", "Z"),
        "tessera_version": tess.version(),
        "lib": str(lib),
        "dtypes": args.dtypes,
        "head_dims": sorted({c["d"] for c in cases}),
        "iters": args.iters,
        "warmup": args.warmup,
        "seed": args.seed,
        "no_lse": args.no_lse,
        "layout": "bshd",
        "flops_convention": "4*B*H*S*S*D, halved for causal (FlashAttention's)",
        "verify": {"reference": "SDPA flash output (cuDNN when flash cannot run)", "fro_tol": FRO_TOL,
                   "atol": ATOL, "rtol": RTOL},
    }
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = f"_{args.tag}" if args.tag else ""
    meta["tag"] = args.tag
    meta["tessera_attn_config"] = os.environ.get("TESSERA_ATTN_CONFIG", "")
    # Kernel family: on cc 9.0 the sm90 (WGMMA) rows of src/attention/configs.def, unless
    # TESSERA_ATTN_ARCH=80 keeps the sm80 (mma.sync) ones.
    arch = os.environ.get("TESSERA_ATTN_ARCH", "")
    meta["tessera_attn_family"] = "sm80" if arch == "80" or (props.major, props.minor) != (9, 0) else "sm90"
    stem = out_dir / f"attention_{meta['suite']}{tag}_{started.strftime('%Y%m%dT%H%M%SZ')}_{commit}"
    print(f"attention_bench: {len(cases)} shapes on {props.name} (cc {props.major}.{props.minor}), torch "
          f"{torch.__version__}, commit {commit}; results -> {stem}.json", flush=True)

    rows = []
    try:
        for i, c in enumerate(cases, 1):
            start = time.monotonic()
            try:
                row = run_case(torch, tess, c, i, args)
            except torch.cuda.OutOfMemoryError as e:
                row = {"case": c, "shape": shape_name(c), "status": "oom",
                       "errors": {"run": "out of memory: " + str(e).strip().splitlines()[0][:300]},
                       "verify": None, "verify_ref": None, "flops": flops(c["b"], c["h"], c["s"], c["d"], c["causal"])}
                for name in ("tessera", "flash", "cudnn"):
                    row[f"{name}_ms"] = row[f"{name}_tflops"] = None
                row["ratio_flash"] = row["ratio_cudnn"] = None
                torch.cuda.empty_cache()
            row["seconds"] = round(time.monotonic() - start, 2)
            rows.append(row)
            print(progress_line(i, len(cases), row), flush=True)
            write_outputs(stem, meta, rows)  # keep partial results if interrupted
    except KeyboardInterrupt:
        print("attention_bench: interrupted; writing the rows so far", file=sys.stderr)
        meta["interrupted"] = True
    write_outputs(stem, meta, rows)
    png = stem.with_suffix(".png")
    plotted = plot(png, meta, rows)

    print()
    print(markdown(meta, rows), end="")
    print(f"\nwrote {stem.with_suffix('.json')}\nwrote {stem.with_suffix('.md')}")
    print(f"wrote {png}" if plotted else "no plot: matplotlib is not installed")
    bad = [r for r in rows if r["status"] in ("error", "verify_failed")]
    return 1 if bad or meta.get("interrupted") else 0


if __name__ == "__main__":
    sys.exit(main())
