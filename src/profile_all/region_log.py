"""The wall time of every region's enter and exit, at the least cost a Python `with` allows.

A backend that needs no more of a region than when it began and ended (wallclock without
CPU time) sets `region_times`; its pass then keeps this log, and `regions.Region` appends to
the calling thread's array instead of calling the backend's `enter`/`exit`: a nested
region then costs two `perf_counter()` calls and three appends, not two method calls and a
tuple (scripts/bench/region_overhead.py). Pairing enters with exits, naming parents and
summing up is done once, after the target ended, by `samples()`.

An enter is the region's code (`-(index in names + 1)`: negative, so never a time) then
its `perf_counter()`; an exit is its `perf_counter()` alone. Every FLUSH_SECONDS, checked
as a region exits, the arrays go to a journal in the pass's scratch folder and are emptied:
memory stays bounded on long runs, and a process killed without warning (SIGKILL, the OOM
killer) leaves every region it closed. A journal record is a JSON header line
`[thread, count, new_names]`, then `count` raw doubles.

Where the C extension was built (`_region_fast.c`) the arrays are its buffers, not Python
arrays: `native` is that module, and `flush` drains it. It is used when its clock is
perf_counter's and PROFILE_ALL_NO_EXTENSION is not set.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
from array import array
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from types import ModuleType

from profile_all.depth_cap import MAX_DEPTH

FLUSH_SECONDS = 0.2


def _native() -> tuple[ModuleType | None, str]:
    if os.environ.get("PROFILE_ALL_NO_EXTENSION"):
        return None, "Python (PROFILE_ALL_NO_EXTENSION is set)"
    try:
        # by name: the import graph (tests/test_architecture.py) sees no file for a compiled
        # module and would count this as an import of the whole package
        _region_fast = importlib.import_module(__name__.rpartition(".")[0] + "._region_fast")
    except ImportError:
        return None, "Python (the C extension was not built: no compiler at install, or not Linux)"
    before, native, after = perf_counter(), _region_fast.now(), perf_counter()
    if not before - 1e-3 <= native <= after + 1e-3:
        return None, "Python (the C extension's clock is not perf_counter's here)"
    return _region_fast, "C extension"


#: the C buffers (`_region_fast`) where they can be used, else None: Python arrays;
#: MARKS_IN says which, and why (meta.json's `region_marks`)
native, MARKS_IN = _native()

#: (region name, parent path) -> wall time of each call, seconds
Samples = dict[tuple[str, str], array]
#: (name, start, end) of top-level region calls, perf_counter seconds, at most
#: CALLS_PER_REGION a name: a timeline of the pass's regions
Calls = list[tuple[str, float, float]]
CALLS_PER_REGION = 2000

#: every region's name in this process, in the order the regions were made: a region's
#: code is -(its index + 1)
NAMES: list[str] = []


class RegionLog:
    def __init__(self, journal: Path,
                 left_out: Sequence[tuple[float, float]] = ()) -> None:
        self.journal = journal
        #: spans whose region calls are left out of per-call figures (others' windows of
        #: steps), and once read, the positions of those calls among each region's samples
        self.left_out = left_out
        self.apart: dict[tuple[str, str], list[int]] = {}
        self._names = NAMES
        self._names_written = 0
        self._threads: list[array] = []  # without `native`
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._first_enter: float | None = None
        #: when the target ended: regions still open are timed up to it
        self.ended_at: float | None = None
        self._samples: Samples | None = None
        self._calls: Calls = []
        #: region calls left out of the samples, nested deeper than MAX_DEPTH: after samples()
        self.too_deep = 0

    def begin(self) -> None:
        """Regions are logged here from now on (the C buffers of an earlier log are dropped)."""
        if native is not None:
            native.reset()

    @property
    def first_enter(self) -> float | None:
        """When the first region was entered in any thread (it starts the first step)."""
        return native.first_enter() if native is not None else self._first_enter

    def new_thread(self) -> array:
        """The calling thread's event array, made at its first region (without `native`)."""
        events = array("d")
        self._threads.append(events)
        if self._first_enter is None:
            self._first_enter = perf_counter()
        return events

    def _batches(self) -> list[tuple[int, bytes]]:
        """Each thread's events since the last flush, as (thread number, raw doubles)."""
        if native is not None:
            return native.drain()
        batches = []
        for number, events in enumerate(self._threads):
            count = len(events)  # other threads only append: the first `count` stay
            if count:
                batches.append((number, events[:count].tobytes()))
                del events[:count]
        return batches

    def flush(self) -> float:
        """Move every thread's events to the journal; returns when the next flush is due."""
        now = perf_counter()
        if os.getpid() != self._pid:  # a forked child (DataLoader worker): not our journal
            return float("inf")
        if not self._lock.acquire(blocking=False):  # another thread is at it
            return now + FLUSH_SECONDS
        try:
            chunks = []
            batches = self._batches()  # first: the names then include every code they hold
            names = self._names[self._names_written:]
            for number, events in batches:
                header = [number, len(events) // 8, names]
                chunks += [json.dumps(header).encode() + b"\n", events]
                self._names_written += len(names)
                names = []
            if chunks:
                with open(self.journal, "ab") as journal:
                    journal.write(b"".join(chunks))
        finally:
            self._lock.release()
        return now + FLUSH_SECONDS

    def samples(self) -> Samples:
        """Every region call's wall time, by (name, parent path); reads and removes the
        journal. Regions still open are timed to `ended_at` (the target never left them)."""
        if self._samples is None:
            self.flush()
            deep: list[int] = []
            self._samples = read(self.journal, self.ended_at, self._calls, self.left_out,
                                 self.apart, deep)
            self.too_deep = sum(deep)
            self.journal.unlink(missing_ok=True)
        return self._samples

    def top_level_calls(self) -> Calls:
        """Each top-level region call (CALLS_PER_REGION a name at most): after samples()."""
        self.samples()
        return self._calls


def read(journal: Path, ended_at: float | None = None, calls: Calls | None = None,
         left_out: Sequence[tuple[float, float]] = (),
         apart: dict[tuple[str, str], list[int]] | None = None,
         too_deep: list[int] | None = None) -> Samples:
    """The samples of a journal; regions left open count to `ended_at`, or not at all
    without it (a killed process: when it died is not known). Top-level calls are
    appended to `calls` when given; the positions of the calls that start inside a span
    of `left_out` (others' windows of steps), by region, to `apart`; each thread's count of
    calls left out for their depth (deeper than MAX_DEPTH) to `too_deep`."""
    names: list[str] = []
    threads: dict[int, _Pairing] = {}
    samples: Samples = {}
    calls = calls if calls is not None else []
    try:
        source = journal.open("rb")
    except FileNotFoundError:
        return samples
    with source:
        while header := source.readline():
            try:
                number, count, new_names = json.loads(header)
            except ValueError:
                break
            names += new_names
            events = array("d")
            try:
                events.fromfile(source, count)
            except EOFError:  # the record a kill cut short
                break
            threads.setdefault(number, _Pairing(names, samples, calls, left_out, apart)).add(
                events)
    if ended_at is not None:
        for pairing in threads.values():
            pairing.close_open(ended_at)
    if too_deep is not None:
        too_deep += [pairing.too_deep for pairing in threads.values()]
    return samples


class _Pairing:
    """One thread's enters matched with its exits, across journal records."""

    def __init__(self, names: list[str], samples: Samples, calls: Calls,
                 left_out: Sequence[tuple[float, float]] = (),
                 apart: dict[tuple[str, str], list[int]] | None = None) -> None:
        self._names = names
        self._samples = samples
        self._calls = calls
        self._left_out = left_out
        self._apart = apart if apart is not None else {}
        self._open: list[tuple[tuple[str, str] | None, str, float]] = []  # (key, path, start)
        self._code: float | None = None  # an enter whose time is in the next record
        self._keys: dict[tuple[str, float], tuple[tuple[str, str], str]] = {}
        self.too_deep = 0

    def add(self, events: array) -> None:
        stack, samples, code = self._open, self._samples, self._code
        for value in events:
            if code is not None:  # the enter's time
                if len(stack) >= MAX_DEPTH:
                    self.too_deep += 1
                    stack.append((None, "", value))
                else:
                    stack.append((*self._key(stack[-1][1] if stack else "", code), value))
                code = None
            elif value < 0:
                code = value
            elif stack:
                key, _path, start = stack.pop()
                if key is None:  # nested too deep: left out
                    continue
                series = samples.get(key)
                if series is None:
                    series = samples[key] = array("d")
                if self._left_out and any(a <= start < b for a, b in self._left_out):
                    self._apart.setdefault(key, []).append(len(series))
                series.append(value - start)
                if not stack and len(series) <= CALLS_PER_REGION:
                    self._calls.append((key[0], start, value))
            # else: the exit of a region entered before the log began
        self._code = code

    def _key(self, parent: str, code: float) -> tuple[tuple[str, str], str]:
        known = self._keys.get((parent, code))
        if known is None:
            name = self._names[int(-code) - 1]
            path = f"{parent}/{name}" if parent else name
            known = self._keys[(parent, code)] = ((name, parent), path)
        return known

    def close_open(self, ended_at: float) -> None:
        while self._open:
            key, _path, start = self._open.pop()
            if key is None:
                continue
            self._samples.setdefault(key, array("d")).append(ended_at - start)
            if not self._open:
                self._calls.append((key[0], start, ended_at))
