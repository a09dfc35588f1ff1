#!/usr/bin/env python3
"""Attention benchmark: tessera against torch SDPA (flash and cuDNN backends), same process, same inputs.

Loads libtessera.so with ctypes and calls tessera_attention (the C ABI of include/tessera/tessera.h)
on torch tensors: data pointers, strides and torch's current CUDA stream. For every shape of the
suite it times tessera, SDPA with SDPBackend.FLASH_ATTENTION and SDPBackend.CUDNN_ATTENTION (CUDA
events around each call, warm-up, median of --iters; a backend that cannot run a shape is recorded
as None), and verifies tessera's O against the flash output (the cuDNN output when flash cannot run).

Suite (issue 25): 16k tokens in total, hidden 2048: B = 16384 // S, H = 2048 // D for
S in {512, 1024, 2048, 4096, 8192, 16384}, D in {64, 96, 128, 256} (D = 96: H = 21, hidden 2016),
causal and not, bf16 and fp16; plus GQA at D = 128 with (Hq, Hkv) = (32, 8) and (64, 8), same B and
S (SDPA with enable_gqa=True). Layout BSHD: q [B, S, Hq, D], k and v [B, S, Hkv, D]; SDPA gets the
[B, H, S, D] views .transpose(1, 2) of the same memory. Inputs: torch.randn.

FLOPs (FlashAttention's convention, DESIGN.md section 6): 4 * B * Hq * S * S * D, halved for
causal (the exact count of unmasked pairs is S(S+1)/2 per head, 0.003% to 0.1% more for these S;
`tessera attention` reports the exact count).

Prints a line per shape, then a Markdown table, geometric means of tessera / flash and tessera / cuDNN
(overall and per head dim / GQA config) and the issue 25 bar (geomean >= 1.0x cuDNN, no shape below
0.85x cuDNN, D 128 and 256 at S 16k >= 1.0x cuDNN, >= 1.2x flash where cuDNN cannot run); writes JSON (GPU, torch version, commit, date, every row), the Markdown table and a PNG
plot (TFLOP/s vs S per head dim and GQA config, bf16; when matplotlib is installed) to --out.

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
HEAD_DIMS = [64, 96, 128, 256]
QUICK_SEQLENS = [2048, 8192]
QUICK_HEAD_DIMS = [64, 128]
# GQA shapes (issue 25): (heads_q, heads_kv) at GQA_HEAD_DIM, B = 16384 // S, every S of the suite.
GQA_HEAD_DIM = 128
GQA_HEADS = [(32, 8), (64, 8)]
QUICK_GQA = [((32, 8), 8192)]  # (heads, S) of --quick
# The issue 25 bar (tessera / backend TFLOP/s).
BAR_GEOMEAN_CUDNN = 1.0
BAR_MIN_CUDNN = 0.85
BAR_LONG_CUDNN = 1.0      # D 128 and 256 at S = BAR_LONG_S, causal and not
BAR_LONG_S = 16384
BAR_LONG_DIMS = (128, 256)
BAR_NO_CUDNN_FLASH = 1.2  # shapes cuDNN cannot run (D 96): every one vs flash
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
        ("max_sms", ctypes.c_int),         # SM budget, 0 = every SM
        ("window_left", ctypes.c_int64),   # local attention, -1 = unlimited
        ("window_right", ctypes.c_int64),
        ("softcap", ctypes.c_float),       # 0 = none
    ]


# sizeof / offsetof on x86-64 Linux (checked with gcc -I include against tessera.h: sizeof 232, batch 48,
# causal 196, max_sms 200, window_left 208, window_right 216, softcap 224).
assert (ctypes.sizeof(AttentionArgs) == 232 and AttentionArgs.batch.offset == 48
        and AttentionArgs.causal.offset == 196 and AttentionArgs.max_sms.offset == 200
        and AttentionArgs.window_left.offset == 208 and AttentionArgs.window_right.offset == 216
        and AttentionArgs.softcap.offset == 224)


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
        a.max_sms = 0
        a.window_left = a.window_right = -1
        a.softcap = 0.0
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
    """Cases per dtype: the MHA shapes (H = 2048 // D), then the GQA shapes at D = GQA_HEAD_DIM (kept
    when that head dim is selected)."""
    seqlens, head_dims = (QUICK_SEQLENS, QUICK_HEAD_DIMS) if quick else (SEQLENS, HEAD_DIMS)
    gqa = QUICK_GQA if quick else [(hh, s) for hh in GQA_HEADS for s in SEQLENS]
    if only_dims:
        head_dims = [d for d in head_dims if d in only_dims]
        if GQA_HEAD_DIM not in only_dims:
            gqa = []
    cases = []
    for dt in dtypes:
        cases += [{"b": TOKENS // s, "s": s, "h": HIDDEN // d, "hkv": HIDDEN // d, "d": d, "causal": causal,
                   "dtype": dt}
                  for d in head_dims for s in seqlens for causal in (False, True)]
        cases += [{"b": TOKENS // s, "s": s, "h": hq, "hkv": hkv, "d": GQA_HEAD_DIM, "causal": causal, "dtype": dt}
                  for (hq, hkv), s in gqa for causal in (False, True)]
    return cases


def hkv(c):
    return c.get("hkv", c["h"])


def is_gqa(c):
    return hkv(c) != c["h"]


def heads_name(c):
    return f"{c['h']}/{hkv(c)}" if is_gqa(c) else f"{c['h']}"


def shape_name(c):
    """BxSxHxD, GQA as BxSxHq/HkvxD (4x4096x32/8x128)."""
    return f"{c['b']}x{c['s']}x{heads_name(c)}x{c['d']}"


def group_name(c):
    """The plot panel / summary group of a case: "D64" ... for MHA, "GQA 32/8" ... (at D 128)."""
    return f"GQA {heads_name(c)}" if is_gqa(c) else f"D{c['d']}"


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
    h_kv = hkv(c)
    f = flops(b, h, s, d, causal)  # query heads
    row = {"case": c, "shape": shape_name(c), "flops": f, "tessera_ms": None, "flash_ms": None, "cudnn_ms": None,
           "errors": {}, "verify": None, "verify_ref": None, "status": "ok"}
    gen = torch.Generator(device="cuda").manual_seed(args.seed * 1000003 + index)
    q, k, v = (torch.randn(b, s, hh, d, device="cuda", dtype=dt, generator=gen) for hh in (h, h_kv, h_kv))
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
    gqa_kw = {"enable_gqa": True} if h_kv != h else {}  # torch >= 2.5
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        def call(backend=backend):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, **gqa_kw)
        try:
            with warnings.catch_warnings():  # an unavailable backend warns why before it raises
                warnings.simplefilter("ignore")
                refs[name] = call().transpose(1, 2)  # back to [B, S, H, D]
            torch.cuda.synchronize()
            row[f"{name}_ms"] = time_cuda(torch, call, args.warmup, args.iters)
        except (RuntimeError, TypeError) as e:  # no kernel for the shape / dtype / GPU (TypeError: no enable_gqa)
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
    head = (f"[{i:>3}/{n}] S={c['s']:<5} B={c['b']:<2} H={heads_name(c):<4} D={c['d']:<3} "
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


def verified(rows):
    """The rows that ran and verified (a wrong result's speed means nothing)."""
    return [r for r in rows if r["status"] == "ok"]


def ratios(rows, key, group=None):
    """Ratios of the verified rows, optionally of one group_name ("D128", "GQA 32/8")."""
    return [r[key] for r in verified(rows) if r[key] and (group is None or group_name(r["case"]) == group)]


def groups_of(rows):
    """group_name()s in suite order: the head dims ascending, then the GQA configs."""
    names = {group_name(r["case"]): (is_gqa(r["case"]), r["case"]["d"], r["case"]["h"]) for r in rows}
    return sorted(names, key=lambda g: names[g])


def _gm(values):
    g, n = geomean(values)
    return {"value": g, "n": n}


def _where(r, key):
    c = r["case"]
    return {"value": r[key], "shape": r["shape"], "causal": c["causal"], "dtype": c["dtype"]}


def _lowest(rows, key):
    rs = [r for r in verified(rows) if r[key]]
    return _where(min(rs, key=lambda r: r[key]), key) if rs else None


def _fmt_where(w):
    return "-" if w is None else f"{w['value']:.3f} ({w['shape']} {'causal' if w['causal'] else 'non-causal'} {w['dtype']})"


def summarize(rows):
    """The numbers of the Markdown summary and the issue 25 bar (also written to the JSON's meta.summary)."""
    ok = verified(rows)
    s = {
        "shapes": len(rows),
        "verified": len(ok),
        "failed": [r["shape"] + (" causal " if r["case"]["causal"] else " ") + r["case"]["dtype"]
                   for r in rows if r["status"] in ("error", "verify_failed")],
        "oom": [r["shape"] for r in rows if r["status"] == "oom"],
        "geomean_flash": _gm(ratios(rows, "ratio_flash")),
        "geomean_cudnn": _gm(ratios(rows, "ratio_cudnn")),
        "lowest_cudnn": _lowest(rows, "ratio_cudnn"),
        "lowest_flash": _lowest(rows, "ratio_flash"),
        "groups": {g: {"flash": _gm(ratios(rows, "ratio_flash", g)), "cudnn": _gm(ratios(rows, "ratio_cudnn", g))}
                   for g in groups_of(rows)},
    }
    # D 128 / 256 at 16k (MHA), each dtype and causal: vs cuDNN.
    long_rows = [r for r in rows if not is_gqa(r["case"]) and r["case"]["d"] in BAR_LONG_DIMS
                 and r["case"]["s"] == BAR_LONG_S]
    s["long_cudnn"] = [dict(_where(r, "ratio_cudnn"), status=r["status"]) for r in long_rows]
    # Verified shapes that cuDNN could not run: vs flash.
    no_cudnn = [r for r in ok if r["ratio_cudnn"] is None and r["ratio_flash"]]
    s["no_cudnn"] = {"shapes": [r["shape"] + (" causal " if r["case"]["causal"] else " ") + r["case"]["dtype"]
                                for r in no_cudnn],
                     "geomean_flash": _gm([r["ratio_flash"] for r in no_cudnn]),
                     "lowest_flash": _where(min(no_cudnn, key=lambda r: r["ratio_flash"]), "ratio_flash")
                     if no_cudnn else None}
    s["bar"] = bar(s)
    return s


def bar(s):
    """The issue 25 "done when" checks: {name: {"pass": True / False / None (nothing to check), "text"}}."""
    checks = {}
    g = s["geomean_cudnn"]
    checks["geomean_cudnn"] = {
        "pass": None if g["value"] is None else g["value"] >= BAR_GEOMEAN_CUDNN,
        "text": f"geomean vs cuDNN >= {BAR_GEOMEAN_CUDNN:.2f}x: {fmt(g['value'], '.3f')} over {g['n']} shapes"}
    low = s["lowest_cudnn"]
    checks["lowest_cudnn"] = {
        "pass": None if low is None else low["value"] >= BAR_MIN_CUDNN,
        "text": f"no shape below {BAR_MIN_CUDNN:.2f}x cuDNN: lowest {_fmt_where(low)}"}
    long = s["long_cudnn"]
    measured = [x for x in long if x["status"] == "ok" and x["value"]]
    broken = [x for x in long if x["status"] in ("error", "verify_failed")]
    parts = [f"D{x['shape'].split('x')[-1]} {'causal' if x['causal'] else 'full'} {x['dtype']} "
             f"{fmt(x['value'], '.3f')}" for x in long if x["status"] != "oom"]
    checks["long_cudnn"] = {
        "pass": None if not measured and not broken else
        (not broken and all(x["value"] >= BAR_LONG_CUDNN for x in measured)),
        "text": f"D {'/'.join(map(str, BAR_LONG_DIMS))} at S {BAR_LONG_S} >= {BAR_LONG_CUDNN:.2f}x cuDNN: "
                + (", ".join(parts) if parts else "no such shape")}
    nc = s["no_cudnn"]
    checks["no_cudnn_flash"] = {
        "pass": None if nc["lowest_flash"] is None else nc["lowest_flash"]["value"] >= BAR_NO_CUDNN_FLASH,
        "text": f"shapes without cuDNN (D96) >= {BAR_NO_CUDNN_FLASH:.2f}x flash: lowest "
                f"{_fmt_where(nc['lowest_flash'])}, geomean {fmt(nc['geomean_flash']['value'], '.3f')} over "
                f"{nc['geomean_flash']['n']} shapes"}
    checks["all_verified"] = {
        "pass": not s["failed"] and s["verified"] > 0,
        "text": f"every shape ran and verified: {s['verified']}/{s['shapes']}"
                + (f", failed: {', '.join(s['failed'])}" if s["failed"] else "")
                + (f", out of memory: {len(s['oom'])}" if s["oom"] else "")}
    return checks


def bar_lines(s):
    mark = {True: "PASS", False: "FAIL", None: "n/a "}
    return ["issue 25 bar (its targets are H100 numbers):"] + [f"  {mark[c['pass']]}  {c['text']}" for c in s["bar"].values()]


def markdown(meta, rows):
    gpu = meta["gpu"]
    dirty = " (dirty tree)" if meta.get("dirty") else ""
    s = meta.get("summary") or summarize(rows)
    family = meta.get("tessera_attn_family", "?")
    if meta.get("tessera_attn_family_note"):
        family += f" ({meta['tessera_attn_family_note']})"
    lines = [
        f"# tessera attention vs torch SDPA ({meta['suite']})",
        "",
        f"GPU: {gpu['name']} (cc {gpu['cc']}, {gpu['sms']} SMs) · commit {meta['commit']}{dirty} · {meta['date']} · "
        f"torch {meta['torch']} (CUDA {meta['torch_cuda']}, cuDNN {meta['cudnn']}) · tessera {meta['tessera_version']}",
        "",
        f"tessera kernel family: {family}"
        + (f" (config {meta['tessera_attn_config']})" if meta.get("tessera_attn_config") else ""),
        "",
        f"16k tokens, hidden 2048 (B = 16384 / S, H = 2048 / D; D = 96: H = 2048 // 96 = 21, hidden 2016), "
        f"plus GQA at D = {GQA_HEAD_DIM}, Hq/Hkv = {', '.join(f'{a}/{b}' for a, b in GQA_HEADS)} (same B; SDPA with "
        f"enable_gqa=True; FLOPs count the query heads). BSHD, randn inputs, LSE "
        f"{'off' if meta['no_lse'] else 'written'}. CUDA events, median of {meta['iters']} after {meta['warmup']} "
        "warm-up, same process and inputs. TFLOP/s = 4·B·Hq·S²·D / t, halved for causal (FlashAttention's "
        "convention). Ratios = tessera / backend. Max err: max |O_tessera − O_flash| (bf16/fp16 outputs).",
        "",
        "| shape BxSxHxD (GQA: Hq/Hkv) | causal | dtype | tessera | flash | cudnn | vs flash | vs cudnn | max err |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        c = row["case"]
        lines.append(f"| {row['shape']} | {'yes' if c['causal'] else 'no'} | {c['dtype']} | "
                     f"{fmt(row['tessera_tflops'], '.1f')} | {fmt(row['flash_tflops'], '.1f')} | "
                     f"{fmt(row['cudnn_tflops'], '.1f')} | {fmt(row['ratio_flash'], '.3f')} | "
                     f"{fmt(row['ratio_cudnn'], '.3f')} | {verify_cell(row)} |")
    lines.append("")
    gf, gc = s["geomean_flash"], s["geomean_cudnn"]
    lines.append(f"Geometric mean over {s['verified']} verified shapes: tessera / cuDNN **{fmt(gc['value'], '.3f')}** "
                 f"({gc['n']} shapes), tessera / flash **{fmt(gf['value'], '.3f')}** ({gf['n']} shapes)")
    lines.append(f"\nLowest vs cuDNN: {_fmt_where(s['lowest_cudnn'])}; lowest vs flash: {_fmt_where(s['lowest_flash'])}")
    lines += ["", "| group | vs cuDNN (geomean, shapes) | vs flash (geomean, shapes) |", "|---|---:|---:|"]
    for g, v in s["groups"].items():
        lines.append(f"| {g} | {fmt(v['cudnn']['value'], '.3f')} ({v['cudnn']['n']}) | "
                     f"{fmt(v['flash']['value'], '.3f')} ({v['flash']['n']}) |")
    if s["long_cudnn"]:
        lines.append(f"\nD {'/'.join(map(str, BAR_LONG_DIMS))} at S = {BAR_LONG_S} vs cuDNN: " + ", ".join(
            f"{x['shape']} {'causal' if x['causal'] else 'non-causal'} {x['dtype']} {fmt(x['value'], '.3f')}"
            for x in s["long_cudnn"]))
    nc = s["no_cudnn"]
    if nc["shapes"]:
        lines.append(f"\nShapes cuDNN could not run ({len(nc['shapes'])}): tessera / flash geomean "
                     f"{fmt(nc['geomean_flash']['value'], '.3f')}, lowest {_fmt_where(nc['lowest_flash'])}")
    unavailable = [(r["shape"], name) for r in rows for name in ("flash", "cudnn") if name in r["errors"]]
    if unavailable:
        lines.append(f"\n{len(unavailable)} backend/shape pairs could not run (None in the table); see the JSON.")
    if s["failed"]:
        lines.append(f"\n**{len(s['failed'])} shape(s) failed or did not verify**; see the table and the JSON.")
    if s["oom"]:
        lines.append(f"\nOut of memory (not run): {', '.join(s['oom'])}.")
    lines += ["", "```"] + bar_lines(s) + ["```"]
    return "\n".join(lines) + "\n"


def plot(path, meta, rows):
    """TFLOP/s vs S (log2 axis) for tessera / cuDNN / flash: a row of panels per head dim and GQA config,
    columns non-causal / causal; bf16 (fp16 only when the run has no bf16, dashed). Returns False without
    matplotlib or rows."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    dtypes = {r["case"]["dtype"] for r in rows}
    if not dtypes:
        return False
    dt = "bf16" if "bf16" in dtypes else sorted(dtypes)[0]
    sel = [r for r in rows if r["case"]["dtype"] == dt]
    groups = groups_of(sel)
    fig, axes = plt.subplots(len(groups), 2, figsize=(11, 3.2 * len(groups)), squeeze=False)
    style = "-" if dt == "bf16" else "--"
    for gi, g in enumerate(groups):
        for ci, causal in enumerate((False, True)):
            ax = axes[gi, ci]
            panel = sorted((r for r in sel if group_name(r["case"]) == g and r["case"]["causal"] == causal),
                           key=lambda r: r["case"]["s"])
            seqs = [r["case"]["s"] for r in panel]
            for name, label, color in (("tessera", "tessera", "tab:red"), ("cudnn", "cuDNN", "tab:green"),
                                       ("flash", "flash", "tab:blue")):
                pts = [(r["case"]["s"], r[f"{name}_tflops"]) for r in panel if r.get(f"{name}_tflops")]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", markersize=4,
                            color=color, label=label)
            ax.set_xscale("log", base=2)
            if seqs:
                ax.set_xticks(seqs)
                ax.set_xticklabels([f"{x // 1024}k" if x >= 1024 else str(x) for x in seqs])
            ax.minorticks_off()
            ax.set_ylim(bottom=0)
            ax.set_xlabel("S (B = 16384 / S)")
            ax.set_ylabel("TFLOP/s")
            heads = f", H {panel[0]['case']['h']}" if panel and not is_gqa(panel[0]["case"]) else ""
            ax.set_title(f"{g}{heads}, {'causal' if causal else 'non-causal'}, {dt}", fontsize=9)
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
    fig.suptitle(f"attention forward, 16k tokens — {meta['gpu']['name']}, commit {meta['commit']}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 / (3.2 * len(groups))))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_outputs(stem, meta, rows):
    meta["summary"] = summarize(rows)
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(meta, rows))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", default=str(ROOT / "build" / "libtessera.so"), help="libtessera.so (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="S in {2048, 8192}, D in {64, 128}, plus GQA 32/8 at D 128 and S 8192; bf16 only "
                        "(unless --dtypes)")
    p.add_argument("--dtypes", default=None, help="comma-separated from bf16, fp16 (default: bf16,fp16; --quick: bf16)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output folder (default: %(default)s)")
    p.add_argument("--iters", type=int, default=20, help="timed calls per library and shape (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up calls per library and shape (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: %(default)s)")
    p.add_argument("--no-lse", action="store_true", help="tessera does not write the log-sum-exp (lse = NULL)")
    p.add_argument("--head-dims", default=None,
                   help="comma-separated subset of the suite's head dims (e.g. 128 with TESSERA_ATTN_CONFIG); "
                        f"the GQA shapes are D {GQA_HEAD_DIM}")
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
        "head_dims": sorted({c["d"] for c in cases if not is_gqa(c)}),
        "gqa": sorted({f"{c['h']}/{hkv(c)}" for c in cases if is_gqa(c)}, key=lambda x: int(x.split("/")[0])),
        "gqa_head_dim": GQA_HEAD_DIM,
        "iters": args.iters,
        "warmup": args.warmup,
        "seed": args.seed,
        "no_lse": args.no_lse,
        "layout": "bshd",
        "flops_convention": "4*B*Hq*S*S*D, halved for causal (FlashAttention's)",
        "verify": {"reference": "SDPA flash output (cuDNN when flash cannot run)", "fro_tol": FRO_TOL,
                   "atol": ATOL, "rtol": RTOL},
    }
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = f"_{args.tag}" if args.tag else ""
    meta["tag"] = args.tag
    meta["tessera_attn_config"] = os.environ.get("TESSERA_ATTN_CONFIG", "")
    # Kernel family (src/attention/api.cpp config_for): on cc 9.0 the sm90ws rows of configs.def (TMA,
    # warp-specialised; calls with broadcast (zero) strides fall back to the sm90 cp.async family);
    # TESSERA_ATTN_ARCH=90 selects the sm90 family (a head dim without an sm90 row, D 96, runs sm80),
    # =80 the sm80 (mma.sync) one; every other GPU sm80. TESSERA_ATTN_CONFIG names one config instead.
    arch = os.environ.get("TESSERA_ATTN_ARCH", "")
    if (props.major, props.minor) != (9, 0) or arch == "80":
        meta["tessera_attn_family"], meta["tessera_attn_family_note"] = "sm80", ""
    elif arch == "90":
        meta["tessera_attn_family"] = "sm90"
        meta["tessera_attn_family_note"] = "TESSERA_ATTN_ARCH=90; head dims without an sm90 row run sm80"
    else:
        meta["tessera_attn_family"] = "sm90ws"
        meta["tessera_attn_family_note"] = "TMA, warp-specialised; broadcast strides fall back to sm90"
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
    print("\n" + "\n".join(bar_lines(meta["summary"])))
    bad = [r for r in rows if r["status"] in ("error", "verify_failed")]
    return 1 if bad or meta.get("interrupted") else 0


if __name__ == "__main__":
    sys.exit(main())
