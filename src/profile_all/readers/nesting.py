"""How deep the ranges of a file read nest, against the cap on it (depth_cap.MAX_DEPTH): a
range inside MAX_DEPTH others is left out of the report's rows, counted, and said. 5,000
nested annotations (a 0.5 MB trace) took 25 s and 2.65 GB before the cap, 20,000 nested
NVTX ranges no result in 150 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from profile_all.depth_cap import MAX_DEPTH

#: the characters a call tree's paths may hold in all (a path repeats its callers' names:
#: long names deep down made gigabytes of them)
MAX_PATH_CHARS = 32 << 20


def too_deep(threads: Sequence[object], starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per range, whether it sits inside MAX_DEPTH others of its thread (ranges nest per
    thread, the longer first where two start together). A range left out holds no level:
    its children are deeper still."""
    return nest_check(threads, starts, ends)[0]


def nest_check(threads: Sequence[object], starts: np.ndarray, ends: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per range, (whether it sits inside MAX_DEPTH others of its thread, whether it starts
    inside a range of its thread and ends after it: it does not nest, and as a child it
    would be longer than its parent, its parent's time less than its children's)."""
    _names, thread_codes = np.unique(np.asarray([str(t) for t in threads], object),
                                     return_inverse=True)
    order = np.lexsort((-np.asarray(ends, float), np.asarray(starts, float), thread_codes))
    deep, unnested = np.zeros(len(order), bool), np.zeros(len(order), bool)
    open_ends: list[float] = []
    thread_now: object = None
    for position in order:
        if thread_codes[position] != thread_now:
            thread_now, open_ends = thread_codes[position], []
        start = starts[position]
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        if open_ends and ends[position] > open_ends[-1]:
            unnested[position] = True
        elif len(open_ends) >= MAX_DEPTH:
            deep[position] = True
        else:
            open_ends.append(ends[position])
    return deep, unnested


def said(path: Path | str, count: int, what: str) -> list[str]:
    """The doubt on the ranges left out for their depth (none when none was)."""
    if not count:
        return []
    return [f"{path}: {count:,} {what}{'s' if count > 1 else ''} nested deeper than "
            f"{MAX_DEPTH} levels left out (their time is in the ranges around them)"]
