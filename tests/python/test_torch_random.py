"""Random cases of the public Python API against fp64 references: tessera.matmul (dtypes, shapes from one
row to a few thousand, row- and column-major views, leading dimensions and offsets that need the
workspace, batches and broadcasts, c / bias / activation / alpha / beta / out / out_dtype, tf32 and
3xTF32), tessera.attention (head dims 64-256, GQA ratios 1-8 and 7, Sq != Sk both ways, causal,
windows, softcap, scale, both layouts, packed-QKV and other strided views), attention_with_kvcache
(contiguous and paged caches in random page order, appends checked in the cache, empty caches) and
attention_varlen (sequences of length 0). Rows that see no key must be zeros. Each test draws its
cases from a fixed seed, so a failure names a case that reproduces; the last test checks that the
checks fail on a reference that is off (1% of a product, 10% of the scores' scale).

The module skips without torch; the tests skip without an sm_80+ CUDA device.
"""
import math
import random

import pytest

from conftest import gpu_reason, torch_or_skip

torch = torch_or_skip()

import tessera  # noqa: E402

_GPU_REASON = gpu_reason(torch)
pytestmark = pytest.mark.skipif(_GPU_REASON is not None, reason=_GPU_REASON or "")

dev = "cuda"


class Log:
    """The cases run and the descriptions of those that failed."""

    def __init__(self, perturb=0.0):
        self.perturb, self.cases, self.failed = perturb, 0, []

    def __call__(self, ok, desc):
        self.cases += 1
        if not ok:
            self.failed.append(desc)


def view_2d(rows, cols, dtype, gen):
    """A (rows, cols) tensor, row- or column-major, maybe a slice of a wider buffer, maybe offset."""
    kind = gen.choice(["row", "col", "row_ld", "col_ld", "offset", "noncontig"])
    if kind == "row":
        return torch.randn(rows, cols, device=dev).to(dtype)
    if kind == "col":
        return torch.randn(cols, rows, device=dev).to(dtype).t()
    if kind == "row_ld":
        pad = gen.choice([8, 16, 3, 1])
        return torch.randn(rows, cols + pad, device=dev).to(dtype)[:, :cols]
    if kind == "col_ld":
        pad = gen.choice([8, 5])
        return torch.randn(cols, rows + pad, device=dev).to(dtype)[:, :rows].t()
    if kind == "offset":
        off = gen.choice([1, 8, 3])
        return torch.randn(rows * cols + off, device=dev).to(dtype)[off:].view(rows, cols)
    return torch.randn(rows, 2 * cols, device=dev).to(dtype)[:, ::2]


def ref_mm(a, b, perturb):
    """a @ b in fp64 (times 1 + perturb: the checks' own test)."""
    return torch.matmul(a.double(), b.double()) * (1 + perturb)


ACTS = {None: lambda x: x, "relu": torch.relu, "gelu": torch.nn.functional.gelu,
        "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"), "silu": torch.nn.functional.silu}


def random_matmul(gen, n, note):
    """n random tessera.matmul calls against an fp64 reference (relative Frobenius error)."""
    for _ in range(n):
        dtype = gen.choice([torch.float16, torch.bfloat16, torch.bfloat16, torch.float32])
        shape_kind = gen.choice(["small", "small", "skinny", "wide", "big"])
        if shape_kind == "small":
            m, nn, k = (gen.randint(1, 300) for _ in range(3))
        elif shape_kind == "skinny":
            m, nn, k = gen.randint(1, 70), gen.randint(100, 9000), gen.choice([gen.randint(1, 3000), 2048, 4096])
            if gen.random() < 0.5:
                m, nn = nn, m
        elif shape_kind == "wide":
            m, nn, k = gen.randint(1, 600), gen.randint(1, 600), gen.randint(2000, 9000)
        else:
            m, nn, k = gen.randint(500, 3000), gen.randint(500, 3000), gen.randint(64, 2000)
        batch = gen.choice([None, None, None, 1, 2, 3])
        bmode = gen.choice(["both", "a", "b"]) if batch else None
        a = view_2d(m, k, dtype, gen)
        b = view_2d(k, nn, dtype, gen)
        if batch:
            if bmode in ("both", "a"):
                a = torch.stack([view_2d(m, k, dtype, gen) for _ in range(batch)])
                if gen.random() < 0.3:
                    a = a.transpose(1, 2).contiguous().transpose(1, 2)
            if bmode in ("both", "b"):
                b = torch.stack([view_2d(k, nn, dtype, gen) for _ in range(batch)])
        out_dtype = None
        if dtype != torch.float32 and gen.random() < 0.2:
            out_dtype = torch.float32
        odt = out_dtype or dtype
        act = gen.choice([None, None, "relu", "gelu", "gelu_tanh", "silu"])
        bias = torch.randn(nn, device=dev).to(odt) if gen.random() < 0.3 else None
        alpha = gen.choice([1.0, 1.0, 0.5, -2.0])
        beta = gen.choice([0.0, 0.0, 1.0, -0.75])
        c = None
        if beta != 0.0:
            cshape = gen.choice([(m, nn), (nn,), (m, 1)] + ([(batch, m, nn)] if batch else []))
            c = torch.randn(cshape, device=dev).to(odt)
        precision = None
        if dtype == torch.float32:
            precision = gen.choice([None, "tf32", "tf32x3"])
        use_out = gen.random() < 0.2
        desc = (f"{dtype} m{m} n{nn} k{k} batch{batch}/{bmode} a{tuple(a.stride())} b{tuple(b.stride())} "
                f"out_dtype={out_dtype} act={act} bias={bias is not None} alpha={alpha} beta={beta} "
                f"c={None if c is None else tuple(c.shape)} prec={precision} out={use_out}")
        try:
            ref = alpha * ref_mm(a, b, note.perturb)
            if c is not None:
                ref = ref + beta * c.double()
            if bias is not None:
                ref = ref + bias.double()
            ref = ACTS[act](ref)
            kw = dict(c=c, alpha=alpha, beta=beta, bias=bias, activation=act, out_dtype=out_dtype, precision=precision)
            if use_out:
                o = torch.full(ref.shape, float("nan"), device=dev, dtype=odt)
                got = tessera.matmul(a, b, out=o, **kw)
                ok_same = got.data_ptr() == o.data_ptr()
            else:
                got = tessera.matmul(a, b, **kw)
                ok_same = True
            torch.cuda.synchronize()
            if tuple(got.shape) != tuple(ref.shape) or got.dtype != odt:
                note(False, desc + f" shape {tuple(got.shape)} vs {tuple(ref.shape)} dtype {got.dtype}")
                continue
            err = (got.double() - ref).norm() / max(ref.norm().item(), 1e-30)
            tol = {torch.float16: 3e-3, torch.bfloat16: 2e-2, torch.float32: 5e-3}[odt if odt != torch.float32 else dtype]
            if precision == "tf32x3":
                tol = 1e-5
            finite = torch.isfinite(got).all().item()
            note(bool(finite and err <= tol and ok_same), desc + f" err {err:.3e} finite {finite}")
        except Exception as e:  # noqa: BLE001
            note(False, desc + " raised " + repr(e)[:300])


def ref_attention(q, k, v, causal, scale, window, softcap, perturb):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] -> (o [B, Sq, Hq, D], lse [B, Hq, Sq], visible [Sq, Sk]) in
    fp64, causal and window bottom-right aligned; the scores times 1 + perturb (the checks' own test)."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    qf = q.double().permute(0, 2, 1, 3)
    kf = k.double().permute(0, 2, 1, 3).repeat_interleave(g, dim=1)
    vf = v.double().permute(0, 2, 1, 3).repeat_interleave(g, dim=1)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale * (1 + perturb)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq, device=dev).view(-1, 1) + (sk - sq)
    j = torch.arange(sk, device=dev).view(1, -1)
    vis = torch.ones(sq, sk, dtype=torch.bool, device=dev)
    left, right = window
    if causal:
        vis &= j <= i
    if left >= 0:
        vis &= j >= i - left
    if right >= 0:
        vis &= j <= i + right
    s = s.masked_fill(~vis, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse.unsqueeze(-1))
    p = torch.nan_to_num(p, nan=0.0)
    o = torch.matmul(p, vf).permute(0, 2, 1, 3)
    return o, lse, vis


def sequence_error(o, q, k, v, causal, window, softcap, perturb):
    """One sequence, o and q [1, Sq, Hq, D], k and v [1, Sk, Hkv, D] (Sk may be 0): (the relative error
    over the rows that see a key, whether a row that sees none is not zero)."""
    if k.shape[1] == 0:
        return 0.0, not bool((o == 0).all())
    ref, _, vis = ref_attention(q, k, v, causal, 1.0 / math.sqrt(q.shape[-1]), window, softcap, perturb)
    rows = vis.any(dim=1)
    err = 0.0
    if rows.any():
        err = (((o.double() - ref)[:, rows]).norm() / max(ref[:, rows].norm().item(), 1e-30)).item()
    return err, bool((~rows).any()) and not bool((o[0][~rows] == 0).all())


def rand_qkv(b, sq, sk, hq, hkv, d, dtype, gen):
    """BSHD q, k, v: contiguous, views of a packed QKV, of BHSD tensors, or with padded strides."""
    kind = gen.choice(["plain", "plain", "packed", "bhsd_view", "noncontig_seq"])
    if kind == "packed" and sq == sk and hq == hkv:
        qkv = torch.randn(b, sq, 3, hq, d, device=dev).to(dtype)
        return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], kind
    if kind == "bhsd_view":
        q = torch.randn(b, hq, sq, d, device=dev).to(dtype).transpose(1, 2)
        k = torch.randn(b, hkv, sk, d, device=dev).to(dtype).transpose(1, 2)
        v = torch.randn(b, hkv, sk, d, device=dev).to(dtype).transpose(1, 2)
        return q, k, v, kind
    if kind == "noncontig_seq":
        q = torch.randn(b, 2 * sq, hq, d, device=dev).to(dtype)[:, ::2]
        k = torch.randn(b, sk, hkv, d + 8, device=dev).to(dtype)[..., :d]
        v = torch.randn(b, sk, hkv, d, device=dev).to(dtype)
        return q, k, v, kind
    return (torch.randn(b, sq, hq, d, device=dev).to(dtype), torch.randn(b, sk, hkv, d, device=dev).to(dtype),
            torch.randn(b, sk, hkv, d, device=dev).to(dtype), "plain")


def random_attention(gen, n, note):
    """n random tessera.attention calls: O against fp64, the LSE too, rows without keys zero."""
    for _ in range(n):
        dtype = gen.choice([torch.float16, torch.bfloat16])
        d = gen.choice([64, 96, 128, 256])
        hkv = gen.choice([1, 2, 4, 8])
        g = gen.choice([1, 1, 2, 4, 7, 8])
        hq = hkv * g
        b = gen.randint(1, 4)
        lens = [1, 2, 7, 16, 63, 64, 65, 127, 128, 129, 200, 511, 512, 777, 1000, 1536]
        sq = gen.choice(lens)
        sk = gen.choice(lens) if gen.random() < 0.6 else sq
        if gen.random() < 0.2:
            sq = gen.choice([1, 2, 4, 8])  # decode-like
            sk = gen.choice([100, 1000, 4097, 9000])
        causal = gen.random() < 0.5
        window = (-1, -1)
        if gen.random() < 0.25:
            window = (gen.choice([0, 1, 16, 100, 500]), -1 if causal else gen.choice([-1, 0, 5, 300]))
        softcap = gen.choice([0.0, 0.0, 0.0, 30.0, 5.0])
        scale = None if gen.random() < 0.7 else gen.choice([0.05, 0.3])
        layout = gen.choice(["bshd", "bhsd"])
        q, k, v, kind = rand_qkv(b, sq, sk, hq, hkv, d, dtype, gen)
        desc = (f"{dtype} b{b} sq{sq} sk{sk} hq{hq} hkv{hkv} d{d} causal={causal} window={window} softcap={softcap} "
                f"scale={scale} layout={layout} inputs={kind}")
        try:
            sc = scale if scale is not None else 1.0 / math.sqrt(d)
            ref, lse_ref, vis = ref_attention(q, k, v, causal, sc, window, softcap, note.perturb)
            args = (q, k, v) if layout == "bshd" else (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
            o, lse = tessera.attention(*args, causal=causal, scale=scale, return_lse=True, layout=layout,
                                       window=window, softcap=softcap)
            torch.cuda.synchronize()
            if layout == "bhsd":
                o = o.transpose(1, 2)
            rows_ok = vis.any(dim=1)  # rows with a key
            of = o.double()
            err = ((of - ref)[:, rows_ok]).norm() / max(ref[:, rows_ok].norm().item(), 1e-30)
            tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
            lse_err = (lse.double()[:, :, rows_ok] - lse_ref[:, :, rows_ok]).abs().max().item() if rows_ok.any() else 0.0
            empty_rows = (~rows_ok).nonzero().flatten()
            empty_ok = True
            if len(empty_rows):
                empty_ok = bool((o[:, empty_rows] == 0).all().item())
            finite = torch.isfinite(o).all().item()
            note(bool(finite and err <= tol and lse_err < 2e-2 and empty_ok),
                 desc + f" err {err:.3e} lse_err {lse_err:.2e} finite {finite} empty_rows_zero {empty_ok}")
        except Exception as e:  # noqa: BLE001
            note(False, desc + " raised " + repr(e)[:300])


def random_kvcache(gen, n, note):
    """n random attention_with_kvcache calls, each batch's rows against fp64 on its cached keys."""
    for _ in range(n):
        dtype = gen.choice([torch.float16, torch.bfloat16])
        d = gen.choice([64, 128, 96, 256])
        hkv = gen.choice([1, 2, 8])
        hq = hkv * gen.choice([1, 4, 8, 16])
        b = gen.randint(1, 6)
        sq = gen.choice([1, 1, 2, 4, 8, 16])
        cap = gen.choice([64, 300, 1024, 5000])
        paged = gen.random() < 0.5
        page = gen.choice([16, 32, 64, 128, 256])
        append = gen.random() < 0.4
        s_new = sq if append else 0
        seqlens = [gen.randint(0, cap - s_new) for _ in range(b)]
        if gen.random() < 0.3:
            seqlens[0] = 0
        causal = gen.random() < 0.6
        window = (-1, -1) if gen.random() < 0.7 else (gen.choice([0, 10, 200]), -1 if causal else 3)
        softcap = gen.choice([0.0, 0.0, 20.0])
        desc = (f"{dtype} b{b} sq{sq} hq{hq} hkv{hkv} d{d} cap{cap} paged={paged}/{page} append={append} "
                f"seqlens={seqlens[:4]} causal={causal} window={window} softcap={softcap}")
        try:
            q = torch.randn(b, sq, hq, d, device=dev).to(dtype)
            kc = torch.randn(b, cap, hkv, d, device=dev).to(dtype)
            vc = torch.randn(b, cap, hkv, d, device=dev).to(dtype)
            knew = torch.randn(b, s_new, hkv, d, device=dev).to(dtype) if append else None
            vnew = torch.randn(b, s_new, hkv, d, device=dev).to(dtype) if append else None
            cs = torch.tensor(seqlens, dtype=torch.int32, device=dev)
            kw = dict(cache_seqlens=cs, k=knew, v=vnew, causal=causal, window=window, softcap=softcap, return_lse=True)
            # the reference's cache after the append
            kref, vref = kc.clone(), vc.clone()
            if append:
                for bi in range(b):
                    kref[bi, seqlens[bi]:seqlens[bi] + s_new] = knew[bi]
                    vref[bi, seqlens[bi]:seqlens[bi] + s_new] = vnew[bi]
            if paged:
                pages_per = (cap + page - 1) // page
                num_pages = b * pages_per + 3
                perm = torch.randperm(num_pages, device=dev)[: b * pages_per].view(b, pages_per).to(torch.int32)
                kp = torch.randn(num_pages, page, hkv, d, device=dev).to(dtype)
                vp = torch.randn(num_pages, page, hkv, d, device=dev).to(dtype)
                for bi in range(b):
                    for pi in range(pages_per):
                        lo, hi = pi * page, min(cap, (pi + 1) * page)
                        kp[perm[bi, pi], : hi - lo] = kc[bi, lo:hi]
                        vp[perm[bi, pi], : hi - lo] = vc[bi, lo:hi]
                o, lse = tessera.attention_with_kvcache(q, kp, vp, block_table=perm, **kw)
                # the cache's contents after the append
                if append and not all(torch.equal(kp[perm[bi, pos // page], pos % page], knew[bi, pos - seqlens[bi]])
                                      for bi in range(b) for pos in range(seqlens[bi], seqlens[bi] + s_new)):
                    note(False, desc + " appended k not in the paged cache")
                    continue
            else:
                o, lse = tessera.attention_with_kvcache(q, kc, vc, **kw)
                if append and not torch.equal(kc, kref):
                    note(False, desc + " cache after append differs")
                    continue
            torch.cuda.synchronize()
            checks = [sequence_error(o[bi:bi + 1], q[bi:bi + 1], kref[bi:bi + 1, :seqlens[bi] + s_new],
                                     vref[bi:bi + 1, :seqlens[bi] + s_new], causal, window, softcap, note.perturb)
                      for bi in range(b)]
            worst, empty_bad = max(c[0] for c in checks), any(c[1] for c in checks)
            tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
            finite = torch.isfinite(o).all().item()
            note(bool(finite and worst <= tol and not empty_bad),
                 desc + f" err {worst:.3e} finite {finite} empty_rows_nonzero {empty_bad}")
        except Exception as e:  # noqa: BLE001
            note(False, desc + " raised " + repr(e)[:300])


def random_varlen(gen, n, note):
    """n random attention_varlen calls, each sequence against fp64 alone."""
    for _ in range(n):
        dtype = gen.choice([torch.float16, torch.bfloat16])
        d = gen.choice([64, 128, 96, 256])
        hkv = gen.choice([1, 2, 4])
        hq = hkv * gen.choice([1, 2, 8])
        bsz = gen.randint(1, 6)
        lq = [gen.choice([0, 1, 5, 64, 100, 129, 300, 700]) for _ in range(bsz)]
        same = gen.random() < 0.5
        lk = list(lq) if same else [gen.choice([0, 1, 30, 128, 257, 600]) for _ in range(bsz)]
        causal = gen.random() < 0.5
        window = (-1, -1) if gen.random() < 0.7 else (gen.choice([0, 20, 100]), -1 if causal else 10)
        softcap = gen.choice([0.0, 0.0, 15.0])
        desc = f"{dtype} d{d} hq{hq} hkv{hkv} lq{lq} lk{lk} causal={causal} window={window} softcap={softcap}"
        try:
            tq, tk = sum(lq), sum(lk)
            q = torch.randn(max(tq, 1), hq, d, device=dev).to(dtype)[:tq]
            k = torch.randn(max(tk, 1), hkv, d, device=dev).to(dtype)[:tk]
            v = torch.randn(max(tk, 1), hkv, d, device=dev).to(dtype)[:tk]
            cq = torch.tensor([0] + list(torch.tensor(lq).cumsum(0).tolist()), dtype=torch.int32, device=dev)
            ck = torch.tensor([0] + list(torch.tensor(lk).cumsum(0).tolist()), dtype=torch.int32, device=dev)
            o, lse = tessera.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal, window=window,
                                              softcap=softcap, return_lse=True)
            torch.cuda.synchronize()
            checks = [(0.0, False)]
            for bi in range(bsz):
                q0, q1, k0, k1 = int(cq[bi]), int(cq[bi + 1]), int(ck[bi]), int(ck[bi + 1])
                if q1 > q0:
                    checks.append(sequence_error(o[q0:q1].unsqueeze(0), q[q0:q1].unsqueeze(0), k[k0:k1].unsqueeze(0),
                                                 v[k0:k1].unsqueeze(0), causal, window, softcap, note.perturb))
            worst, empty_bad = max(c[0] for c in checks), any(c[1] for c in checks)
            tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
            finite = torch.isfinite(o).all().item() if o.numel() else True
            note(bool(finite and worst <= tol and not empty_bad),
                 desc + f" err {worst:.3e} finite {finite} empty_rows_nonzero {empty_bad}")
        except Exception as e:  # noqa: BLE001
            note(False, desc + " raised " + repr(e)[:300])


FAMILIES = {"matmul": (random_matmul, 150), "attention": (random_attention, 60), "kvcache": (random_kvcache, 30),
            "varlen": (random_varlen, 30)}


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_random_cases_match_the_reference(family, seed):
    fn, n = FAMILIES[family]
    gen = random.Random(seed)
    torch.manual_seed(seed)
    note = Log()
    fn(gen, n, note)
    assert note.cases == n
    assert not note.failed, f"{len(note.failed)} of {n} failed, e.g.\n" + "\n".join(note.failed[:10])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_checks_reject_a_wrong_reference(family):
    fn, n = FAMILIES[family]
    gen = random.Random(7)
    torch.manual_seed(7)
    note = Log(perturb=0.01 if family == "matmul" else 0.1)
    fn(gen, 20, note)
    assert len(note.failed) >= 10, f"only {len(note.failed)} of 20 cases caught a wrong reference"
