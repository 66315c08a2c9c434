"""flops-profiler (counter): FLOPs, MACs, parameters and latency of each root module and of
its submodules, by flops-profiler (DeepSpeed's, packaged alone), counted once per root
module on its first call (forward only).

It patches torch functions while it runs and does not restore them all (torch.bmm stays
torch.matmul after stop_profile()), so every attribute of torch, torch.nn.functional and
torch.Tensor it changed is put back here; planned in a pass of its own besides.
"""

from __future__ import annotations

from typing import Any

from profile_all.backends.apart import restore, snapshot
from profile_all.backends.roots import RootCounter
from profile_all.rows import Facts, row


class FlopsProfiler(RootCounter):
    name = "flops-profiler"
    facts = Facts(counts_flops=True, forward_only=True)
    measures = "FLOPs, MACs, parameters and latency per root module and submodule (forward)"
    requires = (("flops_profiler", "flops-profiler"),)

    def count(self, name: str, copy: Any, args: tuple) -> list[list[Any]]:
        import torch
        from flops_profiler.profiler import FlopsProfiler as Profiler

        saved = snapshot()
        profiler = Profiler(copy)
        try:
            profiler.start_profile()
            with torch.no_grad():
                copy(*args)
            rows = _module_rows(name, copy)
            profiler.stop_profile()
            profiler.end_profile()
        finally:
            mended = restore(saved)
            if mended:
                self.notes.append("flops-profiler leaves torch functions patched after it "
                                  "stops; put back, so the script runs unchanged: "
                                  + ", ".join(sorted(mended)))
        return rows


def _module_rows(name: str, copy: Any) -> list[list[Any]]:
    """FLOPs, MACs, parameters and time of every module, its submodules' included.

    A module's __flops__ and __macs__ hold its own operations only. flops-profiler's own
    sums (_get_module_flops) add a module shared by two parents under both, so its
    operations count twice in the root; here each module is summed under its first path
    (as named_modules() names it, and every counter here), so each operation counts once.
    """
    modules = dict(copy.named_modules())
    totals = {path: [getattr(sub, "__flops__", 0), getattr(sub, "__macs__", 0)]
              for path, sub in modules.items()}
    for path in sorted(totals, key=lambda p: -p.count(".")):  # children before parents
        if path:
            parent = path.rpartition(".")[0]
            totals[parent] = [a + b for a, b in zip(totals[parent], totals[path], strict=True)]
    rows = []
    for path, (flops, macs) in totals.items():
        label = f"{name}.{path}" if path else name
        rows += [row("module", label, "flops", flops, unit="FLOP"),
                 row("module", label, "macs", macs, unit="MAC"),
                 row("module", label, "params", getattr(modules[path], "__params__", 0),
                     unit="count"),
                 row("module", label, "wall_time", getattr(modules[path], "__duration__", 0))]
    return rows
