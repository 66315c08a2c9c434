"""A run folder read from disk is data, maybe someone else's: before any view or renderer
sees it, every field of meta.json that they read is checked for its type, and every
native file it names must lie inside the folder. A field that is not what profile-all
writes is one line (UsageError), never a traceback, and no file outside the folder is ever
opened or served."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from profile_all.errors import UsageError

Check = Callable[[Any], bool]


def _of(*types: type) -> Check:
    return lambda value: isinstance(value, types) and not (
        isinstance(value, bool) and bool not in types)


def _optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _list_of(check: Check) -> Check:
    return lambda value: isinstance(value, list) and all(check(item) for item in value)


def _dict_of(check: Check) -> Check:
    return lambda value: isinstance(value, dict) and all(
        isinstance(key, str) and check(item) for key, item in value.items())


_text, _whole, _number = _of(str), _of(int), _of(int, float)


def _record(fields: dict[str, Check]) -> Check:
    """A dict with every one of `fields`, each as its check says."""
    return lambda value: isinstance(value, dict) and all(
        key in value and check(value[key]) for key, check in fields.items())


#: a pass's torch.compile record (compile_watch.CompileWatch.facts), {} when none
_COMPILATION = _record({
    "intervals": _list_of(_list_of(_number)), "graphs": _whole,
    "frames": _list_of(_record({"frame": _text, "seconds": _number,
                                "backward_seconds": _number, "recompile_reason": _text})),
    "graph_breaks": _list_of(_record({"reason": _text, "where": _text, "count": _whole}))})


def _anything(value: Any) -> bool:
    return True

#: the fields of meta.json that views and renderers read, and what each must be
TOP = {
    "status": _text, "exit_code": _whole, "command": _list_of(_text), "cwd": _text,
    "target": _dict_of(_anything), "environment": _dict_of(_anything),
    "passes": _list_of(_dict_of(_anything)), "passes_not_run": _list_of(_whole),
    "skipped_backends": _dict_of(_text), "doubts": _list_of(_text),
    "preimported": _list_of(_text), "ranks": _list_of(_whole),
    "artifacts": _list_of(_dict_of(_text)), "model": _dict_of(_anything),
    "sources": _list_of(_dict_of(_anything)), "distributed": _dict_of(_anything),
    "stopped_by": _optional(_text),
    "backend_facts": _dict_of(_dict_of(_of(bool, str))),
}
PASS = {
    "pass": _whole, "backends": _list_of(_text), "timing": _of(bool), "status": _text,
    "exit_code": _whole, "error": _text, "target_wall_time": _optional(_number),
    "process_wall_time": _optional(_number), "steps": _optional(_whole),
    "window": _optional(_whole),
    "overhead": _optional(_number), "overhead_low": _optional(_number),
    "overhead_high": _optional(_number), "overhead_verdict": _text, "overhead_basis": _text,
    "backend_failures": _list_of(_dict_of(_text)), "recovered": _of(bool),
    "ranks": _list_of(_dict_of(_anything)), "left_running": _list_of(_text),
    "compile_steps": _list_of(_whole),
    "compilation": lambda value: value == {} or _COMPILATION(value),
    "target_profilers": _list_of(_dict_of(_of(str, int))),
}
ARTIFACT_KEYS = ("backend", "path", "viewer", "open_command")
TARGET = {"command": _text}
MODEL = {"unstable": _of(bool), "cv": _number, "timing_passes": _list_of(_dict_of(_anything))}


def _refuse(run_dir: Path, field: str, value: Any) -> UsageError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return UsageError(f"{run_dir}/meta.json: {field} is not what profile-all writes "
                      f"({shown}): a damaged or crafted run folder")


def _fields(run_dir: Path, where: str, record: dict[str, Any],
            checks: dict[str, Check]) -> None:
    for key, check in checks.items():
        if key in record and not check(record[key]):
            raise _refuse(run_dir, f"{where}{key}", record[key])


def inside(run_dir: Path, relative: str) -> Path:
    """`run_dir / relative`, which must stay inside the run folder (no absolute path, no
    `..` out of it, no link leading out)."""
    candidate = (run_dir / relative).resolve()
    root = run_dir.resolve()
    if Path(relative).is_absolute() or not candidate.is_relative_to(root):
        raise UsageError(f"{run_dir}/meta.json names a file outside the run folder "
                         f"({relative!r}): refused")
    return candidate


def check_meta(meta: dict[str, Any], run_dir: Path) -> None:
    """Every field a view or renderer reads has the type profile-all writes; every native
    file named lies inside the run folder."""
    _fields(run_dir, "", meta, TOP)
    _fields(run_dir, "target.", meta.get("target", {}), TARGET)
    _fields(run_dir, "model.", meta.get("model", {}), MODEL)
    for number, summary in enumerate(meta.get("passes", [])):
        _fields(run_dir, f"passes[{number}].", summary, PASS)
    for number, artifact in enumerate(meta.get("artifacts", [])):
        missing = [key for key in ARTIFACT_KEYS if key not in artifact]
        if missing:
            raise _refuse(run_dir, f"artifacts[{number}]", artifact)
        inside(run_dir, artifact["path"])


def check_frame(frame: pd.DataFrame, run_dir: Path, name: str, numeric: list[str],
                whole: list[str]) -> pd.DataFrame:
    """The table's number columns hold numbers and the rest text."""
    for column in numeric + whole:
        if not pd.api.types.is_numeric_dtype(frame[column]) or \
                pd.api.types.is_bool_dtype(frame[column]):
            raise UsageError(f"{run_dir}/{name}: column {column!r} holds "
                             f"{frame[column].dtype}, not numbers: a damaged or crafted run "
                             "folder")
    for column in whole:
        if frame[column].isna().any() or (frame[column] % 1 != 0).any():
            raise UsageError(f"{run_dir}/{name}: column {column!r} holds other than whole "
                             "numbers: a damaged or crafted run folder")
    for column in frame.columns.difference(numeric + whole):
        if not frame[column].map(lambda value: isinstance(value, str)).all():
            raise UsageError(f"{run_dir}/{name}: column {column!r} holds other than text: "
                             "a damaged or crafted run folder")
    return frame.astype({column: "int64" for column in whole})
