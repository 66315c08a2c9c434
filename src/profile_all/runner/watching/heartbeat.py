"""What a pass is doing, said while it takes long: a torch.profiler trace of millions of
events took nine minutes to write and read with not a line said (a two-step LBFGS run).

The pass's process writes what it does now (`say`: running the script, collecting a
backend's rows) to a small file in the run's scratch folder; profile-all, waiting on it,
reads that file every HEARTBEAT_SECONDS once the pass has run that long and tells the
observer (`Beat`), and says so too of what it does itself after the pass (reading a trace).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: how long a pass runs before what it does is said, and how often after that
#: (PROFILE_ALL_HEARTBEAT_SECONDS sets it: the tests' half second)
HEARTBEAT_SECONDS = float(os.environ.get("PROFILE_ALL_HEARTBEAT_SECONDS", "") or 10.0)


def doing_file(scratch: str | Path, number: int) -> Path:
    return Path(scratch) / f"pass{number}.doing"


def say(path: Path, text: str) -> None:
    """`text` in `path`, whole (written beside and renamed); nothing where it cannot be (a
    full disk: the heartbeat then repeats what it said last)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        partial.write_text(text)
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()


def _read(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return path.read_text()[:200]
    except OSError:
        return ""


@contextlib.contextmanager
def beating(tell: Callable[[float, str], None] | None, path: Path | None = None,
            doing: str = "") -> Iterator[None]:
    """While the block runs, every HEARTBEAT_SECONDS after the first: `tell(seconds so far,
    what is being done)`, from `path` (the pass's file) or `doing`."""
    if tell is None:
        yield
        return
    done = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not done.wait(HEARTBEAT_SECONDS):
            with contextlib.suppress(Exception):  # a display must never stop a run
                tell(time.monotonic() - started, _read(path) or doing)

    thread = threading.Thread(target=beat, daemon=True, name="profile-all-heartbeat")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=1)
