"""tessera.attention_varlen: attention over a batch of sequences of different lengths packed along
one token dimension (flash-attn's flash_attn_varlen_func), as the custom op
``torch.ops.tessera.attention_varlen``.

Like ``_torch.py`` this module does not use ``from __future__ import annotations``: torch's schema
inference reads the op function's annotations as objects.
"""
import math
import operator
from typing import Optional, Tuple  # noqa: F401  (Tuple: the op's schema)

import torch

from . import _C
from ._torch import _check_device, _dtype_code, _on_device, _stream, _window_softcap

Tensor = torch.Tensor


def _varlen_dims(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int,
                 max_seqlen_k: int):
    """(batch, total_q, total_k, heads_q, heads_kv, head_dim), every shape and dtype rule checked
    (the op and its fake implementation both run it)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 3:
            want = "[total_q, Hq, D]" if name == "q" else "[total_k, Hkv, D]"
            raise ValueError(f"{name}: must be 3-D {want}, got shape {tuple(t.shape)}")
    total_q, heads_q, head_dim = q.shape
    total_k, heads_kv = k.shape[0], k.shape[1]
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{name}: dtype {t.dtype} must equal q's ({q.dtype})")
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"v: shape {tuple(v.shape)} must equal k's {tuple(k.shape)}")
    if k.shape[2] != head_dim:
        raise ValueError(f"k: head_dim must equal q's ({head_dim}), got shape {tuple(k.shape)}")
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if t.dtype != torch.int32 or t.dim() != 1 or t.shape[0] < 2:
            raise ValueError(f"{name}: must be int32 of shape (batch + 1,) with batch >= 1, got {t.dtype} "
                             f"{tuple(t.shape)}")
    if cu_seqlens_k.shape[0] != cu_seqlens_q.shape[0]:
        raise ValueError(f"cu_seqlens_k: must have cu_seqlens_q's length ({cu_seqlens_q.shape[0]}), got "
                         f"{cu_seqlens_k.shape[0]}")
    for name, m in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if m < 0:
            raise ValueError(f"{name}: must be >= 0, got {m}")
    return cu_seqlens_q.shape[0] - 1, total_q, total_k, heads_q, heads_kv, head_dim


def _strides(t: Tensor) -> Tuple[int, int]:
    """(token, head) strides of a [total, H, D] tensor; a mode of extent 1 gets 0 (it never moves)."""
    return tuple(0 if t.shape[i] == 1 else t.stride(i) for i in (0, 1))


def _outputs(q: Tensor, heads_q: int, total_q: int, return_lse: bool):
    return q.new_empty(q.shape), q.new_empty((heads_q, total_q) if return_lse else (0,), dtype=torch.float32)


@torch.library.custom_op("tessera::attention_varlen", mutates_args=())
def _varlen_op(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int,
               max_seqlen_k: int, causal: bool, scale: float, window_left: int, window_right: int, softcap: float,
               return_lse: bool, max_sms: int = 0) -> Tuple[Tensor, Tensor]:
    batch, total_q, total_k, heads_q, heads_kv, head_dim = _varlen_dims(q, k, v, cu_seqlens_q, cu_seqlens_k,
                                                                        max_seqlen_q, max_seqlen_k)
    device = q.device
    for name, t in (("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _check_device(name, t, device)
    code = _dtype_code(q.dtype, "q")
    o, lse = _outputs(q, heads_q, total_q, return_lse)
    if total_q == 0 or heads_q == 0 or head_dim == 0:  # no query rows: nothing to compute
        return o, lse
    if total_k == 0:  # no keys in any sequence: every row sees none (O = 0, LSE = -inf), no launch needed
        o.zero_()
        lse.fill_(-math.inf)
        return o, lse
    # The kernels need a unit head-dim stride (and cu_seqlens as plain int32 arrays); other strides are
    # passed as they are.
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    cu_seqlens_q, cu_seqlens_k = (t if t.stride(0) == 1 else t.contiguous() for t in (cu_seqlens_q, cu_seqlens_k))
    args = dict(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(), dtype=code,
                cu_seqlens_q=cu_seqlens_q.data_ptr(), cu_seqlens_k=cu_seqlens_k.data_ptr(), batch=batch,
                total_q=total_q, total_k=total_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                heads_q=heads_q, heads_kv=heads_kv, head_dim=head_dim, q_stride=_strides(q), k_stride=_strides(k),
                v_stride=_strides(v), o_stride=_strides(o), lse=lse.data_ptr() if return_lse else 0,
                softmax_scale=scale, causal=causal, window_left=window_left, window_right=window_right,
                softcap=softcap, max_sms=max_sms)
    with _on_device(device):
        # Workspace (none today) from the caching allocator: under a CUDA graph, the graph's pool.
        need = _C.attention_varlen_workspace_size(**args)
        ws = torch.empty(need, dtype=torch.uint8, device=device) if need else None
        _C.attention_varlen(**args, stream=_stream(device), workspace=ws.data_ptr() if need else 0,
                            workspace_bytes=need)
    return o, lse


@_varlen_op.register_fake
def _varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, window_left,
                 window_right, softcap, return_lse, max_sms=0):
    _, total_q, _, heads_q, _, _ = _varlen_dims(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    return _outputs(q, heads_q, total_q, return_lse)


def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int,
                     max_seqlen_k: int, *, causal: bool = False, scale: Optional[float] = None,
                     window: Tuple[int, int] = (-1, -1), softcap: float = 0.0, return_lse: bool = False,
                     max_sms: int = 0):
    """Attention over sequences of different lengths packed along one token dimension, flash-attn's
    ``flash_attn_varlen_func``.

    q [total_q, Hq, D]; k, v [total_k, Hkv, D]; float16 or bfloat16; Hq a multiple of Hkv (GQA/MQA);
    head dims the library compiles (64, 96, 128, 256). Token and head strides are read in place
    (multiples of 8 elements); a head dim with stride != 1 is made contiguous.
    cu_seqlens_q, cu_seqlens_k: int32 [B + 1] on q's device, the cumulative lengths: sequence b is
    q[cu_seqlens_q[b]:cu_seqlens_q[b + 1]] against k/v[cu_seqlens_k[b]:cu_seqlens_k[b + 1]] (cu[0] = 0,
    non-decreasing, cu[B] <= total; they may be the same tensor). Never read on the host: the call does
    not synchronise, and values that break those rules are clamped on the device (a sequence is read as
    the rows [clamp(cu[b], 0, total), clamp(cu[b + 1], that, total))), never read or written out of bounds.
    max_seqlen_q: at least the longest query sequence (rows of a longer one past it may stay unwritten);
    max_seqlen_k: the longest key sequence (flash-attn's argument; the kernels read each sequence's own).
    causal, window=(left, right), softcap, scale and max_sms as in ``tessera.attention``, each sequence on
    its own: bottom-right aligned to its lengths (query i sees keys j <= i + len_k - len_q under causal).
    A sequence with no query rows writes nothing; a row that sees no key (no keys, causal with
    len_q > len_k, a window outside them) gets zeros and LSE -inf. Rows outside every sequence are not
    written (their values are whatever the new output held).
    Returns o [total_q, Hq, D] (a new contiguous tensor) or, with return_lse=True, (o, lse) with lse
    float32 [Hq, total_q]. Runs on the current CUDA stream through ``torch.ops.tessera.attention_varlen``
    (fake implementation included: torch.compile(fullgraph=True), CUDA-graph capture).
    """
    if scale is None:
        s = 0.0  # the library's "1/sqrt(head_dim)"
    else:
        s = float(scale)
        if not (math.isfinite(s) and s > 0.0):
            raise ValueError(f"scale: must be a finite number > 0 (None = 1/sqrt(head_dim)), got {scale}")
    left, right, cap = _window_softcap(window, softcap)
    try:  # ints (numpy's too) and, under torch.compile, symbolic ints as they are
        mq, mk = (m if isinstance(m, (int, torch.SymInt)) and not isinstance(m, bool) else operator.index(m)
                  for m in (max_seqlen_q, max_seqlen_k))
    except TypeError:
        raise ValueError(f"max_seqlen_q, max_seqlen_k: must be ints, got {max_seqlen_q!r}, {max_seqlen_k!r}") from None
    o, lse = torch.ops.tessera.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, mq, mk, bool(causal), s, left,
                                                right, cap, bool(return_lse), int(max_sms))
    return (o, lse) if return_lse else o
