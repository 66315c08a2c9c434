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

#: what runs while modules are imported, not in the steps: module bodies (`<module>`) of
#: files other than the script, and the standard library's class factories that module
#: bodies call (namedtuple, dataclass: 27.8% and 13.9% of a HuggingFace run's self time,
#: spent importing transformers)
_AT_IMPORT = re.compile(r"\(<module>\)$|^<module> \(|collections/__init__\.py:\d+"
                        r"\(namedtuple\)|/dataclasses\.py:\d+\(|^\w+ \(dataclasses\.py\)")

#: the function whose cumulative time is all importing, once (cProfile counts a recursive
#: function's outermost calls)
_ALL_IMPORTS = re.compile(r"_find_and_load\b")


def without_imports(rows: pd.DataFrame, script: str = "") -> pd.DataFrame:
    """`rows` (function rows) without the import machinery's, nor what runs at import time
    (the body of `script`, the user's own, stays)."""
    name = rows["name"]
    own = name.str.contains(re.escape(script)) if script else \
        pd.Series(False, index=rows.index)
    importing = name.str.contains(IMPORTING) | (name.str.contains(_AT_IMPORT) & ~own)
    return rows[~importing] if importing.any() else rows


def import_time(functions: pd.DataFrame) -> tuple[float, float, str]:
    """(seconds spent importing, the whole run as the same profile saw it, its backend)
    from function rows' cumulative times; (0, 0, "") when unseen. One profile's both: a
    tracer's pass runs slower than the clean one (2.97 s of imports 'of' a 2.83 s run)."""
    cumulative = functions[functions["metric"] == "cumulative_time"]
    loads = cumulative[cumulative["name"].str.contains(_ALL_IMPORTS)]
    if loads.empty:
        return 0.0, 0.0, ""
    backend = str(loads["backend"].iloc[0])
    own = cumulative[cumulative["backend"] == backend]
    return (float(loads[loads["backend"] == backend]["value"].max()),
            float(own["value"].max()), backend)


def script_name(target: dict) -> str:
    """The target script's file name, as function names hold it ('' for a model)."""
    return str(target.get("path") or "").rpartition("/")[2]
