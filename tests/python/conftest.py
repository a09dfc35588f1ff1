"""Shared helpers for the Python tests.

test_cpu.py needs neither torch nor a GPU (it runs in CI); test_torch_*.py skip with a reason when
torch, a CUDA device, or an sm_80+ device is missing.
"""
import importlib.util

import pytest


def torch_or_skip():
    """Imports torch, or skips the calling module when it is not installed."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed", allow_module_level=True)
    import torch

    return torch


def gpu_reason(torch):
    """Why the GPU tests cannot run here, or None when they can."""
    if not torch.cuda.is_available():
        return "no CUDA device visible to PyTorch"
    major, minor = torch.cuda.get_device_capability()
    if major < 8:
        return f"tessera's kernels need sm_80+, this GPU is sm_{major}{minor}"
    return None
