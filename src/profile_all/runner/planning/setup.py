"""A run's arguments checked, before anything runs, and what follows from them: the
backends selected, the modules every pass pre-imports, how passes start, their windows."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from profile_all import backends, validate
from profile_all.errors import UsageError
from profile_all.pass_record import PassRecord
from profile_all.runner.planning.plan import Pass
from profile_all.runner.starting import server_handle
from profile_all.runner.starting.launch import Launch
from profile_all.targets import ModelTarget, ScriptTarget


class Observer(Protocol):
    """Told what happens, for a progress display."""

    def pass_started(self, run_pass: Pass, count: int) -> None: ...
    def pass_ended(self, run_pass: Pass, count: int, summary: PassRecord) -> None: ...


@dataclass
class Setup:
    """A run's checked arguments and what follows from them, before any pass runs."""

    target: ScriptTarget | ModelTarget
    selection: backends.Selection
    options: dict[str, dict[str, Any]]
    timeout: float | None
    isolate: bool
    launch: Launch
    preimport: list[str]
    repeat: int
    forked: bool
    peak_flops: float | None
    #: steps after which a pass other than the timing pass ends its target (None: whole)
    pass_steps: int | None = None
    #: steps after which every pass ends its target, the timing pass too (None: whole)
    max_steps: int | None = None
    #: "first": the target's output of the first pass only, the others' in their logs;
    #: "all": every pass's; "none": none (every pass's in its logs)
    show_output: str = "first"
    #: after a pass timed out: "stop" runs no pass that would run the script again,
    #: "continue" runs them all
    on_timeout: str = "stop"
    observer: Observer | None = None
    #: called with the Report as its files are written (the command line draws it then)
    meanwhile: Callable[[Any], object] | None = None
    command: list[str] = field(default_factory=list)
    #: the folder the run started in (a target may remove it as it runs)
    cwd: str = field(default_factory=os.getcwd)
    #: the backends were named (not the defaults): each is run, even on a failing script
    named: bool = False
    #: other passes run in windows of steps inside the clean timing pass's process, each
    #: of `window_steps` steps, at least `window_fewest` where steps are long
    #: (runner/inside/windows.py)
    windows: bool = False
    window_steps: int = 0
    window_fewest: int = 0

    @property
    def is_model(self) -> bool:
        return isinstance(self.target, ModelTarget)

    @property
    def server_modules(self) -> list[str]:
        """What the run's fork server imports before it forks a pass: the preimports, the
        worker, and the backends' own modules (for a script every built-in one's, whatever
        was selected: `backends.own_modules`)."""
        return [*self.preimport, "profile_all.runner.inside.worker",
                *backends.own_modules(self.selection.runnable, every_builtin=not self.is_model)]


def setup_run(target: ScriptTarget | ModelTarget, backend_names: Sequence[str] | None,
           timeout: float | None, isolate: bool, options: Any, launch: Launch | None,
           repeat: int, fresh_processes: bool, peak_flops: float | None) -> Setup:
    """Every argument checked (a TypeError or ValueError naming it), before anything runs;
    the target itself is checked by the orchestrator (`target.validate()`: a model is built
    and run once, which imports torch: it overlaps the fork server's start)."""
    launch = launch or Launch()
    launch.validate()
    validate.whole("repeat", repeat, 1, MAX_REPEAT)
    timeout = validate.seconds("timeout", timeout)
    validate.positive("peak_flops", peak_flops)
    options = backends.check_options(options)
    backend_names = validate.backend_names(backend_names)
    _check_isolation(target, isolate, launch, timeout)
    selection = _selection(target, backend_names, isolate)
    return Setup(target, selection, options or {}, timeout, isolate, launch,
                 _preimports(selection, launch, target), repeat,
                 isolate and not fresh_processes and not launch.distributed
                 and server_handle.fork_available(), peak_flops,
                 named=backend_names is not None)


def _check_isolation(target: ScriptTarget | ModelTarget, isolate: bool, launch: Launch,
                     timeout: float | None) -> None:
    """What needs passes in processes of their own (isolate=True), and what cannot have
    them (a live model object)."""
    if launch.distributed and not isolate:
        raise validate.ArgumentValueError(
            "several ranks need isolate=True (torchrun starts their processes)")
    if timeout is not None and not isolate:
        raise validate.ArgumentValueError(
            "a timeout needs isolate=True (each pass in a process of its own)")
    if isinstance(target, ModelTarget) and target.live_model is not None and isolate:
        raise validate.ArgumentValueError("a live model object runs in this process: isolate=False")


def _selection(target: ScriptTarget | ModelTarget, backend_names: list[str] | None,
               isolate: bool) -> backends.Selection:
    """The backends to run (a model's or a script's defaults without names), the timer of
    the clean timing pass added where none was named."""
    is_model = isinstance(target, ModelTarget)
    selection = backends.select(None if backend_names is None else list(backend_names),
                                backends.DEFAULT_MODEL if is_model else backends.DEFAULT)
    if not isolate and any(hasattr(cls, "wrap") for cls in selection.runnable):
        raise validate.ArgumentValueError("nsys launches its pass's process: it needs isolate=True")
    if not selection.runnable and not is_model:
        raise UsageError("no requested backend can run here: " + "; ".join(
            f"{name}: {why}" for name, why in selection.skipped.items()))
    if not is_model and not any(cls.kind == "timer" for cls in selection.runnable):
        # the clean timing pass always runs first: it finds what marks the steps (so the
        # passes after it hear them as they come) and is every overhead's reference
        selection.runnable.insert(0, backends.load("wallclock"))
    return selection


#: the steps a profiled pass runs by default: a few warm-up steps, then enough for stable
#: per-step figures (a median over 20 steps after 5 of warm-up)
DEFAULT_PASS_STEPS = 25


#: the steps of a pass run in a window inside the clean timing pass's process (the process
#: is warm by then: a step to settle, then five for per-step figures; a sampler's window
#: lasts until it has enough samples), and the clean steps that pass runs before the
#: first window (step 1 holds the script's set-up)
WINDOW_STEPS = 6
WINDOWS_AFTER = 5
#: the fewest steps a default window holds where steps are long: its first, left out, and
#: three per-step times for its overhead
WINDOW_FEWEST = 4


def use_windows(setup: Setup, pass_steps: int | str | None, fresh_processes: bool) -> None:
    """Whether the passes that can share a process run in windows of steps inside the clean
    timing pass's, and of how many steps (`--pass-steps N` where given): a script's, one
    process a rank (under torchrun, every rank's windows hold the same steps); not under
    `--fresh-processes`, `--pass-steps all`."""
    setup.windows = (not setup.is_model and not fresh_processes
                     and setup.pass_steps is not None)
    asked = pass_steps is not None and setup.pass_steps
    setup.window_steps = setup.pass_steps if asked else WINDOW_STEPS
    setup.window_fewest = setup.window_steps if asked else WINDOW_FEWEST


#: the most timing passes a run may repeat (each runs the whole script)
MAX_REPEAT = 100


def check_steps(pass_steps: int | str | None,
                max_steps: int | None) -> tuple[int | None, int | None]:
    """(steps of a profiled pass, steps of every pass), None for whole."""
    if pass_steps == "all":
        pass_steps = None
    elif pass_steps is None:
        pass_steps = DEFAULT_PASS_STEPS
    elif isinstance(pass_steps, str) and pass_steps.isdigit():
        pass_steps = int(pass_steps)
    if isinstance(pass_steps, str):
        raise validate.ArgumentValueError(
            f"pass_steps (--pass-steps) wants a whole number of steps or 'all', got "
            f"{pass_steps!r}")
    if pass_steps is not None:
        validate.whole("pass_steps (--pass-steps)", pass_steps, 2)
    if max_steps is not None:
        validate.whole("max_steps (--max-steps)", max_steps, 1)
    return pass_steps, max_steps


#: what in a script's own file says it imports torch._dynamo, inside the target's time
#: where no pass imported it before: its first compiled call does, and so does making an
#: optimizer in torch 2.13 (`torch.optim.SGD(...)`: 1.4 s of a 30-step MLP training's
#: 1.43 s after `import torch`, one thread, 2-core VM, 2026-11-28)
IMPORTS_DYNAMO = re.compile(
    rb"torch\.compile|torch\._dynamo|\.compile\(|torch\._inductor|[oO]ptim")


def _preimports(selection: backends.Selection, launch: Launch,
                target: ScriptTarget | ModelTarget) -> list[str]:
    """What every pass imports first. For a model, what its backends import (by default
    torch alone, not torch._dynamo: a second of the server's start that the check and the
    timing pass would wait for, and that no pass of a model needs unless the model
    compiles, which imports it itself as the user's process would). For a script, every
    built-in backend's modules, so that its time does not hold `import torch` in one run
    and not in another; torch._dynamo (1 to 1.5 s of every run's start) only where a
    selected backend imports it as it starts (torch-profiler, torch-memory) or the
    script's own file compiles or makes an optimizer: else its import would land inside
    the target's time of one run and not of another. A script that compiles only in a
    module of its own imports it in its first compiled step, which per-step figures leave
    out (compile_watch); one that makes its optimizer there, as it makes it."""
    is_model = isinstance(target, ModelTarget)
    preimport = backends.preimports(selection.runnable, every_builtin=not is_model)
    dynamo_needed = any("torch._dynamo" in cls.imports for cls in selection.runnable)
    if launch.distributed or not (is_model or dynamo_needed or _imports_dynamo(target)):
        # and under torchrun: torch 2.13's torch._dynamo imported before a gloo process
        # group is made deadlocks DDP's teardown about one run in two, under bare torchrun
        # too (scripts/examples/ddp_train.py); no pass takes that risk for the others' sake
        preimport = [module for module in preimport if module != "torch._dynamo"]
    return preimport


def _imports_dynamo(target: ScriptTarget | ModelTarget) -> bool:
    try:
        return bool(IMPORTS_DYNAMO.search(Path(target.path).read_bytes()))
    except (OSError, AttributeError):
        return True  # unread: as if it did
