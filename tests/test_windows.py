"""Passes of their own (--separate-passes) that need only a window of steps end the target
there (--pass-steps), every pass may end at --max-steps, and the report says which passes
saw a window and what their totals cover. (Windows inside the timing pass's process:
test_run_once.py.)"""

from __future__ import annotations

import pandas as pd
import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here
from profile_all.readers import chrome_trace

SPEED = TARGETS / "speed.py"  # 30 steps, two sleeps a step
RUN = ("run", "--separate-passes")


def _sleeps(report, number):
    frame = report.frame
    rows = frame[(frame["pass"] == number) & (frame["scope"] == "function")
                 & frame["name"].str.contains("time.sleep") & (frame["metric"] == "calls")]
    return rows["value"].sum()


def test_profiled_passes_run_a_window_and_say_so(tmp_path):
    report = pa.run(SPEED, ["0.001"], backends=["wallclock", "cprofile"], out=tmp_path / "r",
                    separate_passes=True, pass_steps=10)
    assert report.exit_code == 0 and report.meta.status == "complete"
    passes = report.passes().set_index("pass")
    assert (passes.loc[1, "steps"], passes.loc[2, "steps"]) == (30, 10)
    assert passes.loc[2, "window"] == 10 and pd.isna(passes.loc[1, "window"])
    # cProfile saw the target's first 10 steps only: two sleeps a step
    assert _sleeps(report, 2) == 20
    said = [line for line in report.meta.doubts if "ended the target after 10 steps" in line]
    assert said and "of the 30 the timing pass ran" in said[0]
    assert not any("did different work" in line for line in report.meta.doubts)
    assert "| 10 of 30 " in (tmp_path / "r" / "summary.md").read_text()


def test_all_runs_every_pass_whole_and_max_steps_ends_every_pass(tmp_path):
    whole = pa.run(SPEED, ["0.001"], backends=["wallclock", "cprofile"], out=tmp_path / "a",
                   separate_passes=True, pass_steps="all")
    assert list(whole.passes()["steps"]) == [30, 30]
    assert _sleeps(whole, 2) == 60
    done = profile_all_here(*RUN, SPEED, "-b", "wallclock", "-b", "cprofile", "--max-steps", "5",
                            "-o", tmp_path / "m", "--", "0.001")
    assert done.returncode == 0, done.stderr
    capped = pa.load(tmp_path / "m").passes()
    assert list(capped["steps"]) == [5, 5] and list(capped["window"]) == [5, 5]


def test_optimizer_steps_window_a_script_that_marks_none(tmp_path):
    done = profile_all_here(*RUN, TARGETS / "optimizer_only.py", "-b", "wallclock", "-b",
                            "cprofile", "--pass-steps", "7", "-o", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert "swallowed" not in done.stdout  # the script's `except Exception` let it through
    assert "steps done 40" in done.stdout  # the timing pass ran whole
    report = pa.load(tmp_path / "r")
    passes = report.passes().set_index("pass")
    assert (passes.loc[1, "steps"], passes.loc[2, "steps"]) == (40, 7)
    assert report.meta.passes[1].step_source == "optimizer.step()"


def _printed(run_dir, number):
    return (run_dir / "artifacts" / f"pass{number}.stdout.log").read_text().splitlines()


def test_a_closure_optimizer_s_evaluations_are_its_steps(tmp_path):
    """LBFGS runs its closure (forward and backward) four times inside each step(), after a
    validation loop of 10 forward calls: each evaluation is a step, in every pass (6
    optimizer steps are 24), and a window of 3 ends the target inside the first optimizer
    step (once the validation's forward calls were taken for steps, and ended it there)."""
    done = profile_all_here(*RUN, TARGETS / "closure_steps.py", "-b", "wallclock", "-b",
                            "cprofile", "--pass-steps", "3", "-o", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    report = pa.load(tmp_path / "r")
    passes = report.passes().set_index("pass")
    assert (passes.loc[1, "steps"], passes.loc[2, "steps"]) == (24, 3)
    assert {p.step_source for p in report.meta.passes} == {
        "backward() inside optimizer.step()"}
    assert _printed(tmp_path / "r", 1)[-1] == "step 6 done, 34 forward calls"
    assert _printed(tmp_path / "r", 2) == []  # ended inside its first optimizer step
    forward = report.functions().set_index("name")  # pass 2's, the one cProfile
    assert forward.loc[[n for n in forward.index if "closure_steps.py" in n
                        and n.endswith("(forward)")], "calls"].tolist() == [13]
    # the validation's 10 calls, then 3 evaluations
    capped = profile_all_here(*RUN, TARGETS / "closure_steps.py", "-b", "wallclock", "-b",
                              "cprofile", "--max-steps", "6", "-o", tmp_path / "m", "--",
                              "train-only")
    assert capped.returncode == 0, capped.stderr
    assert list(pa.load(tmp_path / "m").passes()["steps"]) == [6, 6]
    assert _printed(tmp_path / "m", 1) == ["step 1 done, 4 forward calls"]


def test_an_inference_loop_is_windowed_by_its_outermost_module_calls(tmp_path):
    done = profile_all_here(*RUN, TARGETS / "inference_loop.py", "-b", "wallclock", "-b",
                            "cprofile", "--pass-steps", "5", "-o", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert "inference calls 40" in done.stdout  # the timing pass ran whole
    report = pa.load(tmp_path / "r")
    passes = report.passes().set_index("pass")
    assert (passes.loc[1, "steps"], passes.loc[2, "steps"]) == (40, 5)  # not 3 modules each
    assert {p.step_source for p in report.meta.passes} == {"outermost module call"}
    assert passes.loc[2, "overhead_basis"].startswith("per-step times")


def test_a_target_without_steps_runs_whole(tmp_path):
    report = pa.run(TARGETS / "no_torch.py", backends=["wallclock", "cprofile"],
                    out=tmp_path / "r", pass_steps=2)
    passes = report.passes()
    assert list(passes["steps"].fillna(0)) == [0, 0]
    assert not passes["window"].notna().any()
    assert not any("ended the target" in line for line in report.meta.doubts)


@pytest.mark.parametrize("value", ["x", "1", "0"])
def test_bad_windows_are_refused(tmp_path, value):
    done = profile_all_here(*RUN, SPEED, "-b", "wallclock", "--pass-steps", value, "-o",
                            tmp_path / "r")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--pass-steps" in done.stderr
    assert not (tmp_path / "r").exists()


def test_found_steps_are_marked_in_the_trace(tmp_path):
    """A script that calls no pa.step(): the steps the timing pass found (optimizer.step())
    mark the torch-profiler pass's trace as torch's own step() would (ProfilerStep#N)."""
    done = profile_all_here(*RUN, TARGETS / "optimizer_only.py", "-b", "wallclock", "-b",
                            "torch-profiler", "--pass-steps", "7", "-o", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    frame = pa.load(tmp_path / "r").frame
    marked = frame[(frame["backend"] == "torch-profiler") & (frame["scope"] == "step")
                   & (frame["metric"] == "calls")]
    # ProfilerStep#0 (start to the first optimizer step) to #6: the window's 7 steps; the
    # profile ends at the last, so the trace holds no #7 (the tail to the pass's stop),
    # which an ingest (or HTA) of the trace would count as an eighth step
    assert marked["name"].tolist() == ["ProfilerStep"] and marked["value"].item() == 7
    trace = chrome_trace.load(tmp_path / "r" / "artifacts" / "torch_trace.pt.trace.json.gz")
    assert sorted(event[0] for event in trace.columns.annotations
                  if event[0].startswith("ProfilerStep#")) == [
        f"ProfilerStep#{number}" for number in range(7)]
    ingested = pa.ingest([tmp_path / "r" / "artifacts" / "torch_trace.pt.trace.json.gz"],
                         out=tmp_path / "ingested").frame
    counted = ingested[(ingested["scope"] == "step") & (ingested["metric"] == "calls")]
    assert counted["value"].item() == 7


def test_backends_without_a_timer_still_get_the_timing_pass(tmp_path):
    """The clean timing pass finds what marks the steps, so that the passes after it hear
    them as they come: without it a flop-counter or torch-profiler pass had no step rows."""
    done = profile_all_here(*RUN, TARGETS / "step_kinds.py", "-b", "flop-counter",
                            "-b", "torch-profiler", "-o", tmp_path / "r", "--", "optimizer", "30")
    assert done.returncode == 0, done.stderr
    report = pa.load(tmp_path / "r")
    assert [p.backends for p in report.meta.passes] == [
        ["wallclock"], ["flop-counter"], ["torch-profiler"]]
    frame = report.frame
    calls = frame[(frame["scope"] == "step") & (frame["metric"] == "calls")]
    assert dict(zip(calls["backend"], calls["value"], strict=True)) == {
        "wallclock": 30, "flop-counter": 25, "torch-profiler": 25}


def test_a_window_as_long_as_the_script_runs_it_whole(tmp_path):
    """Ended at its last step, a pass would miss what the script does after it."""
    done = profile_all_here(*RUN, TARGETS / "step_kinds.py", "-b", "cprofile", "--pass-steps",
                            "25", "-o", tmp_path / "r", "--", "optimizer", "25")
    assert done.returncode == 0, done.stderr
    report = pa.load(tmp_path / "r")
    assert [(p.steps, p.window) for p in report.meta.passes] == [(25, None),
                                                                           (25, None)]
    log = (tmp_path / "r" / "artifacts" / "pass2.stdout.log").read_text()
    assert log.split()[-1] == "done"
