"""The backend registry: the built-in backends and those of the `profile_all.backends`
entry-point group, loaded only when named (a backend's module may import heavy things)."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from profile_all import validate
from profile_all.backends.base import Artifact, Backend, Collected, PassContext

__all__ = ["Artifact", "Backend", "Collected", "PassContext", "Selection", "check_options",
           "facts_of", "known_names", "load", "preimports", "select"]

BUILTIN = {
    "wallclock": "profile_all.backends.wallclock:WallClock",
    "cprofile": "profile_all.backends.cprofile:CProfile",
    "torch-profiler": "profile_all.backends.torch_profiler:TorchProfiler",
    "cuda-events": "profile_all.backends.cuda_events:CudaEvents",
    "nsys": "profile_all.backends.nsys:Nsys",
    "flop-counter": "profile_all.backends.flop_counter:FlopCounter",
    "thop": "profile_all.backends.thop_counter:Thop",
    "flops-profiler": "profile_all.backends.flops_profiler:FlopsProfiler",
    "memory": "profile_all.backends.memory.backend:Memory",
    "py-spy": "profile_all.backends.py_spy:PySpy",
    "torch-memory": "profile_all.backends.torch_memory:TorchMemory",
}

#: what runs when the user names no backend (those that cannot run here are skipped, and
#: the report says why)
DEFAULT = ("wallclock", "cuda-events", "cprofile", "py-spy", "torch-profiler", "nsys",
           "flop-counter", "memory")

#: what `profile-all model` runs when the user names no backend: besides the benchmark
#: itself (the timing pass), every FLOP counter
DEFAULT_MODEL = ("flop-counter", "thop", "flops-profiler")

ENTRY_POINT_GROUP = "profile_all.backends"


@functools.cache
def _plugins() -> dict[str, str]:
    """The entry-point group's backends, read once a process (scanning every installed
    distribution's metadata costs milliseconds a call, and a run asks dozens of times)."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _specs() -> dict[str, str]:
    return {**_plugins(), **BUILTIN}  # a plug-in cannot shadow a built-in


def known_names() -> list[str]:
    return sorted(_specs())


def load(name: str) -> type[Backend]:
    specs = _specs()
    if name not in specs:
        raise validate.ArgumentValueError(
            f"unknown backend {name!r}; known backends: {', '.join(sorted(specs))}")
    module_name, _, class_name = specs[name].partition(":")
    return getattr(importlib.import_module(module_name), class_name)


@dataclass
class Selection:
    runnable: list[type[Backend]]
    skipped: dict[str, str]  # backend name -> why it cannot run here


def select(names: list[str] | None, default: tuple[str, ...] = DEFAULT) -> Selection:
    """Resolve names (all validated first, so a typo fails before anything runs)."""
    wanted = list(dict.fromkeys(default if names is None else names))
    classes = [load(name) for name in wanted]
    runnable, skipped = [], {}
    for cls in classes:
        ok, reason = cls.available()
        if ok:
            runnable.append(cls)
        else:
            skipped[cls.name] = reason
    return Selection(runnable, skipped)


def preimports(selected: list[type[Backend]], every_builtin: bool = True) -> list[str]:
    """Modules every pass imports before the target's clock starts: those of every
    built-in backend that can run here, whatever was selected, and the selected plug-ins'.
    So a script's time never holds `import torch` in one run and not in another (with
    `-b cprofile` alone it once did: 1.53 s against 75 ms). `every_builtin=False`: the
    selected backends' alone (a model's passes, whose target time no run compares: the
    latency is its timing pass's own clock)."""
    classes = ([load(name) for name in BUILTIN] if every_builtin else []) + list(selected)
    return sorted({module for cls in classes if cls.available()[0] for module in cls.imports})


def own_modules(selected: list[type[Backend]], every_builtin: bool = True) -> list[str]:
    """The backends' own modules, which a run's fork server imports: every built-in one's
    and the selected plug-ins', whatever was selected, as `preimports` (so that a server
    kept from a run of other backends serves this one too: kept_servers; 12 ms after torch,
    2-core VM); `every_builtin=False`: the selected ones' alone (a model's run)."""
    classes = ([load(name) for name in BUILTIN] if every_builtin else []) + list(selected)
    return sorted({cls.__module__ for cls in classes})


def facts_of(names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """What the named backends state about their rows, for the run's meta (names that are
    no backend here, such as a reader's or a plug-in not installed, are left out)."""
    specs = _specs()
    facts = {name: load(name).facts.to_dict() for name in dict.fromkeys(names)
             if name in specs}
    return {name: said for name, said in facts.items() if said}


def check_options(given: Any) -> dict[str, dict[str, Any]]:
    """The per-backend options, each backend known, each option known, of its type and in
    range (a TypeError or ValueError naming it otherwise), before any pass runs."""
    known = {name: {option.key: option.types for option in load(name).offered_options}
             for name in known_names()}
    checked = validate.options(given, known)
    for name, settings in checked.items():
        load(name).check_options(settings)
    return checked
