"""Allocates 100 MiB inside the region "big" and nothing inside "small"; with `children`,
a forked child holds 60 MiB while the parent waits; with `kill`, SIGKILLs itself."""

import multiprocessing
import os
import signal
import sys
import time

from memory_profiler import profile

import profile_all as pa

MIB = 2**20


def grow():
    blocks = []
    for _ in range(5):
        blocks.append(bytearray(20 * MIB))
        time.sleep(0.03)
    return blocks


@profile
def decorated():
    kept = bytearray(30 * MIB)
    time.sleep(0.03)
    return len(kept)


def child():
    kept = bytearray(60 * MIB)
    time.sleep(0.5)
    return len(kept)


with pa.region("small"):
    time.sleep(0.05)
with pa.region("big"):
    held = grow()
    time.sleep(0.05)
del held
decorated()
if "children" in sys.argv:
    worker = multiprocessing.get_context("fork").Process(target=child)
    worker.start()
    worker.join()
if "kill" in sys.argv:
    time.sleep(0.3)  # the sampler's file is flushed every 0.1 s
    os.kill(os.getpid(), signal.SIGKILL)
print("allocated")
