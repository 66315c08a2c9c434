"""The measurement method for models: warm-up, repetitions, statistics, batch-size search.

- Warm-up iterations run first and are not measured (the report says how many).
- CPU: `time.perf_counter` around each iteration. GPU: a CUDA event before and after each
  iteration, and `end.synchronize()` before reading them, so the time is the device's and
  no iteration overlaps the next one's timing.
- A fixed number of iterations, or adaptive: after at least `min_seconds` (1 s: a machine
  drifts over seconds, and a fraction of one samples a passing state), until the 95%
  confidence interval of the median is within `target_ci` (2%) of the median, or
  `budget_seconds` run out.
- The page faults of the timed iterations (minor and major, from getrusage), per
  iteration: on CPU an iteration's time can hold the kernel's work of giving its memory
  pages back to the OS and faulting them in again (glibc trims the heap top when enough
  is free at it, by thresholds that move with what the process allocated and freed
  before), so fresh processes of one program can differ by 1.5x (small_cnn, one
  thread: 0 faults and 2.8 ms, or 670 and 4.2 ms). The report names it.
- Statistics with their spread: mean, std, median, IQR, min, p90, p99, the median's 95%
  confidence interval (distribution-free, from order statistics), and the coefficient of
  variation, flagged when over 10% (an unstable measurement).
"""

from __future__ import annotations

import math
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profile_all.stats import quantile

UNSTABLE_CV = 0.10
MIN_ADAPTIVE_ITERS = 10


@dataclass
class Timing:
    samples: list[float]  # seconds per iteration, warm-up excluded
    warmup: int
    clock: str  # "perf_counter" or "cuda_events"
    page_faults: float = math.nan  # per timed iteration, this process's


def _faults() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


def median_confidence_interval(ordered: list[float], level: float = 0.95) -> tuple[float, float]:
    """Order-statistic interval of the median: ranks n/2 -/+ z*sqrt(n)/2 (normal
    approximation of the binomial), valid for any distribution."""
    count = len(ordered)
    if count < 3:
        return ordered[0], ordered[-1]
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2)
    half_width = z * math.sqrt(count) / 2
    low = max(0, math.floor(count / 2 - half_width))
    high = min(count - 1, math.ceil(count / 2 + half_width) - 1)
    return ordered[low], ordered[high]


def latency_statistics(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    mean = statistics.fmean(ordered)
    std = statistics.stdev(ordered) if len(ordered) > 1 else 0.0
    low, high = median_confidence_interval(ordered)
    return {
        "mean": mean, "std": std, "median": quantile(ordered, 0.5),
        "iqr": quantile(ordered, 0.75) - quantile(ordered, 0.25),
        "min": ordered[0], "p90": quantile(ordered, 0.9), "p99": quantile(ordered, 0.99),
        "ci95_low": low, "ci95_high": high, "cv": std / mean if mean else math.nan,
        "count": float(len(ordered)),
    }


def _timer(device: Any) -> tuple[Callable[[Callable[[], Any]], float], str]:
    if getattr(device, "type", str(device)) == "cuda":
        import torch

        def on_device(step: Callable[[], Any]) -> float:
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            step()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3

        return on_device, "cuda_events"

    def on_host(step: Callable[[], Any]) -> float:
        started = time.perf_counter()
        step()
        return time.perf_counter() - started

    return on_host, "perf_counter"


def measure(step: Callable[[], Any], *, device: Any = "cpu", warmup: int = 10,
            iters: int | None = None, target_ci: float = 0.02, budget_seconds: float = 10.0,
            min_seconds: float = 1.0, warmup_step: Callable[[], Any] | None = None) -> Timing:
    """Time `step()`: `iters` times, or adaptively (iters=None) within `budget_seconds`.

    `warmup_step` (default `step`) is what the warm-up runs: the same work without marks.
    """
    timed, clock = _timer(device)
    for _ in range(warmup):
        timed(warmup_step or step)
    samples: list[float] = []
    faulted = _faults()
    if iters is not None:
        samples = [timed(step) for _ in range(iters)]
        return Timing(samples, warmup, clock, (_faults() - faulted) / len(samples))
    started = time.perf_counter()
    deadline, earliest = started + budget_seconds, started + min(min_seconds, budget_seconds)
    while True:
        samples.append(timed(step))
        if len(samples) >= MIN_ADAPTIVE_ITERS and time.perf_counter() >= earliest:
            ordered = sorted(samples)
            low, high = median_confidence_interval(ordered)
            median = quantile(ordered, 0.5)
            if (high - low) / 2 <= target_ci * median:
                break
        if time.perf_counter() > deadline and len(samples) >= 3:
            break
    return Timing(samples, warmup, clock, (_faults() - faulted) / len(samples))


def measured_peak(device: Any, dtype: str, seconds: float = 0.2) -> tuple[float, str]:
    """(FLOP/s, how) of a large square matmul in `dtype` on `device`, the best of repeats
    within `seconds`: the peak achieved FLOP/s is judged against where no datasheet says
    (a CPU, an unlisted GPU). A matmul is the best case of dense work, not a datasheet
    peak: a model near it is doing well."""
    import torch

    on_gpu = getattr(device, "type", str(device)) == "cuda"
    size = 4096 if on_gpu else (1024 if dtype == "float32" else 512)
    first, second = (torch.randn(size, size, device=device).to(getattr(torch, dtype))
                     for _ in range(2))
    timed, _clock = _timer(device)
    timed(lambda: first @ second)  # warm-up: the library's first call
    best, count, deadline = math.inf, 0, time.perf_counter() + seconds
    while count < 3 or time.perf_counter() < deadline:
        best = min(best, timed(lambda: first @ second))
        count += 1
    return 2 * size**3 / best, f"a {size}x{size} {dtype} matmul, best of {count}"


@dataclass
class BatchPoint:
    batch_size: int
    latency: float  # median seconds per iteration
    peak_memory: float  # bytes (device memory on GPU, resident memory on CPU)

    @property
    def throughput(self) -> float:
        return self.batch_size / self.latency


def search_batch_size(measure_at: Callable[[int], BatchPoint | None], *, start: int = 1,
                      on_gpu: bool, max_memory: float | None = None,
                      limit: int = 1 << 16) -> list[BatchPoint]:
    """Double the batch until it no longer fits, then bisect to the largest that does.

    `measure_at(b)` returns None when the batch does not fit (out of memory). On GPU the
    search goes to the largest batch that fits; on CPU it stops once throughput improves by
    5% or less per doubling, or the next batch would pass `max_memory` (bytes).
    """
    points: list[BatchPoint] = []
    batch, failed = start, None
    while batch <= limit:
        point = measure_at(batch)
        if point is None:
            failed = batch
            break
        points.append(point)
        if not on_gpu:
            improving = len(points) < 2 or point.throughput > 1.05 * points[-2].throughput
            next_peak = point.peak_memory * 2
            if not improving or (max_memory is not None and next_peak > max_memory):
                return points
        batch *= 2
    if failed is not None and points:
        low, high = points[-1].batch_size, failed
        while high - low > 1:
            middle = (low + high) // 2
            point = measure_at(middle)
            if point is None:
                high = middle
            else:
                points.append(point)
                low = middle
    return points
