"""PyTorch layer: custom ops ``torch.ops.tessera.{matmul, matmul_out, attention}`` and the public
``tessera.matmul`` / ``tessera.attention``.

The ops take tensors by ``data_ptr()`` and strides (no copies where the library accepts the layout),
run on the current CUDA stream of the inputs' device and allocate outputs and workspace through
PyTorch's caching allocator. They have fake (meta) implementations, so ``torch.compile``
(``fullgraph=True``) and CUDA-graph capture work. Forward only: no autograd formulas are registered.

Errors: ``ValueError`` for invalid arguments (the library's message names the argument and the rule),
``NotImplementedError`` for valid problems no kernel covers, ``RuntimeError`` for CUDA errors.

This module deliberately does not use ``from __future__ import annotations``: torch's schema
inference reads the annotations of the op functions as objects.
"""
import math
import operator
from typing import Optional, Tuple  # noqa: F401  (Tuple: op schemas)

import torch

from . import _C


def _torch_version() -> Tuple[int, int]:
    parts = torch.__version__.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


if _torch_version() < (2, 4) or not hasattr(torch.library, "custom_op"):
    raise ImportError(f"torch {torch.__version__} is too old: tessera's ops need torch >= 2.4 (torch.library.custom_op)")

Tensor = torch.Tensor

_DTYPE_CODE = {torch.float16: _C.F16, torch.bfloat16: _C.BF16, torch.float32: _C.F32}
# The GEMM's dtypes: also int8 operands and the exact int32 output of int8 operands, and fp8 operands.
_GEMM_DTYPE_CODE = {**_DTYPE_CODE, torch.int8: _C.S8, torch.int32: _C.S32, torch.float8_e4m3fn: _C.E4M3,
                    torch.float8_e5m2: _C.E5M2}


def _dtype_code(dtype: torch.dtype, what: str) -> int:
    code = _DTYPE_CODE.get(dtype)
    if code is None:
        raise ValueError(f"{what}: dtype {dtype} is not supported by tessera (float16, bfloat16, float32)")
    return code


def _gemm_dtype_code(dtype: torch.dtype, what: str) -> int:
    code = _GEMM_DTYPE_CODE.get(dtype)
    if code is None:
        raise ValueError(f"{what}: dtype {dtype} is not supported by tessera's GEMM (float16, bfloat16, float32; "
                         "int8 operands with an int32, or dequantised, output; float8_e4m3fn or float8_e5m2 "
                         "operands with a float16, bfloat16 or float32 output)")
    return code


def _check_device(name: str, t: Tensor, device: torch.device) -> None:
    if t.device.type != "cuda":
        raise ValueError(f"{name}: must be a CUDA tensor (got one on {t.device})")
    if t.device != device:
        raise ValueError(f"{name}: is on {t.device} but the first input is on {device}")


class _on_device:
    """Makes `device` current while the library runs (it launches on the current device)."""

    def __init__(self, device: torch.device):
        idx = device.index if device.index is not None else torch.cuda.current_device()
        self._guard = torch.cuda.device(idx) if idx != torch.cuda.current_device() else None

    def __enter__(self):
        if self._guard is not None:
            self._guard.__enter__()
        return self

    def __exit__(self, *exc):
        if self._guard is not None:
            self._guard.__exit__(*exc)
        return False


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


# ------------------------------------------------------------------------------- the eager path
#
# An eager call (plain tensors, not traced, no autograd) skips the custom-op dispatch: one crossing
# into the library (_C.matmul_tensors / attention_tensors) reads the tensors, validates, plans and
# launches. Anything that crossing does not handle comes back as -1 and takes the general path
# (the custom op), which computes the same and raises the same errors.

_C.set_torch_dtypes(torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.int32, torch.float8_e4m3fn,
                    torch.float8_e5m2)
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None)
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _eager(a: Tensor, b: Tensor) -> bool:
    """True where the custom op would only run its implementation: real tensors, no tracing, no
    dispatch mode (FakeTensorMode, make_fx, FlopCounterMode...) and nothing for autograd to record."""
    # is_compiling() first: Dynamo folds it to True, so it never traces the torch._C calls after it
    # (which it cannot, and fullgraph=True would fail).
    return (not _is_compiling() and type(a) is Tensor and type(b) is Tensor and _raw_stream is not None
            and _dispatch_modes is not None and _dispatch_modes() == 0
            and not ((a.requires_grad or b.requires_grad) and torch.is_grad_enabled()))


# Workspace (split-K / stream-K partials, padded copies) of eager calls: one buffer per (device,
# stream), grown on demand and reused by later calls on that stream, which run after the earlier
# ones (the library's workspace contract: one per concurrently running call). Calls captured into a
# CUDA graph get their own from the caching allocator (the graph's pool), since a replay may run
# beside later eager calls. Buffers above _WS_CACHE_MAX are not kept.
_WS_CACHE_MAX = 64 << 20
_ws_cache = {}
_NO_WS = (0, 0, None)


def clear_workspace_cache() -> None:
    """Releases the workspace buffers tessera keeps for eager calls (to torch's caching allocator)."""
    _ws_cache.clear()


def _with_workspace(t: Tensor, launch) -> bool:
    """Runs an eager entry, launch(stream, workspace, workspace_bytes, workspace_cached) -> 0 (launched),
    -1 (the general path must) or the workspace bytes it needs, with this stream's cached workspace,
    allocating (and caching) a larger one when asked; False when the general path must run."""
    dev = t.get_device()
    if dev < 0:  # not a CUDA tensor: the general path says why (and a driverless host has no stream to ask for)
        return False
    stream = _raw_stream(dev)
    key = (dev, stream)
    ws_ptr, ws_bytes, _ = _ws_cache.get(key, _NO_WS)
    need = launch(stream, ws_ptr, ws_bytes, True)
    if need <= 0:
        return need == 0
    ws = torch.empty(need, dtype=torch.uint8, device=t.device)
    if need <= _WS_CACHE_MAX and not torch.cuda.is_current_stream_capturing():
        _ws_cache[key] = (ws.data_ptr(), need, ws)
    return launch(stream, ws.data_ptr(), need, False) == 0


def _matmul_eager(a, b, c, alpha, beta, bias, act, d, max_sms, precision=0, scale_a=None, scale_b=None) -> int:
    """Runs d = act(alpha a @ b + beta c + bias) by the eager path: 0 when launched, -1 when the general
    path must.
    _with_workspace written out: the cached-workspace hit is the whole of a small matmul's host cost."""
    dev = a.get_device()
    if dev < 0:  # as in _with_workspace
        return -1
    stream = _raw_stream(dev)
    ws_ptr, ws_bytes, _ = _ws_cache.get((dev, stream), _NO_WS)
    need = _C.matmul_tensors(a, b, c, d, alpha, beta, bias, act, ws_ptr, ws_bytes, True, stream, max_sms, precision,
                             scale_a, scale_b)
    if need <= 0:
        return need
    return 0 if _with_workspace(a, lambda stream, ws, ws_bytes, cached: _C.matmul_tensors(
        a, b, c, d, alpha, beta, bias, act, ws, ws_bytes, cached, stream, max_sms, precision, scale_a, scale_b)) else -1


def _attention_eager(q, k, v, o, lse, causal, scale, bshd, max_sms, window_left, window_right, softcap) -> bool:
    """Runs attention by the eager path; False when the general path must."""
    return _with_workspace(q, lambda stream, ws, ws_bytes, cached: _C.attention_tensors(
        q, k, v, o, lse, causal, scale, bshd, stream, max_sms, ws, ws_bytes, cached, window_left, window_right,
        softcap))


# ---------------------------------------------------------------------------------------- GEMM


def _matrix(t: Tensor, dtype_code: int) -> Optional["_C.Matrix"]:
    """The last two modes of a 2-D/3-D tensor as a tessera matrix, or None when they are neither
    row-major (strides (ld, 1), ld >= cols) nor column-major (strides (1, ld), ld >= rows).
    A 3-D tensor's first mode becomes the batch (batch_stride = its stride; 0 broadcasts)."""
    rows, cols = t.shape[-2], t.shape[-1]
    sr, sc = t.stride(-2), t.stride(-1)
    if t.dim() == 3 and t.shape[0] > 1:
        batch, batch_stride = t.shape[0], t.stride(0)
    else:
        batch, batch_stride = 1, 0
    # A mode of extent <= 1 never moves, so its stride does not matter.
    if (sc == 1 or cols <= 1) and (rows <= 1 or sr >= max(1, cols)):
        layout, ld = _C.ROW_MAJOR, (sr if rows > 1 else max(1, cols))
    elif (sr == 1 or rows <= 1) and (cols <= 1 or sc >= max(1, rows)):
        layout, ld = _C.COL_MAJOR, (sc if cols > 1 else max(1, rows))
    else:
        return None
    return _C.Matrix(t.data_ptr(), dtype_code, rows, cols, ld, layout, batch, batch_stride)


def _input_matrix(name: str, t: Tensor) -> Tuple[Tensor, "_C.Matrix"]:
    """Describes an input operand, copying it to a contiguous tensor only when its strides have no
    row/column-major form (e.g. both matrix strides != 1). Returns the tensor actually read."""
    code = _gemm_dtype_code(t.dtype, name)
    m = _matrix(t, code)
    if m is None:
        t = t.contiguous()
        m = _matrix(t, code)
    return t, m


def _matmul_shape(a: Tensor, b: Tensor) -> Tuple[int, ...]:
    if a.dim() not in (2, 3):
        raise ValueError(f"a: must be 2-D (M, K) or 3-D (L, M, K), got shape {tuple(a.shape)}")
    if b.dim() not in (2, 3):
        raise ValueError(f"b: must be 2-D (K, N) or 3-D (L, K, N), got shape {tuple(b.shape)}")
    m, n = a.shape[-2], b.shape[-1]
    if a.dim() == 2 and b.dim() == 2:
        return (m, n)
    la = a.shape[0] if a.dim() == 3 else 1
    lb = b.shape[0] if b.dim() == 3 else 1
    if la != lb and la != 1 and lb != 1:
        raise ValueError(f"a, b: batch sizes {la} and {lb} do not broadcast (equal, or one of them 1)")
    return (lb if la == 1 else la, m, n)


_INT8, _INT32 = torch.int8, torch.int32
_FP8 = frozenset((torch.float8_e4m3fn, torch.float8_e5m2))
# Operands whose output dtype is not their own -> their default output without scales (with scales:
# bfloat16). A dict: its lookup is the cheapest membership test a 16-bit call pays for in matmul().
_QUANTISED = {_INT8: _INT32, torch.float8_e4m3fn: torch.bfloat16, torch.float8_e5m2: torch.bfloat16}
_DEQUANTISED = (torch.bfloat16, torch.float16, torch.float32)  # outputs of int8 operands with scales, and of fp8


def _check_scale_types(scale_a, scale_b) -> None:
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s is not None and not isinstance(s, Tensor):
            raise TypeError(f"{name}: must be a float32 CUDA tensor (or None), got {type(s).__name__}")


def _scale_mode(scale_a, scale_b, m: int, n: int, k: int, fp8: bool) -> int:
    """The library's scale mode of int8 / fp8 dequantisation scales, checked: _C.SCALE_TENSOR for one
    element each; _C.SCALE_ROWWISE for scale_a (M,) / (M, 1) (a row of a each) and scale_b (N,) / (1, N)
    (a column of b each), where one of them may also be a single element (broadcast); for fp8 operands
    _C.SCALE_BLOCK for scale_a (M, ceil(K/128)) (a row and 128-deep block of K each) and scale_b
    (ceil(K/128), ceil(N/128)) (a 128 x 128 block of b each)."""
    if scale_a is None or scale_b is None:
        given, missing = ("scale_a", "scale_b") if scale_b is None else ("scale_b", "scale_a")
        raise ValueError(f"{missing}: missing; dequantisation takes scale_a and scale_b together "
                         f"(got {given} alone)")
    _check_scale_types(scale_a, scale_b)
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32:
            raise ValueError(f"{name}: must be float32, got {s.dtype}")
    one_a, one_b = scale_a.numel() == 1, scale_b.numel() == 1
    if one_a and one_b:
        return _C.SCALE_TENSOR
    kb, nb = -(-k // _C.SCALE_BLOCK_K), -(-n // _C.SCALE_BLOCK_K)
    rows_a = one_a or tuple(scale_a.shape) in ((m,), (m, 1))
    rows_b = one_b or tuple(scale_b.shape) in ((n,), (1, n))
    if rows_a and rows_b:
        return _C.SCALE_ROWWISE
    if fp8 and tuple(scale_a.shape) == (m, kb) and tuple(scale_b.shape) == (kb, nb):
        return _C.SCALE_BLOCK
    block = (f" or, block-wise (fp8 operands), scale_a ({m}, {kb}) with scale_b ({kb}, {nb})" if fp8 else "")
    if not rows_a and not (fp8 and tuple(scale_a.shape) == (m, kb)):
        raise ValueError(f"scale_a: must have one element (per tensor) or shape ({m},) or ({m}, 1) (one per row "
                         f"of a, M = {m}){block}, got shape {tuple(scale_a.shape)}")
    raise ValueError(f"scale_b: must have one element (per tensor) or shape ({n},) or (1, {n}) (one per "
                     f"column of b, N = {n}){block}, with scale_a of shape {tuple(scale_a.shape)}; got shape "
                     f"{tuple(scale_b.shape)}")


_FAST_ACCUM = _C.PRECISION_FP8_FAST_ACCUM
_TF32_PRECISIONS = (_C.PRECISION_TF32, _C.PRECISION_TF32X3)


def _fast_accum_error(dtype: torch.dtype) -> ValueError:
    return ValueError(f"precision: 'fast_accum' applies to fp8 operands (torch.float8_e4m3fn, torch.float8_e5m2); "
                      f"a and b are {dtype} (leave precision None)")


def _output_dtype(a: Tensor, b: Tensor, out_dtype: Optional[torch.dtype], scale_a: Optional[Tensor],
                  scale_b: Optional[Tensor], shape: Tuple[int, ...], what: str = "out_dtype",
                  precision: int = 0) -> torch.dtype:
    """The dtype of a @ b: out_dtype, else a's dtype; for int8 operands torch.int32 (the exact sums) or,
    dequantised by scale_a and scale_b, bfloat16 (float16 or float32 allowed); for fp8 operands bfloat16
    (float16 or float32 allowed), scales optional. Checks the int8 and fp8 rules in torch's terms, and
    which operands take precision 'fast_accum' (fp8 only) and 'tf32' / 'tf32x3' (not fp8), where the
    library checks the rest; `what` names the output dtype's source in errors."""
    scaled = scale_a is not None or scale_b is not None
    if not scaled and a.dtype not in _QUANTISED and b.dtype not in _QUANTISED:
        if precision == _FAST_ACCUM:
            raise _fast_accum_error(a.dtype)
        return a.dtype if out_dtype is None else out_dtype
    if a.dtype != b.dtype:
        kind = ("fp8 operands: both torch.float8_e4m3fn or both torch.float8_e5m2" if a.dtype in _FP8 or b.dtype in _FP8
                else "int8 operands: both int8")
        raise ValueError(f"b.dtype: must equal a.dtype ({a.dtype}), got {b.dtype} ({kind})")
    if a.dtype in _FP8:
        if precision in _TF32_PRECISIONS:
            raise ValueError(f"precision: 'tf32' and 'tf32x3' apply to float32 operands; a and b are {a.dtype} "
                             "(None: sums promoted to fp32 every 128 K, or 'fast_accum')")
        if scaled:
            _scale_mode(scale_a, scale_b, shape[-2], shape[-1], a.shape[-1], True)
        if out_dtype is None:
            return torch.bfloat16
        if out_dtype not in _DEQUANTISED:
            raise ValueError(f"{what}: fp8 operands give bfloat16 (the default), float16 or float32, got {out_dtype}")
        return out_dtype
    if a.dtype != _INT8:
        raise ValueError(f"scale_a, scale_b: dequantise int8 or fp8 operands; a and b are {a.dtype} "
                         "(leave them None)")
    if precision == _FAST_ACCUM:
        raise _fast_accum_error(a.dtype)
    if not scaled:
        if out_dtype is not None and out_dtype != _INT32:
            raise ValueError(f"{what}: int8 operands without scales give the exact int32 sums (torch.int32), got "
                             f"{out_dtype}; pass scale_a and scale_b to dequantise to bfloat16, float16 or float32")
        return _INT32
    _scale_mode(scale_a, scale_b, shape[-2], shape[-1], a.shape[-1], False)
    if out_dtype is None:
        return torch.bfloat16
    if out_dtype not in _DEQUANTISED:
        raise ValueError(f"{what}: int8 operands dequantised by scale_a and scale_b give bfloat16, float16 or "
                         f"float32, got {out_dtype} (torch.int32, the exact sums, takes no scales)")
    return out_dtype


def _scale_args(scale_a: Optional[Tensor], scale_b: Optional[Tensor], device: torch.device, m: int, n: int, k: int,
                fp8: bool):
    """The library's scale keywords (scale_a, scale_b pointers, scale_mode, and for block scales their
    strides) and the tensors they point into (to keep alive): fp32 on `device`; row-wise vectors
    contiguous, a single element beside a vector broadcast to M or N values; block scales row- or
    column-major as given, else made contiguous. SCALE_NONE without scales."""
    if scale_a is None and scale_b is None:
        return dict(scale_a=0, scale_b=0, scale_mode=_C.SCALE_NONE), ()
    mode = _scale_mode(scale_a, scale_b, m, n, k, fp8)
    _check_device("scale_a", scale_a, device)
    _check_device("scale_b", scale_b, device)
    kw = dict(scale_mode=mode)
    if mode == _C.SCALE_ROWWISE:
        scale_a = (scale_a.reshape(m) if scale_a.numel() == m else scale_a.reshape(1).expand(m)).contiguous()
        scale_b = (scale_b.reshape(n) if scale_b.numel() == n else scale_b.reshape(1).expand(n)).contiguous()
    elif mode == _C.SCALE_BLOCK:  # the library reads a row- or column-major matrix at the given strides
        scale_a, scale_b = (s if _matrix(s, _C.F32) is not None else s.contiguous() for s in (scale_a, scale_b))
        kw.update(scale_a_strides=tuple(scale_a.stride()), scale_b_strides=tuple(scale_b.stride()))
    kw.update(scale_a=scale_a.data_ptr(), scale_b=scale_b.data_ptr())
    return kw, (scale_a, scale_b)


def _gemm_into(a: Tensor, b: Tensor, c: Optional[Tensor], alpha: float, beta: float, d: Tensor,
               bias: Optional[Tensor] = None, activation: int = 0, max_sms: int = 0, precision: int = 0,
               scale_a: Optional[Tensor] = None, scale_b: Optional[Tensor] = None) -> None:
    """d = act(alpha * a @ b + beta * c + bias), d of shape _matmul_shape(a, b); bias (N,) is added to
    every row of every batch; activation is a tessera activation code (_C.ACTIVATION_*). int8 or fp8 a
    and b: scale_a and scale_b (checked by _output_dtype) dequantise the sums, shared by every batch."""
    device = a.device
    _check_device("a", a, device)
    _check_device("b", b, device)
    _check_device("out", d, device)
    if beta != 0.0 and c is not None:
        _check_device("c", c, device)
    if bias is not None:
        _check_device("bias", bias, device)
    scales, _keep = _scale_args(scale_a, scale_b, device, d.shape[-2], d.shape[-1], a.shape[-1], a.dtype in _FP8)
    if d.numel() == 0:
        return
    bias_ptr, bias_mode = 0, _C.BIAS_NONE
    if bias is not None:
        # The library reads the bias in D's dtype, as one contiguous vector shared by the batches.
        bias = bias.to(dtype=d.dtype).contiguous()
        bias_ptr, bias_mode = bias.data_ptr(), _C.BIAS_PER_COLUMN
    a, ma = _input_matrix("a", a)
    b, mb = _input_matrix("b", b)
    mc = None
    if beta != 0.0 and c is not None:  # like BLAS, C is not read when beta == 0
        try:
            c_full = c.expand(d.shape)
        except RuntimeError:
            raise ValueError(f"c: shape {tuple(c.shape)} does not broadcast to the output shape {tuple(d.shape)}") from None
        c, mc = _input_matrix("c", c_full)
    d_code = _gemm_dtype_code(d.dtype, "out")
    md = _matrix(d, d_code)
    target = d
    # An output view with no row/column-major form, or a column-major one for block scales (which
    # write a row-major D): compute densely, then copy.
    if md is None or (scales["scale_mode"] == _C.SCALE_BLOCK and md.layout == _C.COL_MAJOR):
        target = torch.empty(d.shape, dtype=d.dtype, device=device)
        md = _matrix(target, d_code)
    epilogue = dict(bias=bias_ptr, bias_mode=bias_mode, activation=activation, precision=precision, **scales)
    with _on_device(device):
        ws_bytes = _C.gemm_workspace_size(ma, mb, md, mc, alpha, beta, **epilogue)
        ws = torch.empty(ws_bytes, dtype=torch.uint8, device=device) if ws_bytes else None
        _C.gemm(ma, mb, md, mc, alpha, beta, workspace=ws.data_ptr() if ws is not None else 0,
                workspace_bytes=ws_bytes, stream=_stream(device), max_sms=max_sms, **epilogue)
    if target is not d:
        d.copy_(target)


# bias and activation come last with defaults, so calls written before they existed keep working; so
# do precision and the int8 / fp8 scales after them. out_dtype None: a's dtype; for int8 a and b, int32
# (the exact sums) or, with scale_a and scale_b, bfloat16; for fp8 a and b, bfloat16 (_output_dtype).
# precision: a _C.PRECISION_* code (PRECISION_FP8_FAST_ACCUM for fp8 operands only).
@torch.library.custom_op("tessera::matmul", mutates_args=())
def _matmul_op(a: Tensor, b: Tensor, c: Optional[Tensor], alpha: float, beta: float,
               out_dtype: Optional[torch.dtype], bias: Optional[Tensor] = None, activation: int = 0,
               max_sms: int = 0, precision: int = 0, scale_a: Optional[Tensor] = None,
               scale_b: Optional[Tensor] = None) -> Tensor:
    shape = _matmul_shape(a, b)
    d = torch.empty(shape, dtype=_output_dtype(a, b, out_dtype, scale_a, scale_b, shape, precision=precision),
                    device=a.device)
    _gemm_into(a, b, c, alpha, beta, d, bias, activation, max_sms, precision, scale_a, scale_b)
    return d


@_matmul_op.register_fake
def _matmul_fake(a, b, c, alpha, beta, out_dtype, bias=None, activation=0, max_sms=0, precision=0, scale_a=None,
                 scale_b=None):
    shape = _matmul_shape(a, b)
    return a.new_empty(shape, dtype=_output_dtype(a, b, out_dtype, scale_a, scale_b, shape, precision=precision))


@torch.library.custom_op("tessera::matmul_out", mutates_args=("d",))
def _matmul_out_op(a: Tensor, b: Tensor, c: Optional[Tensor], alpha: float, beta: float, d: Tensor,
                   bias: Optional[Tensor] = None, activation: int = 0, max_sms: int = 0, precision: int = 0,
                   scale_a: Optional[Tensor] = None, scale_b: Optional[Tensor] = None) -> None:
    shape = _matmul_shape(a, b)
    if tuple(d.shape) != tuple(shape):
        raise ValueError(f"out: must have shape {tuple(shape)}, got {tuple(d.shape)}")
    _output_dtype(a, b, d.dtype, scale_a, scale_b, shape, "out.dtype", precision)
    _gemm_into(a, b, c, alpha, beta, d, bias, activation, max_sms, precision, scale_a, scale_b)


@_matmul_out_op.register_fake
def _matmul_out_fake(a, b, c, alpha, beta, d, bias=None, activation=0, max_sms=0, precision=0, scale_a=None,
                     scale_b=None):
    _output_dtype(a, b, d.dtype, scale_a, scale_b, _matmul_shape(a, b), "out.dtype", precision)
    return None


def matmul(a: Tensor, b: Tensor, *, c: Optional[Tensor] = None, alpha: float = 1.0, beta: float = 0.0,
           bias: Optional[Tensor] = None, activation: Optional[str] = None, out: Optional[Tensor] = None,
           out_dtype: Optional[torch.dtype] = None, max_sms: int = 0, precision: Optional[str] = None,
           scale_a: Optional[Tensor] = None, scale_b: Optional[Tensor] = None) -> Tensor:
    """``D = act(alpha * a @ b + beta * c + bias)`` on tensor cores (fp32 accumulation, one rounding).

    a: (M, K) or (L, M, K); b: (K, N) or (L, K, N); float16, bfloat16 or float32 (the same), int8
    (both) or fp8 (both torch.float8_e4m3fn or both torch.float8_e5m2); int8 and fp8: see below. A 2-D
    operand (or a batch of 1) is broadcast over the other's batch. Any strides with a row-major
    (stride (ld, 1)) or column-major (stride (1, ld)) form are read in place, transposed views
    included; other strides (e.g. both != 1) are first copied with ``.contiguous()``.
    c: broadcastable to the output; its dtype must equal the output's; not read when beta == 0.
    out_dtype: the output dtype (default a.dtype; float32 allowed; for int8 and fp8 operands see
    below).
    out: write into this tensor (shape must match; its dtype is the output dtype) and return it; c may
    be out itself (in place).
    bias: (N,), added to every row of every batch (like nn.Linear), converted to the output dtype;
    activation: None, "relu", "gelu" (erf form, torch's default), "gelu_tanh" (F.gelu's
    approximate="tanh") or "silu", applied last. Both are fused into the GEMM's epilogue: computed
    in fp32 on the accumulators, no extra pass over the output.
    max_sms: an SM budget (0 = every SM): the GEMM runs on at most this many SMs at once and none of
    its CTAs waits for another, so it finishes beside kernels that hold the other SMs (NCCL).
    precision: for float32 operands "tf32" (the default: products of tf32-rounded operands, like
    torch with ``allow_tf32``) or "tf32x3" (each operand split into tf32 high and low parts, three
    products: about fp32 accuracy at three times the tensor-core work); for fp8 operands
    "fast_accum" (see below); None (the default) for any operands.

    int8 operands (a and b both torch.int8; products summed exactly in int32):

    - without scales: returns the int32 sums as they are (torch.int32, like ``torch._int_mm``, batched
      and with any strides above); out_dtype must be None or torch.int32, and alpha 1, beta 0, no bias
      and no activation (exact sums only).
    - with ``scale_a`` and ``scale_b`` (both, float32 CUDA tensors on a's device; W8A8
      dequantisation): returns ``act(alpha * scale_a * scale_b * (a @ b) + beta * c + bias)``, the
      int32 sums converted to fp32 and scaled in the epilogue, in out_dtype: torch.bfloat16 (the
      default), torch.float16 or torch.float32; c and bias in that dtype as above. Per tensor: one
      element each. Row-wise: scale_a of shape (M,) or (M, 1), one per row of a, and scale_b of shape
      (N,) or (1, N), one per column of b (a single element beside a vector is broadcast). The scales
      are shared by every batch; strided ones are made contiguous.

    fp8 operands (a and b both torch.float8_e4m3fn or both torch.float8_e5m2; Hopper (sm_90) only,
    ``NotImplementedError`` on other GPUs): returns ``act(alpha * scale_a * scale_b * (a @ b) + beta
    * c + bias)`` in out_dtype: torch.bfloat16 (the default), torch.float16 or torch.float32 (never an
    fp8 or integer dtype). The scales are optional (without them, the plain sums); given, both, as
    for int8 above (per tensor, like ``torch._scaled_mm``'s, or row-wise), or block-wise (DeepSeek-V3's
    recipe): scale_a of shape (M, ceil(K/128)), one per row of a and 128-deep block of K, and scale_b
    of shape (ceil(K/128), ceil(N/128)), one per 128 x 128 block of b, row- or column-major as they are
    (shared by every batch; each block's sums are scaled as they are promoted, so fast_accum does not
    apply to them). The products are summed on
    the tensor cores and the sums promoted to fp32 every 128 elements of K (accurate at any K);
    precision="fast_accum" keeps the tensor cores' own accumulation along all of K instead (faster,
    less accurate at long K: ``torch._scaled_mm``'s ``use_fast_accum=True``). Any strides above work;
    operands that are not K-major (a column-major a, a row-major b) are first copied K-major into the
    workspace by the library.

    Runs on the current CUDA stream. Workspace (for operands that are not 16-byte aligned, and for
    split-K / stream-K where the heuristic cuts K) comes from PyTorch's caching allocator: in eager
    mode one buffer per stream, kept and reused (``clear_workspace_cache()`` releases them); in a
    CUDA-graph capture a new one per call. Eager calls on plain tensors go to the library in one
    call; traced, compiled or autograd-recording calls go through ``torch.ops.tessera.matmul``
    (``matmul_out``), which computes the same.
    """
    act = _ACTIVATIONS.get(activation, -1) if isinstance(activation, (str, type(None))) else -1
    if act < 0:
        names = sorted(k for k in _ACTIVATIONS if k is not None)
        raise ValueError(f"activation: must be None or one of {names} (got {activation!r})")
    prec = _PRECISIONS.get(precision, -1) if isinstance(precision, (str, type(None))) else -1
    if prec < 0:
        raise ValueError(f"precision: must be None, 'tf32', 'tf32x3' or 'fast_accum' (got {precision!r})")
    if _eager(a, b) and (out is None or out_dtype is None or out.dtype == out_dtype):
        if out is None:
            if out_dtype is None and a.dtype in _QUANTISED:  # int8: the int32 sums, or dequantised; fp8
                out_dtype = _QUANTISED[a.dtype] if scale_a is None and scale_b is None else torch.bfloat16
            shape = (a.shape[0], b.shape[1]) if a.dim() == 2 and b.dim() == 2 else _matmul_shape(a, b)
            # new_empty: a's device and dtype without parsing them again (torch.empty's keywords cost more)
            d = a.new_empty(shape) if out_dtype is None else a.new_empty(shape, dtype=out_dtype)
        else:
            d = out
        r = _matmul_eager(a, b, c, float(alpha), float(beta), bias, act, d, int(max_sms), prec, scale_a, scale_b)
        if r == 0:
            return d
    n = b.shape[-1]
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != n):
        raise ValueError(f"bias: must have shape ({n},) (N), got {tuple(bias.shape)}")
    if scale_a is not None or scale_b is not None:
        _check_scale_types(scale_a, scale_b)  # the ops' schema would reject other objects less clearly
    if out is not None:
        if out_dtype is not None and out.dtype != out_dtype:
            raise ValueError(f"out_dtype: {out_dtype} disagrees with out.dtype ({out.dtype})")
        torch.ops.tessera.matmul_out(a, b, c, float(alpha), float(beta), out, bias, act, int(max_sms), prec, scale_a,
                                     scale_b)
        return out
    return torch.ops.tessera.matmul(a, b, c, float(alpha), float(beta), out_dtype, bias, act, int(max_sms), prec,
                                    scale_a, scale_b)


# matmul's activation names -> the library's codes (tessera_activation_t).
_ACTIVATIONS = {
    None: _C.ACTIVATION_NONE,
    "relu": _C.ACTIVATION_RELU,
    "gelu": _C.ACTIVATION_GELU,
    "gelu_tanh": _C.ACTIVATION_GELU_TANH,
    "silu": _C.ACTIVATION_SILU,
}

# matmul's precision names -> the library's codes (tessera_precision_t).
_PRECISIONS = {None: _C.PRECISION_DEFAULT, "tf32": _C.PRECISION_TF32, "tf32x3": _C.PRECISION_TF32X3,
               "fast_accum": _C.PRECISION_FP8_FAST_ACCUM}


# ----------------------------------------------------------------------------------- attention


def _is_bshd(layout: str) -> bool:
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f"layout: must be 'bshd' or 'bhsd', got {layout!r}")
    return layout == "bshd"


def _attn_dims(q: Tensor, k: Tensor, v: Tensor, bshd: bool):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            want = "[B, S, H, D]" if bshd else "[B, H, S, D]"
            raise ValueError(f"{name}: must be 4-D {want}, got shape {tuple(t.shape)}")
    if bshd:
        batch, seqlen_q, heads_q, head_dim = q.shape
        seqlen_k, heads_kv = k.shape[1], k.shape[2]
    else:
        batch, heads_q, seqlen_q, head_dim = q.shape
        heads_kv, seqlen_k = k.shape[1], k.shape[2]
    return batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim


def _attn_strides(t: Tensor, bshd: bool) -> Tuple[int, int, int]:
    """(batch, sequence, head) strides; a mode of extent 1 gets stride 0 (it never moves)."""
    sizes = (t.shape[0], t.shape[1], t.shape[2]) if bshd else (t.shape[0], t.shape[2], t.shape[1])
    strides = (t.stride(0), t.stride(1), t.stride(2)) if bshd else (t.stride(0), t.stride(2), t.stride(1))
    return tuple(0 if n == 1 else s for n, s in zip(sizes, strides))


def _attn_outputs(q: Tensor, batch, heads_q, seqlen_q, return_lse: bool):
    o = q.new_empty(q.shape)  # same layout as q, contiguous
    lse_shape = (batch, heads_q, seqlen_q) if return_lse else (0,)
    return o, q.new_empty(lse_shape, dtype=torch.float32)


# The window and softcap come last, with defaults: calls written before them still work.
@torch.library.custom_op("tessera::attention", mutates_args=())
def _attention_op(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, return_lse: bool,
                  layout: str, max_sms: int = 0, window_left: int = -1, window_right: int = -1,
                  softcap: float = 0.0) -> Tuple[Tensor, Tensor]:
    bshd = _is_bshd(layout)
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim = _attn_dims(q, k, v, bshd)
    device = q.device
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_device(name, t, device)
    code = _dtype_code(q.dtype, "q")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{name}: dtype {t.dtype} must equal q's ({q.dtype})")
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"v: shape {tuple(v.shape)} must equal k's {tuple(k.shape)}")
    if k.shape[0] != batch or k.shape[3] != head_dim:
        raise ValueError(f"k: batch and head_dim must equal q's ({batch}, {head_dim}), got shape {tuple(k.shape)}")
    o, lse = _attn_outputs(q, batch, heads_q, seqlen_q, return_lse)
    if o.numel() == 0:  # no query rows: nothing to compute
        return o, lse
    # The kernels need a unit head-dim stride; other strides are passed as they are.
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    with _on_device(device):
        args = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), code, batch, seqlen_q, seqlen_k, heads_q,
                heads_kv, head_dim, _attn_strides(q, bshd), _attn_strides(k, bshd), _attn_strides(v, bshd),
                _attn_strides(o, bshd), lse.data_ptr() if return_lse else 0, scale, causal)
        # Decode shapes split the keys across CTAs through a workspace (from the caching allocator:
        # under a CUDA graph, the graph's pool).
        local = dict(window_left=window_left, window_right=window_right, softcap=softcap)
        need = _C.attention_workspace_size(*args, max_sms=max_sms, **local)
        ws = torch.empty(need, dtype=torch.uint8, device=device) if need else None
        _C.attention(*args, stream=_stream(device), max_sms=max_sms, workspace=ws.data_ptr() if need else 0,
                     workspace_bytes=need, **local)
    return o, lse


@_attention_op.register_fake
def _attention_fake(q, k, v, causal, scale, return_lse, layout, max_sms=0, window_left=-1, window_right=-1,
                    softcap=0.0):
    bshd = _is_bshd(layout)
    batch, seqlen_q, _, heads_q, _, _ = _attn_dims(q, k, v, bshd)
    return _attn_outputs(q, batch, heads_q, seqlen_q, return_lse)


def _window_softcap(window, softcap) -> Tuple[int, int, float]:
    """(window_left, window_right, softcap) of attention()'s keywords, checked, each error naming its argument."""
    bad_window = ValueError(f"window: must be a pair (left, right) of ints >= 0, or -1 for unlimited, got {window!r}")
    if not isinstance(window, (tuple, list)) or len(window) != 2 or any(isinstance(w, bool) for w in window):
        raise bad_window
    try:
        left, right = (operator.index(w) for w in window)  # ints, numpy ints; not floats
    except TypeError:
        raise bad_window from None
    if left < -1 or right < -1:
        raise bad_window
    try:
        cap = float(softcap)
    except (TypeError, ValueError):
        raise ValueError(f"softcap: must be a number, got {softcap!r}") from None
    if not (math.isfinite(cap) and cap >= 0.0):
        raise ValueError(f"softcap: must be finite and >= 0 (0 = none), got {softcap}")
    return left, right, cap


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, scale: Optional[float] = None,
              return_lse: bool = False, layout: str = "bshd", max_sms: int = 0, window: Tuple[int, int] = (-1, -1),
              softcap: float = 0.0):
    """Attention forward, ``O = softmax(scale * Q K^T [causal mask]) V``, FlashAttention-style.

    layout="bshd": q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D]; layout="bhsd": q [B, Hq, Sq, D],
    k/v [B, Hkv, Sk, D] (the torch SDPA layout). float16 or bfloat16; Hq a multiple of Hkv
    (GQA/MQA); head dims the library compiles (64, 96, 128, 256). Any batch/sequence/head strides
    are read in place (multiples of 8 elements); a head dim with stride != 1 is made contiguous.
    causal: query i sees keys j <= i + Sk - Sq (aligned bottom-right when Sq != Sk).
    window=(left, right): local attention, query i sees keys i' - left <= j <= i' + right with
    i' = i + Sk - Sq (bottom-right aligned, as causal); -1 leaves that side unlimited. With causal
    the right side is 0 (e.g. ``causal=True, window=(4095, -1)``: a sliding window of 4096 keys).
    softcap: > 0 caps the scaled scores, s -> softcap * tanh(s / softcap) (Gemma 2); 0 = none.
    scale: default 1/sqrt(D); must be > 0.
    max_sms: an SM budget (0 = every SM): at most this many SMs at once, no CTA waiting for another.
    Returns o (same shape and layout as q, a new contiguous tensor) or, with return_lse=True,
    (o, lse) where lse is float32 [B, Hq, Sq], the natural-log log-sum-exp of the scaled scores.
    Runs on the current CUDA stream. Eager calls on plain tensors go to the library in one call;
    traced, compiled or autograd-recording calls go through ``torch.ops.tessera.attention``, which
    computes the same.
    """
    bshd = _is_bshd(layout)
    if scale is None:
        s = 0.0  # the library's "1/sqrt(head_dim)"
    else:
        s = float(scale)
        if not (math.isfinite(s) and s > 0.0):
            raise ValueError(f"scale: must be a finite number > 0 (None = 1/sqrt(head_dim)), got {scale}")
    left, right, cap = _window_softcap(window, softcap)
    if _eager(q, k) and type(v) is Tensor and not (v.requires_grad and torch.is_grad_enabled()) and q.dim() == 4:
        o = q.new_empty(q.shape)
        lse = None
        if return_lse:
            b, h, sq = (q.shape[0], q.shape[2], q.shape[1]) if bshd else (q.shape[0], q.shape[1], q.shape[2])
            lse = q.new_empty((b, h, sq), dtype=torch.float32)
        if _attention_eager(q, k, v, o, lse, bool(causal), s, bshd, int(max_sms), left, right, cap):
            return (o, lse) if return_lse else o
    o, lse = torch.ops.tessera.attention(q, k, v, bool(causal), s, bool(return_lse), layout, int(max_sms), left, right,
                                         cap)
    return (o, lse) if return_lse else o
