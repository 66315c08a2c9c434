"""A run folder is data, maybe someone else's: `show`, `view`, `compare`, `merge` and `load`
read only files inside it, pass none of its text through str.format, and refuse a field
that is not what profile-all writes in one line (exit 2), never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import profile_all as pa
from conftest import TARGETS
from profile_all.cli import main


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("good") / "run"
    pa.run(TARGETS / "speed.py", ["0.001", "<script>alert(1)</script>", "a|b"],
           backends=["wallclock", "cprofile"], out=run_dir)
    return run_dir


def _crafted(good_run: Path, tmp_path: Path, change) -> Path:
    copy = tmp_path / "crafted"
    shutil.copytree(good_run, copy)
    meta = json.loads((copy / "meta.json").read_text())
    change(meta, copy)
    (copy / "meta.json").write_text(json.dumps(meta))
    return copy


def _refused(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    err = capsys.readouterr().err
    assert ended.value.code == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert "Traceback" not in err


def _set(*keys_and_value):
    *keys, value = keys_and_value

    def change(meta, _folder):
        target = meta
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return change


def _artifact(path: str):
    def change(meta, _folder):
        meta["artifacts"][0]["path"] = path

    return change


def _link_out(meta, folder):
    (folder / "artifacts" / "outside.prof").symlink_to("/etc/passwd")
    meta["artifacts"][0]["path"] = "artifacts/outside.prof"


OUTSIDE = [_artifact("/etc/passwd"), _artifact("../../../../etc/passwd"),
           _artifact("artifacts/../../elsewhere.prof"), _link_out]


@pytest.mark.parametrize("change", OUTSIDE, ids=["absolute", "dotdot", "dotdot2", "link"])
@pytest.mark.parametrize("verb", [["show", "--html"], ["show"], ["view", "--no-browser"]])
def test_a_file_outside_the_folder_is_refused(good_run, tmp_path, capsys, change, verb):
    crafted = _crafted(good_run, tmp_path, change)
    _refused([verb[0], str(crafted), *verb[1:]], "names a file outside the run folder", capsys)
    with pytest.raises(pa.UsageError, match="outside the run folder"):
        pa.load(crafted)
    assert "root:" not in capsys.readouterr().out


def _ingested_from_outside(meta, _folder):
    """An ingest's meta.json whose source names a file outside the folder (it once
    reached SnakeViz)."""
    meta["target"] = {"kind": "ingest", "command": "profile-all ingest x.prof"}
    meta["artifacts"] = []
    meta["sources"] = [{"pass": 1, "path": "/etc/passwd", "backend": "cprofile", "rank": 0}]


def test_view_serves_no_source_that_meta_names_elsewhere(good_run, tmp_path, capsys):
    crafted = _crafted(good_run, tmp_path, _ingested_from_outside)
    _refused(["view", str(crafted), "--no-browser"], "has no cProfile file", capsys)
    assert "root:" not in capsys.readouterr().out


CRAFTED = [
    (_set("status", 5), "status is not what profile-all writes"),
    (_set("exit_code", "1"), "exit_code is not what profile-all writes"),
    (_set("passes", "x"), "passes is not what profile-all writes"),
    (_set("passes", [1]), "passes is not what profile-all writes"),
    (_set("passes", 0, "backends", "wallclock"), "passes[0].backends"),
    (_set("passes", 0, "overhead", "fast"), "passes[0].overhead"),
    (_set("passes", 0, "error", None), "passes[0].error"),
    (_set("passes", 0, "backend_failures", [{"error": 3}]), "passes[0].backend_failures"),
    (_set("skipped_backends", {"nsys": 1}), "skipped_backends"),
    (_set("skipped_backends", []), "skipped_backends"),
    (_set("doubts", [1]), "doubts"),
    (_set("doubts", "x"), "doubts"),
    (_set("artifacts", [{"path": 3}]), "artifacts"),
    (_set("artifacts", [{"path": "artifacts/cprofile.prof"}]), "artifacts[0]"),
    (_set("artifacts", "x"), "artifacts"),
    (_set("target", "x"), "target is not what"),
    (_set("target", "command", ["python"]), "target.command"),
    (_set("environment", []), "environment"),
    (_set("passes_not_run", ["2"]), "passes_not_run"),
    (_set("model", {"cv": "high"}), "model.cv"),
    (_set("format", "1"), "is not profile-all run metadata"),
]


@pytest.mark.parametrize("change, message", CRAFTED, ids=[m for _, m in CRAFTED])
@pytest.mark.parametrize("verb", ["show", "compare", "view"])
def test_a_crafted_field_is_one_line(good_run, tmp_path, capsys, change, message, verb):
    crafted = _crafted(good_run, tmp_path, change)
    argv = {"show": ["show", str(crafted)], "view": ["view", str(crafted), "--no-browser"],
            "compare": ["compare", str(good_run), str(crafted)]}[verb]
    _refused(argv, message, capsys)


@pytest.mark.parametrize("column, values, message", [
    ("value", "text", "column 'value' holds"),
    ("pass", 1.5, "column 'pass' holds other than whole numbers"),
    ("name", 3, "column 'name' holds other than text"),
])
def test_a_crafted_table_is_one_line(good_run, tmp_path, capsys, column, values, message):
    crafted = _crafted(good_run, tmp_path, lambda meta, folder: None)
    frame = pd.read_parquet(crafted / "report.parquet")
    frame[column] = values
    frame.to_parquet(crafted / "report.parquet", index=False)
    _refused(["show", str(crafted)], message, capsys)


def _deep_json(folder: Path) -> None:
    (folder / "meta.json").write_text("[" * 100_000 + "]" * 100_000)


def _meta_linked_out(folder: Path) -> None:
    (folder / "meta.json").unlink()
    (folder / "meta.json").symlink_to("/etc/passwd")


@pytest.mark.parametrize("spoil, message", [
    (_deep_json, "nested deeper than Python's JSON reader goes"),
    (_meta_linked_out, "meta.json is a link out of the run folder"),
], ids=["deep", "linked"])
@pytest.mark.parametrize("verb", ["show", "compare", "view"])
def test_a_spoilt_meta_json_is_one_line(good_run, tmp_path, capsys, spoil, message, verb):
    crafted = _crafted(good_run, tmp_path, lambda meta, folder: None)
    spoil(crafted)
    argv = {"show": ["show", str(crafted)], "view": ["view", str(crafted), "--no-browser"],
            "compare": ["compare", str(good_run), str(crafted)]}[verb]
    _refused(argv, message, capsys)
    assert "root:" not in capsys.readouterr().out


def test_no_text_of_the_folder_goes_through_str_format(good_run, tmp_path, capsys):
    crafted = _crafted(good_run, tmp_path, _set("artifacts", 0, "open_command",
                                                "run {nope} {0} {run_dir}"))
    with pytest.raises(SystemExit) as ended:
        main(["show", str(crafted)])
    out = capsys.readouterr()
    assert ended.value.code is None or ended.value.code == 0, out.err
    assert f"run {{nope}} {{0}} {crafted}" in out.out.replace("\n", "")


def test_summary_md_escapes_html_in_names(good_run):
    summary = (good_run / "summary.md").read_text()
    assert "<script" not in summary
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in summary
    assert "a\\|b" in summary  # a table cell's pipe, escaped too


def test_merge_copies_the_native_files_meta_json_names_and_nothing_else(good_run, tmp_path):
    """A link to /etc and a sparse gigabyte put in another's artifacts/ were copied by a
    merge (the gigabyte written dense); the files meta.json lists are."""
    other = tmp_path / "other"
    shutil.copytree(good_run, other)
    (other / "artifacts" / "etc").symlink_to("/etc/ssl")
    with open(other / "artifacts" / "x.bin", "wb") as sparse:
        sparse.truncate(2**30)
    with pytest.raises(SystemExit) as ended:
        main(["merge", "--force", str(good_run), str(other), "-o", str(tmp_path / "merged")])
    assert ended.value.code == 0
    merged = tmp_path / "merged" / "artifacts"
    assert not (merged / "node1" / "etc").exists() and not (merged / "node1" / "x.bin").exists()
    listed = [a.path for a in pa.load(good_run).meta.artifacts]
    assert listed and all((tmp_path / "merged" / path.replace(
        "artifacts/", "artifacts/node1/", 1)).is_file() for path in listed)
    assert sum(f.stat().st_size for f in merged.rglob("*") if f.is_file()) < 50 * 2**20


def _loop_named(meta: dict, copy: Path) -> None:
    (copy / "artifacts" / "loop1").symlink_to("loop2")
    (copy / "artifacts" / "loop2").symlink_to("loop1")
    meta["artifacts"][0]["path"] = "artifacts/loop1"


def _nul_named(meta: dict, copy: Path) -> None:
    meta["artifacts"][0]["path"] = "artifacts/x\x00y"


def _ranks_of_the_wrong_types(meta: dict, copy: Path) -> None:
    meta["passes"][0]["ranks"] = [{"rank": "x", "status": 5}]


@pytest.mark.parametrize("change, message", [
    (_loop_named, "names a file that cannot be reached ('artifacts/loop1'"),
    (_nul_named, "names a file that cannot be reached"),
    (_ranks_of_the_wrong_types, "is not what profile-all writes")])
def test_records_that_were_tracebacks_are_one_line(good_run, tmp_path, capsys, change,
                                                   message):
    """An artifact that is a link loop (RuntimeError) or holds a NUL (ValueError), a
    pass's ranks of the wrong types (KeyError in show and merge): one line, exit 2."""
    crafted = _crafted(good_run, tmp_path, change)
    for command in (["show", str(crafted)], ["merge", "--force", str(good_run), str(crafted),
                                             "-o", str(tmp_path / "merged")]):
        _refused(command, message, capsys)
