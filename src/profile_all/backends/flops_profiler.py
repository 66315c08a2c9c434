"""flops-profiler (counter): FLOPs, MACs, parameters and latency of each root module and of
its submodules, by flops-profiler (DeepSpeed's, packaged alone), counted once per root
module on its first call (forward only).

It patches torch functions while it runs and does not restore them all (torch.bmm stays
torch.matmul after stop_profile()), so every attribute of torch, torch.nn.functional and
torch.Tensor it changed is put back here; planned in a pass of its own besides.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from profile_all.backends.base import Backend, Collected, PassContext
from profile_all.backends.roots import RootModules, counting_copy
from profile_all.report.schema import row


def _namespaces() -> list[Any]:
    import torch

    return [torch, torch.nn.functional, torch.Tensor]


def snapshot() -> list[tuple[Any, dict[str, Any]]]:
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


class FlopsProfiler(Backend):
    name = "flops-profiler"
    kind = "counter"
    measures = "FLOPs, MACs, parameters and latency per root module and submodule (forward)"
    imports = ("torch",)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if importlib.util.find_spec("flops_profiler") is None:
            return False, "flops-profiler is not installed (pip install flops-profiler)"
        return True, ""

    def start(self, ctx: PassContext) -> None:
        self._rows: list[list[Any]] = []
        self.mended: list[str] = []
        self._roots = RootModules(self._count)
        self._roots.start()
        self.notes = self._roots.notes

    def _count(self, name: str, module: Any, args: tuple) -> None:
        import torch
        from flops_profiler.profiler import FlopsProfiler as Profiler

        copy = counting_copy(module)
        saved = snapshot()
        profiler = Profiler(copy)
        try:
            profiler.start_profile()
            with torch.no_grad():
                copy(*args)
            # a module's __flops__ holds its own operations only; these sum its children too
            from flops_profiler.profiler import _get_module_flops, _get_module_macs

            for path, sub in copy.named_modules():
                label = f"{name}.{path}" if path else name
                self._rows += [
                    row("module", label, "flops", _get_module_flops(sub), unit="FLOP"),
                    row("module", label, "macs", _get_module_macs(sub), unit="MAC"),
                    row("module", label, "params", getattr(sub, "__params__", 0),
                        unit="count"),
                    row("module", label, "wall_time", getattr(sub, "__duration__", 0))]
            profiler.stop_profile()
            profiler.end_profile()
        finally:
            self.mended += restore(saved)

    def stop(self, ctx: PassContext) -> None:
        self._roots.stop()

    def collect(self, ctx: PassContext) -> Collected:
        return Collected(self._rows)
