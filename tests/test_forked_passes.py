"""Passes forked from the fork server look to the target exactly like `python SCRIPT ARGS`,
also where the target starts processes of its own: DataLoader workers, a spawn pool, a
fork. Each case is run plain and forked, and must print the same; the DataLoader also in
fresh interpreters (--fresh-processes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import profile_all as pa
from conftest import TARGETS, profile_all
from profile_all import region_log

WORKERS = TARGETS / "workers.py"
EXPECTED = {"dataloader": "dataloader total 506", "spawn": "spawn squares [0, 1, 4, 9, 16]",
            "fork": "fork child exit 7"}


@pytest.mark.parametrize("how", list(EXPECTED))
def test_processes_of_the_target_work_in_forked_and_fresh_passes(tmp_path, how):
    plain = subprocess.run([sys.executable, str(WORKERS), how], capture_output=True,
                           text=True, check=True, timeout=120)
    assert EXPECTED[how] in plain.stdout
    ways = [("forked", [])] + ([("fresh", ["--fresh-processes"])] if how == "dataloader" else [])
    for name, extra in ways:
        done = profile_all("run", WORKERS, "-b", "wallclock", "-b", "cprofile", *extra,
                           "--show-output", "all",
                           "-o", tmp_path / name, "--", how)
        assert done.returncode == 0, done.stderr
        assert done.stdout.count(EXPECTED[how]) == 2, done.stdout  # the output of each pass
        report = pa.load(tmp_path / name)
        assert report.meta["process_start"] == ("fork" if name == "forked"
                                                else "fresh interpreter")
        assert report.meta["region_marks"] == region_log.MARKS_IN
        assert list(report.passes()["status"]) == ["ok", "ok"]
        if how == "dataloader":  # 6 batches, a step each, in both passes
            assert list(report.passes()["steps"]) == [6, 6]
