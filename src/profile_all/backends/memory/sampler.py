"""`python .../backends/memory/sampler.py PID INTERVAL PATH`: samples PID's memory.

The memory backend starts this as a separate process, so that the samples cost the target
nothing but the sampler's CPU, and so that nothing of the sampler is counted: a sampler
forked inside the target (memory_profiler's `include_children` from within) counts itself
among the target's children. Here the sampler leaves its own pid out.

Each sample is written in memory_profiler's mprofile format, as `mprof run` writes it:
`MEM <MiB> <epoch>` for the process and `CHLD <pid> <MiB> <epoch>` for each live child
(DataLoader workers; one that lives less than CHILD_SCAN_SECONDS may be missed), flushed
every FLUSH_SECONDS so that a target killed without warning still leaves its timeline.
The sampler ends when the target ends or on SIGTERM.

A sample is what memory_profiler's psutil backend reads (the process's RSS), read here
from one psutil.Process: importing memory_profiler imports IPython, a tenth of a second
before the first sample, which every memory pass waited for.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

import psutil

FLUSH_SECONDS = 0.1
#: listing the target's descendants reads every process in /proc (1.2 ms on a small VM,
#: 24 times a sample's cost), so children are looked for this often and sampled each time
CHILD_SCAN_SECONDS = 0.1
MIB = 2**20


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _children(process: psutil.Process) -> list[psutil.Process]:
    """The target's descendants, less this sampler."""
    try:
        return [child for child in process.children(recursive=True)
                if child.pid != os.getpid()]
    except psutil.Error:
        return []


def _child_lines(children: list[psutil.Process], stamp: float) -> list[str]:
    lines = []
    for child in children:
        try:
            lines.append(f"CHLD {child.pid} {child.memory_info().rss / MIB:.6f} {stamp:.4f}\n")
        except psutil.Error:  # it ended since the last scan
            continue
    return lines


def sample(pid: int, interval: float, path: str) -> None:
    process = psutil.Process(pid)
    scanned = time.monotonic()
    flushed = scanned - FLUSH_SECONDS  # the first sample at once: the target waits for it
    children = _children(process)
    with open(path, "a") as out:
        try:
            while True:
                mib, stamp = process.memory_info().rss / MIB, time.time()
                out.write(f"MEM {mib:.6f} {stamp:.4f}\n")
                out.writelines(_child_lines(children, stamp))
                now = time.monotonic()
                if now - scanned > CHILD_SCAN_SECONDS:
                    children, scanned = _children(process), now
                if now - flushed > FLUSH_SECONDS:
                    out.flush()
                    flushed = now
                time.sleep(interval)
        except psutil.NoSuchProcess:  # the target ended
            return


def _die_with_parent() -> None:
    """End with the process that started this one, however that ends (Linux): a
    SIGKILL'd `profile-all attach` left its sampler running for as long as the target."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PDEATHSIG


def main(argv: list[str]) -> int:
    _die_with_parent()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the target's Ctrl-C is not ours to die of
    pid, interval, path = int(argv[1]), float(argv[2]), argv[3]
    sample(pid, interval, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
