"""wallclock (timer): host wall time and CPU time of the run, of every region and step.

Wall time is `time.perf_counter`; CPU time is `time.process_time` (the whole process, all
threads). Per region and per step the samples are kept, so the report has calls, total,
mean, median, std, min, max and p90 of wall time, and CPU time totals.

Step i is the time from the (i-1)th `step()` to the ith; the first step starts at the first
region entered, else at the target's start. Every step is counted (`calls`) and in the
total; per-step statistics leave out the first (it holds the script's setup, or warm-up)
and any step that held a torch.compile compilation (`ctx.compiling`), and
`excluded_calls` counts those left out.

Regions' wall times come from the pass's region log (region_log.py), not from hooks: a
nested region costs the target ~0.55 µs instead of ~1.05 µs through `enter`/`exit` on a
2-core VM (scripts/bench/fast_by_default.py). CPU time per region and step is asked for
with `cpu_time=True` (CLI `--region-cpu-time`): it takes the hooks and two system calls per
region (0.7 µs each there), 2.5-4 µs a region. The run's CPU time is always measured.

So that a process killed without warning (SIGKILL, the OOM killer) still leaves its
measurements, new samples (and the region log's events) are appended to a journal in the
pass's scratch folder at most every FLUSH_SECONDS, checked when a region closes or a step
ends; `recover` reads it.
A journal record is a JSON header line `[name, parent, count, has_cpu]` and then the raw
doubles: `count` wall times, then `count` CPU times when has_cpu.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from array import array
from collections.abc import Sequence
from itertools import accumulate, pairwise
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

from profile_all import region_log
from profile_all.backends.base import Backend, Collected, Option, PassContext, kept_samples
from profile_all.compile_watch import held_compilation
from profile_all.rows import Facts, row
from profile_all.stats import summarize

FLUSH_SECONDS = 0.2
STEP = ("step", None)  # key of the step samples; regions are keyed (name, parent path)

Samples = dict[tuple[str, Any], tuple[array, array]]


def _journal(ctx: PassContext) -> Path:
    return ctx.scratch_dir / f"wallclock.pass{ctx.pass_index}.rank{ctx.rank}.journal"


class WallClock(Backend):
    name = "wallclock"
    facts = Facts(region_timer="wall_time")
    kind = "timer"
    measures = "wall and CPU time of the run, of each region and each step"
    offered_options = (Option("cpu_time", "--region-cpu-time", (bool,), False,
                              "wallclock: CPU time per region and step too (two system "
                              "calls a region)"),)

    def start(self, ctx: PassContext) -> None:
        self._samples: Samples = {}
        self._written: dict[tuple[str, Any], int] = {}
        self._journal_path = _journal(ctx)
        self._pid = os.getpid()
        self._cpu_time = self.options.get("cpu_time", False)
        self._log = ctx.region_log
        if not self._cpu_time:  # regions' wall times from the log: no hooks, no CPU clock
            self.region_times = True
            self.step = self._step_wall
        self._flushed_at = perf_counter()
        self._run_cpu = process_time()
        self._run_wall = self._started = perf_counter()
        #: the current step's start (wall, cpu): the first region's, else the target's
        self._step_start: tuple[float, float] | None = None
        self._first_step_start = (self._started, self._run_cpu)
        self._origin: float | None = None  # the first step's start
        self._compiling = ctx.compiling
        self._windows = ctx.windows

    def _series(self, key: tuple[str, Any]) -> tuple[array, array]:
        series = self._samples[key] = (array("d"), array("d"))
        return series

    def enter(self, name: str, parent: str) -> tuple[float, float]:
        cpu = process_time()
        wall = perf_counter()
        if self._step_start is None:
            self._step_start = self._first_step_start = (wall, cpu)
        return wall, cpu

    def exit(self, name: str, parent: str, token: tuple[float, float]) -> None:
        wall = perf_counter()
        cpu = process_time()
        series = self._samples.get((name, parent)) or self._series((name, parent))
        series[0].append(wall - token[0])
        series[1].append(cpu - token[1])
        if wall - self._flushed_at > FLUSH_SECONDS:
            self._flush(wall)

    def step(self) -> None:
        wall = perf_counter()
        cpu = process_time()
        start = self._step_start or self._first_step_start
        if self._origin is None:
            self._origin = start[0]
        series = self._samples.get(STEP) or self._series(STEP)
        series[0].append(wall - start[0])
        series[1].append(cpu - start[1])
        self._step_start = (wall, cpu)
        if wall - self._flushed_at > FLUSH_SECONDS:
            self._flush(wall)

    def _step_wall(self) -> None:
        wall = perf_counter()
        if self._step_start is None:
            first = self._log.first_enter
            self._step_start = (first, 0.0) if first is not None else self._first_step_start
            self._origin = self._step_start[0]
        (self._samples.get(STEP) or self._series(STEP))[0].append(wall - self._step_start[0])
        self._step_start = (wall, 0.0)
        if wall - self._flushed_at > FLUSH_SECONDS:
            self._flush(wall)

    def steps_found(self, marks: Sequence[float]) -> None:
        """Timed as `step()` would have timed them: from one end to the next, the first
        from the first region (else the target's start)."""
        if STEP in self._samples:
            return
        first = self._log.first_enter
        start = self._step_start[0] if self._step_start else \
            first if first is not None else self._started
        self._origin = start
        walls = array("d")
        for mark in marks:
            walls.append(mark - start)
            start = mark
        if walls:
            self._samples[STEP] = (walls, array("d"))

    def _flush(self, now: float) -> None:
        self._flushed_at = now
        if os.getpid() != self._pid:  # a forked child (DataLoader worker): not our journal
            return
        chunks = []
        for key, (walls, cpus) in self._samples.items():
            done = self._written.get(key, 0)
            if done < len(walls):
                header = [*key, len(walls) - done, bool(cpus)]
                chunks += [json.dumps(header).encode() + b"\n", walls[done:].tobytes(),
                           cpus[done:].tobytes()]
                self._written[key] = len(walls)
        if chunks:
            with open(self._journal_path, "ab") as journal:
                journal.write(b"".join(chunks))

    def stop(self, ctx: PassContext) -> None:
        self._run_wall = perf_counter() - self._run_wall
        self._run_cpu = process_time() - self._run_cpu

    def collect(self, ctx: PassContext) -> Collected:
        rows = [row("run", "run", "wall_time", self._run_wall),
                row("run", "run", "cpu_time", self._run_cpu)]
        self._journal_path.unlink(missing_ok=True)
        if self.region_times:
            for key, walls in self._log.samples().items():
                self._samples[key] = (walls, array("d"))
        collected = _collected(self._samples, self._excluded_steps(),
                               self._log.apart if self.region_times else {})
        collected.rows[:0] = rows
        if self.region_times:  # the timeline: seconds since the target started
            collected.timeline = [["region", name, start - self._started, end - self._started,
                                   float("nan"), "s"]
                                  for name, start, end in self._log.top_level_calls()]
        return collected

    def _excluded_steps(self) -> set[int]:
        """The steps left out of per-step statistics: the first, any that held a
        torch.compile compilation, and any that overlap another pass's window of steps."""
        walls = self._samples.get(STEP, (array("d"),))[0]
        if self._origin is None or not walls:
            return {1}
        spans = list(pairwise(accumulate(walls, initial=self._origin)))
        return {1, *held_compilation(spans, self._compiling),
                *held_compilation(spans, self._windows)}

    @classmethod
    def recover(cls, ctx: PassContext) -> Collected:
        samples: Samples = {}
        with contextlib.suppress(FileNotFoundError), _journal(ctx).open("rb") as journal:
            while header := journal.readline():
                try:
                    name, parent, count, has_cpu = json.loads(header)
                except ValueError:
                    break
                walls, cpus = array("d"), array("d")
                try:
                    walls.fromfile(journal, count)
                    if has_cpu:
                        cpus.fromfile(journal, count)
                except EOFError:  # the record the kill cut short
                    break
                series = samples.setdefault((name, parent), (array("d"), array("d")))
                series[0].extend(walls)
                series[1].extend(cpus)
        for key, walls in region_log.read(ctx.region_log.journal).items():
            samples[key] = (walls, array("d"))
        return _collected(samples, {1}, {})


def _collected(samples: Samples, excluded_steps: set[int],
               apart: dict[tuple[str, str], list[int]]) -> Collected:
    """Rows and samples of each region and of the steps; the steps' statistics (and
    samples) without `excluded_steps`, a region's without its calls in others' windows of
    steps (`apart`: their positions), their calls and total with them."""
    rows, kept = [], []
    for (name, parent), (walls, cpus) in samples.items():
        scope = "step" if parent is None else "region"
        left_out = {n - 1 for n in excluded_steps} if scope == "step" else \
            set(apart.get((name, parent), ()))
        parent = parent or ""
        counted = [wall for index, wall in enumerate(walls) if index not in left_out]
        kept.append((scope, name, parent, "wall_time", kept_samples(counted)))
        rows.append(row(scope, name, "calls", len(walls), parent=parent))
        stats = {**summarize(counted), "total": math.fsum(walls)}
        if scope == "step" or len(counted) < len(walls):
            rows.append(row(scope, name, "excluded_calls", len(walls) - len(counted),
                            parent=parent))
        for stat, value in stats.items():
            rows.append(row(scope, name, "wall_time", value, stat=stat, parent=parent))
        if cpus:
            cpu_total = sum(cpus)
            rows.append(row(scope, name, "cpu_time", cpu_total, parent=parent))
            rows.append(row(scope, name, "cpu_time", cpu_total / len(cpus), stat="mean",
                            parent=parent))
    return Collected(rows, samples=kept)
