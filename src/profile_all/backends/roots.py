"""Root modules: an nn.Module with parameters called while no other module is running (a
model called by the script; not a loss function), seen on its first call. The per-call
counters (thop, flops-profiler) count each root once, on a deep copy, so the script's own
model, optimizer state and BatchNorm statistics are untouched and the script's results
stay the same. A counter that fails on a module never reaches the script: the failure is
kept in `notes` for the report."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profile_all.backends.base import Backend, Collected, PassContext


class RootModules:
    def __init__(self, on_first_call: Callable[[str, Any, tuple], None]) -> None:
        self.on_first_call = on_first_call
        self.names: dict[int, str] = {}  # id(module) -> "Sequential", "Sequential#2"
        self._depth = 0
        self._busy = False
        self._handles: list[Any] = []
        self.notes: list[str] = []

    def start(self) -> None:
        from torch.nn.modules import module

        self._handles = [module.register_module_forward_pre_hook(self._before),
                         module.register_module_forward_hook(self._after, always_call=True)]

    def stop(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _name(self, module: Any) -> str:
        base = type(module).__name__
        taken = sum(1 for name in self.names.values() if name.split("#")[0] == base)
        return base if taken == 0 else f"{base}#{taken + 1}"

    def _before(self, module: Any, args: tuple) -> None:
        if self._busy:
            return
        if self._depth == 0 and id(module) not in self.names and _has_parameters(module):
            name = self.names[id(module)] = self._name(module)
            self._busy = True
            try:
                self.on_first_call(name, module, args)
            except Exception as error:  # counting must never break the target
                self.notes.append(f"could not count {name}: {type(error).__name__}: {error}")
            finally:
                self._busy = False
        self._depth += 1

    def _after(self, module: Any, args: tuple, output: Any) -> None:
        if not self._busy:
            self._depth = max(0, self._depth - 1)


def _has_parameters(module: Any) -> bool:
    return next(module.parameters(), None) is not None


def counting_copy(module: Any) -> Any:
    """A deep copy to count on, in eval mode, so counting changes nothing of the original."""
    import copy

    duplicate = copy.deepcopy(module)
    duplicate.eval()
    return duplicate


class RootCounter(Backend):
    """A counter that counts each root module once, on its first call (thop,
    flops-profiler): `count(name, module, args)` returns the rows of one root module."""

    kind = "counter"
    imports = ("torch",)

    def count(self, name: str, module: Any, args: tuple) -> list[list[Any]]:
        raise NotImplementedError

    def start(self, ctx: PassContext) -> None:
        self._rows: list[list[Any]] = []
        self._roots = RootModules(lambda *call: self._rows.extend(self.count(*call)))
        self._roots.start()
        self.notes = self._roots.notes

    def stop(self, ctx: PassContext) -> None:
        self._roots.stop()

    def collect(self, ctx: PassContext) -> Collected:
        return Collected(self._rows)
