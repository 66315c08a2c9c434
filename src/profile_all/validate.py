"""The API's arguments checked before anything runs: a wrong type is a TypeError and a wrong
value a ValueError (both also a UsageError, so the CLI prints one line and exits 2), each
naming the parameter. Nothing is guessed: a string where a list of strings is wanted is
refused, not split into characters."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from profile_all.errors import UsageError


class ArgumentTypeError(UsageError, TypeError):
    """A parameter of the wrong type."""


class ArgumentValueError(UsageError, ValueError):
    """A parameter of the right type and a wrong value."""


def _kind(value: Any) -> str:
    return type(value).__name__


def strings(name: str, value: Any, *, paths_too: bool = False) -> list[str]:
    """A list, tuple or other sequence of strings (and paths, with `paths_too`, as
    subprocess takes them); never a lone string."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ArgumentTypeError(f"{name} must be a list of strings, not {_kind(value)}"
                                + (f" ({value!r}: wrap it in a list)"
                                   if isinstance(value, str) else ""))
    allowed = (str, os.PathLike) if paths_too else (str,)
    bad = [item for item in value if not isinstance(item, allowed)]
    if bad:
        raise ArgumentTypeError(f"{name} must hold strings only, not {_kind(bad[0])} "
                                f"({bad[0]!r})")
    return [os.fspath(item) for item in value]


def report_function(name: str, value: Any, of: str = "the Report") -> Any:
    """None, or what can be called (with a Report, or what `of` says)."""
    if value is not None and not callable(value):
        raise ArgumentTypeError(f"{name} must be a function of {of}, not {_kind(value)}")
    return value


def backend_names(value: Any) -> list[str] | None:
    """None (the default set) or a list of distinct backend names."""
    if value is None:
        return None
    names = strings("backends", value)
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ArgumentValueError(f"backend {repeated[0]!r} is given twice")
    return names


#: the longest a timeout may be: 30 days (beyond it, a clock's time_t overflows)
MAX_SECONDS = 30 * 86400


def seconds(name: str, value: Any) -> float | None:
    """None or a finite number of seconds above zero, at most MAX_SECONDS."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeError(f"{name} must be a number of seconds, not {_kind(value)} "
                                f"({value!r})")
    if not math.isfinite(value) or value <= 0:
        raise ArgumentValueError(f"{name} must be a positive, finite number of seconds, "
                                 f"got {value!r}")
    if value > MAX_SECONDS:
        raise ArgumentValueError(f"{name} must be at most {MAX_SECONDS:,} seconds (30 days), "
                                 f"got {value:g}")
    return float(value)


def whole(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be a whole number, not {_kind(value)} "
                                f"({value!r})")
    if value < minimum:
        raise ArgumentValueError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ArgumentValueError(f"{name} must be at most {maximum:,}, got {value:,}")
    return value


def options(value: Any, known: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """{backend: {option: value}}, every backend and option known (`known`: each backend's
    option types), every value of its option's type."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(f"options must be a dict of backend -> options, not "
                                f"{_kind(value)}")
    checked = {}
    for backend, given in value.items():
        if backend not in known:
            raise ArgumentValueError(f"options for an unknown backend {backend!r}; known: "
                                     f"{', '.join(sorted(known))}")
        if not isinstance(given, Mapping):
            raise ArgumentTypeError(f"options[{backend!r}] must be a dict, not {_kind(given)}")
        types = known[backend]
        for option, setting in given.items():
            if option not in types:
                raise ArgumentValueError(
                    f"unknown option {option!r} of backend {backend!r}; its options: "
                    f"{', '.join(sorted(types)) or 'none'}")
            wanted = types[option] if isinstance(types[option], tuple) else (types[option],)
            if isinstance(setting, bool) and bool not in wanted:
                wrong = True  # (a bool is an int to isinstance)
            else:
                wrong = not isinstance(setting, wanted)
            if wrong:
                names = " or ".join(t.__name__ for t in wanted)
                raise ArgumentTypeError(f"option {option!r} of backend {backend!r} must be "
                                        f"{names}, not {_kind(setting)} ({setting!r})")
        checked[backend] = dict(given)
    return checked


def path(name: str, value: Any, *, optional: bool = False) -> Path | None:
    """A str or os.PathLike (None too when `optional`)."""
    if value is None and optional:
        return None
    if not isinstance(value, str | os.PathLike) or isinstance(value, bytes):
        raise ArgumentTypeError(f"{name} must be a path (str or Path), not {_kind(value)}")
    if str(value) == "":
        raise ArgumentValueError(f"{name} is empty")
    given = Path(value)
    _within_file_system_limits(name, given)
    return given


#: the longest name of one file (bytes) and the most folders a path may hold: what Linux's
#: file systems allow (NAME_MAX), and a depth no project reaches (2,000 levels made
#: Path.mkdir recurse past Python's limit)
NAME_MAX, MAX_PARTS = 255, 256


def _within_file_system_limits(name: str, given: Path) -> None:
    """A path that no file system holds is one line, not an OSError or RecursionError
    traceback from deep inside."""
    shown = str(given) if len(str(given)) <= 80 else str(given)[:77] + "..."
    if len(given.parts) > MAX_PARTS:
        raise ArgumentValueError(f"{name}: {shown} has {len(given.parts):,} parts, over the "
                                 f"{MAX_PARTS} a path may hold here")
    longest = max((len(os.fsencode(part)) for part in given.parts), default=0)
    if longest > NAME_MAX:
        raise ArgumentValueError(f"{name}: {shown} holds a name of {longest:,} bytes, over "
                                 f"the {NAME_MAX} a file system allows")


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be True or False, not {_kind(value)} "
                                f"({value!r})")
    return value


def choice(name: str, value: Any, choices: Sequence[str]) -> str:
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a string, not {_kind(value)}")
    if value not in choices:
        raise ArgumentValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def shapes(value: Any) -> list[tuple[int, ...]]:
    """Input shapes: a list of shapes, each a sequence of positive whole numbers."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
        raise ArgumentTypeError(f"input_shapes must be a non-empty list of shapes like "
                                f"[(1, 3, 224, 224)], not {value!r}")
    checked = []
    for shape in value:
        if isinstance(shape, str | bytes) or not isinstance(shape, Sequence) or not shape:
            raise ArgumentTypeError(f"input_shapes: {shape!r} is not a shape like (1, 3, 224)")
        for size in shape:
            whole("input_shapes: a dimension", size, 1)
        checked.append(tuple(shape))
    return checked


def positive(name: str, value: Any) -> float | None:
    """None or a finite number above zero."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeError(f"{name} must be a number, not {_kind(value)} ({value!r})")
    if not math.isfinite(value) or value <= 0:
        raise ArgumentValueError(f"{name} must be a positive, finite number, got {value!r}")
    return float(value)


def paths(name: str, value: Any) -> list[Path]:
    """A list of paths (str or Path); never a lone one."""
    if isinstance(value, str | bytes | os.PathLike) or not isinstance(value, Sequence):
        raise ArgumentTypeError(f"{name} must be a list of paths, not {_kind(value)}")
    return [path(name, item) for item in value]


_BYTE_SCALES = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def byte_size(name: str, value: Any) -> float | None:
    """None, a positive number of bytes, or text like `8G`, `512M` or `1000000`."""
    if isinstance(value, str):
        scale = _BYTE_SCALES.get(value[-1:].upper(), 1)
        try:
            value = float(value[:-1] if scale != 1 else value) * scale
        except ValueError:
            raise ArgumentValueError(f"{name} wants bytes like 8G or 512M, got {value!r}") \
                from None
    return positive(name, value)


def percent(name: str, value: Any) -> float | None:
    """None or a finite percentage of 0 or more."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeError(f"{name} must be a number (percent), not {_kind(value)}")
    if not math.isfinite(value) or value < 0:
        raise ArgumentValueError(f"{name} must be a finite percentage of 0 or more, "
                                 f"got {value!r}")
    return float(value)


def model_inputs(example_inputs: Any, input_shapes: Any, dtype: str | None,
                 input_dtype: str | None = None, factory_may_give: bool = False
                 ) -> tuple[list[tuple[int, ...]], str | None, str | None]:
    """(the shapes, the model's dtype, the inputs' dtype) of a model's inputs: those of
    `example_inputs` (tensors; the dtype the first one's unless one is given: an integer
    one is the inputs', token ids), else `input_shapes`."""
    if example_inputs is not None:
        if isinstance(example_inputs, str | bytes) or not isinstance(example_inputs, Sequence) \
                or not example_inputs or not all(hasattr(t, "shape") for t in example_inputs):
            raise ArgumentTypeError("example_inputs must be a non-empty list of tensors")
        first = str(example_inputs[0].dtype).removeprefix("torch.")
        if example_inputs[0].dtype.is_floating_point:
            return [tuple(t.shape) for t in example_inputs], dtype or first, input_dtype
        return [tuple(t.shape) for t in example_inputs], dtype, input_dtype or first
    if input_shapes is not None:
        return shapes(input_shapes), dtype, input_dtype
    if factory_may_give:  # the factory's own (module, example_inputs), or a refusal there
        return [], dtype, input_dtype
    raise ArgumentTypeError("profile_model needs example_inputs or input_shapes")


def batched(shapes: list[tuple[int, ...]], batch_size: Any) -> list[tuple[int, ...]]:
    """`shapes` with `batch_size` (a number) as their first dimension; as they are for
    None and "auto" (a search)."""
    if isinstance(batch_size, str) and batch_size != "auto":
        raise ArgumentValueError(f"batch_size (--batch-size) wants a positive integer or "
                                 f"auto, got {batch_size!r}")
    if batch_size is None or batch_size == "auto":
        return shapes
    if not shapes:
        raise ArgumentValueError("batch_size (--batch-size) N with the factory's own example "
                                 "inputs: give --input-shape, or make them at that batch")
    return [(whole("batch_size", batch_size, 1), *shape[1:]) for shape in shapes]
