"""`profile-all ingest` of many rank traces beside Holistic Trace Analysis loading them.

Rank files are made by copying a real trace with new ranks (`distributedInfo.rank`): the
two-rank pair of HTA's own tests in ../shared/fixtures, or --trace. For each count of
rank files, in one run and alternating which goes first, each in a fresh process:

- HTA: `TraceAnalysis(trace_dir)` (its load, which parses ranks in parallel) and its
  temporal breakdown, overlap and kernel breakdown;
- profile-all: `profile-all ingest DIR -o OUT`, the whole report written (tables, HTML,
  summary.md), every analysis included.

Wall time is the command's, run with nothing watching it; peak memory is measured in a
run of its own: the largest sum of PSS (proportional set size: a page shared by n
processes counts 1/n in each) over the process and its children, sampled every 50 ms (both
tools fork workers, whose pages shared with their parent a sum of RSS would count once per
process). Reading each process's page map 20 times a second takes a core's share of a
2-core machine, and more of it the more processes a tool runs: the time of a sampled run
measured the sampler too. Goal (issue 26): at 8 rank
files, profile-all <= 0.5x HTA's wall time and <= HTA's peak memory.

    python scripts/bench/ingest_vs_hta.py [--ranks 1,8,64] [--rounds 2] [--trace FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "traces"
HTA = """
import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
analysis.get_temporal_breakdown(visualize=False)
analysis.get_comm_comp_overlap(visualize=False)
analysis.get_gpu_kernel_breakdown(visualize=False)
"""


def rank_files(sources: list[Path], count: int, folder: Path) -> Path:
    """`count` rank traces in `folder`, copies of `sources` in turn with ranks 0..count-1."""
    folder.mkdir(parents=True)
    documents = [json.loads(gzip.decompress(path.read_bytes())) if path.suffix == ".gz"
                 else json.loads(path.read_bytes()) for path in sources]
    for rank in range(count):
        document = documents[rank % len(documents)]
        document["distributedInfo"] = {**document.get("distributedInfo", {}), "rank": rank,
                                       "world_size": count}
        (folder / f"rank-{rank}.json.gz").write_bytes(
            gzip.compress(json.dumps(document).encode(), compresslevel=1))
    return folder


def timed(command: list[str]) -> float:
    """Seconds of a command run to its end, nothing else running beside it."""
    started = time.perf_counter()
    ended = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - started
    if ended.returncode != 0:
        sys.exit(f"{command[:4]} failed: {ended.stderr.decode()[-2000:]}")
    return seconds


def peak_memory(command: list[str]) -> int:
    """Peak PSS of the process tree in bytes, of a command run to its end."""
    process = psutil.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while process.poll() is None:
        total = 0
        try:
            for one in [process, *process.children(recursive=True)]:
                total += one.memory_full_info().pss
        except psutil.Error:
            pass
        peak = max(peak, total)
        time.sleep(0.05)
    if process.returncode != 0:
        sys.exit(f"{command[:4]} failed: {process.stderr.read().decode()[-2000:]}")
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="1,8,64")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--trace", type=Path, action="append")
    options = parser.parse_args()
    sources = options.trace or sorted(FIXTURES.glob("sampled_rank-*.json.gz"))
    if not sources:
        sys.exit(f"no trace: pass --trace FILE (the fixtures are not at {FIXTURES})")
    print(f"rank files copied from {', '.join(path.name for path in sources)}; "
          f"{psutil.cpu_count()} CPUs; median of {options.rounds} rounds")
    print(f"{'ranks':>5} {'HTA s':>8} {'ours s':>8} {'time x':>7} "
          f"{'HTA MB':>8} {'ours MB':>8} {'memory x':>8}")
    with tempfile.TemporaryDirectory() as scratch:
        for count in map(int, options.ranks.split(",")):
            folder = rank_files(sources, count, Path(scratch) / f"ranks{count}")
            seconds: dict[str, list[float]] = {"hta": [], "ours": []}
            peaks: dict[str, list[int]] = {"hta": [], "ours": []}
            for round_ in range(options.rounds):
                for way, measure, kept in ((0, timed, seconds), (1, peak_memory, peaks)):
                    out = Path(scratch) / f"out{count}-{round_}-{way}"
                    runs = [("hta", [sys.executable, "-c", HTA, str(folder)]),
                            ("ours", [sys.executable, "-m", "profile_all", "ingest",
                                      str(folder), "-o", str(out)])]
                    for who, command in runs if round_ % 2 == 0 else runs[::-1]:
                        kept[who].append(measure(command))
            hta_s, our_s = (statistics.median(seconds[who]) for who in ("hta", "ours"))
            hta_m, our_m = (statistics.median(peaks[who]) for who in ("hta", "ours"))
            print(f"{count:>5} {hta_s:>8.2f} {our_s:>8.2f} {our_s / hta_s:>7.2f} "
                  f"{hta_m / 1e6:>8.0f} {our_m / 1e6:>8.0f} {our_m / hta_m:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
