"""The Python API: run, load, and the Report's views."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import profile_all as pa
from conftest import TARGETS


@pytest.mark.parametrize("isolate", [True, False])
def test_run_and_load_round_trip(tmp_path, isolate):
    report = pa.run(TARGETS / "regions_then.py", ["ok"], backends=["wallclock", "cprofile"],
                    out=tmp_path / "run", isolate=isolate)
    assert report.exit_code == 0
    assert report.run_dir == tmp_path / "run"
    loaded = pa.load(tmp_path / "run")
    pd.testing.assert_frame_equal(loaded.frame, report.frame)
    assert loaded.meta.to_json() == json.loads(json.dumps(report.meta.to_json()))
    assert set(loaded.frame["backend"]) == {"wallclock", "cprofile"}
    functions = loaded.functions()
    assert list(functions.columns) == ["name", "calls", "primitive_calls", "self_time",
                                       "cumulative_time"]
    assert functions["self_time"].is_monotonic_decreasing
    assert any("regions_then.py" in name for name in functions["name"])
    passes = loaded.passes()
    assert list(passes["backends"]) == ["wallclock", "cprofile"]
    assert list(passes["status"]) == ["ok", "ok"]


@pytest.mark.parametrize("cpu_time", [False, True])
def test_region_cpu_time_only_when_asked(tmp_path, cpu_time):
    report = pa.run(TARGETS / "regions_then.py", ["ok"], backends=["wallclock"],
                    out=tmp_path / "run", options={"wallclock": {"cpu_time": cpu_time}})
    frame = report.frame
    assert ((frame["scope"] == "region") & (frame["metric"] == "cpu_time")).any() == cpu_time
    assert ((frame["scope"] == "run") & (frame["metric"] == "cpu_time")).any()


def test_unknown_backend_raises_usage_error(tmp_path):
    with pytest.raises(pa.UsageError, match="unknown backend 'nope'"):
        pa.run(TARGETS / "contract.py", backends=["nope"], out=tmp_path / "run")
    assert not (tmp_path / "run").exists()
