"""Timing of one library call as a user's eager step sees it, for the bench/gemm_*_torch.py scripts."""
import torch


def t_events(fn, iters=20, warm=5):
    """Median microseconds of one call between two CUDA events, after `warm` calls."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def middle(f, g):
    """t_events of f and g in three alternating rounds (both see the same clock and power history): the
    middle round of each."""
    tf, tg = [], []
    for _ in range(3):
        tf.append(t_events(f)); tg.append(t_events(g))
    tf.sort(); tg.sort()
    return tf[1], tg[1]
