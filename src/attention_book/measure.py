"""Measuring on CPU or GPU (chapter 10): wall-clock time, peak memory, the matmul speed.

* :func:`time_call` - the median (or minimum) time of a function, waiting for the GPU;
* :func:`time_samples` and :class:`Timing` - every repeat's time, and what they say together:
  median, interquartile range (IQR) and whether the spread is too large to trust;
* :func:`compare` - several functions timed *interleaved* (one call of each per round), so a
  burst of load from another program slows all of them alike, and :func:`timing_warning` -
  the sentence to print next to a table whose timings were too noisy;
* :func:`peak_memory` - the peak bytes of tensors alive while a function runs (exact on CUDA,
  counted operator by operator elsewhere);
* :func:`matmul_gflops` - the speed of a large matrix product: the practical FLOP/s ceiling;
* :func:`memory_bandwidth` - the speed of a large copy: bytes per second to and from memory.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .validation import positive_int

__all__ = ["time_call", "time_samples", "Timing", "compare", "timing_warning", "timing_note",
           "NOISY_SPREAD", "peak_memory", "matmul_gflops", "memory_bandwidth"]

#: a timing whose IQR is more than this fraction of its median is flagged as noisy
NOISY_SPREAD = 0.25


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


def _check_counts(repeats, warmup) -> None:
    positive_int("repeats", repeats)
    if isinstance(warmup, bool) or not isinstance(warmup, int):
        raise TypeError(
            f"warmup must be an int >= 0, got {type(warmup).__name__} "
            f"({warmup!r}); e.g. warmup=1"
        )
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}; e.g. warmup=1")


def _one_call(fn, device) -> float:
    start = time.perf_counter()
    fn()
    _synchronize(device)
    return time.perf_counter() - start


@dataclass(frozen=True)
class Timing:
    """The times of several repeats of one call, and what they say together.

    ``median`` is the typical time (robust: a few interrupted repeats do not move it);
    ``q1`` and ``q3`` are the quartiles, ``iqr = q3 - q1`` the spread of the middle half of the
    repeats, ``spread = iqr / median``. On a quiet machine the spread is a few per cent; when
    other programs compete for the cores it grows, and a timing with ``spread > NOISY_SPREAD``
    is ``noisy``: print a warning next to it instead of trusting the number. ``best`` is the
    fastest repeat, the best estimate of what the code itself costs on a busy machine.
    """

    samples: tuple

    def __post_init__(self):
        if not self.samples:
            raise ValueError("a Timing needs at least one sample (seconds of one call)")

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        return min(self.samples)

    def _quartiles(self):
        if len(self.samples) < 2:
            return self.samples[0], self.samples[0]
        q1, _, q3 = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q1, q3

    @property
    def q1(self) -> float:
        return self._quartiles()[0]

    @property
    def q3(self) -> float:
        return self._quartiles()[1]

    @property
    def iqr(self) -> float:
        q1, q3 = self._quartiles()
        return q3 - q1

    @property
    def spread(self) -> float:
        """IQR as a fraction of the median (0.1 = the middle half spans 10% of the median)."""
        return self.iqr / self.median if self.median > 0 else 0.0

    @property
    def noisy(self) -> bool:
        return self.spread > NOISY_SPREAD

    def milliseconds(self, digits: int = 2) -> str:
        """``"1.81 ms (IQR 1.79-1.84)"``, with a warning sign when the timing is noisy."""
        text = (f"{self.median * 1e3:.{digits}f} ms (IQR {self.q1 * 1e3:.{digits}f}-"
                f"{self.q3 * 1e3:.{digits}f})")
        return text + (" ⚠" if self.noisy else "")


def time_samples(fn: Callable[[], object], repeats: int = 5, warmup: int = 1,
                 device: Optional[torch.device] = None) -> Timing:
    """Call ``fn()`` ``warmup`` times untimed, then ``repeats`` times timed; return the
    :class:`Timing` of the repeats (wall-clock seconds, waiting for CUDA when ``device`` is a GPU)."""
    _check_function(fn)
    _check_counts(repeats, warmup)
    for _ in range(warmup):  # first calls pay for allocations, kernel choice
        fn()
    _synchronize(device)
    return Timing(tuple(_one_call(fn, device) for _ in range(repeats)))


def time_call(fn: Callable[[], object], repeats: int = 5, warmup: int = 1,
              device: Optional[torch.device] = None,
              statistic: str = "median") -> float:
    """Wall-clock seconds of ``fn()``: the median (or ``statistic="min"``) of
    ``repeats`` calls, after ``warmup`` calls that are not timed.

    GPU work is asynchronous: pass ``device`` so the clock waits for CUDA
    kernels to finish. The median resists the odd slow call; on a busy shared
    machine the minimum is the better estimate of what the code itself costs.
    :func:`time_samples` keeps every repeat (and says whether they agree).
    """
    _check_function(fn)
    if statistic not in ("median", "min"):
        raise ValueError(
            f"statistic must be 'median' or 'min', got {statistic!r}"
        )
    timing = time_samples(fn, repeats, warmup, device)
    return timing.median if statistic == "median" else timing.best


def compare(calls: Dict[str, Callable[[], object]], repeats: int = 7,
            warmup: int = 1, device: Optional[torch.device] = None) -> Dict[str, Timing]:
    """Time several functions **interleaved**: after ``warmup`` untimed rounds, ``repeats``
    rounds of one call of each (in order), so a burst of load from another program hits all
    of them alike instead of the one that happened to run then. ``name -> Timing``.

    Compare medians only where the timings are not ``noisy`` (and say so where they are): two
    implementations whose IQRs overlap are not measurably different on that run.
    """
    if not isinstance(calls, dict) or not calls:
        raise TypeError(
            f"calls must be a non-empty dict name -> function without arguments, got {calls!r}"
        )
    for fn in calls.values():
        _check_function(fn)
    _check_counts(repeats, warmup)
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    _synchronize(device)
    samples: Dict[str, List[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            samples[name].append(_one_call(fn, device))
    return {name: Timing(tuple(values)) for name, values in samples.items()}


def timing_warning(timings: Sequence[Timing], what: str = "timings") -> str:
    """A sentence to print next to a table or plot of ``timings``: empty when every timing is
    steady, a warning that says how many are noisy otherwise (``what`` names them, plural)."""
    timings = list(timings)
    noisy = [t for t in timings if t.noisy]
    if not noisy:
        return ""
    worst = max(t.spread for t in noisy)
    return (f"⚠ {len(noisy)} of the {len(timings)} {what} are noisy: the middle half of their "
            f"repeats spans up to {worst:.0%} of the median (the limit is {NOISY_SPREAD:.0%}). "
            "Another program was competing for this machine. Do not read ratios off them; "
            "rerun on a quiet machine, or compare the counts (FLOPs, bytes), which do not change.")


def timing_note(timings: Sequence[Timing], what: str = "timings") -> str:
    """Always a sentence: :func:`timing_warning` when some timings are noisy, else a short
    statement that they were steady. A notebook shows it after every table or plot of timings,
    so the reader sees either way which it was (and the printed text stays the same)."""
    timings = list(timings)
    warning = timing_warning(timings, what)
    if warning:
        return warning
    worst = max((t.spread for t in timings), default=0.0)
    return (f"✓ All {len(timings)} {what} were steady: every interquartile range is within "
            f"{worst:.0%} of its median (the limit is {NOISY_SPREAD:.0%}).")


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
