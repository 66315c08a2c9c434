"""How much a reader may unpack and hold of a file that someone else made.

A 1 MB `.json.gz` can unpack to a gigabyte (one event whose name is a gigabyte long): read
and rendered as it was, it grew to all of a 23 GB machine's memory and wrote a 14 GB
folder. So every reader keeps to two bounds, refusing the file in one line beyond them:

- `max_unpacked`: the bytes a file holds once unpacked (gunzipped, or as it is): 4 GiB by
  default, and never more than a trace's reading can hold in the memory free when it
  starts (chrome_trace.PEAK_PER_BYTE); a gzip stream is unpacked piece by piece and
  stopped as soon as it passes the bound, so a bomb is refused in seconds;
- `max_field`: the characters of any one text field (a name, an argument, a CSV field, a
  profile's line): 1 MiB by default; the longest names real profiles hold (C++ kernel
  templates) are a few KiB.

Set with `profile-all ingest --max-unpacked SIZE --max-field SIZE`, `pa.ingest(...,
max_unpacked=, max_field=)`, or the environment (PROFILE_ALL_MAX_UNPACKED,
PROFILE_ALL_MAX_FIELD) for every reader of the process (a torch-profiler pass's own
trace included).
"""

from __future__ import annotations

import contextvars
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

from profile_all.readers import IngestError

MAX_UNPACKED = 4 * 2**30
MAX_FIELD = 2**20


class BeyondLimits(IngestError):
    """A file refused for its size: of its kind, but more than a reader may hold."""


def _from_environment(name: str, default: int) -> int:
    from profile_all import validate

    text = os.environ.get(name)
    if not text:
        return default
    try:
        return int(validate.byte_size(name, text))
    except ValueError as error:
        raise IngestError(str(error)) from None


@dataclass(frozen=True)
class Limits:
    max_unpacked: int
    max_field: int

    def unpacked(self, path: object, size: int) -> None:
        """Refuse `path` when it holds more than max_unpacked bytes."""
        if size > self.max_unpacked:
            raise BeyondLimits(
                f"{path}: unpacks to more than {_size(self.max_unpacked)} (--max-unpacked): "
                "refused, not read")

    def fits_memory(self, path: object, size: int, more_per_byte: float) -> None:
        """Refuse `path` (`size` bytes) when reading it needs `more_per_byte` times its
        size more than 80% of the memory free now."""
        import psutil

        free, need = psutil.virtual_memory().available, size * more_per_byte
        if need > 0.8 * free:
            raise BeyondLimits(f"{path}: {_size(size)} to read needs about {_size(int(need))} "
                               f"more and {_size(free)} is free: refused, not read")

    def field(self, path: object, length: int, what: str) -> None:
        """Refuse `path` when one of its fields (`what`) is longer than max_field."""
        if length > self.max_field:
            raise BeyondLimits(
                f"{path}: {what} is {_size(length, 'characters')} long, over the "
                f"{_size(self.max_field, 'characters')} a field may hold (--max-field): "
                "refused, not read")


def _size(value: int, unit: str = "bytes") -> str:
    for scale, prefix in ((2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{'B' if unit == 'bytes' else ' ' + unit}"
    return f"{value:,} {unit}"


class _Counted(io.RawIOBase):
    """A binary stream that refuses its file once more than max_unpacked bytes came out."""

    def __init__(self, stream: IO[bytes], path: object, limits: Limits) -> None:
        self._stream, self._path, self._limits, self._count = stream, path, limits, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self._stream.readinto(buffer)
        self._count += count or 0
        self._limits.unpacked(self._path, self._count)
        return count

    def close(self) -> None:
        self._stream.close()
        super().close()


def bounded_text(stream: IO[bytes], path: object) -> IO[str]:
    """`stream` (unpacked bytes) as UTF-8 text, refused once it passes max_unpacked."""
    counted = io.BufferedReader(_Counted(stream, path, current()))
    return io.TextIOWrapper(counted, encoding="utf-8", errors="replace", newline="")


_given: contextvars.ContextVar[Limits | None] = contextvars.ContextVar("limits", default=None)


def current() -> Limits:
    """The limits in force: those `applied`, else the environment's, else the defaults."""
    given = _given.get()
    if given is not None:
        return given
    return Limits(_from_environment("PROFILE_ALL_MAX_UNPACKED", MAX_UNPACKED),
                  _from_environment("PROFILE_ALL_MAX_FIELD", MAX_FIELD))


@contextmanager
def applied(max_unpacked: int | None = None, max_field: int | None = None) -> Iterator[Limits]:
    """The readers called inside keep to these limits (None: as `current()` has it)."""
    now = current()
    limits = Limits(max_unpacked or now.max_unpacked, max_field or now.max_field)
    token = _given.set(limits)
    try:
        yield limits
    finally:
        _given.reset(token)
