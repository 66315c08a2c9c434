"""Root modules: an nn.Module with parameters called while no other module is running (a
model called by the script; not a loss function), seen on its first call. The per-call
counters (thop, flops-profiler) count each root once, on a deep copy, so the script's own
model, optimizer state and BatchNorm statistics are untouched and the script's results
stay the same. A counter that fails on a module never reaches the script: the failure is
kept in `notes` for the report."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


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
