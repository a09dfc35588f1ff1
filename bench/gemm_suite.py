#!/usr/bin/env python3
"""GEMM benchmark suite: tessera against cuBLASLt, same process, same inputs.

Runs `tessera gemm --compare cublas --verify --json -` once per shape (each run verifies against a
cuBLASLt fp32 reference, then times both libraries; see `tessera gemm --help`), prints one line per
shape as it finishes, and writes a JSON file (metadata + every row) and a Markdown table next to it.
A shape that fails (out of memory, tessera error, timeout) is recorded as an error and the suite
goes on. Python standard library only.

Exit code: 0 when every shape ran and verified (shapes that did not fit in memory or timed out are
only reported), 1 when a shape failed verification, tessera reported an error, the binary's `info`
failed or the run was interrupted, 2 for a usage problem or a missing binary, 3 when there is no GPU.
"""

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The suite from the project issue. Layout letters are BLAS ops (A then B): "tn" = both K-major.
SQUARE = [1024, 2048, 4096, 6144, 8192, 12288, 16384]
LLM_M = [128, 1024, 4096, 16384]
LLM_NK = [(4096, 4096), (6144, 4096), (28672, 4096), (4096, 14336), (8192, 8192), (57344, 8192), (8192, 28672)]
RAGGED = [1000, 3000, 7777]
DEFAULT_LAYOUT = "tn"
LAYOUT_SWEEP_SHAPE = (8192, 8192, 8192)  # also run in every other layout
OTHER_LAYOUTS = ["nn", "nt", "tt"]

QUICK_SHAPES = [
    ("square", 4096, 4096, 4096),
    ("square", 8192, 8192, 8192),
    ("ragged", 7777, 7777, 7777),
    ("llm", 128, 4096, 4096),
    ("llm", 4096, 28672, 4096),
    ("ragged", 1000, 1000, 1000),
]

# Suite dtype name -> the binary's --dtype value, and its --out-dtype (the input's; fp32 for the fp32
# operands of tf32 / 3xTF32, whose anchors are cuBLASLt's tf32 and fp32 compute types; s32 for int8,
# the exact int32 sums against cuBLASLt's int8 GEMM (CUBLAS_COMPUTE_32I), verified bit for bit; bf16
# for the fp8 operands (Hopper only), scales per tensor (the binary's default), against cuBLASLt's fp8
# GEMM with the same scales and accumulation mode: e4m3 with the sums promoted every 128 K, e4m3_fast
# with --fast-accum (the tensor cores' own accumulation), e5m2 against cuBLASLt's e5m2 x e4m3;
# e4m3_block with DeepSeek-V3's block scales (1 x 128 of A, 128 x 128 of B; --scales block, row-major
# D) against cuBLASLt's own block scaling (VEC128_32F x BLK128x128_32F), whose D is verified too).
DTYPES = {"bf16": "bf16", "fp16": "f16", "f16": "f16", "tf32": "tf32", "tf32x3": "tf32x3", "int8": "int8",
          "e4m3": "e4m3", "e4m3_fast": "e4m3", "e4m3_block": "e4m3", "e5m2": "e5m2"}
OUT_DTYPES = {"tf32": "f32", "tf32x3": "f32", "int8": "s32", "e4m3": "bf16", "e4m3_fast": "bf16", "e4m3_block": "bf16",
              "e5m2": "bf16"}
EXTRA_ARGS = {"e4m3_fast": ["--fast-accum"], "e4m3_block": ["--scales", "block", "--d-row-major"]}
FP8_DTYPES = {"e4m3", "e4m3_fast", "e4m3_block", "e5m2"}  # sm_90 only: skipped on other GPUs

# Exit codes of the binary (tools/check.hpp).
EXIT_VERIFY_FAILED, EXIT_TESSERA_ERROR, EXIT_NO_DEVICE = 1, 2, 3

NO_GPU_MESSAGE = "no GPU: the GEMM benchmark needs an NVIDIA GPU (sm_80+)"


@dataclass(frozen=True)
class Case:
    group: str
    m: int
    n: int
    k: int
    dtype: str
    layout: str

    @property
    def shape(self):
        return f"{self.m}x{self.n}x{self.k}"


def suite_shapes(quick):
    """(group, m, n, k, layout) in run order, without duplicates (4096^3 is square and LLM)."""
    if quick:
        shapes = [(g, m, n, k, DEFAULT_LAYOUT) for g, m, n, k in QUICK_SHAPES]
    else:
        shapes = [("square", s, s, s, DEFAULT_LAYOUT) for s in SQUARE]
        shapes += [("llm", m, n, k, DEFAULT_LAYOUT) for m in LLM_M for n, k in LLM_NK]
        shapes += [("ragged", s, s, s, DEFAULT_LAYOUT) for s in RAGGED]
        shapes += [("layout", *LAYOUT_SWEEP_SHAPE, layout) for layout in OTHER_LAYOUTS]
    seen, unique = set(), []
    for group, m, n, k, layout in shapes:
        if (m, n, k, layout) not in seen:
            seen.add((m, n, k, layout))
            unique.append((group, m, n, k, layout))
    return unique


def build_cases(quick, dtypes):
    return [Case(g, m, n, k, d, layout) for g, m, n, k, layout in suite_shapes(quick) for d in dtypes]


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


def query_info(binary):
    """`tessera info --json`, or exit 3 when the binary sees no GPU."""
    proc = subprocess.run([str(binary), "info", "--json"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        sys.exit(f"gemm_suite: `{binary} info --json` failed ({proc.returncode}): {proc.stderr.strip()}")
    info = json.loads(proc.stdout)
    if not info.get("devices"):
        print(f"{NO_GPU_MESSAGE} ({info.get('no_device', 'no CUDA device')})", file=sys.stderr)
        sys.exit(EXIT_NO_DEVICE)
    return info


def last_line(text):
    """The last non-empty line, without the binary's "tessera: " prefix."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    return line[len("tessera: "):] if line.startswith("tessera: ") else line


def run_case(binary, case, args, env):
    """One shape. Returns a row: the case, a status (ok | verify_failed | error), the binary's JSON."""
    cmd = [str(binary), "gemm", "--m", str(case.m), "--n", str(case.n), "--k", str(case.k),
           "--dtype", DTYPES[case.dtype], "--out-dtype", OUT_DTYPES.get(case.dtype, DTYPES[case.dtype]),
           "--layout", case.layout, *EXTRA_ARGS.get(case.dtype, []),
           "--compare", "cublas", "--verify", "--iters", str(args.iters), "--warmup", str(args.warmup), "--json", "-"]
    row = {"case": asdict(case), "shape": case.shape, "status": "error", "result": None, "error": None,
           "exit_code": None}
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        row["error"] = f"timeout after {args.timeout:g} s"
        row["seconds"] = round(time.monotonic() - start, 2)
        return row
    row["seconds"] = round(time.monotonic() - start, 2)
    row["exit_code"] = proc.returncode
    # A verification failure still prints the JSON (with the timings); anything else is an error.
    if proc.returncode in (0, EXIT_VERIFY_FAILED):
        try:
            row["result"] = json.loads(proc.stdout)
            row["status"] = "ok" if proc.returncode == 0 else "verify_failed"
        except json.JSONDecodeError as e:
            row["error"] = f"unparsable JSON from the binary: {e}"
    else:
        row["error"] = last_line(proc.stderr) or f"exit code {proc.returncode}"
    return row


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def verify_cell(row):
    r = row["result"] or {}
    v = r.get("verify")
    if not v:
        return "-"
    # cuBLASLt's own D, where the binary checked it (block scales): a failure means it was not timed.
    lt = r.get("cublas_verify")
    lt_fail = f" (cuBLAS D FAIL {fmt(lt.get('rel_err'), '.1e')})" if lt and not lt["pass"] else ""
    if v.get("exact"):  # an int32 D, compared bit for bit
        return ("PASS exact" if v["pass"] else f"FAIL {v.get('mismatches')} differ") + lt_fail
    return f"{'PASS' if v['pass'] else 'FAIL'} {fmt(v.get('rel_err'), '.1e')}{lt_fail}"


def unit(row):
    """TFLOP/s, or TOPS for int8 (the binary's throughput_unit; its *_tflops fields hold either)."""
    return ((row["result"] or {}).get("throughput_unit")) or "TFLOP/s"


def batched(row):
    return (row["result"] or {}).get("timing_mode") == "batched"


def progress_line(index, total, row):
    c = row["case"]
    head = f"[{index:>3}/{total}] {row['shape']:>19} {c['dtype']:<4} {c['layout']}"
    if row["result"] is None:
        return f"{head}  ERROR: {row['error']}  ({row['seconds']}s)"
    r = row["result"]
    return (f"{head}  {r['config']:<24} tessera {fmt(r.get('tessera_tflops'), '7.1f')}  "
            f"cuBLAS {fmt(r.get('cublas_tflops'), '7.1f')} {unit(row)}  ratio {fmt(r.get('ratio'), '.3f')}"
            f"{' (batched)' if batched(row) else ''}  {verify_cell(row)}  ({row['seconds']}s)")


def geomean(values):
    values = [v for v in values if v and v > 0]
    return (math.exp(sum(math.log(v) for v in values) / len(values)), len(values)) if values else (None, 0)


def ratios(rows, dtype=None):
    """Ratios of the rows that ran and verified (a wrong result's speed means nothing)."""
    return [r["result"]["ratio"] for r in rows
            if r["status"] == "ok" and r["result"].get("ratio") and (dtype is None or r["case"]["dtype"] == dtype)]


def markdown(meta, rows):
    gpu = meta["gpu"]
    dirty = " (dirty tree)" if meta.get("dirty") else ""
    lines = [
        f"# tessera GEMM suite ({meta['suite']})",
        "",
        f"GPU: {gpu['name']} (cc {gpu['cc']}, {gpu['sms']} SMs) · commit {meta['commit']}{dirty} · {meta['date']} · "
        f"CUDA runtime {meta['cuda_runtime']}, driver {meta['cuda_driver']}",
        "",
        "cuBLAS = cuBLASLt (first heuristic algorithm, 32 MiB workspace), same process and inputs. CUDA events, "
        f"median of {meta['iters']} samples after {meta['warmup']} warm-up, the two libraries' samples alternating "
        "(both see the same clocks), input sets rotated past L2. "
        "Shapes marked (b) ran in under 50 us and were timed as batches of back-to-back launches (both libraries "
        "alike). Ratio = tessera / cuBLAS. Verify: relative Frobenius error against a cuBLASLt fp32 reference.",
        "",
    ]
    if "int8" in meta["dtypes"]:
        lines += [
            "int8 rows: TOPS (2*M*N*K integer operations per second) in the TFLOP/s columns; D is the exact "
            "int32 sums, verified bit for bit against int64 sums computed on the GPU; cuBLAS = cuBLASLt's int8 "
            "GEMM (CUBLAS_COMPUTE_32I) on K-major operands; where K or M is not a multiple of 4 (7777) on "
            "zero-padded copies (7808), whose extra work is not counted in its TOPS (the binary's "
            "cublas_anchor field says what it ran).",
            "",
        ]
    if (FP8_DTYPES - {"e4m3_block"}) & set(meta["dtypes"]):
        lines += [
            "fp8 rows (e4m3, e4m3_fast = --fast-accum, e5m2): operands in [-4, 4] as the fp8 type holds them, one "
            "fp32 scale each, bf16 D; verified against cuBLASLt's fp32 GEMM of the operands widened to fp32 "
            "(tolerance 1e-2 for bf16, and for fast accumulation at least 2e-2 * sqrt(K / 4096)); cuBLAS = "
            "cuBLASLt's fp8 GEMM (CUBLAS_COMPUTE_32F, A/B_SCALE_POINTER, FAST_ACCUM as the row's) on K-major "
            "operands, zero-padded to multiples of 16 where needed (7777 -> 7792, not counted in its TFLOP/s); "
            "e5m2 against cuBLASLt's e5m2 x e4m3 (it has no e5m2 x e5m2 GEMM). The binary's cublas_anchor field "
            "says what it ran.",
            "",
        ]
    if "e4m3_block" in meta["dtypes"]:
        lines += [
            "e4m3_block rows: DeepSeek-V3's block scales (fp32, one per row of A and 128 of K, one per 128 x 128 "
            "block of B, spread over a 15x range), row-major bf16 D; verified against cuBLASLt's fp32 GEMM of the "
            "operands widened to fp32 with their block scales applied; cuBLAS = cuBLASLt's fp8 GEMM with its own "
            "block scaling (VEC128_32F x BLK128x128_32F on the same scale buffers, FAST_ACCUM 0), whose D is "
            "verified against the same reference (\"cuBLAS D FAIL\": it was not timed; the binary's cublas_note "
            "says why, or why cuBLASLt refused the shape).",
            "",
        ]
    lines += [
        "| shape | dtype | layout | config | tessera TFLOP/s | cuBLAS TFLOP/s | ratio | verify |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for row in rows:
        c, r = row["case"], row["result"]
        shape = row["shape"] + (" (b)" if batched(row) else "")
        if r is None:
            error = row["error"].replace("|", "\\|")  # a bar would end the cell
            lines.append(f"| {shape} | {c['dtype']} | {c['layout']} | - | - | - | - | ERROR: {error} |")
            continue
        lines.append(f"| {shape} | {c['dtype']} | {c['layout']} | {r['config']} | "
                     f"{fmt(r.get('tessera_tflops'), '.1f')} | {fmt(r.get('cublas_tflops'), '.1f')} | "
                     f"{fmt(r.get('ratio'), '.3f')} | {verify_cell(row)} |")
    lines.append("")
    overall, n = geomean(ratios(rows))
    lines.append(f"Geometric mean ratio (tessera / cuBLAS): **{fmt(overall, '.3f')}** over {n} verified shapes")
    for dtype in meta["dtypes"]:
        g, n = geomean(ratios(rows, dtype))
        lines.append(f"- {dtype}: {fmt(g, '.3f')} over {n} shapes")
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        lines.append(f"\n{len(failed)} shape(s) failed or did not verify; see the table.")
    return "\n".join(lines) + "\n"


def plot(png_path, meta, rows):
    """Ratio tessera / cuBLAS per shape, one bar group per dtype, a line at 1.0. False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels = []
    for row in rows:
        label = f"{row['shape']} {row['case']['layout']}"
        if label not in labels:
            labels.append(label)
    fig, ax = plt.subplots(figsize=(max(8, 0.32 * len(labels)), 5))
    width = 0.8 / max(1, len(meta["dtypes"]))
    for i, dtype in enumerate(meta["dtypes"]):
        values = {f"{r['shape']} {r['case']['layout']}": r["result"]["ratio"] for r in rows
                  if r["status"] == "ok" and r["result"] and r["case"]["dtype"] == dtype and r["result"].get("ratio")}
        xs = [j + i * width for j, label in enumerate(labels) if label in values]
        ax.bar(xs, [values[label] for label in labels if label in values], width, label=dtype)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(labels))])
    ax.set_xticklabels(labels, rotation=90, fontsize=7)
    ax.set_ylabel("tessera / cuBLASLt")
    g, n = geomean(ratios(rows))
    ax.set_title(f"GEMM, {meta['gpu']['name']}, commit {meta['commit']}: geometric mean {fmt(g, '.3f')} over {n}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return True


def write_outputs(json_path, md_path, meta, rows):
    json_path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    md_path.write_text(markdown(meta, rows))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=str(ROOT / "build" / "tools" / "tessera"), help="tessera CLI (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="small subset: 4096^3, 8192^3, 7777^3, 128x4096x4096, 4096x28672x4096, 1000^3 (bf16 only "
                        "unless --dtypes)")
    p.add_argument("--dtypes", default=None,
                   help="comma-separated from bf16, fp16, tf32, tf32x3, int8, e4m3, e4m3_fast, e4m3_block, e5m2 (fp8: "
                        "sm_90 only) (default: bf16,fp16; --quick: bf16)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output folder (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per shape (default: %(default)s)")
    p.add_argument("--iters", type=int, default=20, help="timed samples per library (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up samples per library (default: %(default)s)")
    args = p.parse_args(argv)
    dtypes = args.dtypes.split(",") if args.dtypes else (["bf16"] if args.quick else ["bf16", "fp16"])
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        p.error(f"--dtypes: unknown {', '.join(unknown)} "
                "(expected bf16, fp16, tf32, tf32x3, int8, e4m3, e4m3_fast, e4m3_block, e5m2)")
    args.dtypes = dtypes
    return args


def main(argv=None):
    args = parse_args(argv)
    binary = Path(args.bin)
    if not binary.is_file():
        print(f"gemm_suite: no tessera binary at {binary}; build it first "
              "(cmake -S . -B build -G Ninja && cmake --build build --target tessera_cli) or pass --bin",
              file=sys.stderr)
        return 2
    info = query_info(binary)
    device = info["devices"][0]
    if str(device.get("cc")) != "9.0" and FP8_DTYPES & set(args.dtypes):
        skipped = [d for d in args.dtypes if d in FP8_DTYPES]
        print(f"gemm_suite: skipping {', '.join(skipped)}: tessera's fp8 GEMMs run on sm_90 only "
              f"(this GPU is cc {device.get('cc')})", file=sys.stderr)
        args.dtypes = [d for d in args.dtypes if d not in FP8_DTYPES]
        if not args.dtypes:
            return 0
    commit, dirty = git_commit()
    started = utc_now()
    meta = {
        "suite": "quick" if args.quick else "full",
        "gpu": {k: device[k] for k in ("name", "cc", "sms", "l2_bytes", "global_mem_bytes")},
        "commit": commit,
        "dirty": dirty,
        "date": started.isoformat().replace("+00:00", "Z"),
        "tessera_version": info.get("tessera_version"),
        "cuda_runtime": info.get("cuda_runtime"),
        "cuda_driver": info.get("cuda_driver"),
        "dtypes": args.dtypes,
        "iters": args.iters,
        "warmup": args.warmup,
        "binary": str(binary),
    }
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"gemm_{meta['suite']}_{started.strftime('%Y%m%dT%H%M%SZ')}_{commit}"
    json_path, md_path = out_dir / f"{stem}.json", out_dir / f"{stem}.md"

    env = dict(os.environ, TESSERA_COMMIT=commit)  # the binary records it in every row
    cases = build_cases(args.quick, args.dtypes)
    print(f"gemm_suite: {len(cases)} runs on {device['name']} (cc {device['cc']}), commit {commit}; "
          f"results -> {json_path}", flush=True)
    rows = []
    try:
        for i, case in enumerate(cases, 1):
            rows.append(run_case(binary, case, args, env))
            print(progress_line(i, len(cases), rows[-1]), flush=True)
            write_outputs(json_path, md_path, meta, rows)  # keep partial results if interrupted
    except KeyboardInterrupt:
        print("gemm_suite: interrupted; writing the rows so far", file=sys.stderr)
        meta["interrupted"] = True
    write_outputs(json_path, md_path, meta, rows)

    print()
    print(markdown(meta, rows), end="")
    print(f"\nwrote {json_path}\nwrote {md_path}")
    png_path = md_path.with_suffix(".png")
    try:
        print(f"wrote {png_path}" if plot(png_path, meta, rows) else "no plot: matplotlib is not installed")
    except Exception as e:  # the plot is a convenience; the JSON and Markdown above are the record
        print(f"no plot: {e}", file=sys.stderr)
    bad = [r for r in rows if r["status"] == "verify_failed" or r["exit_code"] == EXIT_TESSERA_ERROR]
    return 1 if bad or meta.get("interrupted") else 0


if __name__ == "__main__":
    sys.exit(main())
