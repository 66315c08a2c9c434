"""Summary statistics of repeated measurements, without numpy (the worker stays light)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def quantile(sorted_samples: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    if not sorted_samples:
        return math.nan
    position = (len(sorted_samples) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(sorted_samples) - 1)
    fraction = position - low
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * fraction


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """total, mean, median, std (sample, n-1; only for two samples or more), min, max, p90."""
    ordered = sorted(samples)
    count = len(ordered)
    if count == 0:
        return {}
    total = math.fsum(ordered)
    result = {
        "total": total,
        "mean": total / count,
        "median": quantile(ordered, 0.5),
        "min": ordered[0],
        "max": ordered[-1],
        "p90": quantile(ordered, 0.9),
    }
    if count >= 2:
        result["std"] = statistics.stdev(ordered)
    return result
