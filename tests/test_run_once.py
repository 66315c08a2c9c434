"""The script runs once: the clean timing pass runs it whole and hosts each other pass in a
window of its steps (runner/inside/windows.py); each figure of a window is its steps', the
timing pass's leave the windows out, and what the script did is what it does bare."""

from __future__ import annotations

import subprocess
import sys

import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here

TARGET = TARGETS / "run_once.py"
BACKENDS = ["-b", "wallclock", "-b", "memory", "-b", "cprofile", "-b", "torch-profiler",
            "-b", "flop-counter"]
#: forward and backward of the MLP a step, by hand: 2 x rows x in x out a Linear forward;
#: backward twice that, but the first Linear's input gradient (the data needs none)
FORWARD = 2 * 8 * 32 * 64 + 2 * 8 * 64 * 4
BACKWARD = 2 * FORWARD - 2 * 8 * 32 * 64


def _value(report: pa.Report, backend: str, scope: str, name: str, metric: str,
           stat: str = "total") -> float:
    frame = report.frame
    picked = frame[(frame["backend"] == backend) & (frame["scope"] == scope)
                   & (frame["name"] == name) & (frame["metric"] == metric)
                   & (frame["stat"] == stat)]
    return float(picked["value"].item())


@pytest.fixture(scope="module")
def once(tmp_path_factory):
    folder = tmp_path_factory.mktemp("once")
    runs = folder / "runs.txt"
    done = profile_all_here("run", TARGET, *BACKENDS, "-o", folder / "run", "--", runs)
    assert done.returncode == 0, done.stderr[-3000:]
    bare = subprocess.run([sys.executable, str(TARGET), folder / "bare.txt"],
                          capture_output=True, text=True, check=True).stdout
    return pa.load(folder / "run"), runs, done, bare


def test_the_script_runs_once_and_prints_what_it_prints_bare(once):
    report, runs, done, bare = once
    assert runs.read_text() == "set-up\n"
    assert done.stdout == bare  # three profilers' windows changed none of its results
    # one process, forked (from a server new or kept: conftest)
    assert report.meta.process_start in ("fork", "fork from a server kept from an earlier run")


def test_each_pass_is_a_window_of_the_timing_pass_s_steps(once):
    report = once[0]
    host, *hosted = report.meta.passes
    assert (host.backends, host.steps, host.host) == (["wallclock", "memory"], 40, None)
    # after 5 clean steps, a window of 6, 2 clean steps (the first holds the window's stop)
    assert [(p.backends, p.host, p.steps, p.window, p.window_from) for p in hosted] == [
        (["cprofile"], 1, 6, 6, 6), (["torch-profiler"], 1, 6, 6, 14),
        (["flop-counter"], 1, 6, 6, 22)]
    assert host.window_steps == [6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19, 20,
                                 22, 23, 24, 25, 26, 27, 28]
    for summary in hosted:  # each measured against the clean steps, per step
        assert summary.overhead_basis.startswith("per-step times"), summary
        assert summary.logs == ["artifacts/pass1.stdout.log", "artifacts/pass1.stderr.log"]
    said = [line for line in report.meta.doubts if line.startswith("the script ran once")]
    assert said == [
        "the script ran once: passes 2 (cprofile) steps 6-11, 3 (torch-profiler) steps 14-19, "
        "4 (flop-counter) steps 22-27 ran in windows of steps inside pass 1's process; their "
        "totals (functions, operators, FLOPs, memory) cover those steps, per-step and "
        "per-call figures compare; pass 1's run time holds the windows, its per-step and "
        "region figures leave them out"]


def test_the_timing_pass_leaves_the_windows_out(once):
    report = once[0]
    host = report.meta.passes[0]
    # every step and region call counted, per-step and per-call figures without the windows
    assert _value(report, "wallclock", "step", "step", "calls") == 40
    assert _value(report, "wallclock", "step", "step", "excluded_calls") == 1 + len(
        host.window_steps)
    assert _value(report, "wallclock", "region", "forward", "calls") == 40
    assert _value(report, "wallclock", "region", "forward", "excluded_calls") == 18
    samples = report.samples
    regions = samples[(samples["backend"] == "wallclock") & (samples["name"] == "forward")]
    assert len(regions) == 40 - 18


def test_each_window_s_figures_are_its_steps(once):
    report = once[0]
    functions = report.functions().set_index("name")
    batch = next(name for name in functions.index if name.endswith("(batch)"))
    assert functions.loc[batch, "calls"] == 6  # cProfile: a call a step, 6 steps
    assert _value(report, "torch-profiler", "step", "ProfilerStep", "calls") == 6
    assert _value(report, "flop-counter", "step", "step", "calls") == 6
    assert _value(report, "flop-counter", "step", "step", "flops", "mean") == FORWARD + BACKWARD
    assert _value(report, "flop-counter", "run", "run", "flops") == 6 * (FORWARD + BACKWARD)


def test_windows_count_the_script_s_own_steps_not_an_evaluation_s_calls(tmp_path):
    """Ten model calls under no_grad before the first optimizer step looked like steps (an
    inference loop's): windows begun on them count again on the optimizer's."""
    runs = tmp_path / "runs.txt"
    done = profile_all_here("run", TARGET, "-b", "wallclock", "-b", "cprofile", "-o",
                            tmp_path / "run", "--", runs, "30", "eval")
    assert done.returncode == 0, done.stderr[-3000:]
    host, window = pa.load(tmp_path / "run").meta.passes
    assert (host.steps, host.step_source) == (30, "optimizer.step()")
    assert (window.host, window.steps, window.window_from, window.step_source) == (
        1, 6, 6, "optimizer.step()")
    assert runs.read_text() == "set-up\n"


def test_a_window_the_script_does_not_reach_runs_in_a_pass_of_its_own(tmp_path):
    runs = tmp_path / "runs.txt"
    done = profile_all_here("run", TARGET, "-b", "wallclock", "-b", "cprofile", "-b",
                            "flop-counter", "-o", tmp_path / "run", "--", runs, "12")
    assert done.returncode == 0, done.stderr[-3000:]
    passes = pa.load(tmp_path / "run").meta.passes
    assert [(p.backends, p.host, p.steps) for p in passes] == [
        (["wallclock"], None, 12), (["cprofile"], 1, 6), (["flop-counter"], None, 12)]
    assert runs.read_text() == "set-up\n" * 2  # the flop-counter's pass ran it again
    assert "pass 3 ran the script again, in a process of its own: the 12 steps the " \
        "script has left no room for its window" in " ".join(
            pa.load(tmp_path / "run").meta.doubts)


def test_separate_passes_run_the_script_in_each(tmp_path):
    runs = tmp_path / "runs.txt"
    done = profile_all_here("run", "--separate-passes", TARGET, "-b", "wallclock", "-b",
                            "cprofile", "-o", tmp_path / "run", "--", runs, "12")
    assert done.returncode == 0, done.stderr[-3000:]
    passes = pa.load(tmp_path / "run").meta.passes
    assert [(p.host, p.steps) for p in passes] == [(None, 12), (None, 12)]
    assert runs.read_text() == "set-up\n" * 2


def test_a_closure_optimizer_s_few_steps_are_windowed_by_its_evaluations(tmp_path):
    """Six LBFGS steps leave no room for two windows of steps; their 24 evaluations of the
    closure (forward and backward) do: the script runs once, the counter's FLOPs a step
    are one forward and backward of its MLP."""
    done = profile_all_here("run", TARGETS / "closure_steps.py", "-b", "wallclock", "-b",
                            "cprofile", "-b", "flop-counter", "-o", tmp_path / "run", "--",
                            "train-only")
    assert done.returncode == 0, done.stderr[-3000:]
    report = pa.load(tmp_path / "run")
    source = "backward() inside optimizer.step()"
    assert [(p.host, p.steps, p.window_from, p.step_source) for p in report.meta.passes] == [
        (None, 24, None, source), (1, 6, 6, source), (1, 6, 14, source)]
    assert done.stdout.count("step 6 done, 24 forward calls") == 1
    # by hand, 64 rows: Linear(8, 16) and Linear(16, 1) forward; backward their weights'
    # gradients and the second's input gradient (the data needs none)
    forward = 2 * 64 * 8 * 16 + 2 * 64 * 16 * 1
    backward = forward + 2 * 64 * 16 * 1
    assert _value(report, "flop-counter", "step", "step", "flops", "mean") == \
        forward + backward


def test_windows_of_long_steps_hold_fewer_unless_asked(tmp_path):
    """Steps of 0.15 s: a window holds 4 (about half a second, and three per-step times
    after its first), 6 where --pass-steps asks for 6."""
    for name, asked in (("default", ()), ("asked", ("--pass-steps", "6"))):
        done = profile_all_here("run", TARGETS / "speed.py", "-b", "wallclock", "-b", "cprofile",
                                *asked, "-o", tmp_path / name, "--", "0.15")
        assert done.returncode == 0, done.stderr[-3000:]
    assert [p.steps for p in pa.load(tmp_path / "default").meta.passes] == [30, 4]
    assert [p.steps for p in pa.load(tmp_path / "asked").meta.passes] == [30, 6]


def test_a_window_that_held_an_evaluation_says_so(tmp_path):
    """An evaluation inside the loop at step 9, inside cProfile's window (steps 6-11): the
    timing pass's unusual steps leave windows out, so the window's doubt names it."""
    done = profile_all_here("run", TARGET, "-b", "wallclock", "-b", "cprofile", "-o",
                            tmp_path / "run", "--", tmp_path / "runs.txt", "30", "eval-at-9")
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in pa.load(tmp_path / "run").meta.doubts if "unlike" in line]
    # other steps may be named too where the machine paused the script (a loaded one)
    assert len(said) == 1 and said[0].startswith(
        "pass 2 (cprofile) held a step unlike the others of its window: "), said
    assert "step 9 took " in said[0] and said[0].endswith(
        "its median step; different work (an evaluation inside the loop), or a pause of the "
        "machine, is in its totals")
