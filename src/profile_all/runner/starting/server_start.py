"""The fork server's start, seen from profile-all: said as it goes, and bounded.

The server imports torch (and the backends' libraries) before the first pass; on a loaded
machine that once took 250 s, with nothing said meanwhile. So the server says which
module it is importing, and profile-all, waiting for it to be ready:
- after NOTE_EVERY seconds without news, says what it waits for (`waiting for the fork
  server: importing torch, 20 s so far`), and again every NOTE_EVERY seconds;
- after DUMP_AFTER seconds, asks the server for its stack (SIGUSR1: faulthandler writes
  every thread's stack to stderr), which shows where an import is stuck;
- after START_LIMIT seconds, ends it and refuses the run in one line.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from profile_all.errors import UsageError

NOTE_EVERY = 10.0
DUMP_AFTER = 60.0
START_LIMIT = 600.0


class StartStalled(UsageError):
    """The fork server did not get ready within START_LIMIT seconds."""


def _said(text: str) -> None:
    print(f"profile-all: {text}", file=sys.stderr, flush=True)


def wait_ready(read: Callable[[float], dict[str, Any] | None], process: Any,
               note: Callable[[str], None] = _said) -> None:
    """Read the server's messages (`read(timeout)`) until it says it is ready."""
    started, importing, asked = time.monotonic(), "its modules", False
    while True:
        try:
            message = read(NOTE_EVERY)
        except TimeoutError:
            waited = time.monotonic() - started
            if waited > START_LIMIT:
                process.kill()
                raise StartStalled(
                    f"the fork server did not get ready in {START_LIMIT:.0f} s (it was "
                    f"importing {importing}; its stack is above): the machine is too loaded, "
                    "or an import is stuck") from None
            note(f"waiting for the fork server: importing {importing}, {waited:.0f} s so far")
            if waited > DUMP_AFTER and not asked:
                asked = True
                os.kill(process.pid, signal.SIGUSR1)  # its stack: where the import is
            continue
        if message is None:
            raise OSError(f"the fork server did not start (exit {process.poll()})")
        if "importing" in message:
            importing = message["importing"]
        elif "ready" in message:
            return
