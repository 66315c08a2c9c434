"""The bundled examples, run end to end as a new user would, and the report they give."""

from __future__ import annotations

import json
import pstats
import re

import pandas as pd
import pytest

import profile_all as pa
from conftest import EXAMPLES, profile_all_here
from profile_all.rows import COLUMNS


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("mlp") / "run"
    result = profile_all_here("run", EXAMPLES / "train_mlp.py", "-o", run_dir, "--", "--steps",
                              "30")
    assert result.returncode == 0, result.stderr
    return run_dir, result


def test_train_mlp_report_files(mlp_run):
    run_dir, result = mlp_run
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "artifacts", "meta.json", "report.csv", "report.html", "report.parquet", "samples.parquet",
        "summary.md", "timeline.parquet"]
    assert "step   29" in result.stdout  # the script's own output passed through
    assert f"Report: {run_dir}" in result.stderr
    # piped, nothing live shows: a line as each pass starts and as it ends
    assert "pass 1/5 wallclock+memory: started" in result.stderr
    assert "pass 2/5 cprofile: ok in" in result.stderr
    frame = pd.read_parquet(run_dir / "report.parquet")
    assert list(frame.columns) == COLUMNS
    assert set(frame["backend"]) == {"wallclock", "cprofile", "py-spy", "torch-profiler",
                                     "flop-counter", "memory", "derived"}
    # achieved FLOP/s of each region: flop-counter's FLOPs over the wall clock's median
    achieved = frame[(frame["backend"] == "derived") & (frame["metric"] == "achieved_flops")]
    assert set(achieved["name"]) == {"train_step", "forward", "backward"}
    assert (achieved["value"] > 0).all()
    assert pd.read_csv(run_dir / "report.csv").shape == frame.shape
    assert pstats.Stats(str(run_dir / "artifacts" / "cprofile.prof")).total_calls > 0
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["exit_code"] == 0
    assert meta["environment"]["torch"].startswith("2.")
    # the script ran once: the memory sampler beside the timers, three windows of 6 steps
    # (fewer, at least 4, where a loaded machine made steps long) inside that process, 2
    # clean steps between, and py-spy (whose window lasts a second) in a pass of its own,
    # or after them where a loaded machine made the steps left last that second
    assert [p["backends"] for p in meta["passes"]] == [
        ["wallclock", "memory"], ["cprofile"], ["torch-profiler"], ["flop-counter"],
        ["py-spy"]]
    hosted, spy = meta["passes"][1:4], meta["passes"][4]
    assert [p.get("host") for p in meta["passes"][:4]] == [None, 1, 1, 1]
    assert all(4 <= p["steps"] == p["window"] <= 6 for p in hosted)
    assert [p["window_from"] for p in hosted] == [
        6, 6 + hosted[0]["steps"] + 2, 6 + hosted[0]["steps"] + hosted[1]["steps"] + 4]
    assert meta["passes"][0]["overhead_verdict"] == "reference"
    if spy.get("host") is None:
        assert (spy["steps"], spy["window"]) == (25, 25)
    else:
        assert spy["host"] == 1 and spy["window_from"] > hosted[2]["window_from"]
    for profiled in meta["passes"][1:]:  # per-step overheads, each with its interval
        assert profiled["overhead_low"] <= profiled["overhead"] <= profiled["overhead_high"]
        assert "per-step times" in profiled["overhead_basis"]
    assert (run_dir / "artifacts" / "torch_trace.pt.trace.json.gz").is_file()
    # one FUNC line a region (mprof plot gives each line a legend entry), not one a call
    funcs = re.findall(r"^FUNC (\S+) ", (run_dir / "artifacts" / "mprofile.dat").read_text(),
                       re.M)
    assert sorted(funcs) == sorted(set(funcs)) and "train_step" in funcs


def test_train_mlp_regions_keep_their_parents(mlp_run):
    report = pa.load(mlp_run[0])
    summary = report.summary()
    regions = summary[summary["scope"] == "region"]
    ours = {("", "train_step"), ("train_step", "data"), ("train_step", "forward"),
            ("train_step", "backward"), ("train_step", "optimizer_step")}
    timed = regions[regions["wallclock.calls.total"].notna()]
    assert set(zip(timed["parent"], timed["name"], strict=True)) == ours
    # torch.profiler also sees the optimizer's own record_function ranges, inside ours
    traced = set(zip(regions["parent"], regions["name"], strict=True))
    assert traced - ours == {("train_step/backward", "Optimizer.zero_grad#SGD.zero_grad"),
                             ("train_step/optimizer_step", "Optimizer.step#SGD.step")}
    assert (timed["wallclock.calls.total"] == 30).all()  # per-call figures: outside windows
    # the pass's window: 6 steps, fewer (at least 4) where a loaded machine made them long
    window = next(p.steps for p in report.meta.passes if p.backends == ["torch-profiler"])
    assert 4 <= window <= 6
    assert (timed["torch-profiler.calls.total"] == window).all()
    steps = summary[summary["scope"] == "step"].set_index("name")
    assert steps.loc["step", "wallclock.calls.total"] == 30
    # the trace marks each step as torch.profiler's own step() does (TensorBoard's step
    # view, HTA): ProfilerStep#0 from the window's start to its first step's end, ..., #5
    # to its last; #6, which torch opens there, is the tail: no step
    assert steps.loc["ProfilerStep", "torch-profiler.calls.total"] == window
    # the children's time fits inside the parent's
    parent_total = timed.loc[timed["name"] == "train_step", "wallclock.wall_time.total"].item()
    children = timed.loc[timed["parent"] == "train_step", "wallclock.wall_time.total"].sum()
    assert 0 < children <= parent_total
    for stat in ("mean", "median", "std", "min", "max", "p90"):
        assert f"wallclock.wall_time.{stat}" in summary.columns
    text = (mlp_run[0] / "summary.md").read_text()
    assert "train_step/forward" in text and "Functions by self time (cprofile)" in text
    # headers the terminal breaks in two lines read as one (a literal `\n` before)
    assert "\\n(" not in text and "| total (wallclock) |" in text


def test_two_layer_net_with_wallclock_only(tmp_path):
    result = profile_all_here("run", EXAMPLES / "two_layer_net.py", "-b", "wallclock",
                              "-o", tmp_path / "run", "--", "--steps", "40")
    assert result.returncode == 0, result.stderr
    summary = pa.load(tmp_path / "run").summary()
    calls = dict(zip(summary["name"], summary["wallclock.calls.total"], strict=True))
    assert calls["forward"] == calls["backward"] == calls["update"] == calls["step"] == 40


def test_show_prints_the_summary(mlp_run):
    result = profile_all_here("show", mlp_run[0])
    assert result.returncode == 0, result.stderr
    assert "train_step/optimizer_step" in result.stdout
    assert "Functions by self time" in result.stdout
    assert "more rows not shown (--top N to see more)" in result.stdout
