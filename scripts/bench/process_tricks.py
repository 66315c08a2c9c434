"""What each of the runner's process tricks gains, measured by running commands with it and
without it (the trick patched out in the command's own process, nothing else changed),
interleaved round by round, one thread; whole commands, wall time, medians.

- the fork server (runner/starting/forkserver.py): passes forked from a process that
  imported torch once, against each pass in a fresh interpreter; on the demo's default run
  (one process hosts the windows) and with --separate-passes (a process a pass)
- the early server (runner/starting/early_server.py): the server started as the command
  starts, before the CLI's imports, against started once the run is set up
- the prestarted interpreter (runner/starting/prestarted.py): a model's timing pass's
  fresh interpreter started at the run's start, against started when the pass is due

    OMP_NUM_THREADS=1 python scripts/bench/process_tricks.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = [str(ROOT / "scripts" / "examples" / "train_mlp.py")]
MODEL = ["model", f"{ROOT / 'scripts' / 'examples' / 'models.py'}:small_cnn",
         "--input-shape", "16,3,32,32", "--iters", "50"]
NO_EARLY = ("import profile_all.runner.starting.early_server as early\n"
            "early.start_for = lambda argv: None\n")
NO_SERVER = NO_EARLY + ("import profile_all.runner.orchestrator as run\n"
                        "run._server = lambda setup: None\n")
NO_PRESTART = ("import profile_all.runner.orchestrator as run\n"
               "run._prestarted = lambda setup, passes: None\n")
MAIN = "from profile_all.entry import main\nmain()\n"
#: (what is compared, the command's arguments, the patch that takes the trick out)
CASES = [
    ("fork server, default run (demo)", ["run", *DEMO], NO_SERVER, ["--", "--steps", "100"]),
    ("fork server, --separate-passes (demo)", ["run", "--separate-passes", *DEMO],
     NO_SERVER, ["--", "--steps", "100"]),
    ("early server, default run (demo)", ["run", *DEMO], NO_EARLY, ["--", "--steps", "100"]),
    ("prestarted interpreter, model", MODEL, NO_PRESTART, []),
]


def _timed(patch: str, args: list[str]) -> float:
    command = [sys.executable, "-c", patch + MAIN, *args]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   cwd=ROOT)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    times: dict[str, tuple[list[float], list[float]]] = {c[0]: ([], []) for c in CASES}
    with tempfile.TemporaryDirectory() as scratch:
        for number in range(rounds):
            for case, (name, args, patch, tail) in enumerate(CASES):
                for which, code in enumerate(("", patch)):  # with the trick, without it
                    out = Path(scratch) / f"{case}-{which}-{number}"
                    times[name][which].append(_timed(code, [*args, "-o", str(out), *tail]))
    for name, (with_it, without) in times.items():
        kept, lost = statistics.median(with_it), statistics.median(without)
        print(f"{name}: with {kept:.2f} s, without {lost:.2f} s, gain {lost - kept:+.2f} s "
              f"({lost / kept:.2f}x)")


if __name__ == "__main__":
    main()
