"""What torch.compile did while a pass ran, from torch's own records, and the switch that
keeps profile-all's global module hooks out of compiled code.

Dynamo traces `nn.Module._call_impl`: a global module hook present while it traces is
traced into the compiled program, and `OptimizedModule.__call__` warns that it fires an
extra time. So the parts of a pass that use global module hooks (the step finder of an
inference loop, the root counters) subscribe here, and drop them as soon as a compiled
module is made or a compilation starts, before Dynamo traces anything; they follow each
`OptimizedModule` by hooks on that object instead, which run outside its compiled code.

The records, none of them parsed from log text: the start and end of each compilation
(`torch._dynamo.callback`'s handler, on our clock), each compiled frame's times and
recompile reason (`torch._dynamo.utils.get_compilation_metrics()`), each graph break's
reason and user stack (`torch._dynamo.utils.graph_break_reasons`, what
`torch._dynamo.explain` reads), and the unique graphs (`counters["stats"]`).

Watched from the pass's start where `torch._dynamo` is imported then (a script's forked
passes import it first, except under a gloo process group, where torch 2.13 deadlocks on
it), else from its import (a model's passes: the model's own torch.compile imports it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

from profile_all import after_import
from profile_all.rows import row

#: a subscriber hears each compiled module made (the OptimizedModule), or None for the
#: first compilation of anything else (a compiled function, `module.compile()`)
Subscriber = Callable[[Any], None]


def held_compilation(spans: Sequence[tuple[float, float]],
                     compiling: Sequence[tuple[float, float]]) -> list[int]:
    """The numbers (from 1) of the spans (steps) that overlap a compilation's interval."""
    return [number for number, (start, end) in enumerate(spans, 1)
            if any(begun < end and ended > start for begun, ended in compiling)]


def _frame(file: str | None, line: int | None, name: str | None) -> str:
    return f"{file}:{line}({name})"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text and text.strip() else ""


class CompileWatch:
    def __init__(self) -> None:
        self.subscribers: list[Subscriber] = []
        #: (start, end) perf_counter of each outermost compilation
        self.intervals: list[tuple[float, float]] = []
        self.compiled_modules: list[Any] = []
        self._open: float | None = None
        self._dynamo: Any = None
        self._waiting: after_import.AfterImport | None = None
        self._compiled_anything = False
        self._stopped = False

    def subscribe(self, subscriber: Subscriber) -> None:
        """`subscriber` hears every compiled module made from now on, and those made
        already (a backend that starts after the target made one)."""
        self.subscribers.append(subscriber)
        for module in self.compiled_modules:
            subscriber(module)
        if self._compiled_anything and not self.compiled_modules:
            subscriber(None)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        if subscriber in self.subscribers:
            self.subscribers.remove(subscriber)

    def _tell(self, module: Any) -> None:
        for subscriber in list(self.subscribers):
            subscriber(module)

    def start(self) -> None:
        _active.append(self)
        if "torch._dynamo" in sys.modules:
            self._watch()
        else:  # a model's pass: Dynamo comes with the model's own torch.compile, if at all
            self._waiting = after_import.call("torch._dynamo", self._watch)

    def _watch(self) -> None:
        if self._stopped:
            return
        from torch._dynamo import utils
        from torch._dynamo.callback import callback_handler
        from torch._dynamo.eval_frame import OptimizedModule

        self._dynamo = (utils, callback_handler, OptimizedModule)
        self._metrics_before = {id(m) for m in utils.get_compilation_metrics()}
        self._breaks_before = len(utils.graph_break_reasons)
        self._graphs_before = utils.counters["stats"]["unique_graphs"]
        callback_handler.register_start_callback(self._started)
        callback_handler.register_end_callback(self._ended)
        made = self._made = OptimizedModule.__init__
        watch = self

        def init(module: Any, *args: Any, **kwargs: Any) -> None:
            made(module, *args, **kwargs)
            watch.compiled_modules.append(module)
            watch._tell(module)

        OptimizedModule.__init__ = init

    def _started(self, args: Any) -> None:
        self._open = perf_counter()
        if not self._compiled_anything:
            self._compiled_anything = True
            if not self.compiled_modules:
                self._tell(None)

    def _ended(self, args: Any) -> None:
        if self._open is not None:
            self.intervals.append((self._open, perf_counter()))
            self._open = None

    def stop(self) -> None:
        if self in _active:
            _active.remove(self)
        if self._waiting is not None:
            self._waiting.cancel()
        stopped_before, self._stopped = self._stopped, True
        if self._dynamo is None or stopped_before:
            return
        _utils, callback_handler, optimized = self._dynamo
        callback_handler.remove_start_callback(self._started)
        callback_handler.remove_end_callback(self._ended)
        optimized.__init__ = self._made
        if self._open is not None:  # the target ended inside a compilation
            self.intervals.append((self._open, perf_counter()))
            self._open = None

    def facts(self, origin: float) -> dict[str, Any]:
        """Compiled frames (times, recompile reasons), graph breaks (reason, where), the
        graphs made, and the compilations' intervals in seconds since `origin` (the
        target's start); {} when nothing was compiled."""
        if self._dynamo is None or not self.intervals:
            return {}
        utils = self._dynamo[0]
        metrics = [m for m in utils.get_compilation_metrics()
                   if id(m) not in self._metrics_before]
        return {"intervals": [(start - origin, end - origin) for start, end in self.intervals],
                "graphs": utils.counters["stats"]["unique_graphs"] - self._graphs_before,
                "frames": _frames(metrics),
                "graph_breaks": _breaks(utils.graph_break_reasons[self._breaks_before:])}


def _frames(metrics: list[Any]) -> list[dict[str, Any]]:
    """A compilation of a frame each (a forward frame, its backward added to it by compile
    id), in the order they came."""
    frames: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        entry = frames.get(metric.compile_id)
        if metric.co_name is not None:
            entry = frames.setdefault(metric.compile_id, {
                "compile_id": metric.compile_id, "backward_seconds": 0.0})
            entry.update(
                frame=_frame(metric.co_filename, metric.co_firstlineno, metric.co_name),
                seconds=metric.entire_frame_compile_time_s or 0.0,
                inductor_seconds=metric.inductor_compile_time_s or 0.0,
                recompile_reason=metric.recompile_reason or "",
                failed=_first_line(metric.fail_reason or ""))
        elif entry is not None and metric.duration_us:  # the lazily compiled backward
            entry["backward_seconds"] += metric.duration_us / 1e6
    return [entry for entry in frames.values() if "frame" in entry]


def _breaks(reasons: list[Any]) -> list[dict[str, Any]]:
    """Each graph break once by (reason, user line), with how often it broke a graph."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for reason in reasons:
        where = reason.user_stack[-1] if reason.user_stack else None
        line = _frame(where.filename, where.lineno, where.name) if where else ""
        key = (_first_line(reason.reason), line)
        entry = found.setdefault(key, {"reason": key[0], "where": line, "count": 0})
        entry["count"] += 1
    return list(found.values())


def compile_rows(facts: dict[str, Any]) -> list[list[Any]]:
    """Rows of scope `compile`: the run's compile time, graphs, recompiles and graph
    breaks; per compiled frame its compile time (forward and backward), compilations and
    recompiles."""
    if not facts:
        return []
    frames = facts["frames"]
    rows = [row("compile", "run", "compile_time",
                sum(end - start for start, end in facts["intervals"])),
            row("compile", "run", "graphs", facts["graphs"]),
            row("compile", "run", "recompiles",
                sum(1 for f in frames if f["recompile_reason"])),
            row("compile", "run", "graph_breaks",
                sum(b["count"] for b in facts["graph_breaks"]))]
    per_frame: dict[str, list[float]] = {}
    for frame in frames:
        seconds, compiles, recompiles = per_frame.setdefault(frame["frame"], [0.0, 0, 0])
        per_frame[frame["frame"]] = [seconds + frame["seconds"] + frame["backward_seconds"],
                                     compiles + 1, recompiles + bool(frame["recompile_reason"])]
    for name, (seconds, compiles, recompiles) in per_frame.items():
        rows += [row("compile", name, "compile_time", seconds),
                 row("compile", name, "compiles", compiles),
                 row("compile", name, "recompiles", recompiles)]
    return rows


#: the watch of the pass running in this process (one at a time), for its backends
_active: list[CompileWatch] = []


class ModuleCallHooks:
    """`before` and `after` (always called, when a forward raises too) on every module call:
    global module hooks until something compiles, then hooks on each compiled module (the
    OptimizedModule, whose hooks run outside its compiled code) only. `on_switch` hears
    the switch (a depth counted over global hooks starts again)."""

    def __init__(self, before: Callable[..., Any], after: Callable[..., Any],
                 on_switch: Callable[[], None] = lambda: None) -> None:
        self._before, self._after, self._on_switch = before, after, on_switch
        self._handles: list[Any] = []
        self._global = False
        self._unsubscribe: Callable[[], None] = lambda: None

    def start(self) -> None:
        from torch.nn.modules import module

        self._handles = [module.register_module_forward_pre_hook(self._before),
                         module.register_module_forward_hook(self._after, always_call=True)]
        self._global = True
        self._unsubscribe = subscribe(self._compiled)

    def _compiled(self, compiled: Any) -> None:
        if self._global:
            self._remove()
            self._global = False
            self._on_switch()
        if compiled is not None:
            self._handles += [compiled.register_forward_pre_hook(self._before),
                              compiled.register_forward_hook(self._after, always_call=True)]

    def _remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def stop(self) -> None:
        self._remove()
        self._global = False
        self._unsubscribe()
        self._unsubscribe = lambda: None


def subscribe(subscriber: Subscriber) -> Callable[[], None]:
    """Subscribe to the running pass's watch (nothing to hear where none runs: a backend
    used outside a pass); returns the unsubscribe."""
    if not _active:
        return lambda: None
    watch = _active[-1]
    watch.subscribe(subscriber)
    return lambda: watch.unsubscribe(subscriber)
