"""cProfile/profile output (pstats files) -> rows of scope `function`."""

from __future__ import annotations

import pstats
from pathlib import Path
from typing import Any

from profile_all.readers import IngestError
from profile_all.readers.call_tree import call_rows
from profile_all.rows import row


def function_name(key: tuple[str, int, str]) -> str:
    """`file:line(function)`, and `{built-in method ...}` for C functions, as pstats prints."""
    return pstats.func_std_string(key)


def load_stats(path: Path) -> pstats.Stats:
    try:
        return pstats.Stats(str(path))
    except FileNotFoundError:
        raise IngestError(f"{path}: no such file") from None
    except (ValueError, EOFError, TypeError) as error:
        raise IngestError(
            f"{path}: not a pstats file this Python can read ({error}); pstats files are "
            "marshal data tied to the Python version that wrote them (Python 2's cannot be read)"
        ) from None


def read_pstats(path: Path) -> list[list[Any]]:
    """One row per function and metric: calls, primitive_calls, self_time, cumulative_time;
    and the call tree (scope `call`, see call_tree)."""
    rows = []
    stats = load_stats(path).stats
    for key, (primitive, calls, self_time, cumulative, _callers) in stats.items():
        name = function_name(key)
        rows.append(row("function", name, "calls", calls))
        rows.append(row("function", name, "primitive_calls", primitive))
        rows.append(row("function", name, "self_time", self_time))
        rows.append(row("function", name, "cumulative_time", cumulative))
    return rows + call_rows(stats, function_name)
