"""cProfile/profile output (pstats files) -> rows of scope `function`.

In a profile that profile-all made (see call_tree.own_frames) the rows hold the user's
code only: the functions the target's `<module>` (a model: the functions profile-all's
code called) reaches, profile-all's and runpy's own frames left out; a function also
called from outside the user's code (by the pass before or after the target) counts
only its calls from within it, and a built-in only those the user's code made itself,
not those of profile-all's hooks. The file keeps everything.
"""

from __future__ import annotations

import marshal
import pstats
from pathlib import Path
from typing import Any

from profile_all.readers import IngestError, limits
from profile_all.readers.call_tree import OwnFrames, call_rows, own_frames
from profile_all.rows import row


def function_name(key: tuple[str, int, str]) -> str:
    """`file:line(function)`, and `{built-in method ...}` for C functions, as pstats prints."""
    return pstats.func_std_string(key)


#: an ingest's peak memory per byte of a pstats file, its report included (a valid 88 MB
#: file of 600,000 functions peaked at 4.0 GiB: 47 bytes a byte)
PEAK_PER_BYTE = 50
#: the characters of function names a pstats file may derive: NAME_CHARS_PER_BYTE a byte
#: of it, and NAME_CHARS_FLOOR. marshal stores a string once however many functions share
#: it, so names are not bounded by the bytes: real profiles derive about 0.5 characters a
#: byte (`import torch, pandas`: 0.53), but 20,000 functions sharing one 20,000-character
#: file name (an 889 KB file) derived 400 MB of them: 34 s, 6 GB and a 2 GB folder
NAME_CHARS_PER_BYTE = 16
NAME_CHARS_FLOOR = 4 << 20
#: an ingest's peak memory per character of those names (each is in 4 rows, the CSV, the
#: page): 32 MB of names peaked at 620 MB, 170 of it the interpreter's baseline
PEAK_PER_NAME_CHAR = 16


def load_stats(path: Path) -> dict[Any, tuple]:
    """The file's entries, as pstats.Stats holds them, read by marshal (which Python's
    documentation calls unsafe for data from others) only once its size is within
    limits.current() (what it begins with was checked by detect.py); checked for the
    shape pstats writes, and for the names they derive."""
    bound = limits.current()
    try:
        size = Path(path).stat().st_size
    except FileNotFoundError:
        raise IngestError(f"{path}: no such file") from None
    bound.unpacked(path, size)
    bound.fits_memory(path, size, PEAK_PER_BYTE)
    try:
        with open(path, "rb") as source:
            entries = marshal.load(source)
            after = size - source.tell()
    except Exception as error:  # whatever marshal made of it
        raise IngestError(
            f"{path}: not a pstats file this Python can read ({str(error)[:200]}); "
            "pstats files are marshal data tied to the Python version that wrote them "
            "(Python 2's cannot be read)") from None
    if after:  # cProfile and pstats write one object: what follows is another file's
        raise IngestError(f"{path}: {after:,} bytes follow its profile (a file written "
                          "twice, or joined to another): not a pstats file as cProfile "
                          "writes one; refused, not read")
    names = _check_shape(path, entries, bound)
    most = NAME_CHARS_PER_BYTE * size + NAME_CHARS_FLOOR
    if names > most:
        raise limits.BeyondLimits(
            f"{path}: its {len(entries):,} functions' names hold {names:,} characters, "
            f"more than the {most:,} a pstats file of {size:,} bytes may derive "
            f"({NAME_CHARS_PER_BYTE} a byte, and {NAME_CHARS_FLOOR >> 20} Mi): marshal stores "
            "a name once however many functions share it; refused, not read")
    bound.fits_memory(path, names, PEAK_PER_NAME_CHAR)
    return entries


def _check_shape(path: Path, entries: Any, bound: limits.Limits) -> int:
    """Each entry as pstats writes it: (file, line, function) -> (cc, nc, tt, ct,
    {caller: (nc, cc, tt, ct)}), its names within the longest field; returns the
    characters of the functions' names (`function_name`, within a few of each)."""
    if type(entries) is not dict or not entries:
        raise IngestError(f"{path}: holds {type(entries).__name__} {str(entries)[:80]}, not "
                          "the functions of a profile: not a pstats file")
    names = 0
    def key_ok(key: Any) -> bool:
        return (type(key) is tuple and len(key) == 3 and type(key[0]) is str
                and type(key[1]) is int and type(key[2]) is str)

    for position, (key, value) in enumerate(entries.items()):
        if not (key_ok(key) and type(value) is tuple and len(value) == 5
                and type(value[4]) is dict
                and all(key_ok(caller) and type(edge) is tuple and len(edge) == 4
                        for caller, edge in value[4].items())):
            raise IngestError(f"{path}: entry {position} is not what pstats writes "
                              f"({str(key)[:80]}): not a pstats file")
        bound.field(path, max(len(key[0]), len(key[2])), f"entry {position}'s name")
        names += len(key[0]) + len(key[2]) + 10
    return names


def _reached(entries: dict[Any, tuple], own: OwnFrames) -> set[Any]:
    """What the user's roots call, through profile-all's frames but not what those did on
    their own account (call_tree.OwnFrames.works_for)."""
    callees: dict[Any, list[Any]] = {}
    for function, (*_, callers) in entries.items():
        for caller in callers:
            callees.setdefault(caller, []).append(function)
    roots = [function for function, _seconds in own.roots]
    seen, pending = set(roots), list(roots)
    while pending:
        caller = pending.pop()
        for callee in callees.get(caller, ()):
            if callee not in seen and not (caller in own and own.works_for(callee)):
                seen.add(callee)
                pending.append(callee)
    return seen


def user_functions(entries: dict[Any, tuple], own: OwnFrames) -> dict[Any, tuple]:
    """The user's part of a profile profile-all made: {function: (cc, nc, tt, ct)}."""
    roots = {function for function, _seconds in own.roots}
    reached = _reached(entries, own)
    kept = {}
    for function, (cc, nc, tt, ct, callers) in entries.items():  # in the file's order
        if function not in reached or function in own:
            continue
        works_for_own = own.works_for(function)
        # an edge is (nc, cc, tt, ct), its calls in the other order
        outside = [edge for caller, edge in callers.items() if caller not in reached
                   or (works_for_own and caller in own)]
        if function not in roots and outside:
            cc, nc, tt, ct = _less(cc, nc, tt, ct, outside)
        if nc > 0:
            kept[function] = (max(cc, 0), nc, tt, ct)
    return kept


def _less(cc: int, nc: int, tt: float, ct: float, edges: list[tuple]) -> tuple:
    """A function's (cc, nc, tt, ct) less what the calls of `edges` (nc, cc, tt, ct each)
    account for: its own time never below 0, its cumulative time never below its own."""
    tt = max(tt - sum(edge[2] for edge in edges), 0.0)
    return (cc - sum(edge[1] for edge in edges), nc - sum(edge[0] for edge in edges), tt,
            max(ct - sum(edge[3] for edge in edges), tt))


def read_pstats(path: Path) -> list[list[Any]]:
    """One row per function and metric: calls, primitive_calls, self_time, cumulative_time;
    and the call tree (scope `call`, see call_tree)."""
    rows = []
    stats = load_stats(path)
    own = own_frames(stats)
    functions = user_functions(stats, own) if own is not None else stats
    for key, (primitive, calls, self_time, cumulative, *_callers) in functions.items():
        name = function_name(key)
        rows.append(row("function", name, "calls", calls))
        rows.append(row("function", name, "primitive_calls", primitive))
        rows.append(row("function", name, "self_time", self_time))
        rows.append(row("function", name, "cumulative_time", cumulative))
    return rows + call_rows(stats, function_name, own)
