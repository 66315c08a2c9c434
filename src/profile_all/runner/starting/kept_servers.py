"""Fork servers kept from one run for the next in the same Python process
(`pa.keep_servers()`): a notebook's runs, or a script's that profiles one configuration
after another.

Every run starts a fork server that imports torch (and torch._dynamo and the backends'
libraries where the run needs them) before its first pass: 2.3 to 3.2 CPU-s of each run on
a 2-core VM (2026-11-28), which the runs of one process paid again each time. While
servers are kept, a run ends by leaving its server ready instead of ending it, and a later
run whose server would import the same modules in the same environment takes it. A pass
forked from a kept server starts as one forked from a new server: its own working folder
(and `sys.path[0]`, as `python -m` sets it), environment and random seeds
(forkserver._become); its record says the server was kept (`process_start`).

A kept server is taken, and kept, only once it has answered a ping at once with nothing
of an earlier run left unread: one killed meanwhile, or still waiting for a pass, is
ended and a new one started. None outlives the keeping (the `with` block, `close()`, or
the interpreter's exit), and no more than `limit` are kept: the least recently used goes.
A process forked from this one keeps none of them.
"""

from __future__ import annotations

import atexit
import os
from collections import OrderedDict

from profile_all import validate
from profile_all.runner.starting.server_handle import ForkServer, Server, ServerWhenNeeded

Key = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]

#: the keepings open, innermost last: the innermost keeps (limit 0 keeps none)
_open: list[KeptServers] = []


def _key(modules: list[str], env: dict[str, str]) -> Key:
    return tuple(modules), tuple(sorted(env.items()))


class KeptServers:
    """Runs leave their fork server ready for the next while this is open: from its making
    until `close()` (a notebook), or for a `with` block."""

    def __init__(self, limit: int = 1) -> None:
        self.limit = validate.whole("limit", limit, 0)
        self._servers: OrderedDict[Key, ForkServer] = OrderedDict()
        _open.append(self)

    def __enter__(self) -> KeptServers:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._servers)

    def take(self, modules: list[str], env: dict[str, str]) -> ForkServer | None:
        server = self._servers.pop(_key(modules, env), None)
        if server is None:
            return None
        if not server.idle():
            server.close()
            return None
        server.runs_before += 1
        return server

    def keep(self, server: ForkServer) -> None:
        if self.limit == 0 or not server.idle():
            server.close()
            return
        key = _key(server.modules, server.env)
        replaced = self._servers.pop(key, None)
        if replaced is not None:
            replaced.close()
        self._servers[key] = server
        while len(self._servers) > self.limit:
            self._servers.popitem(last=False)[1].close()

    def close(self) -> None:
        """End every server kept; runs after this end theirs."""
        if self in _open:
            _open.remove(self)
        while self._servers:
            self._servers.popitem()[1].close()


def keeping() -> KeptServers | None:
    return _open[-1] if _open else None


def holding() -> bool:
    """Whether a server is kept for the next run."""
    kept = keeping()
    return kept is not None and len(kept) > 0


def take(modules: list[str], env: dict[str, str]) -> ForkServer | None:
    """A kept server of `modules` in `env`, ready; None where none is kept."""
    kept = keeping()
    return kept.take(modules, env) if kept is not None else None


def end(server: Server) -> None:
    """The run is over: its server is ended, or kept where servers are kept."""
    started = server.started_one if isinstance(server, ServerWhenNeeded) else server
    kept = keeping()
    if started is not None and kept is not None:
        kept.keep(started)
    else:
        server.close()


def keep_servers(limit: int = 1) -> KeptServers:
    """From now until `close()` or the end of a `with` block, each run of this process
    (`pa.run`, `pa.profile_model`, the CLI's `main` called here; not `%%profile_all`,
    which runs the command in a process of its own) leaves its fork server ready, and a
    later run of the same modules in the same environment takes it instead of importing
    torch again; `limit`: how many are kept at most (each is a process of torch's size),
    0 for none inside an outer keeping."""
    return KeptServers(limit)


@atexit.register
def _close_all() -> None:
    for kept in reversed(_open):
        kept.close()


def _forgotten_in_child() -> None:
    """A forked child's copy of the keeping is forgotten, never used nor ended: its servers
    are its parent's (a child that ended through `sys.exit` ran `_close_all`, and killed
    them)."""
    for kept in _open:
        kept._servers.clear()
    _open.clear()


if hasattr(os, "register_at_fork"):  # where processes fork (not Windows)
    os.register_at_fork(after_in_child=_forgotten_in_child)
