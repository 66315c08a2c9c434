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


def clipped(starts: np.ndarray, ends: np.ndarray, low: float, high: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the intervals that lie within [low, high]."""
    starts, ends = np.maximum(starts, low), np.minimum(ends, high)
    inside = ends > starts
    return starts[inside], ends[inside]


def prioritised(groups: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
    """Per group, how long it is open while no group before it is: the first group's
    union, then what each next one adds to the union of those before. The lengths add up
    to the union of all (a moment counts once, for the first group open then)."""
    lengths, covered = [], 0.0
    starts, ends = np.empty(0), np.empty(0)
    for group_starts, group_ends in groups:
        starts, ends = np.concatenate([starts, group_starts]), np.concatenate([ends, group_ends])
        union = union_length(starts, ends)
        lengths.append(union - covered)
        covered = union
    return lengths


def combinations(groups: list[tuple[np.ndarray, np.ndarray]]) -> dict[int, float]:
    """How long each combination of groups is open together (bit i: group i open), for
    the combinations that occur: the time split into pieces between every interval's
    start and end, each piece counted for the groups that cover it."""
    merged_groups = [merged(*group) for group in groups]
    points = np.unique(np.concatenate([np.concatenate(g) for g in merged_groups] or [[]]))
    if len(points) < 2:
        return {}
    middles, lengths = (points[:-1] + points[1:]) / 2, np.diff(points)
    mask = np.zeros(len(middles), dtype=np.int64)
    for bit, (starts, ends) in enumerate(merged_groups):
        at = np.searchsorted(starts, middles, side="right") - 1
        inside = at >= 0
        inside[inside] = ends[at[inside]] > middles[inside]
        mask |= inside.astype(np.int64) << bit
    totals = np.bincount(mask, weights=lengths)
    return {int(m): float(totals[m]) for m in np.flatnonzero(totals) if m}
