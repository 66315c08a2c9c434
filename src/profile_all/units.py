"""Numbers as display text: times, counts, bytes, changes, rates. Empty for a missing value."""

from __future__ import annotations

import re
from typing import Any


def _missing(value: Any) -> bool:
    """None, NaN (float or numpy), NaT, or pandas' NA: without importing pandas, which the
    run's progress lines would otherwise import before the fork server starts."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and NaT are unequal to themselves
    except TypeError:  # pandas.NA is neither equal nor unequal
        return True


def _scaled(value: Any, units: tuple[tuple[str, float], ...], smallest: str,
            scale: float, digits: str) -> str:
    """`value` in the largest of `units` it reaches (3 significant digits), else in the
    `smallest` unit (`value / scale`, formatted with `digits`)."""
    if _missing(value):
        return ""
    rounded = float(f"{value:.3g}")  # the unit of the shown value: 999.96 µs is 1 ms
    for unit, size_of_unit in units:
        if abs(rounded) >= size_of_unit:
            return _digits(value / size_of_unit, ".3g") + f" {unit}"
    return _digits(value / scale, digits) + f" {smallest}"


def _digits(value: float, digits: str) -> str:
    """`value` formatted with `digits`, never in exponent form (`1,234` s, not `1.23e+03`)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:{digits}}"


def seconds(value: Any) -> str:
    return _scaled(value, (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)), "ns", 1e-9, ".3g")


def count(value: Any) -> str:
    return "" if _missing(value) else f"{int(value):,}"


def counted(number: int, one: str, many: str = "") -> str:
    """`1 more row`, `3 more rows`, `2 processes`: the number and its noun."""
    return f"{number:,} {one if number == 1 else many or one + 's'}"


def change(value: Any) -> str:
    return "" if _missing(value) else f"{value:+.1%}"


def share(value: Any) -> str:
    return "" if _missing(value) else f"{value:.1%}"


def size(value: Any) -> str:
    """Bytes, in binary units."""
    return _scaled(value, (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)), "B", 1, ".0f")


_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: Any) -> str:
    """A count with an SI prefix and three figures: `52.6 M`, `655 k`, `12`."""
    if _missing(value):
        return ""
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}"
    return f"{value:.3g}"


def bandwidth(value: Any) -> str:
    return "" if _missing(value) else f"{value / 1e9:,.4g} GB/s"


def rate(value: Any) -> str:
    return "" if _missing(value) else f"{value:,.1f} /s"


def by_unit(value: Any, unit: str) -> str:
    """A value in the report's `unit` column's terms."""
    if unit == "s":
        return seconds(value)
    if unit == "FLOP/s":
        return "" if _missing(value) else f"{value / 1e9:.3g} GFLOP/s"
    if unit == "ratio":
        return share(value)
    if unit == "1/s":
        return rate(value)
    return count(value)


def overhead(point: Any, low: Any, high: Any, verdict: Any) -> str:
    """`1.32x (1.25-1.40)`; an interval holding 1 is `noise`, and one below 1 is never
    shown as a speed-up (`noise, <1x`)."""
    if verdict == "reference":
        return "reference"
    if _missing(point):
        return ""
    if _missing(low):
        return f"{point:.2f}x (one sample each: untested)"
    interval = f"{low:.2f}-{high:.2f}"
    if verdict == "above noise":
        return f"{point:.2f}x ({interval})"
    if verdict == "within noise":
        return f"noise ({interval})"
    return f"noise, <1x ({interval})"


#: where installed packages and the standard library live, up to the path people name
_INSTALLED = (re.compile(r"^[^:(]*?/(?:site|dist)-packages/"),
              re.compile(r"^[^:(]*?/lib/python3\.\d+/"))


def code_path(name: str, cwd: str = "") -> str:
    """A function's `file:line(name)` with its file as people name it: a package's path
    inside site-packages (`torch/nn/modules/linear.py:130(forward)`), the standard
    library's inside it, a file under the run's folder `cwd` relative to it. The tables
    show this; the data keeps the whole path. Cut to fit, a whole path lost its file name."""
    for installed in _INSTALLED:
        short = installed.sub("", name, count=1)
        if short != name:
            return short
    folder = cwd.rstrip("/") + "/"
    return name[len(folder):] if cwd and name.startswith(folder) else name
