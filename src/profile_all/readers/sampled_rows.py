"""A sampled profile's rows: what its stacks say of each function, call path, line and
thread (scopes `function`, `call`, `line`, `thread`, and `run`).

Every time is an estimate from samples: a function's `cumulative_time` is the weight of
the samples whose stack holds it (once a sample, however deep its recursion), its
`self_time` that of the samples where it is the innermost frame; `samples` and
`self_samples` count them, so that the report can give each estimate its sampling error.
A Python function is named as cProfile names it (`file:first_line(name)`, the first line
found from its source: readers/source_lines.py), so that the two profiles of a run meet
by name; a native frame keeps py-spy's name (`symbol (library)`).

In a profile that profile-all made (a pass's py-spy file: the pass's `run_target` frame
is on the stacks of the thread that ran the target), that thread's samples outside the
target (the pass starting and ending) are left out, and each stack is cut down to the
user's code: the frames down to the target (profile-all's, runpy's, the interpreter's
native ones) go, and profile-all's frames called from the user's code (a region, a step)
are spliced out, their time their caller's. Its own threads (`profile-all-*`) are left
out. Child processes (DataLoader workers, followed with py-spy's --subprocesses) are rows
of their own: `parent` names the process.
"""

from __future__ import annotations

import linecache
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profile_all.readers.call_tree import LIBRARY
from profile_all.readers.sampled_tree import CallTree
from profile_all.readers.source_lines import first_line, new_budget
from profile_all.readers.speedscope import Frame, SampledProfile, Thread
from profile_all.rows import row

#: line rows for this many of the user's functions (the most cumulative time first)
LINE_FUNCTIONS = 10
_OWN = re.compile(r"(^|[/\\])profile_all[/\\]")
_MARK = re.compile(r"(^|[/\\])profile_all[/\\]runner[/\\]inside[/\\]pass_run\.py$")
_OWN_THREADS = "profile-all-"
#: a native frame py-spy could not name: its address (a library's addresses are one row)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+( \(.*\))?$")


@dataclass(frozen=True)
class Named:
    """A frame as the rows name it."""

    function: str  # cProfile's name for Python code, py-spy's for native frames
    python: bool
    user: bool  # Python code of the user's, not the standard library's or a package's
    file: str
    line: int


def _is_python(frame: Frame) -> bool:
    return frame.file.endswith(".py") or frame.file.startswith("<")


def _name(frame: Frame) -> Named:
    if not _is_python(frame):  # `symbol (library)`, as py-spy prints native frames
        library = frame.file.replace("\\", "/").rpartition("/")[2]
        symbol = "(unresolved)" if _ADDRESS.match(frame.name) else frame.name
        named = f"{symbol} ({library})" if library and library not in symbol else symbol
        return Named(named, False, False, frame.file, frame.line)
    short = frame.name.rsplit(".", 1)[-1]
    start = first_line(frame.file, frame.name, frame.line)
    return Named(f"{frame.file}:{start if start is not None else '?'}({short})", True,
                 LIBRARY.search(frame.file) is None, frame.file, frame.line)


@dataclass
class _Cut:
    """How a profile-all profile's stacks are cut to the user's code."""

    frames: list[Frame]
    marks: frozenset[int]  # indices of the pass's run_target frames
    own: frozenset[int]  # indices of profile-all's frames

    @classmethod
    def of(cls, frames: list[Frame]) -> _Cut:
        return cls(frames, frozenset(i for i, f in enumerate(frames) if f.name.endswith(
            "run_target") and _MARK.search(f.file)),
                   frozenset(i for i, f in enumerate(frames) if _OWN.search(f.file)))

    def target(self, stack: tuple[int, ...]) -> tuple[int, ...] | None:
        """The user's part of a stack that holds the target's start; None without it."""
        at = next((depth for depth in range(len(stack) - 1, -1, -1)
                   if stack[depth] in self.marks), None)
        if at is None:
            return None
        rest = stack[at + 1:]
        skip = 0
        while skip < len(rest) and self._machinery(rest[skip]):
            skip += 1
        return rest[skip:]

    def _machinery(self, index: int) -> bool:
        frame = self.frames[index]
        return (index in self.own or not _is_python(frame) or "runpy" in frame.file
                or frame.file == "<string>")

    def spliced(self, stack: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(index for index in stack if index not in self.own
                     and not self.frames[index].is_process)


@dataclass
class _Tally:
    """What one process's threads' samples add up to."""

    samples: Counter = field(default_factory=Counter)
    self_samples: Counter = field(default_factory=Counter)
    seconds: Counter = field(default_factory=Counter)
    self_seconds: Counter = field(default_factory=Counter)
    lines: dict[tuple[str, int], list[float]] = field(default_factory=dict)


@dataclass
class _Gathered:
    """Every thread's samples, added up: per process, per call path, per thread."""

    per_unit: float | None  # seconds a unit of weight is; None: no time, counts only
    tallies: dict[str, _Tally] = field(default_factory=lambda: defaultdict(_Tally))
    tree: CallTree = field(default_factory=lambda: CallTree())
    threads: Counter = field(default_factory=Counter)
    thread_seconds: Counter = field(default_factory=Counter)

    def add(self, process: str, label: str, stack: list[Named], count: int,
            weight: float) -> None:
        seconds = weight * self.per_unit if self.per_unit is not None else 0.0
        self.threads[label] += count
        self.thread_seconds[label] += seconds
        _add(self.tallies[process], stack, count, seconds)
        self.tree.add([f"thread {label}", *(named.function for named in stack)],
                      seconds if self.per_unit is not None else count)


def sampled_rows(profile: SampledProfile, interval: float | None = None,
                 named_lines: Iterable[str] = (), root_pid: int | None = None,
                 on_cpu: bool = False) -> list[list[Any]]:
    """The profile's rows; `interval`: the seconds between two samples where the file's
    weights count samples (py-spy's rate, known to the backend that ran it);
    `named_lines`: functions (`module:function`) whose lines get rows whatever their
    share; `root_pid`: the process sampled (the others are its children), else the one
    that ran profile-all's target, else the file's first; `on_cpu`: the samples are of
    running threads only (py-spy without --idle), so a thread's are its time on the CPU
    (`active_time`; else `sampled_time`)."""
    per_unit = profile.seconds_per_unit if profile.seconds_per_unit is not None else interval
    cut = _Cut.of(profile.frames)
    names = _sampled_names(profile)
    root_pid = root_pid if root_pid is not None else _root_pid(profile, cut)
    gathered = _Gathered(per_unit)
    for thread in profile.threads:
        if thread.name.startswith(_OWN_THREADS):
            continue
        process = "" if thread.pid is None or thread.pid == root_pid else f"process {thread.pid}"
        label = f"{process} {thread.name}".strip() or "thread"
        for kept, count, weight in _kept(thread, cut):
            gathered.add(process, label, [names[i] for i in kept], count, weight)
    rows = _run_rows(gathered.threads, gathered.thread_seconds, per_unit, interval, profile,
                     on_cpu)
    for process, tally in gathered.tallies.items():
        rows += _function_rows(tally, process, per_unit is not None)
        if not process:
            rows += _line_rows(tally, set(named_lines))
    return rows + gathered.tree.rows("cumulative_time" if per_unit is not None else "samples")


def _sampled_names(profile: SampledProfile) -> dict[int, Named]:
    """The names of the frames a sample holds, by index: naming one may compile its file (a
    crafted file named 20,000 frames of 2,000 sources, no sample on them, and took
    minutes), within the budget of one profile."""
    new_budget()
    return {index: _name(profile.frames[index]) for index in sorted(
        {index for thread in profile.threads for stack in thread.counts for index in stack})}


def _root_pid(profile: SampledProfile, cut: _Cut) -> int | None:
    """The process that ran profile-all's target, else the file's first."""
    return next((thread.pid for thread in profile.threads
                 if any(set(stack) & cut.marks for stack in thread.counts)),
                profile.threads[0].pid if profile.threads else None)


def _kept(thread: Thread, cut: _Cut) -> Iterable[tuple[tuple[int, ...], int, float]]:
    """(the user's part of a stack, its samples, their weight), each stack of `thread`:
    where the thread ran profile-all's target, only its stacks inside the target."""
    holds_target = bool(cut.marks) and any(set(stack) & cut.marks for stack in thread.counts)
    for stack, count in thread.counts.items():
        kept = cut.target(stack) if holds_target else stack
        if kept is not None:
            yield cut.spliced(kept), count, thread.weights[stack]


def _add(tally: _Tally, stack: list[Named], count: int, seconds: float) -> None:
    if not stack:
        return
    for function in {named.function for named in stack}:
        tally.samples[function] += count
        tally.seconds[function] += seconds
    leaf = stack[-1].function
    tally.self_samples[leaf] += count
    tally.self_seconds[leaf] += seconds
    seen_lines = set()
    for depth, named in enumerate(stack):
        if not named.user:
            continue
        key = (named.function, named.line)
        measured = tally.lines.setdefault(key, [0.0, 0.0, 0])
        if key not in seen_lines:
            seen_lines.add(key)
            measured[1] += seconds
            measured[2] += count
        if depth == len(stack) - 1:
            measured[0] += seconds


def _run_rows(threads: Counter, thread_seconds: Counter, per_unit: float | None,
              interval: float | None, profile: SampledProfile, on_cpu: bool
              ) -> list[list[Any]]:
    rows = [row("run", "run", "samples", sum(threads.values()))]
    if interval is not None or (profile.seconds_per_unit is not None and threads):
        rows.append(row("run", "run", "sample_interval", interval if interval is not None
                        else sum(thread_seconds.values()) / max(sum(threads.values()), 1)))
    for label, count in threads.items():
        rows.append(row("thread", label, "samples", count))
        if per_unit is not None:
            rows.append(row("thread", label, "active_time" if on_cpu else "sampled_time",
                            thread_seconds[label]))
    return rows


def _function_rows(tally: _Tally, process: str, timed: bool) -> list[list[Any]]:
    rows = []
    for function, samples in tally.samples.items():
        rows += [row("function", function, "samples", samples, parent=process),
                 row("function", function, "self_samples", tally.self_samples[function],
                     parent=process)]
        if timed:
            rows += [row("function", function, "cumulative_time", tally.seconds[function],
                         parent=process),
                     row("function", function, "self_time", tally.self_seconds[function],
                         parent=process)]
    return rows


def _line_rows(tally: _Tally, named: set[str]) -> list[list[Any]]:
    """Lines of the user's hottest functions and of those named, named as the memory
    backend names its lines (`file.py:LINE source`, parent `file.py:FIRST(function)`)."""
    # code `exec` ran (`<string>`, nanoGPT's configurator) has no file to show lines of
    user = {function for function, _line in tally.lines if not function.startswith("<")}
    hottest = sorted(user, key=lambda function: -tally.seconds[function])[:LINE_FUNCTIONS]
    wanted = set(hottest) | {function for function in user if _named(function, named)}
    rows = []
    for (function, line), (self_seconds, seconds, samples) in tally.lines.items():
        if function not in wanted:
            continue
        path, _, rest = function.rpartition(":")
        source = linecache.getline(path, line).strip()
        name, parent = f"{Path(path).name}:{line} {source}".strip(), f"{Path(path).name}:{rest}"
        rows += [row("line", name, "self_time", self_seconds, parent=parent),
                 row("line", name, "cumulative_time", seconds, parent=parent),
                 row("line", name, "samples", samples, parent=parent)]
        if _named(function, named):  # asked for: shown whatever the renderer's top
            rows.append(row("line", name, "named", 1, parent=parent))
    return rows


def _named(function: str, named: set[str]) -> bool:
    """Whether `function` (`path:LINE(name)`) is one of `module:function` named."""
    path, _, rest = function.rpartition(":")
    short = rest.partition("(")[2].rstrip(")")
    stem = Path(path).stem
    return any(spec.rpartition(":")[2] == short and (
        spec.rpartition(":")[0].rpartition(".")[2] == stem) for spec in named)


def unheard_lines(rows: list[list[Any]], named_lines: Iterable[str]) -> list[str]:
    """What to say of the functions named for line rows that no sample saw."""
    lined = {measured[2] for measured in rows if measured[0] == "line"}
    return [f"--py-spy-lines {spec}: no sample saw that function (its module's file stem "
            "and its name; was it called?)" for spec in named_lines
            if not any(_named(parent, {spec}) for parent in lined)]


def idle_row(rows: list[list[Any]], wall: float, thread: str = "MainThread") -> list[Any]:
    """`thread`'s time off the CPU: its wall time less its time on it (`on_cpu` rows:
    py-spy sampled the threads that ran)."""
    active = sum(measured[5] for measured in rows if measured[:2] == ["thread", thread]
                 and measured[3] == "active_time")
    return row("thread", thread, "idle_time", max(wall - active, 0.0))
