"""The wall-clock backend's statistics and its crash journal, on real sleeps."""

from __future__ import annotations

import time

import numpy as np
import pytest

import profile_all as pa
from conftest import measured_frame, value_of
from profile_all import regions
from profile_all.backends.base import PassContext, listen_to
from profile_all.backends.wallclock import WallClock


@pytest.fixture
def ctx(tmp_path):
    (tmp_path / "artifacts").mkdir()
    return PassContext(pass_index=1, artifacts_dir=tmp_path / "artifacts", scratch_dir=tmp_path)


def _value(rows, scope, name, metric, stat):
    return value_of(measured_frame(rows), scope=scope, name=name, metric=metric, stat=stat)


@pytest.mark.parametrize("cpu_time", [True, False], ids=["hooks", "region-log"])
def test_region_and_step_statistics(ctx, cpu_time):
    clock = WallClock({"cpu_time": cpu_time})
    clock.start(ctx)
    listen_to([clock], ctx)
    try:
        time.sleep(0.05)  # before the first region: not part of any step
        for pause in (0.01, 0.02, 0.03):
            with pa.region("sleep"):
                time.sleep(pause)
            pa.step()
    finally:
        regions.listen(())
    clock.stop(ctx)
    collected = clock.collect(ctx)
    rows = collected.rows
    # the statistics are those of the calls it kept, computed here apart
    kept = {(scope, name): np.array(values)
            for scope, name, _parent, _metric, values in collected.samples}
    calls = kept[("region", "sleep")]
    assert len(calls) == _value(rows, "region", "sleep", "calls", "total") == 3
    assert (calls >= np.array([0.01, 0.02, 0.03])).all()  # a sleep lasts at least that
    for stat, expected in (("total", calls.sum()), ("min", calls.min()),
                           ("median", np.median(calls)), ("std", calls.std(ddof=1)),
                           ("p90", np.quantile(calls, 0.9))):
        assert _value(rows, "region", "sleep", "wall_time", stat) == pytest.approx(expected)
    if not cpu_time:  # the top-level calls on the timeline, as long as their samples
        placed = [entry for entry in collected.timeline if entry[0] == "region"]
        assert [entry[1] for entry in placed] == ["sleep"] * 3
        assert [end - start for _, _, start, end, *_ in placed] == pytest.approx(list(calls))
        assert placed[0][2] >= 0.05  # seconds since the pass began: after the first sleep
    if cpu_time:
        assert _value(rows, "region", "sleep", "cpu_time", "total") < calls.sum()  # sleep
    else:  # only the run's CPU time is measured
        assert set(measured_frame(rows).query("metric == 'cpu_time'")["scope"]) == {"run"}
    # every step counted, the first (from the first region) left out of the statistics
    steps = kept[("step", "step")]
    assert _value(rows, "step", "step", "calls", "total") == 3
    assert _value(rows, "step", "step", "excluded_calls", "total") == 1 == 3 - len(steps)
    assert (steps >= calls[1:]).all()  # a step holds its region
    assert _value(rows, "step", "step", "wall_time", "median") == pytest.approx(np.median(steps))
    total = _value(rows, "step", "step", "wall_time", "total")
    assert total >= calls.sum() and total > steps.sum()  # all three steps: the first too
    assert _value(rows, "run", "run", "wall_time", "total") >= 0.05 + total
    assert not list(ctx.scratch_dir.glob("*.journal"))  # the journal is gone once collected


@pytest.mark.parametrize("cpu_time", [True, False], ids=["hooks", "region-log"])
def test_journal_recovers_what_a_killed_process_measured(ctx, cpu_time):
    clock = WallClock({"cpu_time": cpu_time})
    clock.start(ctx)
    listen_to([clock], ctx)
    try:
        with pa.region("outer"), pa.region("inner"):
            time.sleep(0.25)  # longer than the flush interval: journaled on exit
    finally:
        regions.listen(())
    # the process "dies" here: no stop, no collect
    rows = WallClock.recover(ctx).rows
    assert _value(rows, "region", "inner", "calls", "total") == 1
    assert _value(rows, "region", "inner", "wall_time", "total") >= 0.25
    frame = measured_frame(rows)
    assert set(frame.loc[frame["name"] == "inner", "parent"]) == {"outer"}
