"""User marks: `region()` and `step()`, heard by every active backend.

A region must cost next to nothing when no profile-all pass is running, so `region(name)`
hands back one cached object per name and its `__enter__`/`__exit__` test a single module
global. While a pass runs, the worker calls `listen(backends)`; from then on every enter
and exit reaches each listening backend with the region's name and its parent's path
("train_step/forward"), and `step()` reaches their `step()` hook.

A backend's `enter(name, parent)` returns a token (a start time, a CUDA event...) that is
handed back to its `exit(name, parent, token)`, so backends keep no per-thread state of
their own: the stack of open regions lives here, one per thread.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol


class RegionListener(Protocol):
    def enter(self, name: str, parent: str) -> Any: ...
    def exit(self, name: str, parent: str, token: Any) -> None: ...
    def step(self) -> None: ...


_listeners: tuple[RegionListener, ...] = ()
_single: RegionListener | None = None  # the listener, when there is exactly one (the usual case)
_steppers: tuple[Any, ...] = ()  # every listener, and those that hear only steps
_threads = threading.local()
_stacks: list[list[Any]] = []  # every thread's stack of open regions, for close_open()


def listen(listeners: Sequence[RegionListener], steppers: Sequence[Any] = ()) -> None:
    """Route regions and steps to `listeners`, and steps alone to `steppers` (objects with a
    `step()`); empty sequences stop routing."""
    global _listeners, _single, _steppers
    _listeners = tuple(listeners)
    _single = _listeners[0] if len(_listeners) == 1 else None
    _steppers = (*_listeners, *steppers)


class Region:
    """A named region: a context manager, and a decorator (`@pa.region("step")`).

    The hot path is written out inline: on a small VM each extra Python call costs
    about 0.1 µs, against a budget of 1 µs for a whole enter and exit.
    """

    __slots__ = ("name",)

    def __init__(self, name: str | None) -> None:
        self.name = name

    def __enter__(self) -> Region:
        if not _listeners:
            return self
        name = self.name
        if name is None:
            raise ValueError("a region used with `with` needs a name: region('forward')")
        try:
            stack = _threads.stack
        except AttributeError:
            stack = _threads.stack = []
            _stacks.append(stack)
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
        return self

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        if not _listeners or self.name is None:
            return
        try:
            stack = _threads.stack
        except AttributeError:  # entered in this thread before the pass began listening
            return
        if not stack:
            return
        _path, parent, listener, token = stack.pop()
        if type(listener) is tuple:
            for one, one_token in zip(listener, token, strict=True):
                one.exit(self.name, parent, one_token)
        else:
            listener.exit(self.name, parent, token)

    def __call__(self, func: Callable) -> Callable:
        return _decorate(func, self.name or func.__qualname__)

    def __repr__(self) -> str:
        return f"region({self.name!r})"


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
    marker = _cache[name] = Region(name)
    return marker


def close_open() -> None:
    """End every region still open, in every thread, innermost first: a target that ends
    by os._exit, or is stopped while stuck in native code, never leaves them, and each is
    then timed up to now, where the target ended or hung."""
    for stack in _stacks:
        while stack:
            path, parent, listener, token = stack.pop()
            name = path[len(parent) + 1:] if parent else path
            if type(listener) is tuple:
                for one, one_token in zip(listener, token, strict=True):
                    one.exit(name, parent, one_token)
            else:
                listener.exit(name, parent, token)


def step() -> None:
    """Mark the end of one iteration (as torch.profiler's `prof.step()`)."""
    for listener in _steppers:
        listener.step()
