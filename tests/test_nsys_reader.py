"""The nsys sqlite reader on a real export (Nsight Systems 2022.2.1, schema 2.9.1)."""

from __future__ import annotations

import shutil
import sqlite3

import pandas as pd
import pytest

from conftest import measured_frame, value_of
from profile_all.ingest import IngestError
from profile_all.ingest.nsys_sqlite import read_nsys


def _rows(path) -> pd.DataFrame:
    return measured_frame(read_nsys(path))


def _value(rows, scope, name, metric, stat="total"):
    return value_of(rows, scope=scope, name=name, metric=metric, stat=stat)


@pytest.fixture
def export(fixtures):
    return fixtures / "nsys" / "saxpy_mpi_cuda_2022.sqlite"


def test_ranges_kernels_and_projected_gpu_time(export):
    rows = _rows(export)
    with sqlite3.connect(f"file:{export}?mode=ro", uri=True) as db:
        kernel_ns = db.execute(
            "select sum(end - start) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    calls = rows[(rows["scope"] == "region") & (rows["metric"] == "calls")]
    assert dict(zip(calls["name"], calls["value"], strict=True)) == {
        "MPI_Init": 1, "MPI_Send": 10, "MPI_Recv": 5, "saxpy": 5, "MPI_Finalize": 1}
    # the saxpy ranges cover only the launches (about 0.23 ms) ...
    assert _value(rows, "region", "saxpy", "wall_time") == pytest.approx(0.23e-3, rel=0.05)
    # ... but their projected GPU time is the five saxpy kernels' time (about 88.6 ms)
    assert _value(rows, "region", "saxpy", "gpu_time") == pytest.approx(kernel_ns * 1e-9)
    assert kernel_ns * 1e-9 == pytest.approx(88.6e-3, rel=0.01)
    assert _value(rows, "region", "MPI_Send", "gpu_time") == 0
    kernel = "saxpy(double *, double *, double *, double, int)"
    assert _value(rows, "kernel", kernel, "calls") == 5
    assert _value(rows, "kernel", kernel, "gpu_time") == pytest.approx(kernel_ns * 1e-9)


def test_newer_exports_without_nvtx_table_and_with_extra_columns(export, tmp_path):
    """nsys 2024 writes only non-empty tables and adds columns: both must be tolerated."""
    copy = tmp_path / "trimmed.sqlite"
    shutil.copy(export, copy)
    with sqlite3.connect(copy) as db:
        db.execute("drop table NVTX_EVENTS")
        db.execute("alter table CUPTI_ACTIVITY_KIND_KERNEL add column greenContextId INTEGER")
    rows = _rows(copy)
    assert set(rows["scope"]) == {"kernel", "run"}
    assert _value(rows, "run", "trace", "gpu_time") == pytest.approx(88.57e-3, rel=1e-3)


def test_sqlite_that_is_not_an_nsys_export(tmp_path):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("create table people (name text)")
    with pytest.raises(IngestError, match="not an Nsight Systems export"):
        read_nsys(other)
