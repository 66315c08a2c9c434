"""Where a function begins: the line that names it as cProfile does.

A sampling profiler (py-spy) reports each frame at the line it was executing; cProfile
names a function by the first line of its code object (`file:first_line(name)`: the
first decorator's line for a decorated function). So that the two name one function
alike, a file's code objects are made again, as the interpreter makes them, and the
innermost one named `name` whose lines hold `line` gives the first line.

The code objects come from the interpreter's own cache (`__pycache__`) for a file this
process has imported (a pass that sampled its target has them all: a fresh cache is read
in under a millisecond), else from compiling the source (16 ms for torch's module.py;
compiling runs nothing of it); a frozen module's from the interpreter. A file that is
missing, too large or not Python gives None.
"""

from __future__ import annotations

import _imp
import functools
import importlib.util
import marshal
import sys
import types
from pathlib import Path

#: larger sources are not compiled (a generated file of megabytes costs seconds)
MAX_SOURCE_BYTES = 4 * 2**20
#: the source bytes the names of one profile compile in all (about 1 s of compiling a MB
#: here): `new_budget` at each profile
COMPILE_BUDGET = 16 * 2**20
_compiled_bytes = 0
_FROZEN = "<frozen "
#: the import system's modules are frozen under other names than their files say
_FROZEN_ALIASES = {"importlib._bootstrap": "_frozen_importlib",
                   "importlib._bootstrap_external": "_frozen_importlib_external"}


class _OverBudget(Exception):
    """A source left uncompiled for the budget: no answer of the file's to keep."""


def new_budget() -> None:
    """The names of a new profile: its sources may compile COMPILE_BUDGET bytes again. A
    process that reads several profiles (a notebook's, the API's, a test's) once spent the
    budget for good on the first ones: every function of the next was named `?`."""
    global _compiled_bytes
    _compiled_bytes = 0


def first_line(filename: str, name: str, line: int) -> int | None:
    """The first line of the code object `name` (its last dotted part: py-spy gives
    qualified names) that holds `line` in `filename`; 1 for `<module>`; None when the
    source cannot tell."""
    short = name.rsplit(".", 1)[-1]
    if short == "<module>":
        return 1
    try:
        spans = _spans(filename)
    except _OverBudget:  # not kept: a later profile's budget may compile it
        return None
    held = [start for start, end in (spans or {}).get(short, ()) if start <= line <= end]
    return max(held) if held else None  # the innermost: the latest start


@functools.lru_cache(maxsize=4096)
def _spans(filename: str) -> dict[str, list[tuple[int, int]]] | None:
    """{code object name: [(first line, last line), ...]} of every code object of a file."""
    code = _frozen(filename) if filename.startswith(_FROZEN) else (
        _cached(filename) or _compiled(filename))
    if code is None:
        return None
    spans: dict[str, list[tuple[int, int]]] = {}
    pending = [code]
    while pending:
        one = pending.pop()
        lines = [number for _start, _end, number in one.co_lines() if number is not None]
        spans.setdefault(one.co_name, []).append(
            (one.co_firstlineno, max(lines, default=one.co_firstlineno)))
        pending += [const for const in one.co_consts if isinstance(const, types.CodeType)]
    return spans


def _frozen(filename: str) -> types.CodeType | None:
    name = filename.removeprefix(_FROZEN).removesuffix(">")
    name = _FROZEN_ALIASES.get(name, name)
    try:
        return _imp.get_frozen_object(name) if _imp.is_frozen(name) else None
    except (ImportError, ValueError):
        return None


_imported: tuple[int, dict[str, str]] = (-1, {})


def _imported_files() -> dict[str, str]:
    """{source file: its cached bytecode} of the modules this process has imported, made
    again only when that number changed (once a file missed, 100,000 frames of missing
    files took 37 s)."""
    global _imported
    if _imported[0] != len(sys.modules):
        _imported = (len(sys.modules), {
            module.__file__: module.__cached__ for module in list(sys.modules.values())
            if isinstance(getattr(module, "__file__", None), str)
            and isinstance(getattr(module, "__cached__", None), str)})
    return _imported[1]


def _cached(filename: str) -> types.CodeType | None:
    """The code of an imported module's file from the interpreter's cache, where the cache
    is fresh (timestamp-checked, as the import system checks it)."""
    cached = _imported_files().get(filename)
    if cached is None:
        return None
    try:
        data, source = Path(cached).read_bytes(), Path(filename).stat()
    except OSError:
        return None
    flags = int.from_bytes(data[4:8], "little")
    fresh = (data[:4] == importlib.util.MAGIC_NUMBER and flags == 0
             and int.from_bytes(data[8:12], "little") == int(source.st_mtime) & 0xFFFFFFFF
             and int.from_bytes(data[12:16], "little") == source.st_size & 0xFFFFFFFF)
    if not fresh:
        return None
    try:
        code = marshal.loads(data[16:])
    except (EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, types.CodeType) else None


def _compiled(filename: str) -> types.CodeType | None:
    """The file's code, compiled from its source while the profile's names have compiled
    less than COMPILE_BUDGET bytes of sources (2,000 sources of site-packages named by a
    file's frames took minutes): past it, _OverBudget (the first line is then unknown,
    `?`)."""
    global _compiled_bytes
    path = Path(filename)
    try:
        size = path.stat().st_size if path.is_file() else None
        if size is None or size > MAX_SOURCE_BYTES:
            return None
        if _compiled_bytes + size > COMPILE_BUDGET:
            raise _OverBudget(filename)
        _compiled_bytes += size
        return compile(path.read_bytes(), filename, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
