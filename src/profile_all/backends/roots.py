"""Root modules: an nn.Module with parameters called while no other module is running (a
model called by the script; not a loss function), seen on its first call. The per-call
counters (thop, flops-profiler) count each root once, on a deep copy, so the script's own
model, optimizer state and BatchNorm statistics are untouched and the script's results
stay the same; the count is seen by nothing of the target's, a profiler it runs itself
included (apart.py). A counter that fails on a module never reaches the script: the
failure is kept in `notes` for the report.

`ModuleFacts` records, per module each counter counted, what the report needs to compare
counters per call and to establish why they differ: forward calls, output elements, bias
adds and type. Every counter records them for the calls it saw itself.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from profile_all import compile_watch
from profile_all.backends import apart
from profile_all.backends.base import Backend, Collected, PassContext
from profile_all.rows import row


class RootModules:
    def __init__(self, on_first_call: Callable[[str, Any, tuple, dict], None]) -> None:
        self.on_first_call = on_first_call
        self.names: dict[int, str] = {}  # id(module) -> "Sequential", "Sequential#2"
        self._depth = 0
        self._busy = False
        # no global module hook once something compiles (Dynamo would trace it into the
        # compiled code): a compiled module is a root, seen by hooks on the OptimizedModule
        # and counted as its original module (`_orig_mod`), run eagerly on a copy
        self._hooks = compile_watch.ModuleCallHooks(self._before, self._after,
                                                    on_switch=self._depth_anew)
        self.notes: list[str] = []

    def start(self) -> None:
        self._hooks.start()

    def _depth_anew(self) -> None:
        self._depth = 0

    def stop(self) -> None:
        self._hooks.stop()

    def _name(self, module: Any) -> str:
        base = type(module).__name__
        taken = sum(1 for name in self.names.values() if name.split("#")[0] == base)
        return base if taken == 0 else f"{base}#{taken + 1}"

    def _before(self, module: Any, args: tuple) -> None:
        if self._busy:
            return
        if self._depth == 0 and id(module) not in self.names and _has_parameters(module):
            original = getattr(module, "_orig_mod", module)  # a compiled module's own
            name = self.names[id(module)] = self.names[id(original)] = self._name(original)
            self._busy = True
            try:
                self.on_first_call(name, original, args, keywords_of_call(module))
            except Exception as error:  # counting must never break the target
                self.notes.append(f"could not count {name}: {type(error).__name__}: {error}")
            finally:
                self._busy = False
        self._depth += 1

    def _after(self, module: Any, args: tuple, output: Any) -> None:
        if not self._busy:
            self._depth = max(0, self._depth - 1)


def keywords_of_call(module: Any) -> dict[str, Any]:
    """The keyword arguments of `module`'s call that a global forward pre-hook is inside:
    torch hands such a hook the positional ones only, and a model called with keywords
    (HuggingFace's `model(input_ids=x, labels=y)`) could not be counted ('You have to
    specify either input_ids or inputs_embeds'). They are in Module._call_impl's frame."""
    import sys

    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            break
        if frame.f_code.co_name == "_call_impl" and frame.f_locals.get("self") is module:
            return dict(frame.f_locals.get("kwargs") or {})
        frame = frame.f_back
    return {}


def _has_parameters(module: Any) -> bool:
    return next(module.parameters(), None) is not None


def tensors_in(output: Any) -> list[Any]:
    """Every tensor a module returned: a tensor, containers of them (pytree's), and the
    fields of a dataclass that pytree does not know (a model's own output class; those of
    HuggingFace's are registered with pytree)."""
    import dataclasses

    import torch
    from torch.utils._pytree import tree_leaves

    tensors = []
    for leaf in tree_leaves(output):
        if isinstance(leaf, torch.Tensor):
            tensors.append(leaf)
        elif dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
            tensors += tensors_in([getattr(leaf, field.name)
                                   for field in dataclasses.fields(leaf)])
    return tensors


def output_elements(output: Any) -> int:
    """Elements of every tensor a module returned."""
    return sum(tensor.numel() for tensor in tensors_in(output))


class ModuleFacts:
    """Per module path, over the forward calls seen: calls, output elements, and bias adds
    (one per output element of a module with a parameter named `bias`: the add that
    flops-profiler counts and FlopCounterMode does not); its type and parameters, once."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.outputs: Counter[str] = Counter()
        self.bias_adds: Counter[str] = Counter()
        self.kinds: dict[str, tuple[str, int, bool]] = {}  # path -> (type, params, has bias)

    def record(self, name: str, module: Any, output: Any) -> None:
        if name not in self.kinds:
            own = dict(module.named_parameters(recurse=False))
            self.kinds[name] = (type(module).__name__, sum(p.numel() for p in module.parameters()),
                                own.get("bias") is not None)
        elements = output_elements(output)
        self.calls[name] += 1
        self.outputs[name] += elements
        if self.kinds[name][2]:
            self.bias_adds[name] += elements

    def rows(self) -> list[list[Any]]:
        """calls, outputs, bias_adds and module_type (the type in the stat column)."""
        rows = []
        for name, (kind, _params, _bias) in self.kinds.items():
            rows += [row("module", name, "calls", self.calls[name]),
                     row("module", name, "outputs", self.outputs[name]),
                     row("module", name, "bias_adds", self.bias_adds[name]),
                     row("module", name, "module_type", 1, stat=kind)]
        return rows

    def params_rows(self) -> list[list[Any]]:
        return [row("module", name, "params", params)
                for name, (_kind, params, _bias) in self.kinds.items()]


@contextmanager
def recording(facts: ModuleFacts, name: str, module: Any) -> Iterator[None]:
    """Record the facts of `module` (named `name`) and of its submodules while inside."""
    def hook(label: str) -> Callable[[Any, tuple, Any], None]:
        return lambda sub, args, output: facts.record(label, sub, output)

    handles = [sub.register_forward_hook(hook(f"{name}.{path}" if path else name))
               for path, sub in module.named_modules()]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def counting_copy(module: Any) -> Any:
    """A deep copy to count on, in eval mode, so counting changes nothing of the original,
    without the hooks, buffers and attributes of a profiler the target runs (apart.py)."""
    import copy

    duplicate = copy.deepcopy(module)
    apart.strip(duplicate)
    duplicate.eval()
    return duplicate


class RootCounter(Backend):
    """A counter that counts each root module once, on its first call (thop,
    flops-profiler): `count(name, copy, args)` returns the rows of one root module, counted
    on a copy of it, while the facts of that one call are recorded beside (kept only when
    the count succeeds, so that no facts stand without the count they explain)."""

    kind = "counter"
    windowed = True
    imports = ("torch",)

    def count(self, name: str, copy: Any, args: tuple) -> list[list[Any]]:
        """The rows of one root module counted on `copy` called with `args` (its
        keyword arguments are bound to the copy's forward)."""
        raise NotImplementedError

    def start(self, ctx: PassContext) -> None:
        self._rows: list[list[Any]] = []
        self._pristine = apart.snapshot()  # torch's functions before the target patches any
        self._roots = RootModules(self._count_root)
        self._roots.start()
        self.notes = self._roots.notes

    def _count_root(self, name: str, module: Any, args: tuple, kwargs: dict) -> None:
        with apart.counting_apart(self._pristine):  # seen by nothing of the target's
            copy, facts = counting_copy(module), ModuleFacts()
            if kwargs:  # the counters call copy(*args): its forward takes the rest
                copy.forward = functools.partial(copy.forward, **kwargs)
            with recording(facts, name, copy):
                counted = self.count(name, copy, args)
        self._rows += counted + facts.rows()

    def stop(self, ctx: PassContext) -> None:
        self._roots.stop()

    def collect(self, ctx: PassContext) -> Collected:
        return Collected(self._rows)
