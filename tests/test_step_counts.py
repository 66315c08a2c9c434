"""Steps counted once, the same in every view: N steps marked are N steps in the headline,
the passes table, each backend's step rows, the samples, summary.md, report.html and
meta.json; a window of W steps is W steps in every windowed pass, whatever its backend
(torch.profiler opens a ProfilerStep range after the last step too: not a step), in passes
of their own here (windows inside the timing pass's process: test_run_once.py). Each kind
of step (ARCHITECTURE.md, "What a step spans"), and a script that raises after 3."""

from __future__ import annotations

import re

import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here

TARGET = TARGETS / "step_kinds.py"
SOURCE = {"pa": "pa.step()", "optimizer": "optimizer.step()",
          "module": "outermost module call"}
ARTICLE = {"pa": "a ", "optimizer": "an ", "module": "an "}
#: the backend of each pass after the timing pass, and the name of its step rows
STEP_ROWS = {"torch-profiler": "ProfilerStep", "flop-counter": "step"}


def _step_calls(report: pa.Report, backend: str) -> int:
    frame = report.frame
    picked = frame[(frame["backend"] == backend) & (frame["scope"] == "step")
                   & (frame["metric"] == "calls")]
    assert picked["name"].tolist() == [STEP_ROWS.get(backend, "step")]
    return int(picked["value"].iloc[0])


def _check_counts(out, done, kind: str, steps: int, window: int) -> None:
    report = pa.load(out)
    timing, *windowed = report.meta.passes
    assert timing.steps == steps and timing.step_source == SOURCE[kind]
    # the headline, in the terminal, summary.md and report.html
    headline = f"{steps} steps, each {ARTICLE[kind]}{SOURCE[kind]}"
    status = next(line for line in done.stderr.splitlines() if line.startswith("profile-all:"))
    assert headline in status, status
    summary = (out / "summary.md").read_text()
    assert headline in summary
    assert headline in (out / "report.html").read_text().replace("&#x27;", "'")
    # the timer's step rows and samples: every step counted, the first (from the target's
    # start) left out of per-step figures, and said so
    assert _step_calls(report, "wallclock") == steps
    frame = report.frame
    excluded = frame[(frame["backend"] == "wallclock") & (frame["scope"] == "step")
                     & (frame["metric"] == "excluded_calls")]["value"].tolist()
    assert excluded == [1]
    samples = report.samples
    timed = samples[(samples["backend"] == "wallclock") & (samples["scope"] == "step")]
    assert len(timed) == steps - 1
    # every windowed pass saw the window, whatever its backend, in every view
    shown = min(window, steps)
    for summary_of_pass in windowed:
        [backend] = summary_of_pass.backends
        assert summary_of_pass.steps == shown, backend
        if backend in STEP_ROWS:
            assert _step_calls(report, backend) == shown, backend
        passes = report.passes()
        row = passes[passes["pass"] == summary_of_pass.number]
        assert row["steps"].iloc[0] == shown, backend
    if window < steps:
        assert re.search(rf"\| {window} of {steps} \|", summary), summary


@pytest.mark.parametrize("kind", ["pa", "optimizer", "module"])
def test_every_view_counts_the_same_steps(tmp_path, kind):
    out = tmp_path / "run"
    done = profile_all_here("run", "--separate-passes", TARGET, "-o", out, "--pass-steps", "5",
                            "-b", "wallclock", "-b", "torch-profiler", "-b", "flop-counter", "--",
                            kind, "8")
    assert done.returncode == 0, done.stderr[-3000:]
    _check_counts(out, done, kind, steps=8, window=5)
    # the windowed passes ran their 5 steps and no more of the script
    logs = sorted((out / "artifacts").glob("pass[23].stdout.log"))
    assert [log.read_text().split()[-1] for log in logs] == ["5", "5"]


def test_a_script_that_raises_after_3_steps_has_3_everywhere(tmp_path):
    out = tmp_path / "run"
    done = profile_all_here("run", TARGET, "-o", out, "-b", "wallclock", "-b", "torch-profiler",
                            "-b", "flop-counter", "--", "optimizer", "30", "3")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "stopped after step 3" in done.stderr
    _check_counts(out, done, "optimizer", steps=3, window=25)
