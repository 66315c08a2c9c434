"""HuggingFace Trainer's steps, evaluation and saving as profile-all regions and steps.

    trainer = Trainer(model, args, ..., callbacks=[profile_all.huggingface.Callback()])

Each optimizer step of the Trainer (`on_step_begin` to `on_step_end`, the micro-batches
of gradient accumulation inside it) is a region `train_step` and ends with a `pa.step()`, so a
run's steps are the Trainer's `global_step`s. A callback hears no event before evaluation
or saving begins, so the Trainer that holds the callback has its `evaluate`, `predict`
and `_save_checkpoint` wrapped in regions of those names (that Trainer alone, found as
its `__init__` tells the callback `on_init_end`). Outside a profile-all pass a region
costs a test of one global and a step nothing.

`profile-all run` gives every Trainer a script makes this callback itself (frameworks.py).
"""

from __future__ import annotations

import sys
from typing import Any

from profile_all.regions import region, step

try:
    from transformers import TrainerCallback
except ImportError as missing:
    raise ImportError("profile_all.huggingface needs transformers: "
                      "pip install transformers") from missing

#: the Trainer's methods that are regions, and the regions' names
WRAPPED = (("evaluate", "evaluate"), ("predict", "predict"),
           ("_save_checkpoint", "save_checkpoint"))
STEP_REGION = "train_step"
#: attribute set on a Trainer whose methods are wrapped
_BOUND = "_profile_all_regions"


class Callback(TrainerCallback):
    """Marks the Trainer's steps, evaluation and saving for profile-all's backends."""

    def __init__(self) -> None:
        self._in_step = False

    def bind(self, trainer: Any) -> None:
        """Wrap `trainer`'s evaluation, prediction and saving in regions (once)."""
        if getattr(trainer, _BOUND, False):
            return
        for method, name in WRAPPED:
            bound = getattr(trainer, method, None)
            if bound is not None:
                setattr(trainer, method, region(name)(bound))
        setattr(trainer, _BOUND, True)

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = _calling_trainer(self)
        if trainer is not None:
            self.bind(trainer)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._end_step()
        region(STEP_REGION).__enter__()
        self._in_step = True

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._end_step()
        step()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._end_step()

    def _end_step(self) -> None:
        if self._in_step:
            self._in_step = False
            region(STEP_REGION).__exit__(None, None, None)


def _calling_trainer(callback: Callback, frames: int = 8) -> Any:
    """The Trainer whose callbacks hold `callback`, from the frames calling its event."""
    frame = sys._getframe(2)
    for _ in range(frames):
        if frame is None:
            return None
        handler = getattr(frame.f_locals.get("self"), "callback_handler", None)
        if any(held is callback for held in getattr(handler, "callbacks", ())):
            return frame.f_locals["self"]
        frame = frame.f_back
    return None
