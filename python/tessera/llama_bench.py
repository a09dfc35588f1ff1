"""A real client: a stock Hugging Face ``LlamaForCausalLM`` (random weights, no download) against the
same model running tessera's attention and GEMMs, in one process on the same weights.

    python -m tessera.bench llama [--layers 8] [--hidden 2048] [--intermediate 5632] [--heads 16]
                                  [--kv-heads 4] [--dtype bf16] [--batch 2] [--prompt 2048]
                                  [--new-tokens 32] [--kernels] [--out DIR]

The tessera model registers an attention function with ``transformers.AttentionInterface`` (GQA
native, no repeat_kv; a real padding mask or dropout falls back to SDPA, counted) and replaces the
forward of each of its own ``nn.Linear`` modules by ``tessera.matmul(x, weight.t(), bias=bias)``.
The stock model runs transformers' SDPA attention and nn.Linear (cuBLAS).
Checks the prefill logits (relative error, top-1 agreement), then times prefill (one forward pass
over the prompt) and greedy decode (new tokens after the prompt, a loop with no host sync), eager
and as one replayed CUDA graph each. Prints a table, writes JSON and (with matplotlib) a PNG.
--kernels then lists both models' GPU kernels (torch profiler) by family (tessera's, cuBLAS, SDPA, the
rest) and the largest ones, for prefill and one decode step: where the difference between them lies.
Exit 3 without a CUDA GPU or transformers, 1 when the logits check fails.
"""
from __future__ import annotations

import argparse
import collections
import copy
import datetime
import json
import os
import re
import sys
import types
from pathlib import Path

from .bench import EXIT_NO_GPU, capture_graph, cuda_torch, kernel_times, plot, time_ms

EXIT_CHECK_FAILED = 1
TESSERA_HEAD_DIMS = (64, 96, 128, 256)  # head dims the library compiles
# Random weights give near-uniform logits, so some positions have near-ties that bf16 rounding order
# flips between two correct implementations: top-1 is judged over all positions with a 10% allowance,
# and the relative error of the whole logits tensor catches a wrong kernel (a layout or mask bug gives
# errors of order 1, not a few percent).
REL_ERR_MAX = 5e-2
TOP1_MIN = 0.9
# Attention keys registered with transformers: tessera's, and transformers' own SDPA function under a
# second key so that both models get the same mask function (see make_causal_skip_mask).
TESSERA_ATTN = "tessera"
STOCK_ATTN = "sdpa_stock"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m tessera.bench llama", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--heads", type=int, default=16, help="query heads (default: %(default)s)")
    p.add_argument("--kv-heads", type=int, default=4, help="key/value heads (GQA; default: %(default)s)")
    p.add_argument("--head-dim", type=int, default=None, help="default: hidden / heads")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--prompt", type=int, default=2048, help="prompt tokens per sequence (default: %(default)s)")
    p.add_argument("--new-tokens", type=int, default=32, help="greedy decode steps (default: %(default)s)")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-graphs", action="store_true", help="skip the CUDA-graph variants")
    p.add_argument("--kernels", action="store_true",
                   help="also list each model's GPU kernels in prefill and in one decode step (torch profiler, "
                        "after the timings): where the time between the two models goes")
    p.add_argument("--out", default="tessera_bench_results", help="output folder (default: %(default)s)")
    args = p.parse_args(argv)
    for name in ("layers", "hidden", "intermediate", "heads", "kv_heads", "vocab", "batch", "prompt", "new_tokens",
                 "iters"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.heads % args.kv_heads:
        p.error(f"--heads ({args.heads}) must be a multiple of --kv-heads ({args.kv_heads})")
    if args.head_dim is None:
        if args.hidden % args.heads:
            p.error(f"--hidden ({args.hidden}) must be a multiple of --heads ({args.heads}), or give --head-dim")
        args.head_dim = args.hidden // args.heads
    return args


# ------------------------------------------------------------------------------ the adapters


def attention_plan(q_len, kv_len, *, has_mask, dropout, is_causal, head_dim, heads_q, heads_kv, dtype_ok):
    """How one attention call runs: ``(fallback_reason, causal, kv_keep)``.

    fallback_reason is None when tessera can run the call, else why SDPA must (a real mask, dropout, a
    problem the library has no kernel for). causal and kv_keep mirror transformers'
    sdpa_attention_forward: causal only for more than one query row without a mask (one query row
    sees every cached key), and where a mask-free causal call has more keys than queries (a prefill
    into an empty static cache, the only case the mask functions let through) only the first q_len
    keys count (upper-left alignment, while tessera aligns bottom-right), so kv_keep = q_len."""
    if has_mask:
        return "attention mask", False, None
    if dropout > 0.0:
        return "dropout", False, None
    if not dtype_ok:
        return "dtype", False, None
    if head_dim not in TESSERA_HEAD_DIMS:
        return f"head_dim {head_dim}", False, None
    if heads_kv < 1 or heads_q % heads_kv:
        return f"heads {heads_q}/{heads_kv}", False, None
    causal = bool(is_causal) and q_len > 1
    return None, causal, (q_len if causal and kv_len > q_len else None)


def plain_causal(q_length=None, kv_length=None, q_offset=0, attention_mask=None, local_size=None, mask_function=None,
                 allow_is_causal_skip=True, causal_function=None, cache_position=None, **_):
    """True when a mask call describes plain causal attention with no padding: the decision
    transformers' sdpa_mask makes in eager mode (its _ignore_causal_mask_sdpa), taken on the
    arguments alone: no 2-D mask, no local window, the stock causal pattern, and one query row, as
    many keys as queries, or an empty cache in front (q_offset 0)."""
    if q_length is None:  # transformers 4.x passes the queries' cache_position (a tensor: not read) instead
        if cache_position is None:
            return False
        q_length, q_offset = cache_position.shape[0], None
    if not allow_is_causal_skip or attention_mask is not None or local_size is not None:
        return False
    if mask_function is not None and mask_function is not causal_function:  # None: sdpa_mask's default, causal
        return False
    return q_length == 1 or kv_length == q_length or (isinstance(q_offset, int) and q_offset == 0)


def make_causal_skip_mask(sdpa_mask, causal_mask_function):
    """A mask function for AttentionMaskInterface: None for plain causal attention, else sdpa_mask's.

    sdpa_mask itself never returns None while a CUDA stream captures (transformers' is_tracing counts
    stream capture), which would hand every captured call a materialized causal mask: SDPA would
    leave its flash kernel and tessera would fall back. Its eager decision needs no data (a padding
    mask still goes to sdpa_mask), so this makes it under capture too, for both models alike."""
    def causal_skip_mask(*args, **kwargs):
        if not args and plain_causal(causal_function=causal_mask_function, **kwargs):
            return None
        return sdpa_mask(*args, **kwargs)

    return causal_skip_mask


def make_tessera_attention(tessera, sdpa_attention_forward, fallbacks):
    """The attention function registered as TESSERA_ATTN; counts SDPA fallbacks by reason in `fallbacks`."""
    import torch

    dtypes = (torch.float16, torch.bfloat16)

    def tessera_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                                  is_causal=None, **kwargs):
        # query [B, Hq, Sq, D], key/value [B, Hkv, Sk, D]: transformers' (and SDPA's) layout.
        is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        reason, causal, kv_keep = attention_plan(
            query.shape[2], key.shape[2], has_mask=attention_mask is not None, dropout=dropout, is_causal=is_causal,
            head_dim=query.shape[3], heads_q=query.shape[1], heads_kv=key.shape[1],
            dtype_ok=query.dtype in dtypes and key.dtype == query.dtype and value.dtype == query.dtype)
        if reason is not None:
            fallbacks[reason] += 1
            return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                          is_causal=is_causal, **kwargs)
        if kv_keep is not None:
            key, value = key[:, :, :kv_keep], value[:, :, :kv_keep]
        # The [B, S, H, D] views of the same tensors (tessera reads the strides in place) make the output
        # the [B, Sq, Hq, D] tensor transformers wants without the transpose copy a bhsd output needs.
        out = tessera.attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), causal=causal,
                                scale=scaling, layout="bshd")
        return out, None

    return tessera_attention_forward


def tessera_linear_forward(tessera):
    """An nn.Linear forward through tessera.matmul: x as (tokens, in_features), weight.t() as the
    column-major (in, out) view that tessera reads in place."""
    def forward(self, x):
        y = tessera.matmul(x.reshape(-1, x.shape[-1]), self.weight.t(), bias=self.bias)
        return y.view(*x.shape[:-1], self.out_features)

    return forward


def use_tessera_linears(model, tessera):
    """Binds tessera_linear_forward to every nn.Linear of `model` (its modules only, not nn.Linear)."""
    import torch

    forward, n = tessera_linear_forward(tessera), 0
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.forward = types.MethodType(forward, m)
            n += 1
    return n


def register(tessera):
    """Registers both attention keys with transformers; returns the fallback counter of TESSERA_ATTN."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, causal_mask_function, sdpa_mask

    fallbacks = collections.Counter()
    mask = make_causal_skip_mask(sdpa_mask, causal_mask_function)
    AttentionInterface.register(TESSERA_ATTN, make_tessera_attention(tessera, sdpa_attention_forward, fallbacks))
    AttentionInterface.register(STOCK_ATTN, sdpa_attention_forward)
    for key in (TESSERA_ATTN, STOCK_ATTN):
        AttentionMaskInterface.register(key, mask)
    return fallbacks


def set_attention(model, key):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(key)
    else:
        model.config._attn_implementation = key


def build_models(torch, tessera, args, dtype, device):
    """(stock, ours, fallbacks): seeded random weights, the second model a deep copy of the first."""
    from transformers import LlamaConfig, LlamaForCausalLM

    fallbacks = register(tessera)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.kv_heads, head_dim=args.head_dim,
                         max_position_embeddings=max(4096, args.prompt + args.new_tokens))
    torch.manual_seed(args.seed)
    with torch.device(device):
        stock = LlamaForCausalLM(config)
    stock = stock.to(dtype).eval()
    ours = copy.deepcopy(stock)
    set_attention(stock, STOCK_ATTN)
    set_attention(ours, TESSERA_ATTN)
    use_tessera_linears(ours, tessera)
    return stock, ours, fallbacks


def compare_logits(ours, ref):
    """Relative error ||ours - ref|| / ||ref|| in fp32 and the fraction of positions whose argmax agrees."""
    ours, ref = ours.float(), ref.float()
    rel = ((ours - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    top1 = (ours.argmax(-1) == ref.argmax(-1)).float().mean().item()
    return {"rel_err": rel, "top1": top1, "rel_err_max": REL_ERR_MAX, "top1_min": TOP1_MIN,
            "ok": rel <= REL_ERR_MAX and top1 >= TOP1_MIN}


def make_decode(torch, model, prompt_kv, first_token, new_tokens):
    """A greedy decode of `new_tokens` tokens after the prompt whose per-layer (keys, values) are
    `prompt_kv`, starting from `first_token` [B, 1]; returns the tokens [B, new_tokens]. Each run builds
    a fresh DynamicCache from the prompt's tensors (which stay untouched), so it can be repeated or
    captured and replayed; argmax stays on the GPU, so the loop never waits for the device."""
    from transformers import DynamicCache

    def decode():
        cache = DynamicCache(ddp_cache_data=prompt_kv, config=model.config)
        token, tokens = first_token, []
        for _ in range(new_tokens):
            logits = model(input_ids=token, past_key_values=cache, use_cache=True).logits
            token = logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(token)
        return torch.cat(tokens, 1)

    return decode


def prompt_cache(cache):
    return [(layer.keys, layer.values) for layer in cache.layers]


def gpu_slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


# ------------------------------------------------------------------------------------ timing


# Kernel families by name, first match wins: tessera's kernels, then the anchors' (cuBLAS: nvjet / xmma /
# cutlass / gemm; SDPA: cuDNN / flash / memory-efficient), the rest (norms, RoPE, casts, copies) as "other".
KERNEL_FAMILIES = [("tessera gemm", r"tessera::gemm_impl"), ("tessera attention", r"tessera::attn"),
                   ("attention (SDPA)", r"cudnn|flash|fmha|attention|mha"),
                   ("gemm (cuBLAS)", r"nvjet|xmma|gemm|cutlass|cublas|splitK"), ("other", r".")]


def print_kernels(title, times, top=12):
    """Each model's time per family, then its largest kernels (the names shortened); returns the families'
    times {model: {family: us}} (for the JSON)."""
    print(f"\n{title}: GPU time per call by kernel family (us)")
    fams = {k: {f: 0.0 for f, _ in KERNEL_FAMILIES} for k in times}
    for key, kt in times.items():
        for name, (us, _) in kt.items():
            fam = next(f for f, rx in KERNEL_FAMILIES if re.search(rx, name, re.I))
            fams[key][fam] += us
    print("  " + "family".ljust(20) + "".join(k.rjust(12) for k in times))
    for f, _ in KERNEL_FAMILIES + [("total", None)]:
        vals = [sum(fams[k].values()) if f == "total" else fams[k][f] for k in times]
        print("  " + f.ljust(20) + "".join(f"{v:12.1f}" for v in vals))
    for key, kt in times.items():
        print(f"  {key}: largest kernels (us per call, launches)")
        for name, (us, n) in sorted(kt.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"    {us:10.1f} {n:6.1f}  {name[:150]}")
    return fams


def time_variant(torch, args, fn, graph, eager_out):
    """Median ms of fn() eager, or of one replay of its CUDA graph, and how far the graph's output is
    from `eager_out` (relative error; 0 where the capture recorded the same work). Returns
    (ms, difference or None, None) or (None, None, why it could not run)."""
    try:
        if not graph:
            return time_ms(torch, lambda _: fn(), [None], args.iters, args.warmup), None, None
        g, out = capture_graph(torch, fn)
        ms = time_ms(torch, lambda _: g.replay(), [None], args.iters, args.warmup)
        out = getattr(out, "logits", out).float()
        diff = ((out - eager_out.float()).norm() / eager_out.float().norm().clamp_min(1e-30)).item()
        return ms, diff, None
    except Exception as e:  # reported as n/a: a capture transformers cannot make must not end the run
        reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        try:
            torch.cuda.synchronize()
        except Exception as e2:  # a broken capture can leave the context unusable
            reason += f" (and then {type(e2).__name__})"
        return None, None, reason


def table(rows):
    lines = ["| variant | stock ms | tessera ms | stock / tessera | stock tok/s | tessera tok/s |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        cell = lambda k, f: f.format(r[k]) if r.get(k) is not None else "n/a"
        lines.append(f"| {r['variant']} | {cell('stock_ms', '{:.3f}')} | {cell('tessera_ms', '{:.3f}')} | "
                     f"{cell('ratio', '{:.3f}')} | {cell('stock_tok_s', '{:.0f}')} | {cell('tessera_tok_s', '{:.0f}')} |")
    for r in rows:
        for key in ("stock", "tessera"):
            if r.get(f"{key}_error"):
                lines.append(f"n/a {r['variant']} {key}: {r[key + '_error']}")
            if r.get(f"{key}_graph_vs_eager") is not None:
                lines.append(f"{r['variant']} {key}: graph output vs eager output, relative difference "
                             f"{r[key + '_graph_vs_eager']:.2e}")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    torch = cuda_torch("tessera.bench llama")
    if torch is None:
        return EXIT_NO_GPU
    try:
        import transformers
        from transformers.masking_utils import AttentionMaskInterface  # noqa: F401  (transformers >= 4.56)
    except ImportError as e:
        print(f"tessera.bench llama: needs transformers >= 4.56 (pip install 'tessera[llama]'): {e}", file=sys.stderr)
        return EXIT_NO_GPU
    import tessera

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    gpu = torch.cuda.get_device_name(0)
    stock, ours, fallbacks = build_models(torch, tessera, args, dtype, "cuda")
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    ids = torch.randint(args.vocab, (args.batch, args.prompt), device="cuda", generator=gen)
    models = {"stock": stock, "tessera": ours}
    with torch.no_grad():
        out = {k: m(input_ids=ids, use_cache=True) for k, m in models.items()}
        logits = {k: o.logits for k, o in out.items()}
        check = compare_logits(logits["tessera"], logits["stock"])
        print(f"prefill logits [{args.batch}, {args.prompt}, {args.vocab}]: rel err {check['rel_err']:.2e} "
              f"(<= {REL_ERR_MAX:g}), top-1 agreement {check['top1']:.4f} (>= {TOP1_MIN:g})  "
              f"{'OK' if check['ok'] else 'MISMATCH'}", flush=True)
        first = out["stock"].logits[:, -1].argmax(-1, keepdim=True)  # both decodes start from the same token
        decoders = {k: make_decode(torch, m, prompt_cache(out[k].past_key_values), first, args.new_tokens)
                    for k, m in models.items()}
        del out
        tokens = {k: d() for k, d in decoders.items()}
        check["decode_token_agreement"] = (tokens["tessera"] == tokens["stock"]).float().mean().item()

        prefill_tokens, decode_tokens = args.batch * args.prompt, args.batch * args.new_tokens
        prefill = lambda key: (lambda: models[key](input_ids=ids))  # use_cache defaults to True, as generate's
        variants = [("prefill eager", prefill_tokens, False, prefill, logits),
                    ("decode eager", decode_tokens, False, decoders.get, tokens),
                    ("prefill graph", prefill_tokens, True, prefill, logits),
                    ("decode graph", decode_tokens, True, decoders.get, tokens)]
        rows = []
        for variant, n_tokens, graph, fn_of, eager_out in variants:
            row = {"variant": variant, "tokens": n_tokens}
            for key in models:
                ms, diff, err = ((None, None, "--no-graphs") if graph and args.no_graphs
                                 else time_variant(torch, args, fn_of(key), graph, eager_out[key]))
                row[f"{key}_ms"], row[f"{key}_tok_s"] = ms, (n_tokens / ms * 1e3 if ms else None)
                if diff is not None:
                    row[f"{key}_graph_vs_eager"] = diff
                if err:
                    row[f"{key}_error"] = err
                torch.cuda.empty_cache()
            row["ratio"] = row["stock_ms"] / row["tessera_ms"] if row["stock_ms"] and row["tessera_ms"] else None
            rows.append(row)
            print(f"{variant}: " + ", ".join(f"{k} " + (f"{row[k + '_ms']:.3f} ms" if row[k + "_ms"] else "n/a")
                                             for k in models), flush=True)
        # After the timings: the profiler's hooks stay behind it and must not slow the timed calls.
        # Kernel durations overlap where a dependent launch (TESSERA_GEMM_PDL) starts a kernel under
        # the previous one's tail; TESSERA_GEMM_PDL=0 gives each kernel's own time.
        kernels = {}
        if args.kernels:
            kernels["prefill"] = print_kernels("prefill",
                                               {k: kernel_times(torch, prefill(k), args.iters) for k in models})
            one_step = {k: make_decode(torch, m, prompt_cache(models[k](input_ids=ids).past_key_values), first, 1)
                        for k, m in models.items()}
            kernels["decode_step"] = print_kernels("one decode step",
                                                   {k: kernel_times(torch, one_step[k], args.iters) for k in models})

    print()
    print(table(rows))
    n_fallbacks = sum(fallbacks.values())
    print(f"\nlogits check: rel err {check['rel_err']:.2e}, top-1 {check['top1']:.4f} -> "
          f"{'OK' if check['ok'] else 'MISMATCH'}; greedy decode tokens equal to stock's: "
          f"{check['decode_token_agreement']:.3f} (not judged: near-ties of random weights diverge)")
    print(f"attention calls that fell back to SDPA: {n_fallbacks}" + (f" {dict(fallbacks)}" if n_fallbacks else "")
          + " (counted per Python call: a graph replay calls none)")

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    stem = out_dir / f"torch_llama_{gpu_slug(gpu)}_{stamp}"
    config = {k: getattr(args, k) for k in ("layers", "hidden", "intermediate", "heads", "kv_heads", "head_dim",
                                            "vocab", "dtype", "batch", "prompt", "new_tokens", "seed")}
    meta = {"gpu": gpu, "torch": torch.__version__, "transformers": transformers.__version__,
            "tessera": tessera.__version__, "date": stamp, "commit": os.environ.get("TESSERA_COMMIT", ""),
            "config": config, "iters": args.iters, "warmup": args.warmup,
            "note": "ratio = stock ms / tessera ms (> 1: tessera faster). Both models use transformers' sdpa_mask "
                    "decision for plain causal attention (no mask) also under CUDA-graph capture."}
    result = {"meta": meta, "check": check, "attention_fallbacks": dict(fallbacks), "rows": rows}
    if kernels:
        result["kernel_families_us"] = kernels  # GPU us per call by kernel family (--kernels)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    plot_rows = [{"shape": r["variant"], "dtype": args.dtype, "tessera": r["tessera_tok_s"], "stock": r["stock_tok_s"]}
                 for r in rows]
    if plot(plot_rows, ["stock"], f"Llama {args.layers}x{args.hidden} tessera vs stock transformers — {gpu}",
            stem.with_suffix(".png"), ylabel="tokens/s", log=True):
        print(f"wrote {stem}.json and {stem}.png")
    else:
        print(f"wrote {stem}.json (no matplotlib: no plot)")
    if not check["ok"]:
        print("tessera.bench llama: the tessera model's logits disagree with the stock model's", file=sys.stderr)
        return EXIT_CHECK_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
