"""A failing target loses only what could not be measured; the exit code is the target's."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

import profile_all as pa
from conftest import TARGETS, Running, profile_all, profile_all_here

SCRIPT = TARGETS / "regions_then.py"
BACKENDS = ["-b", "wallclock", "-b", "cprofile"]  # a timing pass and a tracer pass


def _region_calls(report: pa.Report, pass_index: int, name: str) -> float:
    frame = report.frame
    rows = frame[(frame["pass"] == pass_index) & (frame["name"] == name)
                 & (frame["metric"] == "calls")]
    return rows["value"].sum()


def _check_kept(run_dir: Path, *, status: str, exit_code: int, error: str) -> pa.Report:
    report = pa.load(run_dir)
    first = report.meta.passes[0]
    assert (first.status, first.exit_code) == (status, exit_code)
    assert error in first.error
    if status != "killed":  # the target's own time, up to its end
        assert first.target_wall_time > 0.28
    assert report.meta.exit_code == exit_code
    # the regions measured before the failure are in the report
    assert _region_calls(report, 1, "work") == 3
    assert _region_calls(report, 1, "last") == 1
    assert error in (run_dir / "summary.md").read_text()
    first_found = report.findings().iloc[0]  # the answer first: it failed, before hot spots
    assert first_found["rule"] == "failure"
    said = "the run was stopped in pass 1: " if status == "interrupted" else \
        f"the script stopped with exit code {exit_code} in "
    assert first_found["finding"].startswith(said)
    assert error in first_found["finding"]
    return report


@pytest.mark.parametrize("how, status, exit_code, error", [
    ("raise", "raised", 1, "RuntimeError: boom from the target"),
    ("exit3", "failed", 3, "sys.exit(3)"),
    ("os_exit5", "os_exit", 5, "os._exit(5)"),
    ("sigterm", "terminated", 143, "terminated by SIGTERM"),
    ("sigkill", "killed", 137, "killed by SIGKILL"),
])
def test_failing_target_keeps_every_pass(tmp_path, how, status, exit_code, error):
    run_dir = tmp_path / "run"
    result = profile_all_here("run", SCRIPT, *BACKENDS, "-o", run_dir, "--", how)
    assert result.returncode == exit_code, result.stderr
    report = _check_kept(run_dir, status=status, exit_code=exit_code, error=error)
    # the other pass (cProfile) still ran, and wrote its file
    second = report.meta.passes[1]
    assert second.backends == ["cprofile"]
    assert second.exit_code == exit_code
    if how == "sigkill":  # nothing can run in a SIGKILLed process; cProfile keeps no journal
        assert second.recovered
        # the server saw its forked worker's peak memory: a few hundred MiB, not an OOM kill
        assert re.fullmatch(r"killed by SIGKILL at a peak RSS of 0\.\d GiB", second.error)
        assert not (report.frame["pass"] == 2).any()
    else:
        assert (run_dir / "artifacts" / "cprofile.prof").is_file()
        assert report.functions()["calls"].sum() > 0
    assert "finished" not in result.stdout
    if how == "raise":  # the target's traceback, as python prints it: its frames only
        assert "RuntimeError: boom from the target" in result.stderr
        start = result.stderr.index("Traceback")
        end = result.stderr.index("RuntimeError: boom from the target", start)
        traceback = result.stderr[start:end]
        assert "regions_then.py" in traceback
        assert "runpy" not in traceback and "profile_all" not in traceback


@pytest.mark.parametrize("on_timeout", ["stop", "continue"])
def test_timeout_stops_the_pass_says_where_it_hung_and_exits_124(tmp_path, on_timeout):
    """The pass stopped at its timeout says where the script hung (py-spy's dump of it);
    by default no later pass runs the script into the same hang."""
    run_dir = tmp_path / "run"
    # 4 s: a pass forked from the server starts its target at once (torch imported there;
    # the wait for the server's import is not the pass's)
    result = profile_all_here("run", SCRIPT, *BACKENDS, "-o", run_dir, "--timeout", "4",
                              "--on-timeout", on_timeout, "--", "sleep")
    assert result.returncode == 124, result.stderr
    report = _check_kept(run_dir, status="timeout", exit_code=124, error="timed out after 4 s")
    # the script's line that sleeps: `time.sleep(600)` inside the region `sleeping`
    line = next(number for number, text in enumerate(SCRIPT.read_text().splitlines(), 1)
                if "time.sleep(600)" in text)
    assert re.search(rf"timed out after 4 s, in <module> \([^)]*{SCRIPT.name}:{line}\)",
                     report.meta.passes[0].error), report.meta.passes[0].error
    if on_timeout == "stop":
        assert [p.status for p in report.meta.passes] == ["timeout"]
        assert report.meta.passes_not_run == [2]
        assert any("were not run, each would likely hang there too (--on-timeout continue "
                   "runs them)" in doubt for doubt in report.meta.doubts), report.meta.doubts
        return
    assert [p.status for p in report.meta.passes] == ["timeout", "timeout"]
    # the sleep after the steps is a share of the run, not 2000% of the steps
    assert (report.findings()["share"].dropna() <= 1).all()
    # the region the target was stuck in is there, timed until the stop: where it hung
    assert _region_calls(report, 1, "sleeping") == 1
    frame = report.frame
    stuck = frame[(frame["pass"] == 1) & (frame["name"] == "sleeping")
                  & (frame["metric"] == "wall_time") & (frame["stat"] == "total")]
    target = report.meta.passes[0].target_wall_time  # the regions before it: 0.3 s
    assert stuck["value"].item() < target < stuck["value"].item() + 1.0
    assert (run_dir / "artifacts" / "cprofile.prof").is_file()


def test_ctrl_c_stops_the_run_and_keeps_what_was_measured(tmp_path):
    run_dir = tmp_path / "run"
    with Running("run", SCRIPT, *BACKENDS, "-o", run_dir, "--", "sleep") as running:
        running.wait_for("ready")
        os.killpg(running.process.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        assert running.finish() == 130, running.stderr
    report = _check_kept(run_dir, status="interrupted", exit_code=130,
                         error="interrupted (Ctrl-C)")
    assert report.meta.status == "interrupted"
    assert report.meta.passes_not_run == [2]
    assert "KeyboardInterrupt" in (run_dir / "artifacts" / "pass1.stderr.log").read_text()


def test_in_process_failure_is_reported_not_raised(tmp_path):
    report = pa.run(SCRIPT, ["exit3"], backends=["wallclock"], out=tmp_path / "run",
                    isolate=False)
    assert report.exit_code == 3
    assert json.loads((tmp_path / "run" / "meta.json").read_text())["status"] == "failed"
    assert _region_calls(report, 1, "work") == 3


STUCK_IN_C = """
import hashlib
import profile_all as pa

for _ in range(3):
    with pa.region("before"):
        pass
    pa.step()
with pa.region("stuck"):  # OpenSSL's loop: no Python bytecode runs, signals wait for it
    hashlib.pbkdf2_hmac("sha256", b"password", b"salt", 10**9)
"""


def test_a_target_stuck_in_native_code_still_writes_its_pass_on_timeout(tmp_path):
    script = tmp_path / "stuck.py"
    script.write_text(STUCK_IN_C)
    started = time.monotonic()
    # 4 s: the forked pass starts its target at once (the server's import is not its time)
    done = profile_all_here("run", script, "-b", "wallclock", "--timeout", "4", "-o",
                            tmp_path / "run")
    assert done.returncode == 124, done.stderr
    assert time.monotonic() - started < 40  # not the 10 s grace, nor pbkdf2's minutes
    summary = pa.load(tmp_path / "run").meta.passes[0]
    assert not summary.recovered  # the worker wrote its result itself
    frame = pa.load(tmp_path / "run").frame
    before = frame[(frame["name"] == "before") & (frame["metric"] == "calls")]
    assert before["value"].item() == 3


def test_a_long_coloured_error_is_told_in_one_line_with_its_cause(tmp_path):
    """torch writes terminal codes into some messages and puts the cause on the last line
    (torch.load's weights_only error): the pass says the first and the last, uncoloured."""
    script = tmp_path / "coloured.py"
    script.write_text('raise RuntimeError("\\x1b[1mWeights only load failed.\\x1b[0m Re-running'
                      ' may help.\\n\\nWeightsUnpickler error: Unsupported global: GLOBAL x")\n')
    result = profile_all_here("run", script, "-b", "wallclock", "-o", tmp_path / "run")
    assert result.returncode == 1
    said = "RuntimeError: Weights only load failed. Re-running may help. … WeightsUnpickler " \
           "error: Unsupported global: GLOBAL x"
    assert pa.load(tmp_path / "run").meta.passes[0].error == said
    assert "\x1b" not in result.stderr.split("Traceback")[0]  # our lines, before python's


def test_a_script_that_fails_before_its_first_step_is_run_once(tmp_path):
    """Each pass would run its set-up again to the same failure: on the default backends
    the clean timing pass alone runs, and the run says why the others did not; named
    backends all run (a profile of the failure may be what is asked for)."""
    script = TARGETS / "fails_at_setup.py"
    result = profile_all_here("run", script, "-o", tmp_path / "default")
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("Traceback") == 1  # the script ran once
    report = pa.load(tmp_path / "default")
    assert [p.number for p in report.meta.passes] == [1]
    assert report.meta.passes_not_run == list(range(2, 2 + len(report.meta.passes_not_run)))
    assert report.meta.passes_not_run  # the default backends that can run here
    said = next(d for d in report.meta.doubts if "before its first step" in d)
    assert said.startswith(f"the script failed before its first step in pass 1 (exit code "
                           f"1): the {len(report.meta.passes_not_run)} other passes were "
                           "not run")
    assert said in (tmp_path / "default" / "summary.md").read_text()
    assert report.findings().iloc[0]["finding"] == (
        "the script stopped with exit code 1 in pass 1: FileNotFoundError: no such file: "
        "data/train.bin")

    named = profile_all_here("run", script, *BACKENDS, "-o", tmp_path / "named")
    assert named.returncode == 1, named.stderr
    assert [p.backends for p in pa.load(tmp_path / "named").meta.passes] == [
        ["wallclock"], ["cprofile"]]


def test_a_long_pass_says_what_it_is_doing(tmp_path):
    """A torch.profiler trace of millions of events took minutes to write and read, with
    nothing said between `started` and `ok`: every few seconds (here every half second),
    what the pass is doing now."""
    script = tmp_path / "slow.py"
    script.write_text("import time\ntime.sleep(2)\n")
    done = profile_all("run", script, "-b", "wallclock", "-o", tmp_path / "run",
                       env={"PROFILE_ALL_HEARTBEAT_SECONDS": "0.5"})
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "so far" in line]
    assert said and said[0].startswith("pass 1/1: wallclock, ")
    assert said[0].endswith(" so far: running the script"), said


KILLED_UNDER_A_PROFILER = """import os, signal, sys
import profile_all as pa
for step in range(6):
    sum(range(10000))
    pa.step()
if sys.getprofile() is not None:  # cProfile's pass: as the out-of-memory killer would
    os.kill(os.getpid(), signal.SIGKILL)
print("done", flush=True)
"""


def test_a_profiler_s_pass_killed_after_the_script_ended_well_is_no_failure_of_it(tmp_path):
    """time_sequence_prediction's torch.profiler pass grew to 13.6 GiB and the kernel killed
    it; the script had ended well in the clean timing pass, yet the run said `failed, exit
    code 137` and 'the script stopped ... fix it, and run again'."""
    script = tmp_path / "killed.py"
    script.write_text(KILLED_UNDER_A_PROFILER)
    done = profile_all_here("run", "--separate-passes", script, *BACKENDS, "-o", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    report = pa.load(tmp_path / "run")
    assert (report.meta.status, report.meta.exit_code) == ("partial", 0)
    assert [p.status for p in report.meta.passes] == ["ok", "killed"]
    first = report.findings().iloc[0]
    assert first["finding"].startswith("pass 2 (cprofile) was killed by SIGKILL")
    assert "where the script ended well in the clean timing pass" in first["finding"]
    assert not report.findings()["finding"].str.startswith("the script stopped").any()
