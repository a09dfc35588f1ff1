#!/usr/bin/env python3
"""The GEMM heuristic against every config, shape by shape (a tune audit).

Runs `tessera tune --no-save --json` (every config this device can run, both orientations where a
config can flip, each timed in-process) over LLM-shaped problems and reports, per shape, the
heuristic's choice against the fastest config; the geometric mean of those ratios is the heuristic's
cost on the set. Every heuristic change so far that this audit motivated was then checked by a
same-run A/B of the CLI (scripts/ab_libs.sh), which times cold-L2 calls against cuBLASLt.

  python3 bench/tune_audit.py [--cli build/tools/tessera] [--rows 256,512,...] [--out DIR] [--summary FILE]
  python3 bench/tune_audit.py --summarize DIR     # re-read an earlier run's JSON files

Needs a GPU for the run (exits 2 without one); --summarize does not.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys

from decode_gemm import LLAMA_NK  # the Llama client's weights (the 1B test model and its lm_head)

# Weight shapes (N x K): the client's, then Llama-2/3 7-8B, 70B and Llama 3's lm_head.
WEIGHTS = LLAMA_NK + [(4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (11008, 4096), (4096, 11008),
                      (8192, 8192), (1024, 8192), (28672, 8192), (8192, 28672), (128256, 4096)]
# Squares, ragged and batched problems (M, N, K, batch).
OTHERS = [(1000, 1000, 1000, 1), (3000, 3000, 3000, 1), (1536, 1536, 1536, 1), (768, 3072, 768, 1),
          (197, 768, 3072, 1), (2500, 5000, 3000, 1), (333, 4444, 5555, 1), (1024, 1024, 128, 8),
          (512, 512, 64, 32), (2048, 2048, 2048, 4)]


def run(cli, out, rows, timeout):
    os.makedirs(out, exist_ok=True)
    shapes = [(m, n, k, 1) for m in rows for n, k in WEIGHTS if m * n * k <= 4096 * 32000 * 4096] + OTHERS
    for m, n, k, b in shapes:
        path = os.path.join(out, f"{m}_{n}_{k}_{b}.json")
        cmd = [cli, "tune", "--m", str(m), "--n", str(n), "--k", str(k), "--batch", str(b), "--layout", "tn",
               "--d-row-major", "--no-save", "--no-verify", "--iters", "10", "--warmup", "3", "--json", path]
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=timeout)
        if r.returncode != 0:
            print(f"tune {m}x{n}x{k}x{b}: exit {r.returncode}: {r.stderr.strip()[-200:]}", file=sys.stderr)


def summarize(out, worst):
    ratios = []
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        d = json.load(open(path))
        times = {r["config"]: r["ms"] for r in d["results"] if r.get("status") == "ok" and r.get("ms")}
        if not times or d["current_config"] not in times:
            continue
        best = min(times, key=times.get)
        ratios.append((times[d["current_config"]] / times[best], f"{d['m']}x{d['n']}x{d['k']}x{d['batch']}",
                       d["current_config"], times[d["current_config"]] * 1e3, best, times[best] * 1e3))
    if not ratios:
        print("no results", file=sys.stderr)
        return 1
    gm = math.exp(sum(math.log(r[0]) for r in ratios) / len(ratios))
    print(f"{len(ratios)} shapes: the heuristic's choice takes {gm:.4f}x the fastest config's time (geomean); "
          f"{sum(r[0] > 1.03 for r in ratios)} over 3%, {sum(r[0] > 1.10 for r in ratios)} over 10%")
    for r in sorted(ratios, reverse=True)[:worst]:
        print("  %.3f  %-22s %-36s %8.1f us   best %-36s %8.1f us" % r)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default="build/tools/tessera")
    ap.add_argument("--rows", default="32,64,128,192,256,512,1024,2048,4096,8192")
    ap.add_argument("--out", default="tune_audit")
    ap.add_argument("--summarize", metavar="DIR", help="only summarize an earlier run's JSON files")
    ap.add_argument("--worst", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=120)
    a = ap.parse_args()
    if a.summarize:
        return summarize(a.summarize, a.worst)
    try:
        gpu = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        gpu = False
    if not gpu:
        print("tune_audit: no GPU here (run it on the GPU machine; --summarize reads results anywhere)", file=sys.stderr)
        return 2
    run(a.cli, a.out, [int(x) for x in a.rows.split(",")], a.timeout)
    return summarize(a.out, a.worst)


if __name__ == "__main__":
    sys.exit(main())
