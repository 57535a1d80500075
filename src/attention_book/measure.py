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
* :func:`memory_bandwidth` - the speed of a large copy: bytes per second to and from memory;
* :func:`plan_for` and :class:`MeasurementPlan` - what to measure on a device: sizes that suit it,
  the dtype it runs fastest and the clock that reads it (CUDA events on a GPU);
* :func:`regime` and :func:`regime_note` - which limit a measured time is at: the fixed cost of
  launching operators (overhead-bound), the arithmetic (compute-bound) or neither, which leaves
  the memory traffic (memory-bound).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .validation import positive_int

__all__ = ["time_call", "time_samples", "Timing", "compare", "timing_warning", "timing_note",
           "NOISY_SPREAD", "TIMERS", "peak_memory", "matmul_gflops", "memory_bandwidth",
           "MeasurementPlan", "plan_for", "REGIMES", "regime", "regime_note"]

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
    """Wait for the work queued on a GPU (CUDA or Apple's MPS) before reading the clock."""
    if _is_cuda(device):
        torch.cuda.synchronize(device)
    elif device is not None and torch.device(device).type == "mps":
        torch.mps.synchronize()


def _check_counts(repeats, warmup) -> None:
    positive_int("repeats", repeats)
    if isinstance(warmup, bool) or not isinstance(warmup, int):
        raise TypeError(
            f"warmup must be an int >= 0, got {type(warmup).__name__} "
            f"({warmup!r}); e.g. warmup=1"
        )
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}; e.g. warmup=1")


#: the clocks :func:`time_samples` and :func:`compare` can read
TIMERS = ("perf_counter", "cuda_events")


def _timer_for(timer: Optional[str], device) -> str:
    """``timer``, or the device's own clock when it is None: CUDA events on a CUDA GPU."""
    if timer is None:
        return "cuda_events" if _is_cuda(device) else "perf_counter"
    if timer not in TIMERS:
        raise ValueError(f"timer must be one of {TIMERS} or None (the device's own), got {timer!r}")
    if timer == "cuda_events" and not _is_cuda(device):
        raise ValueError(
            f"timer='cuda_events' needs a CUDA device, got device={device!r}; "
            "pass device=torch.device('cuda') or timer='perf_counter'"
        )
    return timer


def _one_call(fn, device, timer: str = "perf_counter") -> float:
    """Seconds of one call of ``fn``. ``perf_counter``: the wall clock, after waiting for a GPU.
    ``cuda_events``: the GPU's own clock between two events recorded on its stream before and
    after the call; it counts the time the GPU spent waiting for Python to launch the kernels
    too (a launch-bound call is measured as slow as it is), but not the final wait."""
    if timer == "cuda_events":
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3  # milliseconds -> seconds
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
                 device: Optional[torch.device] = None, timer: Optional[str] = None) -> Timing:
    """Call ``fn()`` ``warmup`` times untimed, then ``repeats`` times timed; return the
    :class:`Timing` of the repeats in seconds. ``timer`` is one of :data:`TIMERS`; by default
    CUDA events when ``device`` is a CUDA GPU, else the wall clock (waiting for the device)."""
    _check_function(fn)
    _check_counts(repeats, warmup)
    timer = _timer_for(timer, device)
    for _ in range(warmup):  # first calls pay for allocations, kernel choice
        fn()
    _synchronize(device)
    return Timing(tuple(_one_call(fn, device, timer) for _ in range(repeats)))


def time_call(fn: Callable[[], object], repeats: int = 5, warmup: int = 1,
              device: Optional[torch.device] = None,
              statistic: str = "median", timer: Optional[str] = None) -> float:
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
    timing = time_samples(fn, repeats, warmup, device, timer)
    return timing.median if statistic == "median" else timing.best


def compare(calls: Dict[str, Callable[[], object]], repeats: int = 7,
            warmup: int = 1, device: Optional[torch.device] = None,
            timer: Optional[str] = None) -> Dict[str, Timing]:
    """Time several functions **interleaved**: after ``warmup`` untimed rounds, ``repeats``
    rounds of one call of each (in order), so a burst of load from another program hits all
    of them alike instead of the one that happened to run then. ``name -> Timing``.

    Compare medians only where the timings are not ``noisy`` (and say so where they are): two
    implementations whose IQRs overlap are not measurably different on that run. ``timer`` as
    in :func:`time_samples`.
    """
    if not isinstance(calls, dict) or not calls:
        raise TypeError(
            f"calls must be a non-empty dict name -> function without arguments, got {calls!r}"
        )
    for fn in calls.values():
        _check_function(fn)
    _check_counts(repeats, warmup)
    timer = _timer_for(timer, device)
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    _synchronize(device)
    samples: Dict[str, List[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            samples[name].append(_one_call(fn, device, timer))
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


# --------------------------------------------------------------------------------------------
# What to measure on which device
# --------------------------------------------------------------------------------------------

#: a row of a sweep: (batch_size, num_tokens, also time forward + backward)
SweepRow = Tuple[int, int, bool]


@dataclass(frozen=True)
class MeasurementPlan:
    """The sizes, dtype and clock the chapter's timing cells (and ``tools/bench_scale.py``)
    use on one device; :func:`plan_for` makes one.

    A measurement means something only in the regime it is meant to show. Attention kernels on a
    GPU need work enough to fill it (thousands of tokens per call), or the clock reads the fixed
    cost of launching them; a CPU is filled by far less, and a shared 2-core machine must finish
    the chapter in seconds. So the sizes depend on the device:

    * ``kernel_*`` and ``head_dim``: one call of the attention core (backends, the causal flag,
      FlexAttention), ``(kernel_batch, kernel_heads, kernel_tokens, head_dim)``;
    * ``curve_*``: chapter 5's ``MultiHeadAttention`` at growing lengths (batch 1, forward);
    * ``sweep`` and ``full_sweep``: the five implementations, ``(batch, T, backward)`` rows at
      width ``sweep_d_model`` with ``sweep_heads`` heads (``full_sweep`` at ``full_d_model`` and
      ``full_heads``, GPT-2 small's, for ``tools/bench_scale.py`` and the chapter's
      ``FULL_SWEEP``);
    * ``decode_*``: a stack of cached attention layers generating one token at the lengths
      ``decode_lengths`` (batch 1);
    * ``matmul_sizes`` and ``copy_bytes``: the roofline's ceiling and memory slope.

    ``dtype`` is what the device runs fastest (bfloat16 from CUDA compute capability 8.0,
    float16 below; float32 on a CPU), ``timer`` one of :data:`TIMERS`, ``threads`` the number of
    torch threads to use (1 on a CPU, for steady timings on a shared machine; None: leave it).
    """

    device: torch.device
    dtype: torch.dtype
    timer: str
    threads: Optional[int]
    description: str
    kernel_batch: int
    kernel_heads: int
    kernel_tokens: int
    head_dim: int
    curve_lengths: Tuple[int, ...]
    curve_d_model: int
    curve_heads: int
    sweep_d_model: int
    sweep_heads: int
    sweep: Tuple[SweepRow, ...]
    full_d_model: int
    full_heads: int
    full_sweep: Tuple[SweepRow, ...]
    decode_width: int
    decode_heads: int
    decode_layers: int
    decode_lengths: Tuple[int, ...]
    matmul_sizes: Tuple[int, ...]
    copy_bytes: int
    repeats: int
    compile_flex: bool

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).replace("torch.", "")

    @property
    def kernel_shape(self) -> Tuple[int, int, int, int]:
        """``(B, H, T, head_dim)`` of the kernel measurements."""
        return (self.kernel_batch, self.kernel_heads, self.kernel_tokens, self.head_dim)

    def apply(self) -> None:
        """Set the number of torch threads the plan asks for (on a CPU: 1)."""
        if self.threads is not None:
            torch.set_num_threads(self.threads)


def _cuda_capability(device: torch.device, capability) -> Tuple[int, int]:
    if capability is None:
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device} but no CUDA GPU is available; pass capability=(major, minor) "
                "to plan for one anyway (e.g. (7, 5) for a T4, (9, 0) for an H100)"
            )
        capability = torch.cuda.get_device_capability(device)
    if (not isinstance(capability, tuple) or len(capability) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in capability)):
        raise TypeError(f"capability must be a (major, minor) tuple of ints such as (8, 0), "
                        f"got {capability!r}")
    return capability


#: tokens a kernel call gets on a CUDA GPU: enough to fill an H100 (132 SMs) with query blocks
GPU_TOKENS_PER_CALL = 16384

#: float32 (B, H, T, T) matrices the from-scratch attention of chapter 5 keeps alive at its peak
#: (scores, scaled, masked, softmax; half-precision inputs are scored in float32)
_SCRATCH_MATRICES = 4


def _fits(batch: int, heads: int, tokens: int, memory_bytes: float) -> bool:
    """Whether from-scratch attention at these sizes uses at most 60% of the GPU's memory."""
    return _SCRATCH_MATRICES * batch * heads * tokens * tokens * 4 <= 0.6 * memory_bytes


def _gpu_memory(device: torch.device, memory_gib) -> float:
    if memory_gib is not None:
        if isinstance(memory_gib, bool) or not isinstance(memory_gib, (int, float)) or memory_gib <= 0:
            raise ValueError(f"memory_gib must be a positive number of GiB, got {memory_gib!r}")
        return memory_gib * 2**30
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(device).total_memory
    return 80 * 2**30  # planning for a GPU that is not here: an 80 GB one


def plan_for(device=None, capability: Optional[Tuple[int, int]] = None,
             memory_gib: Optional[float] = None) -> MeasurementPlan:
    """The :class:`MeasurementPlan` for ``device`` (default: the CPU).

    * CUDA: GPT-2 small's width (768 = 12 heads of 64), at least ``GPU_TOKENS_PER_CALL``
      (16,384) tokens per kernel call and per sweep row, bfloat16 from compute capability 8.0
      (Ampere and newer) and float16 below (a T4, 7.5: no bfloat16 tensor cores), CUDA events,
      the compiled FlexAttention kernel. The from-scratch implementations keep ``(B, H, T, T)``
      matrices, so the lengths they are timed at stop where those would fill more than 60% of
      the GPU's memory (a 16 GB T4 stops at 2,048 tokens per sequence in the sweep, an 80 GB
      H100 at 4,096). ``capability`` and ``memory_gib`` override the GPU's own (for tests, or to
      plan for another GPU).
    * CPU (and Apple's MPS): the chapter's small sizes, float32, the wall clock, one thread on a
      CPU; FlexAttention is not compiled (a cold compile took over a minute on a 2-core CPU).
    """
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda":
        major, minor = _cuda_capability(device, capability)
        memory = _gpu_memory(device, memory_gib)
        dtype = torch.bfloat16 if (major, minor) >= (8, 0) else torch.float16
        tokens, heads = GPU_TOKENS_PER_CALL, 12

        def rows(lengths):
            return tuple((tokens // T, T, True) for T in lengths
                         if _fits(tokens // T, heads, T, memory))

        return MeasurementPlan(
            device=device, dtype=dtype, timer="cuda_events", threads=None,
            description=(f"CUDA GPU of compute capability {major}.{minor}: "
                         f"{str(dtype).replace('torch.', '')}, timed with CUDA events, "
                         f"{tokens:,} tokens per kernel call, GPT-2 small's width "
                         "(12 heads of 64)"),
            kernel_batch=tokens // 4096, kernel_heads=heads, kernel_tokens=4096, head_dim=64,
            curve_lengths=tuple(T for T in (1024, 2048, 4096, 8192) if _fits(1, heads, T, memory)),
            curve_d_model=768, curve_heads=heads,
            sweep_d_model=768, sweep_heads=heads, sweep=rows((1024, 2048, 4096)),
            full_d_model=768, full_heads=heads, full_sweep=rows((1024, 2048, 4096, 8192)),
            decode_width=768, decode_heads=heads, decode_layers=12, decode_lengths=(128, 512, 2048),
            matmul_sizes=(4096, 8192), copy_bytes=2**30, repeats=10, compile_flex=True)
    cpu = device.type == "cpu"
    return MeasurementPlan(
        device=device, dtype=torch.float32, timer="perf_counter", threads=1 if cpu else None,
        description=(f"{device.type.upper()}: float32, timed with the wall clock"
                     + (", one thread" if cpu else "") + ", the chapter's small sizes"),
        kernel_batch=1, kernel_heads=4, kernel_tokens=1024, head_dim=64,
        curve_lengths=(64, 128, 256, 512), curve_d_model=64, curve_heads=4,
        sweep_d_model=128, sweep_heads=2,
        sweep=((1, 64, True), (1, 128, True), (1, 256, True), (1, 512, False)),
        full_d_model=768, full_heads=12,
        full_sweep=tuple((1, T, True) for T in (128, 256, 512, 1024, 2048, 4096)) + ((8, 1024, True),),
        decode_width=256, decode_heads=4, decode_layers=2, decode_lengths=(32, 128, 512),
        matmul_sizes=(256, 512, 1024), copy_bytes=2**26, repeats=7, compile_flex=False)


# --------------------------------------------------------------------------------------------
# Which limit a measured time is at
# --------------------------------------------------------------------------------------------

#: the three regimes :func:`regime` tells apart
REGIMES = ("overhead-bound", "compute-bound", "memory-bound")

#: a call whose fixed cost (the same calls on tiny tensors) is at least this share of its time
OVERHEAD_SHARE = 0.5
#: a call whose useful FLOP/s reach at least this share of the measured matmul ceiling
COMPUTE_SHARE = 0.25


def regime(seconds: float, flops: float, peak_flops: float,
           fixed_seconds: Optional[float] = None) -> str:
    """Which limit a call that took ``seconds`` for ``flops`` useful FLOPs is at.

    * ``"overhead-bound"``: the fixed cost of the call, ``fixed_seconds`` (measure it as the same
      code on tiny tensors: the same Python, the same operator launches, almost no arithmetic),
      is at least half of its time. Faster arithmetic would not help; fewer launches would.
    * ``"compute-bound"``: otherwise, if it does at least a quarter of ``peak_flops`` (FLOP/s, a
      measured matrix-multiply ceiling in the same dtype).
    * ``"memory-bound"``: neither: the time grows with the work, but the arithmetic units are
      mostly idle, waiting for data from memory.
    """
    for name, value in (("seconds", seconds), ("flops", flops), ("peak_flops", peak_flops),
                        ("fixed_seconds", fixed_seconds)):
        if value is None and name == "fixed_seconds":
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise TypeError(f"{name} must be a number, got {type(value).__name__} ({value!r})")
        if value < 0 or (value == 0 and name in ("seconds", "peak_flops")):
            raise ValueError(f"{name} must be {'>= 0' if name in ('flops', 'fixed_seconds') else '> 0'}"
                             f", got {value!r}")
    if fixed_seconds is not None and fixed_seconds / seconds >= OVERHEAD_SHARE:
        return "overhead-bound"
    if flops / seconds >= COMPUTE_SHARE * peak_flops:
        return "compute-bound"
    return "memory-bound"


def regime_note(what: str, seconds: float, flops: float, peak_flops: float,
                fixed_seconds: Optional[float] = None) -> str:
    """One sentence on :func:`regime`, with the numbers that decided it, e.g.
    ``"fused, T = 4096: compute-bound (61% of the matmul ceiling; launch cost 2% of the time)"``."""
    which = regime(seconds, flops, peak_flops, fixed_seconds)
    parts = [f"{flops / seconds / peak_flops:.0%} of the matmul ceiling"]
    if fixed_seconds is not None:
        parts.append(f"the same calls on tiny tensors take {min(fixed_seconds / seconds, 9.99):.0%} "
                     "of the time")
    return f"{what}: {which} ({'; '.join(parts)})"
