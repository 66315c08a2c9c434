"""The chrome-trace reader on real Kineto traces made by other projects, and on ours."""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from conftest import measured_frame, value_of
from profile_all.ingest import IngestError, chrome_trace
from profile_all.ingest.trace_analysis import operator_frame, trace_rows


def _rows(trace) -> pd.DataFrame:
    return measured_frame(trace_rows(trace))


def _value(rows, scope, name, metric, stat="total"):
    return value_of(rows, scope=scope, name=name, metric=metric, stat=stat)


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
    assert columns.runtime_calls == 8_740
    assert len(columns.annotations) == 42
    assert trace.rank == 0
    assert trace.meta["baseTimeNanoseconds"] == 1711964646000000000
    assert trace.meta["deviceProperties"][0]["name"] == "NVIDIA A100-PG509-200"
    rows = _rows(trace)
    assert _value(rows, "step", "ProfilerStep", "calls") == 3  # ProfilerStep#4..6
    assert rows[rows["scope"] == "kernel"].query("metric == 'calls'")["value"].sum() == 3_774


def test_self_time_matches_a_stack_sweep(fixtures):
    ops = operator_frame(chrome_trace.load(fixtures / "traces" / "a100_nccl_rank0.json.gz"))
    expected = ops["dur"].to_numpy(float).copy()
    stack: list[tuple[str, float, int]] = []
    for index, (thread, ts, dur) in enumerate(zip(ops["thread"], ops["ts"], ops["dur"],
                                                  strict=True)):
        while stack and (stack[-1][0] != thread or stack[-1][1] <= ts):
            stack.pop()
        if stack:
            expected[stack[-1][2]] -= dur
        stack.append((thread, ts + dur, index))
    np.testing.assert_allclose(ops["self_time"], expected * 1e-6, atol=1e-12)
    # every device activity of this trace reaches the operator that launched it
    device_total = sum(d[2] for d in chrome_trace.load(
        fixtures / "traces" / "a100_nccl_rank0.json.gz").columns.device) * 1e-6
    assert ops["self_gpu_time"].sum() == pytest.approx(device_total)
    assert (ops["gpu_time"] >= ops["self_gpu_time"] - 1e-12).all()


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


def test_old_format_category_case_ns_unit_and_string_thread_ids(tmp_path):
    events = [
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": "host", "tid": "thread 7",
         "ts": 1000, "dur": 3000, "args": {"External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": "host", "tid": "thread 7",
         "ts": 1500, "dur": 1000, "args": {"External id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "gemm", "pid": 0, "tid": "stream 7",
         "ts": 2000, "dur": 500, "args": {"External id": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "outer", "pid": "host", "tid": "thread 7",
         "ts": 900, "dur": 5000},
    ]
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
    rows = _rows(chrome_trace.load(path))
    assert _value(rows, "operator", "aten::mm", "cpu_time") == pytest.approx(3e-6)
    assert _value(rows, "operator", "aten::mm", "self_time") == pytest.approx(2e-6)
    assert _value(rows, "operator", "aten::mm", "self_gpu_time") == pytest.approx(5e-7)
    assert _value(rows, "kernel", "gemm", "gpu_time") == pytest.approx(5e-7)
    assert _value(rows, "region", "outer", "wall_time") == pytest.approx(5e-6)


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
])
def test_bad_traces(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(IngestError, match=message):
        chrome_trace.load(path)


def test_truncated_gzip_and_gzip_that_is_not(fixtures, tmp_path):
    whole = (fixtures / "traces" / "sampled_rank-0.json.gz").read_bytes()
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
