"""`python -m profile_all.memory_sampler PID INTERVAL PATH`: samples PID's memory from outside.

The memory backend starts this as a separate process, so that the samples cost the target
nothing but the sampler's CPU, and so that nothing of the sampler is counted: a sampler
forked inside the target (memory_profiler's `include_children` from within) counts itself
among the target's children. Here the sampler leaves its own pid out.

Each sample is written in memory_profiler's mprofile format, as `mprof run` writes it:
`MEM <MiB> <epoch>` for the process and `CHLD <pid> <MiB> <epoch>` for each live child
(DataLoader workers), flushed every FLUSH_SECONDS so that a target killed without warning
still leaves its timeline. The sampler ends when the target ends or on SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import psutil
from memory_profiler import _get_memory

FLUSH_SECONDS = 0.1
MIB = 2**20


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _children(process: psutil.Process) -> list[tuple[int, float]]:
    own = os.getpid()
    found = []
    try:
        children = process.children(recursive=True)
    except psutil.Error:
        return found
    for child in children:
        if child.pid == own:
            continue
        try:
            found.append((child.pid, child.memory_info().rss / MIB))
        except psutil.Error:  # it ended between the listing and the reading
            continue
    return found


def sample(pid: int, interval: float, path: str) -> None:
    process = psutil.Process(pid)
    flushed = time.monotonic()
    with open(path, "a") as out:
        try:
            while True:
                mib, stamp = _get_memory(pid, "psutil", timestamps=True)
                lines = [f"MEM {mib:.6f} {stamp:.4f}\n"]
                lines += [f"CHLD {child} {child_mib:.6f} {stamp:.4f}\n"
                          for child, child_mib in _children(process)]
                out.writelines(lines)
                if time.monotonic() - flushed > FLUSH_SECONDS:
                    out.flush()
                    flushed = time.monotonic()
                time.sleep(interval)
        except psutil.NoSuchProcess:  # the target ended
            return


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the target's Ctrl-C is not ours to die of
    pid, interval, path = int(argv[1]), float(argv[2]), argv[3]
    sample(pid, interval, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
