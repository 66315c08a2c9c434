"""The start-up's machinery apart from the steps: Python's imports (importlib, unmarshalling
code, extension modules, transformers' lazy modules), which a function profile of the whole
run holds beside the steps (`import_utils.fetch__all__` and `marshal.loads` led the
findings of a script that imports transformers)."""

from __future__ import annotations

import re

import pandas as pd

#: import machinery as cProfile and py-spy name its functions
IMPORTING = re.compile(
    r"<frozen importlib\._bootstrap(?:_external)?>|\bmarshal\.loads\b|\b_imp\.\w+|"
    r"builtins\.__import__|importlib/__init__\.py|\bimport_utils\.py|"
    r"\((?:_find_and_load|_load_unlocked|exec_module|get_code|_call_with_frames_removed|"
    r"_handle_fromlist)\)|^(?:_find_and_load|_load_unlocked|exec_module|get_code) \(")

#: the function whose cumulative time is all importing, once (cProfile counts a recursive
#: function's outermost calls)
_ALL_IMPORTS = re.compile(r"_find_and_load\b")


def without_imports(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` (function rows) without the import machinery's."""
    importing = rows["name"].str.contains(IMPORTING)
    return rows[~importing] if importing.any() else rows


def import_time(functions: pd.DataFrame) -> float:
    """Seconds spent importing, from function rows' cumulative times (0 when unseen)."""
    loads = functions[functions["name"].str.contains(_ALL_IMPORTS)
                      & (functions["metric"] == "cumulative_time")]
    return float(loads.groupby("backend")["value"].max().min()) if not loads.empty else 0.0
