"""Every reader, fed broken variants of real files (truncated, written twice, reordered,
nested deeper, fields of the wrong type), ends in a report or in one line (a UsageError,
which the CLI prints as one line with exit code 2), never in another exception, and a
refused file leaves no folder behind. The files: a torch.profiler trace, a pstats file and
an `nsys stats` CSV made here, and the other projects' files of ../shared/fixtures where
they are (CI)."""

from __future__ import annotations

import cProfile
import gzip
import json
import lzma
import marshal
import random
from collections.abc import Callable
from pathlib import Path

import pytest

import profile_all as pa
from conftest import write_torch_trace
from profile_all.errors import UsageError
from test_nsys_csv import GPU_ROWS, GPU_TRACE


def _plain(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:6] == b"\xfd7zXZ\x00":
        return lzma.decompress(data)
    return data


def _events_changed(change: Callable[[list], list]) -> Callable[[bytes], bytes]:
    def changed(data: bytes) -> bytes:
        trace = json.loads(data)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        events = change(list(events))
        if isinstance(trace, dict):
            trace["traceEvents"] = events
        return json.dumps(trace if isinstance(trace, dict) else events).encode()
    return changed


def _typed_wrong(events: list) -> list:
    """A field of each kind of every third event given a value of another type."""
    wrong = [("ts", "12"), ("dur", [1]), ("name", {"a": 1}), ("pid", None), ("args", 7),
             ("tid", [1, 2]), ("ph", 3)]
    for number, event in enumerate(events):
        if isinstance(event, dict) and number % 3 == 0:
            field, value = wrong[number // 3 % len(wrong)]
            event[field] = value
    return events


def _shuffled(events: list) -> list:
    random.Random(0).shuffle(events)
    return events


#: (variant, how it changes a file's bytes), for every kind of file
ANY = [("truncated a third in", lambda data: data[:len(data) // 3]),
       ("truncated short of its end", lambda data: data[:-7]),
       ("written twice", lambda data: data + data),
       ("nested in a list 200 deep", lambda data: b"[" * 200 + data + b"]" * 200)]
TRACE = [("events reordered", _events_changed(_shuffled)),
         ("events of the wrong types", _events_changed(_typed_wrong)),
         ("each event in a list", _events_changed(lambda events: [[e] for e in events])),
         ("events repeated", _events_changed(lambda events: events + events))]
CSV = [("lines reordered", lambda data: b"\n".join(
           [data.split(b"\n")[0], *sorted(data.split(b"\n")[1:], reverse=True)])),
       ("numbers as words", lambda data: data.replace(b"0", b"zero")),
       ("a column dropped", lambda data: b"\n".join(
           b",".join(line.split(b",")[1:]) for line in data.split(b"\n")))]
PSTATS = [("entries of the wrong types", lambda data: marshal.dumps(
    {key: list(value) for key, value in marshal.loads(data).items()})),
    ("callers of the wrong types", lambda data: marshal.dumps(
        {key: (*value[:4], list(value[4])) for key, value in marshal.loads(data).items()}))]


def _made_here(tmp: Path) -> dict[str, tuple[Path, list]]:
    trace = write_torch_trace(tmp / "own.pt.trace.json")
    profile = tmp / "own.prof"
    cProfile.run("sorted(str(n) for n in range(2000))", str(profile))
    csv = tmp / "own_cuda_gpu_trace.csv"
    csv.write_text("\n".join([GPU_TRACE, *GPU_ROWS]) + "\n")
    return {"trace": (trace, ANY + TRACE), "pstats": (profile, ANY + PSTATS),
            "csv": (csv, ANY + CSV)}


def _fed(source: Path, name: str, change: Callable[[bytes], bytes], tmp: Path) -> None:
    """Ingest `source` changed by `change`: a Report, or a UsageError and no folder."""
    suffix = "".join(s for s in source.suffixes if s not in (".gz", ".xz"))
    variant = tmp / f"variant-{name.replace(' ', '-')}{suffix}"
    variant.write_bytes(change(_plain(source)))
    out = tmp / f"run-{variant.name}"
    try:
        report = pa.ingest([variant], out)
    except UsageError as refused:
        assert "\n" not in str(refused).strip(), str(refused)
        assert not out.exists()
        return
    assert report.run_dir == out and (out / "meta.json").is_file()


@pytest.mark.parametrize("kind", ["trace", "pstats", "csv"])
def test_broken_variants_of_files_made_here(tmp_path, kind):
    source, variants = _made_here(tmp_path)[kind]
    for name, change in variants:
        try:
            _fed(source, name, change, tmp_path)
        except Exception as error:  # name the variant that broke it
            raise AssertionError(f"{kind} {name}: {type(error).__name__}: {error}") from error


@pytest.mark.parametrize("name, variants", [
    ("traces/a100_nccl_rank0.json.gz", ANY + TRACE),
    ("nsys/pax_fsdp4_proc0_nvtx_pushpop_trace.csv.xz", ANY + CSV),
    ("nsys/saxpy_mpi_cuda_2022.sqlite", ANY[:2])])
def test_broken_variants_of_other_projects_files(fixtures, tmp_path, name, variants):
    source = fixtures / name
    for variant, change in variants:
        try:
            _fed(source, variant, change, tmp_path)
        except Exception as error:
            raise AssertionError(f"{name} {variant}: {type(error).__name__}: {error}") \
                from error
