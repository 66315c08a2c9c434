"""Models as targets: loading a factory, making inputs, and one iteration of work.

A SPEC is `package.module:factory` or `path/to/file.py:factory`, where factory is any
callable that returns an `nn.Module` (a class works). Inference runs in `eval()` mode
under `torch.inference_mode()`; training runs forward, backward and an SGD step, each in
its own region inside `train_step`.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profile_all.errors import UsageError, one_line
from profile_all.regions import region

DTYPES = ("float32", "float16", "bfloat16", "float64")
#: integer inputs: token ids below the vocabulary (--vocab-size, else the model's)
INTEGER_DTYPES = ("int64", "int32")
INPUT_DTYPES = DTYPES + INTEGER_DTYPES


def parse_shape(text: str) -> tuple[int, ...]:
    """`1,3,224,224` -> (1, 3, 224, 224)."""
    try:
        shape = tuple(int(part) for part in text.replace("x", ",").split(","))
    except ValueError:
        shape = ()
    if not shape or any(size < 1 for size in shape):
        raise UsageError(f"--input-shape wants positive integers separated by commas, like "
                         f"1,3,224,224; got {text!r}")
    return shape


def factory_parts(spec: str) -> tuple[str, str]:
    """(the module or .py file, the factory's name) of a SPEC; UsageError for a SPEC of
    another form or a .py file that is not there: what is known without importing it."""
    module_part, colon, name = spec.rpartition(":")
    if not colon or not module_part or not name:
        raise UsageError(f"model SPEC must be package.module:factory or file.py:factory, "
                         f"got {spec!r}")
    if module_part.endswith(".py") and not Path(module_part).is_file():
        raise UsageError(f"model file not found: {module_part}")
    return module_part, name


def load_factory(spec: str) -> Callable[[], Any]:
    module_part, name = factory_parts(spec)
    try:
        if module_part.endswith(".py"):
            path = Path(module_part)
            sys.path.insert(0, str(path.resolve().parent))
            loader_spec = importlib.util.spec_from_file_location(f"_profile_all_{path.stem}",
                                                                 path)
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_part)
    except UsageError:
        raise
    except Exception as error:  # the user's module failed to import: say how, in one line
        raise UsageError(f"cannot import {module_part}: {one_line(error)}") from None
    factory = getattr(module, name, None)
    if factory is None or not callable(factory):
        raise UsageError(f"{module_part} has no callable named {name!r}")
    return factory


def build_model(spec: str) -> Any:
    return build_with_inputs(spec)[0]


def build_with_inputs(spec: str) -> tuple[Any, list[Any] | None]:
    """(the module, its example inputs or None): a factory returns a module, or (a module,
    its example inputs: a tensor or a list of them), as torchbench's models give theirs."""
    import torch

    try:
        made = load_factory(spec)()
    except UsageError:
        raise
    except Exception as error:
        raise UsageError(f"{spec}() raised {type(error).__name__}: {error}") from None
    model, examples = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{spec}() returned an object of type {type(model).__name__}, not "
                         "a torch.nn.Module (or a module and its example inputs)")
    if examples is None:
        return model, None
    examples = [examples] if isinstance(examples, torch.Tensor) else examples
    if not isinstance(examples, list | tuple) or not examples or not all(
            isinstance(tensor, torch.Tensor) for tensor in examples):
        raise UsageError(f"{spec}() returned example inputs that are not a tensor or a list "
                         "of tensors (keyword inputs: wrap the model in a module that takes "
                         "them positionally)")
    return model, list(examples)


def resolve_device(device: str) -> Any:
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise UsageError(f"--device must be auto, cpu or cuda, got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError("--device cuda, but CUDA is not available here")
    return torch.device(device)


def on_meta(spec: str, shapes: list[tuple[int, ...]], dtype: str, train: bool,
            input_dtype: str | None = None) -> Any:
    """(Work, device) with the model built and its inputs made on the meta device: run, it
    computes nothing and holds no weights; FLOP counters count from the shapes alone."""
    import torch

    meta = torch.device("meta")
    try:
        with meta:
            model, examples = build_with_inputs(spec)
        model = model.to(device=meta, dtype=getattr(torch, dtype))
        if shapes or examples is None:
            inputs = [torch.empty(shape, dtype=getattr(torch, input_dtype or dtype),
                                  device=meta) for shape in shapes]
        else:  # the factory's own, made on meta
            inputs = [t.to(device=meta, dtype=getattr(torch, dtype)) if t.is_floating_point()
                      else t.to(meta) for t in examples]
        return Work(model, inputs, train), meta
    except UsageError:
        raise
    except Exception as error:
        raise UsageError(f"--count-on meta: {spec} cannot be built on the meta device: "
                         f"{type(error).__name__}: {error}") from None


def make_inputs(shapes: list[tuple[int, ...]], dtype: str, device: Any,
                batch_size: int | None = None, vocabulary: int | None = None) -> list[Any]:
    """Random inputs made on the device (no copy in the timed work): normal values of a
    float `dtype`, or token ids uniform below `vocabulary` of an integer one."""
    import torch

    if dtype not in INPUT_DTYPES:
        raise UsageError(f"--input-dtype must be one of {', '.join(INPUT_DTYPES)}, "
                         f"got {dtype!r}")
    generator = torch.Generator(device="cpu").manual_seed(0)
    if batch_size is not None:
        shapes = [(batch_size, *shape[1:]) for shape in shapes]
    _fit(shapes, getattr(torch, dtype).itemsize)
    inputs = []
    for shape in shapes:
        if dtype in INTEGER_DTYPES:
            made = torch.randint(0, vocabulary, shape, generator=generator,
                                 dtype=getattr(torch, dtype))
        else:
            made = torch.randn(shape, generator=generator, dtype=getattr(torch, dtype))
        inputs.append(made.to(device))
    return inputs


def vocabulary(model: Any, given: int | None) -> int:
    """How many token ids integer inputs draw from: `given` (--vocab-size), else the
    model's: the fewest entries of its nn.Embeddings (ids below it index any of them, the
    positions' table too; the ids' values change no FLOP and no time), else its
    `config.vocab_size` (HuggingFace's)."""
    import torch

    if given:
        return given
    tables = [module.num_embeddings for module in model.modules()
              if isinstance(module, torch.nn.Embedding)]
    if tables:
        return min(tables)
    said = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(said, int) and said > 0:
        return said
    raise UsageError("integer inputs (--input-dtype int64) draw token ids below a vocabulary: "
                     "the model has no nn.Embedding to take it from; give --vocab-size N")


class InputsTooLarge(UsageError):
    """Inputs that would not fit the memory free (a batch size the search cannot take)."""


def _fit(shapes: list[tuple[int, ...]], itemsize: int) -> None:
    """Refuse inputs that do not fit the memory free now (made on the CPU first), before
    torch tries: `--input-shape 100000000,100000000` is 40 PB."""
    import psutil

    wanted = sum(math.prod(shape) for shape in shapes) * itemsize
    free = psutil.virtual_memory().available
    if wanted > free:
        shown = " ".join("x".join(map(str, shape)) for shape in shapes)
        raise InputsTooLarge(f"inputs of shape {shown} take {wanted / 2**30:,.1f} GiB, more than "
                         f"the {free / 2**30:.1f} GiB of memory free here")


class Work:
    """One iteration of a model: inference, or a training step with its three regions."""

    def __init__(self, model: Any, inputs: list[Any], train: bool) -> None:
        import torch

        self.torch = torch
        self.model, self.inputs, self.train = model, inputs, train
        if train:
            if not any(p.requires_grad for p in model.parameters()):
                raise UsageError("--train needs a model with trainable parameters")
            model.train()
            self.optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
        else:
            model.eval()

    @property
    def region_name(self) -> str:
        return "train_step" if self.train else "forward"

    def plain(self) -> Any:
        """The iteration without regions (warm-up, counting)."""
        if not self.train:
            with self.torch.inference_mode():
                return self.model(*self.inputs)
        self.optimizer.zero_grad(set_to_none=True)
        loss = _scalar(self.model(*self.inputs))
        loss.backward()
        self.optimizer.step()
        return loss

    def marked(self) -> Any:
        """The iteration inside regions, heard by the active backends."""
        if not self.train:
            with region("forward"), self.torch.inference_mode():
                return self.model(*self.inputs)
        with region("train_step"):
            with region("forward"):
                self.optimizer.zero_grad(set_to_none=True)
                loss = _scalar(self.model(*self.inputs))
            with region("backward"):
                loss.backward()
            with region("optimizer_step"):
                self.optimizer.step()
        return loss


def _scalar(output: Any) -> Any:
    """A loss to call backward on, whatever the model returns."""
    import torch

    if isinstance(output, torch.Tensor):
        return output.float().mean()
    if isinstance(output, dict):
        output = list(output.values())
    tensors = [t for t in output if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return sum(t.float().mean() for t in tensors)
