"""PyTorch tests of tessera.attention_varlen (torch.ops.tessera.attention_varlen): packed ragged
batches against an fp32 reference run on each sequence alone, the fake implementation's shapes, bad
arguments, torch.compile, CUDA-graph capture, opcheck.

The module skips without torch; tests marked `gpu` skip without an sm_80+ CUDA device. The meta-tensor
and CPU-tensor tests run with torch alone.
"""
import math

import pytest

from conftest import gpu_reason, torch_or_skip

torch = torch_or_skip()

import tessera  # noqa: E402

_GPU_REASON = gpu_reason(torch)
gpu = pytest.mark.skipif(_GPU_REASON is not None, reason=_GPU_REASON or "")

TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}


def rand(*shape, dtype=torch.float16, device="cuda"):
    return torch.randn(*shape, device=device, dtype=torch.float32).to(dtype)


def cu_of(lens, device="cuda"):
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device=device)


def varlen_reference(q, k, v, cu_q, cu_k, causal=False, scale=None, window=(-1, -1), softcap=0.0):
    """Each sequence alone in fp32: scores, softcap, the bottom-right aligned causal / window mask,
    softmax. A row that sees no key: zeros and LSE -inf. Rows outside every sequence: zeros (unused)."""
    total_q, hq, d = q.shape
    hkv = k.shape[1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.full((hq, total_q), -math.inf, dtype=torch.float32, device=q.device)
    cq, ck = cu_q.tolist(), cu_k.tolist()
    for b in range(len(cq) - 1):
        qs, qe, ks, ke = cq[b], cq[b + 1], ck[b], ck[b + 1]
        sq, sk = qe - qs, ke - ks
        if sq == 0 or sk == 0:
            continue
        qb = q[qs:qe].transpose(0, 1).float()  # [Hq, Sq, D]
        kb = k[ks:ke].transpose(0, 1).float().repeat_interleave(hq // hkv, 0)
        vb = v[ks:ke].transpose(0, 1).float().repeat_interleave(hq // hkv, 0)
        s = (qb @ kb.transpose(-1, -2)) * scale
        if softcap > 0.0:
            s = softcap * torch.tanh(s / softcap)
        i = torch.arange(sq, device=q.device)[:, None] + sk - sq
        j = torch.arange(sk, device=q.device)[None, :]
        left, right = window
        right = 0 if causal else right
        keep = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
        if right >= 0:
            keep &= j <= i + right
        if left >= 0:
            keep &= j >= i - left
        s = s.masked_fill(~keep, -math.inf)
        m = torch.logsumexp(s, dim=-1)  # [Hq, Sq]; -inf where no key is visible
        p = torch.exp(s - m[..., None].clamp_min(-1e30)).nan_to_num(0.0)
        out[qs:qe] = (p @ vb).transpose(0, 1)
        lse[:, qs:qe] = m
    return out, lse


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check(q, k, v, cu_q, cu_k, max_q, max_k, dtype, **kw):
    o, lse = tessera.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, return_lse=True, **kw)
    ref_o, ref_lse = varlen_reference(q, k, v, cu_q, cu_k, **kw)
    assert o.shape == q.shape and o.dtype == q.dtype and o.is_contiguous()
    assert lse.shape == (q.shape[1], q.shape[0]) and lse.dtype == torch.float32
    covered = torch.zeros(q.shape[0], dtype=torch.bool, device=q.device)
    c = cu_q.tolist()
    covered[c[0]:c[-1]] = True
    assert rel_err(o[covered], ref_o[covered]) < 2 * TOL[dtype]
    finite = torch.isfinite(ref_lse[:, covered])
    got = lse[:, covered]
    assert torch.equal(torch.isfinite(got), finite)
    assert torch.all(got[~finite] == -math.inf)
    if finite.any():
        assert (got[finite] - ref_lse[:, covered][finite]).abs().max().item() < 1e-2
    # Rows without a visible key are exactly zero.
    no_key = ~torch.isfinite(ref_lse[:, covered]).t()  # [rows, Hq]
    assert torch.all(o[covered][no_key] == 0)
    return o, lse


def packed(lens_q, lens_k, hq, hkv, d, dtype):
    tq, tk = sum(lens_q), sum(lens_k)
    return (rand(tq, hq, d, dtype=dtype), rand(tk, hkv, d, dtype=dtype), rand(tk, hkv, d, dtype=dtype),
            cu_of(lens_q), cu_of(lens_k), max(lens_q), max(lens_k))


# ----------------------------------------------------------------------- without a GPU (meta, CPU)


def test_op_is_registered():
    assert hasattr(torch.ops.tessera, "attention_varlen")
    assert "attention_varlen" in tessera.__all__


def test_fake_shapes_on_meta_tensors():
    q = torch.empty(300, 8, 128, device="meta", dtype=torch.bfloat16)
    k = torch.empty(500, 2, 128, device="meta", dtype=torch.bfloat16)
    cu = torch.empty(4, device="meta", dtype=torch.int32)
    o, lse = torch.ops.tessera.attention_varlen(q, k, k, cu, cu, 200, 300, True, 0.0, -1, -1, 0.0, True)
    assert o.shape == q.shape and o.dtype == q.dtype and o.device.type == "meta" and o.is_contiguous()
    assert lse.shape == (8, 300) and lse.dtype == torch.float32
    o, lse = torch.ops.tessera.attention_varlen(q, k, k, cu, cu, 200, 300, False, 0.0, 64, 0, 30.0, False, 0)
    assert o.shape == q.shape and lse.shape == (0,)
    o = tessera.attention_varlen(q, k, k, cu, cu, 200, 300, causal=True, window=(127, -1), softcap=50.0)
    assert isinstance(o, torch.Tensor) and o.shape == q.shape
    o, lse = tessera.attention_varlen(q, k, k, cu, cu, 200, 300, return_lse=True)
    assert lse.shape == (8, 300)


def test_python_side_argument_errors():
    q = torch.empty(300, 8, 64, device="meta", dtype=torch.float16)
    k = torch.empty(500, 2, 64, device="meta", dtype=torch.float16)
    cu = torch.empty(4, device="meta", dtype=torch.int32)

    def call(*args, **kw):
        base = dict(q=q, k=k, v=k, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=200, max_seqlen_k=300)
        base.update(kw)
        return tessera.attention_varlen(**base)

    with pytest.raises(ValueError, match="q: must be 3-D"):
        call(q=q[None])
    with pytest.raises(ValueError, match="k: must be 3-D"):
        call(k=k[None], v=k[None])
    with pytest.raises(ValueError, match="v: shape"):
        call(v=k[:100])
    with pytest.raises(ValueError, match="k: head_dim must equal q's"):
        bad = torch.empty(500, 2, 128, device="meta", dtype=torch.float16)
        call(k=bad, v=bad)
    with pytest.raises(ValueError, match="v: dtype"):
        call(v=k.to(torch.bfloat16))
    with pytest.raises(ValueError, match="cu_seqlens_q: must be int32"):
        call(cu_seqlens_q=cu.long())
    with pytest.raises(ValueError, match="cu_seqlens_k: must be int32"):
        call(cu_seqlens_k=cu[:1])
    with pytest.raises(ValueError, match="cu_seqlens_q: must be int32"):
        call(cu_seqlens_q=cu.view(2, 2))
    with pytest.raises(ValueError, match="cu_seqlens_k: must have cu_seqlens_q's length"):
        call(cu_seqlens_k=torch.empty(5, device="meta", dtype=torch.int32))
    with pytest.raises(ValueError, match="max_seqlen_q: must be >= 0"):
        call(max_seqlen_q=-1)
    with pytest.raises(ValueError, match="max_seqlen_k: must be >= 0"):
        call(max_seqlen_k=-3)
    with pytest.raises(ValueError, match="max_seqlen"):
        call(max_seqlen_q=2.5)
    with pytest.raises(ValueError, match="scale"):
        call(scale=0.0)
    for window in [(-2, -1), (0, -5), (1,), 5, (1.5, 2)]:
        with pytest.raises(ValueError, match="window"):
            call(window=window)
    for softcap in [-1.0, float("nan"), "x"]:
        with pytest.raises(ValueError, match="softcap"):
            call(softcap=softcap)


def test_cpu_tensors_are_rejected():
    q = torch.randn(10, 2, 64).half()
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    with pytest.raises(ValueError, match="q: must be a CUDA tensor"):
        tessera.attention_varlen(q, q, q, cu, cu, 6, 6)


# ------------------------------------------------------------------------------------------ GPU


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("head_dim", [64, 96, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_matches_reference(dtype, head_dim, causal):
    # Lengths 0 (with and without keys), 1, off and on the tiles, Sq > Sk and Sq < Sk.
    lens_q = [0, 1, 77, 128, 300, 5, 0, 33]
    lens_k = [10, 0, 200, 128, 257, 5, 0, 1]
    q, k, v, cu_q, cu_k, mq, mk = packed(lens_q, lens_k, 8, 2, head_dim, dtype)
    check(q, k, v, cu_q, cu_k, mq, mk, dtype, causal=causal)


@gpu
@pytest.mark.parametrize("window, softcap", [((32, -1), 0.0), ((-1, 16), 0.0), ((50, 20), 30.0), ((0, 0), 0.0),
                                             ((100, 0), 2.0), ((-1, -1), 30.0), ((5000, 5000), 0.0)])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_window_softcap(window, softcap, causal):
    lens_q, lens_k = [200, 1, 0, 150, 31], [200, 300, 9, 20, 31]
    q, k, v, cu_q, cu_k, mq, mk = packed(lens_q, lens_k, 4, 1, 128, torch.bfloat16)
    check(q, k, v, cu_q, cu_k, mq, mk, torch.bfloat16, causal=causal, window=window, softcap=softcap, scale=0.1)


@gpu
def test_varlen_strided_views_and_shared_cu_seqlens():
    # q, k, v as strided views of one packed [total, 3, H, D] buffer (read in place), one cu_seqlens.
    lens = [70, 0, 129, 3]
    qkv = rand(sum(lens), 3, 4, 64)
    q, k, v = qkv.unbind(1)
    cu = cu_of(lens)
    check(q, k, v, cu, cu, max(lens), max(lens), torch.float16, causal=True)
    # A head dim with stride != 1 is copied first.
    q_nc = rand(sum(lens), 64, 4).transpose(1, 2)
    check(q_nc, k, v, cu, cu, max(lens), max(lens), torch.float16)


@gpu
def test_varlen_no_keys_and_no_queries():
    q, k, v, cu_q, cu_k, mq, mk = packed([5, 7], [0, 0], 2, 2, 64, torch.float16)
    o, lse = tessera.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, return_lse=True)  # total_k = 0: no launch
    assert torch.all(o == 0) and torch.all(lse == -math.inf)
    k1 = rand(3, 2, 64)
    o, lse = tessera.attention_varlen(q, k1, k1, cu_q, cu_of([0, 0]), mq, 0, return_lse=True)  # 0 keys each
    assert torch.all(o == 0) and torch.all(lse == -math.inf)
    q0 = rand(0, 2, 64)
    o, lse = tessera.attention_varlen(q0, k1, k1, cu_of([0, 0]), cu_of([1, 2]), 0, 2, return_lse=True)
    assert o.shape == (0, 2, 64) and lse.shape == (2, 0)


@gpu
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_equals_attention_on_equal_lengths(causal):
    b, s, hq, hkv, d = 3, 200, 8, 2, 128
    q, k, v = rand(b, s, hq, d), rand(b, s, hkv, d), rand(b, s, hkv, d)
    o, lse = tessera.attention(q, k, v, causal=causal, return_lse=True)
    cu = cu_of([s] * b)
    ov, lv = tessera.attention_varlen(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu, cu, s, s, causal=causal,
                                      return_lse=True)
    torch.testing.assert_close(ov.view(b, s, hq, d), o, rtol=0, atol=0)
    torch.testing.assert_close(lv.view(hq, b, s).transpose(0, 1), lse, rtol=0, atol=0)


@gpu
def test_varlen_bad_inputs_raise():
    q, k, v, cu_q, cu_k, mq, mk = packed([10, 20], [10, 20], 4, 4, 64, torch.float16)
    with pytest.raises(ValueError, match="head_dim: 80 is not supported"):
        x = rand(30, 4, 80)
        tessera.attention_varlen(x, x, x, cu_q, cu_k, mq, mk)
    with pytest.raises(ValueError, match="heads_kv: must divide heads_q"):
        kk = rand(30, 3, 64)
        tessera.attention_varlen(q, kk, kk, cu_q, cu_k, mq, mk)
    with pytest.raises(ValueError, match="cu_seqlens_q: must be a CUDA tensor"):
        tessera.attention_varlen(q, k, v, cu_q.cpu(), cu_k, mq, mk)
    with pytest.raises(ValueError, match="dtype: must be f16 or bf16"):
        tessera.attention_varlen(q.float(), k.float(), v.float(), cu_q, cu_k, mq, mk)


@gpu
def test_varlen_opcheck():
    q, k, v, cu_q, cu_k, mq, mk = packed([30, 0, 70], [40, 5, 70], 4, 2, 64, torch.bfloat16)
    torch.library.opcheck(torch.ops.tessera.attention_varlen.default,
                          (q, k, v, cu_q, cu_k, mq, mk, True, 0.0, -1, -1, 0.0, True))
    torch.library.opcheck(torch.ops.tessera.attention_varlen.default,
                          (q, k, v, cu_q, cu_k, mq, mk, False, 0.0, 16, 4, 30.0, False, 0))


@gpu
def test_varlen_torch_compile_fullgraph():
    torch._dynamo.reset()

    def f(q, k, v, cu_q, cu_k):
        o, lse = tessera.attention_varlen(q, k, v, cu_q, cu_k, 300, 300, causal=True, return_lse=True)
        o2 = tessera.attention_varlen(q, k, v, cu_q, cu_k, 300, 300, window=(16, 8), softcap=30.0)
        return o * 2, lse, o2

    q, k, v, cu_q, cu_k, _, _ = packed([100, 300, 7], [120, 300, 0], 4, 2, 64, torch.float16)
    eager = f(q, k, v, cu_q, cu_k)
    compiled = torch.compile(f, fullgraph=True)(q, k, v, cu_q, cu_k)
    for x, y in zip(eager, compiled):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


@gpu
def test_varlen_cuda_graph_capture_and_replay():
    lens_q, lens_k = [100, 0, 257, 1], [100, 40, 257, 300]
    q, k, v, cu_q, cu_k, mq, mk = packed(lens_q, lens_k, 4, 2, 128, torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the capture
        tessera.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=True)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o, lse = tessera.attention_varlen(q, k, v, cu_q, cu_k, 300, 300, causal=True, return_lse=True)
    for lens in ([100, 0, 257, 1], [0, 300, 58, 0]):  # new inputs and new lengths, same buffers
        q.copy_(rand(*q.shape, dtype=q.dtype))
        cu_q.copy_(cu_of(lens))
        g.replay()
        torch.cuda.synchronize()
        expect_o, expect_lse = tessera.attention_varlen(q, k, v, cu_q, cu_k, 300, 300, causal=True, return_lse=True)
        covered = slice(0, sum(lens))
        torch.testing.assert_close(o[covered], expect_o[covered], rtol=0, atol=0)
        torch.testing.assert_close(lse[:, covered], expect_lse[:, covered], rtol=0, atol=0)
        ref_o, _ = varlen_reference(q, k, v, cu_q, cu_k, causal=True)
        assert rel_err(o[covered], ref_o[covered]) < 2 * TOL[torch.bfloat16]
