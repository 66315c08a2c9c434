"""report.html: one offline page with plots and tables, every user string escaped; and the
other ways to show a run (`show --format`, `--html`, Jupyter's `_repr_html_`)."""

from __future__ import annotations

import base64
import json
import re
from io import StringIO

import pandas as pd
import pytest

import profile_all as pa
from conftest import TARGETS, profile_all
from profile_all.report import html

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "run"
    done = profile_all("run", TARGETS / "speed.py", "-b", "wallclock", "-b", "cprofile",
                       "-b", "memory", "-o", out, "--", "0.002", HOSTILE, "$x$ & <b>")
    assert done.returncode == 0, done.stderr
    return out


def test_page_structure_offline_and_escaped(run_dir):
    page = (run_dir / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    for section in ("summary", "plots", "passes", "functions", "native", "environment"):
        assert f'<section id="{section}">' in page
    assert not re.search(r"<script", page, re.I)  # the hostile region is text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "$x$ &amp; &lt;b&gt;" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing loaded from outside
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', page)
    titles = [title for title, _data in images]
    assert {"Time per region", "Overhead of each pass", "Memory", "Top functions"} <= set(
        titles)
    assert all(base64.b64decode(data).startswith(b"\x89PNG") for _title, data in images)
    assert "mprof plot" in page and "profile-all view" in page
    assert f"<code>{run_dir}</code>" in page  # the final directory, not the one built in
    # the memory plot's region bands come from the report's timeline: the page drawn as
    # the run was saved and one drawn after loading it are the same
    redrawn = html.render(pa.load(run_dir))
    memory = re.compile(r'<img alt="Memory" src="([^"]+)"')
    assert memory.search(page).group(1) == memory.search(redrawn).group(1)


def test_show_rewrites_the_page_and_jupyter_gets_the_same(run_dir):
    (run_dir / "report.html").unlink()
    done = profile_all("show", run_dir, "--html")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(run_dir / "report.html")
    assert '<section id="plots">' in (run_dir / "report.html").read_text()
    fragment = pa.load(run_dir)._repr_html_()
    assert '<section id="summary">' in fragment and "<html" not in fragment


def test_show_formats(run_dir):
    frame = pa.load(run_dir).frame
    as_csv = profile_all("show", run_dir, "--format", "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    assert len(pd.read_csv(StringIO(as_csv.stdout))) == len(frame)
    as_json = profile_all("show", run_dir, "--format", "json")
    parsed = json.loads(as_json.stdout)
    assert len(parsed["rows"]) == len(frame) and parsed["meta"]["status"] == "complete"
    as_md = profile_all("show", run_dir, "--format", "md", "--top", "2")
    assert "## Run, steps and regions" in as_md.stdout
    assert re.search(r"\d+ more rows not shown", as_md.stdout)
    as_table = profile_all("show", run_dir, "--top", "2")
    assert re.search(r"\d+ more rows not shown \(--top N", as_table.stdout)
    bad = profile_all("show", run_dir, "--format", "xml")
    assert bad.returncode == 2 and "xml" in bad.stderr
