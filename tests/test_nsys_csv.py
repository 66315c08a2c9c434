"""`nsys stats` CSV reports: a real nvtx_pushpop_trace (JAX, xz) and small files in each
report's header format as nsys writes it (the headers of the report scripts that ship with
Nsight Systems 2023-2024, and of older versions where they differ). Every number is checked
against the file read with the csv module, not against the reader's own output."""

from __future__ import annotations

import csv
import gzip
import io
import lzma
from collections import defaultdict

import pandas as pd
import pytest

from conftest import measured_frame, value_of
from profile_all.readers import IngestError
from profile_all.readers.detect import read_any
from profile_all.readers.nsys_csv import read_nsys_csv

GPU_TRACE = ("Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,"
             "StcSMem (MB),DymSMem (MB),Bytes (MB),Throughput (MB/s),SrcMemKd,DstMemKd,Device,"
             "Ctx,GreenCtx,Strm,Name")
#: before nsys 2024: no GreenCtx, throughput in "MBps"
GPU_TRACE_2023 = ("Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,"
                  "StcSMem (MB),DymSMem (MB),Bytes (MB),Throughput (MBps),SrcMemKd,DstMemKd,"
                  "Device,Ctx,Strm,Name")
GPU_ROWS = [
    # a 4 MiB pinned copy: nsys writes its 4,194,304 bytes as 4.194 MB
    "1134711990,661398,123,,,,,,,,,,4.194,6337.593,Pinned,Device,NVIDIA A10G (0),1,,13,"
    "[CUDA memcpy Host-to-Device]",
    "1135375308,660534,124,,,,,,,,,,4.194,6345.982,Pinned,Device,NVIDIA A10G (0),1,,13,"
    "[CUDA memcpy Host-to-Device]",
    '1136125733,7072,128,4096,1,1,256,1,1,16,0.000,0.000,,,,,NVIDIA A10G (0),1,,13,'
    '"void burn<float, 2>(float *, int, int)"',
    '1136200000,5000,129,4096,1,1,256,1,1,16,0.000,0.000,,,,,NVIDIA A10G (0),1,,13,'
    '"void burn<float, 2>(float *, int, int)"',
    "1136300000,800,130,,,,,,,,,,0.524,655.000,Device,,NVIDIA A10G (0),1,,13,[CUDA memset]",
    "1136400000,1200000,131,,,,,,,,,,200.000,166.000,Device,Pageable,NVIDIA A10G (0),1,,13,"
    "[CUDA memcpy Device-to-Host]",
]
API_TRACE = "Start (ns),Duration (ns),Name,Result,CorrID,Pid,Tid,T-Pri,Thread Name"
API_ROWS = [
    "456173024,2155,cuModuleGetLoadingMode,0,1,811552,811552,20,saxpy",
    "459348415,170736162,cudaMalloc,0,118,811552,811552,20,saxpy",
    "630087558,1270617,cudaMalloc,0,120,811552,811552,20,saxpy",
    "637060753,367537,cudaMemcpy,0,122,811552,811552,20,saxpy",
    # the same call's backtrace record: same thread, CorrID and name, a wider interval
    "637060553,367937,cudaMemcpy,0,122,811552,811552,20,saxpy",
    "637500000,35000,cudaLaunchKernel,0,123,811552,811552,20,saxpy",
    "637600000,9000000,cudaDeviceSynchronize,0,124,811552,811552,20,saxpy",
]
KERN_SUM = ("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),"
            "StdDev (ns),Name")
KERN_ROWS = [
    '62.5,1250000,100,12500.0,12000.0,10000,20000,1500.5,"void matmul<float>(float *, int)"',
    "37.5,750000,3,250000.0,250000.0,240000,260000,10000.0,vectorAdd",
]
NVTX_SUM = ("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),"
            "StdDev (ns),Style,Range")
NVTX_ROWS = [
    "27.7,1631355508,1,1631355508.0,1631355508.0,1631355508,1631355508,0.0,PushPop,step_0",
    "19.3,1135904229,50,22718084.6,22240097.0,22026050,28786412,1417632.9,PushPop,:data_load",
    "11.8,694057698,50,13881154.0,1392122.5,1182862,620707110,87570041.1,PushPop,backward",
]
API_SUM = ("Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),"
           "StdDev (ns),Name")
API_SUM_ROWS = ["99.3,494092651,3,164697550.3,1270617.0,50000,492772034,284087216.3,"
                "cudaMalloc"]
STATS = {"mean": "Avg (ns)", "median": "Med (ns)", "min": "Min (ns)", "max": "Max (ns)",
         "std": "StdDev (ns)"}


def _write(tmp_path, name, header, lines, preamble=""):
    path = tmp_path / name
    path.write_text(preamble + "\n".join([header, *lines]) + "\n")
    return path


def _dicts(path):
    return list(csv.DictReader(io.StringIO(path.read_text())))


def _without_green_context(lines):
    """The rows as nsys before 2024 wrote them: no GreenCtx column (the 19th)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for fields in csv.reader(lines):
        writer.writerow(fields[:18] + fields[19:])
    return out.getvalue().splitlines()


def _rows(path):
    rows, facts = read_nsys_csv(path)
    return measured_frame(rows), facts


def _value(rows, scope, name, metric, stat="total", parent=""):
    return value_of(rows, scope=scope, name=name, metric=metric, stat=stat, parent=parent)


@pytest.fixture
def pax(fixtures):
    return fixtures / "nsys" / "pax_fsdp4_proc0_nvtx_pushpop_trace.csv.xz"


def test_pushpop_trace_regions_with_parent_paths(pax):
    """Parents from RangeStack here (the ids of the open ranges), from ParentId in the reader."""
    with lzma.open(pax, "rt", newline="") as stream:
        ranges = list(csv.DictReader(stream))
    assert len(ranges) == 27891
    names = {r["RangeId"]: r["Name"].removeprefix(":") for r in ranges}
    expected = defaultdict(lambda: [0, 0])
    for r in ranges:
        stack = r["RangeStack"].strip(":").split(":")
        key = (names[r["RangeId"]], "/".join(names[i] for i in stack[:-1]))
        expected[key][0] += 1
        expected[key][1] += int(r["Duration (ns)"])
    rows, facts = _rows(pax)
    assert facts["report"] == "nvtx_pushpop_trace"
    regions = rows[rows["scope"] == "region"]
    calls = regions[regions["metric"] == "calls"]
    assert {(n, p): v for n, p, v in zip(calls["name"], calls["parent"], calls["value"],
                                         strict=True)} == {k: c for k, (c, _) in expected.items()}
    walls = regions[(regions["metric"] == "wall_time") & (regions["stat"] == "total")]
    for name, parent, seconds in zip(walls["name"], walls["parent"], walls["value"], strict=True):
        assert seconds == pytest.approx(expected[name, parent][1] * 1e-9, rel=1e-12)
    deep = [key for key in expected if key[1].count("/") >= 3]
    assert deep and all("," in name for name, _ in deep[:5])  # names keep their commas
    span = max(int(r["End (ns)"]) for r in ranges) - min(int(r["Start (ns)"]) for r in ranges)
    assert _value(rows, "run", "trace", "wall_time") == pytest.approx(span * 1e-9)


@pytest.mark.parametrize("header", [GPU_TRACE, GPU_TRACE_2023])
def test_gpu_trace_kernels_copies_fills(tmp_path, header):
    lines = GPU_ROWS if header == GPU_TRACE else _without_green_context(GPU_ROWS)
    path = _write(tmp_path, "gpu.csv", header, lines)
    records = _dicts(path)
    rows, facts = _rows(path)
    assert facts == {"report": "cuda_gpu_trace", "devices": ["NVIDIA A10G (0)"]}
    kernel = "void burn<float, 2>(float *, int, int)"
    burns = [int(r["Duration (ns)"]) for r in records if r["Name"] == kernel]
    assert _value(rows, "kernel", kernel, "calls") == len(burns) == 2
    assert _value(rows, "kernel", kernel, "gpu_time") == pytest.approx(sum(burns) * 1e-9)
    htod = [r for r in records if r["Name"] == "[CUDA memcpy Host-to-Device]"]
    name = "Memcpy HtoD (Pinned -> Device)"
    assert _value(rows, "memcpy", name, "calls") == 2
    assert _value(rows, "memcpy", name, "bytes") == pytest.approx(
        sum(float(r["Bytes (MB)"]) for r in htod) * 1e6)
    assert _value(rows, "memcpy", name, "gpu_time", "mean") == pytest.approx(
        sum(int(r["Duration (ns)"]) for r in htod) / 2 * 1e-9)
    assert _value(rows, "memcpy", "Memcpy DtoH (Device -> Pageable)", "bytes") == 200e6
    assert _value(rows, "memset", "Memset (Device)", "bytes") == pytest.approx(0.524e6)
    assert set(rows["scope"]) == {"run", "kernel", "memcpy", "memset"}
    assert _value(rows, "run", "trace", "gpu_time") == pytest.approx(
        sum(int(r["Duration (ns)"]) for r in records) * 1e-9)
    last = max(int(r["Start (ns)"]) + int(r["Duration (ns)"]) for r in records)
    assert _value(rows, "run", "trace", "wall_time") == pytest.approx(
        (last - int(records[0]["Start (ns)"])) * 1e-9)


def test_time_units_of_the_header_are_honoured(tmp_path):
    """`nsys stats --timeunit usec` writes every time column in µs."""
    header = GPU_TRACE.replace("(ns)", "(us)")
    path = _write(tmp_path, "gpu_us.csv", header, [
        '1136125.733,7.072,128,4096,1,1,256,1,1,16,0.000,0.000,,,,,GPU (0),1,,13,kern'])
    rows, _ = _rows(path)
    assert _value(rows, "kernel", "kern", "gpu_time") == pytest.approx(7.072e-6)
    bad = _write(tmp_path, "gpu_furlong.csv", GPU_TRACE.replace("Duration (ns)",
                                                                "Duration (fortnights)"),
                 ['1,2,128,4096,1,1,256,1,1,16,0.000,0.000,,,,,GPU (0),1,,13,kern'])
    with pytest.raises(IngestError, match=r"'Duration \(fortnights\)' is in a unit"):
        read_nsys_csv(bad)


@pytest.mark.parametrize("header", [API_TRACE, API_TRACE.replace("Start (ns)",
                                                                 "Start Time (ns)")])
def test_api_trace_counts_each_call_once(tmp_path, header):
    path = _write(tmp_path, "api.csv", header, API_ROWS)
    records = _dicts(path)
    rows, facts = _rows(path)
    assert facts["report"] == "cuda_api_trace"
    mallocs = [int(r["Duration (ns)"]) for r in records if r["Name"] == "cudaMalloc"]
    assert _value(rows, "api", "cudaMalloc", "calls") == 2
    assert _value(rows, "api", "cudaMalloc", "wall_time") == pytest.approx(sum(mallocs) * 1e-9)
    assert _value(rows, "api", "cudaMemcpy", "calls") == 1
    assert _value(rows, "api", "cudaMemcpy", "wall_time") == pytest.approx(367537e-9)
    assert _value(rows, "api", "cudaDeviceSynchronize", "wall_time") == pytest.approx(9e-3)
    starts = [int(r[header.split(",")[0]]) for r in records]
    ends = [s + int(r["Duration (ns)"]) for s, r in zip(starts, records, strict=True)]
    assert _value(rows, "run", "trace", "wall_time") == pytest.approx(
        (max(ends) - min(starts)) * 1e-9)


@pytest.mark.parametrize("report, header, lines, scope, name_column, metric", [
    ("cuda_gpu_kern_sum", KERN_SUM, KERN_ROWS, "kernel", "Name", "gpu_time"),
    ("nvtx_sum", NVTX_SUM, NVTX_ROWS, "region", "Range", "wall_time"),
    ("cuda_api_sum", API_SUM, API_SUM_ROWS, "api", "Name", "wall_time"),
])
def test_summaries_with_their_statistics(tmp_path, report, header, lines, scope, name_column,
                                         metric):
    path = _write(tmp_path, f"{report}.csv", header, lines)
    rows, facts = _rows(path)
    assert facts["report"] == report
    for record in _dicts(path):
        name = record[name_column].removeprefix(":")
        calls = record.get("Instances") or record["Num Calls"]
        assert _value(rows, scope, name, "calls") == int(calls)
        assert _value(rows, scope, name, metric) == pytest.approx(
            float(record["Total Time (ns)"]) * 1e-9)
        for stat, column in STATS.items():
            assert _value(rows, scope, name, metric, stat) == pytest.approx(
                float(record[column]) * 1e-9)
    assert set(rows["scope"]) == {scope}


@pytest.mark.parametrize("header, stats", [
    # nvtx_pushpop_sum (2023+): nvtx_sum's columns without Style
    ("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),"
     "Range", {"mean": "Avg (ns)", "median": "Med (ns)", "min": "Min (ns)", "max": "Max (ns)",
               "std": "StdDev (ns)"}),
    # nvtxppsum (nsys 2020-2021): no unit on the statistics, which are nanoseconds
    ("Time(%),Total Time (ns),Instances,Average,Minimum,Maximum,Range",
     {"mean": "Average", "min": "Minimum", "max": "Maximum"}),
])
def test_other_nvtx_summaries(tmp_path, header, stats):
    values = {"Time (%)": "100.0", "Time(%)": "100.0", "Total Time (ns)": "3000",
              "Instances": "3", "Avg (ns)": "1000.0", "Average": "1000.0", "Med (ns)": "900.0",
              "Min (ns)": "800", "Minimum": "800", "Max (ns)": "1300", "Maximum": "1300",
              "StdDev (ns)": "264.6", "Range": "MPI:MPI_Send"}
    path = _write(tmp_path, "nvtx.csv", header,
                  [",".join(values[column] for column in header.split(","))])
    rows, facts = _rows(path)
    assert facts["report"] == "nvtx_sum"
    [record] = _dicts(path)
    assert _value(rows, "region", "MPI:MPI_Send", "calls") == 3
    for stat, column in stats.items():
        assert _value(rows, "region", "MPI:MPI_Send", "wall_time", stat) == pytest.approx(
            float(record[column]) * 1e-9)
    assert set(rows["stat"]) == {"total", *stats}


def test_a_kernel_on_several_lines_of_a_grid_summary(tmp_path):
    """nsys 2023's cuda_gpu_kern_sum (and cuda_gpu_kern_gb_sum) split a kernel by grid and
    block: the lines add up; median and spread cannot be recombined and are left out."""
    header = KERN_SUM.replace(",Name", ",GridXYZ,BlockXYZ,Name")
    path = _write(tmp_path, "grid.csv", header, [
        '60.0,600,2,300.0,300.0,200,400,141.4,"  64    1    1","  256    1    1",kern',
        '40.0,400,4,100.0,100.0,50,150,40.8,"  32    1    1","  256    1    1",kern'])
    rows, _ = _rows(path)
    assert _value(rows, "kernel", "kern", "calls") == 6
    assert _value(rows, "kernel", "kern", "gpu_time") == pytest.approx(1000e-9)
    assert _value(rows, "kernel", "kern", "gpu_time", "mean") == pytest.approx(1000e-9 / 6)
    assert _value(rows, "kernel", "kern", "gpu_time", "min") == pytest.approx(50e-9)
    assert _value(rows, "kernel", "kern", "gpu_time", "max") == pytest.approx(400e-9)
    assert set(rows["stat"]) == {"total", "mean", "min", "max"}


def test_told_by_content_after_nsys_messages_and_compressed(tmp_path):
    """The standard output of `nsys stats` saved to a file, gzip-compressed, named .txt."""
    preamble = ("Generating SQLite file report1.sqlite from report1.nsys-rep\n"
                "Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2023.2.3/"
                "host-linux-x64/reports/cuda_api_trace.py]... \n")
    plain = _write(tmp_path, "plain.csv", API_TRACE, API_ROWS, preamble)
    packed = tmp_path / "stdout.txt"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    ingested = read_any(packed)
    assert ingested.backend == "nsys" and ingested.facts["report"] == "cuda_api_trace"
    assert measured_frame(ingested.rows).equals(_rows(plain)[0])


def test_a_csv_of_no_known_report_is_refused(tmp_path):
    other = _write(tmp_path, "other.csv", "Time (%),Total Time (ns),Count,Operation",
                   ["100.0,5,1,[CUDA memcpy Host-to-Device]"])
    with pytest.raises(IngestError, match=r"not a file profile-all reads; it reads .*nvtx_sum"):
        read_any(other)


def test_a_header_alone_gives_no_rows(tmp_path):
    rows, facts = _rows(_write(tmp_path, "empty.csv", NVTX_SUM, []))
    assert rows.empty and facts["report"] == "nvtx_sum"


def test_a_broken_csv_is_refused_in_one_line(tmp_path):
    path = _write(tmp_path, "broken.csv", API_TRACE, ['1,2,"cudaMalloc,0,3,4,5,6,x'])
    with pytest.raises(IngestError) as refused:
        read_nsys_csv(path)
    assert "\n" not in str(refused.value) and "unreadable nsys stats CSV" in str(refused.value)


def test_pandas_reads_names_as_nsys_wrote_them(tmp_path):
    """A range called "NA" or "null" stays a name, not a missing value."""
    path = _write(tmp_path, "na.csv", NVTX_SUM, [
        "50.0,10,1,10.0,10.0,10,10,0.0,PushPop,NA", "50.0,10,1,10.0,10.0,10,10,0.0,PushPop,null"])
    rows, _ = _rows(path)
    assert set(rows["name"]) == {"NA", "null"} and not pd.isna(rows["value"]).any()


PUSHPOP = ("Start (ns),End (ns),Duration (ns),DurChild (ns),DurNonChild (ns),Name,PID,TID,Lvl,"
           "NumChild,RangeId,ParentId,RangeStack,NameTree")


def test_a_repeated_range_id_places_its_children_under_the_first_and_says_so(tmp_path):
    """nsys gives each range its own RangeId; two files joined repeat them (a pandas
    InvalidIndexError traceback before): the children of an id met twice go under its
    first range, and the doubt names the line."""
    path = _write(tmp_path, "joined_nvtx_pushpop_trace.csv", PUSHPOP, [
        "1000,9000,8000,2000,6000,:outer,1,1,0,1,7,,:7,:outer",
        "2000,4000,2000,0,2000,:inner,1,1,1,0,8,7,:7:8,--:inner",
        "10000,19000,9000,2000,7000,:again,1,1,0,1,7,,:7,:again",
        "11000,13000,2000,0,2000,:child,1,1,1,0,9,7,:7:9,--:child"])
    rows, facts = _rows(path)
    assert facts["doubts"] == [
        "1 range repeats the RangeId of an earlier one (first line 4, RangeId 7): the ranges "
        "under such an id are placed under its first range"]
    assert _value(rows, "region", "inner", "wall_time", parent="outer") == pytest.approx(2e-6)
    assert _value(rows, "region", "child", "wall_time", parent="outer") == pytest.approx(2e-6)
    assert _value(rows, "region", "again", "wall_time") == pytest.approx(9e-6)


def test_ranges_nested_deeper_than_the_cap_are_left_out_and_said(tmp_path):
    """5,000 levels (a 20,000-level CSV gave no result in 150 s): the 64 outermost are rows,
    each named by its parents' path; the rest said."""
    from profile_all.readers.nesting import MAX_DEPTH

    depth = 5000
    lines = [f"{1000 + level},{30000 - level},{29000 - 2 * level},0,0,:r{level},1,1,{level},"
             f"1,{level + 1},{level if level else ''},:x,:r{level}" for level in range(depth)]
    path = _write(tmp_path, "deep_nvtx_pushpop_trace.csv", PUSHPOP, lines)
    rows, facts = _rows(path)
    assert facts["doubts"] == [
        f"{path}: {depth - MAX_DEPTH:,} NVTX ranges nested deeper than {MAX_DEPTH} levels "
        "left out (their time is in the ranges around them)"]
    regions = rows[(rows["scope"] == "region") & (rows["metric"] == "calls")]
    assert len(regions) == MAX_DEPTH
    deepest = regions[regions["name"] == f"r{MAX_DEPTH - 1}"]
    assert deepest["parent"].item() == "/".join(f"r{level}" for level in range(MAX_DEPTH - 1))


def test_a_number_in_a_file_name_beyond_any_rank_is_no_rank(tmp_path):
    """`rank<200 digits>` overflowed the report's int64 (a traceback) and `rank_2000000000`
    was taken for a rank: a number beyond a job's ranks numbers the files in order."""
    files = []
    for name in (f"rank{'9' * 200}_cuda_gpu_trace.csv", "rank_2000000000_cuda_gpu_trace.csv"):
        files.append(_write(tmp_path, name, GPU_TRACE, GPU_ROWS))
    import profile_all as pa

    report = pa.ingest(files, tmp_path / "run")
    assert sorted(report.frame["rank"].unique()) == [0, 1]
