"""How much of a model's CPU latency is the allocator's: the same iterations timed again
with glibc's heap held (no page faults) or given back at every chance.

On CPU an iteration allocates its activations and frees them. glibc gives the free memory
at the top of its heap back to the OS when there is more than its trim threshold, and
takes it again at the next iteration, each page faulted in by the kernel. The thresholds
move with what the process allocated and freed before (glibc raises them as large blocks
are freed), so fresh processes of one program land in different states: small_cnn at
16x3x32x32 on one thread ran 2.8 ms (0-40 page faults an iteration) or 4.0-4.4 ms
(470-740) by the process, the same script each time. No single figure is "the" latency
of a user's process, so the timing pass names its own state (its page faults per
iteration) and, where its iterations faulted pages in, times them again once it is done
with the heap held (`M_TRIM_THRESHOLD` and `M_MMAP_THRESHOLD` set high, as
`MALLOC_TRIM_THRESHOLD_` and `MALLOC_MMAP_THRESHOLD_` or jemalloc and tcmalloc do): what
the model costs without the allocator's faults, the same in every process (2.77-2.85 ms
for the above, against 2.75-2.85 ms for torch's Timer in fresh processes started with
those variables: scripts/bench/fresh_latency.py).

The other way round has no such figure: forcing glibc to give memory back (a trim
threshold of 0, or its static 128 KiB mmap threshold) faulted 860-1,450 pages an
iteration from the natural state but 0-550 from a held one (what it can give back depends
on what lies at the heap's top), so a latency measured without faults is not given an
upper bound: its page faults (none) say which state it is.

mallopt fixes a threshold for the rest of the process, so the probe runs last, after
everything the pass reports of the process's own state, and the two states cannot take
turns. So the comparison is of two blocks timed one after the other at the end: the
iterations as they are (the batch search may have moved the thresholds since the timing),
then with the heap held; and a gauge of the machine's speed (a pure-Python loop) is
timed before, between and after them, so that a machine whose load changed between the
blocks (a 54.79x "speed-up" once) is said, not taken for the allocator's. Beside it, what
the faults can cost: a page fault's time measured here (a fresh anonymous mapping's pages
touched once, less the same loop over pages already in) times the faults an iteration.
glibc on Linux only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import statistics
import time
from collections.abc import Callable
from typing import Any

from profile_all.model.timing_method import Timing, measure

#: page faults per iteration above which an iteration is said to fault: 256 KiB, twice
#: glibc's default trim threshold. Below it is the allocator's own growth and the machine's
#: reclaim (a held heap faulted 4.3 an iteration, 8.6 on a loaded machine; a process that
#: kept its heap by chance 0-40), not memory given back and taken again (340-1,500)
FAULTING = 64
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters
#: the largest mmap threshold glibc takes on 64-bit Linux (DEFAULT_MMAP_THRESHOLD_MAX)
_MMAP_MAX = 32 * 2**20


def _glibc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "mallopt") and hasattr(
        libc, "gnu_get_libc_version") else None


def _hold(libc: Any) -> bool:
    return bool(libc.mallopt(M_TRIM_THRESHOLD, 2**30)) and bool(
        libc.mallopt(M_MMAP_THRESHOLD, _MMAP_MAX))


def fault_cost(pages: int = 2048) -> float:
    """Seconds a page fault takes on this machine now: the best of 3 of (touching each page
    of a fresh anonymous mapping once, less touching them again) over the pages."""
    best = float("inf")
    for _ in range(3):
        mapped = mmap.mmap(-1, pages * mmap.PAGESIZE)
        try:
            offsets = range(0, pages * mmap.PAGESIZE, mmap.PAGESIZE)
            started = time.perf_counter()
            for offset in offsets:
                mapped[offset] = 1
            faulted = time.perf_counter()
            for offset in offsets:
                mapped[offset] = 2
            best = min(best, (2 * faulted - started - time.perf_counter()) / pages)
        finally:
            mapped.close()
    return max(best, 0.0)


def gauge(repeats: int = 5) -> float:
    """The machine's speed now: the median time of a pure-Python loop (no heap growth)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        sum(range(20_000))
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def probe(step: Callable[[], Any], natural: Timing, *, warmup: int, iters: int | None,
          budget_seconds: float) -> dict[str, Any]:
    """`step` timed as it is, then with the heap held, where `natural`'s iterations faulted
    (`iters` times, else adaptively within `budget_seconds` each): {"median" (held),
    "page_faults" (held), "before", "before_page_faults", "fault_cost", "drift" (the
    gauge's largest change around them, a ratio)}; without "median" and "page_faults"
    where the iterations fault no longer (glibc's thresholds settled as the process went
    on: nothing to hold); {} where they did not fault, or glibc's mallopt is not there."""
    from profile_all.model.timing_method import latency_statistics

    libc = _glibc() if natural.page_faults > FAULTING else None
    if libc is None:
        return {}

    def timed() -> Timing:
        return measure(step, warmup=max(warmup, 3), iters=iters,
                       budget_seconds=budget_seconds, min_seconds=min(0.3, budget_seconds))

    gauges = [gauge()]
    before = timed()
    gauges.append(gauge())
    found = {"before": latency_statistics(before.samples)["median"],
             "before_page_faults": before.page_faults, "fault_cost": fault_cost()}
    if before.page_faults > FAULTING:
        if not _hold(libc):
            return {}
        held = timed()
        gauges.append(gauge())
        found.update(median=latency_statistics(held.samples)["median"],
                     page_faults=held.page_faults)
    return {**found, "drift": max(gauges) / min(gauges) - 1}
