"""Runs a few regions and steps, then ends the way argv[1] says: ok, raise, exit3, os_exit5,
sigterm, sigkill, sleep (forever, for timeouts and Ctrl-C)."""
import os
import signal
import sys
import time

import profile_all as pa

how = sys.argv[1]
for _ in range(3):
    with pa.region("work"):
        time.sleep(0.01)
    pa.step()
time.sleep(0.25)  # past the wall-clock journal's flush interval
with pa.region("last"):
    pass
pa.step()
if how != "sleep":
    print("ready", flush=True)

if how == "raise":
    raise RuntimeError("boom from the target")
if how == "exit3":
    sys.exit(3)
if how == "os_exit5":
    os._exit(5)
if how == "sigterm":
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
if how == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
if how == "sleep":
    with pa.region("sleeping"):
        print("ready", flush=True)  # inside it: a stop sent on "ready" finds it open
        time.sleep(600)
print("finished", flush=True)
