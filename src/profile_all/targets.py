"""What is profiled. A script target runs exactly as `python script.py args` would run it."""

from __future__ import annotations

import os
import runpy
import stat
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profile_all import validate
from profile_all.errors import UsageError, one_line


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((said for test, said in kinds if test(mode)), "not a file")


@dataclass
class ScriptTarget:
    path: str
    args: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """Short name for the run directory."""
        return Path(self.path).stem

    @property
    def command(self) -> list[str]:
        return ["python", self.path, *self.args]

    def refuse_early(self) -> None:
        """What is refused before anything starts: all that `validate` checks."""
        self.validate()

    def validate(self) -> None:
        """Fail early, before any pass runs, on a script that python itself would refuse."""
        path = Path(self.path)
        try:
            mode = path.stat().st_mode
        except OSError:
            raise UsageError(f"script not found: {self.path}") from None
        if stat.S_ISDIR(mode):
            raise UsageError(f"{self.path} is a directory, not a Python script")
        if not stat.S_ISREG(mode):  # a FIFO or a device: reading it waited for ever
            raise UsageError(f"{self.path} is not a regular file ({_kind(mode)}): profile-all "
                             "runs the script once a pass, so it must be a file it can read "
                             "again; save it to a file first")
        try:
            with tokenize.open(path) as source_file:  # honours PEP 263 encoding lines
                source = source_file.read()
        except (OSError, SyntaxError, UnicodeDecodeError) as error:
            raise UsageError(f"cannot read script {self.path}: {error}") from None
        try:
            compile(source, str(path), "exec", dont_inherit=True)
        except SyntaxError as error:
            raise UsageError(
                f"{self.path}:{error.lineno}: syntax error: {error.msg}") from None
        except ValueError as error:  # e.g. null bytes
            raise UsageError(f"{self.path}: not a Python script: {error}") from None

    def to_spec(self) -> dict[str, Any]:
        return {"kind": "script", "path": self.path, "args": list(self.args)}

    def run(self, *, own_process: bool, mode: str = "once") -> list[list[Any]]:
        """Run the script in this process, as `python script.py args` does; no rows of its own.

        `own_process`: this process exists only for the target (a worker), so sys.path[0]
        is replaced by the script's folder as python does; otherwise it is put in front
        and sys.argv and sys.path are restored afterwards.
        """
        script_dir = os.path.dirname(os.path.abspath(self.path))
        saved_argv, saved_path = sys.argv, list(sys.path)
        sys.argv = [self.path, *self.args]
        if own_process:
            sys.path[0] = script_dir
        else:
            sys.path.insert(0, script_dir)
        try:
            runpy.run_path(self.path, run_name="__main__")
        finally:
            if not own_process:
                sys.argv, sys.path[:] = saved_argv, saved_path
        return []


@dataclass
class ModelTarget:
    """A model from a factory SPEC (or a live nn.Module), its input shapes, how to run it.

    In the timing pass it is benchmarked (bench.py); in every other pass it runs one
    iteration, which the counters count and the tracers trace.
    """

    spec: str
    input_shapes: list[tuple[int, ...]]
    dtype: str = "float32"
    #: the inputs' dtype, where it is not the model's: int64 for token ids
    input_dtype: str | None = None
    #: integer inputs are token ids below this (None: the model's, build.vocabulary)
    vocab_size: int | None = None
    device: str = "auto"
    train: bool = False
    warmup: int = 10
    iters: int | None = None  # None: adaptive
    budget_seconds: float = 10.0
    batch_search: bool = False
    max_memory: float | None = None
    #: "meta": passes whose backends all count from shapes alone build and run the model
    #: on the meta device (nothing computed, no memory for weights); "device": as timed
    count_on: str = "device"
    live_model: Any = field(default=None, repr=False)
    facts: dict[str, Any] = field(default_factory=dict)
    #: per-iteration latencies of the last benchmark, as backends' Collected.samples
    samples: list[Any] = field(default_factory=list, repr=False)
    #: the device the last run() built and ran the model on ("meta" for a count on meta)
    ran_on: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        """Refuse bad settings when the target is made, from the CLI or the API alike."""
        from profile_all.model import build

        if self.input_shapes or self.live_model is not None:  # else the factory's own
            self.input_shapes = validate.shapes(self.input_shapes)
        validate.choice("dtype (--dtype)", self.dtype, build.DTYPES)
        if self.input_dtype is not None:
            validate.choice("input_dtype (--input-dtype)", self.input_dtype,
                            build.INPUT_DTYPES)
        if self.vocab_size is not None:
            validate.whole("vocab_size (--vocab-size)", self.vocab_size, 1)
        if not isinstance(self.device, str) or not (
                self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")):
            raise validate.ArgumentValueError(
                f"device (--device) must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        validate.flag("train", self.train)
        validate.whole("warmup", self.warmup, 0)
        if self.iters is not None:
            validate.whole("iters", self.iters, 1)
        validate.positive("budget_seconds", self.budget_seconds)
        validate.positive("max_memory", self.max_memory)
        validate.choice("count_on (--count-on)", self.count_on, ("device", "meta"))
        if self.count_on == "meta" and self.live_model is not None:
            raise validate.ArgumentValueError(
                "count_on='meta' builds the model anew on the meta device: it needs a SPEC "
                "('package.module:factory'), not a live model")

    @property
    def label(self) -> str:
        return self.spec.rpartition(":")[2] or "model"

    @property
    def command(self) -> list[str]:
        shapes = [f"--input-shape={','.join(map(str, s))}" for s in self.input_shapes]
        inputs = ([f"--input-dtype={self.input_dtype}"] if self.input_dtype else []) + (
            [f"--vocab-size={self.vocab_size}"] if self.vocab_size else [])
        return ["profile-all", "model", self.spec, *shapes, *inputs, f"--device={self.device}",
                f"--dtype={self.dtype}", *(["--train"] if self.train else [])]

    def to_spec(self) -> dict[str, Any]:
        return {"kind": "model", "spec": self.spec,
                "input_shapes": [list(s) for s in self.input_shapes], "dtype": self.dtype,
                "input_dtype": self.input_dtype, "vocab_size": self.vocab_size,
                "device": self.device, "train": self.train, "warmup": self.warmup,
                "iters": self.iters, "budget_seconds": self.budget_seconds,
                "batch_search": self.batch_search, "max_memory": self.max_memory,
                "count_on": self.count_on}

    def _prepared(self, on_meta: bool = False) -> Any:
        from profile_all.model import build

        if self.dtype not in build.DTYPES:
            raise UsageError(f"dtype (--dtype) must be one of {', '.join(build.DTYPES)}, "
                             f"got {self.dtype!r}")
        if on_meta:
            return build.on_meta(self.spec, self.input_shapes, self.dtype, self.train,
                                 self.input_dtype)
        import torch

        device = build.resolve_device(self.device)
        model, examples = (self.live_model, None) if self.live_model is not None \
            else build.build_with_inputs(self.spec)
        model = model.to(device=device)
        if self.dtype != "float32":
            model = model.to(dtype=getattr(torch, self.dtype))
        if not self.input_shapes:
            inputs = self._own_inputs(examples, device)
        else:
            inputs = build.make_inputs(self.input_shapes, self.input_dtype or self.dtype,
                                       device, vocabulary=self.vocabulary(model))
        return build.Work(model, inputs, self.train), device

    def _own_inputs(self, examples: list[Any] | None, device: Any) -> list[Any]:
        """The factory's example inputs on the device (float ones in --dtype); their shapes
        and an integer dtype become the target's, for the batch search."""
        import torch

        if examples is None:
            raise UsageError(f"{self.spec}() returned a module alone: give --input-shape, or "
                             "return (module, example_inputs) from the factory")
        self.input_shapes = [tuple(t.shape) for t in examples]
        if not examples[0].is_floating_point():
            self.input_dtype = str(examples[0].dtype).removeprefix("torch.")
            self.vocab_size = self.vocab_size or int(max(t.max() for t in examples)) + 1
        return [t.to(device=device, dtype=getattr(torch, self.dtype))
                if t.is_floating_point() else t.to(device) for t in examples]

    def vocabulary(self, model: Any) -> int | None:
        """The token ids' bound of integer inputs (None for float ones)."""
        from profile_all.model import build

        if self.input_dtype not in build.INTEGER_DTYPES:
            return None
        return build.vocabulary(model, self.vocab_size)

    def refuse_early(self) -> None:
        """What is refused before anything starts (no torch): a SPEC of another form, a
        model file that is not there. A bad factory, shape or device is found by
        `validate`, where torch is imported."""
        if self.live_model is None:
            from profile_all.model import build

            build.factory_parts(self.spec)

    def validate(self) -> None:
        """Build the model and run it once: bad specs, shapes and devices fail here."""
        work, _device = self._prepared()
        try:
            work.plain()
        except Exception as error:
            shapes = " ".join("x".join(map(str, s)) for s in self.input_shapes)
            raise UsageError(f"the model rejects inputs of shape {shapes}: "
                             f"{one_line(error)}") from None

    def run(self, *, own_process: bool, mode: str = "once") -> list[list[Any]]:
        from profile_all.model import timing_pass

        self.samples = []
        work, device = self._prepared(on_meta=mode == "meta")
        self.ran_on = str(device)
        if mode == "meta":
            try:
                work.marked()
            except Exception as error:
                raise RuntimeError(f"--count-on meta: the model does not run on the meta "
                                   f"device ({type(error).__name__}: {error}); count on the "
                                   "device instead") from error
            return []
        if mode != "bench":
            work.marked()
            return []
        rows, self.facts = timing_pass.benchmark(self, work, device)
        return rows


def target_from_spec(spec: dict[str, Any]) -> ScriptTarget | ModelTarget:
    if spec.get("kind") == "script":
        return ScriptTarget(spec["path"], spec["args"])
    if spec.get("kind") == "model":
        fields = {k: v for k, v in spec.items() if k != "kind"}
        fields["input_shapes"] = [tuple(s) for s in fields["input_shapes"]]
        return ModelTarget(**fields)
    raise ValueError(f"unknown target kind: {spec.get('kind')!r}")
