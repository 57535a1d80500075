"""Measuring on CPU or GPU (chapter 10): wall-clock time, peak memory, the matmul speed.

* :func:`time_call` - the median (or minimum) time of a function, waiting for the GPU;
* :func:`peak_memory` - the peak bytes of tensors alive while a function runs (exact on CUDA,
  counted operator by operator elsewhere);
* :func:`matmul_gflops` - the speed of a large matrix product: the practical FLOP/s ceiling;
* :func:`memory_bandwidth` - the speed of a large copy: bytes per second to and from memory.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, List, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .validation import positive_int

__all__ = ["time_call", "peak_memory", "matmul_gflops", "memory_bandwidth"]


def _check_function(fn) -> None:
    if not callable(fn):
        raise TypeError(
            f"fn must be a function without arguments, e.g. lambda: module(x); got {fn!r}"
        )


def _is_cuda(device) -> bool:
    return device is not None and torch.device(device).type == "cuda"


def _synchronize(device) -> None:
    if _is_cuda(device):
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], repeats: int = 5, warmup: int = 1,
              device: Optional[torch.device] = None,
              statistic: str = "median") -> float:
    """Wall-clock seconds of ``fn()``: the median (or ``statistic="min"``) of
    ``repeats`` calls, after ``warmup`` calls that are not timed.

    GPU work is asynchronous: pass ``device`` so the clock waits for CUDA
    kernels to finish. The median resists the odd slow call; on a busy shared
    machine the minimum is the better estimate of what the code itself costs.
    """
    _check_function(fn)
    if statistic not in ("median", "min"):
        raise ValueError(
            f"statistic must be 'median' or 'min', got {statistic!r}"
        )
    positive_int("repeats", repeats)
    if isinstance(warmup, bool) or not isinstance(warmup, int):
        raise TypeError(
            f"warmup must be an int >= 0, got {type(warmup).__name__} "
            f"({warmup!r}); e.g. warmup=1"
        )
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}; e.g. warmup=1")
    for _ in range(warmup):  # first calls pay for allocations, kernel choice
        fn()
    _synchronize(device)
    seconds: List[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _synchronize(device)
        seconds.append(time.perf_counter() - start)
    if statistic == "median":
        return statistics.median(seconds)
    return min(seconds)


class _TensorMemoryTracker(TorchDispatchMode):
    """Counts the bytes of the tensors PyTorch operators create, and their peak.

    Every operator call passes through ``__torch_dispatch__``; new storages among its outputs
    are recorded with a weak reference, and storages whose tensors were all freed are
    subtracted before the next call. Scratch buffers a kernel allocates and frees inside one
    call are not seen (for the CPU fused kernels these are small per-thread blocks).
    """

    def __init__(self):
        super().__init__()
        from torch.multiprocessing.reductions import StorageWeakRef

        self._weakref = StorageWeakRef
        self.live: dict = {}  # storage key -> (weak ref, bytes)
        self.current = 0
        self.peak = 0

    def _release_freed(self) -> None:
        for key, (ref, nbytes) in list(self.live.items()):
            if ref.expired():
                self.current -= nbytes
                del self.live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._release_freed()
        kwargs = kwargs or {}
        inputs = {leaf.untyped_storage().data_ptr()
                  for leaf in tree_leaves((args, kwargs))
                  if isinstance(leaf, torch.Tensor) and leaf.device.type != "meta"}
        out = func(*args, **kwargs)
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                storage = tensor.untyped_storage()
                key = storage.data_ptr()
                if key in self.live or key in inputs or storage.nbytes() == 0:
                    continue  # a view of memory that is already counted or existed before
                self.live[key] = (self._weakref(storage), storage.nbytes())
                self.current += storage.nbytes()
        self.peak = max(self.peak, self.current)
        return out


def peak_memory(fn: Callable[[], object],
                device: Optional[torch.device] = None) -> int:
    """Peak bytes of tensor memory allocated while ``fn()`` runs (beyond
    what existed before).

    On CUDA this is ``torch.cuda.max_memory_allocated`` (exact, including
    kernel scratch space). Elsewhere it counts the tensors created by PyTorch
    operators (including the ones kept for the backward pass); scratch space
    inside a single kernel call is not counted.
    """
    _check_function(fn)
    if _is_cuda(device):
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with _TensorMemoryTracker() as tracker:
        result = fn()  # keep the result alive until every operator was seen
    del result
    return tracker.peak


def matmul_gflops(size: int = 1024, repeats: int = 5,
                  device: Optional[torch.device] = None,
                  dtype: torch.dtype = torch.float32) -> float:
    """Measured GFLOP/s of a ``(size, size) @ (size, size)`` product in
    ``dtype``: the practical speed limit for matrix products.

    Measure in the dtype of the work you compare with (float32 and bfloat16
    run on different hardware units), at a size large enough that the
    product is not dominated by fixed costs (1,024 or more).
    """
    positive_int("size", size)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype must be a torch.dtype such as torch.float32, got {dtype!r}"
        )
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    seconds = time_call(lambda: a @ b, repeats=repeats, warmup=2,
                        device=device, statistic="min")
    return 2 * size**3 / seconds / 1e9


def memory_bandwidth(num_bytes: int = 2**26, repeats: int = 5,
                     device: Optional[torch.device] = None) -> float:
    """Measured GB/s of copying ``num_bytes`` from one tensor to another
    (bytes read + bytes written, per second): the roofline's memory slope.

    Use a size well beyond the CPU caches (the default, 64 MiB) so the copy
    reaches main memory.
    """
    positive_int("num_bytes", num_bytes)
    source = torch.zeros(max(num_bytes // 4, 1), device=device)
    target = torch.empty_like(source)
    seconds = time_call(lambda: target.copy_(source), repeats=repeats,
                        warmup=1, device=device, statistic="min")
    return 2 * source.numel() * 4 / seconds / 1e9
