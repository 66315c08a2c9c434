"""One pass: start its backends, run the target, stop and collect, however the target ended.

The same code runs in a worker process (`profile_all.runner.inside.worker`) and in the caller's
process (`pa.run(..., isolate=False)`). Its result is a `PassResult` (JSON from a worker),
so the orchestrator treats both alike.
"""

from __future__ import annotations

import importlib
import os
import resource
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

from profile_all import backends, frameworks, regions
from profile_all.backends.base import Backend, listen_to
from profile_all.compile_watch import CompileWatch, compile_rows
from profile_all.errors import one_line
from profile_all.rows import BENCHMARK, COMPILER
from profile_all.runner.inside.collecting import gather
from profile_all.runner.inside.steps import StepClock, StepLimit
from profile_all.runner.inside.windows import Windows, window_result
from profile_all.runner.spec import PassResult, PassSpec
from profile_all.runner.watching import heartbeat
from profile_all.target_profilers import ProfilerWatch
from profile_all.targets import target_from_spec


class Terminated(BaseException):
    """Raised in the target when the process is asked to stop (SIGTERM, SIGHUP)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class Outcome:
    status: str  # ok, failed, raised, interrupted, terminated, os_exit
    exit_code: int
    error: str
    target_wall_time: float
    #: epoch seconds when the target ended: which of several ranks failed first
    ended_at: float = field(default_factory=time.time)


def _exit_status(error: SystemExit) -> tuple[int, str]:
    """What python does with sys.exit(code): None -> 0, an int -> the exit status the OS
    keeps of it (its low 8 bits: sys.exit(256) is 0, sys.exit(-1) is 255), else print it
    and 1."""
    if error.code is None:
        return 0, ""
    if isinstance(error.code, int):
        status = error.code & 0xFF
        if not status:
            return 0, ""
        kept = "" if status == error.code else f", exit status {status} (the OS keeps 8 bits)"
        return status, f"sys.exit({error.code}){kept}"
    print(error.code, file=sys.stderr)
    return 1, f"sys.exit({error.code!r})"


#: frames of profile-all's own package and of runpy, left out of the target's traceback
_OWN_FILES = (str(Path(os.path.abspath(__file__)).parents[2]),  # the profile_all package
              os.path.join(os.path.dirname(os.__file__), "runpy"), "<frozen runpy>")


def _print_target_traceback(error: BaseException) -> None:
    """The traceback python would print, without profile-all's and runpy's frames."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_OWN_FILES):
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb)


def run_target(target: Any, *, own_process: bool, mode: str,
               measured: list[list[Any]]) -> Outcome:
    """Run the target as its pass's mode says; the rows it measures itself go to `measured`."""
    started = perf_counter()
    try:
        measured += target.run(own_process=own_process, mode=mode)
        status, code, message = "ok", 0, ""
    except StepLimit as limit:  # the pass's window of steps is over: ended on purpose
        status, code, message = "ok", 0, ""
        print(f"profile-all: {limit}", file=sys.stderr)
    except SystemExit as error:
        code, message = _exit_status(error)
        status = "ok" if code == 0 else "failed"
    except KeyboardInterrupt as error:
        _print_target_traceback(error)
        return stopped(error, started)
    except Terminated as error:
        return stopped(error, started)
    except BaseException as error:  # the target's own exception, reported as python would
        _print_target_traceback(error)
        status, code = "raised", 1
        message = one_line(error)
    return Outcome(status, code, message, perf_counter() - started)


def stopped(error: KeyboardInterrupt | Terminated, started: float) -> Outcome:
    """The outcome of a pass stopped by Ctrl-C or a stop signal (`started`: its clock)."""
    if isinstance(error, KeyboardInterrupt):
        return Outcome("interrupted", 130, "interrupted (Ctrl-C)", perf_counter() - started)
    name = signal.Signals(error.signum).name
    return Outcome("terminated", 128 + error.signum, f"terminated by {name}",
                   perf_counter() - started)


def _runtime_environment() -> dict[str, Any]:
    """Facts only the target's process knows; torch is asked only if the target imported it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    facts: dict[str, Any] = {"torch": torch.__version__, "cuda_available": False}
    try:
        if torch.cuda.is_available():
            facts["cuda_available"] = True
            facts["cuda"] = torch.version.cuda
            facts["gpus"] = [torch.cuda.get_device_name(index)
                             for index in range(torch.cuda.device_count())]
            facts["gpu_memory_total"] = torch.cuda.get_device_properties(0).total_memory
    except Exception as error:  # a broken driver must not lose the pass's rows
        facts["cuda_error"] = str(error)
    return facts


def _children_cpu() -> float:
    """CPU seconds of this process's ended, waited-for children: forked DataLoader
    workers, mp.spawn and subprocess children. (Their peak RSS is not had here: a forked
    child's high-water mark starts at its parent's.)"""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class PassRun:
    def __init__(self, spec: PassSpec, *, own_process: bool, target: Any = None) -> None:
        self.spec = spec
        self.own_process = own_process
        self.target = target if target is not None else target_from_spec(spec.target)
        self.target_rows: list[list[Any]] = []  # what the target measured itself (bench)
        self.ctx = spec.context(self.target.command)
        self.failures: list[dict[str, str]] = []
        self.started: list[Backend] = []
        self._result: PassResult | None = None
        #: set as finishing begins, so that the worker's stop watcher leaves it alone
        self.finishing = False
        self.target_started = perf_counter()
        # module calls are steps in a script whose steps are not yet known to be others
        self.clock = StepClock(spec.max_steps, module_calls=spec.target.get("kind") == "script"
                               and spec.step_source in ("", "outermost module call"))
        self._children_at_start = _children_cpu()
        self._children_during = 0.0
        self.compiles = CompileWatch()
        self.compiles.intervals = self.ctx.compiling
        self.profilers = ProfilerWatch()  # the profilers the target runs itself
        self.unmark_frameworks = lambda: None  # frameworks.watch()'s undo, once started
        #: the passes this one hosts in windows of steps, and their results once finished
        self.windows = Windows(spec.windows, spec.windows_after, self.ctx, spec.options) \
            if spec.windows else None
        self.window_results: list[PassResult] = []
        self._doing = heartbeat.doing_file(spec.scratch_dir, spec.number)

    def _guard(self, backend: str, phase: str, error: Exception) -> None:
        self.failures.append({"backend": backend, "phase": phase,
                              "error": f"{type(error).__name__}: {error}"})

    def start(self) -> None:
        for module in self.spec.preimport:
            importlib.import_module(module)
        self.compiles.start()  # before the backends, which subscribe to it
        self.unmark_frameworks = frameworks.watch()
        self.profilers.start()  # before the backends, whose own patches come and go inside
        options = self.spec.options
        for name in self.spec.backends:
            try:
                backend = backends.load(name)(options.get(name))
                backend.start(self.ctx)
            except Exception as error:
                self._guard(name, "start", error)
                continue
            self.started.append(backend)
        hearing = self.hearing = listen_to(self.started, self.ctx, [self.clock])
        self.clock.found = lambda: [backend.step() for backend in hearing]
        if self.spec.step_source != "pa.step()":
            self.clock.found_source = self.spec.step_source
        if self.windows is not None:
            self.clock.on_mark = self.windows.mark
        self.clock.start()
        self._children_at_start = _children_cpu()
        heartbeat.say(self._doing, "running the script")
        self.target_started = perf_counter()

    def finish(self, outcome: Outcome) -> PassResult:
        """Stop and collect every started backend; safe to call twice (returns the first)."""
        if self._result is not None:
            return self._result
        self.finishing = True
        heartbeat.say(self._doing, "stopping its backends (a profiler processes its events)")
        self._stop_all(outcome.status == "ok")
        prefix = (self.ctx.pass_index, self.ctx.rank)
        rows = [[BENCHMARK, *prefix, *measured] for measured in self.target_rows]
        compilation = self.compiles.facts(self.clock.started_at)
        rows += [[COMPILER, *prefix, *measured] for measured in compile_rows(compilation)]
        samples = [[BENCHMARK, *prefix, *kept] for kept in getattr(self.target, "samples", [])]
        gathered = gather(self.started, self.ctx,
                          lambda text: heartbeat.say(self._doing, text))
        self.failures += gathered.failures
        self._result = PassResult(
            self.ctx.pass_index, self.ctx.rank, self.spec.backends, asdict(outcome),
            rows + gathered.rows, samples + gathered.samples, gathered.artifacts,
            self.failures, world_size=self.ctx.world_size,
            runtime=_runtime_environment(), target_facts=getattr(self.target, "facts", {}),
            ran_on=getattr(self.target, "ran_on", ""),
            children={"cpu_time": self._children_during}, timeline=gathered.timeline,
            compilation=compilation, target_profilers=self.profilers.facts(),
            later=gathered.later,
            **self.clock.facts(self.ctx.compiling, self.ctx.windows))
        if self.windows is not None:
            world = {"world_size": self.ctx.world_size, "runtime": self._result.runtime,
                     "host": self.ctx.pass_index}
            for window in self.windows.ran:
                heartbeat.say(self._doing, f"collecting the rows of pass "
                                           f"{window.spec['number']}'s window")
                self.window_results.append(window_result(window, asdict(outcome), world))
        return self._result

    def _stop_all(self, ended_well: bool = True) -> None:
        """Regions closed, the step clock and the compile watch stopped, the steps the
        backends did not hear told them, and every started backend stopped (last first)."""
        regions.close_open()
        if self.windows is not None:
            self.windows.end(ended_well)
        regions.listen(())
        self.clock.stop()
        self.compiles.stop()
        self.unmark_frameworks()
        unheard = self.clock.unheard()
        for backend in self.hearing if len(unheard) else ():
            backend.steps_found(unheard)
        # before backends stop: their own helper processes are not the target's
        self._children_during = _children_cpu() - self._children_at_start - (
            self.windows.helpers_cpu if self.windows is not None else 0.0)
        for backend in reversed(self.started):
            try:
                backend.stop(self.ctx)
            except Exception as error:
                self._guard(backend.name, "stop", error)
        self.profilers.stop()

    def run_target(self) -> Outcome:
        return run_target(self.target, own_process=self.own_process,
                          mode=self.spec.mode, measured=self.target_rows)

    def run(self) -> PassResult:
        self.start()
        return self.finish(self.run_target())
