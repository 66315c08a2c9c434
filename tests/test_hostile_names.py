"""Names that others wrote reach no terminal as control characters, in any renderer: the
run's own output, `show` (table, md, csv, json), summary.md, report.html, `compare`, and
the error line. Each control character is shown as its escape (`\\x1b`), and Rich markup
in a name is a name, not a style."""

from __future__ import annotations

import re

import pytest

from conftest import TARGETS, profile_all_here

TARGET = TARGETS / "hostile_names.py"
#: what must never reach the terminal: C0 (but newline and tab of the layout), DEL, C1,
#: and the bidirectional overrides
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SHOWN = ["\\x1b[2J\\x1b[31mcleared", "[bold red]markup[/bold red]", "right\\u202eleft",
         "bell\\x07", "two\\nlines", "c1\\x9bcsi", "carriage\\rreturn"]


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile") / "run"
    done = profile_all_here("run", TARGET, "-b", "wallclock", "-b", "cprofile", "-o", out)
    assert done.returncode == 0, done.stderr
    return out, done


def _clean(text: str, where: str) -> None:
    found = RAW.search(text)
    assert found is None, (where, repr(text[max(0, found.start() - 40):found.end() + 40]))


def test_the_run_and_its_files_show_every_name_escaped(hostile_run):
    out, done = hostile_run
    _clean(done.stdout + done.stderr, "the run's output")
    summary = (out / "summary.md").read_text()
    page = (out / "report.html").read_text()
    ours = re.sub(r"<script>.*?</script>", "", page, flags=re.S)  # (plotly.js's own code)
    for where, text in (("summary.md", summary), ("report.html", ours)):
        _clean(text, where)
    for name in SHOWN:
        assert name in summary.replace("\\|", "|"), name
    assert "[bold red]markup[/bold red]" in done.stderr  # a name, not a style
    # report.csv: the names shown, a row a line (a raw carriage return split rows)
    csv_text = (out / "report.csv").read_text()
    _clean(csv_text, "report.csv")
    import pandas as pd

    assert len(pd.read_csv(out / "report.csv")) == len(pd.read_parquet(out / "report.parquet"))


@pytest.mark.parametrize("fmt", ["table", "md", "csv", "json"])
def test_show_of_the_folder_in_every_format(hostile_run, fmt):
    out, _done = hostile_run
    shown = profile_all_here("show", out, "--format", fmt)
    assert shown.returncode == 0, shown.stderr
    _clean(shown.stdout + shown.stderr, f"show --format {fmt}")
    assert "right\\u202eleft" in shown.stdout.replace("\\\\", "\\") + shown.stderr


def test_compare_and_the_error_line(hostile_run, tmp_path):
    out, _done = hostile_run
    compared = profile_all_here("compare", out, out)
    _clean(compared.stdout + compared.stderr, "compare")
    bad = tmp_path / "\x1b[2Jtrace.json"
    bad.write_text("{not json")
    refused = profile_all_here("ingest", bad, "-o", tmp_path / "o")
    assert refused.returncode == 2
    _clean(refused.stderr, "the error line")
    assert "\\x1b[2Jtrace.json" in refused.stderr
