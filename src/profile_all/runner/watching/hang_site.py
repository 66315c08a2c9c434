"""Where a pass's target hung, read as it is stopped at its timeout: py-spy's dump of its
process (the stacks of every thread, read from outside: no signal the target might handle
otherwise, as a SLURM job's SIGUSR1 requeues it), the main thread's innermost frame of the
target's own code and, where it differs, the innermost frame of all."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from profile_all.backends.py_spy_recorder import binary

#: frames of profile-all's own package and of runpy: where the target was started from
_OWN = (os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        os.path.join(os.path.dirname(os.__file__), "runpy"), "<frozen runpy>")
#: a dump of a stuck process takes a fraction of a second; a slow one is not waited for
DUMP_SECONDS = 10


def _frame(frame: dict[str, Any]) -> str:
    where = os.path.relpath(frame["filename"]) if os.path.isabs(
        str(frame.get("filename"))) else frame.get("filename")
    return f"{frame.get('name')} ({where}:{frame.get('line')})"


def main_thread_frames(pid: int) -> list[dict[str, Any]]:
    """py-spy's dump of the process's main thread, innermost frame first; [] where py-spy
    is not there or cannot read it."""
    spy = binary()
    if spy is None:
        return []
    try:
        dumped = subprocess.run([spy, "dump", "--pid", str(pid), "--json"],
                                capture_output=True, text=True, timeout=DUMP_SECONDS)
        threads = json.loads(dumped.stdout)
    except (OSError, ValueError, subprocess.SubprocessError):
        return []
    main = next((t for t in threads if t.get("thread_name") == "MainThread"),
                threads[0] if threads else {})
    return main.get("frames") or []


def where(pid: int, script: str = "") -> str:
    """`spin (train.py:12), inside time.sleep (...)` for the process's main thread; ""
    where py-spy is not there or cannot read it."""
    frames = [frame for frame in main_thread_frames(pid)
              if not str(frame.get("filename", "")).startswith(_OWN)]
    if not frames:
        return ""
    own = next((frame for frame in frames if script and frame.get("filename") == script),
               frames[0])
    inner = "" if own is frames[0] else f", inside {_frame(frames[0])}"
    return _frame(own) + inner
