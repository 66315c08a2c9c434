"""A process that says it listens for `profile-all attach` as a listening process does (its
marker, SIGUSR2 handled), run by a user who plants links in its listen folder: asked for
a window, it answers with its answer and trace as links to the files argv[2] and argv[3]
names (`/dev/zero`, a file of root's); argv[2] `plain`: a true answer; argv[3] `grows`: a
trace that a thread writes on for ever. It prints `ready`, then waits for the file
argv[1]."""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from profile_all import on_demand

stop, answer_to, trace_to = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
where = on_demand.own_folder()
pid = os.getpid()
me = f"{on_demand.pid_namespace()}-{pid}"  # as a listener names its files
(where / f"{me}.json").write_text(json.dumps({"pid": pid, "start": on_demand.start_time(pid)}))


def asked(signum, frame):
    request = where / f"{me}.request.json"
    try:
        window = json.loads(request.read_text())["id"]
    except (OSError, ValueError, KeyError):
        return
    trace = where / f"{me}.{window}.trace.json"
    if trace_to == "grows":  # past the attach's bound (1 MiB) before the answer, and on
        with open(trace, "wb") as out:  # (a thread alone lost the race on a loaded VM)
            out.write(b'{"traceEvents": [' + b" " * (2 << 20))
        threading.Thread(target=grow, args=(trace,), daemon=True).start()
    else:
        os.symlink(trace_to, trace)
    if answer_to == "plain":
        (where / f"{me}.{window}.done.json").write_text(json.dumps(
            {"steps": 5, "marked_by": "pa.step()", "note": ""}))
    else:
        os.symlink(answer_to, where / f"{me}.{window}.done.json")


def grow(trace: Path) -> None:
    with open(trace, "ab") as out:
        while not stop.exists():
            out.write(b" " * 65536)
            out.flush()


signal.signal(signal.SIGUSR2, asked)
print("ready", flush=True)
while not stop.exists():
    time.sleep(0.02)
