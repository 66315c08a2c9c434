"""Several ranks that go wrong: one fails, one hangs (a file apart from
test_distributed.py, so that the two halves of the suite share the torchrun runs)."""

from __future__ import annotations

import profile_all as pa
from conftest import EXAMPLES, profile_all

DDP = EXAMPLES / "ddp_train.py"


def test_a_failing_rank_is_named_and_the_other_passes_run(tmp_path):
    out = tmp_path / "run"
    done = profile_all("run", "--nproc-per-node", "2", "-b", "wallclock", "-b", "cprofile",
                       DDP, "-o", out, "--", "--steps", "8", "--fail-rank", "1",
                       "--fail-step", "3", timeout=300)
    assert done.returncode == 1, done.stderr
    assert "rank 1: RuntimeError: rank 1 failed at step 3" in done.stderr
    report = pa.load(out)
    passes = report.meta.passes
    assert [p.backends for p in passes] == [["wallclock"], ["cprofile"]]
    for summary in passes:
        assert summary.failed_rank == 1 and summary.exit_code == 1
        assert {r["rank"] for r in summary.ranks} == {0, 1}
    frame = report.frame
    steps = frame[(frame["backend"] == "wallclock") & (frame["scope"] == "step")
                  & (frame["metric"] == "calls")]
    assert set(steps["rank"]) == {0, 1}  # both ranks' rows up to the failure
    assert (steps["value"] == 3).all()
    assert set(frame[frame["backend"] == "cprofile"]["rank"]) == {0, 1}


def test_a_hanging_rank_is_stopped_by_the_timeout_and_both_ranks_kept(tmp_path):
    out = tmp_path / "run"
    done = profile_all("run", "--nproc-per-node", "2", "-b", "wallclock", "--timeout", "14",
                       DDP, "-o", out, "--", "--steps", "8", "--hang-rank", "1",
                       "--fail-step", "3", timeout=200)
    assert done.returncode == 124, done.stderr
    assert "timed out after 14 s" in done.stderr
    frame = pa.load(out).frame
    steps = frame[(frame["scope"] == "step") & (frame["metric"] == "calls")]
    assert dict(zip(steps["rank"], steps["value"], strict=True)) == {0: 3, 1: 3}
    # rank 1 hung inside its 4th train_step: that call is counted, timed until the stop
    rank1 = frame[(frame["rank"] == 1) & (frame["scope"] == "region")
                  & (frame["name"] == "train_step")]
    assert rank1[rank1["metric"] == "calls"]["value"].item() == 4
    hung = rank1[(rank1["metric"] == "wall_time") & (rank1["stat"] == "max")]["value"].item()
    ranks = pa.load(out).meta.passes[0].ranks
    rank_time = next(r["target_wall_time"] for r in ranks if r["rank"] == 1)
    assert hung > 0.5 * rank_time  # most of the rank's time: where it hung
