"""Counting apart from the target: what a per-call counter (thop, flops-profiler) runs on
its copy of a root module is seen by nothing of the target's, and sees nothing of it.

A target may run a profiler itself (target_profilers.py): thop's hooks on its modules
and buffers in them, a FlopsProfiler's hooks and torch functions patched, a
FlopCounterMode (a dispatch mode and global module hooks). A deep copy of a module takes
its hooks, buffers and attributes along, so the target's thop counted the copy's forward
into the same `total_ops` as profile-all's (a 1->1 3x3 convolution on 360x640: 4,147,200
MACs, twice its 2,073,600), and the copy's forward reached the target's modes and patched
functions. So a count runs:

- on a copy without the profilers' hooks (a hook whose function is thop's or a flops
  profiler's), thop's buffers and flops-profiler's attributes (`strip`);
- with no global module hook (the target's, and the step finder's: the copy's forward is
  no step), no dispatch or torch-function mode, and torch's functions as they were when
  the pass started (`counting_apart`), each put back after.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: the packages whose module hooks are a profiler's
PROFILER_PACKAGES = ("thop", "flops_profiler", "deepspeed.profiling")
#: what thop keeps on each module it counts, and flops-profiler sets as attributes
THOP_COUNTS = ("total_ops", "total_params")
FLOPS_PROFILER_ATTRIBUTES = (
    "__flops__", "__macs__", "__params__", "__cnt__", "__start_time__", "__duration__",
    "__profile_table__", "__flops_handle__", "__pre_hook_handle__", "__post_hook_handle__",
    "__start_time_hook_handle__", "__end_time_hook_handle__")
#: a module's own hook dicts
_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
               "_backward_pre_hooks")
#: torch.nn.modules.module's global hook dicts
_GLOBAL_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks",
                 "_global_forward_hooks_always_called", "_global_forward_hooks_with_kwargs",
                 "_global_backward_pre_hooks", "_global_backward_hooks")


def _profilers(hook: Any) -> bool:
    owner = getattr(hook, "__module__", None) or ""
    return owner.startswith(PROFILER_PACKAGES)


def strip(copy: Any) -> None:
    """Take the profilers' hooks, and their counts, off `copy` and its submodules: thop's
    `total_ops` and `total_params` (buffers, or attributes in thop 2.2) where one of its
    hooks was, flops-profiler's attributes wherever they are."""
    for sub in copy.modules():
        stripped = False
        for name in _HOOK_DICTS:
            hooks = getattr(sub, name, None) or {}
            for key in [k for k, hook in hooks.items() if _profilers(hook)]:
                stripped = True
                del hooks[key]
                for extra in ("_forward_hooks_with_kwargs", "_forward_hooks_always_called",
                              "_forward_pre_hooks_with_kwargs"):
                    getattr(sub, extra, {}).pop(key, None)
        for name in THOP_COUNTS if stripped else ():
            sub._buffers.pop(name, None)
            sub._non_persistent_buffers_set.discard(name)
            sub.__dict__.pop(name, None)
        for name in FLOPS_PROFILER_ATTRIBUTES:
            sub.__dict__.pop(name, None)


def _namespaces() -> list[Any]:
    import torch

    return [torch, torch.nn.functional, torch.Tensor]


def snapshot() -> list[tuple[Any, dict[str, Any]]]:
    """torch's, torch.nn.functional's and torch.Tensor's attributes as they are now."""
    return [(space, dict(vars(space))) for space in _namespaces()]


def restore(saved: list[tuple[Any, dict[str, Any]]]) -> list[str]:
    """Put back every attribute that changed; the names of those that had to be."""
    mended = []
    for space, attributes in saved:
        for name, value in attributes.items():
            if vars(space).get(name) is not value:
                setattr(space, name, value)
                mended.append(f"{getattr(space, '__name__', space)}.{name}")
    return mended


@contextmanager
def _no_global_hooks() -> Iterator[None]:
    from torch.nn.modules import module

    held = [(getattr(module, name), dict(getattr(module, name))) for name in _GLOBAL_HOOKS
            if hasattr(module, name)]
    for hooks, _saved in held:
        hooks.clear()
    try:
        yield
    finally:
        for hooks, saved in held:
            hooks.clear()
            hooks.update(saved)


@contextmanager
def _no_function_modes() -> Iterator[None]:
    from torch import overrides
    from torch._C import _len_torch_function_stack

    popped = [overrides._pop_mode() for _ in range(_len_torch_function_stack())]
    try:
        yield
    finally:
        for mode in reversed(popped):
            overrides._push_mode(mode)


@contextmanager
def counting_apart(pristine: list[tuple[Any, dict[str, Any]]]) -> Iterator[None]:
    """No global module hook, dispatch or torch-function mode, and torch's functions as in
    `pristine` (a `snapshot` from before the target ran), each put back after."""
    from torch.utils._python_dispatch import _disable_current_modes

    current = snapshot()
    restore(pristine)
    try:
        with _no_global_hooks(), _disable_current_modes(), _no_function_modes():
            yield
    finally:
        restore(current)
