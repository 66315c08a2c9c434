"""What `run` prints besides the report: `--json` (stdout is the JSON alone) and
`--quiet` (one line), on real runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet

from conftest import TARGETS, profile_all, profile_all_here


def test_json_holds_stdout_alone_and_quiet_says_one_line(tmp_path):
    out = tmp_path / "run"
    done = profile_all_here("run", TARGETS / "contract.py", "-b", "wallclock", "--json", "-q",
                            "-o", out)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)  # nothing else on stdout: the script's print went aside
    assert said["status"] == "complete" and said["exit_code"] == 0
    assert said["run_dir"] == str(out) and said["meta"]["target"]["kind"] == "script"
    assert isinstance(said["findings"], list)
    assert '"argv"' in done.stderr  # the script's own output, on stderr meanwhile
    assert done.stderr.strip().splitlines()[-1] == f"profile-all: complete, exit code 0: {out}"
    assert "pass 1/1" not in done.stderr and "Passes" not in done.stderr  # quiet
    # report.parquet names its run, for files of many runs stacked together
    named = json.loads(pyarrow.parquet.read_schema(out / "report.parquet").metadata[
        b"profile_all"])
    assert named["run_id"] == said["meta"]["run_id"] and len(named["run_id"]) == 32
    assert named["command"][-3:] == ["-q", "-o", str(out)]
    assert named["target"]["command"].endswith("contract.py")


def test_json_of_a_failing_script_keeps_its_exit_code(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nprint('partial')\nsys.exit(3)\n")
    done = profile_all_here("run", script, "-b", "wallclock", "--json", "-o", tmp_path / "run")
    assert done.returncode == 3
    said = json.loads(done.stdout)
    assert said["exit_code"] == 3 and said["status"] == "failed"
    assert "Passes" in done.stderr  # not quiet: the tables are on stderr


def test_shell_completion_completes_commands_and_options():
    env = dict(os.environ, _PROFILE_ALL_COMPLETE="complete_bash", COMP_WORDS="profile-all ru",
               COMP_CWORD="1")
    done = subprocess.run([sys.executable, "-m", "profile_all"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split() == ["run"], done.stderr
    env.update(COMP_WORDS="profile-all run x.py --pass-st", COMP_CWORD="3")
    done = subprocess.run([sys.executable, "-m", "profile_all"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split() == ["--pass-steps"], done.stderr


def test_help_reads_at_80_columns():
    """Each option once (a flag without its --no- twin), its help on a line of its own
    beside it, within 80 columns, whatever terminal the help is read in."""
    done = profile_all("run", "--help", env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "--no-" not in done.stdout
    fresh = next(line for line in lines if line.lstrip().startswith("--fresh-processes"))
    assert "a fresh interpreter for every pass" in fresh
    assert any(line.lstrip().startswith("--timeout SECONDS  ") for line in lines)
    assert lines[0].startswith("Usage: profile-all run [OPTIONS] {SCRIPT} [-- SCRIPT_ARGS...]")


def test_a_native_file_s_line_can_be_pasted_at_80_columns(tmp_path):
    """"open with" lines are not broken at 80 columns: the command in them is pasted."""
    done = profile_all("run", TARGETS / "no_torch.py", "-b", "cprofile", "-o",
                       tmp_path / "run", env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    opened = [line for line in done.stderr.splitlines() if "(open with: " in line]
    assert opened == [f"  cprofile: artifacts/cprofile.prof  (open with: profile-all view "
                      f"{tmp_path / 'run'})"], done.stderr


def test_quiet_with_no_output_says_one_line_and_keeps_the_logs(tmp_path):
    out = tmp_path / "run"
    done = profile_all_here("run", TARGETS / "contract.py", "-b", "wallclock", "-q",
                            "--show-output", "none", "-o", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [f"profile-all: complete, exit code 0: {out}"]
    assert '"argv"' in (out / "artifacts" / "pass1.stdout.log").read_text()


def test_kineto_s_session_lines_are_held_back_whatever_the_chunks():
    """Split anywhere, Kineto's session lines are not echoed; everything else is, as it
    comes (a progress line with no newline yet is not held)."""
    from profile_all.runner.watching.kineto_lines import KinetoLines

    text = ("step 0\nUSDT:2026-11-28 09:37:35 19745:19745 SyncActivityProfilerHandler.cpp:52]"
            " profiler_start\nprogress 10%\rprogress 20%\rUSDT: the script's own\n"
            "USDT:2026-11-28 09:37:35 19745:19745 SyncActivityProfilerHandler.cpp:59] "
            "profiler_stop\nUSD")
    wanted = "step 0\nprogress 10%\rprogress 20%\rUSDT: the script's own\nUSD"
    for size in (1, 2, 3, 7, 64, len(text)):
        shown = KinetoLines()
        echoed = "".join(shown(text[at:at + size]) for at in range(0, len(text), size))
        assert echoed + shown.rest() == wanted, size
    first = KinetoLines()
    assert first("progress 10%") == "progress 10%"
