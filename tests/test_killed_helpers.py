"""A helper process of profile-all's killed as a pass runs (the out-of-memory killer, a
user's `pkill`): py-spy, the memory sampler. The pass goes on, keeps what can be kept, and
says what was lost and why, not "could not sample"."""

from __future__ import annotations

import os
import signal

import psutil

import profile_all as pa
from conftest import Running, processes_with

SPINS = """import sys, time
from pathlib import Path
import profile_all as pa

def spin():
    with pa.region("spin"):
        began = time.perf_counter()
        while time.perf_counter() - began < 0.02:
            pass
    pa.step()

runs = Path(sys.argv[1] + ".runs")  # the second run (pass 2) waits to be told
runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
for _ in range(5):
    spin()
print("ready", flush=True)
while runs.read_text() == "xx" and not Path(sys.argv[1]).exists():
    spin()
for _ in range(10):
    spin()
"""


def _killed_in_pass_2(tmp_path, backend: str, helper: str) -> pa.Report:
    """Run SPINS with `backend` (its pass is the second), kill its `helper` process (a
    command line holding that text) as the target runs, let the target end."""
    script, go_on = tmp_path / "spins.py", tmp_path / "go-on"
    script.write_text(SPINS)
    with Running("run", script, "-b", backend, "--pass-steps", "all", "--show-output", "all",
                 "-o", tmp_path / "run", "--", go_on) as running:
        running.wait_for("ready")  # the timing pass
        running.wait_for("ready")  # the second pass, which waits
        found = [p for p in psutil.process_iter(["cmdline"])
                 if helper in " ".join(p.info["cmdline"] or []) and str(tmp_path) in
                 " ".join(p.info["cmdline"] or [])]
        assert len(found) == 1, found
        os.kill(found[0].pid, signal.SIGKILL)
        go_on.touch()
        assert running.finish() == 0, running.stderr
    return pa.load(tmp_path / "run")


def _lost(report: pa.Report) -> list[str]:
    return [f["error"] for f in report.meta.passes[1].backend_failures]


def test_py_spy_killed_is_said_as_killed(tmp_path):
    report = _killed_in_pass_2(tmp_path, "py-spy", "py-spy record")
    assert report.meta.status == "partial"
    lost = _lost(report)
    assert len(lost) == 1 and lost[0].startswith(
        "ProfileAllError: py-spy ended without writing its samples of process ")
    assert lost[0].endswith("(killed, by a signal or the out-of-memory killer, its log says "
                            "nothing more): what it sampled is lost"), lost
    assert processes_with("py-spy record") == []


def test_the_memory_sampler_killed_keeps_its_samples_and_says_so(tmp_path):
    report = _killed_in_pass_2(tmp_path, "memory", "memory/sampler.py")
    assert report.meta.status == "partial"
    lost = _lost(report)
    assert len(lost) == 1 and lost[0].startswith(
        "the memory sampler was killed by SIGKILL before the target ended: its samples "
        "cover "), lost
    frame = report.frame
    kept = frame[(frame["backend"] == "memory") & (frame["metric"] == "memory_samples")]
    assert kept["value"].item() > 0  # the samples up to its end are in the report


def test_a_sampler_stopped_with_its_target_has_lost_nothing(tmp_path):
    """A pass stopped at its timeout stops its memory sampler with it: its samples cover
    the target's time, and no loss is said (one was, a false alarm); one that ended early
    still says what its samples miss."""
    from profile_all.backends.memory.backend import _sampler_died

    samples = tmp_path / "samples"
    samples.write_text("".join(f"MEM 100.0 {1000 + t / 10:.1f}\n" for t in range(50)))
    assert _sampler_died(0, samples, 5.0, 0.5) == ""  # 4.9 s of 5 s
    assert _sampler_died(-signal.SIGTERM, samples, 5.0, 0.5) == ""
    assert _sampler_died(-signal.SIGKILL, samples, 5.0, 0.5).startswith(
        "the memory sampler was killed by SIGKILL before the target ended")
    assert _sampler_died(0, samples, 9.0, 0.5).startswith(
        "the memory sampler exited 0 before the target ended: its samples cover 4.9 s of "
        "the target's 9 s")
