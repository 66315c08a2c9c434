"""The torch-profiler backend in a real run: trace, rows from the trace, regions, schedule."""

from __future__ import annotations

import pytest

import profile_all as pa
from conftest import TARGETS, measured_frame, profile_all, profile_all_here, value_of
from profile_all.readers import chrome_trace


def _value(frame, scope, name, metric, stat="total", backend="torch-profiler"):
    return value_of(frame, backend=backend, scope=scope, name=name, metric=metric, stat=stat)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("torch") / "run"
    result = profile_all_here("run", "--separate-passes", TARGETS / "torch_regions.py", "-b",
                              "wallclock", "-b", "torch-profiler", "--record-shapes",
                              "--with-flops", "-o", run_dir)
    assert result.returncode == 0, result.stderr
    return run_dir, pa.load(run_dir)


def test_trace_is_written_and_rows_come_from_it(traced):
    run_dir, report = traced
    trace_path = run_dir / "artifacts" / "torch_trace.pt.trace.json.gz"
    trace = chrome_trace.load(trace_path)  # a gzip chrome trace that Perfetto and HTA open
    assert len(trace.columns.ops) > 50
    frame = report.frame
    assert _value(frame, "operator", "aten::addmm", "calls") == 12  # 2 Linear x 6 steps
    # 2 x M x K x N per call, from the recorded shapes: 6 x (16x32x64 + 16x64x4) x 2
    assert _value(frame, "operator", "aten::addmm", "flops") == 6 * 2 * (16 * 32 * 64 + 16 * 64 * 4)
    assert _value(frame, "operator", "aten::addmm", "self_time") > 0
    shapes = frame[(frame["scope"] == "operator_shape") & (frame["metric"] == "calls")]
    assert ("aten::addmm", "[[64], [16, 32], [32, 64], [], []]") in set(  # bias first
        zip(shapes["name"], shapes["parent"], strict=True))
    by_shape = report.operators(by="shape").set_index(["name", "input_shapes"])
    assert by_shape.loc[("aten::addmm", "[[64], [16, 32], [32, 64], [], []]"), "calls"] == 6
    assert any(a.path == "artifacts/torch_trace.pt.trace.json.gz"
               for a in report.meta.artifacts)
    # a profiler session imports torch._dynamo: every pass imports it before the target
    assert report.meta.preimported == ["torch", "torch._dynamo"]


def test_regions_are_record_functions_beside_the_wallclock(traced):
    _run_dir, report = traced
    frame = report.frame
    for backend in ("wallclock", "torch-profiler"):
        assert _value(frame, "region", "forward", "calls", backend=backend) == 6
    forward = frame[(frame["name"] == "forward") & (frame["scope"] == "region")]
    assert set(forward["parent"]) == {"train_step"}
    summary = report.summary()
    assert {"wallclock.wall_time.mean", "torch-profiler.wall_time.mean"} <= set(summary.columns)
    operators = report.operators()
    assert operators["self_time"].is_monotonic_decreasing
    assert "aten::addmm" in set(operators["name"])


def test_schedule_records_only_the_active_steps(tmp_path):
    report = pa.run(TARGETS / "torch_regions.py", backends=["torch-profiler"],
                    out=tmp_path / "run",
                    options={"torch-profiler": {"schedule": {"wait": 1, "warmup": 1,
                                                             "active": 2}}})
    assert report.exit_code == 0
    frame = report.frame
    assert _value(frame, "step", "ProfilerStep", "calls") == 2
    assert _value(frame, "region", "forward", "calls") == 2


def test_target_with_its_own_profiler_is_reported_not_crashed(tmp_path):
    result = profile_all_here("run", TARGETS / "own_profiler.py", "-b", "wallclock",
                              "-b", "torch-profiler", "--show-output", "all", "-o",
                              tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("own profiler events: True total: 100.0") == 2  # both passes
    report = pa.load(tmp_path / "run")
    failures = report.meta.passes[1].backend_failures
    assert failures[0]["backend"] == "torch-profiler"
    assert "opened its own torch.profiler session" in failures[0]["error"]
    assert "opened its own torch.profiler session" in (tmp_path / "run" / "summary.md").read_text()
    assert (report.frame["backend"] == "wallclock").any()  # the other pass is unaffected


def test_bad_schedule_is_refused(tmp_path):
    result = profile_all_here("run", TARGETS / "torch_regions.py", "--torch-schedule", "1,x",
                              cwd=tmp_path)
    assert result.returncode == 2
    assert "--torch-schedule wants WAIT,WARMUP,ACTIVE" in result.stderr


def test_live_trace_operators_match_torchs_own_key_averages(tmp_path):
    """A trace torch writes here, read by us, against torch's own aggregation of the same
    session (key_averages): calls, total and self CPU time per operator, an operator that
    calls itself (aten::sum) folded into one call as torch folds it."""
    import torch

    from profile_all.readers.trace_links import operator_frame

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = torch.randn(32, 64)
    with torch.profiler.profile() as profile:
        for _ in range(5):
            model(inputs).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    path = tmp_path / "live.json"
    profile.export_chrome_trace(str(path))
    ops = operator_frame(chrome_trace.load(path))
    assert ops.attrs["folded"] == 5  # aten::sum's inner call, once a step
    ours = ops.groupby("name").agg(calls=("name", "size"), cpu_time=("cpu_time", "sum"),
                                   self_time=("self_time", "sum"))
    compared = 0
    for event in profile.key_averages():
        if event.key not in ours.index:
            continue
        mine = ours.loc[event.key]
        assert mine["calls"] == event.count, event.key
        assert mine["cpu_time"] == pytest.approx(event.cpu_time_total * 1e-6, rel=0.01,
                                                 abs=1e-6), event.key
        assert mine["self_time"] == pytest.approx(event.self_cpu_time_total * 1e-6, rel=0.01,
                                                  abs=1e-6), event.key
        compared += 1
    assert compared >= 20


@pytest.mark.gpu
def test_live_cuda_trace_device_time_per_operator_matches_torchs_own(tmp_path):
    """On a GPU: each operator's own device time from our kernel -> launch -> operator join
    against torch's own attribution of the same session (self_device_time_total), and at
    least 95% of the device time attributed."""
    import torch

    from profile_all.readers.trace_analysis import trace_rows

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.LazyLinear(10)).cuda()
    inputs = torch.randn(16, 3, 32, 32, device="cuda")
    model(inputs)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        for _ in range(5):
            model(inputs).sum().backward()
        torch.cuda.synchronize()
    path = tmp_path / "cuda.json"
    profile.export_chrome_trace(str(path))
    rows = measured_frame(trace_rows(chrome_trace.load(path)))
    share = value_of(rows, scope="run", name="trace", metric="attributed_share", stat="value")
    assert share >= 0.95
    own = rows[(rows["scope"] == "operator") & (rows["metric"] == "self_gpu_time")]
    own = own.set_index("name")["value"]
    compared = 0
    for event in profile.key_averages():
        expected = event.self_device_time_total * 1e-6
        if expected > 1e-5 and event.key in own.index:
            assert own[event.key] == pytest.approx(expected, rel=0.01), event.key
            compared += 1
    assert compared >= 3


def test_a_trace_too_big_for_the_free_memory_is_kept_and_not_read(tmp_path):
    """Reading a trace needs about 1.1 bytes beside each byte of its JSON; when the machine
    has not that much free, the pass keeps its trace and says why it has no rows (a pass
    killed by the kernel would lose every backend's rows): as much free memory as this
    machine has is asked for by --max-unpacked's bound in a run's environment."""
    out = tmp_path / "run"
    done = profile_all("run", TARGETS / "torch_regions.py", "-b", "torch-profiler", "-o", out,
                       env={"PROFILE_ALL_MAX_UNPACKED": "1K"})
    assert done.returncode == 0, done.stderr
    report = pa.load(out)
    [traced] = [p for p in report.meta.passes if p.backends == ["torch-profiler"]]
    [lost] = [f["error"] for f in traced.backend_failures if f["phase"] == "lost"]
    assert lost.startswith("its trace was written but not read: ") and "--pass-steps N" in lost
    assert "unpacks to more than 1 KiB (--max-unpacked)" in lost
    assert (out / "artifacts" / "torch_trace.pt.trace.json.gz").is_file()
    # Kineto's lines of profile-all's own session (torch 2.13 prints them) are in the
    # pass's log, not among the script's output as echoed
    logged = (out / "artifacts" / f"pass{traced.host or traced.number}.stderr.log").read_text()
    assert "] profiler_start" in logged and "] profiler_start" not in done.stderr
