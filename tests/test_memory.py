"""The memory backend: RSS sampled from outside by pid, regions on the timeline, children
apart, line-by-line memory, and an mprofile.dat that memory_profiler's own mprof reads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here, value_of

MIB = 2**20
MPROF = shutil.which("mprof") or str(Path(sys.executable).with_name("mprof"))


def _memory_rows(run_dir: Path):
    frame = pa.load(run_dir).frame
    return frame[frame["backend"] == "memory"]


def test_region_peaks_and_mprofile_file(tmp_path):
    out = tmp_path / "run"
    done = profile_all_here("run", TARGETS / "allocates.py", "-b", "memory", "-o", out)
    assert done.returncode == 0, done.stderr
    assert "allocated" in done.stdout
    rows = _memory_rows(out)
    big = value_of(rows, scope="region", name="big", metric="rss_increase", stat="max")
    small = value_of(rows, scope="region", name="small", metric="rss_increase", stat="max")
    assert 95 * MIB <= big <= 140 * MIB
    assert small < 10 * MIB
    peak = value_of(rows, scope="run", metric="peak_rss", stat="max")
    baseline = value_of(rows, scope="run", metric="baseline_rss", stat="value")
    assert peak - baseline >= 95 * MIB
    # no child process ran: the sampler, a child of the target, is not counted as one
    assert rows[rows["metric"].isin(["peak_rss_children", "child_processes"])].empty
    report = pa.load(out)
    timeline = report.memory()
    assert len(timeline) >= 20 and timeline["time"].is_monotonic_increasing
    assert timeline["process"].max() == peak
    # the regions' calls are on the timeline, where the RSS rose
    big_call = report.timeline[(report.timeline["series"] == "region")
                               & (report.timeline["name"] == "big")
                               & (report.timeline["backend"] == "memory")]
    assert len(big_call) == 1
    during = timeline[timeline["time"].between(big_call["start"].item(), big_call["end"].item()
                                               + 0.05)]
    assert during["process"].max() - timeline["process"].iloc[0] >= 95 * MIB
    _read_as_format_1(out, tmp_path / "v1", report)

    dat = out / "artifacts" / "mprofile.dat"
    text = dat.read_text()
    assert text.startswith("CMDLINE python ")
    assert re.search(r"^FUNC big \S+ \S+ \S+ \S+ 0$", text, re.M)
    mprof_peak = subprocess.run([MPROF, "peak", str(dat)], capture_output=True, text=True,
                                check=True).stdout
    assert abs(float(re.search(r"([\d.]+) MiB", mprof_peak).group(1)) - peak / MIB) < 0.01
    plot = tmp_path / "plot.png"
    subprocess.run([MPROF, "plot", "-o", str(plot), str(dat)], check=True,
                   capture_output=True, env={"MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"})
    assert plot.read_bytes().startswith(b"\x89PNG")

    ingested = profile_all_here("ingest", dat, "-o", tmp_path / "ingested")
    assert ingested.returncode == 0, ingested.stderr
    again = pa.load(tmp_path / "ingested").frame
    assert abs(value_of(again, scope="run", metric="peak_rss", stat="max") - peak) < MIB / 1e3


def _read_as_format_1(out, copy, report):
    """A run folder written by format 1 (the timeline in the frame, its time in the stat
    column as `t=...`, no timeline.parquet) still gives the same memory timeline."""
    shutil.copytree(out, copy)
    rss = report.timeline[report.timeline["series"] == "rss"]
    old_rows = pd.DataFrame({
        "backend": rss["backend"], "pass": rss["pass"], "rank": rss["rank"],
        "scope": "memory", "name": rss["name"], "parent": "", "metric": "rss",
        "stat": [f"t={t:.4f}" for t in rss["start"]], "value": rss["value"], "unit": "B"})
    pd.concat([report.frame, old_rows], ignore_index=True).to_parquet(
        copy / "report.parquet", index=False)
    (copy / "timeline.parquet").unlink()
    meta = json.loads((copy / "meta.json").read_text())
    meta["format"] = 1
    (copy / "meta.json").write_text(json.dumps(meta))
    old = pa.load(copy)
    assert old.frame.equals(report.frame)
    assert old.memory()["process"].tolist() == report.memory()["process"].tolist()
    assert (old.memory()["time"] - report.memory()["time"]).abs().max() < 1e-4


def test_children_are_counted_apart(tmp_path):
    out = tmp_path / "run"
    done = profile_all_here("run", TARGETS / "allocates.py", "-b", "memory", "-o", out, "--",
                            "children")
    assert done.returncode == 0, done.stderr
    rows = _memory_rows(out)
    assert value_of(rows, scope="run", metric="child_processes") == 1
    assert value_of(rows, scope="run", metric="peak_rss_children", stat="max") >= 60 * MIB
    assert "CHLD " in (out / "artifacts" / "mprofile.dat").read_text()
    timeline = pa.load(out).memory()
    assert timeline["children"].max() >= 60 * MIB


def test_line_by_line_for_named_and_decorated_functions(tmp_path):
    out = tmp_path / "run"
    done = profile_all_here("run", TARGETS / "allocates.py", "-b", "memory", "-o", out,
                            "--memory-lines", "allocates:grow")
    assert done.returncode == 0, done.stderr
    # memory_profiler's own table is printed by the script's @profile in the timing pass,
    # as the script prints it, and not in the memory pass, which measures it instead
    memory_pass = (out / "artifacts" / "pass2.stdout.log").read_text()
    assert "Line #" in done.stdout and "Line #" not in memory_pass
    lines = pa.load(out).lines()
    append = lines[lines["line"].str.contains("blocks.append", regex=False)]
    assert append["calls"].item() == 5
    assert 95 * MIB <= append["rss_increment"].item() <= 110 * MIB
    decorated = lines[lines["line"].str.contains("kept = bytearray(30", regex=False)]
    assert decorated["function"].item().endswith("(decorated)")
    assert decorated["rss_increment"].item() >= 28 * MIB
    # the def line is the function's entry: its 'increment' was the process's whole RSS
    entry = lines[lines["line"].str.contains("def grow():", regex=False)]
    assert entry["rss_increment"].isna().all() and (entry["calls"] > 0).all()
    # lines asked for are shown whole, in summary.md and the terminal, whatever --top
    summary = (out / "summary.md").read_text()
    assert "blocks.append(bytearray(20 * MIB))" in summary
    assert "blocks.append" in done.stderr
    assert (lines["named"] == 1).all()


def test_a_killed_target_keeps_its_timeline(tmp_path):
    out = tmp_path / "run"
    done = profile_all_here("run", TARGETS / "allocates.py", "-b", "memory", "-o", out, "--",
                            "kill")
    assert done.returncode == 137, done.stderr
    assert "killed by SIGKILL" in done.stderr
    rows = _memory_rows(out)
    assert value_of(rows, scope="run", metric="peak_rss", stat="max") >= 95 * MIB
    assert not pa.load(out).memory().empty


CUDA_REGIONS = """
import torch
import profile_all as pa

MIB = 2**20
torch.zeros(1, device="cuda")
with pa.region("outer"):
    kept = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
    with pa.region("inner"):
        passing = torch.empty(128 * MIB, dtype=torch.uint8, device="cuda")
        del passing
    with pa.region("after"):
        small = torch.empty(MIB, dtype=torch.uint8, device="cuda")
"""


@pytest.mark.gpu
def test_cuda_peaks_per_region_are_reset_and_nested(tmp_path):
    script = tmp_path / "cuda_regions.py"
    script.write_text(CUDA_REGIONS)
    out = tmp_path / "run"
    done = profile_all_here("run", script, "-b", "memory", "-o", out)
    assert done.returncode == 0, done.stderr
    rows = _memory_rows(out)

    def peak(name):
        return value_of(rows, scope="region", name=name, metric="gpu_mem_peak", stat="max")

    assert peak("inner") >= 384 * MIB  # the 256 MiB kept plus its own 128 MiB
    assert peak("outer") >= 384 * MIB  # its child's peak folded in
    assert 257 * MIB <= peak("after") < 300 * MIB  # reset when it opened: not the 384
    assert value_of(rows, scope="run", metric="gpu_mem_peak", stat="max") >= 384 * MIB


CUDA_LEAK = """
import torch
import profile_all as pa

kept = []
for _ in range(40):
    kept.append(torch.empty(16 * 2**20, dtype=torch.uint8, device="cuda"))  # never freed
    pa.step()
"""


@pytest.mark.gpu
def test_cuda_memory_kept_step_after_step_is_a_finding(tmp_path):
    script = tmp_path / "cuda_leak.py"
    script.write_text(CUDA_LEAK)
    report = pa.run(script, backends=["memory"], pass_steps="all", out=tmp_path / "run")
    cuda = report.timeline[report.timeline["series"] == "cuda"]
    assert len(cuda) == 40  # the allocated memory as each step ended
    assert (cuda["value"].diff().dropna() >= 16 * MIB).all()
    found = report.findings()
    leak = found[found["finding"].str.contains("CUDA memory allocated")]
    assert len(leak) == 1 and leak["amount"].iloc[0] == pytest.approx(16 * MIB * 29, rel=0.05)


def test_a_region_whose_calls_were_all_left_out_has_no_rows():
    """Its calls all inside other passes' windows (left out): the memory pass once failed
    in collect on it (a maximum of nothing), losing every region's rows."""
    from array import array

    import numpy as np

    from profile_all.readers.mprofile import Mprofile
    from profile_all.readers.mprofile_rows import region_rows

    profile = Mprofile(times=np.array([1.0, 2.0, 3.0]), rss=np.array([10.0, 30.0, 20.0]))
    rows = region_rows(profile, {("gone", ""): (array("d"), array("d")),
                                 ("kept", ""): (array("d", [1.5]), array("d", [2.5]))})
    assert [(r[1], r[3], r[5]) for r in rows] == [("kept", "peak_rss", 30.0),
                                                  ("kept", "rss_increase", 20.0)]
