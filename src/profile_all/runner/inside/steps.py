"""The steps of a pass: when each came, and the end of the pass's window of steps.

Every pass records its steps, whatever its backends: the per-step times that a pass's
overhead over the clean pass is measured with, and the step count that says whether two
passes did the same work. A step is a `pa.step()`; in a script that calls none, an
`optimizer.step()` of any torch optimizer (a global hook); in a script with neither, the
end of each `backward()` (a script that updates its weights by hand, as pytorch/examples'
word language model); in a script with none of these (an inference loop), the end of each
outermost call of an nn.Module with parameters (global forward hooks, removed as soon as
a step of another kind shows the script has steps of its own: two hook calls a module
call until then). A loss module (`nn.NLLLoss()`) has no parameters: called after the
model, it made two steps an iteration. An optimizer step's start, not its end,
because LBFGS calls the model inside `step()`: 25 module calls of its closure came before
its first step ended, and ended the pass inside it. An optimizer that runs its closure's
backward() more than once a step (LBFGS: up to 20 evaluations) makes each of those a step
(`EVALUATION`): two steps of ten seconds leave no room for windows of steps, forty
evaluations of the same work do, and a FLOP count per evaluation is the work of one
forward and backward. A pass after the timing pass counts
only what the timing pass found the steps to be. One `perf_counter` call a step.

A pass with `max_steps` ends its target at that step: the step raises StepLimit (a
BaseException, so the target's `except Exception` lets it through), which unwinds the
target's frames (its regions close, its `finally` blocks run) and ends the pass as `ok`.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from time import perf_counter
from typing import Any

from profile_all import compile_watch
from profile_all.backends.base import kept_samples
from profile_all.compile_watch import held_compilation

#: what marks the steps of a script whose optimizer evaluates its closure several times a step
EVALUATION = "backward() inside optimizer.step()"


class StepLimit(BaseException):
    """The pass's window of steps is over."""


class StepClock:
    def __init__(self, max_steps: int | None = None, module_calls: bool = False) -> None:
        self.marks = array("d")
        self.optimizer_marks = array("d")
        self.backward_marks = array("d")
        self.module_marks = array("d")
        #: the ends of the backward()s run inside optimizer steps (a closure's)
        self.evaluation_marks = array("d")
        self.max_steps = max_steps
        #: the target was ended at `max_steps`
        self.limited = False
        self._hooks: list[Any] = []
        self._autograd: Any = None  # torch.autograd while its `backward` is wrapped
        self._backward_steps = True  # until the script shows steps of another kind
        self._in_optimizer_step = 0  # depth: an optimizer may wrap another
        self._step_evaluations = 0  # backward()s in the current optimizer step
        #: the steps are the evaluations: an optimizer step held two or more
        self._evaluations = False
        self._backward: tuple[Any, Any] = (None, None)  # (torch's, the wrapper)
        #: count outermost module calls as steps (a script's passes; a model's are timed
        #: by their benchmark)
        self._module_calls = module_calls
        #: the hooks on module calls while they may be steps (global until something
        #: compiles, then on each compiled module: its own calls are steps instead)
        self._module_hooks: compile_watch.ModuleCallHooks | None = None
        self._depth = 0
        #: when the target started: the first step starts there
        self.started_at = perf_counter()
        #: called at each step of the kind `found_source` names (`optimizer.step()`,
        #: `outermost module call`: what the timing pass found a script that calls no
        #: pa.step() to have): the pass's backends hear it as they hear pa.step()
        self.found: Any = None
        self.found_source = ""
        #: called with (what marks the steps, their count) at each step's end, of the kind
        #: that marks them so far (the windows a pass hosts begin and end there)
        self.on_mark: Any = None

    def _limit(self, steps: int, source: str) -> None:
        if self.max_steps is not None and steps >= self.max_steps:
            self.limited = True
            raise StepLimit(f"the pass's window of {self.max_steps} steps ({source}) is over: "
                            "its target was ended there")

    def step(self) -> None:
        self._stop_module_steps()
        self._stop_backward_steps()
        self.marks.append(perf_counter())
        self._marked("pa.step()", len(self.marks))
        self._limit(len(self.marks), "pa.step()")

    def _optimizer_step_starts(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._stop_module_steps()
        self._stop_backward_steps(unwrap=False)  # its closure's are heard as evaluations
        self._in_optimizer_step += 1
        self._step_evaluations = 0

    def _marked(self, source: str, count: int) -> None:
        if self.on_mark is not None:
            self.on_mark(source, count)

    def _optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._stop_module_steps()
        self._in_optimizer_step = max(0, self._in_optimizer_step - 1)
        self.optimizer_marks.append(perf_counter())
        if not self.marks and not self._evaluations:  # a script's own steps come first
            if self.found_source == "optimizer.step()":
                self.found()
            self._marked("optimizer.step()", len(self.optimizer_marks))
            self._limit(len(self.optimizer_marks), "optimizer.step()")

    def _backward_ended(self) -> None:
        if self._in_optimizer_step:
            self._evaluation_ended()
            return
        if not self._backward_steps:
            return
        self._stop_module_steps()
        self.backward_marks.append(perf_counter())
        if self.found_source in ("", "backward()"):
            if self.found_source:
                self.found()
            self._marked("backward()", len(self.backward_marks))
            self._limit(len(self.backward_marks), "backward()")

    def _evaluation_ended(self) -> None:
        """A backward() inside an optimizer step (its closure's) ended: a step once a step
        held two (or the timing pass found them to be the steps)."""
        self.evaluation_marks.append(perf_counter())
        self._step_evaluations += 1
        self._evaluations = self._evaluations or self._step_evaluations > 1 \
            or self.found_source == EVALUATION
        if self._evaluations and not self.marks:
            if self.found_source == EVALUATION:
                self.found()
            self._marked(EVALUATION, len(self.evaluation_marks))
            self._limit(len(self.evaluation_marks), EVALUATION)

    def _wrap_backward(self, autograd: Any) -> None:
        """torch.autograd.backward (what `Tensor.backward()` calls) followed by a step;
        torch has no hook on a backward's end. Undone at stop, where no one wrapped it
        since; else left to them, and heard no more."""
        backward = autograd.backward

        def backward_then_step(*args: Any, **kwargs: Any) -> Any:
            done = backward(*args, **kwargs)
            if self._autograd is not None:
                self._backward_ended()
            return done
        self._autograd, self._backward = autograd, (backward, backward_then_step)
        autograd.backward = backward_then_step

    def _unwrap_backward(self) -> None:
        if self._autograd is not None:
            original, wrapper = self._backward
            if self._autograd.backward is wrapper:
                self._autograd.backward = original
            self._autograd = None

    def _module_enter(self, module: Any, args: Any) -> None:
        self._depth += 1

    def _module_exit(self, module: Any, args: Any, output: Any) -> None:
        self._depth -= 1
        if self._depth == 0 and next(module.parameters(), None) is not None:
            self.module_marks.append(perf_counter())
            if self.found_source == "outermost module call":
                self.found()
            self._marked("outermost module call", len(self.module_marks))
            self._limit(len(self.module_marks), "outermost module call")

    def _stop_module_steps(self) -> None:
        if self._module_hooks is not None:
            self._module_hooks.stop()
            self._module_hooks = None
            self.module_marks = array("d")  # the script's own steps count, not these
        self._module_calls = False

    def _stop_backward_steps(self, unwrap: bool = True) -> None:
        """The script's own steps count: a backward() before the first optimizer step
        ends is none; under pa.step() none is heard (torch's backward put back)."""
        self._backward_steps = False
        self.backward_marks = array("d")
        if unwrap:
            self._unwrap_backward()

    def _depth_anew(self) -> None:
        self._depth = 0

    def start(self) -> None:
        optim = sys.modules.get("torch.optim.optimizer")  # when the pass imported torch
        if optim is not None:
            self._hooks = [optim.register_optimizer_step_pre_hook(self._optimizer_step_starts),
                           optim.register_optimizer_step_post_hook(self._optimizer_step)]
        autograd = sys.modules.get("torch.autograd")
        if autograd is not None:
            self._wrap_backward(autograd)
        self._module_calls = self._module_calls and "torch.nn.modules.module" in sys.modules
        if self._module_calls:
            self._module_hooks = compile_watch.ModuleCallHooks(
                self._module_enter, self._module_exit, on_switch=self._depth_anew)
            self._module_hooks.start()
        self.started_at = perf_counter()

    def stop(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self._unwrap_backward()
        if self._module_hooks is not None:
            self._module_hooks.stop()

    def _steps(self) -> tuple[array, str]:
        """(each step's end, what marked them), by the order of precedence."""
        if self.marks:
            return self.marks, "pa.step()"
        if self._evaluations:
            return self.evaluation_marks, EVALUATION
        if self.optimizer_marks:
            return self.optimizer_marks, "optimizer.step()"
        if self.backward_marks:
            return self.backward_marks, "backward()"
        if self.module_marks:
            return self.module_marks, "outermost module call"
        return array("d"), ""

    def unheard(self) -> array:
        """The ends of the steps found that the backends did not hear as they came: in the
        pass that learns what marks the steps (the timing pass), found ones are known only
        once the target ended."""
        marks, source = self._steps()
        return marks if source not in ("pa.step()", self.found_source) else array("d")

    def facts(self, compiling: Sequence[tuple[float, float]] = (),
              windows: Sequence[tuple[float, float]] = ()) -> dict[str, Any]:
        """Steps seen, what marked them, the window the pass was ended at (None: it ran
        whole), the steps that held a compilation (`compiling`: its intervals), and the
        time of each step kept for per-step figures: not the first (from the target's
        start, it holds the script's setup), nor those that compiled, nor those that
        overlap a window of another pass's backends (`windows`: their spans)."""
        marks, source = self._steps()
        spans = list(zip([self.started_at, *marks[:-1]], marks, strict=False))
        compiled = held_compilation(spans, compiling)
        in_windows = [n for n in held_compilation(spans, windows) if n not in compiled]
        apart = {*compiled, *in_windows}
        kept = [end - start for number, (start, end) in enumerate(spans, 1)
                if number > 1 and number not in apart]
        return {"steps": len(marks), "step_source": source,
                "step_times": kept_samples(kept), "compile_steps": compiled,
                "window_steps": in_windows,
                "window": self.max_steps if self.limited else None}

