"""The run's record (meta.json) typed: read from JSON and written back as it came, fields
of a newer profile-all kept, every field checked on load (a crafted folder is refused in
one line naming the field), and the fields only some runs have written only by them."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

import profile_all as pa
from profile_all.pass_record import PassRecord
from profile_all.run_record import FORMAT_VERSION, ArtifactRecord, RunRecord, SourceRecord

RUN = {
    "format": FORMAT_VERSION, "status": "complete", "exit_code": 0, "stopped_by": None,
    "target": {"kind": "script", "command": "python train.py"}, "command": ["run"],
    "cwd": "/home/me", "environment": {"python": "3.11"},
    "passes": [{"pass": 1, "backends": ["wallclock"], "timing": True, "repeat": 1,
                "status": "ok", "exit_code": 0, "error": "", "target_wall_time": 1.5,
                "process_wall_time": 2.0, "recovered": False, "steps": 10, "window": None,
                "step_source": "pa.step()", "ran_on": "", "compile_steps": [],
                "compilation": {}, "target_profilers": [], "backend_failures": [],
                "logs": ["artifacts/pass1.stdout.log", "artifacts/pass1.stderr.log"],
                "overhead": None, "overhead_low": None, "overhead_high": None,
                "overhead_basis": "", "overhead_verdict": "reference",
                "a_newer_pass_field": [1, 2]}],
    "passes_not_run": [], "skipped_backends": {"nsys": "not installed"},
    "backend_facts": {"wallclock": {"region_timer": "wall_time"}}, "doubts": [],
    "preimported": ["torch"], "process_start": "fork", "region_marks": "C",
    "ranks": [0],
    "artifacts": [{"backend": "cprofile", "path": "artifacts/cprofile.prof",
                   "viewer": "SnakeViz", "open_command": "profile-all view {run_dir}"}],
    "run_id": "0123", "a_newer_field": {"kept": True},
}


def test_a_record_is_written_back_as_it_was_read(tmp_path):
    record = RunRecord.from_json(copy.deepcopy(RUN), tmp_path)
    assert record.passes[0].number == 1 and record.passes[0].timing
    assert record.artifacts[0].path == "artifacts/cprofile.prof"
    assert record.extra == {"a_newer_field": {"kept": True}}
    assert record.passes[0].extra == {"a_newer_pass_field": [1, 2]}
    assert json.loads(json.dumps(record.to_json())) == RUN


def test_fields_of_some_runs_are_written_by_them_only(tmp_path):
    said = RunRecord(status="complete", passes=[PassRecord(number=1)]).to_json()
    for key in ("model", "distributed", "sources", "merged_from", "run_id", "cwd", "ranks"):
        assert key not in said
    assert {"failed_rank", "ranks", "left_running"}.isdisjoint(said["passes"][0])
    assert said["passes"][0]["pass"] == 1 and said["format"] == FORMAT_VERSION
    distributed = PassRecord(number=2, failed_rank=0, ranks=[{"rank": 0}]).to_json()
    assert distributed["failed_rank"] == 0 and distributed["ranks"] == [{"rank": 0}]


def test_an_ingested_source_keeps_what_its_reader_found(tmp_path):
    source = {"pass": 1, "path": "/data/trace.json", "backend": "torch-profiler", "rank": 3,
              "distributed": {"world_size": 8}, "report": "trace"}
    record = RunRecord.from_json({**copy.deepcopy(RUN), "sources": [dict(source)]}, tmp_path)
    assert record.sources == [SourceRecord(1, "/data/trace.json", "torch-profiler", 3,
                                           {"distributed": {"world_size": 8},
                                            "report": "trace"})]
    assert record.to_json()["sources"] == [source]


@pytest.mark.parametrize("change, field", [
    (lambda m: m["passes"][0].update(repeat="1"), "passes[0].repeat"),
    (lambda m: m["passes"][0].update(logs="x"), "passes[0].logs"),
    (lambda m: m["passes"][0].update(failed_rank="0"), "passes[0].failed_rank"),
    (lambda m: m.update(process_start=1), "process_start"),
    (lambda m: m.update(run_id=5), "run_id"),
    (lambda m: m.update(sources=[{"pass": "1"}]), "sources[0].pass"),
    (lambda m: m.update(merged_from={}), "merged_from"),
    (lambda m: m["passes"][0].update(steps=-5), "passes[0].steps"),
    (lambda m: m["artifacts"][0].update(path=5), "artifacts[0].path"),
])
def test_each_typed_field_is_checked_on_load(tmp_path, change, field):
    crafted = copy.deepcopy(RUN)
    change(crafted)
    said = f"{tmp_path}/meta.json: {field} is not what profile-all writes ("
    with pytest.raises(pa.UsageError, match=re.escape(said)) as refused:
        RunRecord.from_json(crafted, tmp_path)
    assert str(refused.value).endswith("): a damaged or crafted run folder")


@pytest.mark.parametrize("change, field", [
    (lambda m: m.pop("status"), "status"),
    (lambda m: m.pop("passes"), "passes"),
    (lambda m: m.pop("target"), "target"),
    (lambda m: m["passes"][0].pop("pass"), "passes[0].pass"),
    (lambda m: m["passes"][0].pop("exit_code"), "passes[0].exit_code"),
    (lambda m: m["artifacts"][0].pop("viewer"), "artifacts[0].viewer"),
])
def test_a_field_every_folder_has_is_required(tmp_path, change, field):
    """`{"format": 2}` alone once showed as a run: status "", 0 passes, every table."""
    crafted = copy.deepcopy(RUN)
    change(crafted)
    with pytest.raises(pa.UsageError, match=re.escape(
            f"{tmp_path}/meta.json: {field} is missing, which every run folder of profile-all "
            "has: a damaged or crafted run folder")):
        RunRecord.from_json(crafted, tmp_path)


def test_an_artifact_keeps_a_newer_profile_alls_keys_of_any_type(tmp_path):
    crafted = copy.deepcopy(RUN)
    crafted["artifacts"][0].update(size=123, sha=None)
    record = RunRecord.from_json(crafted, tmp_path)
    assert record.artifacts[0].extra == {"size": 123, "sha": None}
    assert record.to_json()["artifacts"] == crafted["artifacts"]


def test_an_artifact_outside_the_folder_is_refused(tmp_path):
    crafted = copy.deepcopy(RUN)
    crafted["artifacts"][0]["path"] = "../elsewhere.prof"
    with pytest.raises(pa.UsageError, match="names a file outside the run folder"):
        RunRecord.from_json(crafted, tmp_path)
    assert ArtifactRecord.from_json(RUN["artifacts"][0], tmp_path, "artifacts[0].").extra == {}


@pytest.mark.parametrize("data, said", [
    ([], "is not profile-all run metadata"),
    ({"format": "2"}, "is not profile-all run metadata"),
    ({"format": FORMAT_VERSION + 1}, "written by a newer profile-all"),
])
def test_what_is_no_record_of_this_profile_all_is_refused(data, said):
    with pytest.raises(pa.UsageError, match=said):
        RunRecord.from_json(data, Path("run"))
