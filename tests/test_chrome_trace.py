"""The chrome-trace reader on real Kineto traces made by other projects, and on ours."""

from __future__ import annotations

import gzip
import json
import shutil

import pandas as pd
import pytest

from conftest import measured_frame, value_of
from profile_all.readers import IngestError, chrome_trace
from profile_all.readers.trace_analysis import trace_rows
from profile_all.rows import UNATTRIBUTED


def _rows(trace) -> pd.DataFrame:
    return measured_frame(trace_rows(trace))


def _value(rows, scope, name, metric, stat="total"):
    return value_of(rows, scope=scope, name=name, metric=metric, stat=stat)

def _events(path) -> list[dict]:
    with gzip.open(path) as stream:
        document = json.load(stream)
    return document["traceEvents"] if isinstance(document, dict) else document


_OPS = {"cpu_op", "operator"}
_RUNTIME = {"cuda_runtime", "cuda_driver", "runtime", "hip_runtime"}
_DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}


def _category(event) -> str:
    return str(event.get("cat", "")).lower() if event.get("ph") == "X" else ""


def _external(event) -> int:
    args = event.get("args", {})
    return args.get("External id", args.get("external id", -1))


def per_operator(events) -> tuple[dict[str, dict[str, float]], float, float]:
    """Written apart from the reader, as HTA, TensorBoard's plugin and torch's own tables
    count: per operator name its calls, total and self CPU time, and its own (self) and
    total device time, in µs; the device time that reached no operator; all device time.

    A plain stack sweep per thread over operators and runtime calls sorted by start
    (operators first at the same start, longer first). A runtime call is a CPU child of the
    innermost operator open at its start; the kernels it launched (same correlation) belong
    to that operator, or to the open one whose external id the call names. As torch's
    tables do, an operator that is the only child of one of its own name is folded into it.
    """
    device_by_correlation: dict[int, float] = {}
    all_device = 0.0
    for event in events:
        if _category(event) in _DEVICE:
            correlation = event["args"]["correlation"]
            device_by_correlation[correlation] = device_by_correlation.get(correlation, 0.0) \
                + event["dur"]
            all_device += event["dur"]
    per_thread: dict[str, list] = {}
    for event in events:
        category = _category(event)
        if category in _OPS and not event["name"].startswith("ProfilerStep#"):
            kind = 0
        elif category in _RUNTIME:
            kind = 1
        else:
            continue
        thread = f"{event['pid']}:{event['tid']}"
        per_thread.setdefault(thread, []).append((event["ts"], kind, -event["dur"], event))
    # an entry per operator call: [name, parent entry, children, self, own device, total]
    entries: list[list] = []
    attributed = 0.0
    for items in per_thread.values():
        items.sort(key=lambda item: item[:3])
        stack: list[tuple[float, int]] = []  # (end, entry)
        for ts, kind, minus_dur, event in items:
            if kind == 0:
                while stack and stack[-1][0] <= ts:
                    stack.pop()
                parent = stack[-1][1] if stack else -1
                if parent >= 0:
                    entries[parent][2] += 1
                    entries[parent][3] += minus_dur  # a child's time is not its own
                entries.append([event["name"], parent, 0, -minus_dur, 0.0, 0.0,
                                _external(event)])
                stack.append((ts - minus_dur, len(entries) - 1))
                continue
            while stack and stack[-1][0] < ts:
                stack.pop()
            if not stack:
                continue
            entries[stack[-1][1]][3] += minus_dur  # the runtime call is a CPU child
            launched = device_by_correlation.pop(event["args"].get("correlation"), 0.0)
            named = [entry for _, entry in stack if entries[entry][6] == _external(event)]
            owner = named[-1] if named else stack[-1][1]
            entries[owner][4] += launched
            attributed += launched
    for entry in reversed(range(len(entries))):  # children come after their parents
        parent = entries[entry][1]
        entries[entry][5] += entries[entry][4]
        if parent >= 0:
            entries[parent][5] += entries[entry][5]
    folded = {index for index, entry in enumerate(entries) if entry[1] >= 0
              and entries[entry[1]][0] == entry[0] and entries[entry[1]][2] == 1}
    for index in sorted(folded, reverse=True):  # deepest first: chains fold up
        parent = entries[index][1]
        entries[parent][3] += entries[index][3]
        entries[parent][4] += entries[index][4]
    totals: dict[str, dict[str, float]] = {}
    for index, (name, _p, _c, own_cpu, own_gpu, total_gpu, _x) in enumerate(entries):
        if index in folded:
            continue
        found = totals.setdefault(name, dict.fromkeys(
            ("calls", "self_time", "self_gpu_time", "gpu_time"), 0.0))
        found["calls"] += 1
        found["self_time"] += own_cpu
        found["self_gpu_time"] += own_gpu
        found["gpu_time"] += total_gpu
    return totals, all_device - attributed, all_device


@pytest.mark.parametrize("chunk_bytes", [chrome_trace.CHUNK_BYTES, 4096])
def test_a100_trace_counts(fixtures, monkeypatch, chunk_bytes):
    monkeypatch.setattr(chrome_trace, "CHUNK_BYTES", chunk_bytes)  # many chunks, same result
    trace = chrome_trace.load(fixtures / "traces" / "a100_nccl_rank0.json.gz")
    columns = trace.columns
    kinds = pd.Series([d[1] for d in columns.device]).value_counts()
    # the facts in shared/fixtures/README.md
    assert columns.events == 40_573
    assert len(columns.ops) == 14_346
    assert (kinds["kernel"], kinds["memcpy"], kinds["memset"]) == (2_700, 960, 114)
    assert len(columns.runtime) == 8_740
    assert len(columns.annotations) == 42
    assert trace.rank == 0
    assert trace.meta["baseTimeNanoseconds"] == 1711964646000000000
    assert trace.meta["deviceProperties"][0]["name"] == "NVIDIA A100-PG509-200"
    rows = _rows(trace)
    assert _value(rows, "step", "ProfilerStep", "calls") == 3  # ProfilerStep#4..6
    calls = rows[rows["metric"] == "calls"].groupby("scope")["value"].sum()
    assert (calls["kernel"], calls["memcpy"], calls["memset"]) == (2_700, 960, 114)
    assert calls["api"] == 8_740
    assert _value(rows, "api", "cudaLaunchKernel", "calls") == 2_550


@pytest.mark.parametrize("name", ["a100_nccl_rank0", "sampled_rank-0", "sampled_rank-1"])
def test_operators_match_a_stack_sweep_over_the_events(fixtures, name):
    """Calls, self CPU time (less child operators and runtime calls), own and total device
    time per operator, against per_operator's sweep over the raw events. In these traces
    the kernels' External id is the launch's correlation, and a join on it gave every
    operator 0 s of device time."""
    path = fixtures / "traces" / f"{name}.json.gz"
    expected, unattributed, all_device = per_operator(_events(path))
    rows = _rows(chrome_trace.load(path))
    operators = rows[(rows["scope"] == "operator") & (rows["stat"] == "total")]
    measured = operators.pivot_table(index="name", columns="metric", values="value")
    for operator, figures in expected.items():
        assert measured.at[operator, "calls"] == figures["calls"], operator
        for metric in ("self_time", "self_gpu_time", "gpu_time"):
            assert measured.at[operator, metric] == pytest.approx(
                figures[metric] * 1e-6, rel=0.01, abs=1e-8), (operator, metric)
    assert measured["self_gpu_time"].sum() > 0
    if unattributed > 1e-9 * all_device:
        assert _value(rows, "operator", UNATTRIBUTED, "self_gpu_time") == pytest.approx(
            unattributed * 1e-6, rel=0.01)
    share = _value(rows, "run", "trace", "attributed_share", stat="value")
    assert share == pytest.approx(1 - unattributed / all_device, abs=1e-6)
    assert share > 0.95  # nearly everything launches inside an operator in these traces
    # every microsecond of device time is somewhere: operators' own time plus the rest
    assert measured["self_gpu_time"].sum() == pytest.approx(all_device * 1e-6, rel=1e-9)


def test_the_heaviest_operators_of_the_sampled_trace(fixtures):
    """The launch inside the operator decides, not the External id (the launch's
    correlation in this trace): the collectives' kernels belong to their c10d operators."""
    rows = _rows(chrome_trace.load(fixtures / "traces" / "sampled_rank-0.json.gz"))
    own = rows[(rows["scope"] == "operator") & (rows["metric"] == "self_gpu_time")]
    top = own.sort_values("value", ascending=False)["name"].head(2).tolist()
    assert top == ["record_param_comms", "c10d::_allgather_base_"]


def test_backward_region_holds_the_kernels_of_autograds_thread(fixtures):
    """`## backward ##` is open on the main thread while autograd's own thread launches the
    backward kernels: they count for it (computed here from the events by hand)."""
    path = fixtures / "traces" / "a100_nccl_rank0.json.gz"
    events = _events(path)
    device: dict[int, float] = {}
    for event in events:
        if _category(event) in _DEVICE:
            correlation = event["args"]["correlation"]
            device[correlation] = device.get(correlation, 0.0) + event["dur"]
    launches = [(e["ts"], device.get(e["args"]["correlation"], 0.0)) for e in events
                if _category(e) in _RUNTIME]
    backward = [e for e in events if e.get("cat") == "user_annotation"
                and e["name"] == "## backward ##"]
    expected = sum(launched for region in backward for ts, launched in launches
                   if region["ts"] <= ts <= region["ts"] + region["dur"])
    rows = _rows(chrome_trace.load(path))
    assert _value(rows, "region", "## backward ##", "gpu_time") == pytest.approx(
        expected * 1e-6, rel=0.01)
    assert expected > 0.5 * sum(device.values())  # the backward pass is most of the work
    # the three steps hold every launch of the trace
    assert _value(rows, "step", "ProfilerStep", "gpu_time") == pytest.approx(
        _value(rows, "run", "trace", "gpu_time"), rel=0.01)


def test_device_side_ranges_have_their_time_on_the_device(fixtures):
    """gpu_user_annotation ranges (HTA's user-annotation breakdown): each range's time on
    the device, summed and spread over its calls, from the events by hand."""
    path = fixtures / "traces" / "a100_nccl_rank0.json.gz"
    spans = [e["dur"] * 1e-6 for e in _events(path) if e.get("cat") == "gpu_user_annotation"
             and e["name"] == "nccl:all_reduce"]
    rows = _rows(chrome_trace.load(path))
    assert len(spans) == 15
    for stat, expected in (("total", sum(spans)), ("min", min(spans)), ("max", max(spans)),
                           ("mean", sum(spans) / 15)):
        assert _value(rows, "region", "nccl:all_reduce", "gpu_span", stat) == pytest.approx(
            expected, rel=1e-9), stat


@pytest.mark.parametrize("name, rank, events, kernels, steps", [
    ("sampled_rank-0", 0, 4_855, 1_154, 2),
    ("sampled_rank-1", 1, 4_720, 1_104, 2),
    ("cpu_only_gloo_rank34", 34, 30, 0, 1),
])
def test_other_traces(fixtures, name, rank, events, kernels, steps):
    trace = chrome_trace.load(fixtures / "traces" / f"{name}.json.gz")
    assert (trace.rank, trace.columns.events) == (rank, events)
    assert sum(1 for d in trace.columns.device if d[1] == "kernel") == kernels
    assert _value(_rows(trace), "step", "ProfilerStep", "calls") == steps


#: a trace as Kineto wrote it in 2021 (the TensorBoard plugin's samples): capitalised
#: categories, string tids, `external id` in lower case, ProfilerStep#N as an Operator,
#: and launches that start the very microsecond a child operator starts
KINETO_2021 = [
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 13721, "tid": "456",
     "ts": 50, "dur": 400, "args": {"Input Dims": [], "External id": 1}},
    {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456",
     "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
    {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456",
     "ts": 120, "dur": 70, "args": {"Input Dims": [[8, 4], [4, 2]], "External id": 4}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456",
     "ts": 120, "dur": 0, "args": {"correlation": 334, "external id": 4}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456",
     "ts": 120, "dur": 0, "args": {"correlation": 335, "external id": 2}},
    {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 13721, "tid": "456",
     "ts": 190, "dur": 0, "args": {"correlation": 336, "external id": 4}},
    {"ph": "X", "cat": "Runtime", "name": "cudaMemsetAsync", "pid": 13721, "tid": "456",
     "ts": 300, "dur": 10, "args": {"correlation": 337, "external id": 0}},
    {"ph": "X", "cat": "Kernel", "name": "gemm", "pid": 0, "tid": "stream 7", "ts": 130,
     "dur": 5, "args": {"correlation": 334, "external id": 4, "device": 0}},
    {"ph": "X", "cat": "Kernel", "name": "gemm", "pid": 0, "tid": "stream 7", "ts": 136,
     "dur": 6, "args": {"correlation": 335, "external id": 2, "device": 0}},
    {"ph": "X", "cat": "Memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0,
     "tid": "stream 7", "ts": 200, "dur": 7,
     "args": {"correlation": 336, "external id": 4, "bytes": 7000}},
    {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7",
     "ts": 320, "dur": 2, "args": {"correlation": 337, "external id": 0, "bytes": 64}},
]


def test_kineto_2021_format(tmp_path):
    path = tmp_path / "worker0.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "displayTimeUnit": "ns",
                                "traceEvents": KINETO_2021}))
    rows = _rows(chrome_trace.load(path))
    # ts and dur are µs whatever displayTimeUnit says (it is a display hint)
    assert _value(rows, "operator", "aten::mat_mul", "cpu_time") == pytest.approx(100e-6)
    assert _value(rows, "operator", "aten::mat_mul", "self_time") == pytest.approx(30e-6)
    # two launches at 120 µs, when aten::mm starts: each names its operator
    assert _value(rows, "operator", "aten::mm", "self_gpu_time") == pytest.approx(12e-6)
    assert _value(rows, "operator", "aten::mat_mul", "self_gpu_time") == pytest.approx(6e-6)
    assert _value(rows, "operator", "aten::mat_mul", "gpu_time") == pytest.approx(18e-6)
    # the memset's launch is in no operator: kept, not dropped
    assert _value(rows, "operator", UNATTRIBUTED, "gpu_time") == pytest.approx(2e-6)
    assert _value(rows, "run", "trace", "attributed_share", stat="value") == pytest.approx(
        18 / 20)
    # the step is a step, not an operator, and holds all the device time launched in it
    assert "ProfilerStep#3" not in set(rows[rows["scope"] == "operator"]["name"])
    assert _value(rows, "step", "ProfilerStep", "wall_time") == pytest.approx(400e-6)
    assert _value(rows, "step", "ProfilerStep", "gpu_time") == pytest.approx(20e-6)
    assert _value(rows, "memcpy", "Memcpy DtoH (Device -> Pageable)", "bytes") == 7000
    assert _value(rows, "memset", "Memset (Device)", "gpu_time") == pytest.approx(2e-6)
    assert _value(rows, "kernel", "gemm", "calls") == 2
    assert _value(rows, "api", "cudaMemsetAsync", "wall_time") == pytest.approx(10e-6)


def test_json_array_trace_and_flow_events(tmp_path):
    """A bare array of events; a launch tied to its kernel by an ac2g flow, not an id."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 10,
         "dur": 20, "args": {"External id": 9}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 12, "dur": 3, "args": {}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 1, "tid": 1, "ts": 12},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 0, "tid": 7, "ts": 40,
         "bp": "e"},
        {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7, "ts": 40,
         "dur": 4, "args": {}},
    ]
    path = tmp_path / "array.json"
    path.write_text(json.dumps(events, indent=1))
    rows = _rows(chrome_trace.load(path))
    assert _value(rows, "operator", "aten::relu", "self_gpu_time") == pytest.approx(4e-6)
    assert _value(rows, "run", "trace", "attributed_share", stat="value") == 1.0


def test_raw_quotes_that_torch_writes_in_names_are_read(tmp_path):
    """torch writes a `"` in a record_function name unescaped: the file is invalid JSON."""
    import torch

    with torch.profiler.profile() as profile, torch.autograd.profiler.record_function('a"b'):
        torch.ones(4).add_(1)
    path = tmp_path / "quoted.json"
    profile.export_chrome_trace(str(path))
    with pytest.raises(json.JSONDecodeError):
        json.loads(path.read_text())
    rows = _rows(chrome_trace.load(path))
    assert _value(rows, "region", 'a"b', "calls") == 1
    assert _value(rows, "operator", "aten::add_", "calls") == 1


def test_pretty_printed_trace_with_nested_objects_in_args(tmp_path, monkeypatch):
    """Boundaries that fall between objects nested in args are joined, not lost."""
    monkeypatch.setattr(chrome_trace, "CHUNK_BYTES", 64)
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1,
               "ts": i * 10, "dur": 5, "args": {"list": [{"a": 1}, {"b": 2}, {"c": 3}]}}
              for i in range(50)]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"traceEvents": events, "traceName": "x]y"}, indent=2))
    trace = chrome_trace.load(path)
    assert len(trace.columns.ops) == 50
    assert trace.meta["traceName"] == "x]y"


@pytest.mark.parametrize("content, message", [
    (b"", "empty file"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "na', "not valid JSON, corrupt or truncated"),
    (b'{"something": "else"}', "not a torch.profiler chrome trace"),
    (b"[1, 2, 3]", "not a torch.profiler chrome trace"),
    (b'{"traceEvents": 5}', "not a torch.profiler chrome trace"),
])
def test_bad_traces(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(IngestError, match=message):
        chrome_trace.load(path)


def test_truncated_gzip_and_gzip_that_is_not(own_trace, tmp_path):
    whole = own_trace.read_bytes()
    (tmp_path / "cut.json.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(IngestError, match="corrupt or truncated gzip"):
        chrome_trace.load(tmp_path / "cut.json.gz")
    (tmp_path / "plain.json.gz").write_text('{"traceEvents": []}')
    with pytest.raises(IngestError, match=r"named \.gz but is not gzip"):
        chrome_trace.load(tmp_path / "plain.json.gz")
    # a gzip whose JSON is cut short
    text = gzip.decompress(whole)
    (tmp_path / "short.json.gz").write_bytes(gzip.compress(text[: len(text) // 2]))
    with pytest.raises(IngestError, match="corrupt or truncated"):
        chrome_trace.load(tmp_path / "short.json.gz")
    shutil.rmtree(tmp_path)


def test_times_since_1970_in_nanoseconds_are_kept_exact(tmp_path):
    """A trace whose times are microseconds since 1970 with nanoseconds (1.7e15 us) lost
    them as float64 (every time a multiple of 0.25 us): times of 15 digits or more are
    read relative to a base, so the 100 ns between two kernels is 100 ns."""
    base = 1_700_000_000_123_456
    events = [("cpu_op", "aten::mm", 1, f"{base}.001", "5.0"),
              ("kernel", "k1", 7, f"{base + 10}.125", "1.001"),
              ("kernel", "k2", 7, f"{base + 11}.226", "2.003")]
    trace = tmp_path / "epoch.json"
    trace.write_text('{"traceEvents": [' + ", ".join(
        f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 1, "tid": {tid}, '
        f'"ts": {ts}, "dur": {dur}, "args": {{"device": 0}}}}'
        for cat, name, tid, ts, dur in events) + "]}")
    import profile_all as pa

    idle = pa.ingest([trace], tmp_path / "run").device_time().iloc[0]["idle"]
    assert idle == pytest.approx(100e-9, abs=1e-12)
    # what reading the times as they are gives: 250 ns
    assert float(f"{base + 11}.226") - (float(f"{base + 10}.125") + 1.001) == 0.25
