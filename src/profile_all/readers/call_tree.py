"""The call tree of a pstats profile, for a flame graph: who called whom, for how long.

pstats keeps one edge per (caller, callee) pair, with the callee's cumulative time in the
calls from that caller; not one per call path. The tree is unfolded from the root (of the
functions no profiled function called, the one with the most cumulative time) depth
first, as SnakeViz unfolds it: a function reached by one path gets its callees' edge times
scaled by the share of its own cumulative time that path holds; a function already on the
path is not unfolded again (recursion); a node under MIN_SHARE of the root, beyond
MAX_NODES, deeper than readers/nesting.py's MAX_DEPTH, or once the nodes' paths hold its
MAX_PATH_CHARS characters in all, is left out (its time stays in its caller's): a 60 KB
pstats file of a 500-deep chain of functions sharing one 20,000-character file name
(marshal stores it once) derived paths of gigabytes, a MemoryError.

A node never holds less than its children together (a flame graph's bars lie on their
caller's; Plotly's icicle refused such a tree and drew nothing). Under recursion pstats'
edge times can claim more: cProfile counts a function's cumulative time, and each edge's,
only in the outermost of the calls nested in each other, so when X calls Y and Y calls X
again (torch's `Module._call_impl` -> `Sequential.forward` -> `_call_impl` of each
layer), X's edge to a callee of the inner X is counted in full beside the edge to Y that
already holds it. So the rule: a node's value is what it was measured (the root's
cumulative time) or given by its caller; when its callees' scaled edge times add up to
more than that, each is scaled down by the same factor so that together they hold exactly
the node's value (a child never claims more than its parent, and their shares stay as
pstats measured them).

In a profile that profile-all made (`cprofile.prof`: the pass's `runner/inside/pass_run.py`
`run_target` is a root; in a window of steps, the step clock's hook that stopped it, and
the roots are what the script called in those steps), profile-all's own frames and
runpy's are left out (`OwnFrames`):
the root is the target script's `<module>` (the one runpy's `exec` ran); an own frame
called from the user's code (a region, `pa.step()`, the step hooks torch calls) is
spliced out: its time and that of the built-ins it called stay in its caller (self time),
and the Python functions it called (a function decorated with `@pa.region`) hang from the
caller. A model (no script) has as roots the Python functions profile-all's code called.
A profile that profile-all did not make is unfolded as it is.

Rows: scope `call`, the function as pstats names it, `parent` the path of its callers from
the root joined by rows.CALL_SEPARATOR (function names hold `/`, the regions' separator).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from profile_all.readers.nesting import MAX_DEPTH, MAX_PATH_CHARS
from profile_all.rows import call_path, row

MIN_SHARE = 0.002
MAX_NODES = 2000
#: the file pstats gives built-in (C) functions
BUILTIN = "~"
_EXEC = (BUILTIN, 0, "<built-in method builtins.exec>")
#: the pass's frame that runs the target: a profile holding it as a root is profile-all's
#: (its file as named now, and as an earlier layout named it)
_MARK_FILES, _MARK_FUNCTION = ("runner/inside/pass_run.py", "runner/passrun.py"), "run_target"
#: the step clock's hooks and the windows', where a window of steps starts and stops its
#: profiler: a profile holding one as a root was made in a window (at a `pa.step()` the
#: windows' frames are roots, the step clock's not)
_WINDOW_MARKS = ("runner/inside/steps.py", "runner/inside/windows.py")
_OWN_BUILTIN = re.compile(r"(?<![\w.])profile_all\.")
#: the standard library's and installed packages' files, as a profile names them
LIBRARY = re.compile(r"^<frozen |[/\\](site-packages|dist-packages)[/\\]"
                      r"|[/\\]lib[/\\]python\d[\d.]*[/\\]", re.IGNORECASE)
#: scaled-down children keep this much below their parent, against the sum's rounding
_MARGIN = 1 - 1e-12


def _slashed(filename: str) -> str:
    return filename.replace("\\", "/")


@dataclass(frozen=True)
class OwnFrames:
    """profile-all's own frames in a profile it made, and the user's roots in it."""

    package: str  # the profile_all directory as the profile names files, with "/" at the end
    roots: tuple[tuple[Any, float], ...]  # (function, seconds), heaviest first

    def __contains__(self, function: Any) -> bool:
        filename = _slashed(function[0])
        if filename == BUILTIN:  # the regions' enter and exit in C
            return _OWN_BUILTIN.search(function[2]) is not None
        return (filename.startswith(self.package) or filename == "<frozen runpy>"
                or filename.endswith("/runpy.py"))

    def works_for(self, function: Any) -> bool:
        """Whether `function`, called by profile-all's frames, did their work: a built-in
        or a library's (the user's own functions, as one decorated with `@pa.region`, no)."""
        return function[0] == BUILTIN or LIBRARY.search(function[0]) is not None


def own_frames(entries: dict[Any, tuple]) -> OwnFrames | None:
    """profile-all's frames when it made this profile (None for any other profile)."""
    package = next((_slashed(f[0]).removesuffix(mark) for f, values in entries.items()
                    for mark in _MARK_FILES
                    if not values[4] and f[2] == _MARK_FUNCTION
                    and _slashed(f[0]).endswith("/profile_all/" + mark)), None)
    if package is None:
        return _own_in_a_window(entries)
    own = OwnFrames(package, ())
    runpy_exec = _EXEC in entries and any(caller in own for caller in entries[_EXEC][4])
    script = [(f, values[3]) for f, values in entries.items()
              if runpy_exec and f[2] == "<module>" and _EXEC in values[4] and f not in own]
    if script:  # the target's module; modules it exec'd itself weigh less
        return OwnFrames(package, (max(script, key=lambda entry: entry[1]),))
    return OwnFrames(package, _called_by_own(entries, own))


def _own_in_a_window(entries: dict[Any, tuple]) -> OwnFrames | None:
    """A profile made in a window of steps (runner/inside/windows.py): started and stopped
    at a step's end, deep in the script's stack, so that the functions the script called
    in those steps are its roots, beside the step hooks it was stopped in. Its roots: the
    user's functions no profiled function called, and those profile-all's frames called."""
    package = next((_slashed(f[0]).removesuffix(mark) for f, values in entries.items()
                    for mark in _WINDOW_MARKS
                    if not values[4] and _slashed(f[0]).endswith("/profile_all/" + mark)), None)
    if package is None:
        return None
    own = OwnFrames(package, ())
    top = {f: values[3] for f, values in entries.items() if not values[4] and f not in own}
    top.update(_called_from_outside(entries, own))
    for function, seconds in _called_by_own(entries, own):
        top[function] = top.get(function, 0.0) + seconds
    return OwnFrames(package, tuple(sorted(top.items(), key=lambda entry: -entry[1])))


def _called_from_outside(entries: dict[Any, tuple], own: OwnFrames) -> dict[Any, float]:
    """The functions of a window's profile that were also called from frames entered
    before it started (the script's loop: no caller is recorded for those calls), with
    the time of those calls: the outermost module call of a forward, also called by the
    containers inside it. Its calls less its callers' edges' are such calls; where every
    caller is one it calls itself (nested calls, counted in the outermost only), its whole
    cumulative time is theirs, else what its callers' edges do not hold. (An entry's calls
    are (primitive, all); an edge's (all, primitive).)"""
    callees = _callees(entries)
    found = {}
    for function, (_, calls, _, cumulative, callers) in entries.items():
        if not callers or function in own or calls - sum(e[0] for e in callers.values()) <= 0:
            continue
        below, pending = set(), [function]
        while pending:
            for callee in callees.get(pending.pop(), {}):
                if callee not in below:
                    below.add(callee)
                    pending.append(callee)
        outside = cumulative if set(callers) <= below else \
            cumulative - math.fsum(edge[3] for edge in callers.values())
        if outside > 0:
            found[function] = outside
    return found


def _called_by_own(entries: dict[Any, tuple], own: OwnFrames) -> tuple[tuple[Any, float], ...]:
    """A model's roots: the Python functions profile-all's frames called (reached from its
    roots through its own frames only), with the time of those calls."""
    callees = _callees(entries)
    seen = {f for f, values in entries.items() if not values[4] and f in own}
    pending, found = list(seen), defaultdict(float)
    while pending:
        for callee, seconds in callees.get(pending.pop(), {}).items():
            if callee in own and callee not in seen:
                seen.add(callee)
                pending.append(callee)
            elif callee not in own and callee[0] != BUILTIN:
                found[callee] += seconds
    roots = [(f, min(seconds, entries[f][3])) for f, seconds in found.items()]
    return tuple(sorted(roots, key=lambda entry: -entry[1]))


def _callees(entries: dict[Any, tuple]) -> dict[Any, dict[Any, float]]:
    callees: dict[Any, dict[Any, float]] = defaultdict(dict)
    for function, (*_, callers) in entries.items():
        for caller, edge in callers.items():
            callees[caller][function] = edge[3]
    return callees


class _Tree:
    def __init__(self, entries: dict[Any, tuple], own: OwnFrames | None) -> None:
        self.entries, self.own = entries, own
        self.callees = _callees(entries)

    def node(self, function: Any, share: float, on_path: frozenset) -> tuple[float, float]:
        """(value, scale) of `function` given `share` seconds by its caller: at most its
        self time and its callees' edge times at that scale, its recursion left out."""
        _cc, _nc, self_time, cumulative, _callers = self.entries[function]
        scale = share / cumulative if cumulative > 0 else 0.0
        inside = self_time + math.fsum(seconds for callee, seconds
                                       in self.callees.get(function, {}).items()
                                       if callee not in on_path)
        return min(share, inside * scale), scale

    def children(self, function: Any, value: float, scale: float,
                 on_path: frozenset) -> dict[Any, tuple[float, float]]:
        """The node's children, each (value, scale): together at most `value`."""
        found: dict[Any, float] = defaultdict(float)
        self._gather(function, scale, on_path, found, frozenset())
        nodes = {callee: self.node(callee, share, on_path | {callee})
                 for callee, share in found.items()}
        claimed = math.fsum(value for value, _scale in nodes.values())
        if claimed > value:
            factor = value / claimed * _MARGIN
            nodes = {callee: (one * factor, its * factor) for callee, (one, its) in nodes.items()}
        return nodes

    def _gather(self, function: Any, scale: float, on_path: frozenset,
                found: dict[Any, float], spliced: frozenset) -> None:
        """`function`'s callees with their edge times at `scale`, through own frames."""
        for callee, seconds in self.callees.get(function, {}).items():
            if callee in on_path or callee in spliced:
                continue
            if self.own is not None and callee in self.own:
                cumulative = self.entries[callee][3]
                inner = seconds * scale / cumulative if cumulative > 0 else 0.0
                self._gather(callee, inner, on_path, found, spliced | {callee})
            elif not (spliced and self.own is not None and self.own.works_for(callee)):
                found[callee] += seconds * scale  # (what profile-all's code did stays)


def _roots(entries: dict[Any, tuple], own: OwnFrames | None) -> list[tuple[Any, float]]:
    if own is not None:
        return list(own.roots)
    roots = [function for function, values in entries.items() if not values[4]]
    if not roots:
        return []
    root = max(roots, key=lambda function: entries[function][3])
    return [(root, entries[root][3])]


def call_rows(entries: dict[Any, tuple], name_of: Any,
              own: OwnFrames | None = None) -> list[list[Any]]:
    """`entries`: pstats.Stats.stats ({function: (cc, nc, tt, ct, callers)});
    `name_of`: a function's display name; `own`: profile-all's frames (`own_frames`)."""
    roots = _roots(entries, own)
    total = sum(seconds for _root, seconds in roots)
    if not total > 0:
        return []
    tree = _Tree(entries, own)
    rows: list[list[Any]] = []
    # smallest first onto the stack: the largest is unfolded next
    pending = [(root, "", *tree.node(root, seconds, frozenset([root])), frozenset([root]))
               for root, seconds in reversed(roots) if seconds >= MIN_SHARE * total]
    spent = 0  # the characters of the paths so far
    while pending and len(rows) < MAX_NODES and spent < MAX_PATH_CHARS:
        function, parent, value, scale, on_path = pending.pop()
        name = name_of(function)
        rows.append(row("call", name, "cumulative_time", value, parent=parent))
        path = call_path(parent, name)
        spent += len(path)
        if len(on_path) > MAX_DEPTH:
            continue
        children = tree.children(function, value, scale, on_path)
        for callee, (seconds, its) in sorted(children.items(), key=lambda c: c[1][0]):
            if seconds >= MIN_SHARE * total:
                pending.append((callee, path, seconds, its, on_path | {callee}))
    return rows
