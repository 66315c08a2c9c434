"""How the records of meta.json (run_record, pass_record) are read and written: each
field declares, beside its type, its key in the JSON and the check its value must pass
when read from a run folder.

A run folder read from disk is data, maybe someone else's: a value that is not what
profile-all writes is one line (UsageError) naming the field, never a traceback. Keys a
record does not know (a newer profile-all's) are kept as they came and written back."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profile_all.errors import UsageError

Check = Callable[[Any], bool]


def of(*types: type) -> Check:
    return lambda value: isinstance(value, types) and not (
        isinstance(value, bool) and bool not in types)


def optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


def list_of(check: Check) -> Check:
    return lambda value: isinstance(value, list) and all(check(item) for item in value)


def dict_of(check: Check) -> Check:
    return lambda value: isinstance(value, dict) and all(
        isinstance(key, str) and check(item) for key, item in value.items())


def with_keys(checks: dict[str, Check]) -> Check:
    """A dict with every one of `checks`' keys, each as its check says."""
    return lambda value: isinstance(value, dict) and all(
        key in value and check(value[key]) for key, check in checks.items())


def anything(value: Any) -> bool:
    return True


text, whole, numeric, flag = of(str), of(int), of(int, float), of(bool)


def counted(value: Any) -> bool:
    """A whole number of things (steps, iterations): never below 0."""
    return whole(value) and value >= 0


def stored(check: Check, *, key: str = "", inner: dict[str, Check] | None = None,
           each: Any = None, only_some: bool = False, required: bool = False
           ) -> dict[str, Any]:
    """The metadata of a dataclass field of a record of meta.json: held there under `key`
    (the field's name when empty), refused on load unless `check` passes; `inner`: checks
    of some keys of a dict (`target.command`); `each`: the record class of a list's items;
    `only_some`: written only when it holds other than its default (what some runs have:
    a model's, a distributed run's); `required`: every folder profile-all wrote has it (a
    field without a default must be in the record too)."""
    return {"check": check, "key": key, "inner": inner or {}, "each": each,
            "only_some": only_some, "required": required}


def refuse(run_dir: Path, field: str, value: Any) -> UsageError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return UsageError(f"{run_dir}/meta.json: {field} is not what profile-all writes "
                      f"({shown}): a damaged or crafted run folder")


def _stored_fields(cls: Any) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if "check" in f.metadata]


def _key(field: dataclasses.Field) -> str:
    return field.metadata["key"] or field.name


def _default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def read(cls: Any, data: dict[str, Any], run_dir: Path,
         where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the keyword arguments of the record class `cls` from `data`, each value checked;
    the keys of `data` that it does not know, as they came). `where`: the record's place
    in meta.json (`passes[0].`), for the messages; a record without a key it must have is
    refused whole."""
    known: dict[str, Any] = {}
    for field in _stored_fields(cls):
        key = _key(field)
        if key in data:
            known[field.name] = _value(field, data[key], run_dir, where + key)
        elif field.metadata["required"] or _default(field) is dataclasses.MISSING:
            raise UsageError(f"{run_dir}/meta.json: {where}{key} is missing, which every run "
                             "folder of profile-all has: a damaged or crafted run folder")
    keys = {_key(field) for field in _stored_fields(cls)}
    return known, {key: value for key, value in data.items() if key not in keys}


def _value(field: dataclasses.Field, value: Any, run_dir: Path, where: str) -> Any:
    if not field.metadata["check"](value):
        raise refuse(run_dir, where, value)
    for key, check in field.metadata["inner"].items():
        if key in value and not check(value[key]):
            raise refuse(run_dir, f"{where}.{key}", value[key])
    each = field.metadata["each"]
    if each is None:
        return value
    return [each.from_json(item, run_dir, f"{where}[{number}].")
            for number, item in enumerate(value)]


def written(record: Any, extra: dict[str, Any]) -> dict[str, Any]:
    """The record as meta.json holds it: each field under its key (those of some runs
    only where they hold something), then the keys it was read with and did not know."""
    said: dict[str, Any] = {}
    for field in _stored_fields(record):
        value = getattr(record, field.name)
        if field.metadata["only_some"] and value == _default(field):
            continue
        if field.metadata["each"] is not None:
            value = [item.to_json() for item in value]
        said[_key(field)] = value
    return {**said, **{key: value for key, value in extra.items() if key not in said}}
