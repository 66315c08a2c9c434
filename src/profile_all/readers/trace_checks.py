"""Impossible values in a chrome trace's kept events (plausible: which, and the policy):
`ts` and `dur` (microseconds) of operators, device activities, runtime calls and ranges,
an operator's FLOPs and a copy's bytes. The events that hold one are taken out of the
columns before any analysis sees them; an event is named by its position in the file's
event array (from 0, as `jq '.traceEvents[N]'` finds it) and its name."""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from profile_all.readers import chrome_trace, plausible, trace_bytes
from profile_all.readers.chrome_trace import ChromeTrace
from profile_all.readers.nesting import nest_check, said
from profile_all.readers.plausible import COUNT, DURATION, TIME, Field

#: the timed columns: (attribute, position of ts, of dur, what an event of it is)
_TIMED = (("ops", 2, 3, "operator"), ("device", 3, 4, ""), ("runtime", 2, 3, "runtime call"),
          ("annotations", 2, 3, "range"), ("modules", 2, 3, "module call"))
#: other numbers that reach totals: (attribute, position, field name)
_COUNTS = {"ops": (5, "args.FLOPs"), "device": (6, "args.bytes")}


def _column(events: list[tuple], at: int) -> list:
    return list(map(itemgetter(at), events))


def _fields(events: list[tuple], ts_at: int | None, dur_at: int, scale: float,
            extra: tuple[int, str] | None) -> list[Field]:
    raw_dur = _column(events, dur_at)
    dur = plausible.numbers(raw_dur)
    fields = [Field("dur", DURATION, dur * scale, raw_dur, "µs")]
    if ts_at is not None:
        raw_ts = _column(events, ts_at)
        ts = plausible.numbers(raw_ts)
        end = ts + np.where(np.isfinite(dur), dur, 0.0)
        fields += [Field("ts", TIME, ts * scale, raw_ts, "µs"),
                   Field("ts + dur", TIME, end * scale, end, "µs")]
    if extra is not None:
        raw = _column(events, extra[0])
        fields.append(Field(extra[1], COUNT, plausible.numbers(raw), raw))
    return fields


class _Finder:
    """Where the first complete event with this (name, ts, dur) is in the event array."""

    def __init__(self, wanted: tuple[Any, Any, Any], any_ts: bool) -> None:
        self.wanted, self.any_ts, self.seen, self.position = wanted, any_ts, 0, None

    def add(self, events: list[dict]) -> None:
        for offset, event in enumerate(events if self.position is None else ()):
            ts = self.wanted[1] if self.any_ts else event.get("ts")
            if type(event) is dict and event.get("ph") == "X" and (
                    event.get("name"), ts, event.get("dur")) == self.wanted:
                self.position = self.seen + offset
                break
        self.seen += len(events)


def event_position(path: Path, name: Any, ts: Any, dur: Any, any_ts: bool = False
                   ) -> int | None:
    """The position (from 0) in the trace's event array of its first complete event with
    this name, ts (any, with `any_ts`) and dur, read again chunk by chunk (for a message:
    slow, seldom)."""
    data = trace_bytes.read_bytes(path)
    for attempt in (data, trace_bytes.escape_raw_quotes(data)):
        read = chrome_trace.read_columns(attempt, lambda: _Finder((name, ts, dur), any_ts))
        if read is not None and read[1].position is not None:
            return read[1].position
    return None


def _describer(trace: ChromeTrace, events: list[tuple], ts_at: int | None, dur_at: int,
               what: str) -> Callable[[int], str]:
    def describe(position: int) -> str:
        event = events[position]
        kind = what or event[1]
        ts = event[ts_at] if ts_at is not None else None
        found = event_position(trace.path, event[0], ts, event[dur_at], any_ts=ts_at is None)
        where = f"event {found}" if found is not None else "an event"
        return f"{where} {event[0]!r} ({kind})"

    return describe


def drop_impossible(trace: ChromeTrace) -> list[str]:
    """Leave out of the trace's columns the events with an impossible value; the doubt to
    say of them (none when there is none); IngestError when they are too many."""
    columns, scale = trace.columns, trace.seconds_per_unit
    tally = plausible.Tally()
    fields = {attribute: _fields(getattr(columns, attribute), ts_at, dur_at, scale,
                                 _COUNTS.get(attribute))
              for attribute, ts_at, dur_at, _what in _TIMED}
    centre = plausible.centre_of([table[1].values for table in fields.values()])
    for attribute, ts_at, dur_at, what in _TIMED:
        events = getattr(columns, attribute)
        keep = tally.add(fields[attribute], centre,
                         _describer(trace, events, ts_at, dur_at, what))
        if not keep.all():
            setattr(columns, attribute, list(compress(events, keep)))
    if columns.nameless:  # left out as they were read: a name that is not text
        tally.total += columns.nameless
        tally.bad += columns.nameless
        tally.example = tally.example or "an event whose name is not text (null, a number, "\
            "a list or an object)"
    spans = columns.gpu_annotations
    keep = tally.add(_fields(spans, None, 1, scale, None), centre,
                     _describer(trace, spans, None, 1, "GPU range"))
    if not keep.all():
        columns.gpu_annotations = list(compress(spans, keep))
    return tally.settled(trace.path)


def drop_unnested(trace: ChromeTrace) -> list[str]:
    """Leave out of the trace's annotations those nested deeper than MAX_DEPTH, and those
    that start inside another of their thread and end after it (readers/nesting.py: a
    child longer than its parent, a negative time of the parent's own); the doubts to say
    of them."""
    events = trace.columns.annotations
    if len(events) < 2:
        return []
    starts = np.fromiter((event[2] for event in events), float, len(events))
    ends = starts + np.fromiter((event[3] for event in events), float, len(events))
    deep, unnested = nest_check([event[1] for event in events], starts, ends)
    if (deep | unnested).any():
        trace.columns.annotations = list(compress(events, ~(deep | unnested)))
    count = int(unnested.sum())
    return said(trace.path, int(deep.sum()), "annotation") + ([
        f"{trace.path}: {count:,} annotation{'s' if count > 1 else ''} starting inside "
        "another of the same thread and ending after it left out (not nested: as a child "
        "it was longer than its parent)"] if count else [])


#: the fields that make two events of a kind one event written twice
_SAME_EVENT = {"ops": (0, 1, 2, 3), "device": (0, 1, 2, 3, 4, 5), "runtime": (0, 1, 2, 3, 4),
               "annotations": (0, 1, 2, 3), "modules": (0, 1, 2, 3), "frames": (0, 1, 2, 3)}


def drop_repeated(trace: ChromeTrace) -> list[str]:
    """Leave out of the trace's columns each event that repeats an earlier one (the same
    name, thread or stream, start and duration: a trace joined with itself, or events
    written twice): counted twice, a kernel doubled the GPU time over the device's busy
    time, a step made two; the doubt to say of them."""
    columns, repeated = trace.columns, 0
    for attribute, fields in _SAME_EVENT.items():
        events = getattr(columns, attribute)
        seen: set[tuple] = set()
        keep = []
        for event in events:
            key = tuple(event[at] for at in fields)
            keep.append(key not in seen)
            seen.add(key)
        if not all(keep):
            repeated += keep.count(False)
            setattr(columns, attribute, list(compress(events, keep)))
    if not repeated:
        return []
    return [f"{trace.path}: {repeated:,} event{'s' if repeated > 1 else ''} repeating an "
            "earlier one (the same name, thread or stream, start and duration) left out: "
            "counted once"]


#: categories left out on purpose: the profiler's own span (`Trace`)
_UNREAD_ON_PURPOSE = {"Trace"}


def unread_said(trace: ChromeTrace) -> list[str]:
    """The doubt on complete events of categories no reader reads (another accelerator's
    kernels, CUPTI's profiler ranges): left out, counted by category, never silently."""
    left_out = {category: count for category, count in trace.columns.unread.items()
                if category not in _UNREAD_ON_PURPOSE}
    if not left_out:
        return []
    named = ", ".join(f"{category[:80]} ({count:,})" for category, count in sorted(
        left_out.items(), key=lambda item: -item[1])[:5])
    more = f" and {len(left_out) - 5} more categories" if len(left_out) > 5 else ""
    return [f"{trace.path}: {sum(left_out.values()):,} events of categories profile-all does "
            f"not read are left out of every total: {named}{more}"]
