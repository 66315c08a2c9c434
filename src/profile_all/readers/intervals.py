"""Lengths of unions and overlaps of time intervals (device activities on several streams),
vectorised: what HTA's idle time and communication-computation overlap are made of."""

from __future__ import annotations

import numpy as np


def merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint intervals covering the same time as the given ones, sorted."""
    if not len(starts):
        return np.empty(0), np.empty(0)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], np.maximum.accumulate(ends[order])
    opens = np.concatenate([[True], starts[1:] > ends[:-1]])
    block = np.cumsum(opens) - 1
    block_ends = np.zeros(block[-1] + 1)
    np.maximum.at(block_ends, block, ends)
    return starts[opens], block_ends


def union_length(starts: np.ndarray, ends: np.ndarray) -> float:
    first, last = merged(starts, ends)
    return float((last - first).sum())


def overlap_length(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """How long the union of intervals `a` and the union of `b` are both open."""
    a_starts, a_ends = merged(*a)
    b_starts, b_ends = merged(*b)
    total, j = 0.0, 0
    for start, end in zip(a_starts, a_ends, strict=True):
        while j < len(b_ends) and b_ends[j] <= start:
            j += 1
        k = j
        while k < len(b_starts) and b_starts[k] < end:
            total += min(end, b_ends[k]) - max(start, b_starts[k])
            k += 1
    return total
