"""`python -m profile_all.worker SPEC.json`: one pass in a process of its own.

Whatever way the target ends, what the backends measured reaches the result file named in
the spec:
- a return, an exception, sys.exit or Ctrl-C unwind into `PassRun.finish`;
- SIGTERM and SIGHUP (the orchestrator's timeout sends SIGTERM) raise `Terminated` in the
  target, which unwinds the same way;
- `os._exit` is wrapped so that the pass is finished and written before the process ends;
- SIGKILL and crashes leave no chance: the orchestrator then asks each backend to
  `recover` what it journaled on disk.

Forked children of the target (DataLoader workers) inherit all this; they are recognised
by their pid and left to behave as they would without profile-all.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from time import perf_counter
from typing import Any

import orjson

from profile_all.fileio import write_atomic
from profile_all.passrun import Outcome, PassRun, Terminated

_WORKER_PID = os.getpid()
_real_os_exit = os._exit


def _raise_terminated(signum: int, frame: Any) -> None:
    if os.getpid() != _WORKER_PID:  # a forked child: die of the signal as it would have
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise Terminated(signum)


def _write_result(path: Path, result: dict[str, Any]) -> None:
    write_atomic(path, orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY))


def main(argv: list[str]) -> int:
    spec = orjson.loads(Path(argv[1]).read_bytes())
    result_path = Path(spec["result_path"])
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_terminated)
    pass_run = PassRun(spec, own_process=True)

    def exit_now(code: int) -> None:
        if os.getpid() == _WORKER_PID:
            outcome = Outcome("os_exit", code, f"os._exit({code})",
                              perf_counter() - pass_run.target_started)
            _write_result(result_path, pass_run.finish(outcome))
            sys.stdout.flush()
            sys.stderr.flush()
        _real_os_exit(code)

    os._exit = exit_now
    pass_run.start()
    outcome = pass_run.run_target()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # let collection finish
        signal.signal(signum, signal.SIG_IGN)
    result = pass_run.finish(outcome)
    os._exit = _real_os_exit
    _write_result(result_path, result)
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
