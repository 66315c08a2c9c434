"""Every finding rule on a report built to trigger it and on one that must not: reports
made of hand-written rows (fast, the rule's arithmetic checked by hand), and one real
plain training loop with a slow input, whose slow input must be named first."""

from __future__ import annotations

import gzip
import io
import json

import numpy as np
import pytest
from rich.console import Console

import profile_all as pa
from conftest import TARGETS
from profile_all.pass_record import PassRecord
from profile_all.render.terminal import render
from profile_all.report.report import Report
from profile_all.rows import Facts
from profile_all.run_record import RunRecord

TIMER = {"my.timer": Facts(region_timer="wall_time").to_dict()}


def _report(rows, meta=None, samples=None, timeline=None):
    """`meta`: the run record's fields that differ from a complete run's with a timer."""
    meta = RunRecord(**{"status": "complete", "backend_facts": TIMER, **(meta or {})})
    return Report.from_rows(rows, meta, samples=samples, timeline=timeline)


def _t(scope, name, value, metric="wall_time", parent="", stat="total", backend="my.timer",
       rank=0, unit="s"):
    return [backend, 1, rank, scope, name, parent, metric, stat, value, unit]


def _rules(report, rule):
    found = report.findings()
    return found[found["rule"] == rule]


STEPS = [_t("step", "step", 10.0), _t("step", "step", 100, metric="calls", unit="count")]


def test_input_bound_by_a_data_region_and_not_when_loading_is_light():
    slow = _report([*STEPS, _t("region", "load_batch", 4.0), _t("region", "forward", 5.0)])
    found = _rules(slow, "input")
    assert len(found) == 1 and found["share"].iloc[0] == pytest.approx(0.4)
    assert slow.findings()["rule"].iloc[0] == "input"  # named first
    # a region that makes its batches itself, no DataLoader in the run: no DataLoader
    # settings as if there were one
    assert found["try"].iloc[0].startswith("no DataLoader was seen: the batches are made")
    assert "num_workers" not in found["try"].iloc[0]
    light = _report([*STEPS, _t("region", "load_batch", 0.5), _t("region", "forward", 9.0)])
    assert _rules(light, "input").empty


def test_time_outside_forward_backward_and_the_optimizer_is_input_bound():
    def step(forward, backward, optimizer):
        return _report([*STEPS, _t("region", "train_step", 9.9),
                        _t("region", "forward", forward, parent="train_step"),
                        _t("region", "backward", backward, parent="train_step"),
                        _t("region", "optimizer_step", optimizer, parent="train_step")])

    found = _rules(step(3.0, 3.0, 1.0), "input")
    assert found["share"].iloc[0] == pytest.approx(0.3)  # 10 s of steps, 7 s in the work
    assert "outside its forward, backward and optimizer" in found["finding"].iloc[0]
    assert _rules(step(4.5, 4.5, 0.8), "input").empty  # 2% outside


def test_where_the_time_goes_looks_inside_a_region_that_holds_the_step():
    report = _report([*STEPS, _t("region", "train_step", 9.9),
                      _t("region", "backward", 6.0, parent="train_step"),
                      _t("region", "attention", 4.5, parent="train_step/backward"),
                      _t("region", "forward", 3.0, parent="train_step"),
                      _t("region", "zero_grad", 0.5, parent="train_step")])
    found = _rules(report, "time")
    assert list(found["finding"].str.split().str[0]) == ["train_step/backward",
                                                          "train_step/forward"]
    assert list(found["share"]) == pytest.approx([0.6, 0.3])  # zero_grad's 5%: not named
    assert "inside, attention 75.0%" in found["finding"].iloc[0]
    spread = _report(STEPS + [_t("region", f"r{i}", 0.5) for i in range(20)])
    assert _rules(spread, "time").empty


def test_warm_up_is_the_first_steps_far_above_the_steady_ones():
    def with_steps(values):
        samples = [["my.timer", 1, 0, "step", "step", "", "wall_time", values]]
        return _report(STEPS, samples=samples)

    slow_start = with_steps([0.5, 0.3, *[0.01] * 30])
    found = _rules(slow_start, "warm-up")
    # the per-step times leave step 1 (the setup) out: the first two are steps 2 and 3
    assert found["finding"].tolist() == [
        "warm-up: steps 2-3 took 800 ms, 50x a steady step (10 ms; step 1, the script's "
        "setup, apart)"]
    assert found["amount"].iloc[0] == pytest.approx(0.8 - 2 * 0.01)
    assert _rules(with_steps([0.012, *[0.01] * 30]), "warm-up").empty


def _rss(times, values):
    return [["memory", 5, 0, "rss", "process", t, t, v, "B"]
            for t, v in zip(times, values, strict=True)]


def test_memory_growing_all_along_is_named_and_a_start_up_rise_is_not():
    times = np.linspace(0, 3, 60)
    leak = _report([], timeline=_rss(times, 200e6 + 40e6 * times))
    found = _rules(leak, "memory")
    assert len(found) == 1 and "RSS +" in found["finding"].iloc[0]
    assert found["amount"].iloc[0] == pytest.approx(40e6 * (times[-1] - times[15]), rel=0.01)
    rise_then_flat = 200e6 + 120e6 * np.minimum(times, 1.2)
    assert _rules(_report([], timeline=_rss(times, rise_then_flat)), "memory").empty


def test_memory_grows_across_the_steps_not_before_them():
    """Imports and the model's building (transformers' take seconds) grew RSS for most of
    the pass, and a script that keeps nothing was said to leak: growth is looked for from
    the end of the first step to the end of the last."""
    times = np.linspace(0, 12, 241)
    building = 200e6 + 300e6 * np.clip(times / 10.0, 0, 1)  # 10 s of start-up, then flat
    steps = [["memory", 5, 0, "step", "step", t, t, np.nan, "s"]
             for t in np.linspace(10.0, 12.0, 30)]
    assert len(_rules(_report([], timeline=_rss(times, building)), "memory")) == 1  # unsaid
    assert _rules(_report([], timeline=_rss(times, building) + steps), "memory").empty
    leak = building + 60e6 * np.clip(times - 10.0, 0, 2)
    found = _rules(_report([], timeline=_rss(times, leak) + steps), "memory")
    assert len(found) == 1 and "RSS +" in found["finding"].iloc[0]


def test_memory_that_compiling_takes_is_no_leak():
    """A recompile halfway: RSS ramps for the 1.5 s it compiles, flat before and after; the
    same ramp with no compilation said is a leak."""
    times = np.linspace(0, 4, 80)
    rss = 200e6 + 50e6 * np.clip(times - 1.5, 0, 1.5) / 1.5
    pass_of = _rss(times, rss)[0][1]
    compiled = {"passes": [PassRecord(number=pass_of, compilation={"intervals": [[1.5, 3.0]]})]}
    assert _rules(_report([], compiled, timeline=_rss(times, rss)), "memory").empty
    ramp = 200e6 + 50e6 * np.clip(times - 1.0, 0, 3.0) / 3.0
    assert len(_rules(_report([], timeline=_rss(times, ramp)), "memory")) == 1


def test_cuda_memory_growing_step_after_step_and_not():
    def cuda(values):
        return [["memory", 5, 0, "cuda", "allocated", 0.01 * i, 0.01 * i, v, "B"]
                for i, v in enumerate(values)]

    leak = _rules(_report([], timeline=cuda([1e9 + 50e6 * i for i in range(30)])), "memory")
    assert len(leak) == 1 and "CUDA memory allocated +" in leak["finding"].iloc[0]
    assert leak["amount"].iloc[0] == pytest.approx(50e6 * (29 - 7), rel=1e-6)
    steady = cuda([1e9 + (i % 2) * 1e6 for i in range(30)])
    assert _rules(_report([], timeline=steady), "memory").empty


def test_a_peak_near_the_machines_memory():
    near = _report([_t("run", "run", 9e9, metric="peak_rss", stat="max", backend="memory",
                       unit="B")], meta={"environment": {"memory_total": 10e9}})
    assert "near capacity" in _rules(near, "memory")["finding"].iloc[0]
    far = _report([_t("run", "run", 3e9, metric="peak_rss", stat="max", backend="memory",
                      unit="B")], meta={"environment": {"memory_total": 10e9}})
    assert _rules(far, "memory").empty


def _trace(busy, extra=()):
    return [_t("run", "trace", 1.0, backend="tracer"),
            _t("run", "trace", busy, metric="gpu_time", backend="tracer"),
            _t("kernel", "gemm", busy, metric="gpu_time", backend="tracer"),
            _t("kernel", "gemm", 50_000, metric="calls", backend="tracer", unit="count"),
            *extra]


def test_an_idle_device_and_a_busy_one():
    found = _rules(_report(_trace(0.2)), "device")
    assert len(found) == 1 and found["share"].iloc[0] == pytest.approx(0.8)
    assert "launch-bound" in found["finding"].iloc[0]  # 4 µs kernels
    assert "CUDA graphs" in found["try"].iloc[0]
    assert _rules(_report(_trace(0.9)), "device").empty


def test_host_device_syncs_and_none():
    syncing = _trace(0.9, [_t("api", "cudaDeviceSynchronize", 0.2, backend="tracer"),
                           _t("api", "cudaDeviceSynchronize", 40, metric="calls",
                              backend="tracer", unit="count")])
    found = _rules(_report(syncing), "device")
    assert len(found) == 1 and "200 ms waiting in 40 synchronize calls" in \
        found["finding"].iloc[0]
    assert _rules(_report(_trace(0.9)), "device").empty


def test_communication_per_rank():
    """NCCL kernels' union against the device's busy time, with the part computation
    overlapped: as the overlap and device-time tables give them."""
    def device(talking, computing=0.7):
        busy = {"computation": computing, "communication": talking - 0.2, "memory": 0.0,
                "other": 0.0}
        rows = [_t("device_time", name, value, metric="gpu_time", rank=1, backend="tracer")
                for name, value in busy.items()]
        together = {"computation": 0.5, "computation + communication": 0.2,
                    "communication": talking - 0.2}
        return rows + [_t("kernel_type", name, value, metric="gpu_time", rank=1,
                          backend="tracer") for name, value in together.items()]

    found = _rules(_report(device(0.5)), "communication")
    assert len(found) == 1 and found["finding"].iloc[0] == (
        "rank 1: NCCL kernels take 50.0% of the device's busy time (500 ms); 40.0% of it "
        "overlapped by computation")
    assert _rules(_report(device(0.21, computing=5.0)), "communication").empty  # 4%


def test_efficiency_against_a_given_peak_and_silence_without_one():
    rows = [["derived", 0, 0, "model", "forward", "", "achieved_flops", "value", 10e12,
             "FLOP/s"]]
    low = _report(rows, meta={"model": {"peak_flops": 100e12}})
    found = _rules(low, "efficiency")
    assert found["share"].iloc[0] == pytest.approx(0.1) and "peak" in found["finding"].iloc[0]
    on_h100 = _report(rows, meta={"target": {"dtype": "bfloat16", "device": "cuda"},
                                  "environment": {"gpus": ["NVIDIA H100 80GB HBM3"]}})
    assert _rules(on_h100, "efficiency")["share"].iloc[0] == pytest.approx(10e12 / 989.4e12)
    assert _rules(_report(rows), "efficiency").empty  # no peak at all: nothing said
    measured = _report(rows, meta={"model": {"measured_peak_flops": 50e12,
                                             "measured_peak_how": "a 1024x1024 matmul"}})
    found = _rules(measured, "efficiency")
    assert found["share"].iloc[0] == pytest.approx(0.2)
    assert "measured on the spot: a 1024x1024 matmul" in found["evidence"].iloc[0]


def test_the_peak_measured_on_the_spot_against_a_matmul_timed_here():
    import timeit

    import torch

    from profile_all.model.timing_method import measured_peak

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the other test worker shares the cores: one thread each
    first, second = torch.randn(1024, 1024), torch.randn(1024, 1024)
    peaks, bests = [], []
    try:  # interleaved rounds, the best of each side: a loaded machine slows either
        for _ in range(3):
            peak, how = measured_peak(torch.device("cpu"), "float32", seconds=0.2)
            peaks.append(peak)
            bests.append(min(timeit.repeat(lambda: first @ second, number=1, repeat=5)))
    finally:
        torch.set_num_threads(threads)
    assert how.startswith("a 1024x1024 float32 matmul, best of ")
    # the same work, timed apart: a FLOP count off by 2 (MACs for FLOPs) falls outside
    assert 0.55 < max(peaks) / (2 * 1024**3 / min(bests)) < 1.8, (peaks, bests)


def test_doubts_losses_and_a_straggler():
    meta = {"doubts": ["passes did different work (steps per pass: pass 1: 10, pass 2: 15)"],
            "passes": [PassRecord(number=2, backend_failures=[
                {"backend": "memory", "phase": "lost", "error": "samples dropped"}])]}
    found = _rules(_report([], meta=meta), "trust")
    assert list(found["finding"]) == [meta["doubts"][0], "backend memory lost data: "
                                      "samples dropped"]
    assert _rules(_report([]), "trust").empty
    ranks = [_t("run", "run", seconds, rank=rank) for rank, seconds in enumerate([1, 1, 1.5])]
    lagging = _rules(_report(ranks), "straggler")
    assert "rank 2 is a straggler: 50.0% slower" in lagging["finding"].iloc[0]
    even = [_t("run", "run", 1.0, rank=rank) for rank in range(3)]
    assert _rules(_report(even), "straggler").empty


def test_a_straggler_is_judged_on_median_steps_not_the_warm_up():
    """Rank 1's first step (warm-up, left out of every per-step figure) is slow, which
    puts its total 12% above the others'; its median step is theirs: no straggler. A
    rank whose median step lags is one."""
    def rank_rows(rank, total, median):
        return [_t("step", "step", total, rank=rank),
                _t("step", "step", median, stat="median", rank=rank),
                _t("run", "run", total, rank=rank)]

    warm = [*rank_rows(0, 1.0, 0.1), *rank_rows(1, 1.12, 0.1), *rank_rows(2, 1.0, 0.1)]
    assert _rules(_report(warm), "straggler").empty
    slow = [*rank_rows(0, 1.0, 0.1), *rank_rows(1, 1.0, 0.13), *rank_rows(2, 1.0, 0.1)]
    said = _rules(_report(slow), "straggler")["finding"].iloc[0]
    assert said.startswith("rank 1 is a straggler: 30.0% slower than the median rank (step "
                           "step (median))")


@pytest.fixture(scope="module")
def slow_input(tmp_path_factory):
    out = tmp_path_factory.mktemp("slow") / "run"
    return pa.run(TARGETS / "slow_input.py", backends=["wallclock", "cprofile",
                                                       "torch-profiler"], out=out)


def test_a_plain_loop_with_a_slow_input_is_named_first(slow_input):
    found = slow_input.findings()
    assert found["rule"].iloc[0] == "input"
    # 24 ms of sleep a step against ~1.5 ms of compute on a quiet machine; a loaded one
    # slows the compute, not the sleep (with 12 ms a step, 31% was seen under a parallel
    # test run, and a compute row came first)
    assert found["share"].iloc[0] > 0.2, found.iloc[0].to_dict()
    assert "enumerate(DataLoader)" in found["evidence"].iloc[0]
    assert "DataLoader __next__" in found["evidence"].iloc[0]
    assert slow_input.meta.passes[0].step_source == "optimizer.step()"
    # the timing pass learned its steps from optimizer.step() only as the target ended,
    # and still times them: 40 steps, each counted (the first from the target's start)
    steps = slow_input.frame.query("backend == 'wallclock' and scope == 'step'")
    assert steps.query("metric == 'calls'")["value"].tolist() == [40]
    assert steps.query("metric == 'wall_time' and stat == 'median'")["value"].iloc[0] > 0.024
    console = Console(file=io.StringIO(), width=80)
    render(slow_input, console)
    shown = console.file.getvalue()
    assert shown.splitlines()[0].endswith("3 passes, 40 steps, each an optimizer.step()")
    assert shown.splitlines()[1].startswith("1. ") and "input-bound" in shown.splitlines()[1]
    # every line fits, but a native file's: its command is pasted whole (never wrapped)
    assert max(len(line) for line in shown.splitlines() if "(open with: " not in line) <= 80
    summary = (slow_input.run_dir / "summary.md").read_text()
    assert summary.index("## Findings") < summary.index("## Passes")
    assert "exit code 0; 40 steps, each an optimizer.step()." in summary
    assert "loads in the main process (num_workers=0)" in found["try"].iloc[0]


def test_a_slow_input_with_workers_is_told_about_its_workers(tmp_path):
    """With num_workers=2 the advice is not to add workers as if there were none."""
    report = pa.run(TARGETS / "slow_input.py", ["workers"], backends=["wallclock", "cprofile"],
                    out=tmp_path / "run")
    found = report.findings()
    assert "input" in set(found["rule"].head(2)), found.to_dict("records")
    advice = found.loc[found["rule"] == "input", "try"].iloc[0]
    assert advice.startswith("the DataLoader's workers do not keep up")
    waits = found[found["finding"].str.contains("select.poll")]  # the main process waiting
    assert waits.empty or "blocked, not computing" in waits["finding"].iloc[0]


def _device_intervals(path):
    """Kernels, copies and fills of a chrome trace, read here apart from the readers."""
    with gzip.open(path) as trace:
        events = [e for e in json.load(trace)["traceEvents"] if e.get("ph") == "X"]
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    host = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")]
    span = max(e["ts"] + e["dur"] for e in host) - min(e["ts"] for e in host)
    return device, span


def _sweep(groups):
    """Time during which every group of (start, end) intervals has one open: a sweep over
    boundaries with a counter per group (not the readers' merge-and-scan)."""
    edges = sorted((t, kind, index) for index, group in enumerate(groups)
                   for start, end in group for t, kind in ((start, 1), (end, -1)))
    open_count, total, last = [0] * len(groups), 0.0, None
    for t, kind, index in edges:
        if last is not None and all(open_count):
            total += t - last
        open_count[index] += kind
        last = t
    return total


def test_device_findings_on_a_real_a100_trace(fixtures, tmp_path):
    path = fixtures / "traces" / "a100_nccl_rank0.json.gz"
    report = pa.ingest([path], out=tmp_path / "run")
    device, span = _device_intervals(path)
    busy = _sweep([[(e["ts"], e["ts"] + e["dur"]) for e in device]])
    idle = _rules(report, "device")
    assert idle["share"].iloc[0] == pytest.approx(1 - busy / span, abs=1e-4)  # 76.4%
    kernels = [e for e in device if e["cat"] == "kernel"]
    nccl = [(e["ts"], e["ts"] + e["dur"]) for e in kernels if "nccl" in e["name"].lower()]
    compute = [(e["ts"], e["ts"] + e["dur"]) for e in kernels if "nccl" not in e["name"].lower()]
    talking = _rules(report, "communication")
    assert talking["share"].iloc[0] == pytest.approx(_sweep([nccl]) / busy, abs=1e-3)
    overlapped = _sweep([nccl, compute]) / _sweep([nccl])  # 15.6%
    assert f"{overlapped:.1%} of it overlapped by computation" in talking["finding"].iloc[0]


def test_a_share_from_a_handful_of_samples_says_so_and_does_not_lead():
    """One py-spy sample in a 25-step window of 22 ms made a full bar that led the
    findings."""
    facts = {**TIMER, "my.sampler": Facts(sampled=True).to_dict()}

    def sampled(taken):
        return _report([*STEPS,
                        _t("run", "run", taken, metric="samples", backend="my.sampler",
                           unit="count"),
                        _t("function", "train.py:10(work)", 10.0, metric="self_time",
                           backend="my.sampler")],
                       {"backend_facts": facts, "doubts": ["the clean timing pass was noisy"]})

    few = sampled(1).findings()
    line = few[few["finding"].str.startswith("function ")]
    assert line["finding"].iloc[0].endswith(
        "(from 1 sample only: a rough share; more steps, or a higher sampling rate, give "
        "more)")
    assert few["rule"].iloc[0] == "trust"  # what the run's checks say leads, not the sample
    many = sampled(500).findings()
    assert "rough share" not in " ".join(many["finding"])


#: the facts of a tracer and a sampler beside the timer
TRACED_AND_SAMPLED = {**TIMER, "my.tracer": Facts().to_dict(),
                      "my.sampler": Facts(sampled=True).to_dict()}


def _traced_and_sampled(functions):
    """Rows of functions as a tracer and a sampler saw them: (name, traced cumulative
    seconds, sampled cumulative seconds), 100 samples a sampled second."""
    rows = []
    for name, traced, sampled in functions:
        rows += [_t("function", name, traced, metric="cumulative_time", backend="my.tracer"),
                 _t("function", name, sampled, metric="cumulative_time",
                    backend="my.sampler"),
                 _t("function", name, sampled * 100, metric="samples", backend="my.sampler",
                    unit="count"),
                 _t("function", name, 0.1, metric="self_time", backend="my.tracer")]
    return rows


def test_a_wait_for_a_subprocess_is_not_made_heavier_by_tracing():
    """Inductor's subprocess.run (15 calls, 6 s) was named among the functions cProfile
    'makes heavier': a tracer's per-call cost makes no wait longer."""
    rows = [*STEPS, *_traced_and_sampled((
        ("train.py:1(<module>)", 10.0, 10.0),
        ("/usr/lib/python3.11/subprocess.py:506(run)", 6.0, 2.0),
        ("train.py:5(work)", 3.5, 2.0)))]
    found = _rules(_report(rows, {"backend_facts": TRACED_AND_SAMPLED}), "distortion")
    assert len(found) == 1
    said = found["finding"].iloc[0]
    assert said.startswith("my.tracer makes 1 function heavier than my.sampler sees it")
    assert "train.py:5(work)" in said and "subprocess" not in said


def test_the_import_machinery_is_start_up_not_where_the_steps_time_goes():
    """A script that imports transformers: `import_utils.fetch__all__` and `marshal.loads`
    led the function findings."""
    rows = [*STEPS, _t("run", "run", 20.0)]
    for name, own, cumulative in (
            ("<frozen importlib._bootstrap>:1165(_find_and_load)", 0.5, 9.0),
            ("transformers/utils/import_utils.py:2000(fetch__all__)", 4.0, 4.0),
            ("{built-in method marshal.loads}", 3.0, 3.0),
            ("train.py:12(train)", 6.0, 10.0),
            ("train.py:1(<module>)", 0.0, 20.0)):  # the whole run, as the profile saw it
        rows += [_t("function", name, own, metric="self_time"),
                 _t("function", name, cumulative, metric="cumulative_time")]
    found = _report(rows).findings()
    functions = found[found["finding"].str.startswith("function ")]["finding"].tolist()
    assert functions == ["function train.py:12(train): 60.0% of the step time, in itself"]
    start = found[found["rule"] == "start-up"]["finding"].tolist()
    # said of the profile that measured it (a tracer's pass slows imports too)
    assert start == ["start-up: importing took 9 s under my.timer, 45.0% of the 20 s it "
                     "profiled (left out of where the steps' time goes)"]


def test_threads_spinning_in_openmp_are_said():
    """`--native` samples of a small CPU training, 79% in libgomp, and no finding said so."""
    facts = {**TIMER, "my.sampler": Facts(sampled=True).to_dict()}

    def sampled(spinning, taken):
        rows = [*STEPS, _t("run", "run", taken, metric="samples", backend="my.sampler",
                           unit="count")]
        for name, own in (("(unresolved) (libgomp.so.1)", spinning),
                          ("train.py:9(train)", taken - spinning)):
            rows += [_t("function", name, own, metric=metric, backend="my.sampler",
                        unit="count") for metric in ("samples", "self_samples")]
            rows += [_t("function", name, own / 100, metric=metric, backend="my.sampler")
                     for metric in ("self_time", "cumulative_time")]
        return _report(rows, {"backend_facts": facts, "environment": {"cpu_count": 2}})

    found = _rules(sampled(790, 1000), "threads")
    assert found["finding"].tolist() == [
        "79.0% of the samples were in the OpenMP runtime: threads waiting for each other at "
        "a barrier, or spinning, not computing"]
    assert "fewer threads than the 2 cores" in found["try"].iloc[0]
    assert _rules(sampled(100, 1000), "threads").empty


def test_a_warm_up_step_is_not_said_again_as_a_pause():
    """nanoGPT's step 2 was 'warm-up: the first step took 8.99 ms' and 'step 2 took 8.99
    ms ... a pause' in one report."""
    values = [0.5, 0.3, *[0.01] * 30]
    samples = [["my.timer", 1, 0, "step", "step", "", "wall_time", values]]
    timing = {"passes": [PassRecord(number=1, timing=True, steps=len(values) + 1)]}
    report = _report(STEPS, timing, samples=samples)
    assert len(_rules(report, "warm-up")) == 1
    assert _rules(report, "unusual-step").empty


def test_what_runs_at_import_time_is_not_where_the_steps_time_goes():
    """A HuggingFace run: namedtuple (27.8%) and dataclasses' _create_fn (13.9%), called by
    module bodies as transformers was imported, led the function findings; the script's
    own module body stays."""
    rows = [*STEPS]
    for name, own in (("/usr/lib/python3.11/collections/__init__.py:350(namedtuple)", 4.0),
                      ("/usr/lib/python3.11/dataclasses.py:413(_create_fn)", 2.0),
                      ("transformers/modeling_utils.py:1(<module>)", 3.0),
                      ("train.py:1(<module>)", 1.5),
                      ("train.py:12(train)", 5.0)):
        rows += [_t("function", name, own, metric="self_time"),
                 _t("function", name, own, metric="cumulative_time")]
    found = _report(rows, {"target": {"kind": "script", "path": "/work/job/train.py"}})
    said = found.findings()
    functions = said[said["finding"].str.startswith("function ")]["finding"].tolist()
    assert functions == ["function train.py:12(train): 50.0% of the step time, in itself",
                         "function train.py:1(<module>): 15.0% of the step time, in itself"]


def test_a_caller_of_a_wait_is_not_made_heavier_by_tracing():
    """The trial's nanoGPT with torch.compile: `cpp_pybinding` held Inductor's compiler
    probes (`subprocess.run`, 0.85 s of its time): 25.7% traced, 8.4% sampled, said to be
    the tracer's cost. Its traced share is taken without the waits below it in the tracer's
    call tree; `work`, whose gap is its own, is still named."""
    probe = "torch/_inductor/async_compile.py:567(cpp_pybinding)"
    run = "/usr/lib/python3.11/subprocess.py:506(run)"
    rows = [*STEPS, *_traced_and_sampled((
        ("train.py:1(<module>)", 10.0, 10.0), (probe, 3.0, 1.0), (run, 2.0, 0.0),
        ("train.py:5(work)", 3.5, 2.0)))]
    module = "train.py:1(<module>)"
    for name, parent, seconds in ((module, "", 10.0), (probe, module, 3.0),
                                  (run, f"{module} ▸ {probe}", 2.0)):
        rows.append(_t("call", name, seconds, metric="cumulative_time", parent=parent,
                       backend="my.tracer"))
    found = _rules(_report(rows, {"backend_facts": TRACED_AND_SAMPLED}), "distortion")
    said = found["finding"].iloc[0]
    assert said.startswith("my.tracer makes 1 function heavier than my.sampler sees it")
    assert "train.py:5(work)" in said and "cpp_pybinding" not in said


def test_a_rank_s_findings_are_the_same_with_other_ranks_files_beside_it(fixtures, tmp_path):
    """sampled_rank-0 alone and beside rank 1's file: its idle finding names its rank and
    keeps its figure; an operator's share is said to be the median over the ranks."""
    alone, both = tmp_path / "alone", tmp_path / "both"
    for folder, ranks in ((alone, [0]), (both, [0, 1])):
        folder.mkdir()
        for rank in ranks:
            name = f"sampled_rank-{rank}.json.gz"
            (folder / name).write_bytes((fixtures / "traces" / name).read_bytes())
    found = [pa.ingest([folder], out=folder / "run").findings()["finding"].tolist()
             for folder in (alone, both)]
    idle = [line for line in found[0] if line.startswith("the device is idle")]
    assert len(idle) == 1 and f"rank 0: {idle[0]}" in found[1]
    assert any(line.endswith("(the median of 2 ranks)") for line in found[1])


def _reading_rank(rank: int) -> dict:
    """Two steps of one kernel each; one `.item()` read in all (a read every other step)."""
    def x(cat, name, tid, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 0 if tid == 7 else 1,
                "tid": tid, "ts": ts, "dur": dur, "args": args}
    events = [x("cpu_op", "aten::item", 1, 150, 5)]
    for step in range(2):
        at = step * 100
        events += [x("user_annotation", f"ProfilerStep#{step}", 1, at, 90),
                   x("cuda_runtime", "cudaLaunchKernel", 1, at + 10, 5, correlation=step + 1),
                   x("kernel", "gemm", 7, at + 20, 60, correlation=step + 1, device=0)]
    return {"traceEvents": events, "distributedInfo": {"rank": rank, "world_size": 2}}


def test_scalar_reads_are_counted_per_rank_against_its_own_steps(tmp_path):
    """A read every other step is no finding on one rank, nor on two (summed over both
    ranks, the two reads matched a rank's two steps and made one)."""
    for rank in (0, 1):
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(_reading_rank(rank)))
    report = pa.ingest([tmp_path], out=tmp_path / "run")
    assert not report.findings()["finding"].str.contains("host-device syncs").any()
    (tmp_path / "rank1.json").unlink()
    assert not pa.ingest([tmp_path], out=tmp_path / "one").findings()["finding"].str.contains(
        "host-device syncs").any()
