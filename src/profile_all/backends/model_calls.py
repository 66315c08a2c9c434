"""The script's calls of a model, grouped by grad mode and input shapes, as the exact
counter sees them (flop_counter.py): a training call, an evaluation and a generation loop's
calls are unlike work, and a figure per call must be one group's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from profile_all.backends.roots import keywords_of_call, output_elements, tensors_in
from profile_all.rows import row


class ModelCalls:
    """The script's calls of a model: outermost calls of a module with parameters (a loss
    has none), those made without grad (an evaluation), and the forward FLOPs (`flops`:
    the counter's running total) of each, by module, grad mode and input shapes: 300
    `generate` calls averaged with 25 training calls made a figure that matched no call."""

    def __init__(self) -> None:
        self.calls = self.without_grad = 0
        self.flops: Callable[[], float] = lambda: 0.0
        #: each module's FLOPs and attention FLOPs so far (the counter's), by module name
        self.per_module: Callable[[], tuple[dict[str, float], dict[str, float]]] = \
            lambda: ({}, {})
        #: each module's forward calls so far, by module name
        self.module_calls: Callable[[], dict[str, int]] = dict
        #: (module name, "grad 4x16") -> [calls, forward FLOPs, output elements]
        self.groups: dict[tuple[str, str], list[float]] = {}
        #: (module name, "grad 4x16") -> each module's FLOPs and calls in those calls
        self.group_modules: dict[tuple[str, str], tuple[Counter[str], Counter[str]]] = {}
        #: a root's first call, each module's FLOPs and attention FLOPs in it, and its
        #: output elements: the call the per-call counters count
        self.first: dict[str, tuple[dict[str, float], dict[str, float], int]] = {}
        self._open: tuple[Any, str, str, float, dict[str, float], dict[str, int]] | None = None
        self._first_open: tuple[Any, dict[str, float], dict[str, float]] | None = None

    def began(self, module: Any, name: str, args: Any) -> None:
        import torch

        if next(module.parameters(), None) is None:
            return
        grad = torch.is_grad_enabled()
        self.calls += 1
        self.without_grad += not grad
        # a model called with keywords (HF's `model(input_ids=x, labels=y)`): theirs too
        called = [args, *keywords_of_call(module).values()]
        shapes = " ".join("x".join(map(str, t.shape)) or "scalar"
                          for t in tensors_in(called)[:4])
        before = self.per_module()
        self._open = (module, name, f"{'grad' if grad else 'no_grad'} {shapes}".strip(),
                      self.flops(), before[0], dict(self.module_calls()))
        if name not in self.first:
            self._first_open = (module, *before)

    def ended(self, module: Any, output: Any) -> None:
        if self._open is not None and self._open[0] is module:
            _module, name, key, start, flops_before, calls_before = self._open
            group = self.groups.setdefault((name, key), [0, 0.0, 0])
            group[0] += 1
            group[1] += self.flops() - start
            group[2] += output_elements(output)
            flops, calls = self.group_modules.setdefault((name, key), (Counter(), Counter()))
            flops.update({k: v - flops_before.get(k, 0.0)
                          for k, v in self.per_module()[0].items() if k != "Global"})
            calls.update({k: v - calls_before.get(k, 0) for k, v in self.module_calls().items()})
            self._open = None
            if self._first_open is not None and self._first_open[0] is module:
                flops, attention = self.per_module()
                _, flops_before, attention_before = self._first_open
                self.first[name] = (
                    {k: v - flops_before.get(k, 0.0) for k, v in flops.items()},
                    {k: v - attention_before.get(k, 0.0) for k, v in attention.items()},
                    output_elements(output))
                self._first_open = None

    def rows(self) -> list[list[Any]]:
        """Each group's calls and forward FLOPs (its key in the stat column), and module by
        module those of the groups a report can stand for (`_detailed`); each root's first
        call, module by module."""
        rows = [measured for (name, key), (calls, flops, outputs) in self.groups.items()
                for measured in (row("module", name, "group_calls", calls, stat=key),
                                 row("module", name, "group_flops", flops, stat=key,
                                     unit="FLOP"),
                                 row("module", name, "group_outputs", outputs, stat=key))]
        for group in self._detailed():
            flops, calls = self.group_modules[group]
            rows += [measured for name, count in calls.items() if count > 0
                     for measured in (row("module", name, "group_module_calls", count,
                                          stat=group[1]),
                                      row("module", name, "group_module_flops", flops[name],
                                          stat=group[1], unit="FLOP"))]
        for root, (flops, attention, outputs) in self.first.items():
            rows.append(row("module", root, "first_call_outputs", outputs))
            rows += [row("module", name, "first_call_flops", value, unit="FLOP")
                     for name, value in flops.items() if name != "Global"]
            rows += [row("module", name, "first_call_attention_flops", value, unit="FLOP")
                     for name, value in attention.items() if value]
        return rows


    def _detailed(self) -> list[tuple[str, str]]:
        """Per root with calls of unlike groups, the two its report can stand for
        (call_groups.chosen): the most numerous of its calls with grad, and of all its calls
        (the first seen of those as many); a generation loop's hundreds of shapes would
        otherwise add rows by the module for each."""
        detailed: list[tuple[str, str]] = []
        for root in dict.fromkeys(name for name, _ in self.groups):
            own = [group for group in self.groups if group[0] == root]
            if len(own) < 2:
                continue
            graded = [group for group in own if group[1].startswith("grad")]
            for among in (graded, own):
                if among:
                    detailed.append(max(among, key=lambda group: self.groups[group][0]))
        return list(dict.fromkeys(detailed))
