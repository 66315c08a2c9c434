"""Numbers marked doubtful with the reason: overheads with intervals, noisy or unlike
passes, losses named (a profiler cut off, a tracer that saw nothing, children's work),
region names that survive every backend, and the same imports before every pass."""

from __future__ import annotations

import json

import numpy as np
import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here
from profile_all import noise
from profile_all.backends import load
from profile_all.pass_record import PassRecord
from profile_all.runner.judging import run_checks
from profile_all.runner.planning.plan import plan_passes


def test_timing_repeats_are_spread_over_the_run():
    backends = [load(name) for name in ("wallclock", "cprofile", "torch-profiler", "memory")]
    order = [(p.label, p.repeat) for p in plan_passes(backends, repeat=3)]
    assert order == [("wallclock", 1), ("cprofile", 0), ("torch-profiler", 0),
                     ("wallclock", 2), ("memory", 0), ("wallclock", 3)]
    assert [p.index for p in plan_passes(backends, repeat=3)] == [1, 2, 3, 4, 5, 6]


def test_runs_not_calls_carry_the_noise():
    """Each process has a speed of its own: two sets of runs of the same work differ by
    more than their calls' spread says. Intervals rest on runs, and say when they cannot."""
    rng = np.random.default_rng(3)

    def runs(centre, count, calls=400):
        return [centre * np.exp(rng.normal(0, 0.1)) * (1 + rng.normal(0, 0.01, calls))
                for _ in range(count)]

    same = [noise.median_ratio(runs(1e-3, 3), runs(1e-3, 3)) for _ in range(40)]
    assert sum(r.verdict == "no change" for r in same) >= 36  # 95% intervals
    assert all(r.tested and r.basis == "3+3 runs" for r in same)
    slower = noise.median_ratio(runs(1e-3, 10), runs(1.5e-3, 10))
    assert slower.verdict == "slower" and slower.low > 0.2
    one_each = noise.median_ratio(runs(1e-3, 1), runs(1e-3, 1))
    assert not one_each.tested
    assert one_each.basis == "1+1 run, blocks (drift between runs not measured)"
    few = noise.median_ratio([np.ones(14)], [np.ones(14)])
    assert not few.blocked and "calls" in few.basis


def _summary(number, steps, timing=False, wall=1.0):
    return PassRecord(number=number, backends=["wallclock" if timing else "cprofile"],
                      timing=timing, status="ok", target_wall_time=wall, steps=len(steps) + 1)


def _step_times(passes, *steps):
    return {summary.number: list(times) for summary, times in zip(passes, steps, strict=True)}


def test_an_overhead_below_one_is_never_a_speed_up():
    rng = np.random.default_rng(0)
    steps = [0.010 + rng.normal(0, 1e-4, 50), 0.008 + rng.normal(0, 1e-4, 50),
             0.010 + rng.normal(0, 1e-3, 50), 0.015 + rng.normal(0, 1e-4, 50)]
    passes = [_summary(number, times, timing=number == 1)
              for number, times in enumerate(steps, start=1)]
    step_times = _step_times(passes, *steps)
    run_checks.add_overheads(passes, step_times, comparable=True)
    verdicts = [p.overhead_verdict for p in passes]
    assert verdicts[0] == "reference"
    assert verdicts[1].startswith("below 1: noise or different work")
    assert verdicts[2] == "within noise"
    assert verdicts[3] == "above noise" and passes[3].overhead_low > 1.4
    said = run_checks.doubts(passes, [], step_times, [], comparable=True)
    assert any("ran faster than the clean pass" in line and "not a speed-up" in line
               for line in said)
    one_each = [_summary(1, [], timing=True, wall=2.0), _summary(2, [], wall=1.8)]
    run_checks.add_overheads(one_each, {}, comparable=True)
    assert one_each[1].overhead_verdict == "untested"
    assert one_each[1].overhead_low is None


def test_profiled_passes_get_per_step_overheads_and_the_same_imports(tmp_path):
    report = pa.run(TARGETS / "speed.py", ["0.002"], backends=["wallclock", "cprofile"],
                    out=tmp_path / "run")
    passes = report.passes()
    # the profiled pass: a window of 6 steps inside the timing pass's process
    assert list(passes["steps"]) == [30, 6] and report.meta.passes[1].host == 1
    profiled = passes.iloc[1]
    assert profiled["overhead_low"] <= profiled["overhead"] <= profiled["overhead_high"]
    assert profiled["overhead_basis"] == ("per-step times against 1 timing pass (the drift "
                                          "between runs is not in the interval: --repeat 3)")
    assert profiled["overhead_verdict"] in ("within noise", "above noise")
    assert "Overhead is each pass's time over the clean timing pass's" in (
        tmp_path / "run" / "summary.md").read_text()


def test_every_pass_imports_torch_whatever_the_backends_and_dynamo_where_due(tmp_path):
    """`-b cprofile` alone used to count `import torch` in the target's time (1.53 s
    against 75 ms for the same pass in a default run). torch._dynamo (a second more of
    every run's start) is imported first where a backend imports it as it starts, or
    where the script's own file compiles or makes an optimizer (else its import would land
    in the target's time of one run and not of another)."""
    from profile_all.runner.planning.setup import setup_run
    from profile_all.targets import ScriptTarget

    alone = profile_all_here("run", TARGETS / "preimported.py", "-b", "cprofile",
                             "-o", tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr
    assert "torch before the target: True" in alone.stdout
    assert pa.load(tmp_path / "alone").meta.preimported == ["torch"]
    compiling = tmp_path / "compiling.py"
    compiling.write_text("import torch\nstep = torch.compile(lambda x: x + 1)\n")
    training = tmp_path / "training.py"  # torch 2.13's optimizers import it as they are made
    training.write_text("import torch\nsgd = torch.optim.SGD([torch.zeros(1)], lr=0.1)\n")
    for script, named, dynamo in [(TARGETS / "preimported.py", ["cprofile"], False),
                                  (TARGETS / "preimported.py", ["torch-profiler"], True),
                                  (TARGETS / "preimported.py", None, True),  # every backend
                                  (compiling, ["cprofile"], True),
                                  (training, ["cprofile"], True)]:
        setup = setup_run(ScriptTarget(str(script), []), named, None, True, None, None, 1,
                          False, None)
        assert ("torch._dynamo" in setup.preimport) == dynamo, (script.name, named)
        assert "torch" in setup.preimport


def test_passes_that_did_different_work_are_named(tmp_path):
    """Scripts that do different work each time they run (`uneven_steps.py` counts its
    runs in a file): passes of their own run it again."""
    report = pa.run(TARGETS / "uneven_steps.py", [str(tmp_path / "count")],
                    backends=["wallclock", "cprofile"], out=tmp_path / "run",
                    separate_passes=True)
    assert list(report.passes()["steps"]) == [10, 15]
    said = [line for line in report.meta.doubts if line.startswith("passes did")]
    assert said == ["passes did different work (steps per pass: pass 1: 10, pass 2: 15): "
                    "whole-run times and totals do not compare; per-step figures still do"]
    assert said[0] in (tmp_path / "run" / "summary.md").read_text()


def test_a_noisy_clean_pass_is_said_to_be(tmp_path):
    report = pa.run(TARGETS / "uneven_steps.py", [str(tmp_path / "count"), "noisy"],
                    backends=["wallclock"], out=tmp_path / "run")
    assert any(line.startswith("the clean timing pass 1 was noisy: its steps vary by")
               for line in report.meta.doubts)


def test_work_in_child_processes_is_said_to_be_unseen(tmp_path):
    result = profile_all_here("run", TARGETS / "spawns_children.py", "-b", "wallclock",
                              "-b", "cprofile", "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    report = pa.load(tmp_path / "run")
    said = [line for line in report.meta.doubts if "child processes" in line]
    assert len(said) == 1 and "cprofile" in said[0] and "did not see that work" in said[0]
    cpu = float(said[0].split("used ")[1].split(" s of CPU")[0])
    assert cpu >= 0.3  # the child burned about 0.4 s of CPU
    assert "child processes" in result.stderr


def test_a_target_that_starts_its_own_cprofile_is_named_with_what_was_lost(tmp_path):
    result = profile_all_here("run", TARGETS / "own_cprofile.py", "-b", "wallclock",
                              "-b", "cprofile", "--show-output", "all", "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr  # the target's own exit code
    assert result.stdout.count("own profile saw calls: True") == 2
    report = pa.load(tmp_path / "run")
    assert report.meta.status == "partial"
    assert list(report.passes()["status"]) == ["ok", "partial"]
    lost = report.meta.passes[1].backend_failures
    assert lost[0]["phase"] == "lost"
    assert f"{TARGETS / 'own_cprofile.py'}:15" in lost[0]["error"]
    assert "of the run is missing from cprofile.prof" in lost[0]["error"]
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "Status: **partial**" in summary and "own_cprofile.py:15" in summary
    assert "partial" in (tmp_path / "run" / "report.html").read_text()


def test_a_tracer_that_recorded_nothing_is_not_ok(tmp_path):
    report = pa.run(TARGETS / "no_torch.py", backends=["torch-profiler"],
                    out=tmp_path / "run")
    assert report.exit_code == 0
    assert report.meta.status == "partial"
    traced = [p for p in report.meta.passes if p.backends == ["torch-profiler"]]
    failure = traced[0].backend_failures[0]
    assert failure["backend"] == "torch-profiler"
    assert failure["error"].startswith("recorded nothing beyond the run's totals")


HOSTILE = ['a"b', "c\nd", "uni\u00e9", "back\\slash", "50%"]


def test_region_names_survive_every_backend(tmp_path):
    """torch wrote a `"` raw (invalid JSON), dropped newlines and wrote "unknown" for
    non-ASCII: every backend's rows must name these regions as the script did."""
    report = pa.run(TARGETS / "speed.py", ["0.001", *HOSTILE],
                    backends=["wallclock", "torch-profiler", "flop-counter", "memory"],
                    out=tmp_path / "run")
    assert report.meta.status == "complete", report.meta.passes
    regions = report.frame[(report.frame["scope"] == "region")
                           & (report.frame["metric"] == "calls")]
    for backend in ("wallclock", "torch-profiler", "flop-counter"):
        named = set(regions[regions["backend"] == backend]["name"])
        assert set(HOSTILE) <= named, (backend, named)
    memory = report.frame[(report.frame["backend"] == "memory")
                          & (report.frame["scope"] == "region")]
    assert set(HOSTILE) <= set(memory["name"])
    json.loads(json.dumps(report.meta.to_json()))  # and the metadata stays valid JSON


def test_model_latency_has_blocks_and_repeats_side_by_side(tmp_path):
    report = pa.profile_model(_linear_spec(tmp_path), input_shapes=[(4, 32)], backends=[],
                              iters=60, warmup=3, repeat=2, out=tmp_path / "run")
    latency = report.latency()
    blocks = latency[latency["stat"].isin(["block_min", "block_max"])]
    assert sorted(set(blocks["pass"])) == [1, 2] and len(blocks) == 4
    for number, rows in blocks.groupby("pass"):
        low, high = sorted(rows["value"])
        median = latency[(latency["pass"] == number) & (latency["stat"] == "median")
                         & (latency["metric"] == "latency")]["value"].item()
        assert low <= median <= high
    timing = report.meta.model["timing_passes"]
    assert [t["pass"] for t in timing] == [1, 2] and all(t["blocks"] == 5 for t in timing)
    from profile_all.render.model_tables import latency_table

    assert {"pass 1", "pass 2"} <= set(latency_table(report).columns)


def _linear_spec(tmp_path):
    factory = tmp_path / "linear_model.py"
    factory.write_text("import torch\n\ndef make():\n    return torch.nn.Linear(32, 8)\n")
    return f"{factory}:make"


def test_steps_are_found_through_the_optimizer_when_the_script_marks_none(tmp_path):
    report = pa.run(TARGETS / "optimizer_steps.py", backends=["wallclock", "cprofile"],
                    out=tmp_path / "run")
    passes = report.meta.passes
    assert [(p.steps, p.step_source) for p in passes] == [(12, "optimizer.step()"),
                                                          (6, "optimizer.step()")]
    assert passes[1].overhead_basis.startswith("per-step times")
    uneven = pa.run(TARGETS / "optimizer_steps.py", [str(tmp_path / "count")],
                    backends=["wallclock", "cprofile"], out=tmp_path / "uneven",
                    separate_passes=True)
    assert any("steps per pass: pass 1: 12, pass 2: 14" in line
               for line in uneven.meta.doubts)


def test_unlike_work_without_steps_is_seen_in_region_calls_or_said_unknowable(tmp_path):
    regions = pa.run(TARGETS / "uneven_regions.py", [str(tmp_path / "count")],
                     backends=["wallclock", "flop-counter"], out=tmp_path / "regions")
    assert any("calls of region work: pass 1: 3, pass 2: 4" in line
               for line in regions.meta.doubts)
    bare = pa.run(TARGETS / "no_torch.py", backends=["wallclock", "cprofile"],
                  out=tmp_path / "bare")
    assert any(line.startswith("the target marks no step") for line in bare.meta.doubts)


def test_without_steps_the_overhead_interval_is_a_prediction_from_the_repeats(tmp_path):
    """Not the min-max of the repeats (which a new run leaves half the time with 3): a t
    prediction interval for one more run, computed here by hand."""
    from scipy import stats

    report = pa.run(TARGETS / "no_torch.py", backends=["wallclock", "cprofile"], repeat=3,
                    out=tmp_path / "run")
    passes = report.meta.passes
    timing = np.log([p.target_wall_time for p in passes if p.timing])
    profiled = next(p for p in passes if not p.timing)
    margin = stats.t.ppf(0.975, 2) * timing.std(ddof=1) * np.sqrt(1 + 1 / 3)
    centre = np.log(profiled.target_wall_time) - timing.mean()
    assert profiled.overhead_low == pytest.approx(np.exp(centre - margin))
    assert profiled.overhead_high == pytest.approx(np.exp(centre + margin))
    assert profiled.overhead_basis == "whole run against 3 timing passes (no steps)"
