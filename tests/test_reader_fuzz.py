"""Every reader, fed broken variants of real files (truncated, written twice, reordered,
nested deeper, fields of the wrong type), ends in a report or in one line (a UsageError,
which the CLI prints as one line with exit code 2), never in another exception, and a
refused file leaves no folder behind. The files: a torch.profiler trace, a pstats file, an
`nsys stats` CSV, a py-spy speedscope file and an mprof file made here, and the other
projects' files of ../shared/fixtures where they are (CI): traces of 2021 and 2024, an
Nsight export and report, pstats of Python 3 and 2."""

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


def _json_changed(change: Callable[[dict], dict]) -> Callable[[bytes], bytes]:
    return lambda data: json.dumps(change(json.loads(data))).encode()


def _each_profile(document: dict, change: Callable[[dict], dict]) -> dict:
    return {**document, "profiles": [change(p) for p in document["profiles"]]}


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
SPEEDSCOPE = [
    ("frame indices out of range", _json_changed(lambda doc: _each_profile(
        doc, lambda p: {**p, "samples": [[i + 99 for i in stack] for stack in p["samples"]]}))),
    ("weights as text", _json_changed(lambda doc: _each_profile(
        doc, lambda p: {**p, "weights": [str(w) for w in p["weights"]]}))),
    ("samples dropped", _json_changed(lambda doc: _each_profile(
        doc, lambda p: {k: v for k, v in p.items() if k != "samples"}))),
    ("frames of the wrong types", _json_changed(lambda doc: {
        **doc, "shared": {"frames": [[f] for f in doc["shared"]["frames"]]}})),
    ("stacks 3,000 deep", _json_changed(lambda doc: _each_profile(
        doc, lambda p: {**p, "samples": [stack * 1000 for stack in p["samples"]]})))]
MPROFILE = [("lines reordered", lambda data: b"\n".join(sorted(data.split(b"\n")))),
            ("numbers as words", lambda data: data.replace(b"1", b"one")),
            ("fields dropped", lambda data: b"\n".join(
                line.rsplit(b" ", 1)[0] for line in data.split(b"\n")))]
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
    speedscope = tmp / "own.speedscope.json"
    frames = [{"name": name, "file": "/nowhere/job.py", "line": line}
              for line, name in enumerate(["<module>", "train", "forward"], 1)]
    stacks = [[0, 1, 2]] * 5 + [[0, 1]] * 3
    speedscope.write_text(json.dumps({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": frames}, "exporter": "py-spy@0.4.3", "profiles": [
            {"type": "sampled", "name": "MainThread", "unit": "seconds", "startValue": 0,
             "endValue": 8, "samples": stacks, "weights": [0.01] * 8}]}))
    mprofile = tmp / "mprofile_1.dat"
    mprofile.write_text("CMDLINE python train.py\n" + "".join(
        f"MEM {100 + i:.1f} {1700000000 + i / 10:.4f}\n" for i in range(10)))
    return {"trace": (trace, ANY + TRACE), "pstats": (profile, ANY + PSTATS),
            "csv": (csv, ANY + CSV), "speedscope": (speedscope, ANY + SPEEDSCOPE),
            "mprofile": (mprofile, ANY + MPROFILE)}


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


@pytest.mark.parametrize("kind", ["trace", "pstats", "csv", "speedscope", "mprofile"])
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
    ("nsys/saxpy_mpi_cuda_2022.sqlite", ANY[:2]),
    ("nsys/pdl_2p2c.nsys-rep", ANY),
    ("traces/tensorboard_samples/resnet50_num_workers_0.worker0.1623143566756.pt.trace.json.gz",
     [ANY[0], *TRACE[1:3]]),
    ("traces/cpu_only_gloo_rank34.json.gz", ANY + TRACE),
    ("traces/sampled_rank-0.json.gz", ANY[:2] + TRACE),
    ("pstats/cprofile-cycle.pstats", ANY + PSTATS),
    ("pstats/cprofile-cycle-py2.pstats", ANY)])
def test_broken_variants_of_other_projects_files(fixtures, tmp_path, name, variants):
    source = fixtures / name
    for variant, change in variants:
        try:
            _fed(source, variant, change, tmp_path)
        except Exception as error:
            raise AssertionError(f"{name} {variant}: {type(error).__name__}: {error}") \
                from error
