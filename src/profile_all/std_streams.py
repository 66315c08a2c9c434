"""Descriptors 0, 1 and 2 open, whatever started profile-all.

cron, daemons and `cmd >&-` start a process with some of them closed. Python then has
`sys.stdout` None, and the first file profile-all opens takes the free number: the fork
server's socket became descriptor 1, its progress and the target's output were written
into it, and the run ended in tracebacks (exit 1 or 120) before the script ran. A closed
standard stream is /dev/null, as a shell's `>/dev/null` would have made it.
"""

from __future__ import annotations

import io
import os
import sys

_MODES = ((0, os.O_RDONLY, "stdin", "r"), (1, os.O_WRONLY, "stdout", "w"),
          (2, os.O_WRONLY, "stderr", "w"))


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def open_closed_ones() -> None:
    """Each closed standard descriptor opened on /dev/null, and Python's stream for it
    made where Python had none."""
    for fd, flags, name, mode in _MODES:
        if not _closed(fd):
            continue
        null = os.open(os.devnull, flags)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, mode, closefd=False),
                                                line_buffering=fd != 0,
                                                errors="backslashreplace" if fd == 2 else None))
