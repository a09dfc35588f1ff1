"""tessera.attention_with_kvcache: attention of new query tokens against a KV cache (flash-attn's
flash_attn_with_kvcache), as the custom op ``torch.ops.tessera.attention_with_kvcache``."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _C
from ._torch import _check_device, _dtype_code, _on_device, _stream


def _strides(t: Tensor) -> Tuple[int, int, int]:
    """(outer, sequence, head) strides of a 4-D [outer, S, H, D] tensor."""
    return (t.stride(0), t.stride(1), t.stride(2))


@torch.library.custom_op("tessera::attention_with_kvcache", mutates_args=("k_cache", "v_cache"))
def _kvcache_op(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Tensor, k: Optional[Tensor],
                v: Optional[Tensor], block_table: Optional[Tensor], causal: bool, scale: float, window_left: int,
                window_right: int, softcap: float, return_lse: bool, max_sms: int = 0) -> Tuple[Tensor, Tensor]:
    device = q.device
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("cache_seqlens", cache_seqlens),
                    ("k", k), ("v", v), ("block_table", block_table)):
        if t is not None:
            _check_device(name, t, device)
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("k", k), ("v", v)):
        if t is not None and t.dim() != 4:
            raise ValueError(f"{name}: must be 4-D, got shape {tuple(t.shape)}")
    code = _dtype_code(q.dtype, "q")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("k", k), ("v", v)):
        if t is not None and t.dtype != q.dtype:
            raise ValueError(f"{name}: dtype {t.dtype} must equal q's ({q.dtype})")
    if tuple(v_cache.shape) != tuple(k_cache.shape):
        raise ValueError(f"v_cache: shape {tuple(v_cache.shape)} must equal k_cache's {tuple(k_cache.shape)}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(-1) != 1:  # written in place: it cannot be a copy
            raise ValueError(f"{name}: the head dim must be contiguous (stride 1), got strides {t.stride()}")
    batch, seqlen_q, heads_q, head_dim = q.shape
    heads_kv = k_cache.shape[2]
    if k_cache.shape[3] != head_dim:
        raise ValueError(f"k_cache: head_dim must equal q's ({head_dim}), got shape {tuple(k_cache.shape)}")
    if cache_seqlens.dtype != torch.int32 or tuple(cache_seqlens.shape) != (batch,):
        raise ValueError(f"cache_seqlens: must be int32 of shape ({batch},), got {cache_seqlens.dtype} "
                         f"{tuple(cache_seqlens.shape)}")
    if (k is None) != (v is None):
        raise ValueError("k, v: give both or neither")
    seqlen_new = 0
    if k is not None:
        if tuple(v.shape) != tuple(k.shape) or k.shape[0] != batch or k.shape[2:] != k_cache.shape[2:]:
            raise ValueError(f"k, v: must be [{batch}, S_new, {heads_kv}, {head_dim}], got {tuple(k.shape)} and "
                             f"{tuple(v.shape)}")
        seqlen_new = k.shape[1]
        k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (k, v))
    paged = {}
    if block_table is not None:
        if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != batch:
            raise ValueError(f"block_table: must be int32 [{batch}, max_pages], got {block_table.dtype} "
                             f"{tuple(block_table.shape)}")
        if block_table.stride(1) != 1:
            block_table = block_table.contiguous()
        paged = dict(block_table=block_table.data_ptr(), block_table_stride=block_table.stride(0),
                     max_pages=block_table.shape[1], num_pages=k_cache.shape[0], page_size=k_cache.shape[1])
    elif k_cache.shape[0] != batch:
        raise ValueError(f"k_cache: must be [{batch}, capacity, {heads_kv}, {head_dim}] (or paged with a block_table), "
                         f"got {tuple(k_cache.shape)}")
    q = q if q.stride(-1) == 1 else q.contiguous()
    o = q.new_empty(q.shape)
    lse = q.new_empty((batch, heads_q, seqlen_q) if return_lse else (0,), dtype=torch.float32)
    if o.numel() == 0:
        return o, lse
    args = dict(q=q.data_ptr(), k_cache=k_cache.data_ptr(), v_cache=v_cache.data_ptr(), o=o.data_ptr(), dtype=code,
                batch=batch, seqlen_q=seqlen_q, heads_q=heads_q, heads_kv=heads_kv, head_dim=head_dim,
                q_stride=_strides(q), o_stride=_strides(o), k_cache_stride=_strides(k_cache),
                v_cache_stride=_strides(v_cache), capacity=0 if paged else k_cache.shape[1],
                cache_seqlens=cache_seqlens.data_ptr(), lse=lse.data_ptr() if return_lse else 0,
                softmax_scale=scale, causal=causal, window_left=window_left, window_right=window_right,
                softcap=softcap, max_sms=max_sms, **paged)
    if k is not None:
        args.update(k_new=k.data_ptr(), v_new=v.data_ptr(), seqlen_new=seqlen_new, k_new_stride=_strides(k),
                    v_new_stride=_strides(v))
    with _on_device(device):
        # The key splits' workspace from the caching allocator (under a CUDA graph: the graph's pool).
        need = _C.attention_with_kvcache_workspace_size(**args)
        ws = torch.empty(need, dtype=torch.uint8, device=device) if need else None
        _C.attention_with_kvcache(**args, stream=_stream(device), workspace=ws.data_ptr() if need else 0,
                                  workspace_bytes=need)
    return o, lse


@_kvcache_op.register_fake
def _kvcache_fake(q, k_cache, v_cache, cache_seqlens, k, v, block_table, causal, scale, window_left, window_right,
                  softcap, return_lse, max_sms=0):
    batch, seqlen_q, heads_q, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((batch, heads_q, seqlen_q) if return_lse else (0,), dtype=torch.float32)


def attention_with_kvcache(q: Tensor, k_cache: Tensor, v_cache: Tensor, *, cache_seqlens, k: Optional[Tensor] = None,
                           v: Optional[Tensor] = None, block_table: Optional[Tensor] = None, causal: bool = False,
                           scale: Optional[float] = None, window: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                           return_lse: bool = False, max_sms: int = 0):
    """Attention of q against a KV cache, flash-attn's ``flash_attn_with_kvcache``.

    q [B, Sq, Hq, D] (few tokens: decode or a speculative draft; any Sq works). k_cache/v_cache either
    [B, capacity, Hkv, D] or, with ``block_table`` (int32 [B, max_pages]), paged [num_pages, page_size,
    Hkv, D] with page_size a multiple of 16 (a page size of 1 is not supported). ``cache_seqlens``: int32
    [B] (or an int for all) tokens already cached; not modified. ``k``/``v`` [B, S_new, Hkv, D], when given,
    are written into the cache in place at cache_seqlens[b] first; the attention then covers
    cache_seqlens[b] + S_new keys, with causal and ``window=(left, right)`` aligned bottom-right to that
    count (-1: unlimited). ``softcap`` > 0: scores become softcap * tanh(scaled score / softcap).
    Checked only on the device: cache_seqlens[b] is clamped to [0, capacity - S_new] and a block-table entry
    to [0, num_pages). Returns o [B, Sq, Hq, D] (or (o, lse) with lse float32 [B, Hq, Sq]). Runs on the
    current stream; CUDA-graph capturable (no host synchronisation).
    """
    if scale is None:
        s = 0.0
    else:
        s = float(scale)
        if not (math.isfinite(s) and s > 0.0):
            raise ValueError(f"scale: must be a finite number > 0 (None = 1/sqrt(head_dim)), got {scale}")
    if len(window) != 2:
        raise ValueError(f"window: must be (left, right), got {window!r}")
    left, right = (int(w) for w in window)
    if left < -1 or right < -1:
        raise ValueError(f"window: each side must be >= 0 or -1 (unlimited), got {window!r}")
    if not (math.isfinite(softcap) and softcap >= 0.0):
        raise ValueError(f"softcap: must be finite and >= 0 (0 = none), got {softcap}")
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((q.shape[0],), cache_seqlens, dtype=torch.int32, device=q.device)
    o, lse = torch.ops.tessera.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, k, v, block_table,
                                                      bool(causal), s, left, right, float(softcap), bool(return_lse),
                                                      int(max_sms))
    return (o, lse) if return_lse else o
