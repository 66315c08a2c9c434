"""Spends its time in a child Python process it starts, and says which processes it saw
below it meanwhile (a profiler that samples from outside is not one of them)."""

import contextlib
import subprocess
import sys
import time

import psutil

BUSY = "import time\nend = time.time() + 1.0\nwhile time.time() < end:\n    sum(range(1000))\n"
child = subprocess.Popen([sys.executable, "-c", BUSY])
seen = set()
while child.poll() is None:
    for below in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            seen.add(below.name())
    time.sleep(0.02)
print("below:", ",".join(sorted(seen)))
