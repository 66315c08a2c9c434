"""flop-counter (counter): exact FLOPs of every operator, per module, region and step, by
torch.utils.flop_counter.FlopCounterMode over the whole target: forward, and backward when
the target trains.

Out of the box it counts nothing for the CPU attention kernel and 0 for nn.Transformer's
fused fast path (one opaque operator). So the CPU kernel and its backward are registered
with torch's own attention formulas, and the fast path is switched off while counting:
the layers then run their plain operators, which compute the same result and are counted.
"""

from __future__ import annotations

from typing import Any

from profile_all.backends.base import Backend, Collected, PassContext
from profile_all.backends.roots import RootModules
from profile_all.report.schema import row
from profile_all.stats import summarize


def _cpu_attention_formulas() -> dict[Any, Any]:
    import torch
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    def forward(query, key, value, *args, out_shape=None, **kwargs) -> int:
        return sdpa_flop_count(query, key, value)

    def backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
        return sdpa_backward_flop_count(grad_out, query, key, value)

    aten = torch.ops.aten
    return {aten._scaled_dot_product_flash_attention_for_cpu: forward,
            aten._scaled_dot_product_flash_attention_for_cpu_backward: backward}


class FlopCounter(Backend):
    name = "flop-counter"
    kind = "counter"
    measures = "exact FLOPs per operator, module and step, forward and backward"
    imports = ("torch",)

    def start(self, ctx: PassContext) -> None:
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        self._torch = torch
        self._fast_path = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        self._params: dict[str, int] = {}
        self._roots = RootModules(self._note_params)
        self._roots.start()
        self.notes = self._roots.notes
        self._steps: list[float] = []
        self._regions: dict[tuple[str, str], list[float]] = {}  # FLOPs of each call
        self._counted_at_step = 0
        self._mode = FlopCounterMode(display=False, custom_mapping=_cpu_attention_formulas())
        self._mode.__enter__()

    def _note_params(self, name: str, module: Any, args: tuple) -> None:
        self._params[name] = sum(p.numel() for p in module.parameters())

    def enter(self, name: str, parent: str) -> float:
        return self._mode.get_total_flops()

    def exit(self, name: str, parent: str, token: float) -> None:
        self._regions.setdefault((name, parent), []).append(
            self._mode.get_total_flops() - token)

    def step(self) -> None:
        total = self._mode.get_total_flops()
        self._steps.append(total - self._counted_at_step)
        self._counted_at_step = total

    def stop(self, ctx: PassContext) -> None:
        self._mode.__exit__(None, None, None)
        self._roots.stop()
        self._torch.backends.mha.set_fastpath_enabled(self._fast_path)

    def collect(self, ctx: PassContext) -> Collected:
        counts = self._mode.get_flop_counts()
        rows = [row("run", "run", "flops", self._mode.get_total_flops(), unit="FLOP")]
        for module, by_operator in counts.items():
            if module != "Global":
                rows.append(row("module", module, "flops", sum(by_operator.values()),
                                unit="FLOP"))
        for operator, flops in counts.get("Global", {}).items():
            # "aten.addmm" -> "aten::addmm", as torch.profiler names it: one row per operator
            rows.append(row("operator", str(operator).replace(".", "::", 1), "flops", flops,
                            unit="FLOP"))
        rows += [row("module", name, "params", count, unit="count")
                 for name, count in self._params.items()]
        for (name, parent), calls in self._regions.items():
            rows += [row("region", name, "calls", len(calls), parent=parent),
                     row("region", name, "flops", sum(calls), parent=parent, unit="FLOP"),
                     row("region", name, "flops", sum(calls) / len(calls), stat="mean",
                         parent=parent, unit="FLOP")]
        if self._steps:
            rows.append(row("step", "step", "calls", len(self._steps)))
            rows += [row("step", "step", "flops", value, stat=stat, unit="FLOP")
                     for stat, value in summarize(self._steps).items()]
        return Collected(rows)

