"""tessera: tensor-core GEMM and attention kernels (CuTe, sm_80 / sm_90) for Python and PyTorch.

Without PyTorch the package still imports: ``configs()``, ``status_string()``, ``__version__`` and the
low-level binding ``tessera._C`` (device pointers, sizes and streams as plain integers) work.
With PyTorch (>= 2.4) installed, ``import tessera`` also registers the custom ops
``torch.ops.tessera.matmul`` / ``matmul_out`` / ``attention`` / ``attention_with_kvcache`` /
``attention_varlen`` and ``tessera.matmul`` / ``tessera.attention`` / ``tessera.attention_with_kvcache`` /
``tessera.attention_varlen`` call them.
"""
from __future__ import annotations

from typing import List, Tuple

from . import _C

__version__: str = _C.__version__

# Library status codes (tessera_status_t).
STATUS_SUCCESS = _C.STATUS_SUCCESS
STATUS_INVALID_ARGUMENT = _C.STATUS_INVALID_ARGUMENT
STATUS_NOT_SUPPORTED = _C.STATUS_NOT_SUPPORTED
STATUS_CUDA_ERROR = _C.STATUS_CUDA_ERROR
STATUS_INTERNAL_ERROR = _C.STATUS_INTERNAL_ERROR


def configs() -> List[Tuple[str, str]]:
    """The compiled-in GEMM configurations as ``(name, description)`` pairs."""
    return list(_C.configs())


def status_string(code: int) -> str:
    """A short name for a library status code, e.g. ``status_string(1) == "invalid argument"``."""
    return _C.status_string(int(code))


try:  # The PyTorch layer is optional: guarded, so the package imports where torch is missing.
    from ._torch import attention, clear_workspace_cache, matmul  # noqa: F401  (registers torch.ops.tessera.*)
    from ._kvcache import attention_with_kvcache  # noqa: F401
    from ._varlen import attention_varlen  # noqa: F401

    _torch_import_error = None
except ImportError as _e:  # torch missing (or too old): keep the CPU-side API usable
    _torch_import_error = _e

    def matmul(*args, **kwargs):  # type: ignore[no-redef]
        """D = act(alpha * a @ b + beta * c + bias) (needs PyTorch >= 2.4; see tessera._torch.matmul)."""
        raise ImportError(f"tessera.matmul needs PyTorch >= 2.4: {_torch_import_error}")

    def attention(*args, **kwargs):  # type: ignore[no-redef]
        """Attention forward (needs PyTorch >= 2.4; see tessera._torch.attention)."""
        raise ImportError(f"tessera.attention needs PyTorch >= 2.4: {_torch_import_error}")

    def attention_with_kvcache(*args, **kwargs):  # type: ignore[no-redef]
        """Attention against a KV cache (needs PyTorch >= 2.4; see tessera._kvcache)."""
        raise ImportError(f"tessera.attention_with_kvcache needs PyTorch >= 2.4: {_torch_import_error}")

    def attention_varlen(*args, **kwargs):  # type: ignore[no-redef]
        """Attention over packed variable-length sequences (needs PyTorch >= 2.4; see tessera._varlen)."""
        raise ImportError(f"tessera.attention_varlen needs PyTorch >= 2.4: {_torch_import_error}")

    def clear_workspace_cache() -> None:  # type: ignore[no-redef]
        """Nothing is cached without PyTorch."""


def reread_environment() -> None:
    """Re-reads the TESSERA_* environment variables, which the library reads once per process, and
    drops its memoized launch plans (for tests and tools that change them in-process)."""
    _C.reread_environment()


__all__ = [
    "__version__",
    "attention",
    "attention_varlen",
    "attention_with_kvcache",
    "clear_workspace_cache",
    "configs",
    "matmul",
    "reread_environment",
    "status_string",
    "STATUS_SUCCESS",
    "STATUS_INVALID_ARGUMENT",
    "STATUS_NOT_SUPPORTED",
    "STATUS_CUDA_ERROR",
    "STATUS_INTERNAL_ERROR",
]
