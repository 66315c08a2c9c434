"""A fresh interpreter for a pass, started before the pass is due.

A pass that must run in a fresh interpreter (a model's timing pass, the repeats of a
script's timing pass: their heap is a process's own, as the user's is) pays `import torch`
(1.3 s on a small machine) after every pass before it. Started at the run's start instead,
the interpreter imports while the fork server imports and the target is checked, then
waits, importing nothing more and running nothing, until the pass's spec comes on a pipe
of its own (the target's stdin stays the target's). It is the same fresh process, its
imports done earlier: nothing of it is forked or shared.

Measured gain: `profile-all model scripts/examples/models.py:small_cnn --input-shape
16,3,32,32 --iters 50`, whole commands, medians (scripts/bench/process_tricks.py, 3
rounds, one thread, 2-core VM, 2026-11-28): 3.30 s against 4.00 s started when due,
0.70 s.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

WORKER = "profile_all.runner.inside.worker"
#: the worker's first argument when its spec comes on a descriptor: `--spec-from-fd FD
#: MODULE...` (the modules imported while it waits)
SPEC_FROM_FD = "--spec-from-fd"


class PrestartedWorker:
    def __init__(self, modules: list[str], env: dict[str, str]) -> None:
        read_end, self._write_end = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", WORKER, SPEC_FROM_FD, str(read_end), *modules],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                env=env, pass_fds=(read_end,))
        finally:
            os.close(read_end)
        self.given = False

    def start(self, spec_path: os.PathLike[str] | str) -> subprocess.Popen:
        """The worker, told to run the pass of `spec_path`."""
        os.write(self._write_end, os.fsencode(spec_path) + b"\n")
        os.close(self._write_end)
        self.given = True
        return self.process

    def close(self) -> None:
        """A worker never given its pass is ended at once: it has run nothing of the
        target, and waiting for its imports to end would hold the run's end."""
        if self.given:
            return
        os.close(self._write_end)
        self.given = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            pipe.close()


def spec_path_from(argv: list[str]) -> str | None:
    """In the worker: import the modules `argv` names, then wait for the spec's path on the
    descriptor it names; None when the pipe closes without one (the run needs it no more)."""
    import importlib

    descriptor, modules = int(argv[2]), argv[3:]
    for module in modules:
        importlib.import_module(module)
    with os.fdopen(descriptor, "rb") as pipe:
        line = pipe.readline().strip()
    return os.fsdecode(line) if line else None
