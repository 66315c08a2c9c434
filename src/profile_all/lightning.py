"""PyTorch Lightning's actions as profile-all regions, its training batches as steps.

    trainer = Trainer(profiler=profile_all.lightning.Profiler())

Lightning tells its profiler where each of its actions starts and stops (the training
step, backward, the optimizer step, fetching a batch, validation, every hook of the
module, its callbacks and its strategy, by Lightning's own names). Each becomes a region
that every backend of the pass hears, and the end of each training batch
(`run_training_batch`) a `pa.step()`. Outside a profile-all pass a region costs a test
of one global and a step nothing, so the profiler can stay in the script.

Lightning takes no profiler by name but its own four (`profiler="simple"`), so
`profile-all run` gives a script's Trainer this profiler itself (frameworks.py): one made
with no profiler gets this one, one made with Lightning's own gets this one around it
(its summary is Lightning's as before).
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

from profile_all.regions import region, step

try:
    from lightning.pytorch.profilers import Profiler as _LightningProfiler
except ImportError:
    try:
        from pytorch_lightning.profilers import Profiler as _LightningProfiler
    except ImportError as missing:
        raise ImportError("profile_all.lightning needs PyTorch Lightning: "
                          "pip install lightning") from missing

#: the action Lightning runs once a training batch: its end is a step
STEP_ACTION = "run_training_batch"


#: a callback's action: `[Callback]` and its state key (its class name and the settings
#: that tell two of a class apart, `{'monitor': None, ...}`: 100 characters), the hook
_CALLBACK = re.compile(r"^(\[Callback\][^{.]*)\{.*\}(\.\w+)$", re.S)


@functools.lru_cache(maxsize=4096)
def action_region(action_name: str) -> Any:
    """The region of a Lightning action: its name, a callback's without its settings, a
    `/` (which parts a region's path) written `:`; made once a name (Lightning times
    dozens of actions a step)."""
    return region(_CALLBACK.sub(r"\1\2", action_name).replace("/", ":"))


class Profiler(_LightningProfiler):
    """A Lightning profiler whose actions are profile-all regions; `inner`: a profiler of
    Lightning's own that hears every action too and makes the summary."""

    def __init__(self, inner: Any = None) -> None:
        super().__init__()
        self.inner = inner
        #: each thread's open actions, by name (picklable: a spawning strategy pickles
        #: the Trainer, its profiler with it)
        self._open: dict[int, list[str]] = {}

    def start(self, action_name: str) -> None:
        if self.inner is not None:
            self.inner.start(action_name)
        action_region(action_name).__enter__()
        self._open.setdefault(threading.get_ident(), []).append(action_name)

    def stop(self, action_name: str) -> None:
        """End the action, and any started inside it and left open (an exception between
        a start and its stop); a stop of no open action changes nothing."""
        opened = self._open.get(threading.get_ident(), [])
        if action_name in opened:
            while opened:
                name = opened.pop()
                action_region(name).__exit__(None, None, None)
                if name == action_name:
                    break
        if self.inner is not None:
            self.inner.stop(action_name)
        if action_name == STEP_ACTION:
            step()

    def summary(self) -> str:
        return self.inner.summary() if self.inner is not None else ""

    def setup(self, stage: str, local_rank: int | None = None,
              log_dir: str | None = None) -> None:
        super().setup(stage, local_rank, log_dir)
        if self.inner is not None:
            self.inner.setup(stage, local_rank, log_dir)

    def describe(self) -> None:
        """Lightning's summary, written where the profiler inside was told to write it."""
        if self.inner is None:
            super().describe()
            return
        self.inner.describe()
        self.teardown(self._stage)

    def teardown(self, stage: str | None) -> None:
        opened = getattr(self, "_open", {}).get(threading.get_ident(), [])  # from __del__ too
        while opened:
            action_region(opened.pop()).__exit__(None, None, None)
        if self.inner is not None:
            self.inner.teardown(stage)
        super().teardown(stage)

    def __getattr__(self, name: str) -> Any:
        """What Lightning or the script asks of the profiler inside (`inner.profiler` of
        its PyTorchProfiler, say)."""
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)
