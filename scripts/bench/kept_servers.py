"""What `pa.keep_servers()` saves the runs of one Python process (a notebook's, a script's
that profiles one setting after another): each run starting its own fork server, against
the runs taking the server an earlier one left ready. Both in this process, interleaved
round by round, one thread: wall time of each run (the first run of a keeping starts the
server it keeps, and is shown apart) and CPU time of each block of runs, this process's
and its children's (the servers', and the passes they forked, once ended).

    OMP_NUM_THREADS=1 python scripts/bench/kept_servers.py [--rounds 3] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "scripts" / "examples" / "train_mlp.py"


def _cpu() -> float:
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _block(pa, keeping: bool, runs: int, out: Path) -> tuple[list[float], float]:
    """(each run's wall time, the block's CPU time) of `runs` runs of the demo."""
    walls, cpu = [], _cpu()
    with pa.keep_servers(limit=1 if keeping else 0):
        for number in range(runs):
            started = time.perf_counter()
            with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                pa.run(DEMO, ["--steps", "30"], backends=["wallclock"], observer=False,
                       out=out / f"{keeping}-{number}")
            walls.append(time.perf_counter() - started)
    return walls, _cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import profile_all as pa

    walls: dict[bool, list[float]] = {True: [], False: []}
    firsts: list[float] = []
    cpus: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_number in range(args.rounds):
            for keeping in (False, True):
                run_walls, cpu = _block(pa, keeping, args.runs, Path(scratch) / str(round_number))
                if keeping:
                    firsts.append(run_walls.pop(0))
                walls[keeping] += run_walls
                cpus[keeping].append(cpu / args.runs)
    median = statistics.median
    print(f"{args.rounds} rounds of {args.runs} runs of the demo (--steps 30, -b wallclock), "
          f"one thread, {sys.platform}")
    print(f"  a server each run:            {median(walls[False]):6.2f} s a run, "
          f"{median(cpus[False]):5.2f} CPU-s a run")
    print(f"  kept: the first run           {median(firsts):6.2f} s")
    print(f"  kept: the runs after it       {median(walls[True]):6.2f} s a run")
    print(f"  kept, the block               {'':6}   {median(cpus[True]):11.2f} CPU-s a run")
    print(f"  ratio, a later run's wall:    {median(walls[True]) / median(walls[False]):.2f}")
    print(f"  ratio, CPU a run:             {median(cpus[True]) / median(cpus[False]):.2f}")


if __name__ == "__main__":
    main()
