"""The one small interface every backend implements.

A backend is created fresh in the process that runs its pass. The worker calls
`start(ctx)` before the target runs, `stop(ctx)` after it (also when it failed), then
`collect(ctx)`. Region hooks (`enter`, `exit`, `step`) are called only for backends that
define `enter`, so a backend that does not care about regions costs nothing there; one
that needs only regions' wall times sets `region_times` and reads `ctx.region_log`.

A wrapper backend (nsys) also defines `wrap(argv, ctx)`, the command its pass is launched
in, and `finish(ctx)`, called in the orchestrator once that process has ended.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from profile_all import regions
from profile_all.region_log import RegionLog
from profile_all.rows import Facts


@dataclass
class PassContext:
    """What a backend knows of the pass it runs in."""

    pass_index: int
    artifacts_dir: Path
    scratch_dir: Path
    rank: int = 0
    world_size: int = 1
    #: the target's command line, as the user would type it without profile-all
    command: list[str] = field(default_factory=list)
    #: what marks the target's steps, as the clean timing pass found it (`pa.step()`,
    #: `optimizer.step()`, `outermost module call`), "" when it has none or is unknown:
    #: a tracer can mark each step in its trace from the start
    step_source: str = ""
    #: the step the pass ends its target at (its window), None when the target runs whole
    max_steps: int | None = None
    #: (start, end) perf_counter of each torch.compile compilation so far, filled as the
    #: target runs (compile_watch): steps that held one are left out of per-step figures
    compiling: list[tuple[float, float]] = field(default_factory=list)
    #: (start, end) perf_counter of each window of steps in which another pass's backends
    #: ran inside this pass's process (runner/inside/windows.py), filled as they end: steps
    #: that overlap one are left out of per-step figures, region calls in one of regions'
    windows: list[tuple[float, float]] = field(default_factory=list)
    #: where regions' wall times go for backends that set `region_times`
    region_log: RegionLog = field(init=False)
    #: region calls left unheard for their depth before this pass (regions.too_deep_calls)
    too_deep_before: int = field(init=False)

    def __post_init__(self) -> None:
        self.too_deep_before = regions.too_deep_calls()
        self.region_log = RegionLog(
            self.scratch_dir / f"regions.pass{self.pass_index}.rank{self.rank}.journal",
            left_out=self.windows)

    def too_deep(self) -> int:
        """The region calls this pass's backends did not hear, nested deeper than
        depth_cap.MAX_DEPTH (its region log's count once read: they hear the same calls)."""
        return max(regions.too_deep_calls() - self.too_deep_before, self.region_log.too_deep)

    def artifact_path(self, filename: str) -> Path:
        """`artifacts/<filename>`, with `.rankN` before the suffix when several ranks run."""
        if self.world_size > 1:
            stem, dot, suffix = filename.partition(".")
            filename = f"{stem}.rank{self.rank}{dot}{suffix}"
        return self.artifacts_dir / filename


@dataclass
class Artifact:
    """A native file a backend wrote, with the viewer that opens it."""

    backend: str
    path: str
    viewer: str
    open_command: str

    def to_dict(self) -> dict[str, str]:
        return {"backend": self.backend, "path": self.path, "viewer": self.viewer,
                "open_command": self.open_command}


#: at most this many per-call samples of one region are kept (evenly spaced in time)
MAX_SAMPLES = 10_000


def kept_samples(values: Any) -> list[float]:
    """`values` thinned to MAX_SAMPLES, evenly spaced, so that a hot region's samples stay small."""
    count = len(values)
    if count <= MAX_SAMPLES:
        return list(values)
    return [values[index * count // MAX_SAMPLES] for index in range(MAX_SAMPLES)]


@dataclass
class Collected:
    rows: list[list[Any]] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    #: per-call values, for comparing two runs: (scope, name, parent, metric, values)
    samples: list[tuple[str, str, str, str, list[float]]] = field(default_factory=list)
    #: the timeline: (series, name, start, end, value, unit) each (rows.TIMELINE_COLUMNS)
    timeline: list[list[Any]] = field(default_factory=list)
    #: what `collect_after` needs to make the rest (JSON), called in profile-all's process
    #: once the pass's process has ended; None: nothing more to collect
    later: dict[str, Any] | None = None


@dataclass(frozen=True)
class Option:
    """One option of a backend: its key in the backend's options, the command line's flag
    for it, the types the API accepts (the first is the command line's: bool a flag, list
    a repeatable text, int, float or str a value), its default and its help."""

    key: str
    flag: str
    types: tuple[type, ...]
    default: Any
    help: str
    metavar: str = ""


class Backend:
    #: the CLI name
    name: ClassVar[str]
    #: timer, tracer, counter, sampler or wrapper: decides which backends share a pass
    kind: ClassVar[str]
    #: one line for `profile-all backends` and the README
    measures: ClassVar[str] = ""
    #: the native file it writes and the viewer that opens it, for `profile-all backends`
    native_file: ClassVar[str] = ""
    #: modules its start() imports; every pass of a run imports them before the target's
    #: clock starts, so that no pass's target time holds an import the others' do not
    imports: ClassVar[tuple[str, ...]] = ()
    #: (module, distribution) pairs it cannot run without; `available` checks them
    requires: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: it measures the target's child processes too (a sampler or launcher outside the
    #: target's process); backends inside the process are blind to them, and say so
    sees_children: ClassVar[bool] = False
    #: its options, declared once: the command line offers a flag each and the API checks
    #: `options={name: {key: value}}` against them (a new backend with options is one file)
    offered_options: ClassVar[tuple[Option, ...]] = ()
    #: what the report must know of its rows (that they count FLOPs, time regions...)
    facts: ClassVar[Facts] = Facts()
    #: it needs no more of a region than its wall time, read from `ctx.region_log` at
    #: collect, rather than its `enter`/`exit` hooks: the cheapest path for the target
    region_times: bool = False
    #: it can start at a step's end inside a running script and stop at another's, so
    #: its pass may run in a window of steps inside the clean timing pass's process
    #: (the script run once); a plug-in's runs in a process of its own unless it says so
    windowed: ClassVar[bool] = False
    #: where passes run in windows, it runs beside the clean timing pass's timers for the
    #: whole script, what it measured inside the windows left out (`ctx.windows`): a
    #: sampler in another process whose cost to the target is within the noise
    beside: ClassVar[bool] = False
    #: the most steps its pass runs, where its analysis grows with every step's events
    #: (torch-memory: 21.6 GB for 25 steps of a small GPT); None: the pass's window
    most_steps: ClassVar[int | None] = None
    #: it counts from shapes alone, so a model's pass may run on the meta device for it
    #: (`--count-on meta`: nothing computed, no memory for weights)
    counts_on_meta: ClassVar[bool] = False

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        #: what is worth knowing about its measurement, for the report
        self.notes: list[str] = []
        #: what it could not measure although it kept running (the target switched it off,
        #: say): its pass is then `partial`, not `ok`
        self.losses: list[str] = []

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """(True, "") when it can run here, else (False, the reason)."""
        for module, distribution in cls.requires:
            if importlib.util.find_spec(module) is None:
                return False, f"{distribution} is not installed (pip install {distribution})"
        return True, ""

    @classmethod
    def beside_with(cls, options: dict[str, Any]) -> bool:
        """Whether it runs beside the timers with these options (`beside`)."""
        return cls.beside

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Refuse option values of the right type but out of range (validate's
        ArgumentValueError), before any pass runs."""

    def start(self, ctx: PassContext) -> None:
        """Begin measuring; called just before the target runs."""

    def stop(self, ctx: PassContext) -> None:
        """Stop measuring; called just after the target ends, however it ended."""

    def window_seconds(self) -> float:
        """The least time its window of steps lasts (a sampler needs enough samples for
        its shares: steps of a millisecond give none in ten steps); 0 for none."""
        return 0.0

    def step(self) -> None:
        """An iteration ended (`pa.step()`); heard by backends that define `enter`, read
        region times or define this."""

    def steps_found(self, marks: Sequence[float]) -> None:
        """The `perf_counter()` end of each step the pass found but this backend did not
        hear (optimizer steps or outermost module calls, in the pass that learns that
        they mark the steps only once the target ended); called before `stop`."""

    def collect(self, ctx: PassContext) -> Collected:
        """Rows (see rows.row) and native files; runs even when the target failed."""
        return Collected()

    def collect_after(self, ctx: PassContext, later: dict[str, Any]) -> Collected:
        """In profile-all's process, once the pass's process has ended: the rows of a
        `collect` that left them for later (`Collected.later`), such as those read from a
        native file with readers that profile-all has imported already, and the pass
        would import for itself (pandas: 0.2 s of a pass)."""
        return Collected()

    @classmethod
    def recover(cls, ctx: PassContext) -> Collected:
        """Rows saved on disk by a process that died before `collect` (SIGKILL, a crash)."""
        return Collected()


def listen_to(backends: Sequence[Backend], ctx: PassContext,
              steppers: Sequence[Any] = ()) -> list[Backend]:
    """Route the target's regions to `backends` as each asks (its hooks, or the region log)
    and its steps to them and to `steppers`; returns the backends that hear steps."""
    hooks = [backend for backend in backends
             if callable(getattr(backend, "enter", None)) and not backend.region_times]
    logged = [backend for backend in backends if backend.region_times]
    stepping = [backend for backend in backends if backend not in hooks
                and backend not in logged and type(backend).step is not Backend.step]
    regions.listen(hooks, [*logged, *stepping, *steppers], ctx.region_log if logged else None)
    return [*hooks, *logged, *stepping]
