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


HANGS = """import time
import torch.distributed as dist
import profile_all as pa
dist.init_process_group("gloo")
rank = dist.get_rank()
for step in range(5):
    with pa.region("work"):
        time.sleep(0.02)
    pa.step()
    while rank == 1 and step == 2:
        time.sleep(0.1)
print(f"rank {rank} done", flush=True)
"""


def test_a_stop_names_the_rank_that_hung_not_the_one_that_had_finished(tmp_path):
    """SIGTERM to profile-all while rank 1 hangs and rank 0 has ended well: the pass named
    rank 0 (the first to end) as its cause, and said rank 0 was interrupted."""
    import os
    import signal
    import time

    from conftest import Running

    script = tmp_path / "hangs.py"
    script.write_text(HANGS)
    with Running("run", "--nproc-per-node", "2", "-b", "wallclock", script,
                 "-o", tmp_path / "run") as running:
        running.wait_for("rank 0 done", timeout=120)
        time.sleep(2)
        os.kill(running.process.pid, signal.SIGTERM)
        assert running.finish(120) == 143, running.stderr
    record = pa.load(tmp_path / "run").meta.passes[0]
    assert (record.status, record.failed_rank) == ("interrupted", 1)
    assert record.error == "rank 1: interrupted: profile-all got SIGTERM"
    assert [(r["rank"], r["status"]) for r in record.ranks] == [(0, "ok"), (1, "interrupted")]
    # the hung rank's time (at least the 2 s after rank 0 ended), not rank 0's
    assert record.target_wall_time == record.ranks[1]["target_wall_time"] > 2


def test_a_rank_killed_without_its_clock_gives_the_pass_profile_all_s():
    """A rank killed outright (its result made from journals) has no time of its own: the
    pass's time was the other rank's 235 ms, said of a pass stopped after 609 s."""
    from profile_all.runner.judging.outcome import pass_summary
    from profile_all.runner.planning.plan import Pass
    from profile_all.runner.spec import PassResult

    finished = PassResult(1, 0, ["wallclock"], {
        "status": "ok", "exit_code": 0, "error": "", "target_wall_time": 0.235,
        "ended_at": 100.0}, [])
    killed = PassResult(1, 1, ["wallclock"], {
        "status": "killed", "exit_code": 137, "error": "killed by SIGKILL",
        "target_wall_time": None}, [], recovered=True)
    record = pass_summary(Pass(1, ["wallclock"]), [finished, killed], "SIGTERM", None,
                          609.0, distributed=True)
    assert (record.status, record.failed_rank, record.target_wall_time) == \
        ("interrupted", 1, 609.0)
    assert record.error == "rank 1: interrupted: profile-all got SIGTERM"
