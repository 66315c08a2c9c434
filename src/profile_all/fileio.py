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
