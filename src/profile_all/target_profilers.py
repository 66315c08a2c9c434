"""The profilers a target runs itself: where it first calls each, so that the report names
every collision with profile-all's own backends by the target's file and line.

A script that profiles itself (`thop.profile(model, inputs)`, a FlopsProfiler, `with
FlopCounterMode()`, `torch.profiler.profile`, `cProfile`, memory_profiler's `@profile` or
`memory_usage`) shares the process with the pass's backends: hooks on the same modules,
torch functions patched twice, one profile hook per thread, one torch.profiler session
per process. The backends keep their own figures exact (backends/roots.py counts on a
copy without the target's hooks, apart from its dispatch modes and patched functions;
cprofile and torch-profiler say what they lost); this watch says where the target did it.

Each entry point is wrapped while the pass runs, in the module when it is imported
already, else as the target imports it (a finder on sys.meta_path that wraps the loader's
`exec_module`: the wrapper is in place before `from thop import profile` binds it). A call
is the target's when the first frame outside the profiler's own package (and torch's, the
standard library's profile modules) is not profile-all's: profile-all's backends call
the same entry points. Nothing else is changed: the call goes on to the profiler as it was.
"""

from __future__ import annotations

import functools
import importlib.abc
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: (module, the entry point in it: an attribute, or Class.method, the tool, as shown)
WATCHED = (
    ("thop", "profile", "thop", "thop.profile"),
    ("flops_profiler.profiler", "FlopsProfiler.start_profile", "flops-profiler",
     "FlopsProfiler.start_profile"),
    ("deepspeed.profiling.flops_profiler.profiler", "FlopsProfiler.start_profile",
     "flops-profiler", "deepspeed's FlopsProfiler.start_profile"),
    ("torch.utils.flop_counter", "FlopCounterMode.__enter__", "FlopCounterMode",
     "FlopCounterMode"),
    ("torch.profiler.profiler", "profile.start", "torch.profiler", "torch.profiler.profile"),
    ("torch.profiler.profiler", "_KinetoProfile.start", "torch.profiler",
     "torch.profiler's _KinetoProfile"),
    ("torch.autograd.profiler", "profile.__enter__", "torch.profiler",
     "torch.autograd.profiler.profile"),
    ("cProfile", "Profile.enable", "cProfile", "cProfile.Profile.enable"),
    ("memory_profiler", "profile", "memory_profiler", "memory_profiler.profile"),
    ("memory_profiler", "memory_usage", "memory_profiler", "memory_profiler.memory_usage"),
)
_COUNTED_APART = ("profile-all's counters count on a copy of their own, apart from the "
                  "target's hooks, dispatch modes and patched torch functions, so theirs are "
                  "exact per call, and the target's own figures are not changed by them")
#: what a collision with each tool does to profile-all's figures, said in the report
MEANS = {
    "thop": _COUNTED_APART, "flops-profiler": _COUNTED_APART,
    "FlopCounterMode": _COUNTED_APART + " (flop-counter's mode counts beside it)",
    "torch.profiler": "torch.profiler allows one session a process: in a torch-profiler "
                      "pass the target's session ends profile-all's, whose trace is lost "
                      "(that pass says so); in a flop-counter pass each operator reaches "
                      "the target's own trace twice (torch dispatches it again below "
                      "FlopCounterMode)",
    "cProfile": "Python has one profile hook a thread: in a cprofile pass the calls after "
                "it are missing from profile-all's profile (that pass says how many); in "
                "every pass the target's own profile holds profile-all's hooks too (those "
                "that find the steps: optimizer steps, and module calls until the script "
                "shows steps of its own)",
    "memory_profiler": "profile-all's memory backend samples the process from outside, "
                       "unchanged; with --memory-lines its @profile functions are traced by "
                       "profile-all instead of printing their own table",
}
_OWN = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB = os.path.dirname(os.__file__) + os.sep


@dataclass
class Use:
    """The target's calls of one profiler from one place."""

    tool: str
    call: str  # the entry point it called first there
    where: str  # file:line of the target's frame that called it
    calls: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "call": self.call, "where": self.where,
                "calls": self.calls}


def _package_dir(module: Any) -> str:
    """The folder whose frames are the profiler's own: the top package's, or the file of a
    one-file module (cProfile.py, memory_profiler.py)."""
    top = sys.modules.get(module.__name__.partition(".")[0], module)
    path = os.path.abspath(getattr(top, "__file__", "") or "")
    if os.path.basename(path) == "__init__.py":
        return os.path.dirname(path) + os.sep
    return path


class _Loader(importlib.abc.Loader):
    """The module's own loader, and `after(module)` once it has run."""

    def __init__(self, loader: Any, after: Callable[[Any], None]) -> None:
        self._loader, self._after = loader, after

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        self._after(module)

    def __getattr__(self, name: str) -> Any:  # get_data, is_package, ... as the loader's
        return getattr(self._loader, name)


class _OnImport(importlib.abc.MetaPathFinder):
    def __init__(self, names: set[str], after: Callable[[Any], None]) -> None:
        self.names, self._after = names, after

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, self._after)
                return spec
        return None


class ProfilerWatch:
    def __init__(self) -> None:
        self.uses: dict[tuple[str, str], Use] = {}
        self._patched: list[tuple[Any, str, Any, bool]] = []  # owner, name, original, own
        self._tool_dirs: list[str] = [_STDLIB + "cProfile.py", _STDLIB + "profile.py"]
        self._finder: _OnImport | None = None

    def start(self) -> None:
        waiting = set()
        for module_name in {entry[0] for entry in WATCHED}:
            module = sys.modules.get(module_name)
            if module is not None:
                self._patch(module)
            else:
                waiting.add(module_name)
        self._finder = _OnImport(waiting, self._patch)
        sys.meta_path.insert(0, self._finder)

    def stop(self) -> None:
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        for owner, name, original, own in reversed(self._patched):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        self._patched = []

    def facts(self) -> list[dict[str, Any]]:
        return [use.to_dict() for use in self.uses.values()]

    def _patch(self, module: Any) -> None:
        self._tool_dirs.append(_package_dir(module))
        for module_name, path, tool, call in WATCHED:
            if module_name != module.__name__:
                continue
            owner_name, _, name = path.rpartition(".")
            owner = getattr(module, owner_name, None) if owner_name else module
            original = getattr(owner, name, None) if owner is not None else None
            if original is None or getattr(original, "__profile_all_watched__", False):
                continue
            own = name in vars(owner)
            setattr(owner, name, self._wrapped(original, tool, call))
            self._patched.append((owner, name, original if own else None, own))

    def _wrapped(self, original: Any, tool: str, call: str) -> Callable[..., Any]:
        @functools.wraps(original)
        def watched(*args: Any, **kwargs: Any) -> Any:
            self._heard(tool, call)
            return original(*args, **kwargs)

        watched.__profile_all_watched__ = True  # type: ignore[attr-defined]
        return watched

    def _heard(self, tool: str, call: str) -> None:
        """Note the call where the target made it (not profile-all's own backends')."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(
                tuple(self._tool_dirs)):
            frame = frame.f_back
        if frame is None or frame.f_code.co_filename.startswith(_OWN):
            return
        where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
        use = self.uses.get((tool, where))  # (profile.start calls _KinetoProfile.start)
        if use is None:
            self.uses[(tool, where)] = Use(tool, call, where)
        else:
            use.calls += 1
