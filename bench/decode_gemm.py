#!/usr/bin/env python3
"""Decode-step GEMMs as a CUDA graph replays them: tessera.matmul vs torch.matmul (issue 24).

    python bench/decode_gemm.py [--hbm-gbs 3350] [--json FILE]

x (M, K) @ W.t() for the weight shapes of one decode step of a Llama (hidden 2048, intermediate
5632, 16 query / 4 KV heads, vocab 32000), M in 1, 2, 16, 64: per shape, 20 calls on rotating
weights captured in one graph per library (so launch gaps are the graph's, not Python's), median
of the replays; then the whole step (8 layers + lm_head, 57 GEMMs) in one graph. Reports us per
call, GB/s of weight bytes and % of --hbm-gbs. Every result is checked against torch.matmul.
"""
import argparse
import json
import sys

LLAMA_NK = [(2048, 2048), (512, 2048), (5632, 2048), (2048, 5632), (32000, 2048)]
STEP = [(2048, 2048), (512, 2048), (512, 2048), (2048, 2048), (5632, 2048), (5632, 2048), (2048, 5632)] * 8 + [
    (32000, 2048)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hbm-gbs", type=float, default=3350.0)
    p.add_argument("--json")
    p.add_argument("--also-config", default="", help="time tessera with this config forced too (a third column)")
    p.add_argument("--ms", default="1,2,16,64", help="token counts M (comma-separated)")
    args = p.parse_args()
    import os

    import torch
    import tessera
    from tessera.decode_bench import capture, replay_us  # CUDA-graph timing shared with the decode bench

    def forced(name):
        """Runs fn with TESSERA_GEMM_CONFIG=name (read once per process: re-read around it)."""
        def wrap(fn):
            def run():
                os.environ["TESSERA_GEMM_CONFIG"] = name
                tessera.reread_environment()
                try:
                    return fn()
                finally:
                    os.environ.pop("TESSERA_GEMM_CONFIG", None)
                    tessera.reread_environment()
            return run
        return wrap

    dev = "cuda"
    dt = torch.bfloat16
    rows = []
    print(f"{'M':>4} {'N':>6} {'K':>6} {'config':36s} {'torch us':>9} {'tessera us':>10} {'ratio':>6} {'GB/s':>7} {'%HBM':>5}")
    ms = [int(v) for v in args.ms.split(",")]
    for m in ms:
        for n, k in LLAMA_NK:
            ws = [torch.randn(n, k, device=dev, dtype=dt) for _ in range(max(2, (200 << 20) // (n * k * 2)))]
            x = torch.randn(m, k, device=dev, dtype=dt)
            for w in ws[:2]:
                ref = torch.matmul(x, w.t())
                got = tessera.matmul(x, w.t())
                err = ((got.float() - ref.float()).norm() / ref.float().norm()).item()
                assert err < 2e-2, (m, n, k, err)
            calls = 20
            outs_t = [None] * calls
            outs_s = [None] * calls

            def run_torch():
                for i in range(calls):
                    outs_t[i] = torch.matmul(x, ws[i % len(ws)].t())

            def run_tessera():
                for i in range(calls):
                    outs_s[i] = tessera.matmul(x, ws[i % len(ws)].t())

            gt, gs = capture(torch, run_torch), capture(torch, run_tessera)
            tt, ts = replay_us(torch, gt, calls, reps=20), replay_us(torch, gs, calls, reps=20)
            tf = None
            if args.also_config:  # the plan is captured with the config forced; replays need no env
                gf = forced(args.also_config)(lambda: capture(torch, run_tessera))()
                tf = replay_us(torch, gf, calls, reps=20)
            for i in range(2):
                ref = torch.matmul(x, ws[i % len(ws)].t())
                err = ((outs_s[i].float() - ref.float()).norm() / ref.float().norm()).item()
                assert err < 2e-2, ("graph", m, n, k, err)
            a = tessera._C.Matrix(x.data_ptr(), tessera._C.BF16, m, k, k, tessera._C.ROW_MAJOR)
            b = tessera._C.Matrix(ws[0].data_ptr(), tessera._C.BF16, k, n, k, tessera._C.COL_MAJOR)
            d = tessera._C.Matrix(outs_s[0].data_ptr(), tessera._C.BF16, m, n, n, tessera._C.ROW_MAJOR)
            cfg = tessera._C.gemm_select_config(a, b, d)
            gbs = n * k * 2 / ts / 1e3
            rows.append(dict(m=m, n=n, k=k, config=cfg, torch_us=round(tt, 2), tessera_us=round(ts, 2),
                             ratio=round(tt / ts, 3), gbs=round(gbs, 1),
                             forced_us=None if tf is None else round(tf, 2)))
            print(f"{m:4d} {n:6d} {k:6d} {cfg:36s} {tt:9.2f} {ts:10.2f} {tt / ts:6.3f} {gbs:7.0f} "
                  f"{100 * gbs / args.hbm_gbs:5.1f}" + ("" if tf is None else f"   {args.also_config} {tf:8.2f}"))
            del ws, gt, gs
    # One decode step: 57 GEMMs on distinct weights.
    wts = {nk: torch.randn(nk[0], nk[1], device=dev, dtype=dt) for nk in set(STEP)}
    step_w = [wts[nk] if i < 7 else torch.randn(nk[0], nk[1], device=dev, dtype=dt) for i, nk in enumerate(STEP)]
    weight_bytes = sum(w.numel() * 2 for w in step_w)
    for m in ms:
        xs = {k: torch.randn(m, k, device=dev, dtype=dt) for k in (2048, 5632)}

        def step(fn):
            return lambda: [fn(xs[w.shape[1]], w.t()) for w in step_w]

        gt, gs = capture(torch, step(torch.matmul)), capture(torch, step(tessera.matmul))
        tt, ts = replay_us(torch, gt, 1, reps=10), replay_us(torch, gs, 1, reps=10)
        gbs = weight_bytes / ts / 1e3
        rows.append(dict(m=m, step=True, torch_us=round(tt, 1), tessera_us=round(ts, 1), ratio=round(tt / ts, 3),
                         gbs=round(gbs, 1), weight_mb=round(weight_bytes / 1e6, 1)))
        print(f"decode step M={m:3d} ({len(STEP)} GEMMs, {weight_bytes / 1e6:.0f} MB): torch {tt:8.1f} us  "
              f"tessera {ts:8.1f} us  ratio {tt / ts:5.3f}  {gbs:6.0f} GB/s ({100 * gbs / args.hbm_gbs:4.1f}% of HBM; "
              f"torch {100 * weight_bytes / tt / 1e3 / args.hbm_gbs:4.1f}%)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
