"""Impossible values in other tools' files: which values are impossible, and what is done
with the events that hold them.

A value is impossible when it is not a finite number (text, null, NaN, infinity), when it
is negative where it cannot be (a duration, a count, a size), or when it is absurd: a
duration over MAX_SECONDS (about a year), or an event that starts or ends more than
MAX_SECONDS from the median start of its file's events.

The events that hold one (trace events, CSV rows, sqlite rows, memory samples) are left out
of every total, counted, and said as a doubt that names the file, one of them and its
field (the run is then `partial`); a file where more than MAX_IMPOSSIBLE_SHARE of the
events hold one is refused in one line: it is broken, not a file with a stray value. The
checks are vectorised: a Python loop runs only over the values of a file that has text or
null where numbers belong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from profile_all.readers import IngestError

#: the longest duration, and the farthest an event may lie from its file's median start,
#: that a profile can hold: about a year (370 days), in seconds
MAX_SECONDS = 3.2e7
#: over this share of a file's events holding impossible values, the file is refused
MAX_IMPOSSIBLE_SHARE = 0.5

DURATION, TIME, COUNT = "duration", "time", "count"


class ImpossibleValues(IngestError):
    """A file refused for its impossible values: a file of its kind, but a broken one."""


@dataclass
class Field:
    """One numeric field of a table of events: `values` in SI units (seconds for times and
    durations), NaN where the file holds no number; `raw`, what the file holds, in `unit`,
    for the message (`text`: as text, a CSV's fields); `empty`: where the field is empty
    and may be (not counted)."""

    name: str
    kind: str
    values: np.ndarray
    raw: Sequence[Any]
    unit: str = ""
    empty: np.ndarray | None = None
    text: bool = False


def numbers(values: Sequence[Any]) -> np.ndarray:
    """Floats, NaN for any value that is not a number (text, null, a list, a bool)."""
    if not len(values):
        return np.empty(0)
    try:
        array = np.asarray(values)
        if array.ndim == 1 and array.dtype.kind in "iuf":
            return array.astype(float)
    except (ValueError, TypeError, OverflowError):
        pass
    # some value is not a JSON number: only in a broken file, where a loop is affordable
    return np.array([float(v) if type(v) in (int, float) and not _too_large(v) else math.nan
                     for v in values])


def _too_large(value: int | float) -> bool:
    return isinstance(value, int) and abs(value) > 1e308


def _is_number(value: Any) -> bool:
    """A number as JSON, marshal or sqlite hold one (a bool is not)."""
    return type(value) in (int, float) or isinstance(value, np.number)


def _text_number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _why_not_finite(raw: Any, text: bool) -> str:
    """Why a value that gave no finite number gave none."""
    if text:
        return "empty" if not raw.strip() else \
            "not a number" if _text_number(raw) is None else "not finite"
    return "not finite" if _is_number(raw) else "not a number"


def _problems(item: Field, centre: float | None) -> list[tuple[np.ndarray, str]]:
    """(mask, reason) of each way a value of `item` can be impossible, in order."""
    values = item.values
    finite = np.isfinite(values)
    missing = ~finite if item.empty is None else ~finite & ~item.empty
    masks = [(missing, "")]  # the reason is told from the raw value
    if item.kind in (DURATION, COUNT):
        masks.append((finite & (values < 0), "negative"))
    if item.kind == DURATION:
        masks.append((finite & (values > MAX_SECONDS),
                      f"over {MAX_SECONDS:g} s, about a year"))
    if item.kind == TIME and centre is not None:
        masks.append((finite & (np.abs(values - centre) > MAX_SECONDS),
                      f"more than {MAX_SECONDS:g} s (about a year) from the median start of "
                      "the file's events"))
    return masks


def shown(raw: Any, unit: str, text: bool = False) -> str:
    """A value as the file holds it: a number with its unit, text quoted (a CSV's text
    field unquoted when it is a finite number), null."""
    number = _text_number(raw) if text else raw
    if number is None:
        return "null" if raw is None else _cut(repr(raw))
    if not _is_number(number):
        return _cut(repr(raw))
    written = raw if text else f"{float(number):g}" if isinstance(number, float) else str(number)
    return f"{written} {unit}".rstrip() if math.isfinite(float(number)) else written


def impossible(fields: list[Field], centre: float | None = None
               ) -> tuple[np.ndarray, tuple[int, str] | None]:
    """(which events hold an impossible value, (the position of the first, what is wrong
    with it: `dur = -50 µs: negative`) or None): `fields` of one table, `centre` the
    median start (s) of the file's events, for the TIME fields."""
    count = len(fields[0].values) if fields else 0
    bad = np.zeros(count, dtype=bool)
    first: tuple[int, str] | None = None
    for item in fields:
        for mask, reason in _problems(item, centre):
            if not mask.any():
                continue
            bad |= mask
            position = int(np.argmax(mask))
            if first is None or position < first[0]:
                raw = item.raw[position]
                first = (position, f"{item.name} = {shown(raw, item.unit, item.text)}: "
                                   f"{reason or _why_not_finite(raw, item.text)}")
    return bad, first


def centre_of(starts: Sequence[np.ndarray]) -> float | None:
    """The median of the finite starts (s), None when there is none."""
    finite = [s[np.isfinite(s)] for s in starts]
    joined = np.concatenate(finite) if finite else np.empty(0)
    return float(np.median(joined)) if len(joined) else None


@dataclass
class Tally:
    """A file's impossible events over its tables: how many of how many, one of them said
    (`event 2 'aten::relu' (operator), dur = -50 µs: negative`)."""

    total: int = 0
    bad: int = 0
    example: str = ""

    def add(self, fields: list[Field], centre: float | None,
            describe: Callable[[int], str]) -> np.ndarray:
        """The events of a table to keep; `describe(position)` names one of its events."""
        bad, first = impossible(fields, centre)
        self.total += len(bad)
        self.bad += int(bad.sum())
        if first is not None and not self.example:
            self.example = f"{describe(first[0])}, {first[1]}"
        return ~bad

    def settled(self, path: Any, things: str = "events") -> list[str]:
        """The doubt to say (none when every event is possible); ImpossibleValues, one line,
        when more than MAX_IMPOSSIBLE_SHARE of them are impossible."""
        if not self.bad:
            return []
        said = f"{self.bad:,} of {self.total:,} {things} hold an impossible value"
        if self.bad > MAX_IMPOSSIBLE_SHARE * self.total:
            raise ImpossibleValues(f"{path}: {said}, over {MAX_IMPOSSIBLE_SHARE:.0%}: a broken "
                                   f"file, refused; e.g. {self.example}")
        return [f"{path}: {said} and are left out of every total; e.g. {self.example}"]


#: the characters of a value a message shows (a field may hold a megabyte)
SHOWN_CHARS = 80


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else \
        f"{text[:SHOWN_CHARS // 2]}...({len(text):,} characters)...{text[-SHOWN_CHARS // 4:]}"
