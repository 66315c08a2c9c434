"""flops-profiler (counter): FLOPs, MACs, parameters and latency of each root module and of
its submodules, by flops-profiler (DeepSpeed's, packaged alone), counted once per root
module on its first call (forward only).

It patches torch functions while it runs and does not restore them all (torch.bmm stays
torch.matmul after stop_profile()), so every attribute of torch, torch.nn.functional and
torch.Tensor it changed is put back here; planned in a pass of its own besides.
"""

from __future__ import annotations

from typing import Any

from profile_all.backends.roots import RootCounter, counting_copy
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


class FlopsProfiler(RootCounter):
    name = "flops-profiler"
    measures = "FLOPs, MACs, parameters and latency per root module and submodule (forward)"
    requires = (("flops_profiler", "flops-profiler"),)

    def count(self, name: str, module: Any, args: tuple) -> list[list[Any]]:
        import torch
        from flops_profiler.profiler import FlopsProfiler as Profiler
        from flops_profiler.profiler import _get_module_flops, _get_module_macs

        copy = counting_copy(module)
        saved = snapshot()
        profiler = Profiler(copy)
        rows = []
        try:
            profiler.start_profile()
            with torch.no_grad():
                copy(*args)
            # a module's __flops__ holds its own operations only; these sum its children too
            for path, sub in copy.named_modules():
                label = f"{name}.{path}" if path else name
                rows += [
                    row("module", label, "flops", _get_module_flops(sub), unit="FLOP"),
                    row("module", label, "macs", _get_module_macs(sub), unit="MAC"),
                    row("module", label, "params", getattr(sub, "__params__", 0),
                        unit="count"),
                    row("module", label, "wall_time", getattr(sub, "__duration__", 0))]
            profiler.stop_profile()
            profiler.end_profile()
        finally:
            mended = restore(saved)
            if mended:
                self.notes.append("flops-profiler left patched, put back: "
                                  + ", ".join(sorted(mended)))
        return rows
