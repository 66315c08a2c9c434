"""Files appear whole or not at all: write to a temporary name beside, then rename."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside `final`; rename it to `final` if the block succeeds."""
    final = Path(final)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(final: Path, data: bytes | str) -> None:
    payload = data.encode() if isinstance(data, str) else data
    with atomic_path(final) as tmp:
        tmp.write_bytes(payload)


def current_folder(otherwise: str = "") -> str:
    """os.getcwd(); `otherwise` where the folder was removed (a target may remove its own,
    and so profile-all's, working folder: the process still works in it, unnamed)."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return otherwise


@contextlib.contextmanager
def utf8_path(path: Path) -> Iterator[str]:
    """`path` as a library written in C or C++ takes it (torch's exports, sqlite), which
    is UTF-8 text: itself where it is, else (a folder named with bytes that are not
    UTF-8, which Python holds as lone surrogates) the same file through its folder's
    descriptor, /proc/self/fd/N/NAME (Linux). Its own name is profile-all's, UTF-8."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        folder = os.open(Path(path).parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield f"/proc/self/fd/{folder}/{Path(path).name}"
        finally:
            os.close(folder)
        return
    yield text
