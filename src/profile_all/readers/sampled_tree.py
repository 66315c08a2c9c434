"""The call tree of sampled stacks (readers/sampled_rows.py): a node a call path, held
once however many samples pass through it, for the report's flame graph."""

from __future__ import annotations

from typing import Any

from profile_all.readers.nesting import MAX_PATH_CHARS
from profile_all.rows import call_path, row

#: a call path under this share of the samples, beyond MAX_NODES, or once the paths hold
#: MAX_PATH_CHARS characters in all, is left out of the call tree (its time stays in its
#: caller's box)
MIN_SHARE = 0.002
MAX_NODES = 2000
#: the call tree holds this many frames of a stack at most (a recursion, or a file made to
#: hurt: 200,000 frames in one sample held every prefix of the stack, 23 GB)
MAX_DEPTH = 256


class CallTree:
    """Call paths as a tree of nodes (a node a path, held once however many samples pass
    through it), at most MAX_DEPTH deep: a frame deeper than that is its caller's time."""

    def __init__(self) -> None:
        self.parent: list[int] = [-1]  # node 0: the root above every thread
        self.name: list[str] = [""]
        self.value: list[float] = [0.0]
        self._child: dict[tuple[int, str], int] = {}

    def add(self, path: list[str], value: float) -> None:
        node = 0
        for name in path[:MAX_DEPTH]:
            child = self._child.get((node, name))
            if child is None:
                child = self._child[(node, name)] = len(self.name)
                self.parent.append(node)
                self.name.append(name)
                self.value.append(0.0)
            self.value[child] += value
            node = child

    def path_of(self, node: int) -> str:
        names = []
        while node > 0:
            names.append(self.name[node])
            node = self.parent[node]
        parent = ""
        for name in reversed(names):
            parent = call_path(parent, name)
        return parent


    def rows(self, metric: str) -> list[list[Any]]:
        """The tree as rows of scope `call` (readers/call_tree.py's shape): the heaviest
        paths, at most MAX_NODES, none under MIN_SHARE of all samples (a node is kept only
        with its caller); `metric`: what its values are (seconds, or samples where the
        file gives no time)."""
        total = sum(value for node, value in enumerate(self.value) if self.parent[node] == 0)
        if not total:
            return []
        heaviest = sorted(range(1, len(self.value)), key=lambda node: -self.value[node])
        kept: set[int] = {0}
        rows, spent = [], 0  # spent: the characters of the paths so far (MAX_PATH_CHARS)
        for node in heaviest:  # a caller holds at least its callees: it comes first
            if len(rows) >= MAX_NODES or self.value[node] < MIN_SHARE * total \
                    or spent >= MAX_PATH_CHARS:
                break
            if self.parent[node] not in kept:
                continue
            kept.add(node)
            parent = self.path_of(self.parent[node])
            spent += len(parent)
            rows.append(row("call", self.name[node], metric, self.value[node], parent=parent))
        return rows
