"""The target runs as it would under `python script.py args`."""

from __future__ import annotations

import json
import subprocess
import sys

import profile_all as pa
from conftest import TARGETS, profile_all, profile_all_here


def _seen(stdout: str) -> dict:
    return json.loads(next(line for line in stdout.splitlines() if line.startswith("{")))


def test_argv_main_path_and_cwd_match_plain_python(tmp_path):
    script = TARGETS / "contract.py"
    args = ["--epochs", "1", "plain word", "-x"]
    plain = subprocess.run([sys.executable, str(script), *args], cwd=tmp_path,
                           capture_output=True, text=True, check=True)
    profiled = profile_all_here("run", script, "-b", "wallclock", "-o", tmp_path / "run", "--",
                                *args, cwd=tmp_path)
    assert profiled.returncode == 0, profiled.stderr
    assert _seen(profiled.stdout) == _seen(plain.stdout)
    assert _seen(plain.stdout)["name"] == "__main__"
    assert _seen(plain.stdout)["path0"] == str(TARGETS)


def test_script_folder_is_first_on_sys_path(tmp_path):
    result = profile_all_here("run", TARGETS / "imports_sibling.py", "-b", "wallclock",
                              "-o", tmp_path / "run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "imported from the script's folder" in result.stdout


def test_stdin_reaches_the_target_and_output_is_kept_in_the_pass_log(tmp_path):
    result = profile_all("run", TARGETS / "reads_stdin.py", "-b", "wallclock",
                         "-o", tmp_path / "run", stdin="hello from stdin\n")
    assert result.returncode == 0, result.stderr
    assert "got: hello from stdin" in result.stdout
    log = (tmp_path / "run" / "artifacts" / "pass1.stdout.log").read_text()
    assert "got: hello from stdin" in log


def test_in_process_run_restores_argv_and_sys_path(tmp_path, capsys):
    argv, path = list(sys.argv), list(sys.path)
    report = pa.run(TARGETS / "contract.py", ["a", "b"], backends=["wallclock"],
                    out=tmp_path / "run", isolate=False)
    assert report.exit_code == 0
    seen = _seen(capsys.readouterr().out)
    assert seen["argv"] == [str(TARGETS / "contract.py"), "a", "b"]
    assert seen["name"] == "__main__"
    assert seen["path0"] == str(TARGETS)
    assert (sys.argv, sys.path) == (argv, path)


def test_the_output_of_the_first_pass_only_unless_all_is_asked(tmp_path):
    script = TARGETS / "regions_then.py"
    once = profile_all_here("run", script, "-b", "wallclock", "-b", "cprofile", "-o",
                            tmp_path / "once", "--", "ok")
    assert once.returncode == 0, once.stderr
    assert once.stdout.count("finished") == 1  # the first pass's
    for number in (1, 2):  # every pass's output is in its log
        log = tmp_path / "once" / "artifacts" / f"pass{number}.stdout.log"
        assert "finished" in log.read_text()
    every = profile_all_here("run", script, "-b", "wallclock", "-b", "cprofile", "--show-output",
                             "all", "-o", tmp_path / "all", "--", "ok")
    assert every.stdout.count("finished") == 2
    bad = profile_all_here("run", script, "--show-output", "some", "-o", tmp_path / "bad")
    assert bad.returncode == 2 and "show_output (--show-output) must be one of" in bad.stderr
    assert not (tmp_path / "bad").exists()
