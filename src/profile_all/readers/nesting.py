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
#: the characters the names and parent paths of a file's region rows may hold in all:
#: PATH_CHARS_PER_RANGE a range read, and at least MAX_REGION_PATH_CHARS (each row of a
#: region repeats its path, and so does every renderer: 2,000 ranges inside 62 of 1,000-
#: character names, a 287 KB trace, wanted gigabytes and ended in an ArrowMemoryError; the
#: JAX fixture's 27,891 NVTX ranges hold 2.5 MB of them, 91 a range)
MAX_REGION_PATH_CHARS = 1 << 20
PATH_CHARS_PER_RANGE = 256
#: the distinct regions (name, parent path) a file may give rows (about ten rows each: a
#: 12 MB trace of 100,000 distinct names took 867 MB and wrote 85 MB)
MAX_REGIONS = 20_000


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


def bounded_paths(names: Sequence[str], parents: Sequence[str]) -> np.ndarray:
    """Per range, whether its region (name, parent path) is among the first MAX_REGIONS,
    in order of appearance, whose names and paths hold path_budget(ranges) in all: the
    others are left out of the rows (their time is in the ranges around them)."""
    sizes: dict[tuple[str, str], bool] = {}
    used, keep = 0, np.zeros(len(names), bool)
    most = path_budget(len(names))
    for position, key in enumerate(zip(names, parents, strict=True)):
        kept = sizes.get(key)
        if kept is None:
            used += len(key[0]) + len(key[1])
            kept = sizes[key] = used <= most and len(sizes) < MAX_REGIONS
        keep[position] = kept
    return keep


def path_budget(ranges: int) -> int:
    """The characters the region rows of `ranges` ranges may hold in names and paths."""
    return max(MAX_REGION_PATH_CHARS, PATH_CHARS_PER_RANGE * ranges)


def paths_said(path: Path | str, count: int, what: str) -> list[str]:
    """The doubt on the ranges left out by bounded_paths (none when none was)."""
    if not count:
        return []
    return [f"{path}: {count:,} {what}{'s' if count > 1 else ''} left out past the first "
            f"{MAX_REGIONS:,} regions, or past {PATH_CHARS_PER_RANGE} characters a range (and "
            f"{MAX_REGION_PATH_CHARS >> 20} MiB) of their names and paths in all (their time is "
            "in the ranges around them)"]
