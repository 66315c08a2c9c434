"""The nsys sqlite reader on a real export (Nsight Systems 2022.2.1, schema 2.9.1)."""

from __future__ import annotations

import re
import shutil
import sqlite3

import pandas as pd
import pytest

from conftest import measured_frame, value_of
from profile_all.readers import IngestError
from profile_all.readers.nsys_sqlite import read_export, read_nsys


def _rows(path) -> pd.DataFrame:
    return measured_frame(read_nsys(path))


def _value(rows, scope, name, metric, stat="total"):
    return value_of(rows, scope=scope, name=name, metric=metric, stat=stat)


def _query(path, sql):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(sql).fetchall()


@pytest.fixture
def export(fixtures):
    return fixtures / "nsys" / "saxpy_mpi_cuda_2022.sqlite"


def test_ranges_kernels_and_projected_gpu_time(export):
    """The MPI ranges are in the domain `MPI` (created by an NVTX event of type 75), saxpy's
    in the default domain: named `MPI:MPI_Send` and `saxpy`, as `nsys stats` names them."""
    rows = _rows(export)
    [(kernel_ns,)] = _query(export, "select sum(end - start) from CUPTI_ACTIVITY_KIND_KERNEL")
    assert _query(export, "select text, domainId from NVTX_EVENTS where eventType = 75") == [
        ("MPI", 1)]
    calls = rows[(rows["scope"] == "region") & (rows["metric"] == "calls")]
    assert dict(zip(calls["name"], calls["value"], strict=True)) == {
        "MPI:MPI_Init": 1, "MPI:MPI_Send": 10, "MPI:MPI_Recv": 5, "saxpy": 5,
        "MPI:MPI_Finalize": 1}
    # the saxpy ranges cover only the launches (about 0.23 ms) ...
    assert _value(rows, "region", "saxpy", "wall_time") == pytest.approx(0.23e-3, rel=0.05)
    # ... but their projected GPU time is the five saxpy kernels' time (about 88.6 ms)
    assert _value(rows, "region", "saxpy", "gpu_time") == pytest.approx(kernel_ns * 1e-9)
    assert kernel_ns * 1e-9 == pytest.approx(88.6e-3, rel=0.01)
    assert _value(rows, "region", "MPI:MPI_Send", "gpu_time") == 0
    kernel = "saxpy(double *, double *, double *, double, int)"
    assert _value(rows, "kernel", kernel, "calls") == 5
    assert _value(rows, "kernel", kernel, "gpu_time") == pytest.approx(kernel_ns * 1e-9)


def test_copies_by_kind_with_bytes_and_time(export):
    """The copies take 3x the kernels' time: each kind (from copyKind, srcKind, dstKind, as
    nsys documents their numbers in an export without ENUM tables) is a row."""
    rows = _rows(export)
    copies = _query(export, "select copyKind, srcKind, dstKind, count(*), sum(end - start), "
                            "sum(bytes) from CUPTI_ACTIVITY_KIND_MEMCPY group by 1, 2, 3")
    assert sorted(c[:3] for c in copies) == [(1, 0, 2), (2, 2, 0)]  # HtoD, DtoH
    names = {(1, 0, 2): "Memcpy HtoD (Pageable -> Device)",
             (2, 2, 0): "Memcpy DtoH (Device -> Pageable)"}
    for kind, count, nanoseconds, moved in ((c[:3], *c[3:]) for c in copies):
        assert _value(rows, "memcpy", names[kind], "calls") == count
        assert _value(rows, "memcpy", names[kind], "gpu_time") == pytest.approx(nanoseconds * 1e-9)
        assert _value(rows, "memcpy", names[kind], "gpu_time", "mean") == pytest.approx(
            nanoseconds * 1e-9 / count)
        assert _value(rows, "memcpy", names[kind], "bytes") == moved
    [(copy_ns,)] = _query(export, "select sum(end - start) from CUPTI_ACTIVITY_KIND_MEMCPY")
    [(kernel_ns,)] = _query(export, "select sum(end - start) from CUPTI_ACTIVITY_KIND_KERNEL")
    assert copy_ns / kernel_ns == pytest.approx(3.2, abs=0.05)
    assert _value(rows, "run", "trace", "gpu_time") == pytest.approx((copy_ns + kernel_ns) * 1e-9)


def test_api_calls_without_version_suffix_or_backtrace_duplicates(export):
    """Every call is in the export twice: once as the CUDA runtime/driver call (eventClass 0
    or 1, `cudaMemcpy_v3020`) and once as its backtrace record (67, `cudaMemcpy`)."""
    rows = _rows(export)
    by_class = _query(export, "select s.value, r.eventClass, count(*), sum(r.end - r.start) "
                              "from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s "
                              "on s.id = r.nameId group by 1, 2")
    calls = [(re.sub(r"_v\d+$", "", name), count, ns) for name, event_class, count, ns
             in by_class if event_class != 67]
    assert ("cudaMemcpy", 15, 374336827) in calls and ("cudaLaunchKernel", 5, 160329) in calls
    api = rows[rows["scope"] == "api"]
    assert set(api["name"]) == {name for name, _, _ in calls}
    for name, count, ns in calls:
        assert _value(rows, "api", name, "calls") == count
        assert _value(rows, "api", name, "wall_time") == pytest.approx(ns * 1e-9)
        assert _value(rows, "api", name, "wall_time", "mean") == pytest.approx(ns * 1e-9 / count)


def test_run_wall_time_is_the_capture_duration(export):
    [(duration,)] = _query(export, "select duration from ANALYSIS_DETAILS")
    assert _value(_rows(export), "run", "trace", "wall_time") == pytest.approx(duration * 1e-9)
    assert duration * 1e-9 == pytest.approx(2.269, abs=1e-3)


def test_facts(export):
    _, facts = read_export(export)
    assert facts == {"report": "export", "nsys_version": "2022.2.1.31",
                     "devices": ["NVIDIA A100-SXM4-40GB"]}


def test_newer_exports_without_nvtx_table_and_with_extra_columns(export, tmp_path):
    """nsys 2024 writes only non-empty tables and adds columns: both must be tolerated; with
    no ANALYSIS_DETAILS, the run's wall time spans its first to its last event."""
    copy = tmp_path / "trimmed.sqlite"
    shutil.copy(export, copy)
    with sqlite3.connect(copy) as db:
        for table in ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_MEMSET", "ANALYSIS_DETAILS"):
            db.execute(f"drop table {table}")
        db.execute("alter table CUPTI_ACTIVITY_KIND_KERNEL add column greenContextId INTEGER")
    rows = _rows(copy)
    assert set(rows["scope"]) == {"kernel", "memcpy", "api", "run"}
    [(first, last)] = _query(copy, "select min(s), max(e) from (select start s, end e from "
                                   "CUPTI_ACTIVITY_KIND_RUNTIME union all select start, end "
                                   "from CUPTI_ACTIVITY_KIND_KERNEL union all select start, "
                                   "end from CUPTI_ACTIVITY_KIND_MEMCPY)")
    assert _value(rows, "run", "trace", "wall_time") == pytest.approx((last - first) * 1e-9)
    assert _value(rows, "run", "trace", "gpu_time") == pytest.approx(373.27e-3, rel=1e-4)


def test_fills_and_enum_tables_and_projection_of_copies(export, tmp_path):
    """An export as nsys 2023+ writes it, with ENUM tables (here numbering the memory kinds
    differently from the documented default, so that only the table gives these names) and
    a fill launched inside a `saxpy` range: its time is projected onto the range."""
    copy = tmp_path / "enums.sqlite"
    shutil.copy(export, copy)
    [(start, end, thread)] = _query(export, "select start, end, globalTid from NVTX_EVENTS "
                                            "where text = 'saxpy' order by start limit 1")
    with sqlite3.connect(copy) as db:
        db.execute("create table ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, "
                   "label TEXT)")
        db.executemany("insert into ENUM_CUDA_MEM_KIND values (?, ?, ?)", [
            (0, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
            (2, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed")])
        db.execute("create table ENUM_CUDA_MEMCPY_OPER (id INTEGER PRIMARY KEY, name TEXT, "
                   "label TEXT)")
        db.executemany("insert into ENUM_CUDA_MEMCPY_OPER values (?, ?, ?)", [
            (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
            (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host")])
        db.execute("insert into StringIds values (9001, 'cudaMemsetAsync_v3020')")
        db.execute("insert into CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, "
                   "globalTid, correlationId, nameId, returnValue) values (?, ?, 0, ?, 9002, "
                   "9001, 0)", (start + 1, start + 2, thread))
        db.execute("insert into CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, "
                   "streamId, correlationId, globalPid, value, bytes, memKind) values "
                   "(?, ?, 0, 1, 7, 9002, ?, 0, 4096, 2)",
                   (end + 10, end + 5010, thread >> 24 << 24))
    rows = _rows(copy)
    [(kernel_ns,)] = _query(export, "select sum(end - start) from CUPTI_ACTIVITY_KIND_KERNEL")
    assert _value(rows, "memset", "Memset (Managed)", "calls") == 1
    assert _value(rows, "memset", "Memset (Managed)", "bytes") == 4096
    assert _value(rows, "memset", "Memset (Managed)", "gpu_time") == pytest.approx(5e-6)
    assert _value(rows, "region", "saxpy", "gpu_time") == pytest.approx(kernel_ns * 1e-9 + 5e-6)
    assert _value(rows, "api", "cudaMemsetAsync", "calls") == 1
    assert set(rows.loc[rows["scope"] == "memcpy", "name"]) == {
        "Memcpy HtoD (Pinned -> Managed)", "Memcpy DtoH (Managed -> Pinned)"}


def test_sqlite_that_is_not_an_nsys_export(tmp_path):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("create table people (name text)")
    with pytest.raises(IngestError, match="not an Nsight Systems export"):
        read_nsys(other)


def test_ranges_nested_deeper_than_the_cap_are_left_out_and_said(export, tmp_path):
    """200 push/pop ranges inside one another on a thread (each row named by the path of
    those around it: 5,000 levels took gigabytes): the 64 outermost are rows, the rest
    said."""
    from profile_all.readers.nesting import MAX_DEPTH

    copy = tmp_path / "deep.sqlite"
    shutil.copy(export, copy)
    [(start, thread)] = _query(export, "select min(start), globalTid from NVTX_EVENTS "
                                       "where eventType = 59")
    with sqlite3.connect(copy) as db:
        db.executemany("insert into NVTX_EVENTS (start, end, eventType, text, globalTid) "
                       "values (?, ?, 59, ?, ?)",
                       [(start + level, start + 10_000 - level, f"deep{level}", thread + 1)
                        for level in range(200)])  # a thread of their own: none around them
    rows, facts = read_export(copy)
    assert f"{copy}: {200 - MAX_DEPTH} NVTX ranges nested deeper than {MAX_DEPTH} levels " \
        "left out (their time is in the ranges around them)" in facts["doubts"]
    regions = measured_frame(rows)
    names = set(regions[regions["scope"] == "region"]["name"])
    assert {f"deep{level}" for level in range(MAX_DEPTH - 1)} <= names
    assert not {f"deep{level}" for level in range(MAX_DEPTH, 200)} & names


def test_a_string_that_is_no_text_and_one_no_row_holds(export, tmp_path):
    """A StringIds value stored as a BLOB that is not UTF-8 (made by hand: nsys writes TEXT)
    is shown with escapes; a range whose textId no row of StringIds holds is named so and
    said, not a region with an empty name."""
    copy = tmp_path / "strings.sqlite"
    shutil.copy(export, copy)
    [(start, thread)] = _query(export, "select start, globalTid from NVTX_EVENTS "
                                            "where text = 'saxpy' order by start limit 1")
    with sqlite3.connect(copy) as db:
        db.execute("update StringIds set value = ? where value = 'MPI_Init'", (b"\xff\xfeit",))
        db.execute("insert into NVTX_EVENTS (start, end, eventType, textId, globalTid) "
                   "values (?, ?, 59, 987654, ?)", (start + 1, start + 2, thread))
    rows, facts = read_export(copy)
    names = set(measured_frame(rows).query("scope == 'region'")["name"])
    assert "MPI:\\xff\\xfeit" in names and "MPI:MPI_Init" not in names
    assert "(string 987654, not in the export)" in names and "" not in names
    assert facts["doubts"] == [f"{copy}: 1 string id named by its rows not in StringIds "
                               "(first 987654): shown as (string 987654, not in the export)"]
