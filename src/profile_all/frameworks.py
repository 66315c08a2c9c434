"""The training frameworks a pass's target uses, given profile-all's marks without an edit.

A script that trains with PyTorch Lightning or HuggingFace's Trainer marks its steps and
its phases through the framework, which profile-all hears by a profiler (Lightning) or a
callback (the Trainer). `watch()` puts them in as the target imports the framework
(after_import.py), or at once where it is imported already (a pass in the caller's
process): Lightning's Trainer gets `lightning.Profiler` (around the profiler it was
given, if any), every HuggingFace Trainer `huggingface.Callback`. A framework whose code
no longer fits is left as it was, with a line on stderr: the target runs unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from profile_all import after_import

#: Lightning's two packages' module that sets a Trainer's profiler
LIGHTNING_SETUPS = ("lightning.pytorch.trainer.setup", "pytorch_lightning.trainer.setup")
HUGGINGFACE_TRAINER = "transformers.trainer"


@contextlib.contextmanager
def _unmarked_if_it_fails(framework: str) -> Iterator[None]:
    """Marks given to a Trainer the framework made already: where they fail (its code
    changed), the Trainer goes on as it was, said in a line."""
    try:
        yield
    except Exception as error:
        print(f"profile-all: {framework} is not marked ({type(error).__name__}: {error}); "
              "its steps are found as a script's", file=sys.stderr)


def _profile_lightning(setup: Any) -> Callable[[], None]:
    from profile_all.lightning import Profiler

    given = setup._init_profiler

    @functools.wraps(given)
    def _init_profiler(trainer: Any, profiler: Any) -> None:
        given(trainer, profiler)
        with _unmarked_if_it_fails("Lightning's Trainer"):
            made = trainer.profiler
            if not isinstance(made, Profiler):
                passes = type(made).__name__ == "PassThroughProfiler"
                trainer.profiler = Profiler(inner=None if passes else made)

    setup._init_profiler = _init_profiler
    return lambda: setattr(setup, "_init_profiler", given)


def _call_back_huggingface(module: Any) -> Callable[[], None]:
    from profile_all.huggingface import Callback

    trainer_class = module.Trainer
    given = trainer_class.__init__

    @functools.wraps(given)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        given(self, *args, **kwargs)
        with _unmarked_if_it_fails("HuggingFace's Trainer"):
            held = [one for one in self.callback_handler.callbacks
                    if isinstance(one, Callback)]
            if not held:
                held = [Callback()]
                self.add_callback(held[0])
            held[0].bind(self)

    trainer_class.__init__ = __init__
    return lambda: setattr(trainer_class, "__init__", given)


#: each framework's module, and what gives it profile-all's marks (returns the undo)
FRAMEWORKS: tuple[tuple[str, Callable[[Any], Callable[[], None]]], ...] = (
    *((setup, _profile_lightning) for setup in LIGHTNING_SETUPS),
    (HUGGINGFACE_TRAINER, _call_back_huggingface),
)


def watch() -> Callable[[], None]:
    """Give each framework the target imports (or has imported) profile-all's marks;
    returns what puts every framework and import back as they were."""
    undos: list[Callable[[], None]] = []
    finders = []
    for name, mark in FRAMEWORKS:
        then = functools.partial(_mark, name, mark, undos)
        if name in sys.modules:
            then()
        else:
            finders.append(after_import.call(name, then))

    def undo() -> None:
        for finder in finders:
            finder.cancel()
        while undos:
            undos.pop()()
    return undo


def _mark(name: str, mark: Callable[[Any], Callable[[], None]],
          undos: list[Callable[[], None]]) -> None:
    try:
        undos.append(mark(importlib.import_module(name)))
    except Exception as error:  # the framework changed: the target runs as it was
        print(f"profile-all: {name} is not marked ({type(error).__name__}: {error}); its "
              "steps are found as a script's", file=sys.stderr)
