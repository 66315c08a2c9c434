"""`Report.compare`'s table for display (the terminal, markdown, the comparison's page):
figures in their units, changes in percent, a change too large to mean a number said so."""

from __future__ import annotations

from typing import Any

import pandas as pd

from profile_all import units as fmt
from profile_all.rows import UNIT_OF_METRIC, region_paths


def _measure(metric: str, value: Any) -> str:
    """A compared value in its metric's unit (`wall_time median`: seconds)."""
    if value is None or pd.isna(value):
        return ""
    unit = UNIT_OF_METRIC.get(metric.split(" ")[0], "B")
    if unit == "s":
        return fmt.seconds(value)
    if unit == "FLOP":
        return f"{fmt.count(value)} FLOP"
    return fmt.count(value) if unit == "count" else fmt.size(value)


#: a change beyond this many times (+10,000%) is shown as past it, not in 80 digits: from
#: two repeats a side an interval can reach +8.85e79%, which says only that it is unbounded
_FARTHEST = 100.0


def _change(value: float, beyond: str = f"> +{_FARTHEST:.0%}") -> str:
    """A change in percent; `beyond` past _FARTHEST (a change is never under -100%)."""
    return beyond if not pd.isna(value) and value > _FARTHEST else fmt.change(value)


def _with_interval(change: float, low: float, high: float) -> str:
    """`+3.9% (-15..+27%)`: the change and its 95% interval in whole percent, one column,
    so that a terminal of 80 columns keeps both beside the verdict."""
    if pd.isna(low):
        return _change(change)
    top = "unbounded" if high > _FARTHEST else f"{high * 100:+.0f}%"
    return f"{_change(change)} ({low * 100:+.0f}..{top})"


#: the compared kinds timed per call (their measure is the median wall time)
_TIMED_KINDS = ("region", "step", "model")


def _verdict_parts(verdict: str) -> tuple[str, str]:
    """(the verdict's words, why: what its parentheses said): `inconclusive (the interval
    reaches 25% or more: ...)` is a word and a reason, and a column of 71 characters with
    a figure in each was the first a narrow terminal left out."""
    word, _, why = verdict.partition(" (")
    return word, why[:-1] if why.endswith(")") else why


def compare_table(table: pd.DataFrame) -> pd.DataFrame:
    """`Report.compare`'s table for display: the change and its 95% interval in percent.
    What a narrow terminal keeps comes first: the name, A, B, the change with its interval
    and the verdict (its reason, the last column); a total's name says its measure
    (`aten::mm: calls`), which the timed rows share."""
    verdicts = [_verdict_parts(verdict) for verdict in table["verdict"]]
    names = [fmt.code_path(name, table.attrs.get("cwd", "")) if kind == "function" else name
             for kind, name in zip(table["kind"], region_paths(table["parent"], table["name"]),
                                   strict=True)]
    return pd.DataFrame({
        "name": [name if kind in _TIMED_KINDS else f"{name}: {metric}" for name, kind, metric
                 in zip(names, table["kind"], table["metric"], strict=True)],
        "A": [_measure(m, v) for m, v in zip(table["metric"], table["a"], strict=True)],
        "B": [_measure(m, v) for m, v in zip(table["metric"], table["b"], strict=True)],
        "change (95% interval)": [_with_interval(change, low, high) for change, low, high
                                  in zip(table["change"], table["ci_low"], table["ci_high"],
                                         strict=True)],
        "verdict": [word for word, _why in verdicts],
        "kind": table["kind"],
        "measure": table["backend"] + " " + table["metric"],
        # no basis anywhere is a column of floats (NaN), which pandas 4 will not fill with ""
        "rests on": [basis if isinstance(basis, str) else "" for basis in table["basis"]],
        "why": [why for _word, why in verdicts],
    })
