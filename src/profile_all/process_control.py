"""The few Linux prctl(2) calls profile-all makes on its processes: a child that ends with
its parent, a process allowed to read this one, the subreaper of this one's descendants.
Each does nothing where the call is missing (not Linux)."""

from __future__ import annotations

import contextlib
import ctypes

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_PR_SET_PTRACER = 0x59616D61
#: allow_reader's pid for any process of this user's (PR_SET_PTRACER_ANY)
ANY_READER = -1


def _prctl(option: int, argument: object) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, argument, 0, 0, 0)


def die_with_parent(signum: int) -> None:
    """This process gets `signum` when the process that started it ends, however it ends."""
    _prctl(_PR_SET_PDEATHSIG, signum)


def allow_reader(pid: int) -> None:
    """Let process `pid` (ANY_READER: any of this user's; 0: none beyond what Yama allows)
    read this one where Yama's ptrace_scope allows only ancestors."""
    _prctl(_PR_SET_PTRACER, pid)


def adopt_orphans(adopting: bool = True) -> None:
    """Make this process (or stop it being) the subreaper of its descendants: one whose
    parent ends comes to it, not to init."""
    _prctl(_PR_SET_CHILD_SUBREAPER, int(adopting))


def adopts_orphans() -> bool:
    """Whether this process is the subreaper of its descendants."""
    said = ctypes.c_int(0)
    _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(said))
    return bool(said.value)
