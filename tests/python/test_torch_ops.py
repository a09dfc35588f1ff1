"""PyTorch tests: the custom ops against torch (GEMM: torch.matmul in fp32; attention: SDPA's math
backend in fp32), bad inputs, torch.compile and CUDA-graph capture.

The module skips without torch; tests marked `gpu` skip without an sm_80+ CUDA device. The
meta/fake-tensor tests and CPU-tensor rejections run with torch alone.
"""
import math

import pytest

from conftest import gpu_reason, torch_or_skip

torch = torch_or_skip()
import torch.nn.functional as F  # noqa: E402

import tessera  # noqa: E402

_GPU_REASON = gpu_reason(torch)
gpu = pytest.mark.skipif(_GPU_REASON is not None, reason=_GPU_REASON or "")

TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 3e-4}


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def rand(*shape, dtype=torch.float16, device="cuda"):
    return torch.randn(*shape, device=device, dtype=torch.float32).to(dtype)


# ------------------------------------------------------------------------ without a GPU (meta)


def test_ops_are_registered():
    assert hasattr(torch.ops.tessera, "matmul")
    assert hasattr(torch.ops.tessera, "matmul_out")
    assert hasattr(torch.ops.tessera, "attention")


def test_matmul_fake_shapes_on_meta_tensors():
    a = torch.empty(3, 64, 32, device="meta", dtype=torch.bfloat16)
    b = torch.empty(32, 48, device="meta", dtype=torch.bfloat16)
    d = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None)
    assert d.shape == (3, 64, 48) and d.dtype == torch.bfloat16 and d.device.type == "meta"
    d = torch.ops.tessera.matmul(a[0], b, None, 1.0, 0.0, torch.float32)
    assert d.shape == (64, 48) and d.dtype == torch.float32
    with pytest.raises(ValueError, match="do not broadcast"):
        torch.ops.tessera.matmul(a, torch.empty(2, 32, 48, device="meta", dtype=torch.bfloat16), None, 1.0, 0.0, None)


def test_matmul_fake_with_bias_and_activation():
    a = torch.empty(3, 64, 32, device="meta", dtype=torch.bfloat16)
    b = torch.empty(32, 48, device="meta", dtype=torch.bfloat16)
    bias = torch.empty(48, device="meta", dtype=torch.float32)  # converted to the output dtype
    d = tessera.matmul(a, b, bias=bias, activation="gelu_tanh")
    assert d.shape == (3, 64, 48) and d.dtype == torch.bfloat16 and d.device.type == "meta"
    # The op's trailing (bias, activation) arguments default to none: older 6-argument calls still work.
    d = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, bias, 4)
    assert d.shape == (3, 64, 48)


def test_matmul_int8_fake_dtypes_on_meta_tensors():
    """int8 operands: int32 (the exact sums) without scales, bfloat16 by default with them, out_dtype
    float16 / float32 allowed; through the op (fake) and tessera.matmul alike, batched and transposed."""
    a = torch.empty(3, 64, 32, device="meta", dtype=torch.int8)
    b = torch.empty(48, 32, device="meta", dtype=torch.int8).t()
    d = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None)
    assert d.shape == (3, 64, 48) and d.dtype == torch.int32 and d.device.type == "meta"
    assert tessera.matmul(a[0], b).dtype == torch.int32
    assert tessera.matmul(a, b, out_dtype=torch.int32).shape == (3, 64, 48)
    st = torch.empty(1, device="meta", dtype=torch.float32)
    sa, sb = torch.empty(64, 1, device="meta"), torch.empty(1, 48, device="meta")
    for scales in [(st, st), (sa, sb), (sa.view(64), sb.view(48)), (st, sb), (sa, st.view(()))]:
        d = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0, 0, *scales)
        assert d.shape == (3, 64, 48) and d.dtype == torch.bfloat16
        for out_dtype in (torch.float16, torch.float32, torch.bfloat16):
            d = tessera.matmul(a, b, scale_a=scales[0], scale_b=scales[1], out_dtype=out_dtype, activation="relu",
                               bias=torch.empty(48, device="meta", dtype=out_dtype))
            assert d.shape == (3, 64, 48) and d.dtype == out_dtype
    out = torch.empty(3, 64, 48, device="meta", dtype=torch.float16)
    assert tessera.matmul(a, b, scale_a=sa, scale_b=sb, out=out) is out
    out = torch.empty(3, 64, 48, device="meta", dtype=torch.int32)
    assert tessera.matmul(a, b, out=out) is out


def test_matmul_int8_argument_errors_without_a_gpu():
    """The int8 rules tessera checks in Python (meta tensors: no CUDA needed), each naming its argument."""
    a = torch.empty(64, 32, device="meta", dtype=torch.int8)
    b = torch.empty(32, 48, device="meta", dtype=torch.int8)
    h = torch.empty(32, 48, device="meta", dtype=torch.float16)
    sa, sb = torch.empty(64, 1, device="meta"), torch.empty(1, 48, device="meta")
    cases = [
        (dict(a=a, b=h), ValueError, r"b\.dtype: must equal a\.dtype \(torch\.int8\), got torch\.float16"),
        (dict(a=h.t(), b=b), ValueError, r"b\.dtype: must equal a\.dtype \(torch\.float16\), got torch\.int8"),
        (dict(a=a, b=b, out_dtype=torch.bfloat16), ValueError,
         r"out_dtype: int8 operands without scales give the exact int32"),
        (dict(a=a, b=b, out_dtype=torch.int8), ValueError, r"out_dtype: int8 operands without scales"),
        (dict(a=a, b=b, out=torch.empty(64, 48, device="meta", dtype=torch.float16)), ValueError,
         r"out\.dtype: int8 operands without scales"),
        (dict(a=a, b=b, scale_a=sa, scale_b=sb, out_dtype=torch.int32), ValueError,
         r"out_dtype: int8 operands dequantised by scale_a and scale_b give bfloat16, float16 or float32, "
         r"got torch\.int32"),
        (dict(a=a, b=b, scale_a=sa, scale_b=sb, out=torch.empty(64, 48, device="meta", dtype=torch.int32)), ValueError,
         r"out\.dtype: int8 operands dequantised"),
        (dict(a=a, b=b, scale_a=sa), ValueError,
         r"scale_b: missing; dequantisation takes scale_a and scale_b together"),
        (dict(a=a, b=b, scale_b=sb), ValueError, r"scale_a: missing"),
        (dict(a=h.t(), b=h, scale_a=sa, scale_b=sb), ValueError,
         r"scale_a, scale_b: dequantise int8 or fp8 operands; a and b are torch\.float16"),
        (dict(a=a, b=b, scale_a=0.5, scale_b=sb), TypeError,
         r"scale_a: must be a float32 CUDA tensor \(or None\), got float"),
        (dict(a=a, b=b, scale_a=sa, scale_b=[1.0]), TypeError, r"scale_b: must be a float32 CUDA tensor"),
        (dict(a=a, b=b, scale_a=sa.double(), scale_b=sb), ValueError, r"scale_a: must be float32, got torch\.float64"),
        (dict(a=a, b=b, scale_a=sa, scale_b=sb.half()), ValueError, r"scale_b: must be float32, got torch\.float16"),
        (dict(a=a, b=b, scale_a=sa.view(1, 64), scale_b=sb), ValueError,
         r"scale_a: must have one element \(per tensor\) or shape \(64,\) or \(64, 1\) .* got shape \(1, 64\)"),
        (dict(a=a, b=b, scale_a=sa, scale_b=sb.view(48, 1)), ValueError,
         r"scale_b: must have one element \(per tensor\) or shape \(48,\) or \(1, 48\) .* got shape \(48, 1\)"),
        (dict(a=a, b=b, scale_a=torch.empty(63, device="meta"), scale_b=sb), ValueError,
         r"scale_a: .*got shape \(63,\)"),
        (dict(a=a.expand(2, 64, 32), b=b, scale_a=torch.empty(2, 64, 1, device="meta"), scale_b=sb), ValueError,
         r"scale_a: .*got shape \(2, 64, 1\)"),
    ]
    for kwargs, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            tessera.matmul(**kwargs)
    # the ops check the same (traced and compiled calls reach them directly)
    with pytest.raises(ValueError, match=r"scale_b: missing"):
        torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0, 0, sa, None)
    with pytest.raises(ValueError, match=r"out_dtype: int8 operands without scales"):
        torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, torch.float32)
    with pytest.raises(ValueError, match=r"out\.dtype: int8 operands without scales"):
        torch.ops.tessera.matmul_out(a, b, None, 1.0, 0.0, torch.empty(64, 48, device="meta"))


FP8_DTYPES = [torch.float8_e4m3fn, torch.float8_e5m2]
FAST_ACCUM = tessera._C.PRECISION_FP8_FAST_ACCUM


@pytest.mark.parametrize("fp8", FP8_DTYPES)
def test_matmul_fp8_fake_dtypes_on_meta_tensors(fp8):
    """fp8 operands: bfloat16 by default, out_dtype float16 / float32 allowed, with or without scales, at
    either precision; through the op (fake) and tessera.matmul alike, batched and transposed."""
    a = torch.empty(3, 64, 32, device="meta", dtype=fp8)
    b = torch.empty(48, 32, device="meta", dtype=fp8).t()
    d = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None)
    assert d.shape == (3, 64, 48) and d.dtype == torch.bfloat16 and d.device.type == "meta"
    d = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, torch.float32, None, 0, 0, FAST_ACCUM)
    assert d.shape == (3, 64, 48) and d.dtype == torch.float32
    assert tessera.matmul(a[0], b).dtype == torch.bfloat16
    assert tessera.matmul(a, b, precision="fast_accum").dtype == torch.bfloat16
    st = torch.empty(1, device="meta", dtype=torch.float32)
    sa, sb = torch.empty(64, 1, device="meta"), torch.empty(1, 48, device="meta")
    for scales in [(None, None), (st, st), (st.view(()), st.view(1, 1)), (sa, sb), (sa.view(64), sb.view(48)),
                   (st, sb)]:
        d = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0, 0, *scales)
        assert d.shape == (3, 64, 48) and d.dtype == torch.bfloat16
        for out_dtype in (torch.float16, torch.float32, torch.bfloat16):
            for precision in (None, "fast_accum"):
                d = tessera.matmul(a, b, scale_a=scales[0], scale_b=scales[1], out_dtype=out_dtype, activation="relu",
                                   bias=torch.empty(48, device="meta", dtype=out_dtype), precision=precision)
                assert d.shape == (3, 64, 48) and d.dtype == out_dtype
    for dtype in (torch.float16, torch.float32, torch.bfloat16):
        out = torch.empty(3, 64, 48, device="meta", dtype=dtype)
        assert tessera.matmul(a, b, out=out) is out
        assert tessera.matmul(a, b, scale_a=sa, scale_b=sb, out=out, precision="fast_accum") is out
        assert tessera.matmul(a, b, out=out, out_dtype=dtype) is out


def test_matmul_fp8_argument_errors_without_a_gpu():
    """The fp8 rules tessera checks in Python (meta tensors: no CUDA needed), each naming its argument."""
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    a = torch.empty(64, 32, device="meta", dtype=e4)
    b = torch.empty(32, 48, device="meta", dtype=e4)
    sa, sb = torch.empty(64, 1, device="meta"), torch.empty(1, 48, device="meta")

    def like(t, dtype):
        return torch.empty(t.shape, device="meta", dtype=dtype)

    cases = [
        (dict(a=a, b=like(b, e5)), ValueError,
         r"b\.dtype: must equal a\.dtype \(torch\.float8_e4m3fn\), got torch\.float8_e5m2 \(fp8 operands: both"),
        (dict(a=like(a, e5), b=b), ValueError, r"b\.dtype: must equal a\.dtype \(torch\.float8_e5m2\), got "
                                               r"torch\.float8_e4m3fn"),
        (dict(a=a, b=like(b, torch.float16)), ValueError, r"b\.dtype: must equal a\.dtype \(torch\.float8_e4m3fn\)"),
        (dict(a=like(a, torch.bfloat16), b=b), ValueError,
         r"b\.dtype: must equal a\.dtype \(torch\.bfloat16\), got torch\.float8_e4m3fn"),
        (dict(a=like(a, torch.int8), b=b), ValueError, r"b\.dtype: must equal a\.dtype \(torch\.int8\)"),
        (dict(a=a, b=b, out_dtype=e4), ValueError,
         r"out_dtype: fp8 operands give bfloat16 \(the default\), float16 or float32, got torch\.float8_e4m3fn"),
        (dict(a=a, b=b, out_dtype=e5), ValueError, r"out_dtype: fp8 operands give .*got torch\.float8_e5m2"),
        (dict(a=a, b=b, out_dtype=torch.int32), ValueError, r"out_dtype: fp8 operands give .*got torch\.int32"),
        (dict(a=a, b=b, scale_a=sa, scale_b=sb, out_dtype=torch.int8), ValueError, r"out_dtype: fp8 operands give"),
        (dict(a=a, b=b, out=torch.empty(64, 48, device="meta", dtype=e4)), ValueError,
         r"out\.dtype: fp8 operands give .*got torch\.float8_e4m3fn"),
        (dict(a=a, b=b, out=torch.empty(64, 48, device="meta", dtype=torch.int32)), ValueError,
         r"out\.dtype: fp8 operands give"),
        (dict(a=a, b=b, precision="tf32"), ValueError,
         r"precision: 'tf32' and 'tf32x3' apply to float32 operands; a and b are torch\.float8_e4m3fn"),
        (dict(a=like(a, e5), b=like(b, e5), precision="tf32x3"), ValueError,
         r"precision: 'tf32' and 'tf32x3' apply to float32 operands; a and b are torch\.float8_e5m2"),
        (dict(a=a, b=b, precision="fast"), ValueError,
         r"precision: must be None, 'tf32', 'tf32x3' or 'fast_accum' \(got 'fast'\)"),
        (dict(a=a, b=b, precision=True), ValueError, r"precision: must be None"),
        (dict(a=a, b=b, scale_a=sa), ValueError,
         r"scale_b: missing; dequantisation takes scale_a and scale_b together \(got scale_a alone\)"),
        (dict(a=a, b=b, scale_b=sb), ValueError, r"scale_a: missing"),
        (dict(a=a, b=b, scale_a=0.5, scale_b=sb), TypeError, r"scale_a: must be a float32 CUDA tensor"),
        (dict(a=a, b=b, scale_a=sa.double(), scale_b=sb), ValueError, r"scale_a: must be float32, got torch\.float64"),
        (dict(a=a, b=b, scale_a=sa, scale_b=sb.bfloat16()), ValueError, r"scale_b: must be float32"),
        (dict(a=a, b=b, scale_a=sa.view(1, 64), scale_b=sb), ValueError,
         r"scale_a: must have one element \(per tensor\) or shape \(64,\) or \(64, 1\) .* got shape \(1, 64\)"),
        (dict(a=a, b=b, scale_a=sa, scale_b=sb.view(48, 1)), ValueError, r"scale_b: .*got shape \(48, 1\)"),
    ]
    # fast_accum is for fp8 operands only
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int8):
        cases.append((dict(a=like(a, dtype), b=like(b, dtype), precision="fast_accum"), ValueError,
                      r"precision: 'fast_accum' applies to fp8 operands \(torch\.float8_e4m3fn, torch\.float8_e5m2\); "
                      r"a and b are " + str(dtype).replace(".", r"\.")))
    for kwargs, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            tessera.matmul(**kwargs)
    # the ops check the same (traced and compiled calls reach them directly)
    with pytest.raises(ValueError, match=r"out_dtype: fp8 operands give"):
        torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, e4)
    with pytest.raises(ValueError, match=r"out\.dtype: fp8 operands give"):
        torch.ops.tessera.matmul_out(a, b, None, 1.0, 0.0, torch.empty(64, 48, device="meta", dtype=e5))
    with pytest.raises(ValueError, match=r"precision: 'tf32' and 'tf32x3' apply to float32 operands"):
        torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0, tessera._C.PRECISION_TF32)
    h = like(b, torch.float16)
    with pytest.raises(ValueError, match=r"precision: 'fast_accum' applies to fp8 operands"):
        torch.ops.tessera.matmul(like(a, torch.float16), h, None, 1.0, 0.0, None, None, 0, 0, FAST_ACCUM)
    with pytest.raises(ValueError, match=r"precision: 'fast_accum' applies to fp8 operands"):
        torch.ops.tessera.matmul_out(like(a, torch.float16), h, None, 1.0, 0.0,
                                     torch.empty(64, 48, device="meta", dtype=torch.float16), None, 0, 0, FAST_ACCUM)


def _blocks(x):
    """ceil(x / 128): the number of 128-wide blocks of K (or of N) block scales take."""
    return -(-x // 128)


@pytest.mark.parametrize("fp8", FP8_DTYPES)
def test_matmul_fp8_block_scales_fake_dtypes_on_meta_tensors(fp8):
    """Block scales (DeepSeek-V3's recipe): scale_a (M, ceil(K/128)) and scale_b (ceil(K/128), ceil(N/128)),
    float32, row- or column-major; bfloat16 by default, float16 / float32 allowed, at either precision,
    batched a with the scales shared; through the op (fake) and tessera.matmul alike."""
    m, n, k = 64, 200, 300  # 3 K blocks (the last of 44), 2 N blocks (the last of 72)
    a = torch.empty(3, m, k, device="meta", dtype=fp8)
    b = torch.empty(n, k, device="meta", dtype=fp8).t()  # W.t() of an (N, K) weight
    sa, sb = torch.empty(m, 3, device="meta"), torch.empty(3, 2, device="meta")
    sa_t, sb_t = torch.empty(3, m, device="meta").t(), torch.empty(2, 3, device="meta").t()  # column-major
    for scales in [(sa, sb), (sa_t, sb_t), (sa, sb_t), (sa_t, sb)]:
        d = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0, 0, *scales)
        assert d.shape == (3, m, n) and d.dtype == torch.bfloat16 and d.device.type == "meta"
        d = torch.ops.tessera.matmul(a[0], b, None, 1.0, 0.0, torch.float32, None, 0, 0, FAST_ACCUM, *scales)
        assert d.shape == (m, n) and d.dtype == torch.float32
        for out_dtype in (torch.float16, torch.float32, torch.bfloat16):
            for precision in (None, "fast_accum"):
                d = tessera.matmul(a, b, scale_a=scales[0], scale_b=scales[1], out_dtype=out_dtype, activation="relu",
                                   bias=torch.empty(n, device="meta", dtype=out_dtype), precision=precision)
                assert d.shape == (3, m, n) and d.dtype == out_dtype
        for dtype in (torch.float16, torch.float32, torch.bfloat16):
            out = torch.empty(3, m, n, device="meta", dtype=dtype)
            assert tessera.matmul(a, b, scale_a=scales[0], scale_b=scales[1], out=out) is out
    # one K block (K <= 128): scale_a (M, 1) as a row-wise one would be, scale_b (1, ceil(N/128))
    a1, b1 = torch.empty(m, 100, device="meta", dtype=fp8), torch.empty(n, 100, device="meta", dtype=fp8).t()
    d = tessera.matmul(a1, b1, scale_a=torch.empty(m, 1, device="meta"), scale_b=torch.empty(1, 2, device="meta"))
    assert d.shape == (m, n) and d.dtype == torch.bfloat16


def test_matmul_fp8_block_scales_argument_errors_without_a_gpu():
    """Misshapen block scales raise ValueError naming the misshapen one (meta tensors: no CUDA needed); block
    scales are for fp8 operands."""
    e4 = torch.float8_e4m3fn
    m, n, k = 64, 200, 300  # scale_a (64, 3), scale_b (3, 2)
    a = torch.empty(m, k, device="meta", dtype=e4)
    b = torch.empty(k, n, device="meta", dtype=e4)

    def s(*shape):
        return torch.empty(*shape, device="meta")

    sa, sb = s(m, _blocks(k)), s(_blocks(k), _blocks(n))
    assert sa.shape == (64, 3) and sb.shape == (3, 2)
    cases = [
        (dict(scale_a=s(m, 2), scale_b=sb), r"scale_a"),  # too few K blocks
        (dict(scale_a=s(m, 4), scale_b=sb), r"scale_a"),  # too many
        (dict(scale_a=s(3, m), scale_b=sb), r"scale_a"),  # (K blocks, M): the transposed shape
        (dict(scale_a=s(m + 1, 3), scale_b=sb), r"scale_a"),
        (dict(scale_a=s(1, m, 3), scale_b=sb), r"scale_a"),  # 3-D: block scales are 2-D, shared by the batches
        (dict(scale_a=s(m * 3), scale_b=sb), r"scale_a"),  # flat
        (dict(scale_a=sa, scale_b=s(2, 3)), r"scale_b"),  # the transposed shape
        (dict(scale_a=sa, scale_b=s(3, 3)), r"scale_b"),
        (dict(scale_a=sa, scale_b=s(2, 2)), r"scale_b"),
        (dict(scale_a=sa, scale_b=s(3, 1)), r"scale_b"),
        (dict(scale_a=sa, scale_b=s(1, 3, 2)), r"scale_b"),
        (dict(scale_a=sa, scale_b=s(3, n)), r"scale_b"),  # one per column of b per K block: not a form
        # block scales beside row-wise or per-tensor ones: either may be named
        (dict(scale_a=sa, scale_b=s(1, n)), r"scale_[ab]"),
        (dict(scale_a=sa, scale_b=s(n)), r"scale_[ab]"),
        (dict(scale_a=s(m, 1), scale_b=sb), r"scale_[ab]"),
        (dict(scale_a=s(m), scale_b=sb), r"scale_[ab]"),
        (dict(scale_a=sa, scale_b=s(1)), r"scale_[ab]"),
        (dict(scale_a=s(1), scale_b=sb), r"scale_[ab]"),
        (dict(scale_a=sa.double(), scale_b=sb), r"scale_a: must be float32, got torch\.float64"),
        (dict(scale_a=sa, scale_b=sb.half()), r"scale_b: must be float32, got torch\.float16"),
        (dict(scale_a=sa), r"scale_b: missing"),
        (dict(scale_b=sb), r"scale_a: missing"),
    ]
    for kwargs, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            tessera.matmul(a, b, **kwargs)
    # int8 operands take scales per tensor or row-wise only
    ai, bi = torch.empty(m, k, device="meta", dtype=torch.int8), torch.empty(k, n, device="meta", dtype=torch.int8)
    for out_dtype in (None, torch.float32):
        with pytest.raises(ValueError, match=r"scale_[ab]"):
            tessera.matmul(ai, bi, scale_a=sa, scale_b=sb, out_dtype=out_dtype)
    with pytest.raises(ValueError, match=r"scale_[ab]"):
        tessera.matmul(ai, bi, scale_a=sa, scale_b=sb, out=torch.empty(m, n, device="meta", dtype=torch.bfloat16))
    # ... also with one K block, where scale_a (M, 1) is row-wise in form but scale_b (1, ceil(N/128)) is not (1, N)
    with pytest.raises(ValueError, match=r"scale_b"):
        tessera.matmul(torch.empty(m, 100, device="meta", dtype=torch.int8),
                       torch.empty(100, n, device="meta", dtype=torch.int8), scale_a=s(m, 1), scale_b=s(1, 2))
    # 16-bit operands take no scales at all
    h = torch.empty(m, k, device="meta", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"scale_a, scale_b: dequantise int8 or fp8 operands; a and b are "
                                         r"torch\.float16"):
        tessera.matmul(h, torch.empty(k, n, device="meta", dtype=torch.float16), scale_a=sa, scale_b=sb)
    # the ops check the same (traced and compiled calls reach them directly)
    with pytest.raises(ValueError, match=r"scale_a"):
        torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0, 0, s(m, 2), sb)
    with pytest.raises(ValueError, match=r"scale_b"):
        torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0, 0, sa, s(2, 3))
    with pytest.raises(ValueError, match=r"scale_b"):
        torch.ops.tessera.matmul_out(a, b, None, 1.0, 0.0, torch.empty(m, n, device="meta", dtype=torch.bfloat16),
                                     None, 0, 0, 0, sa, s(3, 3))
    with pytest.raises(ValueError, match=r"scale_[ab]"):
        torch.ops.tessera.matmul(ai, bi, None, 1.0, 0.0, None, None, 0, 0, 0, sa, sb)


def test_attention_fake_shapes_on_meta_tensors():
    q = torch.empty(2, 100, 8, 64, device="meta", dtype=torch.float16)
    k = torch.empty(2, 50, 2, 64, device="meta", dtype=torch.float16)
    o, lse = torch.ops.tessera.attention(q, k, k, True, 0.0, True, "bshd")
    assert o.shape == q.shape and o.is_contiguous() and lse.shape == (2, 8, 100) and lse.dtype == torch.float32
    qh = q.transpose(1, 2).contiguous()
    o = tessera.attention(qh, k.transpose(1, 2), k.transpose(1, 2), layout="bhsd")
    assert o.shape == qh.shape and o.is_contiguous()
    # The window and softcap: trailing op arguments with defaults, and keywords of tessera.attention.
    o, lse = torch.ops.tessera.attention(q, k, k, False, 0.0, True, "bshd", 0, 64, 8, 30.0)
    assert o.shape == q.shape and lse.shape == (2, 8, 100)
    o, lse = tessera.attention(q, k, k, causal=True, window=(128, -1), softcap=50.0, return_lse=True)
    assert o.shape == q.shape and lse.shape == (2, 8, 100)


def test_cpu_tensors_are_rejected():
    a = torch.randn(8, 8).half()
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        tessera.matmul(a, a)
    a8 = torch.randint(-128, 128, (8, 8), dtype=torch.int8)
    with pytest.raises(ValueError, match="a: must be a CUDA tensor"):
        tessera.matmul(a8, a8)
    with pytest.raises(ValueError, match="a: must be a CUDA tensor"):
        tessera.matmul(a8, a8, scale_a=torch.ones(1), scale_b=torch.ones(8))
    q = torch.randn(1, 8, 1, 64).half()
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        tessera.attention(q, q, q)


def test_python_side_argument_errors():
    a = torch.empty(8, 8, device="meta", dtype=torch.float16)
    with pytest.raises(ValueError, match="activation"):
        tessera.matmul(a, a, activation="tanh")
    with pytest.raises(ValueError, match="bias: must have shape"):
        tessera.matmul(a, a, bias=a)
    with pytest.raises(ValueError, match="a: must be 2-D"):
        tessera.matmul(a[0], a)
    q = torch.empty(1, 8, 1, 64, device="meta", dtype=torch.float16)
    with pytest.raises(ValueError, match="layout"):
        tessera.attention(q, q, q, layout="sbhd")
    with pytest.raises(ValueError, match="scale"):
        tessera.attention(q, q, q, scale=0.0)
    with pytest.raises(ValueError, match="q: must be 4-D"):
        tessera.attention(q[0], q, q)
    for window in [(-2, -1), (0, -5), (1,), (1, 2, 3), 5, (1.5, 2), (True, 0), "ab"]:
        with pytest.raises(ValueError, match="window"):
            tessera.attention(q, q, q, window=window)
    for softcap in [-1.0, float("nan"), float("inf"), "x"]:
        with pytest.raises(ValueError, match="softcap"):
            tessera.attention(q, q, q, softcap=softcap)


# ------------------------------------------------------------------------------------ GEMM


def ref_matmul(a, b, c=None, alpha=1.0, beta=0.0):
    ref = alpha * torch.matmul(a.float(), b.float())
    if c is not None and beta != 0.0:
        ref = ref + beta * c.float()
    return ref


def operand(shape, dtype, major):
    """A tensor of `shape` whose last two modes are row-major ("row"), column-major ("col", a
    transposed view), or neither ("strided", every other element: copied by the wrapper)."""
    if major == "row":
        return rand(*shape, dtype=dtype)
    if major == "col":
        return rand(*shape[:-2], shape[-1], shape[-2], dtype=dtype).transpose(-1, -2)
    big = rand(*shape[:-2], 2 * shape[-2], 2 * shape[-1], dtype=dtype)
    return big[..., ::2, ::2]


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (128, 128, 64), (257, 129, 77), (64, 200, 8), (7, 3, 1000)])
@pytest.mark.parametrize("majors", [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col"), ("strided", "row")])
def test_matmul_matches_torch(dtype, mnk, majors):
    m, n, k = mnk
    a = operand((m, k), dtype, majors[0])
    b = operand((k, n), dtype, majors[1])
    d = tessera.matmul(a, b)
    assert d.shape == (m, n) and d.dtype == dtype and d.is_contiguous()
    assert rel_err(d, ref_matmul(a, b)) < TOL[dtype]


@gpu
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((4, 96, 64), (4, 64, 80)), ((96, 64), (3, 64, 80)), ((3, 96, 64), (64, 80)), ((1, 96, 64), (5, 64, 80)),
     ((2, 33, 17), (2, 17, 9))],
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_batched_and_broadcast_matmul(a_shape, b_shape, dtype):
    a, b = rand(*a_shape, dtype=dtype), rand(*b_shape, dtype=dtype)
    d = tessera.matmul(a, b)
    ref = ref_matmul(a, b)
    assert d.shape == ref.shape
    assert rel_err(d, ref) < TOL[dtype]


@gpu
def test_batched_transposed_views():
    a = rand(4, 64, 96).transpose(1, 2)  # (4, 96, 64), column-major matrices
    b = rand(64, 4, 80).transpose(0, 1)  # (4, 64, 80), row-major with batch stride 80
    d = tessera.matmul(a, b)
    assert rel_err(d, ref_matmul(a, b)) < TOL[torch.float16]


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_out_dtype_float32_alpha_beta_c(dtype):
    a, b = rand(100, 72, dtype=dtype), rand(72, 130, dtype=dtype)
    c = rand(100, 130, dtype=torch.float32)
    d = tessera.matmul(a, b, c=c, alpha=0.5, beta=-2.0, out_dtype=torch.float32)
    assert d.dtype == torch.float32
    assert rel_err(d, ref_matmul(a, b, c, 0.5, -2.0)) < 1e-3
    c_row = rand(130, dtype=torch.float32)  # broadcast over rows (materialised, then read)
    d = tessera.matmul(a, b, c=c_row, beta=1.0, out_dtype=torch.float32)
    assert rel_err(d, ref_matmul(a, b, c_row.expand(100, 130), 1.0, 1.0)) < 1e-3


@gpu
def test_batched_c_broadcast_and_c_ignored_when_beta_zero():
    a, b = rand(3, 40, 24), rand(3, 24, 56)
    c = rand(40, 56)
    d = tessera.matmul(a, b, c=c, beta=1.0)
    assert rel_err(d, ref_matmul(a, b, c.expand(3, 40, 56), 1.0, 1.0)) < TOL[torch.float16]
    nan_c = torch.full((40, 56), float("nan"), device="cuda", dtype=torch.float16)
    d = tessera.matmul(a, b, c=nan_c, beta=0.0)
    assert torch.isfinite(d).all()


@gpu
def test_out_argument_including_column_major_and_in_place():
    a, b = rand(64, 48), rand(48, 80)
    out = torch.empty(64, 80, device="cuda", dtype=torch.float16)
    assert tessera.matmul(a, b, out=out) is out
    assert rel_err(out, ref_matmul(a, b)) < TOL[torch.float16]
    out_t = torch.empty(80, 64, device="cuda", dtype=torch.float16).t()  # column-major view
    tessera.matmul(a, b, out=out_t)
    assert rel_err(out_t, ref_matmul(a, b)) < TOL[torch.float16]
    out_s = torch.zeros(64, 160, device="cuda", dtype=torch.float16)[:, ::2]  # no row/col-major form
    tessera.matmul(a, b, out=out_s)
    assert rel_err(out_s, ref_matmul(a, b)) < TOL[torch.float16]
    acc = rand(64, 80, dtype=torch.float32)
    expect = ref_matmul(a, b, acc, 1.0, 1.0)
    tessera.matmul(a, b, c=acc, beta=1.0, out=acc)  # in place: D == C
    assert rel_err(acc, expect) < 1e-3


@gpu
def test_unaligned_operands_use_workspace_path():
    base = rand(65 * 70 + 1)
    a = base[1:].view(65, 70)[:, :63]  # base pointer 2 bytes off 16, ld 70, K = 63
    b = rand(63, 33)
    d = tessera.matmul(a, b)
    assert rel_err(d, ref_matmul(a, b)) < TOL[torch.float16]


@gpu
def test_degenerate_sizes():
    a, b = rand(0, 16), rand(16, 8)
    assert tessera.matmul(a, b).shape == (0, 8)
    a, b = rand(16, 0), rand(0, 8)
    d = tessera.matmul(a, b)
    assert d.shape == (16, 8) and (d == 0).all()
    a, b = rand(0, 16, 4), rand(4, 8)
    assert tessera.matmul(a, b).shape == (0, 16, 8)


@gpu
def test_matmul_bad_inputs_raise():
    a = rand(32, 16)
    with pytest.raises(ValueError, match="K must agree"):
        tessera.matmul(a, rand(17, 8))
    with pytest.raises(ValueError, match=r"precision: tf32 and tf32x3 apply to f32 operands"):
        tessera.matmul(a, rand(16, 8), precision="tf32")
    with pytest.raises(ValueError, match=r"precision: must be None, 'tf32', 'tf32x3' or 'fast_accum'"):
        tessera.matmul(a.float(), rand(16, 8).float(), precision="fp64")
    with pytest.raises(ValueError, match=r"b\.dtype: must equal a\.dtype"):
        tessera.matmul(a, rand(16, 8, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="not supported by tessera"):
        tessera.matmul(a.double(), a.double().t())
    with pytest.raises(ValueError, match=r"c\.dtype: must equal d\.dtype"):
        tessera.matmul(a, rand(16, 8), c=rand(32, 8, dtype=torch.float32), beta=1.0)
    with pytest.raises(ValueError, match="out: must have shape"):
        tessera.matmul(a, rand(16, 8), out=rand(8, 32))
    with pytest.raises(ValueError, match="out_dtype"):
        tessera.matmul(a, rand(16, 8), out=rand(32, 8), out_dtype=torch.float32)
    with pytest.raises(ValueError, match="does not broadcast"):
        tessera.matmul(a, rand(16, 8), c=rand(31, 8), beta=1.0)


@gpu
def test_matmul_runs_on_the_current_stream():
    a, b = rand(512, 512), rand(512, 512)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        d = tessera.matmul(a, b)
    s.synchronize()
    assert rel_err(d, ref_matmul(a, b)) < TOL[torch.float16]


@gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_tensors_on_a_non_current_device():
    a, b = rand(64, 32, device="cuda:1"), rand(32, 16, device="cuda:1")
    with torch.cuda.device(0):
        d = tessera.matmul(a, b)
    assert d.device == a.device and rel_err(d, ref_matmul(a, b)) < TOL[torch.float16]


# ------------------------------------------------------------------------------- attention


def attn_mask(sq, sk, causal, window, device):
    """Which keys each query row sees ([Sq, Sk] bool, or None for all): bottom-right aligned, i' = i + Sk - Sq;
    causal keeps j <= i', window (left, right) keeps i' - left <= j <= i' + right (-1: that side unlimited)."""
    left, right = window
    if not causal and left < 0 and right < 0:
        return None
    ip = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    mask = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if causal:
        mask &= j <= ip
    if right >= 0:
        mask &= j <= ip + right
    if left >= 0:
        mask &= j >= ip - left
    return mask


def ref_attention(q, k, v, causal, scale, layout, window=(-1, -1), softcap=0.0):
    """fp32 oracle in bhsd, with the bottom-right causal / window alignment; also the LSE. Without a
    softcap SDPA's math backend with the mask; with one the scores capped by hand (SDPA has no softcap)."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    q, k, v = q.float(), k.float(), v.float()
    hq, hkv = q.shape[1], k.shape[1]
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    mask = attn_mask(sq, sk, causal, window, q.device)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    s = (q @ k.transpose(-1, -2)) * scale
    if softcap > 0.0:
        s = softcap * torch.tanh(s / softcap)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    if softcap > 0.0:
        o = torch.softmax(s, dim=-1) @ v
    else:
        with sdpa_kernel(SDPBackend.MATH):
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    lse = torch.logsumexp(s, dim=-1)
    visible = torch.isfinite(lse)  # rows that see at least one key
    o = torch.where(visible[..., None], o, torch.zeros_like(o))
    if layout == "bshd":
        o = o.transpose(1, 2)
    return o, lse


def same_precision_attention(q, k, v, causal, scale, layout, window=(-1, -1), softcap=0.0):
    """torch SDPA in the inputs' dtype (default backend): the error a same-precision kernel makes. With a
    softcap: the scores in fp32, capped, P rounded to the dtype before P V (what a flash kernel rounds)."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    hq, hkv = q.shape[1], k.shape[1]
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    mask = attn_mask(sq, sk, causal, window, q.device)
    if softcap > 0.0:
        s = (q.float() @ k.float().transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
        s = softcap * torch.tanh(s / softcap)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        o = (torch.softmax(s, dim=-1).to(q.dtype) @ v).to(q.dtype)
    else:
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    o = torch.nan_to_num(o)
    return o.transpose(1, 2) if layout == "bshd" else o


def attn_inputs(b, sq, sk, hq, hkv, d, dtype, layout):
    if layout == "bshd":
        return rand(b, sq, hq, d, dtype=dtype), rand(b, sk, hkv, d, dtype=dtype), rand(b, sk, hkv, d, dtype=dtype)
    return rand(b, hq, sq, d, dtype=dtype), rand(b, hkv, sk, d, dtype=dtype), rand(b, hkv, sk, d, dtype=dtype)


def check_attention(q, k, v, causal, scale, layout, dtype, window=(-1, -1), softcap=0.0):
    o, lse = tessera.attention(q, k, v, causal=causal, scale=scale, return_lse=True, layout=layout, window=window,
                               softcap=softcap)
    ref_o, ref_lse = ref_attention(q, k, v, causal, scale, layout, window, softcap)
    assert o.shape == q.shape and o.dtype == q.dtype and o.is_contiguous()
    assert lse.shape == ref_lse.shape and lse.dtype == torch.float32
    err = rel_err(o, ref_o)
    base = rel_err(same_precision_attention(q, k, v, causal, scale, layout, window, softcap), ref_o)
    assert err < 2 * TOL[dtype], (err, base)
    assert err <= max(2 * base, 1e-3), (err, base)
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    assert (lse[finite] - ref_lse[finite]).abs().max().item() < 1e-2


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("head_dim", [64, 96, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_sdpa(dtype, head_dim, causal):
    q, k, v = attn_inputs(2, 200, 200, 4, 4, head_dim, dtype, "bshd")
    check_attention(q, k, v, causal, None, "bshd", dtype)


@gpu
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize(
    "b, sq, sk, hq, hkv",
    [(1, 77, 300, 8, 2), (2, 300, 77, 4, 1), (3, 1, 333, 6, 3), (1, 129, 129, 2, 2), (2, 64, 512, 16, 16)],
)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_gqa_seqlens_layouts(layout, b, sq, sk, hq, hkv, causal):
    q, k, v = attn_inputs(b, sq, sk, hq, hkv, 128, torch.bfloat16, layout)
    check_attention(q, k, v, causal, 0.1, layout, torch.bfloat16)


@gpu
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("b, sq, sk, hq, hkv, d", [(1, 1, 9000, 32, 8, 128), (3, 4, 2000, 8, 8, 64),
                                                   (2, 16, 700, 12, 1, 96), (1, 2, 40000, 4, 2, 256)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_decode_shapes(layout, b, sq, sk, hq, hkv, d, causal):
    # seqlen_q <= 16: the decode family (split keys through the cached workspace), eager and op.
    q, k, v = attn_inputs(b, sq, sk, hq, hkv, d, torch.bfloat16, layout)
    check_attention(q, k, v, causal, None, layout, torch.bfloat16)
    o_op, _ = torch.ops.tessera.attention(q, k, v, causal, 0.0, False, layout)  # the op's own workspace
    torch.testing.assert_close(o_op, tessera.attention(q, k, v, causal=causal, layout=layout), rtol=0, atol=0)


# (window, softcap) cases: left only, right only, both, the diagonal, a sliding causal window, a window
# wider than the sequences, a softcap alone (30: barely bends the scores; 2: saturates them).
_LOCAL = [((32, -1), 0.0), ((-1, 16), 0.0), ((50, 20), 30.0), ((0, 0), 0.0), ((100, 0), 2.0), ((5000, 5000), 0.0),
          ((-1, -1), 30.0), ((-1, -1), 2.0), ((7, 3), 2.0)]


@gpu
@pytest.mark.parametrize("window, softcap", _LOCAL)
@pytest.mark.parametrize("b, sq, sk, hq, hkv, d, dtype, layout",
                         [(2, 200, 200, 4, 4, 64, torch.float16, "bshd"), (1, 77, 300, 8, 2, 128, torch.bfloat16, "bhsd"),
                          (2, 300, 77, 4, 1, 96, torch.bfloat16, "bshd"), (1, 129, 1000, 2, 2, 256, torch.float16, "bhsd")])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_window_softcap_match_reference(window, softcap, b, sq, sk, hq, hkv, d, dtype, layout, causal):
    q, k, v = attn_inputs(b, sq, sk, hq, hkv, d, dtype, layout)
    check_attention(q, k, v, causal, None, layout, dtype, window, softcap)


@gpu
@pytest.mark.parametrize("window, softcap", [((8, -1), 0.0), ((0, 0), 30.0), ((300, 2), 2.0), ((-1, -1), 30.0)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_window_softcap_decode_shapes(window, softcap, causal):
    # seqlen_q <= 16: the decode family, eager and through the op (its own workspace).
    q, k, v = attn_inputs(2, 3, 2000, 8, 2, 128, torch.bfloat16, "bshd")
    check_attention(q, k, v, causal, None, "bshd", torch.bfloat16, window, softcap)
    left, right = window
    o_op, _ = torch.ops.tessera.attention(q, k, v, causal, 0.0, False, "bshd", 0, left, right, softcap)
    o = tessera.attention(q, k, v, causal=causal, window=window, softcap=softcap)
    torch.testing.assert_close(o_op, o, rtol=0, atol=0)


@gpu
def test_attention_decode_in_a_cuda_graph():
    q, k, v = attn_inputs(1, 1, 20000, 16, 2, 128, torch.float16, "bshd")
    tessera.attention(q, k, v)  # outside the capture first: the eager workspace cache is set up
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        out = tessera.attention(q, k, v)
    q.copy_(attn_inputs(1, 1, 20000, 16, 2, 128, torch.float16, "bshd")[0])  # new inputs, same buffers
    expect = tessera.attention(q, k, v)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expect, rtol=0, atol=0)


@gpu
def test_attention_strided_inputs_from_packed_qkv():
    qkv = rand(2, 150, 3, 4, 64)  # [B, S, 3, H, D]: q, k, v are strided views (no copies)
    q, k, v = qkv.unbind(2)
    check_attention(q, k, v, True, None, "bshd", torch.float16)
    o = tessera.attention(q, k, v)
    assert o.is_contiguous()
    q_nc = rand(1, 64, 2, 128).transpose(-1, -2).contiguous().transpose(-1, -2)  # head dim stride != 1
    check_attention(q_nc, q_nc, q_nc, False, None, "bshd", torch.float16)


@gpu
def test_attention_without_lse_returns_a_tensor():
    q, k, v = attn_inputs(1, 64, 64, 2, 2, 64, torch.float16, "bshd")
    o = tessera.attention(q, k, v)
    assert isinstance(o, torch.Tensor) and o.shape == q.shape


@gpu
def test_attention_bad_inputs_raise():
    q, k, v = attn_inputs(1, 64, 64, 4, 4, 64, torch.float16, "bshd")
    with pytest.raises(ValueError, match="head_dim: 80 is not supported"):
        x = rand(1, 64, 4, 80)
        tessera.attention(x, x, x)
    with pytest.raises(ValueError, match="heads_kv: must divide heads_q"):
        kk = rand(1, 64, 3, 64)
        tessera.attention(q, kk, kk)
    with pytest.raises(ValueError, match="dtype"):
        tessera.attention(q, k.bfloat16(), v)
    with pytest.raises(ValueError, match="v: shape"):
        tessera.attention(q, k, v[:, :32])
    with pytest.raises(ValueError, match="k: batch and head_dim"):
        tessera.attention(q, rand(2, 64, 4, 64), rand(2, 64, 4, 64))
    with pytest.raises(ValueError, match="dtype: must be f16 or bf16"):
        tessera.attention(q.float(), k.float(), v.float())


# ------------------------------------------------------------------ fp32 operands: tf32, 3xTF32


@gpu
@pytest.mark.parametrize("m, n, k", [(256, 384, 512), (97, 131, 203), (1, 64, 64), (1024, 1024, 4096)])
@pytest.mark.parametrize("majors", ["tn", "nn", "nt", "tt"])
def test_matmul_f32_tf32_and_tf32x3(m, n, k, majors):
    """fp32 operands of every major and ragged extents: tf32 within tf32's rounding (2^-11 per operand),
    3xTF32 within 1e-5 of an fp64 reference (the issue's bar), both against fresh random inputs."""
    torch.manual_seed(m * 7 + n * 3 + k)
    a = torch.randn(m, k, device="cuda") if majors[0] == "n" else torch.randn(k, m, device="cuda").t()
    b = torch.randn(k, n, device="cuda") if majors[1] == "n" else torch.randn(n, k, device="cuda").t()
    ref = a.double() @ b.double()
    tf32 = tessera.matmul(a, b)
    assert tf32.dtype == torch.float32 and tf32.shape == (m, n)
    assert rel_err(tf32, ref) < 2e-3
    assert rel_err(tessera.matmul(a, b, precision="tf32"), ref) < 2e-3
    x3 = tessera.matmul(a, b, precision="tf32x3")
    err = rel_err(x3, ref)
    assert err < 1e-5, err
    # and visibly better than tf32 (a split that did nothing would not be)
    assert err < rel_err(tf32, ref) / 20


@gpu
def test_matmul_f32_epilogue_batch_and_out():
    torch.manual_seed(5)
    a, b = torch.randn(3, 70, 96, device="cuda"), torch.randn(96, 40, device="cuda")
    bias = torch.randn(40, device="cuda")
    c = torch.randn(3, 70, 40, device="cuda")
    ref = torch.nn.functional.silu(0.5 * (a.double() @ b.double()) + 2.0 * c.double() + bias.double())
    got = tessera.matmul(a, b, c=c, alpha=0.5, beta=2.0, bias=bias, activation="silu", precision="tf32x3")
    assert rel_err(got, ref) < 1e-5
    out = torch.full((3, 70, 40), float("nan"), dtype=torch.bfloat16, device="cuda")
    tessera.matmul(a, b, out=out)
    assert rel_err(out, a.double() @ b.double()) < 1e-2
    # the op path (traced / compiled calls) carries precision too
    got = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0, 2)
    assert rel_err(got, a.double() @ b.double()) < 1e-5


# ------------------------------------------------------------------ int8 operands: exact and dequantised


def rand_i8(*shape, device="cuda"):
    """Fresh int8 values over the whole range [-128, 127]."""
    return torch.randint(-128, 128, shape, dtype=torch.int8, device=device)


def i8_operand(shape, major):
    """An int8 tensor whose last two modes are row-major, column-major (a transposed view) or neither
    (every other element: the wrapper copies it)."""
    if major == "row":
        return rand_i8(*shape)
    if major == "col":
        return rand_i8(*shape[:-2], shape[-1], shape[-2]).transpose(-1, -2)
    return rand_i8(*shape[:-2], 2 * shape[-2], 2 * shape[-1])[..., ::2, ::2]


def exact_i8(a, b):
    """The exact sums as int64: through fp64, which holds every product (<= 2^14) and every sum of K <= 2^38
    of them exactly (integers below 2^53)."""
    return torch.matmul(a.double(), b.double()).long()


def check_dequantised(out, ref, dtype, atol_frac=0.0):
    """out (dtype) against an fp64 reference: the epilogue computes in fp32 and rounds once, so each element is
    within a rounding of the dtype (2^-9 relative for bf16, 2^-11 for fp16; absolute below its smallest
    normal) plus fp32's few ulps; atol_frac (of the largest |ref|) allows for fp32 cancellation where a
    bias or c is added."""
    rtol = {torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10, torch.float32: 2e-6}[dtype]
    tiny = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps  # the subnormals' spacing (fp16: 2^-24)
    assert out.dtype == dtype and out.shape == ref.shape
    err = (out.double() - ref).abs()
    bound = rtol * ref.abs() + atol_frac * ref.abs().max() + tiny
    assert torch.isfinite(out).all()
    assert (err <= bound).all(), f"max excess {(err - bound).max().item()} (max err {err.max().item()})"


I8_MAJORS = [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col"), ("strided", "row")]


@gpu
@pytest.mark.parametrize("mnk", [(1, 1, 1), (128, 128, 64), (257, 129, 77), (64, 200, 8), (7, 3, 1000), (33, 17, 5),
                                 (256, 384, 4096), (97, 131, 4096)])
@pytest.mark.parametrize("majors", I8_MAJORS)
def test_matmul_int8_exact(mnk, majors):
    """int8 a and b give the exact int32 sums (torch._int_mm), for every major and ragged extents."""
    m, n, k = mnk
    a, b = i8_operand((m, k), majors[0]), i8_operand((k, n), majors[1])
    ref = exact_i8(a, b)
    d = tessera.matmul(a, b)
    assert d.dtype == torch.int32 and d.shape == (m, n) and d.is_contiguous()
    assert torch.equal(d.long(), ref)
    # out= with a poisoned output, row- and column-major
    out = torch.full((m, n), -123456789, dtype=torch.int32, device="cuda")
    assert tessera.matmul(a, b, out=out, out_dtype=torch.int32) is out
    assert torch.equal(out.long(), ref)
    out_t = torch.full((n, m), 0x7F7F7F7F, dtype=torch.int32, device="cuda").t()
    tessera.matmul(a, b, out=out_t)
    assert torch.equal(out_t.long(), ref)
    try:
        ref_int_mm = torch._int_mm(a, b)  # where torch's own int8 GEMM takes the shape and layout
    except RuntimeError:
        return
    assert torch.equal(d, ref_int_mm)


@gpu
def test_matmul_int8_extremes_and_every_small_k():
    """K = 1..33 (every alignment of an int8 row: 16-byte rows only at K = 16 and 32) on ragged M and N,
    and the largest sums: -128 * -128 * K with K = 4096 (2^26), both signs."""
    for k in range(1, 34):
        for majors in (("row", "row"), ("col", "col"), ("row", "col")):
            a, b = i8_operand((19, k), majors[0]), i8_operand((k, 23), majors[1])
            out = torch.full((19, 23), -1, dtype=torch.int32, device="cuda")
            tessera.matmul(a, b, out=out)
            assert torch.equal(out.long(), exact_i8(a, b)), (k, majors)
    k = 4096
    lo = torch.full((40, k), -128, dtype=torch.int8, device="cuda")
    hi = torch.full((k, 24), 127, dtype=torch.int8, device="cuda")
    assert (tessera.matmul(lo, lo.t().contiguous()) == 128 * 128 * k).all()
    assert (tessera.matmul(lo, hi) == -128 * 127 * k).all()
    mixed = torch.where(torch.rand(k, 24, device="cuda") < 0.5, -128, 127).to(torch.int8)
    assert torch.equal(tessera.matmul(lo, mixed).long(), exact_i8(lo, mixed))


@gpu
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((4, 96, 64), (4, 64, 80)), ((96, 64), (3, 64, 80)), ((3, 96, 64), (64, 80)), ((1, 96, 64), (5, 64, 80)),
     ((2, 33, 17), (2, 17, 9)), ((3, 70, 4096), (3, 4096, 40))],
)
def test_matmul_int8_batched_and_broadcast(a_shape, b_shape):
    a, b = rand_i8(*a_shape), rand_i8(*b_shape)
    d = tessera.matmul(a, b)
    ref = exact_i8(a, b)
    assert d.dtype == torch.int32 and d.shape == ref.shape and torch.equal(d.long(), ref)
    sa = torch.rand(a_shape[-2], 1, device="cuda") + 0.5
    sb = torch.rand(1, b_shape[-1], device="cuda") * 1e-3
    check_dequantised(tessera.matmul(a, b, scale_a=sa, scale_b=sb), ref.double() * sa.double() * sb.double(),
                      torch.bfloat16)


@gpu
def test_matmul_int8_batched_transposed_views():
    a = rand_i8(4, 64, 96).transpose(1, 2)  # (4, 96, 64), column-major matrices
    b = rand_i8(64, 4, 80).transpose(0, 1)  # (4, 64, 80), row-major with batch stride 80
    assert torch.equal(tessera.matmul(a, b).long(), exact_i8(a, b))


@gpu
@pytest.mark.parametrize("mnk", [(128, 128, 64), (257, 129, 77), (1, 64, 33), (33, 17, 5), (97, 131, 4096)])
@pytest.mark.parametrize("majors", I8_MAJORS)
@pytest.mark.parametrize("mode", ["tensor", "rowwise", "rowwise_flat", "mixed"])
def test_matmul_int8_dequantised(mnk, majors, mode):
    """act(alpha * scale_a * scale_b * (a @ b)) in bfloat16 (default), float16 and float32, per tensor and
    row-wise (and a single scale_a beside a row-wise scale_b), against the exact sums in fp64."""
    m, n, k = mnk
    a, b = i8_operand((m, k), majors[0]), i8_operand((k, n), majors[1])
    exact = exact_i8(a, b).double()
    if mode == "tensor":
        sa, sb = torch.rand(1, device="cuda") + 0.5, torch.rand((), device="cuda") * 1e-3
    elif mode == "rowwise":
        sa, sb = torch.rand(m, 1, device="cuda") + 0.5, torch.rand(1, n, device="cuda") * 1e-3
    elif mode == "rowwise_flat":
        sa, sb = torch.rand(m, device="cuda") + 0.5, torch.rand(n, device="cuda") * 1e-3
    else:
        sa, sb = torch.rand(1, 1, device="cuda") + 0.5, torch.rand(n, device="cuda") * 1e-3
    scale = sa.double().reshape(-1, 1) * sb.double().reshape(1, -1)
    ref = exact * scale
    d = tessera.matmul(a, b, scale_a=sa, scale_b=sb)
    check_dequantised(d, ref, torch.bfloat16)
    for dtype in (torch.float16, torch.float32, torch.bfloat16):
        out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        assert tessera.matmul(a, b, scale_a=sa, scale_b=sb, out=out) is out
        check_dequantised(out, ref, dtype)
        check_dequantised(tessera.matmul(a, b, scale_a=sa, scale_b=sb, alpha=-0.25, out_dtype=dtype), -0.25 * ref,
                          dtype)
    # a column-major output (the library computes D^T: scale_a then runs along its columns)
    out_t = torch.full((n, m), float("nan"), dtype=torch.bfloat16, device="cuda").t()
    tessera.matmul(a, b, scale_a=sa, scale_b=sb, out=out_t)
    check_dequantised(out_t, ref, torch.bfloat16)


@gpu
@pytest.mark.parametrize("activation", [None, "relu", "gelu", "silu"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_matmul_int8_dequantised_bias_activation_and_c(activation, dtype):
    act = {None: lambda x: x, "relu": torch.relu, "gelu": F.gelu, "silu": F.silu}[activation]
    m, n, k = 300, 136, 200
    a, b = rand_i8(m, k), i8_operand((k, n), "col")
    sa, sb = torch.rand(m, 1, device="cuda") * 1e-2, torch.rand(1, n, device="cuda") * 1e-2
    bias = rand(n, dtype=dtype)
    scaled = exact_i8(a, b).double() * sa.double() * sb.double()
    ref = act(scaled + bias.double())
    got = tessera.matmul(a, b, scale_a=sa, scale_b=sb, bias=bias, activation=activation, out_dtype=dtype)
    check_dequantised(got, ref, dtype, atol_frac=1e-5)
    # a bias of another dtype is converted to the output's; batched, with beta * c, one bias for every batch
    a3 = rand_i8(3, m, k)
    c = rand(3, m, n, dtype=dtype)
    ref3 = act(0.5 * exact_i8(a3, b).double() * sa.double() * sb.double() - 1.25 * c.double() + bias.float().double())
    out3 = torch.full((3, m, n), float("nan"), dtype=dtype, device="cuda")
    tessera.matmul(a3, b, c=c, alpha=0.5, beta=-1.25, bias=bias.float(), activation=activation, scale_a=sa,
                   scale_b=sb, out=out3)
    check_dequantised(out3, ref3, dtype, atol_frac=1e-5 if dtype == torch.float32 else 2 ** -9)


@gpu
def test_matmul_int8_strided_scales_and_degenerate_sizes():
    m, n, k = 70, 50, 64
    a, b = rand_i8(m, k), rand_i8(k, n)
    big_a, big_b = torch.rand(m, 3, device="cuda") + 0.5, torch.rand(2, n, device="cuda") + 0.5
    sa, sb = big_a[:, 1:2], big_b[1]  # (M, 1) with stride 3, and (N,): made contiguous by the wrapper
    ref = exact_i8(a, b).double() * sa.double() * sb.double()
    check_dequantised(tessera.matmul(a, b, scale_a=sa, scale_b=sb), ref, torch.bfloat16)
    assert tessera.matmul(rand_i8(0, 16), rand_i8(16, 8)).shape == (0, 8)
    d = tessera.matmul(rand_i8(16, 0), rand_i8(0, 8))
    assert d.dtype == torch.int32 and d.shape == (16, 8) and (d == 0).all()
    one = torch.ones(1, device="cuda")
    d = tessera.matmul(rand_i8(16, 0), rand_i8(0, 8), scale_a=one, scale_b=one)
    assert d.dtype == torch.bfloat16 and (d == 0).all()


@gpu
def test_matmul_int8_bad_inputs_raise():
    a, b = rand_i8(32, 16), rand_i8(16, 8)
    sa, sb = torch.ones(32, 1, device="cuda"), torch.ones(1, 8, device="cuda")
    cases = [
        (dict(alpha=2.0), r"alpha: must be 1 for an s32 D"),
        (dict(bias=torch.zeros(8, dtype=torch.int32, device="cuda")), r"bias_mode: an s32 D takes no bias"),
        (dict(activation="relu"), r"activation: an s32 D takes none"),
        (dict(c=torch.zeros(32, 8, dtype=torch.int32, device="cuda"), beta=1.0), r"beta: must be 0 for an s32 D"),
        (dict(precision="tf32"), r"precision: tf32 and tf32x3 apply to f32 operands; a and b are s8"),
        (dict(out_dtype=torch.float16), r"out_dtype: int8 operands without scales give the exact int32 sums"),
        (dict(scale_a=sa), r"scale_b: missing"),
        (dict(scale_a=sa.cpu(), scale_b=sb), r"scale_a: must be a CUDA tensor"),
        (dict(scale_a=sa, scale_b=sb.double()), r"scale_b: must be float32"),
        (dict(scale_a=sa.t(), scale_b=sb), r"scale_a: must have one element .* got shape \(1, 32\)"),
        (dict(scale_a=sa, scale_b=sb, out_dtype=torch.int32), r"out_dtype: int8 operands dequantised"),
        (dict(out=torch.empty(32, 8, dtype=torch.int8, device="cuda")), r"out\.dtype: int8 operands without scales"),
        (dict(scale_a=sa, scale_b=sb, c=rand(32, 8), beta=1.0), r"c\.dtype: must equal d\.dtype"),
    ]
    for kwargs, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            tessera.matmul(a, b, **kwargs)
    with pytest.raises(ValueError, match=r"b\.dtype: must equal a\.dtype \(torch\.int8\), got torch\.float16"):
        tessera.matmul(a, rand(16, 8))
    with pytest.raises(ValueError,
                       match=r"scale_a, scale_b: dequantise int8 or fp8 operands; a and b are torch\.float16"):
        tessera.matmul(rand(32, 16), rand(16, 8), scale_a=sa, scale_b=sb)
    with pytest.raises(TypeError, match=r"scale_b: must be a float32 CUDA tensor"):
        tessera.matmul(a, b, scale_a=sa, scale_b=2.0)
    with pytest.raises(ValueError, match="K must agree"):
        tessera.matmul(a, rand_i8(17, 8))


@gpu
def test_matmul_int8_ops_opcheck_compile_and_graphs():
    a, b = rand_i8(64, 96), i8_operand((96, 48), "col")
    sa, sb = torch.rand(64, 1, device="cuda") + 0.5, torch.rand(1, 48, device="cuda") * 1e-2
    bias = rand(48, dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.tessera.matmul.default, (a, b, None, 1.0, 0.0, None))
    torch.library.opcheck(torch.ops.tessera.matmul.default, (a, b, None, 1.0, 0.0, None, bias, 1, 0, 0, sa, sb))
    torch.library.opcheck(torch.ops.tessera.matmul.default,
                          (a, b, None, 1.0, 0.0, torch.float32, None, 0, 0, 0, sa[:1, :1], sb[:1, :1]))
    torch.library.opcheck(torch.ops.tessera.matmul_out.default,
                          (a, b, None, 1.0, 0.0, torch.empty(64, 48, dtype=torch.int32, device="cuda")))
    torch.library.opcheck(torch.ops.tessera.matmul_out.default,
                          (a, b, None, 1.0, 0.0, torch.empty(64, 48, dtype=torch.float16, device="cuda"), None, 0, 0,
                           0, sa, sb))

    torch._dynamo.reset()

    def f(a, b, sa, sb, bias):
        exact = tessera.matmul(a, b)
        deq = tessera.matmul(a, b, scale_a=sa, scale_b=sb, bias=bias, activation="relu")
        return exact, exact.sum(-1), deq * 2, tessera.matmul(a, b, scale_a=sa[:1], scale_b=sb[0, :1],
                                                               out_dtype=torch.float32)

    eager = f(a, b, sa, sb, bias)
    compiled = torch.compile(f, fullgraph=True)(a, b, sa, sb, bias)
    assert eager[0].dtype == compiled[0].dtype == torch.int32 and eager[2].dtype == torch.bfloat16
    for x, y in zip(eager, compiled):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    assert torch.equal(eager[0].long(), exact_i8(a, b))

    # CUDA graphs: capture both kinds (and an unaligned K, copied into the workspace), replay on new inputs
    ua, ub = rand_i8(65, 63), rand_i8(63, 40)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the capture
        tessera.matmul(a, b), tessera.matmul(a, b, scale_a=sa, scale_b=sb), tessera.matmul(ua, ub)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        d = tessera.matmul(a, b)
        q = tessera.matmul(a, b, scale_a=sa, scale_b=sb)
        ud = tessera.matmul(ua, ub)
        mixed = tessera.matmul(a, b, scale_a=sa[:1, :1], scale_b=sb)  # the general path's broadcast copy
    for _ in range(2):
        a.copy_(rand_i8(64, 96))
        ua.copy_(rand_i8(65, 63))
        sa.copy_(torch.rand(64, 1, device="cuda") + 0.5)
        g.replay()
        torch.cuda.synchronize()
        exact = exact_i8(a, b)
        assert torch.equal(d.long(), exact)
        assert torch.equal(ud.long(), exact_i8(ua, ub))
        check_dequantised(q, exact.double() * sa.double() * sb.double(), torch.bfloat16)
        check_dequantised(mixed, exact.double() * sa[0, 0].double() * sb.double(), torch.bfloat16)


# ------------------------------------------------------------------ fp8 operands (Hopper)


def _hopper_reason():
    if _GPU_REASON is not None:
        return _GPU_REASON
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (9, 0):
        return f"tessera's fp8 GEMM needs sm_90 (Hopper), this GPU is sm_{major}{minor}"
    return None


_HOPPER_REASON = _hopper_reason()
hopper = pytest.mark.skipif(_HOPPER_REASON is not None, reason=_HOPPER_REASON or "")


def rand_fp8(*shape, dtype=torch.float8_e4m3fn, device="cuda"):
    """Fresh fp8 values: standard normal samples rounded to the fp8 type."""
    return torch.randn(*shape, device=device).to(dtype)


def fp8_operand(shape, major, dtype):
    """An fp8 tensor whose last two modes are row-major, column-major (a transposed view) or neither
    (every other element: the wrapper copies it)."""
    if major == "row":
        return rand_fp8(*shape, dtype=dtype)
    if major == "col":
        return rand_fp8(*shape[:-2], shape[-1], shape[-2], dtype=dtype).transpose(-1, -2)
    return rand_fp8(*shape[:-2], 2 * shape[-2], 2 * shape[-1], dtype=dtype)[..., ::2, ::2]


def fp8_scales(mode, m, n):
    """(scale_a, scale_b) of a mode: None (no scales), per tensor or row-wise (also flat, and a single
    scale_a beside a row-wise scale_b), in [0.5, 1.5)."""
    def r(*shape):
        return torch.rand(*shape, device="cuda") + 0.5

    return {"none": lambda: (None, None), "tensor": lambda: (r(()), r(1)), "rowwise": lambda: (r(m, 1), r(1, n)),
            "rowwise_flat": lambda: (r(m), r(n)), "mixed": lambda: (r(1, 1), r(n))}[mode]()


def fp8_reference(a, b, scale_a=None, scale_b=None):
    """(ref, absref) in fp64: the scaled sums and the scaled sums of |products|. fp8 products are exact in
    fp64, and so are their sums at these K (e4m3's products span 2^-18..2^18, e5m2's fewer bits)."""
    a64, b64 = a.float().double(), b.float().double()
    ref, absref = torch.matmul(a64, b64), torch.matmul(a64.abs(), b64.abs())
    if scale_a is not None:
        s = scale_a.double().reshape(-1, 1) * scale_b.double().reshape(1, -1)
        ref, absref = ref * s, absref * s.abs()
    return ref, absref


def fp8_acc_tol(k, fast):
    """Accumulation error, as a fraction of the sums of |products|. Hopper's fp8 MMA keeps about 14 bits
    of its running sum, each instruction (K = 32) rounding it by up to 2^-13 of the sums so far; tessera
    promotes into fp32 every 128 K (4 instructions: 2^-11 at most), fast_accum only at the end (K / 32
    instructions). Four times those here (twice for a 13-bit sum). A dropped or repeated product still
    shows: one product is about 1 / K of the sums of |products|."""
    return max(2.0 ** -9, math.ceil(k / 32) * 2.0 ** -11) if fast else 2.0 ** -9


def check_fp8(out, ref, absref, dtype, acc, atol_frac=0.0):
    """out (dtype) against ref (fp64): within two roundings of dtype (2^-7 relative for bf16, 2^-10 for
    fp16, 2^-22 for fp32; subnormal spacing absolute), plus acc * absref for the accumulation and
    atol_frac of the largest |ref| for fp32 cancellation where a bias or c is added."""
    rtol = {torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10, torch.float32: 2 ** -22}[dtype]
    tiny = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps
    assert out.dtype == dtype and out.shape == ref.shape
    assert torch.isfinite(out).all()
    err = (out.double() - ref).abs()
    bound = rtol * ref.abs() + acc * absref + atol_frac * ref.abs().max() + tiny
    assert (err <= bound).all(), f"max excess {(err - bound).max().item()} (max err {err.max().item()})"


def scaled_mm(a, b, scale_a, scale_b, out_dtype, fast=False):
    """torch._scaled_mm where this torch takes the call (a row-major, b column-major, K and N multiples of
    16, its dtypes and scale modes), else None."""
    one = torch.ones((), device="cuda")
    try:
        r = torch._scaled_mm(a, b, scale_a=one if scale_a is None else scale_a,
                             scale_b=one if scale_b is None else scale_b, out_dtype=out_dtype, use_fast_accum=fast)
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        return None
    return r[0] if isinstance(r, tuple) else r  # torch < 2.4 returned (out, amax)


FP8_MAJORS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col"), ("strided", "col"), ("row", "strided")]


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
@pytest.mark.parametrize("mnk", [(128, 128, 64), (64, 256, 512), (100, 128, 256), (256, 512, 4096)])
@pytest.mark.parametrize("mode", ["none", "tensor", "rowwise"])
@pytest.mark.parametrize("fast", [False, True])
def test_matmul_fp8_against_scaled_mm_and_fp64(fp8, mnk, mode, fast):
    """a row-major, b column-major (torch._scaled_mm's layout): tessera against the exact sums in fp64 and
    against torch._scaled_mm where this torch takes the call (e5m2 x e5m2 and row-wise scales it may
    not), in bfloat16 (the default), float16 and float32."""
    m, n, k = mnk
    a, b = fp8_operand((m, k), "row", fp8), fp8_operand((k, n), "col", fp8)
    sa, sb = fp8_scales(mode, m, n)
    ref, absref = fp8_reference(a, b, sa, sb)
    acc = fp8_acc_tol(k, fast)
    precision = "fast_accum" if fast else None
    d = tessera.matmul(a, b, scale_a=sa, scale_b=sb, precision=precision)
    check_fp8(d, ref, absref, torch.bfloat16, acc)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        out = tessera.matmul(a, b, scale_a=sa, scale_b=sb, precision=precision, out_dtype=dtype)
        check_fp8(out, ref, absref, dtype, acc)
        theirs = scaled_mm(a, b, sa, sb, dtype, fast)
        if theirs is not None:  # both within their accumulation error of the exact sums, so of each other
            check_fp8(out, theirs.double(), absref, dtype, 2 * acc)


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
def test_matmul_fp8_every_small_k_on_ragged_m_and_n(fp8):
    """K = 1..33 (every alignment of an fp8 row: 16-byte rows only at K = 16 and 32) on M and N that are
    not multiples of 16, for each major of a and b, with and without scales."""
    for k in range(1, 34):
        for majors in (("row", "col"), ("row", "row"), ("col", "col"), ("col", "row")):
            a, b = fp8_operand((19, k), majors[0], fp8), fp8_operand((k, 23), majors[1], fp8)
            ref, absref = fp8_reference(a, b)
            out = torch.full((19, 23), float("nan"), dtype=torch.float32, device="cuda")
            tessera.matmul(a, b, out=out)
            check_fp8(out, ref, absref, torch.float32, fp8_acc_tol(k, False))
            sa, sb = fp8_scales("rowwise" if k % 2 else "tensor", 19, 23)
            ref, absref = fp8_reference(a, b, sa, sb)
            check_fp8(tessera.matmul(a, b, scale_a=sa, scale_b=sb), ref, absref, torch.bfloat16,
                      fp8_acc_tol(k, False))


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
@pytest.mark.parametrize("mnk", [(257, 129, 77), (33, 17, 5), (1, 64, 33), (97, 131, 1000), (130, 250, 4100)])
@pytest.mark.parametrize("majors", FP8_MAJORS)
@pytest.mark.parametrize("mode", ["none", "rowwise_flat", "mixed"])
def test_matmul_fp8_majors_and_ragged_shapes(fp8, mnk, majors, mode):
    """Every major of a and b (transposed views read in place or copied K-major by the library, other
    strides copied by the wrapper) on ragged extents, into row- and column-major outputs."""
    m, n, k = mnk
    a, b = fp8_operand((m, k), majors[0], fp8), fp8_operand((k, n), majors[1], fp8)
    sa, sb = fp8_scales(mode, m, n)
    ref, absref = fp8_reference(a, b, sa, sb)
    acc = fp8_acc_tol(k, False)
    check_fp8(tessera.matmul(a, b, scale_a=sa, scale_b=sb), ref, absref, torch.bfloat16, acc)
    out = torch.full((m, n), float("nan"), dtype=torch.float32, device="cuda")
    assert tessera.matmul(a, b, scale_a=sa, scale_b=sb, out=out) is out
    check_fp8(out, ref, absref, torch.float32, acc)
    out_t = torch.full((n, m), float("nan"), dtype=torch.float16, device="cuda").t()  # column-major D
    tessera.matmul(a, b, scale_a=sa, scale_b=sb, out=out_t, alpha=-0.5)
    check_fp8(out_t, -0.5 * ref, 0.5 * absref, torch.float16, acc)


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((4, 96, 64), (4, 64, 80)), ((96, 64), (3, 64, 80)), ((3, 96, 64), (64, 80)), ((1, 96, 64), (5, 64, 80)),
     ((2, 33, 17), (2, 17, 9)), ((3, 70, 1024), (3, 1024, 40))],
)
def test_matmul_fp8_batched_and_broadcast(fp8, a_shape, b_shape):
    a, b = rand_fp8(*a_shape, dtype=fp8), rand_fp8(*b_shape, dtype=fp8)
    k = a_shape[-1]
    ref, absref = fp8_reference(a, b)
    check_fp8(tessera.matmul(a, b), ref, absref, torch.bfloat16, fp8_acc_tol(k, False))
    check_fp8(tessera.matmul(a, b, precision="fast_accum", out_dtype=torch.float32), ref, absref, torch.float32,
              fp8_acc_tol(k, True))
    sa, sb = fp8_scales("rowwise", a_shape[-2], b_shape[-1])
    ref, absref = fp8_reference(a, b, sa, sb)
    check_fp8(tessera.matmul(a, b, scale_a=sa, scale_b=sb), ref, absref, torch.bfloat16, fp8_acc_tol(k, False))
    # transposed batched views: column-major matrices, and row-major ones with a batch stride of N
    at = rand_fp8(a_shape[-1], 4, a_shape[-2], dtype=fp8).permute(1, 2, 0)  # (4, M, K), column-major
    bt = rand_fp8(b_shape[-2], 4, b_shape[-1], dtype=fp8).transpose(0, 1)  # (4, K, N), row-major
    ref, absref = fp8_reference(at, bt)
    check_fp8(tessera.matmul(at, bt), ref, absref, torch.bfloat16, fp8_acc_tol(k, False))


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
def test_matmul_fp8_long_k_default_and_fast_accum(fp8):
    """K = 8192 of positive values, where every rounding of a running sum errs the same way: the default
    (sums promoted to fp32 every 128 K) stays within 2^-9 of the exact sums (the tensor cores' own sum
    along all of K errs by about 2^-7 here); fast_accum within its looser bound; both as
    torch._scaled_mm where it takes the call."""
    m, n, k = 128, 256, 8192
    a = torch.rand(m, k, device="cuda").to(fp8)
    b = torch.rand(n, k, device="cuda").to(fp8).t()
    ref, absref = fp8_reference(a, b)
    for fast in (False, True):
        out = tessera.matmul(a, b, out_dtype=torch.float32, precision="fast_accum" if fast else None)
        check_fp8(out, ref, absref, torch.float32, fp8_acc_tol(k, fast))
        theirs = scaled_mm(a, b, None, None, torch.float32, fast)
        if theirs is not None:
            check_fp8(out, theirs.double(), absref, torch.float32, 2 * fp8_acc_tol(k, fast))
    # the precision reaches the op path too (traced and compiled calls)
    op = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, torch.float32, None, 0, 0, FAST_ACCUM)
    check_fp8(op, ref, absref, torch.float32, fp8_acc_tol(k, True))


def check_fp8_bias_activation_and_c(fp8, activation, dtype, k, scales, reference):
    """A (300, k) fp8 `fp8` times a column-major B (k, 136), scaled by scales(m, n, k) -> (scale_a, scale_b),
    with a bias and the activation into dtype, against reference(a, b, scale_a, scale_b) -> (ref, absref); then
    batched, alpha and beta * c, one bias for every batch, into out=. Returns (a, b, bias) for more checks."""
    act = _TORCH_ACTIVATIONS[activation]
    m, n = 300, 136
    a, b = rand_fp8(m, k, dtype=fp8), fp8_operand((k, n), "col", fp8)
    sa, sb = scales(m, n, k)
    bias = rand(n, dtype=dtype)
    acc = fp8_acc_tol(k, False)
    scaled, absref = reference(a, b, sa, sb)
    got = tessera.matmul(a, b, scale_a=sa, scale_b=sb, bias=bias, activation=activation, out_dtype=dtype)
    check_fp8(got, act(scaled + bias.double()), absref, dtype, acc, atol_frac=2 ** -20)
    # batched, alpha and beta * c, one bias for every batch, into out=
    a3 = rand_fp8(3, m, k, dtype=fp8)
    c = rand(3, m, n, dtype=dtype)
    s3, abs3 = reference(a3, b, sa, sb)
    ref3 = act(0.5 * s3 - 1.25 * c.double() + bias.double())
    out3 = torch.full((3, m, n), float("nan"), dtype=dtype, device="cuda")
    tessera.matmul(a3, b, c=c, alpha=0.5, beta=-1.25, bias=bias, activation=activation, scale_a=sa, scale_b=sb,
                   out=out3)
    check_fp8(out3, ref3, 0.5 * abs3, dtype, acc, atol_frac=2 ** -20 if dtype == torch.float32 else 2 ** -9)
    return a, b, bias


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
@pytest.mark.parametrize("activation", [None, "relu"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_matmul_fp8_bias_activation_and_c(fp8, activation, dtype):
    k = 200
    a, b, bias = check_fp8_bias_activation_and_c(fp8, activation, dtype, k,
                                                 lambda m, n, k: fp8_scales("rowwise", m, n), fp8_reference)
    # without scales, fast_accum, a bias of another dtype (converted to the output's)
    act = _TORCH_ACTIVATIONS[activation]
    plain, plain_abs = fp8_reference(a, b)
    got = tessera.matmul(a, b, bias=bias.float(), activation=activation, out_dtype=dtype, precision="fast_accum")
    check_fp8(got, act(plain + bias.to(dtype).double()), plain_abs, dtype, fp8_acc_tol(k, True), atol_frac=2 ** -20)


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
def test_matmul_fp8_strided_scales_and_degenerate_sizes(fp8):
    m, n, k = 70, 50, 64
    a, b = rand_fp8(m, k, dtype=fp8), fp8_operand((k, n), "col", fp8)
    big_a, big_b = torch.rand(m, 3, device="cuda") + 0.5, torch.rand(2, n, device="cuda") + 0.5
    sa, sb = big_a[:, 1:2], big_b[1]  # (M, 1) with stride 3, and (N,): made contiguous by the wrapper
    ref, absref = fp8_reference(a, b, sa, sb)
    check_fp8(tessera.matmul(a, b, scale_a=sa, scale_b=sb), ref, absref, torch.bfloat16, fp8_acc_tol(k, False))
    d = tessera.matmul(rand_fp8(0, 16, dtype=fp8), rand_fp8(16, 8, dtype=fp8))
    assert d.shape == (0, 8) and d.dtype == torch.bfloat16
    d = tessera.matmul(rand_fp8(16, 0, dtype=fp8), rand_fp8(0, 8, dtype=fp8), out_dtype=torch.float32)
    assert d.dtype == torch.float32 and d.shape == (16, 8) and (d == 0).all()
    one = torch.ones(1, device="cuda")
    d = tessera.matmul(rand_fp8(16, 0, dtype=fp8), rand_fp8(0, 8, dtype=fp8), scale_a=one, scale_b=one)
    assert d.dtype == torch.bfloat16 and (d == 0).all()


@hopper
def test_matmul_fp8_bad_inputs_raise():
    e4 = torch.float8_e4m3fn
    a, b = rand_fp8(32, 16), rand_fp8(16, 8)
    sa, sb = torch.ones(32, 1, device="cuda"), torch.ones(1, 8, device="cuda")
    cases = [
        (dict(precision="tf32"), r"precision: 'tf32' and 'tf32x3' apply to float32 operands"),
        (dict(precision="tf32x3"), r"precision: 'tf32' and 'tf32x3' apply to float32 operands"),
        (dict(out_dtype=e4), r"out_dtype: fp8 operands give bfloat16 \(the default\), float16 or float32"),
        (dict(out_dtype=torch.int32), r"out_dtype: fp8 operands give"),
        (dict(out=torch.empty(32, 8, dtype=e4, device="cuda")), r"out\.dtype: fp8 operands give"),
        (dict(out=torch.empty(32, 8, dtype=torch.int32, device="cuda")), r"out\.dtype: fp8 operands give"),
        (dict(scale_a=sa), r"scale_b: missing"),
        (dict(scale_b=sb), r"scale_a: missing"),
        (dict(scale_a=sa.cpu(), scale_b=sb), r"scale_a: must be a CUDA tensor"),
        (dict(scale_a=sa, scale_b=sb.half()), r"scale_b: must be float32"),
        (dict(scale_a=sa.t(), scale_b=sb), r"scale_a: must have one element .* got shape \(1, 32\)"),
        (dict(c=rand(32, 8), beta=1.0), r"c\.dtype: must equal d\.dtype"),
    ]
    for kwargs, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            tessera.matmul(a, b, **kwargs)
    with pytest.raises(ValueError, match=r"b\.dtype: must equal a\.dtype \(torch\.float8_e4m3fn\), got "
                                         r"torch\.float8_e5m2"):
        tessera.matmul(a, b.to(torch.float32).to(torch.float8_e5m2))
    with pytest.raises(ValueError, match=r"b\.dtype: must equal a\.dtype \(torch\.float8_e4m3fn\), got torch\.float16"):
        tessera.matmul(a, rand(16, 8))
    for dtype in (torch.float16, torch.bfloat16, torch.float32):  # fast_accum is for fp8 operands only
        with pytest.raises(ValueError, match=r"precision: 'fast_accum' applies to fp8 operands"):
            tessera.matmul(rand(32, 16, dtype=dtype), rand(16, 8, dtype=dtype), precision="fast_accum")
    with pytest.raises(ValueError, match=r"precision: 'fast_accum' applies to fp8 operands"):
        tessera.matmul(rand(32, 16).to(torch.int8), rand(16, 8).to(torch.int8), precision="fast_accum")
    with pytest.raises(ValueError, match="K must agree"):
        tessera.matmul(a, rand_fp8(17, 8))


@hopper
def test_matmul_fp8_ops_opcheck_and_compile():
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    a, b = rand_fp8(64, 96, dtype=e4), fp8_operand((96, 48), "col", e4)
    sa, sb = torch.rand(64, 1, device="cuda") + 0.5, torch.rand(1, 48, device="cuda") + 0.5
    bias = rand(48, dtype=torch.bfloat16)
    # test_schema compares the inputs before and after with allclose, which torch has no fp8 kernel for
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    for args in [(a, b, None, 1.0, 0.0, None), (a, b, None, 1.0, 0.0, None, bias, 1, 0, 0, sa, sb),
                 (a, b, None, 1.0, 0.0, torch.float32, None, 0, 0, FAST_ACCUM, sa[:1, :1], sb[:1, :1])]:
        torch.library.opcheck(torch.ops.tessera.matmul.default, args, test_utils=utils)
    torch.library.opcheck(torch.ops.tessera.matmul_out.default,
                          (a, b, None, 1.0, 0.0, torch.empty(64, 48, dtype=torch.float16, device="cuda"), None, 0, 0,
                           FAST_ACCUM, sa, sb), test_utils=utils)

    torch._dynamo.reset()

    def f(a, b, a5, b5, sa, sb, bias):
        plain = tessera.matmul(a, b)
        deq = tessera.matmul(a, b, scale_a=sa, scale_b=sb, bias=bias, activation="relu")
        fast = tessera.matmul(a5, b5, scale_a=sa[:1], scale_b=sb[0, :1], out_dtype=torch.float32,
                              precision="fast_accum")
        return plain, deq * 2, fast, plain.float().sum(-1)

    a5, b5 = rand_fp8(64, 96, dtype=e5), rand_fp8(96, 48, dtype=e5)
    compiled = torch.compile(f, fullgraph=True)(a, b, a5, b5, sa, sb, bias)
    assert [x.dtype for x in compiled] == [torch.bfloat16, torch.bfloat16, torch.float32, torch.float32]
    acc, fast_acc = fp8_acc_tol(96, False), fp8_acc_tol(96, True)
    ref, absref = fp8_reference(a, b)
    check_fp8(compiled[0], ref, absref, torch.bfloat16, acc)
    ref, absref = fp8_reference(a, b, sa, sb)
    check_fp8(compiled[1], 2 * torch.relu(ref + bias.double()), 2 * absref, torch.bfloat16, acc, atol_frac=2 ** -20)
    ref, absref = fp8_reference(a5, b5, sa[:1], sb[0, :1])
    check_fp8(compiled[2], ref, absref, torch.float32, fast_acc)
    # the same kernels either way (bitwise equal); Inductor compiles the row sum its own way
    eager = f(a, b, a5, b5, sa, sb, bias)
    for x, y in zip(eager[:3], compiled[:3]):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    torch.testing.assert_close(eager[3], compiled[3], rtol=1e-4, atol=1e-4)


@gpu
@pytest.mark.skipif(_HOPPER_REASON is None, reason="a Hopper GPU runs fp8 operands")
def test_matmul_fp8_off_hopper_raises_not_implemented():
    a, b = rand_fp8(64, 32), rand_fp8(32, 48)
    with pytest.raises(NotImplementedError):
        tessera.matmul(a, b)
    with pytest.raises(NotImplementedError):
        torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None)
    # block scales too (scale_a (64, 3), scale_b (3, 2))
    a, b = rand_fp8(64, 300), rand_fp8(200, 300).t()
    sa, sb = torch.ones(64, 3, device="cuda"), torch.ones(3, 2, device="cuda")
    with pytest.raises(NotImplementedError):
        tessera.matmul(a, b, scale_a=sa, scale_b=sb)
    with pytest.raises(NotImplementedError):
        torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, None, None, 0, 0, 0, sa, sb)


# ------------------------------------------------------------------ fp8 block scales (Hopper)


def block_scale_tensor(rows, cols, layout):
    """A float32 (rows, cols) CUDA tensor of 2^u, u uniform in [-4, 2) (so that a scale taken from the wrong
    block is off by up to 64x), row-major ("row"), column-major ("col": a transposed view), or either with a
    padded leading dimension whose padding is NaN ("row_padded", "col_padded")."""
    vals = torch.exp2(torch.rand(rows, cols, device="cuda") * 6 - 4)
    if layout == "row":
        return vals
    if layout == "col":
        return vals.t().contiguous().t()
    if layout == "row_padded":
        t = torch.full((rows, cols + 3), float("nan"), device="cuda")[:, :cols]
    else:
        assert layout == "col_padded"
        t = torch.full((cols, rows + 5), float("nan"), device="cuda")[:, :rows].t()
    t.copy_(vals)
    return t


def block_scales(m, n, k, layouts=("row", "row")):
    """(scale_a (M, ceil(K/128)), scale_b (ceil(K/128), ceil(N/128))) laid out as `layouts` says."""
    return (block_scale_tensor(m, _blocks(k), layouts[0]),
            block_scale_tensor(_blocks(k), _blocks(n), layouts[1]))


def block_reference(a, b, scale_a, scale_b):
    """(ref, absref) in fp64 for block-scaled fp8 a (.., M, K) and b (.., K, N): the operands dequantised,
    a's element (m, k) times scale_a[m, k // 128] and b's (k, n) times scale_b[k // 128, n // 128], then
    multiplied (and their |.| likewise, for the accumulation bound). The scales are shared by the batches."""
    k, n = a.shape[-1], b.shape[-1]
    kblk = torch.arange(k, device=a.device) // 128
    nblk = torch.arange(n, device=a.device) // 128
    a64 = a.float().double() * scale_a.double()[:, kblk]
    b64 = b.float().double() * scale_b.double()[kblk][:, nblk]
    return torch.matmul(a64, b64), torch.matmul(a64.abs(), b64.abs())


BLOCK_LAYOUTS = [("row", "row"), ("col", "col"), ("row", "col"), ("col", "row"), ("col_padded", "row_padded"),
                 ("row_padded", "col_padded")]


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
@pytest.mark.parametrize("mnk", [(1, 1, 128), (77, 129, 128), (129, 77, 256), (64, 200, 100), (300, 1000, 1000),
                                 (1000, 300, 4096), (77, 300, 8192), (2048, 2048, 256)])
@pytest.mark.parametrize("layouts", BLOCK_LAYOUTS)
def test_matmul_fp8_block_scales_match_dequantised_reference(fp8, mnk, layouts):
    """a (M, K) and b = W.t() of an (N, K) weight with block scales, against the dequantised operands
    multiplied in fp64: K of one block, two, a ragged last block (1000 = 7 x 128 + 104), 4096 and 8192; M
    and N above and below 128, N not a multiple of it; both scales row- or column-major (padded too); into
    bfloat16 (the default), float16 and float32, and at precision "fast_accum" (block scales promote the
    sums all the same: the default's bound)."""
    m, n, k = mnk
    a = rand_fp8(m, k, dtype=fp8)
    b = rand_fp8(n, k, dtype=fp8).t()
    sa, sb = block_scales(m, n, k, layouts)
    ref, absref = block_reference(a, b, sa, sb)
    acc = fp8_acc_tol(k, False)
    check_fp8(tessera.matmul(a, b, scale_a=sa, scale_b=sb), ref, absref, torch.bfloat16, acc)
    for dtype in (torch.float16, torch.float32):
        check_fp8(tessera.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=dtype), ref, absref, dtype, acc)
    out = torch.full((m, n), float("nan"), dtype=torch.float32, device="cuda")
    assert tessera.matmul(a, b, scale_a=sa, scale_b=sb, out=out, precision="fast_accum") is out
    check_fp8(out, ref, absref, torch.float32, acc)


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
@pytest.mark.parametrize("mnk", [(129, 300, 1000), (33, 17, 300), (1, 130, 129)])
@pytest.mark.parametrize("majors", FP8_MAJORS)
def test_matmul_fp8_block_scales_operand_majors(fp8, mnk, majors):
    """Every major of a and b (transposed views copied K-major by the library, other strides copied by the
    wrapper) with block scales, into a fresh bfloat16 output and a NaN-filled float32 out= with alpha."""
    m, n, k = mnk
    a, b = fp8_operand((m, k), majors[0], fp8), fp8_operand((k, n), majors[1], fp8)
    sa, sb = block_scales(m, n, k, ("col", "row"))
    ref, absref = block_reference(a, b, sa, sb)
    acc = fp8_acc_tol(k, False)
    check_fp8(tessera.matmul(a, b, scale_a=sa, scale_b=sb), ref, absref, torch.bfloat16, acc)
    out = torch.full((m, n), float("nan"), dtype=torch.float32, device="cuda")
    assert tessera.matmul(a, b, scale_a=sa, scale_b=sb, out=out, alpha=-0.5) is out
    check_fp8(out, -0.5 * ref, 0.5 * absref, torch.float32, acc)


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((3, 200, 300), (300, 136)), ((3, 96, 1000), (3, 1000, 260)), ((1, 77, 256), (4, 256, 129)),
     ((4, 33, 130), (1, 130, 200))],
)
def test_matmul_fp8_block_scales_batched(fp8, a_shape, b_shape):
    """Batched a (and b, or either broadcast) with 2-D block scales shared by every batch; then a batch of
    column-major a matrices (copied K-major by the library)."""
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    a = rand_fp8(*a_shape, dtype=fp8)
    b = rand_fp8(*b_shape[:-2], n, k, dtype=fp8).transpose(-1, -2)  # K-major weights
    sa, sb = block_scales(m, n, k, ("col", "row"))
    ref, absref = block_reference(a, b, sa, sb)
    acc = fp8_acc_tol(k, False)
    d = tessera.matmul(a, b, scale_a=sa, scale_b=sb)
    assert d.shape == ref.shape
    check_fp8(d, ref, absref, torch.bfloat16, acc)
    at = rand_fp8(a_shape[0], k, m, dtype=fp8).transpose(1, 2)  # (L, M, K), column-major matrices
    ref, absref = block_reference(at, b, sa, sb)
    check_fp8(tessera.matmul(at, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32), ref, absref, torch.float32,
              acc)


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_matmul_fp8_block_scales_bias_activation_and_c(fp8, activation, dtype):
    check_fp8_bias_activation_and_c(fp8, activation, dtype, 1000,
                                    lambda m, n, k: block_scales(m, n, k, ("row", "col")), block_reference)


@hopper
@pytest.mark.parametrize("fp8", FP8_DTYPES)
def test_matmul_fp8_block_scales_long_k_promote_with_fast_accum_too(fp8):
    """K = 8192 of positive values (every rounding of a running sum errs the same way): block-scaled sums
    stay within the promoted bound whether or not precision="fast_accum" is asked for (block scales are
    applied as the sums are promoted, every 128 K); also through the op."""
    m, n, k = 128, 256, 8192
    a = torch.rand(m, k, device="cuda").to(fp8)
    b = torch.rand(n, k, device="cuda").to(fp8).t()
    sa, sb = block_scales(m, n, k, ("col", "row"))
    ref, absref = block_reference(a, b, sa, sb)
    for precision in (None, "fast_accum"):
        out = tessera.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32, precision=precision)
        check_fp8(out, ref, absref, torch.float32, fp8_acc_tol(k, False))
    op = torch.ops.tessera.matmul(a, b, None, 1.0, 0.0, torch.float32, None, 0, 0, FAST_ACCUM, sa, sb)
    check_fp8(op, ref, absref, torch.float32, fp8_acc_tol(k, False))


@hopper
def test_matmul_fp8_block_scales_degenerate_sizes():
    """K = 0 (no K blocks: scale_a (M, 0), scale_b (0, ceil(N/128))) gives zeros (plus the bias); M = 0 or
    N = 0 an empty output; a single element, one partial block each way."""
    def ones(*shape):
        return torch.ones(*shape, device="cuda")

    d = tessera.matmul(rand_fp8(16, 0), rand_fp8(0, 200), scale_a=ones(16, 0), scale_b=ones(0, 2))
    assert d.dtype == torch.bfloat16 and d.shape == (16, 200) and (d == 0).all()
    bias = rand(200, dtype=torch.float32)
    d = tessera.matmul(rand_fp8(16, 0), rand_fp8(0, 200), scale_a=ones(16, 0), scale_b=ones(0, 2), bias=bias,
                       out_dtype=torch.float32)
    assert torch.equal(d, bias.expand(16, 200))
    d = tessera.matmul(rand_fp8(0, 300), rand_fp8(300, 200), scale_a=ones(0, 3), scale_b=ones(3, 2))
    assert d.shape == (0, 200) and d.dtype == torch.bfloat16
    d = tessera.matmul(rand_fp8(5, 300), rand_fp8(300, 0), scale_a=ones(5, 3), scale_b=ones(3, 0))
    assert d.shape == (5, 0)
    a, b = rand_fp8(1, 1), rand_fp8(1, 1)
    sa, sb = torch.full((1, 1), 0.25, device="cuda"), torch.full((1, 1), 8.0, device="cuda")
    d = tessera.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    assert d.item() == 2.0 * a.float().item() * b.float().item()


@hopper
def test_matmul_fp8_block_scales_bad_inputs_raise():
    m, n, k = 64, 200, 300  # scale_a (64, 3), scale_b (3, 2)
    a, b = rand_fp8(m, k), rand_fp8(n, k).t()
    sa, sb = block_scales(m, n, k)
    cases = [
        (dict(scale_a=sa[:, :2], scale_b=sb), r"scale_a"),
        (dict(scale_a=sa.t(), scale_b=sb), r"scale_a"),
        (dict(scale_a=sa.unsqueeze(0), scale_b=sb), r"scale_a"),
        (dict(scale_a=sa, scale_b=sb[:, :1]), r"scale_b"),
        (dict(scale_a=sa, scale_b=sb.t()), r"scale_b"),
        (dict(scale_a=sa, scale_b=torch.ones(1, n, device="cuda")), r"scale_[ab]"),
        (dict(scale_a=sa.cpu(), scale_b=sb), r"scale_a: must be a CUDA tensor"),
        (dict(scale_a=sa, scale_b=sb.cpu()), r"scale_b: must be a CUDA tensor"),
        (dict(scale_a=sa.double(), scale_b=sb), r"scale_a: must be float32"),
        (dict(scale_a=sa), r"scale_b: missing"),
    ]
    for kwargs, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            tessera.matmul(a, b, **kwargs)
    # int8 operands: block scales are fp8's
    ai, bi = rand_i8(m, k), rand_i8(k, n)
    for out_dtype in (None, torch.float32):
        with pytest.raises(ValueError, match=r"scale_[ab]"):
            tessera.matmul(ai, bi, scale_a=sa, scale_b=sb, out_dtype=out_dtype)
    with pytest.raises(ValueError, match=r"scale_b"):  # one K block: scale_b (1, 2) is not (1, N)
        tessera.matmul(rand_i8(m, 100), rand_i8(100, n), scale_a=torch.ones(m, 1, device="cuda"),
                       scale_b=torch.ones(1, 2, device="cuda"))
    with pytest.raises(ValueError, match=r"scale_a, scale_b: dequantise int8 or fp8 operands"):
        tessera.matmul(rand(m, k), rand(k, n), scale_a=sa, scale_b=sb)


@hopper
def test_matmul_fp8_block_scales_opcheck_compile_and_graphs():
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    m, n, k = 64, 200, 300
    a, b = rand_fp8(m, k, dtype=e4), rand_fp8(n, k, dtype=e4).t()
    sa, sb = block_scales(m, n, k, ("col", "row"))
    bias = rand(n, dtype=torch.bfloat16)
    # test_schema compares the inputs before and after with allclose, which torch has no fp8 kernel for
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    for args in [(a, b, None, 1.0, 0.0, None, None, 0, 0, 0, sa, sb),
                 (a, b, None, 1.0, 0.0, torch.float32, bias, 1, 0, FAST_ACCUM, sa, sb)]:
        torch.library.opcheck(torch.ops.tessera.matmul.default, args, test_utils=utils)
    torch.library.opcheck(torch.ops.tessera.matmul_out.default,
                          (a, b, None, 1.0, 0.0, torch.empty(m, n, dtype=torch.float16, device="cuda"), None, 0, 0, 0,
                           sa, sb), test_utils=utils)

    torch._dynamo.reset()

    def f(a, b, a5, b5, sa, sb, bias):
        deq = tessera.matmul(a, b, scale_a=sa, scale_b=sb, bias=bias, activation="relu")
        f32 = tessera.matmul(a5, b5, scale_a=sa, scale_b=sb, out_dtype=torch.float32, precision="fast_accum")
        return deq * 2, f32, f32.sum(-1)

    a5, b5 = rand_fp8(3, m, k, dtype=e5), rand_fp8(n, k, dtype=e5).t()  # batched a, shared scales
    compiled = torch.compile(f, fullgraph=True)(a, b, a5, b5, sa, sb, bias)
    assert [x.dtype for x in compiled] == [torch.bfloat16, torch.float32, torch.float32]
    acc = fp8_acc_tol(k, False)
    ref, absref = block_reference(a, b, sa, sb)
    check_fp8(compiled[0], 2 * torch.relu(ref + bias.double()), 2 * absref, torch.bfloat16, acc, atol_frac=2 ** -20)
    ref, absref = block_reference(a5, b5, sa, sb)
    check_fp8(compiled[1], ref, absref, torch.float32, acc)
    # the same kernels either way (bitwise equal); Inductor compiles the row sum its own way
    eager = f(a, b, a5, b5, sa, sb, bias)
    for x, y in zip(eager[:2], compiled[:2]):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    torch.testing.assert_close(eager[2], compiled[2], rtol=1e-4, atol=1e-4)

    # CUDA graphs: capture (also an unaligned K, whose operands are copied into the workspace), replay with
    # new operands and new scales written into the same tensors
    ua, ub = rand_fp8(65, 299, dtype=e4), rand_fp8(299, 130, dtype=e4)
    usa, usb = block_scales(65, 130, 299, ("row", "col"))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the capture
        tessera.matmul(a, b, scale_a=sa, scale_b=sb), tessera.matmul(ua, ub, scale_a=usa, scale_b=usb)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        d = tessera.matmul(a, b, scale_a=sa, scale_b=sb)
        ud = tessera.matmul(ua, ub, scale_a=usa, scale_b=usb, out_dtype=torch.float32)
    for _ in range(2):
        a.copy_(rand_fp8(m, k, dtype=e4))
        ua.copy_(rand_fp8(65, 299, dtype=e4))
        sa.copy_(block_scales(m, n, k)[0])  # in place: sa keeps its column-major strides
        usb.copy_(block_scales(65, 130, 299)[1])
        g.replay()
        torch.cuda.synchronize()
        ref, absref = block_reference(a, b, sa, sb)
        check_fp8(d, ref, absref, torch.bfloat16, acc)
        ref, absref = block_reference(ua, ub, usa, usb)
        check_fp8(ud, ref, absref, torch.float32, fp8_acc_tol(299, False))



# ------------------------------------------------------------------ op checks, compile, graphs


@gpu
def test_opcheck():
    a, b, c = rand(64, 32), rand(32, 48), rand(64, 48)
    torch.library.opcheck(torch.ops.tessera.matmul.default, (a, b, c, 1.0, 1.0, None))
    torch.library.opcheck(torch.ops.tessera.matmul.default, (a, b, None, 1.0, 0.0, torch.float32))
    torch.library.opcheck(torch.ops.tessera.matmul_out.default, (a, b, None, 1.0, 0.0, torch.empty_like(c)))
    bias = rand(48)
    torch.library.opcheck(torch.ops.tessera.matmul.default, (a, b, c, 1.0, 1.0, None, bias, 1))
    torch.library.opcheck(torch.ops.tessera.matmul_out.default, (a, b, None, 1.0, 0.0, torch.empty_like(c), bias, 4))
    q, k, v = attn_inputs(1, 64, 64, 4, 2, 64, torch.bfloat16, "bshd")
    torch.library.opcheck(torch.ops.tessera.attention.default, (q, k, v, True, 0.0, True, "bshd"))
    torch.library.opcheck(torch.ops.tessera.attention.default, (q, k, v, False, 0.0, False, "bshd"))
    torch.library.opcheck(torch.ops.tessera.attention.default, (q, k, v, True, 0.0, True, "bshd", 0, 16, -1, 30.0))


@gpu
def test_torch_compile_fullgraph():
    torch._dynamo.reset()

    def f(a, b, c, q, k, v):
        d = tessera.matmul(a, b, c=c, beta=0.5, out_dtype=torch.float32)
        o, lse = tessera.attention(q, k, v, causal=True, return_lse=True)
        o_local = tessera.attention(q, k, v, window=(16, 8), softcap=30.0)
        return d, d.sum(-1), o * 2, lse, o_local

    a, b, c = rand(128, 64), rand(64, 96), rand(128, 96, dtype=torch.float32)
    q, k, v = attn_inputs(2, 100, 100, 4, 2, 64, torch.float16, "bshd")
    eager = f(a, b, c, q, k, v)
    compiled = torch.compile(f, fullgraph=True)(a, b, c, q, k, v)
    # The custom ops run the same kernels either way (bitwise equal); Inductor compiles the row sum
    # around them with its own reduction order (H100, torch 2.11: 1.2e-5 relative apart in fp32).
    for i, (x, y) in enumerate(zip(eager, compiled)):
        if i == 1:
            torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)
        else:
            torch.testing.assert_close(x, y, rtol=0, atol=0)


@gpu
def test_torch_compile_out_argument():
    torch._dynamo.reset()

    def f(a, b, out):
        tessera.matmul(a, b, out=out)
        return out + 1

    a, b = rand(64, 64), rand(64, 64)
    out_e, out_c = torch.empty(64, 64, device="cuda", dtype=torch.float16), torch.empty(64, 64, device="cuda",
                                                                                          dtype=torch.float16)
    eager = f(a, b, out_e)
    compiled = torch.compile(f, fullgraph=True)(a, b, out_c)
    torch.testing.assert_close(eager, compiled)
    torch.testing.assert_close(out_e, out_c)


@gpu
def test_cuda_graph_capture_and_replay():
    a, b = rand(256, 192), rand(192, 128)
    ua = rand(65 * 70 + 1)[1:].view(65, 70)[:, :63]  # unaligned: workspace allocated during capture
    ub = rand(63, 40)
    q, k, v = attn_inputs(2, 128, 128, 4, 4, 64, torch.bfloat16, "bshd")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the capture
        tessera.matmul(a, b), tessera.matmul(ua, ub), tessera.attention(q, k, v)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        d = tessera.matmul(a, b)
        ud = tessera.matmul(ua, ub)
        o = tessera.attention(q, k, v, causal=True)
    for _ in range(2):
        a.copy_(rand(256, 192))
        ua.copy_(rand(65, 63))
        q.copy_(rand(*q.shape, dtype=q.dtype))
        g.replay()
        torch.cuda.synchronize()
        assert rel_err(d, ref_matmul(a, b)) < TOL[torch.float16]
        assert rel_err(ud, ref_matmul(ua, ub)) < TOL[torch.float16]
        assert rel_err(o, ref_attention(q, k, v, True, None, "bshd")[0]) < 2 * TOL[torch.bfloat16]


_TORCH_ACTIVATIONS = {None: lambda x: x, "relu": torch.relu, "gelu": F.gelu,
                      "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu}


@gpu
@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_matmul_bias_and_activation(activation, dtype):
    act = _TORCH_ACTIVATIONS[activation]
    a, b = rand(300, 200, dtype=dtype), rand(200, 136, dtype=dtype)
    bias = rand(136, dtype=dtype)
    ref = act(a.float() @ b.float() + bias.float())
    out = tessera.matmul(a, b, bias=bias, activation=activation)
    assert rel_err(out, ref) < TOL[dtype]
    # The same through out= (in place), and with a transposed view of a.
    dst = torch.full((300, 136), float("nan"), device="cuda", dtype=dtype)
    res = tessera.matmul(a.t().contiguous().t(), b, bias=bias, activation=activation, out=dst)
    assert res is dst and rel_err(dst, ref) < TOL[dtype]
    # A column-major out (the kernels then compute D^T: the bias runs along their rows).
    dst_t = torch.full((136, 300), float("nan"), device="cuda", dtype=dtype).t()
    tessera.matmul(a, b, bias=bias, activation=activation, out=dst_t)
    assert rel_err(dst_t, ref) < TOL[dtype]
    # Batched, one bias for every batch, with C; an fp32 output reads the bias converted to fp32.
    a3, c = rand(3, 300, 200, dtype=dtype), rand(3, 300, 136, dtype=torch.float32)
    ref3 = act(0.5 * (a3.float() @ b.float()) - 1.25 * c + bias.float())
    out3 = tessera.matmul(a3, b, c=c, alpha=0.5, beta=-1.25, bias=bias, activation=activation,
                          out_dtype=torch.float32)
    assert out3.dtype == torch.float32 and rel_err(out3, ref3) < (1e-3 if dtype == torch.bfloat16 else 5e-4)


# ------------------------------------------------------------------------- attention with a KV cache


def kvcache_reference(q, k_cache, v_cache, lens, block_table, causal):
    """Per sequence: its keys gathered densely, SDPA-math in fp32 with a bottom-right causal mask."""
    import torch.nn.functional as F

    out = []
    for b in range(q.shape[0]):
        n = int(lens[b])
        if n == 0:  # no keys: O = 0
            out.append(torch.zeros_like(q[b], dtype=torch.float32))
            continue
        if block_table is None:
            k, v = k_cache[b, :n], v_cache[b, :n]
        else:
            page = k_cache.shape[1]
            idx = [int(block_table[b, j // page]) * page + j % page for j in range(n)]
            k = k_cache.flatten(0, 1)[idx]
            v = v_cache.flatten(0, 1)[idx]
        qb = q[b].transpose(0, 1).float()  # [Hq, Sq, D]
        kb, vb = k.transpose(0, 1).float(), v.transpose(0, 1).float()
        g = qb.shape[0] // kb.shape[0]
        kb, vb = kb.repeat_interleave(g, 0), vb.repeat_interleave(g, 0)
        mask = None
        if causal:
            sq = qb.shape[1]
            i = torch.arange(sq, device=q.device)[:, None]
            j = torch.arange(n, device=q.device)[None, :]
            mask = j <= i + n - sq
        out.append(F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask).transpose(0, 1))
    return torch.stack(out)


@gpu
@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("append", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_with_kvcache(paged, append, causal):
    torch.manual_seed(0)
    b, sq, hq, hkv, d, cap, page = 3, 2, 8, 2, 128, 512, 64
    q = rand(b, sq, hq, d, dtype=torch.bfloat16)
    if paged:
        pages = b * cap // page + 2
        k_cache, v_cache = rand(pages, page, hkv, d, dtype=torch.bfloat16), rand(pages, page, hkv, d, dtype=torch.bfloat16)
        block_table = torch.randperm(pages, device="cuda", dtype=torch.int32)[: b * cap // page].view(b, -1)
    else:
        k_cache, v_cache = rand(b, cap, hkv, d, dtype=torch.bfloat16), rand(b, cap, hkv, d, dtype=torch.bfloat16)
        block_table = None
    lens = torch.tensor([0, 200, 509], dtype=torch.int32, device="cuda")
    k = rand(b, 3, hkv, d, dtype=torch.bfloat16) if append else None
    v = rand(b, 3, hkv, d, dtype=torch.bfloat16) if append else None
    if append:
        lens = lens.clamp(max=cap - 3)
    k_before, v_before = k_cache.clone(), v_cache.clone()
    o, lse = tessera.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, k=k, v=v,
                                            block_table=block_table, causal=causal, return_lse=True)
    if append:  # the new keys in the cache, at lens[b]; nothing else changed
        for bi in range(b):
            for t in range(3):
                pos = int(lens[bi]) + t
                if paged:
                    where = (int(block_table[bi, pos // page]), pos % page)
                else:
                    where = (bi, pos)
                assert torch.equal(k_cache[where], k[bi, t]) and torch.equal(v_cache[where], v[bi, t])
                k_before[where], v_before[where] = k[bi, t], v[bi, t]
    assert torch.equal(k_cache, k_before) and torch.equal(v_cache, v_before)
    n = lens + (3 if append else 0)
    ref = kvcache_reference(q, k_cache, v_cache, n, block_table, causal)
    assert o.shape == q.shape and lse.shape == (b, hq, sq)
    assert (o.float() - ref).abs().max().item() < 2e-2
    if int(n[0]) == 0:
        assert torch.isinf(lse[0]).all() and (lse[0] < 0).all()
