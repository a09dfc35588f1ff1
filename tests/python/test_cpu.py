"""CPU-side tests of the Python package: no torch and no GPU needed (CI runs these).

The library validates every argument before touching memory or the device, so tessera._C calls with
made-up device pointers exercise the argument rules safely; each error must be a ValueError whose
message is the library's (naming the argument).
"""
import importlib.util
import pathlib
import re

import pytest

import tessera
from tessera import _C, decode_bench

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAKE = 0x7F0000000000  # a 256-byte aligned, never dereferenced "device pointer"


def mat(ptr=FAKE, dtype=_C.F16, rows=64, cols=64, ld=None, layout=_C.ROW_MAJOR, batch_count=1, batch_stride=0):
    if ld is None:
        ld = cols if layout == _C.ROW_MAJOR else rows
    return _C.Matrix(ptr, dtype, rows, cols, ld, layout, batch_count, batch_stride)


def gemm_args(m=64, n=64, k=64, dtype=_C.F16, out_dtype=_C.F16):
    """Valid, non-overlapping A (M x K), B (K x N), D (M x N) at made-up addresses."""
    a = mat(FAKE, dtype, m, k)
    b = mat(FAKE + (1 << 30), dtype, k, n)
    d = mat(FAKE + (2 << 30), out_dtype, m, n)
    return a, b, d


def attn_kwargs(**over):
    b, sq, sk, hq, hkv, d = 2, 128, 128, 8, 2, 64
    kw = dict(q=FAKE, k=FAKE + (1 << 30), v=FAKE + (2 << 30), o=FAKE + (3 << 30), dtype=_C.BF16, batch=b,
              seqlen_q=sq, seqlen_k=sk, heads_q=hq, heads_kv=hkv, head_dim=d, q_stride=(sq * hq * d, hq * d, d),
              k_stride=(sk * hkv * d, hkv * d, d), v_stride=(sk * hkv * d, hkv * d, d),
              o_stride=(sq * hq * d, hq * d, d))
    kw.update(over)
    return kw


def device_reachable():
    """True when the library can see a CUDA device (asks through a call that launches nothing)."""
    try:
        _C.gemm_select_config(*gemm_args())
        return True
    except (RuntimeError, NotImplementedError):
        return False


# ------------------------------------------------------------------------------ package surface


def test_version_matches_cmake_project():
    text = (ROOT / "CMakeLists.txt").read_text()
    want = re.search(r"project\(tessera\s+VERSION\s+([0-9.]+)", text).group(1)
    assert tessera.__version__ == want == _C.version()


def test_configs_lists_name_and_description():
    cfgs = tessera.configs()
    assert isinstance(cfgs, list) and len(cfgs) >= 2
    for name, desc in cfgs:
        assert isinstance(name, str) and name
        assert isinstance(desc, str) and len(desc) > 10
    names = [n for n, _ in cfgs]
    assert len(set(names)) == len(names)
    assert "simt_fallback" in names


def test_status_strings():
    assert tessera.status_string(tessera.STATUS_SUCCESS) == "success"
    assert tessera.status_string(tessera.STATUS_INVALID_ARGUMENT) == "invalid argument"
    assert tessera.status_string(tessera.STATUS_NOT_SUPPORTED) == "not supported"
    assert tessera.status_string(tessera.STATUS_CUDA_ERROR) == "CUDA error"
    assert tessera.status_string(tessera.STATUS_INTERNAL_ERROR) == "internal error"
    assert tessera.status_string(1234) == "unknown status"


def test_matrix_fields_round_trip():
    m = _C.Matrix(ptr=FAKE, dtype=_C.BF16, rows=3, cols=5, ld=8, layout=_C.COL_MAJOR, batch_count=4, batch_stride=64)
    assert (m.ptr, m.dtype, m.rows, m.cols, m.ld, m.layout, m.batch_count, m.batch_stride) == (
        FAKE, _C.BF16, 3, 5, 8, _C.COL_MAJOR, 4, 64)
    m.ld = 16
    assert m.ld == 16 and "ld=16" in repr(m)
    with pytest.raises(TypeError):
        _C.Matrix(-1, _C.F16, 1, 1, 1)  # pointers are unsigned


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed")
def test_torch_entry_points_explain_missing_torch():
    with pytest.raises(ImportError, match="PyTorch"):
        tessera.matmul(None, None)
    with pytest.raises(ImportError, match="PyTorch"):
        tessera.attention(None, None, None)


# ------------------------------------------------------------------------------ GEMM arguments


def test_gemm_workspace_size_of_valid_aligned_problem_is_zero():
    assert _C.gemm_workspace_size(*gemm_args()) == 0


def test_gemm_workspace_size_pads_unaligned_operand():
    a, b, d = gemm_args(m=64, n=64, k=63)
    a.ld = 63  # 126-byte rows: not 16-byte aligned, so A is copied (padded) into the workspace
    b.rows = 63
    assert _C.gemm_workspace_size(a, b, d) > 0


def test_gemm_empty_problem_succeeds_without_device():
    a, b, d = gemm_args(m=0)
    _C.gemm(a, b, d)  # nothing to do: no launch, no device access


@pytest.mark.parametrize(
    "mutate, pattern",
    [
        (lambda a, b, d: setattr(a, "ld", 10), r"a\.ld: must be >= max\(1, cols\) = 64"),
        (lambda a, b, d: (setattr(b, "layout", _C.COL_MAJOR), setattr(b, "ld", 32)), r"b\.ld: must be >= max\(1, rows\) = 64"),
        (lambda a, b, d: setattr(d, "ld", 1), r"d\.ld"),
        (lambda a, b, d: setattr(a, "ptr", 0), r"a\.ptr: null pointer"),
        (lambda a, b, d: setattr(b, "ptr", FAKE + 1), r"b\.ptr: not aligned"),
        (lambda a, b, d: setattr(a, "dtype", 7), r"a\.dtype: not a tessera dtype"),
        (lambda a, b, d: setattr(a, "dtype", _C.F32), r"b\.dtype: must equal a\.dtype \(f32\)"),
        (lambda a, b, d: setattr(b, "dtype", _C.BF16), r"b\.dtype: must equal a\.dtype"),
        (lambda a, b, d: setattr(a, "layout", 5), r"a\.layout"),
        (lambda a, b, d: setattr(b, "rows", 32), r"K must agree"),
        (lambda a, b, d: (setattr(d, "cols", 65), setattr(d, "ld", 72)), r"d: must be 64 x 64 \(M x N\), got 64 x 65"),
        (lambda a, b, d: setattr(a, "rows", -1), r"a\.rows: must be >= 0"),
        (lambda a, b, d: setattr(d, "ptr", a.ptr), r"d: overlaps a"),
        (lambda a, b, d: (setattr(d, "batch_count", 4), setattr(a, "batch_count", 3)), r"a\.batch_count"),
        (lambda a, b, d: (setattr(d, "batch_count", 4), setattr(d, "batch_stride", 0)), r"d\.batch_stride"),
    ],
)
def test_gemm_argument_errors_raise_value_error_naming_the_argument(mutate, pattern):
    a, b, d = gemm_args()
    mutate(a, b, d)
    for call in (lambda: _C.gemm(a, b, d), lambda: _C.gemm_workspace_size(a, b, d)):
        with pytest.raises(ValueError, match=pattern) as info:
            call()
        assert str(info.value) == _C.last_error()  # the library's own message


def test_gemm_precision_is_for_f32_operands():
    a, b, d = gemm_args()  # f16 operands
    for call in (lambda p: _C.gemm(a, b, d, precision=p), lambda p: _C.gemm_workspace_size(a, b, d, precision=p)):
        with pytest.raises(ValueError, match=r"precision: tf32 and tf32x3 apply to f32 operands; a and b are f16"):
            call(_C.PRECISION_TF32X3)
        with pytest.raises(ValueError, match=r"precision: must be default \(0\), tf32 \(1\)"):
            call(7)
    a, b, d = gemm_args(dtype=_C.F32, out_dtype=_C.F32)
    # fp32 operands: valid with every precision; without a device the workspace is a bound that covers
    # the K-major copies 3xTF32 makes (two 64 x 192 fp32 copies, at least).
    assert _C.gemm_workspace_size(a, b, d) >= 0
    assert _C.gemm_workspace_size(a, b, d, precision=_C.PRECISION_TF32X3) >= 2 * 64 * 192 * 4


def test_gemm_c_rules_apply_only_when_beta_is_nonzero():
    a, b, d = gemm_args()
    c = mat(0, _C.F16, 64, 64)  # null C
    _C.gemm_workspace_size(a, b, d, c, 1.0, 0.0)  # beta == 0: C is not read
    with pytest.raises(ValueError, match=r"c\.ptr: null pointer"):
        _C.gemm_workspace_size(a, b, d, c, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"c\.dtype: must equal d\.dtype"):
        _C.gemm(a, b, d, mat(FAKE + (3 << 30), _C.F32, 64, 64), beta=0.5)


def test_gemm_op_codes_and_config_names_are_validated():
    a, b, d = gemm_args()
    with pytest.raises(ValueError, match=r"op_a: must be N or T"):
        _C.gemm(a, b, d, op_a=9)
    with pytest.raises(ValueError, match=r"config: unknown configuration 'nope' \(known: .*simt_fallback"):
        _C.gemm(a, b, d, config="nope")


def test_gemm_workspace_must_be_aligned_and_present():
    a, b, d = gemm_args()
    with pytest.raises(ValueError, match=r"workspace: null pointer"):
        _C.gemm(a, b, d, workspace=0, workspace_bytes=1024)
    with pytest.raises(ValueError, match=r"workspace: must be 256-byte aligned"):
        _C.gemm(a, b, d, workspace=FAKE + 16, workspace_bytes=1024)


def test_bias_and_activation_codes_are_the_c_abis():
    assert (_C.BIAS_NONE, _C.BIAS_PER_COLUMN, _C.BIAS_PER_ROW) == (0, 1, 2)
    assert (_C.ACTIVATION_NONE, _C.ACTIVATION_RELU, _C.ACTIVATION_GELU, _C.ACTIVATION_GELU_TANH,
            _C.ACTIVATION_SILU) == (0, 1, 2, 3, 4)


BIAS = FAKE + (3 << 30)  # a made-up bias vector clear of A, B and D


@pytest.mark.parametrize("mode", [_C.BIAS_PER_COLUMN, _C.BIAS_PER_ROW])
@pytest.mark.parametrize("act", [_C.ACTIVATION_NONE, _C.ACTIVATION_RELU, _C.ACTIVATION_GELU, _C.ACTIVATION_GELU_TANH,
                                 _C.ACTIVATION_SILU])
def test_gemm_bias_and_activation_are_accepted(mode, act):
    a, b, d = gemm_args(m=64, n=48)
    assert _C.gemm_workspace_size(a, b, d, bias=BIAS, bias_mode=mode, activation=act) == 0
    d.batch_count, d.batch_stride = 3, 64 * 48
    assert _C.gemm_workspace_size(a, b, d, bias=BIAS, bias_mode=mode, bias_batch_stride=64, activation=act) == 0


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(bias=BIAS, bias_mode=5), r"bias_mode: must be none \(0\), per-column \(1\) or per-row \(2\)"),
        (dict(activation=9), r"activation: must be none \(0\), relu \(1\)"),
        (dict(bias=0, bias_mode=_C.BIAS_PER_COLUMN), r"bias: null pointer with bias_mode per-column \(N = 48"),
        (dict(bias=0, bias_mode=_C.BIAS_PER_ROW), r"bias: null pointer with bias_mode per-row \(M = 64"),
        (dict(bias=BIAS), r"bias: must be null when bias_mode is none"),
        (dict(bias=BIAS + 1, bias_mode=_C.BIAS_PER_ROW), r"bias: not aligned to its element size \(2 bytes"),
        (dict(bias=BIAS, bias_mode=_C.BIAS_PER_ROW, bias_batch_stride=-1), r"bias_batch_stride: must be >= 0"),
        (dict(bias=FAKE + (2 << 30) + 64, bias_mode=_C.BIAS_PER_COLUMN), r"bias: overlaps d in memory"),
    ],
)
def test_gemm_bias_errors_raise_value_error_naming_the_argument(kwargs, pattern):
    a, b, d = gemm_args(m=64, n=48)
    for call in (lambda: _C.gemm(a, b, d, **kwargs), lambda: _C.gemm_workspace_size(a, b, d, **kwargs)):
        with pytest.raises(ValueError, match=pattern) as info:
            call()
        assert str(info.value) == _C.last_error()


# --------------------------------------------------------------------- int8 GEMM arguments

SCALE_A, SCALE_B = FAKE + (4 << 30), FAKE + (5 << 30)  # made-up fp32 scale vectors clear of A, B, D and BIAS


def int8_args(m=64, n=48, k=64, out_dtype=_C.S32):
    return gemm_args(m=m, n=n, k=k, dtype=_C.S8, out_dtype=out_dtype)


def test_int8_codes_are_the_c_abis():
    assert (_C.F16, _C.BF16, _C.F32, _C.S8, _C.S32) == (0, 1, 2, 3, 4)
    assert (_C.SCALE_NONE, _C.SCALE_TENSOR, _C.SCALE_ROWWISE) == (0, 1, 2)


@pytest.mark.parametrize("m, n, k", [(64, 48, 64), (33, 17, 5), (1, 1, 1), (7, 129, 4096)])
def test_gemm_int8_arguments_are_accepted(m, n, k):
    """s8 operands: an s32 D (the exact sums) and dequantised f16 / bf16 / f32 D with scales per tensor or
    row-wise; every entry takes them (without a device the workspace is a bound: an int >= 0)."""
    a, b, d = int8_args(m, n, k)
    assert _C.gemm_workspace_size(a, b, d) >= 0
    for out in (_C.F16, _C.BF16, _C.F32):
        a, b, d = int8_args(m, n, k, out_dtype=out)
        for mode in (_C.SCALE_TENSOR, _C.SCALE_ROWWISE):
            kw = dict(scale_a=SCALE_A, scale_b=SCALE_B, scale_mode=mode)
            assert _C.gemm_workspace_size(a, b, d, **kw) >= 0
            assert _C.gemm_workspace_size(a, b, d, bias=BIAS, bias_mode=_C.BIAS_PER_COLUMN,
                                          activation=_C.ACTIVATION_RELU, alpha=0.5, **kw) >= 0
        # scales are optional for a dequantised D (alpha alone); tessera.matmul asks for both
        assert _C.gemm_workspace_size(a, b, d) >= 0


@pytest.mark.parametrize(
    "out_dtype, mutate, kwargs, pattern",
    [
        (_C.S32, lambda a, b, d: setattr(b, "dtype", _C.F16), {}, r"b\.dtype: must equal a\.dtype \(s8\), got f16"),
        (_C.F16, lambda a, b, d: setattr(a, "dtype", _C.F16), {}, r"b\.dtype: must equal a\.dtype \(f16\), got s8"),
        (_C.S32, lambda a, b, d: (setattr(a, "dtype", _C.S32), setattr(b, "dtype", _C.S32)), {},
         r"a\.dtype: s32 is an output type"),
        (_C.S8, None, {}, r"d\.dtype: s8 is an operand type"),
        (_C.S32, lambda a, b, d: (setattr(a, "dtype", _C.F16), setattr(b, "dtype", _C.F16)), {},
         r"d\.dtype: s32 is the output of s8 operands; a and b are f16"),
        (_C.S32, None, dict(alpha=2.0), r"alpha: must be 1 for an s32 D"),
        (_C.S32, None, dict(bias=BIAS, bias_mode=_C.BIAS_PER_COLUMN), r"bias_mode: an s32 D takes no bias"),
        (_C.S32, None, dict(activation=_C.ACTIVATION_RELU), r"activation: an s32 D takes none"),
        (_C.S32, None, dict(scale_a=SCALE_A, scale_b=SCALE_B, scale_mode=_C.SCALE_TENSOR),
         r"scale_mode: an s32 D takes the int32 sums as they are"),
        (_C.BF16, None, dict(scale_a=SCALE_A, scale_b=SCALE_B, scale_mode=7),
         r"scale_mode: must be none \(0\), tensor \(1\)"),
        (_C.BF16, None, dict(scale_a=SCALE_A), r"scale_a: must be null when scale_mode is none"),
        (_C.BF16, None, dict(scale_b=SCALE_B), r"scale_b: must be null when scale_mode is none"),
        (_C.BF16, None, dict(scale_b=SCALE_B, scale_mode=_C.SCALE_TENSOR),
         r"scale_a: null pointer with scale_mode tensor"),
        (_C.BF16, None, dict(scale_a=SCALE_A, scale_mode=_C.SCALE_ROWWISE),
         r"scale_b: null pointer with scale_mode row-wise \(N = 48 values\)"),
        (_C.BF16, None, dict(scale_a=SCALE_A + 2, scale_b=SCALE_B, scale_mode=_C.SCALE_ROWWISE),
         r"scale_a: not aligned to 4 bytes"),
        (_C.BF16, None, dict(scale_a=SCALE_A, scale_b=FAKE + (2 << 30) + 64, scale_mode=_C.SCALE_ROWWISE),
         r"scale_b: overlaps d in memory"),
        (_C.F16, lambda a, b, d: (setattr(a, "dtype", _C.F16), setattr(b, "dtype", _C.F16)),
         dict(scale_a=SCALE_A, scale_b=SCALE_B, scale_mode=_C.SCALE_TENSOR),
         r"scale_mode: scales dequantise s8 and fp8 operands; a and b are f16"),
        (_C.S32, None, dict(precision=_C.PRECISION_TF32),
         r"precision: tf32 and tf32x3 apply to f32 operands; a and b are s8"),
    ],
)
def test_gemm_int8_errors_raise_value_error_naming_the_argument(out_dtype, mutate, kwargs, pattern):
    a, b, d = int8_args(out_dtype=out_dtype)
    if mutate is not None:
        mutate(a, b, d)
    for call in (lambda: _C.gemm(a, b, d, **kwargs), lambda: _C.gemm_workspace_size(a, b, d, **kwargs),
                 lambda: _C.gemm_select_config(a, b, d, **kwargs)):
        with pytest.raises(ValueError, match=pattern) as info:
            call()
        assert str(info.value) == _C.last_error()


def test_gemm_int8_s32_d_rejects_beta_and_c():
    a, b, d = int8_args()
    c = mat(FAKE + (3 << 30), _C.S32, 64, 48)
    with pytest.raises(ValueError, match=r"beta: must be 0 for an s32 D"):
        _C.gemm(a, b, d, c, beta=1.0)
    assert _C.gemm_workspace_size(a, b, d, c, 1.0, 0.0) >= 0  # beta == 0: C is not read


# ---------------------------------------------------------------------- fp8 GEMM arguments
#
# The library's fp8 messages are matched by the argument they name (and _C.last_error()), not word for word.

FP8 = [_C.E4M3, _C.E5M2]


def fp8_args(m=64, n=48, k=64, dtype=_C.E4M3, out_dtype=_C.BF16, b_layout=_C.COL_MAJOR):
    """fp8 A (M x K, row-major) and B (K x N, column-major by default: both K-major, as the kernels read
    them) and D at made-up addresses."""
    a = mat(FAKE, dtype, m, k)
    b = mat(FAKE + (1 << 30), dtype, k, n, layout=b_layout)
    d = mat(FAKE + (2 << 30), out_dtype, m, n)
    return a, b, d


def test_fp8_codes_are_the_c_abis():
    assert (_C.E4M3, _C.E5M2) == (5, 6)
    assert (_C.PRECISION_DEFAULT, _C.PRECISION_TF32, _C.PRECISION_TF32X3, _C.PRECISION_FP8_FAST_ACCUM) == (0, 1, 2, 3)


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("m, n, k", [(64, 48, 64), (33, 17, 5), (1, 1, 1), (7, 129, 4096)])
def test_gemm_fp8_arguments_are_accepted(dtype, m, n, k):
    """fp8 operands (the same type) with an f16 / bf16 / f32 D: without scales (the plain sums) and with
    scales per tensor or row-wise, at either precision, with a bias and an activation; every entry
    validates them (without a device the workspace is a bound: an int >= 0)."""
    for out in (_C.F16, _C.BF16, _C.F32):
        for b_layout in (_C.COL_MAJOR, _C.ROW_MAJOR):
            a, b, d = fp8_args(m, n, k, dtype, out, b_layout)
            for precision in (_C.PRECISION_DEFAULT, _C.PRECISION_FP8_FAST_ACCUM):
                assert _C.gemm_workspace_size(a, b, d, precision=precision) >= 0
                for mode in (_C.SCALE_TENSOR, _C.SCALE_ROWWISE):
                    kw = dict(scale_a=SCALE_A, scale_b=SCALE_B, scale_mode=mode, precision=precision)
                    assert _C.gemm_workspace_size(a, b, d, **kw) >= 0
                    assert _C.gemm_workspace_size(a, b, d, bias=BIAS, bias_mode=_C.BIAS_PER_COLUMN,
                                                  activation=_C.ACTIVATION_RELU, alpha=0.5, **kw) >= 0


@pytest.mark.parametrize("dtype", FP8)
def test_gemm_fp8_workspace_bound_covers_k_major_copies(dtype):
    """The kernels read fp8 operands K-major only; the others are copied K-major into the workspace, so
    the device-free bound covers a K x N copy of a row-major B and an M x K copy of a column-major A."""
    m, n, k = 96, 80, 256
    a, b, d = fp8_args(m, n, k, dtype, b_layout=_C.ROW_MAJOR)
    assert _C.gemm_workspace_size(a, b, d) >= k * n
    a, b, d = fp8_args(m, n, k, dtype)
    a = mat(FAKE, dtype, m, k, layout=_C.COL_MAJOR)
    assert _C.gemm_workspace_size(a, b, d) >= m * k


def _set_dtypes(a_dtype, b_dtype):
    return lambda a, b, d: (setattr(a, "dtype", a_dtype), setattr(b, "dtype", b_dtype))


@pytest.mark.parametrize(
    "dtype, out_dtype, mutate, kwargs, pattern",
    [
        (_C.E4M3, _C.BF16, _set_dtypes(_C.E4M3, _C.E5M2), {}, r"^b\.dtype: must equal a\.dtype"),
        (_C.E5M2, _C.BF16, _set_dtypes(_C.E5M2, _C.E4M3), {}, r"^b\.dtype: must equal a\.dtype"),
        (_C.E4M3, _C.BF16, _set_dtypes(_C.E4M3, _C.F16), {}, r"^b\.dtype: must equal a\.dtype"),
        (_C.E4M3, _C.F16, _set_dtypes(_C.F16, _C.E4M3), {}, r"^b\.dtype: must equal a\.dtype"),
        (_C.E4M3, _C.E4M3, None, {}, r"^d\.dtype: "),
        (_C.E5M2, _C.E5M2, None, {}, r"^d\.dtype: "),
        (_C.E4M3, _C.S32, None, {}, r"^d\.dtype: "),
        (_C.E4M3, _C.BF16, None, dict(precision=_C.PRECISION_TF32), r"^precision: "),
        (_C.E5M2, _C.BF16, None, dict(precision=_C.PRECISION_TF32X3), r"^precision: "),
        (_C.F16, _C.F16, None, dict(precision=_C.PRECISION_FP8_FAST_ACCUM), r"^precision: "),
        (_C.BF16, _C.BF16, None, dict(precision=_C.PRECISION_FP8_FAST_ACCUM), r"^precision: "),
        (_C.F32, _C.F32, None, dict(precision=_C.PRECISION_FP8_FAST_ACCUM), r"^precision: "),
        (_C.S8, _C.S32, None, dict(precision=_C.PRECISION_FP8_FAST_ACCUM), r"^precision: "),
        (_C.E4M3, _C.BF16, None, dict(precision=7), r"^precision: "),
        (_C.E4M3, _C.BF16, None, dict(scale_a=SCALE_A, scale_b=SCALE_B, scale_mode=7), r"^scale_mode: "),
        (_C.E4M3, _C.BF16, None, dict(scale_a=SCALE_A), r"^scale_a: must be null when scale_mode is none"),
        (_C.E4M3, _C.BF16, None, dict(scale_b=SCALE_B, scale_mode=_C.SCALE_TENSOR), r"^scale_a: null pointer"),
        (_C.E5M2, _C.F32, None, dict(scale_a=SCALE_A, scale_mode=_C.SCALE_ROWWISE), r"^scale_b: null pointer"),
        (_C.E4M3, _C.BF16, None, dict(scale_a=SCALE_A + 2, scale_b=SCALE_B, scale_mode=_C.SCALE_ROWWISE),
         r"^scale_a: not aligned to 4 bytes"),
        (_C.E4M3, _C.BF16, None, dict(scale_a=SCALE_A, scale_b=FAKE + (2 << 30) + 64, scale_mode=_C.SCALE_ROWWISE),
         r"^scale_b: overlaps d in memory"),
    ],
)
def test_gemm_fp8_errors_raise_value_error_naming_the_argument(dtype, out_dtype, mutate, kwargs, pattern):
    a, b, d = fp8_args(dtype=dtype, out_dtype=out_dtype)
    if mutate is not None:
        mutate(a, b, d)
    for call in (lambda: _C.gemm(a, b, d, **kwargs), lambda: _C.gemm_workspace_size(a, b, d, **kwargs),
                 lambda: _C.gemm_select_config(a, b, d, **kwargs)):
        with pytest.raises(ValueError, match=pattern) as info:
            call()
        assert str(info.value) == _C.last_error()


def test_gemm_select_config_names_a_config_or_reports_no_device():
    try:
        name = _C.gemm_select_config(*gemm_args())
    except RuntimeError as e:  # no GPU here: a CUDA error, not an argument error
        assert "CUDA" in str(e) or "device" in str(e)
    else:
        assert name in [n for n, _ in tessera.configs()]


# ------------------------------------------------------------------------- attention arguments


@pytest.mark.parametrize(
    "over, pattern",
    [
        (dict(head_dim=80), r"head_dim: 80 is not supported \(supported: .*64"),
        (dict(heads_q=6, heads_kv=4), r"heads_kv: must divide heads_q"),
        (dict(q=0), r"q: null pointer"),
        (dict(o=0), r"o: null pointer"),
        (dict(k=FAKE + 8), r"k: must be 16-byte aligned"),
        (dict(dtype=_C.F32), r"dtype: must be f16 or bf16"),
        (dict(batch=0), r"batch: must be >= 1"),
        (dict(seqlen_k=0), r"seqlen_k: must be >= 1"),
        (dict(v_stride=(128 * 2 * 64, 2 * 64, 60)), r"v_stride\[2\] \(head\): must be a multiple of 8"),
        (dict(q_stride=(-8, 8 * 64, 64)), r"q_stride\[0\] \(batch\): must be >= 0"),
        (dict(o_stride=(0, 8 * 64, 64)), r"o_stride: batches, rows or heads of O overlap"),
        (dict(softmax_scale=-1.0), r"softmax_scale: must be finite and >= 0"),
        (dict(lse=FAKE + 2), r"lse: must be 4-byte aligned"),
        (dict(window_left=-2), r"window_left, window_right: must be >= 0, or -1 for unlimited \(got -2, -1\)"),
        (dict(window_right=-3, causal=True), r"window_left, window_right: must be >= 0, or -1 .*\(got -1, -3\)"),
        (dict(softcap=-1.0), r"softcap: must be finite and >= 0"),
        (dict(softcap=float("nan")), r"softcap: must be finite and >= 0"),
        (dict(softcap=float("inf")), r"softcap: must be finite and >= 0"),
    ],
)
def test_attention_argument_errors_raise_value_error_naming_the_argument(over, pattern):
    with pytest.raises(ValueError, match=pattern) as info:
        _C.attention(**attn_kwargs(**over))
    assert str(info.value) == _C.last_error()


def test_attention_strides_take_three_modes():
    with pytest.raises(TypeError):
        _C.attention(**attn_kwargs(q_stride=(1, 2)))


@pytest.mark.skipif(device_reachable(), reason="a CUDA device is visible: valid made-up pointers would be launched on")
def test_valid_arguments_without_a_device_raise_runtime_error():
    with pytest.raises(RuntimeError, match=r"CUDA|device"):
        _C.attention(**attn_kwargs())
    with pytest.raises(RuntimeError, match=r"CUDA|device"):
        _C.gemm(*gemm_args())
    with pytest.raises(RuntimeError, match=r"CUDA|device"):
        _C.gemm(*int8_args())
    with pytest.raises(RuntimeError, match=r"CUDA|device"):
        _C.gemm(*int8_args(out_dtype=_C.BF16), scale_a=SCALE_A, scale_b=SCALE_B, scale_mode=_C.SCALE_ROWWISE)
    for dtype in FP8:
        with pytest.raises(RuntimeError, match=r"CUDA|device"):
            _C.gemm(*fp8_args(dtype=dtype))
        with pytest.raises(RuntimeError, match=r"CUDA|device"):
            _C.gemm(*fp8_args(dtype=dtype, out_dtype=_C.F32), scale_a=SCALE_A, scale_b=SCALE_B,
                    scale_mode=_C.SCALE_TENSOR, precision=_C.PRECISION_FP8_FAST_ACCUM)


# ------------------------------------------------------------------------------ the decode bench


def test_decode_grid_and_its_bars():
    assert decode_bench.FULL == decode_bench.full_shapes((1, 4))
    with_8 = decode_bench.full_shapes((1, 4, 8))
    assert len(with_8) == len(decode_bench.FULL) * 3 // 2
    assert (8, 8, 8192, 64, 8, 128) in with_8

    def row(b, sq, sk, us, kv_mb, gbs, ratio=None):
        r = dict(batch=b, sq=sq, sk=sk, hq=64, hkv=8, d=128, tessera_us=us, kv_mb=kv_mb, gbs=gbs)
        if ratio is not None:
            r["ratio"] = ratio
        return r

    rows = [row(1, 1, 1024, 10.0, 4.2, 500.0, 0.8), row(1, 4, 1024, 12.0, 4.2, 450.0, 1.2),
            row(8, 1, 32768, 250.0, 1073.7, 4300.0, 2.0), row(8, 8, 32768, 400.0, 1073.7, 2700.0),
            row(32, 1, 8192, 260.0, 1073.7, 4150.0)]  # no SDPA anchor: not in the geomean
    lines = decode_bench.summary(rows, 4800.0)
    assert len(lines) == 3
    assert "geomean 1.265 over 2 shapes" in lines[0] and "lowest 0.800 (B1 Sq1 Sk1024 64/8 d128)" in lines[0]
    assert "lowest 86.5% of 4800 GB/s" in lines[1] and "B32 Sq1 Sk8192" in lines[1] and "over 2 shapes" in lines[1]
    assert "worst 1.60x" in lines[2] and "B8 Sq8 Sk32768" in lines[2] and "over 2 shapes" in lines[2]
    assert decode_bench.summary([], 4800.0) == []
