"""User marks: `region()` and `step()`, heard by every active backend.

A region must cost next to nothing when no profile-all pass is running, so `region(name)`
hands back one cached object per name and its `__enter__`/`__exit__` test a single module
global. While a pass runs, the worker calls `listen(backends)`; from then on every enter
and exit reaches each listening backend with the region's name and its parent's path
("train_step/forward"), and `step()` reaches their `step()` hook.

A backend that needs only each region's wall time reads it from the pass's `RegionLog`
instead (region_log.py): the cheapest path, when no backend listens. Enter and exit are
in C where the extension was built (`_region_fast.c`), else in `_PythonMarks`.

A backend's `enter(name, parent)` returns a token (a start time, a CUDA event...) that is
handed back to its `exit(name, parent, token)`, so backends keep no per-thread state of
their own: the stack of open regions lives here, one per thread.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any, Protocol

from profile_all.depth_cap import MAX_DEPTH
from profile_all.region_log import FLUSH_SECONDS, NAMES, RegionLog, native
from profile_all.safe_text import utf8
from profile_all.steps_outside import OutsideAPass
from profile_all.validate import ArgumentTypeError, ArgumentValueError


class RegionListener(Protocol):
    def enter(self, name: str, parent: str) -> Any: ...
    def exit(self, name: str, parent: str, token: Any) -> None: ...
    def step(self) -> None: ...


_listeners: tuple[RegionListener, ...] = ()
_single: RegionListener | None = None  # the listener, when there is exactly one (the usual case)
_steppers: tuple[Any, ...] = (OutsideAPass(),)  # every listener, and those of steps alone
_threads = threading.local()
_stacks: list[list[Any]] = []  # every thread's stack of open regions, for close_open()

_log: RegionLog | None = None  # the pass's log of region times, when a backend reads one
_log_only = False  # the log, and no listener: the cheapest path
_log_threads = threading.local()  # each thread's event array in _log (new with each log)
_flush_due = float("inf")
#: region calls this process left unheard, nested deeper than MAX_DEPTH (depth_cap.py)
_too_deep = 0
#: a stack's entry for such a call: no path, no listener, nothing to tell at its exit
_UNHEARD = (None, None, None, None)


def listen(listeners: Sequence[RegionListener], steppers: Sequence[Any] = (),
           log: RegionLog | None = None) -> None:
    """Route regions and steps to `listeners`, steps alone to `steppers` (objects with a
    `step()`), and every region's enter and exit time to `log`; empty sequences and no
    log stop routing."""
    global _listeners, _single, _steppers, _log, _log_only, _log_threads, _flush_due
    new_log = log is not _log
    if log is not None and new_log:
        log.begin()
    _listeners = tuple(listeners)
    _single = _listeners[0] if len(_listeners) == 1 else None
    _steppers = (*_listeners, *steppers)
    _log, _log_only = log, log is not None and not _listeners
    if new_log:  # the same log goes on: each thread keeps its events' array in it
        _log_threads = threading.local()
        _flush_due = perf_counter() + FLUSH_SECONDS if log is not None else float("inf")
    if native is not None:
        native.configure(log is not None, bool(_listeners), _flush_due, _flush)


def also_listen(extra: Sequence[RegionListener]) -> Callable[[], None]:
    """Route regions to `extra` too (another pass's backends, in a window of steps); returns
    what puts the routing back. A region keeps the listeners it was entered with."""
    if not extra:
        return lambda: None
    before = (_listeners, tuple(s for s in _steppers if s not in _listeners), _log)
    listen([*before[0], *extra], before[1], before[2])

    def undo() -> None:
        listen(*before)
    return undo


def _log_append() -> Callable[[float], None]:
    """The calling thread's `append` to its event array in the log, made at its first region
    (the bound method is kept: one attribute lookup less per call)."""
    append = _log_threads.append = _log.new_thread().append  # type: ignore[union-attr]
    return append


def _flush() -> float:
    """The log to its journal; returns when the next flush is due."""
    global _flush_due
    _flush_due = _log.flush() if _log is not None else float("inf")
    return _flush_due


def _forget_log_in_child() -> None:
    """A forked child (a DataLoader worker) keeps no region times: nobody collects them."""
    global _log, _log_only, _flush_due
    _log, _log_only, _flush_due = None, False, float("inf")
    if native is not None:
        native.configure(False, bool(_listeners), _flush_due, _flush)


os.register_at_fork(after_in_child=_forget_log_in_child)


class _PythonMarks:
    """A region's enter and exit where the C extension (`_region_fast.Marks`, the same
    paths) is not built. The log-only path is written out inline: on a small VM each extra
    Python call costs about 0.1 µs, against a budget of 0.5 µs for a whole enter and exit.
    """

    __slots__ = ("code",)

    def __enter__(self) -> Any:
        if _log_only:
            try:
                append = _log_threads.append
            except AttributeError:
                append = _log_append()
            append(self.code)
            append(perf_counter())
            return self
        if not _listeners:
            return self
        self._enter_hooks()  # type: ignore[attr-defined]
        if _log is not None:  # hooks and the log both
            try:
                append = _log_threads.append
            except AttributeError:
                append = _log_append()
            append(self.code)
            append(perf_counter())
        return self

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        if _log_only:
            now = perf_counter()
            try:
                _log_threads.append(now)
            except AttributeError:  # entered before the pass began listening
                return
            if now > _flush_due:
                _flush()
            return
        if _log is not None:
            now = perf_counter()
            append = getattr(_log_threads, "append", None)
            if append is not None:  # else entered before the pass began listening
                append(now)
            if now > _flush_due:
                _flush()
        if _listeners:
            self._exit_hooks()  # type: ignore[attr-defined]


class Region(native.Marks if native is not None else _PythonMarks):  # type: ignore[misc]
    """A named region: a context manager, and a decorator (`@pa.region("step")`).

    Its enter and exit (in C, or `_PythonMarks`) log their times when the pass keeps a
    region log and call `_enter_hooks` / `_exit_hooks` when backends listen.
    """

    __slots__ = ("name",)

    def __init__(self, name: str | None) -> None:
        self.name = name
        NAMES.append(name or "")
        self.code = -float(len(NAMES))

    def _enter_hooks(self) -> None:
        name = self.name
        try:
            stack = _threads.stack
        except AttributeError:
            stack = _threads.stack = []
            _stacks.append(stack)
        if len(stack) >= MAX_DEPTH:
            global _too_deep
            _too_deep += 1
            stack.append(_UNHEARD)
            return
        if stack:
            parent = stack[-1][0]
            path = parent + "/" + name
        else:
            parent, path = "", name
        single = _single
        if single is not None:
            stack.append((path, parent, single, single.enter(name, parent)))
        else:
            listeners = _listeners
            stack.append((path, parent, listeners,
                          [listener.enter(name, parent) for listener in listeners]))

    def _exit_hooks(self) -> None:
        try:
            stack = _threads.stack
        except AttributeError:  # entered in this thread before the pass began listening
            return
        if not stack:
            return
        _path, parent, listener, token = stack.pop()
        _tell_exit(self.name, parent, listener, token)

    def __call__(self, func: Callable) -> Callable:
        return _decorate(func, self.name or func.__qualname__)

    def __repr__(self) -> str:
        return f"region({self.name!r})"


def _tell_exit(name: str, parent: str, listener: Any, token: Any) -> None:
    """A region's exit to the listeners its enter told (none: nested too deep, unheard)."""
    if type(listener) is tuple:
        for one, one_token in zip(listener, token, strict=True):
            one.exit(name, parent, one_token)
    elif listener is not None:
        listener.exit(name, parent, token)


class _Unnamed(Region):
    """`region()`: a decorator only; a `with` needs a name."""

    __slots__ = ()

    def __enter__(self) -> Region:
        if _log_only or _listeners:
            raise ValueError("a region used with `with` needs a name: region('forward')")
        return self

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        return


def _decorate(func: Callable, name: str) -> Callable:
    marker = region(name)

    @functools.wraps(func)
    def timed(*args: Any, **kwargs: Any) -> Any:
        with marker:
            return func(*args, **kwargs)

    return timed


_cache: dict[str | None, Region] = {}


def region(name: str | Callable | None = None) -> Any:
    """Mark a region: `with region("forward"):`, `@region("step")`, `@region` or `@region()`.

    As a bare decorator the region is named after the function's qualified name.
    """
    marker = _cache.get(name)  # first: the hot path is a name seen before
    if marker is not None:
        return marker
    if callable(name):
        return _decorate(name, name.__qualname__)
    if name is not None and not isinstance(name, str):
        raise ArgumentTypeError(f"a region's name is text, like region('forward'); got {name!r} "
                        f"({type(name).__name__})")
    if name == "":
        raise ArgumentValueError("a region's name is text, like region('forward'); got ''")
    # text from the target: a name with a lone surrogate is kept as its escape, readable
    marker = _cache[name] = Region(utf8(name)) if name is not None else _Unnamed(None)
    return marker


def close_open() -> None:
    """End every region still open, in every thread, innermost first: a target that ends
    by os._exit, or is stopped while stuck in native code, never leaves them, and each is
    then timed up to now, where the target ended or hung."""
    if _log is not None:
        _log.ended_at = perf_counter()
    for stack in _stacks:
        while stack:
            path, parent, listener, token = stack.pop()
            if listener is not None:
                _tell_exit(path[len(parent) + 1:] if parent else path, parent, listener, token)


def too_deep_calls() -> int:
    """The region calls this process has left unheard by backends so far, nested deeper
    than MAX_DEPTH."""
    return _too_deep


def step() -> None:
    """Mark the end of one iteration (as torch.profiler's `prof.step()`)."""
    for listener in _steppers:
        listener.step()
