"""Line-by-line memory of named functions, with memory_profiler's LineProfiler.

memory_profiler wants the function object up front (`add_function`), but the functions a
user names are often in the script itself, which does not exist as a module until it
runs. So a global trace function looks at each new frame's code once: a code object of a
wanted `module:function` (the script's module is `__main__`, or its file's stem) is
added to the LineProfiler's code map when first called, and only frames of mapped code
are traced line by line; every other frame runs untraced.

Functions decorated with memory_profiler's `@profile` are mapped too: while the pass runs,
`memory_profiler.profile` registers the function here instead of printing its own table.
"""

from __future__ import annotations

import linecache
import sys
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from memory_profiler import LineProfiler

from profile_all.errors import UsageError

MIB = 2**20


def parse_specs(specs: list[str]) -> list[tuple[str, str]]:
    parsed = []
    for spec in specs:
        module, _, function = spec.partition(":")
        if not module or not function:
            raise UsageError(f"--memory-lines wants module:function, got {spec!r}")
        parsed.append((module, function))
    return parsed


class LineMemory:
    def __init__(self, specs: list[tuple[str, str]], script_stem: str) -> None:
        self._wanted = set(specs)
        self._script_stem = script_stem
        self._profiler = LineProfiler(backend="psutil")
        self._profiler._original_trace_function = None
        self._seen: dict[CodeType, bool] = {}
        self._saved_profile: Any = None

    def _matches(self, frame: FrameType) -> bool:
        code = frame.f_code
        module = frame.f_globals.get("__name__", "")
        if module == "__main__":
            module = self._script_stem
        name = getattr(code, "co_qualname", code.co_name)
        return (module, name) in self._wanted or (module, code.co_name) in self._wanted

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        mapped = self._seen.get(code)
        if mapped is None:
            mapped = self._seen[code] = self._matches(frame)
            if mapped:
                self._profiler.code_map.add(code)
        if mapped or code in self._profiler.code_map:
            return self._profiler.trace_memory_usage(frame, event, arg)
        return None

    def _register(self, func: Any = None, **_options: Any) -> Any:
        """Stands in for memory_profiler.profile: `@profile` and `@profile(precision=2)`."""
        if func is None:
            return self._register
        self._profiler.code_map.add(func.__code__)
        return func

    def start(self) -> None:
        import memory_profiler

        self._saved_profile = memory_profiler.profile
        memory_profiler.profile = self._register
        sys.settrace(self._trace)

    def stop(self) -> None:
        import memory_profiler

        sys.settrace(None)
        memory_profiler.profile = self._saved_profile

    def rows(self) -> list[tuple[str, str, str, float, str, str]]:
        """(name `file:line`, parent `file:first_line(function)`, metric, value, stat, unit)."""
        found = []
        for filename, code, _lines in self._profiler.code_map._toplevel:
            measures = self._profiler.code_map[code]
            function = f"{Path(filename).name}:{code.co_firstlineno}({code.co_name})"
            for lineno, measured in sorted(measures.items()):
                if measured is None:
                    continue
                increment, usage, occurrences = measured
                source = linecache.getline(filename, lineno).strip()
                name = f"{Path(filename).name}:{lineno} {source}"
                found += [(name, function, "rss", usage * MIB, "max", "B"),
                          (name, function, "calls", occurrences, "total", "count"),
                          (name, function, "named", 1, "total", "count")]
                if lineno != code.co_firstlineno:  # the def line's is the whole RSS at entry
                    found.append((name, function, "rss_increment", increment * MIB, "total",
                                  "B"))
        return found
