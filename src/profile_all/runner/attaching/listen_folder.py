"""A listening process's folder (on_demand.py), seen from `profile-all attach`, which may be
root or another process of the same user: found where the process's own temporary
directory is, and read and written without trusting a path its user controls.

The folder belongs to the process's user, who may plant anything in it: a link named as
the request made root overwrite a root-only file; links named as the answer and the trace
made root copy a root-only trace into its report, or read /dev/zero to a MemoryError. So
the folder is opened once, without following a link, and must be a folder of that user's
that nobody else may enter; every file in it is opened by name in that folder
(`dir_fd`), never following a link, must be a regular file of that user's, and is read
only up to a bound. What attach writes there is created new (O_EXCL: a name that exists
is removed first, and removing a link removes the link) and given to that user.

The folder is where the process's `tempfile.gettempdir()` put it: its environment's
TMPDIR, TEMP or TMP (a scheduler sets one a job), else /tmp, /var/tmp, /usr/tmp, its
working folder; the first of these that holds its marker, seen from here or, for a
process with a root of its own (a container), through /proc/PID/root. Its files are
named with the pid the process has in its own PID namespace (/proc/PID/status' NSpid).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from profile_all import on_demand

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MARKER_BYTES = 4096
#: the most an answer may hold
ANSWER_BYTES = 64 * 1024


class Refused(OSError):
    """A file in the folder is not what the process writes there (a link, not a regular
    file, another user's, too big)."""


def file_name(pid: int) -> str:
    """What names process `pid`'s files in its listen folder (on_demand._me): its PID
    namespace and the pid it has there."""
    return f"{on_demand.pid_namespace(pid)}-{own_pid(pid)}"


def own_pid(pid: int) -> int:
    """The pid process `pid` has in its own PID namespace (a container's: 1, say), which
    names its files; `pid` where it is the same or cannot be read."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return pid


def _root_of(pid: int) -> str:
    """The process's root seen from here ("" where it is ours)."""
    try:
        theirs, ours = os.stat(f"/proc/{pid}/root"), os.stat("/")
    except OSError:
        return ""
    return "" if (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino) \
        else f"/proc/{pid}/root"


def _temporary_folders(pid: int) -> list[str]:
    """Where `tempfile.gettempdir()` looks, in its order, with the process's environment
    and working folder, under the process's root."""
    environment: dict[str, str] = {}
    with contextlib.suppress(OSError):
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        for entry in raw.split(b"\0"):
            name, _, value = entry.partition(b"=")
            if name in (b"TMPDIR", b"TEMP", b"TMP") and value:
                environment[name.decode()] = os.fsdecode(value)
    found = [environment[name] for name in ("TMPDIR", "TEMP", "TMP") if name in environment]
    found += ["/tmp", "/var/tmp", "/usr/tmp"]
    root = _root_of(pid)
    # a relative TMPDIR: tempfile made it absolute from the working folder of the time
    found = [root + folder if folder.startswith("/") else f"/proc/{pid}/cwd/{folder}"
             for folder in found]
    found.append(f"/proc/{pid}/cwd")  # its working folder, wherever its root is
    return list(dict.fromkeys(found))


class ListenFolder:
    """The listen folder of process `pid` (of user `uid`), open; `find` makes one. Its
    files are named with `named`, the process's pid in its own PID namespace."""

    def __init__(self, path: Path, fd: int, pid: int, uid: int, gid: int) -> None:
        self.path, self.fd, self.pid, self.uid, self.gid = path, fd, pid, uid, gid
        self.named = file_name(pid)

    @classmethod
    def find(cls, pid: int, uid: int, gid: int) -> ListenFolder | None:
        """The folder whose marker says process `pid` listens (its start time, as the
        kernel has it); None where no such folder is found."""
        for temporary in _temporary_folders(pid):
            path = Path(temporary) / on_demand.folder_name(uid)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            found = cls(path, fd, pid, uid, gid)
            if found._own() and found._marks_it():
                return found
            found.close()
        return None

    def _own(self) -> bool:
        said = os.fstat(self.fd)
        return said.st_uid == self.uid and not said.st_mode & 0o077

    def _marks_it(self) -> bool:
        try:
            marker = json.loads(self.read(f"{self.named}.json", _MARKER_BYTES))
        except (OSError, ValueError):
            return False
        return (isinstance(marker, dict) and marker.get("pid") == own_pid(self.pid)
                and marker.get("start") == on_demand.start_time(self.pid))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def opened(self, name: str, limit: int) -> BinaryIO:
        """File `name` of the folder, open to read: a regular file of the process's user's,
        of `limit` bytes at most; Refused otherwise."""
        fd = self._open(name)
        said = os.fstat(fd)
        why = self._not_theirs(said) or (
            f"{said.st_size:,} bytes, more than {limit:,}" if said.st_size > limit else "")
        if why:
            os.close(fd)
            raise Refused(errno.EFBIG if said.st_size > limit else errno.EPERM, why,
                          str(self.path / name))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def _open(self, name: str) -> int:
        """A descriptor of `name`, opened to read without following a link."""
        try:
            return os.open(name, _READ, dir_fd=self.fd)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise Refused(errno.ELOOP, "a symbolic link", str(self.path / name)) from None
            raise

    def _not_theirs(self, said: os.stat_result) -> str:
        """Why a file is not one the process's user made there ("" where it is)."""
        if not stat.S_ISREG(said.st_mode):
            return "not a regular file"
        if said.st_uid != self.uid:
            return f"owned by uid {said.st_uid}, not the process's user"
        return ""

    def read(self, name: str, limit: int) -> bytes:
        """File `name`, whole, `limit` bytes at most (a file that grows as it is read is
        read to the bound, and refused beyond it)."""
        with self.opened(name, limit) as said:
            data = said.read(limit + 1)
        if len(data) > limit:
            raise Refused(errno.EFBIG, f"more than {limit:,} bytes", str(self.path / name))
        return data

    def read_json(self, name: str) -> Any:
        return json.loads(self.read(name, ANSWER_BYTES))

    def exists(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            return False
        return True

    def remove(self, name: str) -> None:
        """`name` gone from the folder (a link is removed, never what it names)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def _created(self, name: str, flags: int) -> int:
        """A new file `name`, the process's user's (a name that exists goes first)."""
        self.remove(name)
        fd = os.open(name, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=self.fd)
        if os.geteuid() != self.uid:  # root: the process must read it, and remove it
            os.fchown(fd, self.uid, self.gid)
        return fd

    def write(self, name: str, data: bytes) -> None:
        """`name` written new, whole (the process reads it once it is told)."""
        fd = self._created(name, os.O_WRONLY)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def lock(self, name: str) -> int | None:
        """A descriptor holding the exclusive lock on file `name` (made where absent, the
        process's user's); None while another holds it, whoever that is."""
        try:
            fd = self._open(name)
        except FileNotFoundError:
            try:
                fd = self._created(name, os.O_RDONLY)
            except FileExistsError:
                return self.lock(name)
        why = self._not_theirs(os.fstat(fd))
        if why:
            os.close(fd)
            raise Refused(errno.EPERM, why, str(self.path / name))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        if not self._is(name, fd):  # its holder removed it as we locked it: take the new one
            os.close(fd)
            return self.lock(name)
        return fd

    def unlock(self, name: str, fd: int) -> None:
        """The lock let go, its file gone (removed while held: nobody takes it meanwhile)."""
        with contextlib.suppress(OSError):
            if self._is(name, fd):
                os.unlink(name, dir_fd=self.fd)
        os.close(fd)

    def _is(self, name: str, fd: int) -> bool:
        """Whether file `name` is the one `fd` holds."""
        try:
            now = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
