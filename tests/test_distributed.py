"""Several ranks under torchrun, several nodes merged, and the cross-rank view."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import threading

import pytest

import profile_all as pa
from conftest import EXAMPLES, TARGETS, free_port, profile_all, profile_all_here
from profile_all.render import charts
from profile_all.view import profile_file

DDP = EXAMPLES / "ddp_train.py"


def test_ddp_example_on_two_ranks_with_every_backend(tmp_path):
    """One launch runs the timing pass and hosts the profilers' windows, each of the same
    steps on both ranks; py-spy (its window lasts a time) gets a launch of its own."""
    out = tmp_path / "run"
    done = profile_all_here("run", "--nproc-per-node", "2", DDP, "-o", out, "--", "--steps",
                            "30")
    assert done.returncode == 0, done.stderr
    assert "trained 30 steps on 2 ranks (LOCAL_RANK 0)" in done.stdout
    report = pa.load(out)
    passes = {tuple(p.backends): p for p in report.meta.passes}
    for name, first in (("cprofile", 6), ("torch-profiler", 14), ("flop-counter", 22)):
        hosted = passes[(name,)]
        assert (hosted.host, hosted.window_from, hosted.steps) == (1, first, 6), name
        assert [(r["rank"], r["status"]) for r in hosted.ranks] == [(0, "ok"), (1, "ok")]
    assert passes[("py-spy",)].host is None
    assert "the script ran once: passes 2 (cprofile) steps 6-11, 3 (torch-profiler)" in \
        " ".join(report.meta.doubts)
    measured = report.frame[report.frame["backend"] != "derived"]
    backends = set(measured["backend"])
    assert {"wallclock", "cprofile", "torch-profiler", "flop-counter", "memory"} <= backends
    for backend, ranks in measured.groupby("backend")["rank"]:
        assert set(ranks) == {0, 1}, backend
    artifacts = out / "artifacts"
    for name in ("cprofile.rank{}.prof", "torch_trace.rank{}.pt.trace.json.gz",
                 "mprofile.rank{}.dat"):
        assert all((artifacts / name.format(rank)).is_file() for rank in (0, 1)), name
    with gzip.open(artifacts / "torch_trace.rank1.pt.trace.json.gz") as trace:
        assert json.load(trace)["distributedInfo"]["rank"] == 1
    ranks = report.ranks()
    step = ranks[(ranks["scope"] == "region") & (ranks["name"] == "train_step")
                 & (ranks["backend"] == "wallclock")].iloc[0]
    assert step["ranks"] == 2 and step["slowest_rank"] in (0, 1)
    assert step["min"] <= step["median"] <= step["max"]
    assert report.meta.distributed["world_size"] == 2 and report.meta.ranks == [0, 1]
    assert report.meta.preimported == ["torch"]  # not torch._dynamo: see the README
    assert "## Across ranks" in (out / "summary.md").read_text()
    assert '<section id="ranks">' in (out / "report.html").read_text()
    _gloo_analyses(report, out)
    lines = [trace["name"] for trace in charts.memory_timeline(report)["data"]]
    assert {"rank 0 process", "rank 1 process"} <= set(lines)  # report.html: each rank's RSS
    assert profile_file(out, 1).name == "cprofile.rank1.prof"  # `view --rank 1` serves it
    wrong = profile_all_here("view", out, "--rank", "2", "--no-browser")
    assert wrong.returncode == 2
    assert wrong.stderr.strip().endswith("has no cProfile file of rank 2: its ranks are 0, 1")


def _gloo_analyses(report: pa.Report, out) -> None:
    """The live gloo run's analyses per rank: the collectives' host time (checked against
    the gloo ranges read from the trace with json: at least the longest, at most their
    sum) and what computation overlapped, the step breakdown and the stragglers."""
    overlap = report.overlap().set_index("rank")
    assert set(overlap.index) == {0, 1} and set(overlap["on"]) == {"host"}
    for rank in (0, 1):
        with gzip.open(out / "artifacts" / f"torch_trace.rank{rank}.pt.trace.json.gz") as file:
            spans = [event["dur"] * 1e-6 for event in json.load(file)["traceEvents"]
                     if str(event.get("name", "")).startswith("gloo:")]
        # (ts are µs since 1970 as float64: an interval's ends are exact to ~0.25 µs)
        assert max(spans) * (1 - 1e-6) <= overlap.loc[rank, "communication"] \
            <= sum(spans) * (1 + 1e-6)
        assert 0 <= overlap.loc[rank, "overlapped"] <= overlap.loc[rank, "communication"]
    steps = report.step_time()
    assert set(steps["rank"]) == {0, 1}
    assert (steps[["communication", "data_loader", "cpu", "other"]].sum(axis=1)
            - steps["step_time"]).abs().max() \
        < 1e-9  # no device: the step is the host's
    assert set(report.stragglers()["ranks"]) == {2}
    summary = (out / "summary.md").read_text()
    assert "## Communication overlap, per rank" in summary
    assert "## Step time breakdown, per rank and step" in summary


def test_the_target_sees_what_torchrun_gives_it(tmp_path):
    under_profile_all = tmp_path / "profiled"
    done = profile_all("run", "--nproc-per-node", "2", "-b", "wallclock", TARGETS /
                       "dump_env.py", "-o", tmp_path / "run", "--", under_profile_all)
    assert done.returncode == 0, done.stderr
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc-per-node", "2", str(TARGETS / "dump_env.py"), str(bare)],
                   check=True, capture_output=True, timeout=120)
    varying = {"MASTER_PORT", "TORCHELASTIC_RUN_ID"}
    for rank in (0, 1):
        ours = json.loads((tmp_path / f"profiled.rank{rank}.json").read_text())
        theirs = json.loads((tmp_path / f"bare.rank{rank}.json").read_text())
        assert ours["name"] == theirs["name"] == "__main__"
        assert ours["argv"][0] == theirs["argv"][0] == str(TARGETS / "dump_env.py")
        assert {k: v for k, v in ours["env"].items() if k not in varying} == \
            {k: v for k, v in theirs["env"].items() if k not in varying}
        assert ours["env"]["RANK"] == str(rank) and ours["env"]["WORLD_SIZE"] == "2"


def _node(out, node_rank, port, results):
    results[node_rank] = profile_all(
        "run", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank", str(node_rank),
        "--rdzv-endpoint", f"127.0.0.1:{port}", "-b", "wallclock", DDP, "-o", out, "--",
        "--steps", "5", timeout=300)


def test_two_nodes_merge_into_one_report(tmp_path):
    port, results = free_port(), {}
    nodes = [threading.Thread(target=_node, args=(tmp_path / f"node{k}", k, port, results))
             for k in (0, 1)]
    for node in nodes:
        node.start()
    for node in nodes:
        node.join()
    for done in results.values():
        assert done.returncode == 0, done.stderr
    merged = tmp_path / "merged"
    done = profile_all_here("merge", tmp_path / "node0", tmp_path / "node1", "-o", merged)
    assert done.returncode == 0, done.stderr
    report = pa.load(merged)
    assert set(report.frame["rank"]) == {0, 1} and report.meta.ranks == [0, 1]
    assert {r["rank"] for r in report.meta.passes[0].ranks} == {0, 1}
    assert (merged / "artifacts" / "node1" / "pass1.stdout.log").is_file()
    assert not report.ranks().empty

    again = profile_all_here("merge", tmp_path / "node0", tmp_path / "node0", "-o",
                             tmp_path / "twice")
    # c10d hands out ranks as nodes arrive: node0 may hold rank 1
    assert again.returncode == 2 and re.search(r"pass 1 rank [01] is in both", again.stderr)
    assert not (tmp_path / "twice").exists()
    alone = tmp_path / "alone"
    assert profile_all_here("run", "-b", "wallclock", TARGETS / "speed.py", "-o",
                            alone).returncode == 0
    other = profile_all_here("merge", tmp_path / "node0", alone, "-o", tmp_path / "mixed")
    assert other.returncode == 2 and "are not from the same run" in other.stderr
    forced = profile_all_here("merge", "--force", tmp_path / "node0", alone, "-o",
                              tmp_path / "mixed")
    assert forced.returncode == 0, forced.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--nproc-per-node", "0"], "(--nproc-per-node) wants a positive integer or auto"),
    (["--nnodes", "2"], "several nodes need --rdzv-endpoint"),
    (["--nnodes", "x"], "--nnodes wants N or MIN:MAX"),
])
def test_bad_launch_options(tmp_path, args, message):
    done = profile_all_here("run", *args, "-b", "wallclock", DDP, "-o", tmp_path / "run")
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


def test_the_api_runs_ranks_too(tmp_path):
    report = pa.run(TARGETS / "dump_env.py", [tmp_path / "seen"], backends=["wallclock"],
                    nproc_per_node=2, out=tmp_path / "run")
    assert report.exit_code == 0 and report.meta.ranks == [0, 1]
    assert set(report.frame["rank"]) == {0, 1}
    with pytest.raises(pa.UsageError, match="not both"):
        pa.run(TARGETS / "dump_env.py", nproc_per_node=2, launch=pa.Launch("2"))


UNEVEN = """import os
import time
import profile_all as pa
steps = 30 if os.environ["RANK"] == "0" else 14
for step in range(steps):
    with pa.region("work"):
        time.sleep(0.002)
    pa.step()
print(f"rank {os.environ['RANK']} ran {steps} steps", flush=True)
"""


def test_a_window_one_rank_did_not_get_runs_again_on_every_rank(tmp_path):
    """Rank 1 ends after 14 steps, inside the second window (steps 14-19): cProfile's
    window (6-11) is both ranks', the FLOP counter's runs again in a launch of its own."""
    script = tmp_path / "uneven.py"
    script.write_text(UNEVEN)
    report = pa.run(script, backends=["wallclock", "cprofile", "flop-counter"],
                    nproc_per_node=2, out=tmp_path / "run")
    hosted, again = report.meta.passes[1:]
    assert (hosted.backends, hosted.host, hosted.window_from) == (["cprofile"], 1, 6)
    assert (again.backends, again.host, again.steps) == (["flop-counter"], None, 25)
    for record in (hosted, again):
        assert [(r["rank"], r["status"]) for r in record.ranks] == [(0, "ok"), (1, "ok")]
    frame = report.frame
    sleeps = frame[(frame["pass"] == 2) & (frame["scope"] == "function")
                   & frame["name"].str.contains("time.sleep") & (frame["metric"] == "calls")]
    assert dict(zip(sleeps["rank"], sleeps["value"], strict=True)) == {0: 6, 1: 6}
    counted = frame[(frame["pass"] == 3) & (frame["scope"] == "step")
                    & (frame["metric"] == "calls")]
    assert dict(zip(counted["rank"], counted["value"], strict=True)) == {0: 25, 1: 14}
