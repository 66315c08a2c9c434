"""flop-counter (counter): exact FLOPs of every operator, per module, region and step, by
torch.utils.flop_counter.FlopCounterMode over the whole target: forward, and backward when
the target trains.

Out of the box it counts nothing for the CPU attention kernel, an LSTM on the CPU, any
recurrent layer on a GPU, and 0 for nn.Transformer's fused fast path (one opaque
operator). So those operators get formulas (flop_formulas.py), and the fast path is
switched off while counting: the layers then run their plain operators, which compute
the same result and are counted.

torch.compile compiles nothing under FlopCounterMode (a dispatch mode: torch skips the
frame, "non-infra torch dispatch mode present"): compiled code runs eagerly in this pass,
and its FLOPs are those of the eager operators. Said in a note when the target compiles.
Once something compiles, the module tracker's global hooks (which OptimizedModule warns
of, and Dynamo would trace) give way to hooks on each module: those alive then (found by
the garbage collector) and those of each compiled module made later. A module made later
outside a compiled one is counted in the totals, not on its own.

Per module it reports forward and backward FLOPs apart, and the forward and backward calls
it saw, so that the report can compare it per call with thop and flops-profiler, which see
one call. FlopCounterMode's module tracker names a root module by its type alone, so two
Sequential roots would be added up under one name: here roots are named as RootModules
names them for thop and flops-profiler ("Sequential", "Sequential#2").
"""

from __future__ import annotations

import gc
import warnings
from collections import Counter
from typing import Any

from profile_all import compile_watch
from profile_all.backends import dispatch_mode, flop_formulas
from profile_all.backends.base import Backend, Collected, PassContext, kept_samples
from profile_all.backends.model_calls import ModelCalls
from profile_all.backends.module_tracking import CountsEntries, FollowsCompiled
from profile_all.backends.roots import ModuleFacts, RootModules, tensors_in
from profile_all.rows import Facts, row
from profile_all.stats import summarize


def _name_below(known: Any, seen: Any, module: Any, name: str) -> None:
    """Name `module`'s submodules by their path below `name` (a compiled module's as its
    original's), and mark them seen."""
    seen.add(module)
    for path, sub in module.named_modules():
        path = path.removeprefix("_orig_mod.")
        if path and path != "_orig_mod":
            known[sub] = f"{name}.{path}"
            seen.add(sub)


def _tracker(roots: RootModules) -> Any:
    """A ModuleTracker that names roots as `roots` does, counts backward calls and records
    each forward call's facts. Built on private parts of torch 2.13's ModuleTracker
    (_known_modules, _seen_modules, _get_append_fn, _fw_post_hook):
    tests/test_counter_calls.py checks the names and calls they give."""
    from torch.autograd.graph import register_multi_grad_hook
    from torch.utils.module_tracker import ModuleTracker

    class Tracker(FollowsCompiled, CountsEntries, ModuleTracker):
        def __init__(self) -> None:
            super().__init__()
            self.facts = ModuleFacts()
            self.model_calls = ModelCalls()

        def _get_mod_name(self, mod: Any) -> str:
            """A root's name from `roots` (else its type, as torch names it), and its
            submodules' paths below it; a module reached by several paths is named by the
            first, as named_modules() names it for thop and flops-profiler (torch's own
            tracker takes the last)."""
            if mod not in self._known_modules:
                original = getattr(mod, "_orig_mod", mod)  # a compiled module: as its own
                self._known_modules[mod] = roots.names.get(id(mod), type(original).__name__)
            name = self._known_modules[mod]
            if mod not in self._seen_modules:
                _name_below(self._known_modules, self._seen_modules, mod, name)
            return name

        def _fw_pre_hook(self, mod: Any, input: Any) -> None:
            if not hasattr(mod, "_orig_mod"):  # a compiled module's calls: its original's
                if self.parents == {"Global"}:
                    self.model_calls.began(mod, self._get_mod_name(mod), input)
                super()._fw_pre_hook(mod, input)

        def _fw_post_hook(self, mod: Any, input: Any, output: Any) -> None:
            """torch's, but the module's backward begins with the first gradient of any
            of its outputs: torch waits for all (register_multi_grad_hook's "all"),
            which never fires when the output is the tensor `.backward()` is called on
            (a model that returns its loss: no backward counted) and fires twice when it
            is one of several (`(logits, loss)`: two backward calls, half the FLOPs
            each). Outputs are found in dataclasses too."""
            if hasattr(mod, "_orig_mod"):
                return
            name = self._get_mod_name(mod)
            self.facts.record(name, mod, output)
            self.model_calls.ended(mod, output)
            self._get_pop_fn(name, False)()
            needing = [tensor for tensor in tensors_in(output) if tensor.requires_grad]
            if needing:
                self._hooks.append(register_multi_grad_hook(
                    needing, self._get_append_fn(name, True), mode="any"))

    return Tracker()


def _modules_alive() -> list[Any]:
    """Every nn.Module the garbage collector knows of (once, when something compiles);
    quietly: asking some objects their type warns (torch.distributed.reduce_op)."""
    from torch import nn

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [item for item in gc.get_objects() if isinstance(item, nn.Module)]


def _tracked_counter(roots: RootModules, custom_mapping: dict[Any, Any]) -> Any:
    """A FlopCounterMode with `_tracker(roots)`, which keeps backward and attention FLOPs
    per module apart. Built on FlopCounterMode's private `_count_flops` (torch 2.13)."""
    from torch.utils import flop_counter
    from torch.utils.flop_counter import FlopCounterMode

    # the dispatch mode inside FlopCounterMode (torch >= 2.5), or FlopCounterMode itself
    dispatch_mode.dynamo_disabled_when_imported(
        getattr(flop_counter, "_FlopCounterMode", FlopCounterMode))

    class Mode(FlopCounterMode):
        def __init__(self) -> None:
            super().__init__(display=False, custom_mapping=custom_mapping)
            self.mod_tracker = _tracker(roots)
            self.mod_tracker.model_calls.flops = self.get_total_flops
            self.mod_tracker.model_calls.per_module = lambda: (
                {name: float(sum(counts.values())) for name, counts in self.flop_counts.items()},
                {name: float(value) for name, value in self.attention_flops.items()})
            self.mod_tracker.model_calls.module_calls = lambda: self.mod_tracker.facts.calls
            self.backward_flops: Counter[str] = Counter()
            self.attention_flops: Counter[str] = Counter()

        def _count_flops(self, func_packet: Any, out: Any, args: Any, kwargs: Any) -> Any:
            if func_packet not in self.flop_registry:
                return out
            counted = self.flop_counts["Global"][func_packet]
            result = super()._count_flops(func_packet, out, args, kwargs)
            added = self.flop_counts["Global"][func_packet] - counted
            backward = self.mod_tracker.is_bw
            if backward or "attention" in str(func_packet):
                into = self.backward_flops if backward else self.attention_flops
                for name in set(self.mod_tracker.parents):
                    into[name] += added
            return result

    return Mode()


class FlopCounter(Backend):
    name = "flop-counter"
    facts = Facts(counts_flops=True, exact=True)
    kind = "counter"
    windowed = True
    measures = "exact FLOPs per operator, module and step, forward and backward"
    counts_on_meta = True
    imports = ("torch",)

    def start(self, ctx: PassContext) -> None:
        import torch

        self._torch = torch
        self._fast_path = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        self._roots = RootModules(lambda *call: None)  # names the roots, counts nothing
        self._roots.start()
        self.notes = self._roots.notes
        self._steps: list[float] = []
        #: each step's outermost calls of a model, and of those the ones without grad
        self._step_calls: list[int] = []
        self._step_calls_without_grad: list[int] = []
        self._calls_at_step = (0, 0)
        self._regions: dict[tuple[str, str], list[float]] = {}  # FLOPs of each call
        self._counted_at_step = 0
        self._mode = _tracked_counter(self._roots, flop_formulas.formulas())
        self._followed = False
        self._mode.__enter__()
        self._unsubscribe = compile_watch.subscribe(self._compiled)

    def _compiled(self, module: Any) -> None:
        tracker = self._mode.mod_tracker
        if not self._followed:
            self._followed = True
            tracker.follow(_modules_alive())
            self.notes.append(
                "torch.compile compiles nothing under FlopCounterMode (torch skips a frame "
                "while a dispatch mode is active): in this pass the target's compiled code "
                "ran eagerly, so its FLOPs are those of the eager operators (the same "
                "arithmetic) and its time is not the compiled program's")
        if module is not None:
            tracker.follow(module._orig_mod.modules())

    def enter(self, name: str, parent: str) -> float:
        return self._mode.get_total_flops()

    def exit(self, name: str, parent: str, token: float) -> None:
        self._regions.setdefault((name, parent), []).append(
            self._mode.get_total_flops() - token)

    def step(self) -> None:
        total = self._mode.get_total_flops()
        self._steps.append(total - self._counted_at_step)
        counted = self._mode.mod_tracker.model_calls
        calls = (counted.calls, counted.without_grad)
        self._step_calls.append(calls[0] - self._calls_at_step[0])
        self._step_calls_without_grad.append(calls[1] - self._calls_at_step[1])
        self._calls_at_step = calls
        self._counted_at_step = total

    def stop(self, ctx: PassContext) -> None:
        self._unsubscribe()
        self._mode.__exit__(None, None, None)
        self._roots.stop()
        self._torch.backends.mha.set_fastpath_enabled(self._fast_path)

    def collect(self, ctx: PassContext) -> Collected:
        counts = self._mode.get_flop_counts()
        rows = [row("run", "run", "flops", self._mode.get_total_flops(), unit="FLOP")]
        rows += self._module_rows(counts)
        for operator, flops in counts.get("Global", {}).items():
            # "aten.addmm" -> "aten::addmm", as torch.profiler names it: one row per operator
            rows.append(row("operator", str(operator).replace(".", "::", 1), "flops", flops,
                            unit="FLOP"))
        for (name, parent), calls in self._regions.items():
            rows += [row("region", name, "calls", len(calls), parent=parent),
                     row("region", name, "flops", sum(calls), parent=parent, unit="FLOP"),
                     row("region", name, "flops", sum(calls) / len(calls), stat="mean",
                         parent=parent, unit="FLOP")]
        if self._steps:
            rows.append(row("step", "step", "calls", len(self._steps)))
            rows += [row("step", "step", "flops", value, stat=stat, unit="FLOP")
                     for stat, value in summarize(self._steps).items()]
        # each step's work, in order, every step: what an unusual step did besides
        samples = [("step", "step", "", metric, kept_samples(values)) for metric, values in (
            ("flops", self._steps), ("model_calls", self._step_calls),
            ("model_calls_without_grad", self._step_calls_without_grad))]
        return Collected(rows, samples=samples if self._steps else [])

    def _module_rows(self, counts: dict[str, dict[Any, int]]) -> list[list[Any]]:
        """Every module that ran, also those with no FLOPs counted (a ReLU, a BatchNorm):
        FLOPs (forward and backward), backward FLOPs and calls, attention FLOPs, facts."""
        tracker = self._mode.mod_tracker
        names = list(dict.fromkeys([*tracker.facts.kinds, *counts]))
        rows = []
        for name in names:
            if name == "Global":
                continue
            rows += [row("module", name, "flops", sum(counts.get(name, {}).values())),
                     row("module", name, "backward_flops", self._mode.backward_flops[name]),
                     row("module", name, "backward_calls", tracker.backward_calls[name]),
                     row("module", name, "attention_flops", self._mode.attention_flops[name])]
        return (rows + tracker.facts.rows() + tracker.facts.params_rows()
                + tracker.model_calls.rows())

