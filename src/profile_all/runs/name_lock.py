"""The lock that holds a run folder's name while a run writes it: an exclusive flock on
`.NAME.lock` beside the folder.

Run folders are shared: by the runs of one user, by containers and hosts on one volume
(their processes in PID namespaces of their own, so that a PID says nothing there), by
other users in a folder all may write. So the lock is the one sign that a run is alive:
its work folder is removed only by whoever can take its lock. The file is opened without
following a link (a link planted there made a run create or lock a file elsewhere),
read-only (another user's lock file can be locked; flock needs no write permission), and
created only where it is absent (in a folder with the sticky bit, Linux refuses to open
another user's file with O_CREAT, root included). Its holder unlinks it when done: a run
that locked the file just before that holds a name no longer there, so each lock taken
is checked to be the file at the path still, and taken again where it is not.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from pathlib import Path

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class LinkedLock(OSError):
    """The lock's path is a symbolic link (or not a regular file): refused."""


def lock_path(final: Path) -> Path:
    return final.parent / f".{final.name}.lock"


def _opened(path: Path) -> int:
    """A descriptor of the regular file at `path`, made where there is none."""
    while True:
        try:
            fd = os.open(path, _OPEN)
        except FileNotFoundError:
            try:
                fd = os.open(path, _OPEN | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:  # made by another run meanwhile: open that one
                continue
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise LinkedLock(errno.ELOOP, "a symbolic link where a lock file goes",
                                 str(path)) from None
            raise
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
        raise LinkedLock(errno.EINVAL, "not a regular file where a lock file goes", str(path))


def _still_there(fd: int, path: Path) -> bool:
    """Whether the file `fd` locks is the one at `path` now (its holder unlinks it)."""
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def take(path: Path) -> int | None:
    """A descriptor holding the exclusive lock on `path`; None while another holds it."""
    while True:
        fd = _opened(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        if _still_there(fd, path):
            return fd
        os.close(fd)  # its holder was done with it as we locked it: take the new one


def release(path: Path, fd: int) -> None:
    """The lock let go, its file gone (unlinked while held: nobody takes it meanwhile)."""
    with contextlib.suppress(OSError):
        if _still_there(fd, path):
            os.unlink(path)
    os.close(fd)
