"""Impossible values in a pstats file (plausible: which). A pstats file holds totals that
depend on each other (a caller's cumulative time holds its callees'), so none can be left
out alone: a file with one is refused, in one line naming the function, its position among
the file's entries (from 0) and the field, as pstats names it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profile_all.readers import plausible
from profile_all.readers.plausible import COUNT, DURATION, Field, ImpossibleValues
from profile_all.readers.pstats_reader import function_name

#: an entry's numbers: (cc, nc, tt, ct), named as pstats names them
ENTRY = (("cc (primitive calls)", COUNT), ("nc (calls)", COUNT),
         ("tt (self time)", DURATION), ("ct (cumulative time)", DURATION))
#: a caller edge's numbers: (nc, cc, tt, ct), its calls in the other order
EDGE = (("nc (calls)", COUNT), ("cc (primitive calls)", COUNT),
        ("tt (self time)", DURATION), ("ct (cumulative time)", DURATION))


def _first_impossible(entries: list[tuple], names: tuple[tuple[str, str], ...]
                      ) -> tuple[int, str] | None:
    """(position, what is wrong) of the first entry with an impossible number, or None."""
    fields = []
    for at, (name, kind) in enumerate(names):
        raw = [entry[at] for entry in entries]
        fields.append(Field(name, kind, plausible.numbers(raw), raw,
                            "s" if kind == DURATION else ""))
    return plausible.impossible(fields)[1]


def check(path: Path, stats: dict[Any, tuple]) -> None:
    """ImpossibleValues, one line, at the first impossible number of a function, else of a
    call (caller edge); nothing when every number is possible."""
    keys = list(stats)
    found = _first_impossible(list(stats.values()), ENTRY)
    if found is not None:
        where = f"function {function_name(keys[found[0]])} (entry {found[0]})"
    else:
        edges = [(callee, caller, edge) for callee, values in stats.items()
                 for caller, edge in values[4].items()]
        found = _first_impossible([edge for *_, edge in edges], EDGE)
        if found is None:
            return
        callee, caller, _ = edges[found[0]]
        where = (f"the calls of {function_name(callee)} (entry {keys.index(callee)}) "
                 f"from {function_name(caller)}")
    raise ImpossibleValues(f"{path}: {where}: {found[1]}; a pstats file's times are totals that "
                      "depend on each other, none can be left out: refused")
