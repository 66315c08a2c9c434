"""What flop-counter changes of torch's ModuleTracker (private parts of torch 2.13's):
hooks on each module once something compiles, and parents that count each module's
entries. tests/test_counter_calls.py checks the names, calls and FLOPs they give."""

from __future__ import annotations

import weakref
from collections import Counter
from typing import Any


class FollowsCompiled:
    """A ModuleTracker's global hooks given way, once something compiles, to hooks on each
    module (`follow`); torch 2.13's ModuleTracker keeps its global handles in
    `_fw_pre_handle` and `_fw_post_handle`, and its hooks in `_fw_pre_hook`, `_fw_post_hook`."""

    def follow(self, modules: Any) -> None:
        """No global hook from now on: hooks on each of `modules` instead."""
        self._fw_pre_handle.remove()  # (a handle's remove may come twice)
        self._fw_post_handle.remove()
        for module in modules:
            if module not in self._hooked:
                self._hooked.add(module)
                self._per_module += [
                    module.register_forward_pre_hook(self._fw_pre_hook),
                    module.register_forward_hook(self._fw_post_hook, always_call=True)]

    def __enter__(self) -> Any:
        self._hooked: weakref.WeakSet = weakref.WeakSet()
        self._per_module: list[Any] = []
        return super().__enter__()

    def __exit__(self, *args: Any) -> None:
        for handle in self._per_module:
            handle.remove()
        super().__exit__(*args)


class CountsEntries:
    """A ModuleTracker whose parents count each module's entries (torch's keeps a set), and
    its backward calls (`backward_calls`). Over torch 2.13's `_get_append_fn`,
    `_get_pop_fn`, `_maybe_set_engine_callback` and `parents`."""

    def __init__(self) -> None:
        super().__init__()
        self.backward_calls: Counter[str] = Counter()
        self._counted_for: Any = None
        self._open: Counter[str] = Counter()

    def _counts(self) -> Counter[str]:
        """How many times each module is entered and not left, in the current set of
        parents (torch's callback at a backward's end makes a new one)."""
        if self._counted_for is not self.parents:
            self._counted_for, self._open = self.parents, Counter()
        return self._open

    def _get_append_fn(self, name: str, is_bw: bool) -> Any:
        """torch's keeps a module among the parents as a set: a module entered again
        before it was left (an LSTMCell's step t-1 begins its backward as the hooks of
        step t's inputs, the same tensors, end step t's) was left at the first exit,
        and the rest of its backward counted nowhere (12 k FLOP a call of 4 M). Here
        each entry counts, and the backward calls too."""
        def entered(*args: Any) -> None:
            if is_bw:
                self._maybe_set_engine_callback()
                self.backward_calls[name] += 1
            counts = self._counts()
            counts[name] += 1
            if counts[name] > 0:
                self.parents.add(name)
        return entered

    def _get_pop_fn(self, name: str, is_bw: bool) -> Any:
        """A module left before it was entered counts below zero: a module that returns
        its input (Dropout(p=0), Identity) is left, in its backward, by the hook on its
        input before the hook on its output (the same tensor) enters it; torch's then
        kept it among the parents for the rest of the backward (every later FLOP)."""
        def left(*args: Any) -> None:
            counts = self._counts()
            counts[name] -= 1
            if counts[name] <= 0:
                self.parents.discard(name)
        return left
