"""HTA's and TensorBoard's analyses per rank and step: on a two-rank trace whose every
interval is known (each figure worked out by hand below), in every output, and beside
HTA's own figures on real traces of other projects."""

from __future__ import annotations

import gzip
import importlib.util
import json

import pandas as pd
import pytest

import profile_all as pa
from conftest import REPO, profile_all_here

US = 1e-6


def _trace(rank: int, gemm: float) -> dict:
    """One step (host 0-100 µs); kernels on streams 7 and 9 (µs):
    gemm 16-(16+gemm) s7, nccl 26-86 s9, relu 50-54 s7, a copy 90-95 s7, fill 96-98 s9;
    launched at 10, 20, 30, 40 (the copy) and 92 (after stream 9 ran dry at 86)."""
    def x(cat, name, tid, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1 if tid == 1 else 0,
                "tid": tid, "ts": ts, "dur": dur, "args": args}
    launches = [("cudaLaunchKernel", 10, 5, 1), ("cudaLaunchKernel", 20, 5, 2),
                ("cudaLaunchKernel", 30, 2, 3), ("cudaMemcpyAsync", 40, 3, 4),
                ("cudaLaunchKernel", 92, 3, 5)]
    events = [x("user_annotation", "ProfilerStep#1", 1, 0, 100),
              x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                1, 1, 5),
              x("cpu_op", "aten::mm", 1, 8, 10), x("cpu_op", "aten::relu", 1, 28, 5)]
    events += [x("cuda_runtime", name, 1, ts, dur, correlation=c)
               for name, ts, dur, c in launches]
    events += [x("kernel", "volta_h884gemm_kernel", 7, 16, gemm, correlation=1, stream=7,
                 device=0, **{"blocks per SM": 0.5, "est. achieved occupancy %": 40}),
               x("kernel", "ncclKernel_AllReduce_RING", 9, 26, 60, correlation=2, stream=9,
                 device=0, **{"blocks per SM": 0.75, "est. achieved occupancy %": 10}),
               x("kernel", "relu_kernel", 7, 50, 4, correlation=3, stream=7, device=0),
               x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 7, 90, 5, correlation=4,
                 stream=7, bytes=4096),
               x("kernel", "fill_kernel", 9, 96, 2, correlation=5, stream=9, device=0)]
    return {"traceEvents": events, "distributedInfo": {"rank": rank, "world_size": 2},
            "deviceProperties": [{"id": 0, "name": "Tesla V100", "totalGlobalMem": 2**34,
                                  "computeMajor": 7, "computeMinor": 0}]}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> pa.Report:
    folder = tmp_path_factory.mktemp("ranks")
    for rank, gemm in ((0, 30), (1, 45)):
        (folder / f"rank{rank}.json").write_text(json.dumps(_trace(rank, gemm)))
    return pa.ingest([folder], out=folder / "run")


def test_device_time_splits_the_span_once_per_moment(two_ranks):
    rank0 = two_ranks.device_time().set_index("rank").loc[0]
    # computation [16,46]+[50,54]+[96,98]; communication adds [46,50]+[54,86]; the copy
    # [90,95]; idle [86,90]+[95,96]; span 16-98
    expected = {"computation": 36, "communication": 36, "memory": 5, "other": 0, "idle": 5,
                "span": 82}
    assert {key: round(rank0[key] / US, 6) for key in expected} == expected
    assert rank0["non_computation_share"] == pytest.approx(41 / 82)


def test_overlap_and_kernel_types(two_ranks):
    overlap = two_ranks.overlap().set_index("rank").loc[0]
    assert overlap["communication"] == pytest.approx(60 * US)
    assert overlap["overlapped"] == pytest.approx(24 * US)  # [26,46] + [50,54]
    assert overlap["overlap_share"] == pytest.approx(0.4)
    types = two_ranks.kernel_types()
    mine = types[types["rank"] == 0].set_index("kernel_type")["gpu_time"] / US
    assert mine.round(6).to_dict() == {"communication": 36, "computation + communication": 24,
                                       "computation": 12, "memory": 5}


def test_idle_per_stream_by_cause(two_ranks):
    streams = two_ranks.idle_streams()
    s7 = streams[(streams["rank"] == 0) & (streams["stream"] == "stream 7")].iloc[0]
    s9 = streams[(streams["rank"] == 0) & (streams["stream"] == "stream 9")].iloc[0]
    # stream 7: relu launched (30) before gemm ended (46), 4 µs gap: kernel wait; the copy
    # launched (40) before relu ended (54), 36 µs gap: other. Stream 9: the fill launched
    # at 92, after nccl ended at 86: the 10 µs gap is the host's
    assert (s7["busy"] / US, s7["kernel_wait"] / US, s7["other_wait"] / US,
            s7["host_wait"]) == pytest.approx((39, 4, 36, 0))
    assert (s9["host_wait"] / US, s9["kernel_wait"], s9["other_wait"]) == \
        pytest.approx((10, 0, 0))


def test_launch_statistics(two_ranks):
    launches = two_ranks.launches()
    kernels = launches[(launches["rank"] == 0)
                       & (launches["name"] == "cudaLaunchKernel")].iloc[0]
    # delays: 16-15, 26-25, 50-32, 96-95; the fill (2 µs) is shorter than its call (3 µs)
    assert kernels["calls"] == 4
    assert (kernels["delay_mean"] / US, kernels["delay_median"] / US,
            kernels["delay_max"] / US) == pytest.approx((5.25, 1, 18))
    assert kernels["short_kernels"] == 1 and kernels["slow_launches"] == 0
    copy = launches[(launches["rank"] == 0) & (launches["name"] == "cudaMemcpyAsync")].iloc[0]
    assert copy["delay_mean"] / US == pytest.approx(47)


def test_step_time_breakdown_as_tensorboard(two_ranks):
    step = two_ranks.step_time().set_index("rank").loc[0]
    # kernels [16,46]+[50,54]+[96,98]; nccl's [46,50]+[54,86] communication; the copy
    # [90,95]; runtime calls not under device work: [10,15]; the data loader [1,6];
    # operators not under those: [8,10]+[15,16]
    expected = {"kernel": 36, "memcpy": 5, "memset": 0, "communication": 36, "runtime": 5,
                "data_loader": 5, "cpu": 3, "other": 10, "step_time": 100}
    assert {key: round(step[key] / US, 6) for key in expected} == expected
    assert step["step"] == "ProfilerStep#1"


def test_gpu_summary_as_tensorboard(two_ranks):
    gpu = two_ranks.gpu_metrics().set_index("rank").loc[0]
    # the step spans 0-100 µs (its kernels end by 98); kernels busy [16,86]+[96,98]: 72;
    # blocks per SM: gemm 0.5 on [16,46], nccl 0.75 on [26,86]: 0.5x10 + 1(capped)x20 +
    # 0.75x40 = 55; occupancy by kernel time (40% x 30 + 10% x 60) / 90; the h884 gemm
    # uses Tensor Cores: 30 of the 96 µs of kernels
    assert (gpu["device"], gpu["model"], gpu["total_memory"], gpu["compute_capability"]) \
        == ("GPU 0", "Tesla V100", 2**34, 7.0)
    assert (gpu["utilization"], gpu["sm_efficiency"], gpu["occupancy"],
            gpu["tensor_core_share"]) == pytest.approx((0.72, 0.55, 18 / 90, 30 / 96))
    # over time: 1-µs buckets over the trace's events, from the step's start (0) to its end
    # (100; a trace with the profiler's own span has them over that)
    timeline = two_ranks.timeline
    over_time = timeline[(timeline["series"] == "gpu:GPU 0") & (timeline["rank"] == 0)]
    busy = over_time[over_time["name"] == "utilization"]
    assert len(busy) == 100 and busy["value"].sum() == pytest.approx(72)
    assert busy["start"].iloc[16] == pytest.approx(16e-6) and busy["value"].iloc[16] == 1
    assert "GPU utilization over time, GPU 0" in (two_ranks.run_dir / "report.html").read_text()


def test_kernel_and_operator_views_as_tensorboard(two_ranks):
    """Over both ranks: the h884 gemm ran 30 and 45 µs (blocks per SM 0.5, occupancy 40%
    each), launched by aten::mm (Tensor Core eligible, all its device time on them); relu
    4 µs twice, with neither figure in its args."""
    kernels = two_ranks.kernels().set_index("name")
    gemm = kernels.loc["volta_h884gemm_kernel"]
    assert (gemm["calls"], gemm["tensor_cores"]) == (2, 1)
    assert (gemm["gpu_time"], gemm["mean"], gemm["min"], gemm["max"], gemm["blocks_per_sm"],
            gemm["occupancy"]) == pytest.approx((75 * US, 37.5 * US, 30 * US, 45 * US, 0.5, 0.4))
    relu = kernels.loc["relu_kernel"]
    assert relu["tensor_cores"] == 0 and pd.isna(relu["occupancy"])
    operators = two_ranks.operators().set_index("name")
    assert operators.loc["aten::mm", ["tc_eligible", "tc_self_share", "tc_total_share"]] \
        .tolist() == [1, 1, 1]
    assert operators.loc["aten::relu", ["tc_eligible", "tc_self_share"]].tolist() == [0, 0]
    by_operator = two_ranks.kernels(by="operator").set_index(["name", "operator"])
    assert by_operator.loc[("volta_h884gemm_kernel", "aten::mm"), "calls"] == 2
    assert by_operator.loc[("relu_kernel", "aten::relu"), "gpu_time"] == pytest.approx(8 * US)


def test_tensorboard_s_advice_where_no_other_finding_gives_it(two_ranks):
    """Each rank's DataLoader range holds 5 of its step's 100 µs: the plugin's 5%; the
    V100 ran its gemm on Tensor Cores, so no mixed-precision advice."""
    found = two_ranks.findings()
    said = found[found["rule"] == "input"]["finding"].tolist()
    assert said == [f"rank {rank}: the DataLoader takes 5.0% of the steps' time "
                    "(TensorBoard's step time breakdown)" for rank in (0, 1)]
    assert not found["finding"].str.contains("Tensor Cores").any()


def test_tensorboard_s_recommendations_on_its_own_sample(fixtures, tmp_path):
    """The plugin says of its ResNet-50 sample: 22.9% of the step time in the DataLoader,
    68% of kernel time launched by Tensor Core eligible operators (67.6%) without mixed
    precision. profile-all counts every eligible operator's own kernel time over all
    operators' (the plugin: the bottom-most eligible ones', over the operators it kept)."""
    name = "resnet50_num_workers_0.worker0.1623143566756.pt.trace.json.gz"
    found = pa.ingest([fixtures / "traces" / "tensorboard_samples" / name],
                      tmp_path / "run").findings()
    assert "input-bound: loading data takes 22.9% of the steps' time" in found["finding"].tolist()
    advice = found[found["finding"].str.contains("could run on Tensor Cores")].iloc[0]
    assert advice["share"] == pytest.approx(0.676, abs=0.015)
    assert "torch.autocast" in advice["try"]


def test_straggler_named_with_its_step(two_ranks):
    stragglers = two_ranks.stragglers().iloc[0]
    assert stragglers["most_computation_rank"] == 1
    # rank 1's gemm runs 16-61: computation 47 µs against rank 0's 36, median 41.5
    assert stragglers["computation_spread"] == pytest.approx(47 / 41.5 - 1)
    found = two_ranks.findings()
    line = found[found["rule"] == "straggler"]["finding"].tolist()
    assert "rank 1 computes 13.3% more than the median rank in ProfilerStep#1: the other " \
           "ranks wait for it in their collectives" in line


def test_every_output_has_the_analyses(two_ranks, tmp_path):
    shown = profile_all_here("show", two_ranks.run_dir)
    assert shown.returncode == 0, shown.stderr
    summary = (two_ranks.run_dir / "summary.md").read_text()
    page = (two_ranks.run_dir / "report.html").read_text()
    for title in ("Device time by type, per rank", "Step time breakdown, per rank and step",
                  "Communication overlap, per rank",
                  "Kernel launches, per rank", "Idle time per stream, by cause",
                  "Stragglers, per step", "GPU summary, per rank and device"):
        assert title in shown.stdout and title in summary and title in page
    assert "Device time per rank" in page and "Step time breakdown" in page  # the charts


def _check_script(name: str, needs: str, reason: str):
    """scripts/checks/`name`.py as a module, skipping the test where `needs` (the other
    tool it runs) is not installed."""
    pytest.importorskip(needs, reason=reason)
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "checks" /
                                                  f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _against_hta():
    return _check_script("against_hta", "hta", "HTA (HolisticTraceAnalysis) is not "
                         "installed: pip install --no-deps HolisticTraceAnalysis pydot pyyaml "
                         "networkx")


@pytest.mark.parametrize("files", [["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"],
                                   ["a100_nccl_rank0.json.gz"]])
def test_within_one_percent_of_hta(fixtures, files, tmp_path, capsys):
    check = _against_hta()
    for name in files:
        (tmp_path / name).write_bytes((fixtures / "traces" / name).read_bytes())
    assert check.compare(str(tmp_path)), capsys.readouterr().out
    said = capsys.readouterr().out
    assert "FAIL" not in said and " within 1% of HTA's" in said


def _against_tb_plugin():
    return _check_script("against_tb_plugin", "torch_tb_profiler", "TensorBoard's profiler "
                         "plugin is not installed: pip install torch-tb-profiler==0.4.3 (make "
                         "tb-plugin)")


@pytest.mark.parametrize("name", [
    "tensorboard_samples/resnet50_num_workers_0.worker0.1623143566756.pt.trace.json.gz",
    "tensorboard_samples/resnet50_num_workers_4.worker0.1623213129365.pt.trace.json.gz",
    "a100_nccl_rank0.json.gz", "sampled_rank-0.json.gz", "cpu_only_gloo_rank34.json.gz"])
def test_overview_within_one_percent_of_tensorboard_s_plugin(fixtures, name, capsys):
    """The plugin's own RunProfileData on its ResNet-50 samples (steps 6-10 were 4.9-9.0%
    longer before steps tiled the timeline) and on other projects' traces: the step time
    breakdown and the GPU summary."""
    check = _against_tb_plugin()
    assert check.compare(str(fixtures / "traces" / name)), capsys.readouterr().out
    assert "FAIL" not in capsys.readouterr().out


def test_step_breakdown_of_a_cpu_trace_made_here_as_the_plugin_s(tmp_path, capsys):
    """A torch.profiler trace of four steps of a DataLoader loop, made here on CPU."""
    import torch

    check = _against_tb_plugin()
    model = torch.nn.Linear(32, 8)
    loader = torch.utils.data.DataLoader(torch.randn(128, 32), batch_size=16)
    every_step = torch.profiler.schedule(wait=1, warmup=1, active=4, repeat=1)
    with torch.profiler.profile(schedule=every_step) as profile:
        for batch in loader:
            model(batch).sum().backward()
            profile.step()
    trace = tmp_path / "cpu.pt.trace.json"
    profile.export_chrome_trace(str(trace))
    assert check.compare(str(trace)), capsys.readouterr().out


def test_memory_view_counted_by_hand(tmp_path):
    """aten::outer [0,100) holds aten::inner [10,50) on one thread: +100 B at 5 (outer's),
    +200 at 20 and -200 at 40 (inner's), +50 at 100 (an operator's end is not in it: no
    operator's), +64 on GPU 0 at 30 (inner's)."""
    def memory(ts, size, kind=0, number=-1):
        return {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts, "s": "t",
                "args": {"Device Type": kind, "Device Id": number, "Addr": ts,
                         "Bytes": size, "Total Allocated": 1000 + size,
                         "Total Reserved": 4096}}
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
               "dur": dur, "args": {}} for name, ts, dur in (("aten::outer", 0, 100),
                                                              ("aten::inner", 10, 40))]
    events += [memory(5, 100), memory(20, 200), memory(40, -200), memory(100, 50),
               memory(30, 64, kind=1, number=0)]
    trace = tmp_path / "memory.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    table = pa.ingest([trace], tmp_path / "run").operator_memory()
    figures = table.set_index(["device", "operator"])[[
        "calls", "self_increase", "self_allocated", "self_allocations", "increase",
        "allocated", "allocations"]]
    assert figures.loc[("CPU", "aten::outer")].tolist() == [1, 100, 100, 1, 100, 300, 2]
    assert figures.loc[("CPU", "aten::inner")].tolist() == [1, 0, 200, 1, 0, 200, 1]
    assert figures.loc[("GPU0", "aten::outer")].tolist() == [1, 0, 0, 0, 64, 64, 1]
    assert figures.loc[("GPU0", "aten::inner")].tolist() == [1, 64, 64, 1, 64, 64, 1]


def test_memory_view_of_a_trace_made_here_as_the_plugin_s(tmp_path, capsys):
    """A CPU training loop recorded with profile_memory=True: every operator's memory
    figures and calls equal the plugin's MemorySnapshot's; the curve is in the timeline."""
    import torch

    check = _against_tb_plugin()
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    every_step = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)
    with torch.profiler.profile(schedule=every_step, profile_memory=True) as profile:
        for _ in range(6):
            model(torch.randn(32, 64)).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            profile.step()
    trace = tmp_path / "memory.pt.trace.json"
    profile.export_chrome_trace(str(trace))
    assert check.compare(str(trace)), capsys.readouterr().out
    said = capsys.readouterr().out
    assert "ok   memory view:" in said and "FAIL" not in said
    report = pa.ingest([trace], tmp_path / "run")
    curve = report.timeline[report.timeline["series"] == "memory:CPU"]
    assert set(curve["name"]) == {"allocated", "reserved"} and curve["value"].max() > 0
    assert len(report.timeline[report.timeline["series"] == "step"]) == 3
    assert "Memory allocated and reserved, CPU" in (tmp_path / "run" / "report.html").read_text()


def test_module_view_of_a_trace_made_here_as_the_plugin_s(tmp_path, capsys):
    """A CPU loop over nested Sequentials recorded with_stack: the module tree (Linear_1
    inside Sequential_1 inside Sequential_0), each module's calls, operators and times as
    the plugin's module view has them."""
    import torch

    check = _against_tb_plugin()
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Sequential(
        torch.nn.Linear(128, 32), torch.nn.ReLU()), torch.nn.Linear(32, 8))
    every_step = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)
    with torch.profiler.profile(schedule=every_step, with_stack=True) as profile:
        for _ in range(6):
            model(torch.randn(32, 64)).sum().backward()
            profile.step()
    trace = tmp_path / "modules.pt.trace.json"
    profile.export_chrome_trace(str(trace))
    assert check.compare(str(trace)), capsys.readouterr().out
    assert "Sequential_1/Linear_1 host " in capsys.readouterr().out
    view = pa.ingest([trace], tmp_path / "run").module_view().set_index("path")
    linear = view.loc["Sequential_0/Sequential_1/Linear_1"]
    assert (linear["depth"], linear["calls"], linear["operators"]) == (2, 3, 3)
    assert view.loc["Sequential_0", "cpu_time"] > view.loc["Sequential_0", "self_time"] > 0


def test_operators_by_call_stack_counted_by_hand(tmp_path):
    """Kineto's 2021 traces carry each operator's `Call stack`: aten::mm three times, twice
    from train.py(10) (5 + 7 µs), once from train.py(20) (11 µs)."""
    events = [{"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 1,
               "ts": 100 * i, "dur": dur, "args": {"Call stack": stack}}
              for i, (dur, stack) in enumerate([(5, "train.py(10): step"),
                                                (7, "train.py(10): step"),
                                                (11, "train.py(20): evaluate")])]
    trace = tmp_path / "stacks.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    table = pa.ingest([trace], tmp_path / "run").operators(by="stack")
    by_stack = table.set_index("call_stack")
    assert by_stack.loc["train.py(10): step", ["calls", "cpu_time"]].tolist() == \
        pytest.approx([2, 12e-6])
    assert by_stack.loc["train.py(20): evaluate", "calls"] == 1
    assert "Operators by call stack" in (tmp_path / "run" / "summary.md").read_text()


def _stack_by_hand(events: list[dict], op: dict) -> str:
    """The functions of source files around `op` on its thread, innermost first."""
    around = [e for e in events if e.get("cat") == "python_function" and e["tid"] == op["tid"]
              and "): " in e["name"] and e["ts"] <= op["ts"] <= e["ts"] + e["dur"]]
    around.sort(key=lambda e: (e["ts"], -e["dur"]))
    return ";".join(e["name"] for e in reversed(around))


def test_operators_by_call_stack_of_a_torch_2_trace(tmp_path):
    """torch 2 writes no `Call stack`: with_stack gives python_function events around the
    operators. Each operator's stack, from the events by hand, and per stack its calls."""
    import torch

    def evaluate(model, batch):
        with torch.no_grad():
            return model(batch).argmax(1)

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
    with torch.profiler.profile(with_stack=True) as profile:
        for _ in range(3):
            model(torch.randn(4, 16)).sum().backward()
        evaluate(model, torch.randn(4, 16))
    trace = tmp_path / "stacks.pt.trace.json"
    profile.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    expected: dict[tuple[str, str], int] = {}
    for op in (e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm"):
        key = (op["name"], _stack_by_hand(events, op))
        expected[key] = expected.get(key, 0) + 1
    table = pa.ingest([trace], tmp_path / "run").operators(by="stack")
    addmm = table[table["name"] == "aten::addmm"]
    found = {(name, stack): calls for name, stack, calls
             in addmm[["name", "call_stack", "calls"]].itertuples(index=False)}
    assert found == expected
    assert sum(expected.values()) == 4 and len(expected) == 2  # training, and evaluate's
    assert any(stack.split(";")[0].endswith(": forward") and "evaluate;" in stack
               for _name, stack in expected)


def test_a_trace_with_no_device_has_the_step_breakdown_only(fixtures, tmp_path):
    trace = tmp_path / "gloo.json.gz"
    trace.write_bytes((fixtures / "traces" / "cpu_only_gloo_rank34.json.gz").read_bytes())
    report = pa.ingest([trace], out=tmp_path / "run")
    assert report.device_time().empty and report.launches().empty
    step = report.step_time().iloc[0]
    assert step["rank"] == 34 and step["kernel"] == 0
    assert step["step_time"] == pytest.approx(step[["communication", "other"]].sum())
    assert step["communication"] > 0.8 * step["step_time"]  # gloo's all_reduce ranges
    assert json.loads(gzip.decompress(trace.read_bytes()))  # the file is left as it was


def test_steps_follow_their_numbers():
    """ProfilerStep#10 after #9, not after #1 (as text would sort them)."""
    from profile_all.report.report import Report
    from profile_all.run_record import RunRecord

    rows = [["torch-profiler", 1, 0, "step_time", "cpu", f"ProfilerStep#{number}",
             "wall_time", "total", 1e-3 * number, "s"] for number in (10, 1, 9, 2)]
    report = Report.from_rows(rows, RunRecord(status="complete"))
    assert report.step_time()["step"].tolist() == [f"ProfilerStep#{n}" for n in (1, 2, 9, 10)]


def test_a_step_on_another_thread_than_its_launches_has_its_device_time(tmp_path):
    """torch.compile's traces: ProfilerStep on the program's thread, the kernels launched
    from another thread of the process (launches at 10 and 30 µs of a step of 0-100 µs,
    kernels 20 and 15 µs): the step holds both, in its GPU total and its breakdown."""
    def x(cat, name, tid, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 0 if tid == 7 else 1,
                "tid": tid, "ts": ts, "dur": dur, "args": args}
    events = [x("user_annotation", "ProfilerStep#3", 1, 0, 100),
              x("cpu_op", "CompiledFunction", 2, 5, 40),
              x("cuda_runtime", "cuLaunchKernel", 2, 10, 4, correlation=1),
              x("cuda_runtime", "cuLaunchKernel", 2, 30, 4, correlation=2),
              x("kernel", "triton_poi_fused_add_0", 7, 20, 20, correlation=1, stream=7,
                device=0),
              x("kernel", "triton_red_fused_sum_1", 7, 50, 15, correlation=2, stream=7,
                device=0)]
    (tmp_path / "compiled.json").write_text(json.dumps({"traceEvents": events}))
    report = pa.ingest([tmp_path / "compiled.json"], out=tmp_path / "run")
    step = report.step_time().iloc[0]
    assert (step["step"], round(step["kernel"] / US, 6), round(step["step_time"] / US, 6)) \
        == ("ProfilerStep#3", 35, 100)
    rows = report.frame
    gpu = rows[(rows["scope"] == "step") & (rows["metric"] == "gpu_time")
               & (rows["stat"] == "total")]
    assert gpu["value"].sum() / US == pytest.approx(35)


@pytest.mark.parametrize("span", [{"ts": 0, "dur": -5000}, {"ts": 0, "dur": 0},
                                  {"ts": 10**12, "dur": 1000}, {"ts": 0, "dur": 1e30},
                                  {"ts": "abc", "dur": "xyz"}])
def test_a_profiler_span_that_does_not_hold_the_events_is_not_the_timeline_s(span, tmp_path):
    """`PyTorch Profiler (0)` of a negative, empty, distant or absurd span: the GPU over
    time is bucketed over the events (0-100 µs), as without one."""
    trace = _trace(0, 30)
    trace["traceEvents"].append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)",
                                 "pid": "Spans", "tid": "PyTorch Profiler", **span})
    (tmp_path / "odd.json").write_text(json.dumps(trace))
    timeline = pa.ingest([tmp_path / "odd.json"], out=tmp_path / "run").timeline
    busy = timeline[(timeline["series"] == "gpu:GPU 0") & (timeline["name"] == "utilization")]
    assert len(busy) == 100 and busy["value"].sum() == pytest.approx(72)


def test_a_stack_cut_at_64_frames_says_so(tmp_path):
    """An operator under 70 nested Python calls: its stack holds the 64 innermost and ends
    in `;…`."""
    events = [{"ph": "X", "cat": "python_function", "name": f"deep.py({depth}): f{depth}",
               "pid": 1, "tid": 1, "ts": depth, "dur": 1000 - 2 * depth} for depth in range(70)]
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                   "ts": 100, "dur": 5, "args": {}})
    (tmp_path / "deep.json").write_text(json.dumps({"traceEvents": events}))
    stack = pa.ingest([tmp_path / "deep.json"], out=tmp_path / "run").operators(
        by="stack")["call_stack"].iloc[0]
    frames = stack.split(";")
    assert frames[0] == "deep.py(69): f69" and frames[63] == "deep.py(6): f6"
    assert frames[64:] == ["…"]


def test_a_stack_repeated_by_every_step_counts_once_against_the_budget(tmp_path):
    """3,000 calls of one forward (a call event each) under 62 frames of 1,000-character
    names: one distinct 62 KB stack, held by every operator (the budget counted it 3,000
    times and left all but 16 without a stack)."""
    events = [{"ph": "X", "cat": "python_function", "name": f"train.py({d}): " + "f" * 1000,
               "pid": 1, "tid": 1, "ts": d, "dur": 10**6 - 2 * d} for d in range(62)]
    for i in range(3000):
        events += [{"ph": "X", "cat": "python_function", "name": "model.py(5): forward",
                    "pid": 1, "tid": 1, "ts": 100 + 10 * i, "dur": 5},
                   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                    "ts": 101 + 10 * i, "dur": 2, "args": {}}]
    (tmp_path / "steps.json").write_text(json.dumps({"traceEvents": events}))
    report = pa.ingest([tmp_path / "steps.json"], out=tmp_path / "run")
    stacks = report.operators(by="stack")
    assert stacks["calls"].tolist() == [3000]
    assert not [d for d in report.meta.doubts if "call stack" in d]
