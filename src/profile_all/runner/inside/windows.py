"""Other passes' backends, each in a window of steps inside the clean timing pass's process:
the script's set-up runs once, not once per profiler (issue 39).

The host pass (the clean timing pass, timers only) runs the script whole. After its first
`after` steps (step 1 holds the set-up; the next warm up), each hosted pass's backends start
at a step's end, hear `steps` steps (fewer where steps are long: about WINDOW_SECONDS of
them, at least `fewest`), and stop at the end of the last; GAP_STEPS clean steps follow
each window (the first holds the window's stop: torch.profiler writes its trace there)
before the next begins. Once every window has run the script goes on clean to its end.

The host's figures leave the windows out: a step that overlaps one is left out of its
per-step figures, a region call that starts in one out of its region figures (`ctx.windows`
holds their spans); its run total holds them, and says so. Each window is a pass of its own
in the report (`PassResult` number, backends, steps, its per-step times, its overhead
against the host's clean steps), whose first step is left out as a pass's first is.

A window counts the steps of the kind that marks them so far (StepClock's precedence); a
window the script did not reach, or ended before its last step, is not run here: its pass
runs in a process of its own.

Under torchrun every rank hosts the same windows, and each must begin and end at the same
step on every rank: a rank inside a window slows the others' clean steps at each
collective they share. So with several ranks a window holds its spec's steps, whatever the
steps' times (which differ a little by rank), and no sampler is hosted (its window lasts a
time); a window one rank did not get is run by every rank, in a launch of its own.
Nothing a window's backend does reaches the script: a failure to start or stop is that
pass's loss.
"""

from __future__ import annotations

import math
import resource
import statistics
import time
from dataclasses import dataclass, field
from itertools import pairwise
from time import perf_counter
from typing import Any

from profile_all import backends, regions
from profile_all.backends.base import Backend, PassContext, kept_samples
from profile_all.compile_watch import held_compilation
from profile_all.runner.inside.collecting import gather

#: a window the target's end cut shorter than this share of its least time is dropped
SHORT_OF_ITS_TIME = 0.1
#: clean steps between a window's end and the next window's start: the first of them
#: holds the window's stop, and is left out of every figure; the other keeps the host's
#: clean steps spread over the run, beside the windows they are the reference of
GAP_STEPS = 2
#: where steps are long a window holds as many as last about this long (but at least its
#: `fewest`): six evaluations of 0.2 s each, a window each, did not fit in two LBFGS steps
WINDOW_SECONDS = 0.5


@dataclass
class _Hooks:
    """A window backend's region hooks, without its step(): the window hands it steps of
    every kind as they come, pa.step()'s too."""

    backend: Backend

    def enter(self, name: str, parent: str) -> Any:
        return self.backend.enter(name, parent)  # type: ignore[attr-defined]

    def exit(self, name: str, parent: str, token: Any) -> None:
        self.backend.exit(name, parent, token)  # type: ignore[attr-defined]

    def step(self) -> None:
        pass


@dataclass
class Window:
    """One hosted pass: `spec` is its entry in PassSpec.windows (number, backends, steps,
    result_path)."""

    spec: dict[str, Any]
    ctx: PassContext
    source: str = ""
    started: list[Backend] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)
    #: perf_counter at its start and at each step's end
    marks: list[float] = field(default_factory=list)
    ended_at: float | None = None
    #: the target ended inside it: the target's outcome is the window's
    cut_by_target: bool = False
    #: the least time it lasts (its backends' `window_seconds`)
    seconds: float = 0.0
    #: the host's step count when it began (it holds the next `steps` steps)
    after_step: int = 0
    #: the steps it holds: its spec's, fewer where steps are long
    steps: int = 0
    _undo: Any = None

    def guard(self, backend: str, phase: str, error: Exception) -> None:
        self.failures.append({"backend": backend, "phase": phase,
                              "error": f"{type(error).__name__}: {error}"})


class Windows:
    """The windows a pass hosts, begun and ended at the step marks its clock reports."""

    def __init__(self, specs: list[dict[str, Any]], after: int, host: PassContext,
                 options: dict[str, dict[str, Any]]) -> None:
        self.pending = list(specs)
        self.ran: list[Window] = []
        self.current: Window | None = None
        self.host, self.options = host, options
        #: several ranks: windows end at a step count alone, the same on every rank
        self._by_count = host.world_size > 1
        #: CPU time of the windows' own helper processes (py-spy, the memory sampler),
        #: ended and waited for: not the target's children
        self.helpers_cpu = 0.0
        self._after = max(1, after)
        self._start_at = self._after  # the step count after which the next one begins
        self._source = ""
        #: the clean steps' times so far (not one that held a window's stop), and the
        #: last step's end outside a window
        self._clean: list[float] = []
        self._last_clean: float | None = None

    def mark(self, source: str, count: int) -> None:
        """A step of `source` ended, the `count`th: hand it to the open window, end that
        window at its last step, or begin the next one."""
        now = perf_counter()
        if source != self._source:  # steps of a kind that takes precedence: count anew
            if self._source:
                self._again()
            self._source, self._clean, self._last_clean = source, [], now
            self._start_at = max(self._after, count)
        window = self.current
        if window is None and self._last_clean is not None:
            self._clean.append(now - self._last_clean)
        self._last_clean = now if window is None else None
        if window is not None:
            window.marks.append(now)
            for backend in window.started:
                try:
                    backend.step()
                except Exception as error:
                    window.guard(backend.name, "step", error)
            if len(window.marks) - 1 >= window.steps and (
                    self._by_count or window.marks[-1] - window.marks[0] >= window.seconds):
                self._end(window)
                self._start_at = count + GAP_STEPS
        elif self.pending and count >= self._start_at:
            self._begin(self.pending.pop(0), source, count)

    def _again(self) -> None:
        """Steps of a kind that takes precedence showed (an evaluation's model calls at
        iteration 0, then the training's optimizer steps): the windows run so far counted
        steps that are none; they run again, on the steps that are."""
        if self.current is not None:
            self._end(self.current)
        self.pending[:0] = [window.spec for window in self.ran]
        self.ran = []

    def _begin(self, spec: dict[str, Any], source: str, count: int) -> None:
        host, steps = self.host, self._length(spec)
        ctx = PassContext(pass_index=spec["number"], artifacts_dir=host.artifacts_dir,
                          scratch_dir=host.scratch_dir, rank=host.rank,
                          world_size=host.world_size, command=host.command,
                          step_source=source, max_steps=steps)
        ctx.compiling = host.compiling  # the same compilations, as they come
        window = self.current = Window(spec, ctx, source, after_step=count,
                                       steps=steps)
        self.ran.append(window)
        helpers = _children_cpu()
        for name in spec["backends"]:
            try:
                backend = backends.load(name)(self.options.get(name))
                backend.start(ctx)
                window.seconds = max(window.seconds, backend.window_seconds())
            except Exception as error:
                window.guard(name, "start", error)
                continue
            window.started.append(backend)
        self.helpers_cpu += _children_cpu() - helpers
        window._undo = regions.also_listen(
            [_Hooks(b) for b in window.started if callable(getattr(b, "enter", None))])
        window.marks.append(perf_counter())

    def _length(self, spec: dict[str, Any]) -> int:
        """The steps a window holds: as many as last WINDOW_SECONDS at the clean steps'
        median, within its spec's `fewest` and `steps`; its spec's with several ranks."""
        steps = spec["steps"]
        if not self._clean or self._by_count:
            return steps
        wanted = math.ceil(WINDOW_SECONDS / max(statistics.median(self._clean), 1e-9))
        return max(spec.get("fewest", steps), min(steps, wanted))

    def _end(self, window: Window) -> None:
        window._undo()
        helpers = _children_cpu()
        for backend in reversed(window.started):
            try:
                backend.stop(window.ctx)
            except Exception as error:
                window.guard(backend.name, "stop", error)
        self.helpers_cpu += _children_cpu() - helpers
        window.ended_at = perf_counter()
        self.host.windows.append((window.marks[0], window.ended_at))
        self.current = None

    def end(self, ended_well: bool) -> None:
        """The target ended: an open window ends with it. One that had fewer steps than
        asked, or a tenth of its least time, of a target that ended well, is dropped: its
        pass runs in a process of its own, as one whose window never came (a script of 8
        steps: 3 counted of its 6; py-spy's 0.078 s of an inference loop: no sample)."""
        window = self.current
        if window is None:
            return
        window.cut_by_target = True
        self._end(window)
        lasted = (window.ended_at or 0.0) - window.marks[0]
        if ended_well and (len(window.marks) - 1 < window.steps or (
                not self._by_count and lasted < window.seconds * SHORT_OF_ITS_TIME)):
            self.ran.remove(window)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def window_result(window: Window, target: dict[str, Any], world: dict[str, Any]) -> Any:
    """The window's pass as a `PassResult`: its backends' rows collected now (the target has
    ended), its steps and their times; `target`: the host's outcome (a dict), the window's
    own where the target ended inside it; `world`: the host's runtime, world_size."""
    from profile_all.runner.spec import PassResult

    ctx = window.ctx
    gathered = gather(window.started, ctx)
    marks = window.marks
    spans = list(pairwise(marks))
    compiled = held_compilation(spans, ctx.compiling)
    kept = [end - start for number, (start, end) in enumerate(spans, 1)
            if number > 1 and number not in compiled]
    wall = (window.ended_at or perf_counter()) - marks[0]
    outcome = dict(target) if window.cut_by_target else {
        "status": "ok", "exit_code": 0, "error": "", "target_wall_time": wall,
        "ended_at": time.time()}
    outcome["target_wall_time"] = wall
    return PassResult(
        ctx.pass_index, ctx.rank, list(window.spec["backends"]), outcome, gathered.rows,
        gathered.samples, gathered.artifacts, [*window.failures, *gathered.failures],
        world_size=world["world_size"], runtime=world["runtime"],
        steps=len(spans), step_source=window.source, step_times=kept_samples(kept),
        compile_steps=compiled, window=window.steps, timeline=gathered.timeline,
        later=gathered.later,
        host=world["host"], window_from=window.after_step + 1)

