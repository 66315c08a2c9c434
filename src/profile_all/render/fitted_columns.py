"""A table's columns fitted to a terminal's width: figures never cut or wrapped, the columns
that do not fit left out and named, names cut in the middle.

Plain Python over the cells' texts: a table shown holds a few rows, and pandas' cost a call
(a Series for every column's test) was a fifth of drawing a report.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from profile_all import units as fmt

#: a name column is never cut below this
NAME_MIN = 16
_DIGIT = re.compile(r"\d")


@dataclass
class Fitted:
    headers: list[str]  # wrapped between words to their column's width
    rows: list[list[str]]
    dropped: list[str]  # the columns left out, and the rows that had figures only there


def elide(text: str, width: int) -> str:
    """`text` cut in the middle to `width` characters (both ends of a name say most)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[:(keep + 1) // 2] + "…" + text[len(text) - keep // 2:]


def fitted(headers: list[str], rows: list[list[str]], width: int | None) -> Fitted:
    """Empty columns dropped (never the first), then the rightmost ones until the rest fit
    `width`, text columns (names, errors) counted at NAME_MIN; what is left is shared by
    the text columns, cut."""
    headers, columns = _not_empty(headers, rows)
    if not width:
        return Fitted(headers, _rows(columns), [])
    needed = [max([len(value) for value in column] + [len(word) for word in header.split()]
                  + [1]) for header, column in zip(headers, columns, strict=True)]
    text = [need > NAME_MIN and (at == 0 or not _figures(columns[at]))
            for at, need in enumerate(needed)]

    def total(count: int) -> int:  # borders and padding: 3 a column, and 1
        return sum(NAME_MIN if text[at] else needed[at] for at in range(count)) + 3 * count + 1

    count, dropped = len(headers), []
    while count > 2 and total(count) > width:
        count -= 1
        dropped.append(" ".join(headers[count].split()))
    columns = _without_blank_rows(columns[:count], dropped)
    long = [at for at in range(count) if text[at]]
    if long:
        _cut(columns, long, NAME_MIN + (width - total(count)) // len(long))
    return Fitted([_header(headers[at], needed[at]) for at in range(count)], _rows(columns),
                  dropped)


def _not_empty(headers: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """The headers and columns (lists of cells) of the columns with a cell not blank, and
    the first (the names) whatever it holds."""
    columns = [list(column) for column in zip(*rows, strict=True)] if rows else \
        [[] for _ in headers]
    kept = [at for at, column in enumerate(columns)
            if at == 0 or any(value.strip() for value in column)]
    return [headers[at] for at in kept], [columns[at] for at in kept]


def _rows(columns: list[list[str]]) -> list[list[str]]:
    return [list(row) for row in zip(*columns, strict=True)]


def _cut(columns: list[list[str]], long: list[int], room: int) -> None:
    """The text columns at `long` cut to `room`: the first (a name) in the middle, so that
    both its ends show; the others at their end."""
    for position, at in enumerate(long):
        columns[at] = _elided_apart(columns[at], room) if position == 0 else \
            [value if len(value) <= room else value[:room - 1] + "…" for value in columns[at]]


def _figures(values: list[str]) -> bool:
    """Mostly figures (`1.2 ms`, `2.44x (1.66-3.00)`, `34,406,400 (measured)`): never cut."""
    shown = [value for value in values if value.strip()]
    return bool(shown) and sum(bool(_DIGIT.search(value)) for value in shown) >= len(shown) / 2


def _without_blank_rows(columns: list[list[str]], dropped: list[str]) -> list[list[str]]:
    """Where columns were `dropped`, the rows whose figures were all in them (named in
    `dropped` too): a row of a name and nothing else says nothing."""
    figures = [column for column in columns[1:] if _figures(column)]  # not names, scopes
    if not dropped or not figures:
        return columns
    blank = [all(not column[row].strip() for column in figures)
             for row in range(len(columns[0]))]
    if not any(blank) or all(blank):
        return columns
    dropped.append(f"{fmt.counted(sum(blank), 'row')} with figures only there")
    return [[value for value, gone in zip(column, blank, strict=True) if not gone]
            for column in columns]


def _elided_apart(names: list[str], width: int) -> list[str]:
    """Each name cut in the middle to `width`; names that different texts cut to the same
    one (kernels that differ in their middle) are cut elsewhere, keeping more of the start
    or of the end, until they differ, else numbered."""
    cut = [elide(name, width) for name in names]
    keep = width - 1
    groups: dict[str, list[int]] = {}
    for at, shown in enumerate(cut):
        groups.setdefault(shown, []).append(at)
    for where in groups.values():
        originals = [names[at] for at in where]
        distinct = len(set(originals))
        if distinct < 2:
            continue
        for head in sorted(range(1, keep), key=lambda h: abs(h - (keep + 1) // 2)):
            tried = [name if len(name) <= width else
                     name[:head] + "…" + name[len(name) - (keep - head):] for name in originals]
            if len(set(tried)) == distinct:
                break
        else:
            tried = _where_they_differ(originals, width)
        for at, shown in zip(where, tried, strict=True):
            cut[at] = shown
    return cut


def _where_they_differ(names: list[str], width: int) -> list[str]:
    """Names that differ in their middle, as their start and the part where they begin to
    differ (`void at::…AddFunctor<float>…`); numbered where even that is the same."""
    unique = list(dict.fromkeys(names))
    differ_at = next((at for at, chars in enumerate(zip(*unique, strict=False))
                      if len(set(chars)) > 1),
                     min(map(len, unique)))
    head = width // 3
    window = width - head - 2
    start = max(head, differ_at - window // 3)
    shown = [name[:head] + "…" + name[start:start + window] + "…" for name in names]
    if len(set(shown)) == len(unique):
        return shown
    number = {name: n for n, name in enumerate(unique, start=1)}
    return [elide(name, width - 4) + f" [{number[name]}]" for name in names]


def _header(column: str, width: int) -> str:
    """A header wrapped between words to its column's width."""
    return "\n".join(textwrap.wrap(column, max(width, 1), break_long_words=False,
                                   break_on_hyphens=False)) or column
