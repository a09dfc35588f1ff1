#!/usr/bin/env python3
"""Same-run A/B of a few GEMM shapes: one `tessera gemm --compare cublas --verify` per shape, one line
each (config, tessera us, cuBLASLt us, ratio, verification). For a change under study, run it once per
variant in the same call (e.g. with TESSERA_GEMM_CONFIG / TESSERA_SM90_EPILOGUE set differently) so
that every variant has cuBLASLt's figure from the same process beside it.

  bench/ab.py --bin build/tools/tessera --label s8 128x4096x4096 1024x1024x1024:tn "3000x3000x3000:tn:--beta 0.5"

A shape is MxNxK[:layout[:extra tessera gemm options]]; --dtype (default bf16) applies to all.
Python standard library only.
"""

import argparse
import json
import shlex
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the tessera CLI")
    ap.add_argument("--label", default="", help="printed in front of every line")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("shapes", nargs="+")
    args = ap.parse_args()
    status = 0
    for spec in args.shapes:
        parts = spec.split(":", 2)
        m, n, k = parts[0].split("x")
        layout = parts[1] if len(parts) > 1 and parts[1] else "tn"
        extra = shlex.split(parts[2]) if len(parts) > 2 else []
        cmd = [args.bin, "gemm", "--m", m, "--n", n, "--k", k, "--dtype", args.dtype, "--layout", layout,
               "--compare", "cublas", "--verify", "--iters", str(args.iters), "--json", "-", *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode not in (0, 1):
            print(f"{args.label} {spec}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
            status = 1
            continue
        r = json.loads(proc.stdout)
        v = r.get("verify") or {}
        verdict = "PASS" if v.get("pass") else "FAIL"
        status |= v.get("pass") is not True
        print(f"{args.label:>10} {parts[0]:>16} {layout} {' '.join(extra):<28} {r['config']:<32} "
              f"{r['tessera_ms'] * 1e3:9.1f} us {r['cublas_ms'] * 1e3:9.1f} us  ratio {r['ratio']:.3f}  "
              f"{r['tessera_tflops']:6.1f} TF  {verdict} {v.get('rel_err', 0):.1e} {r.get('timing_mode', '')}",
              flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
