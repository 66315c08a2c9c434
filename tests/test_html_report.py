"""report.html: one offline page with plots and tables, every user string escaped; and the
other ways to show a run (`show --format`, `--html`, a notebook's cell)."""

from __future__ import annotations

import html as html_module
import json
import re
import shutil
import subprocess
from io import StringIO

import pandas as pd
import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here
from profile_all import units as fmt
from profile_all.render import html

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "run"
    done = profile_all_here("run", TARGETS / "speed.py", "-b", "wallclock", "-b", "cprofile",
                            "-b", "memory", "-o", out, "--", "0.002", HOSTILE, "$x$ & <b>")
    assert done.returncode == 0, done.stderr
    return out


def _chart_data(page: str) -> list[dict]:
    found = re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', page,
                      re.S)
    return json.loads(found.group(1))


def test_page_structure_offline_and_escaped(run_dir):
    page = (run_dir / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    for section in ("summary", "plots", "passes", "functions", "native", "environment"):
        assert f'<section id="{section}">' in page
    assert page.index('<section id="findings">') < page.index('<section id="plots">')
    # the only script elements are ours: plotly.js, the charts' data, the call that draws,
    # the tables' sorting and filtering
    assert len(re.findall(r"<script", page, re.I)) == 4
    assert page.count(HOSTILE) == 0  # the hostile region is text in tables, data in charts
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "$x$ &amp; &lt;b&gt;" in page
    # nothing loaded from outside (plotly.js's own code mentions URLs it never loads here)
    ours = re.sub(r"<script>.*?</script>", "", page, flags=re.S)
    assert not re.search(r'(src|href)="(https?:)?//', ours)
    assert not re.search(r"<(script|link|img)[^>]*(src|href)=", page)
    figures = _chart_data(page)
    titles = [figure["layout"]["title"]["text"] for figure in figures]
    assert titles[:3] == ["Time per region, each timer",
                          "Each pass's overhead over the clean timing pass",
                          "Memory over time, regions shaded"]
    assert any(HOSTILE in label for label in figures[0]["data"][0]["y"])  # as data, intact
    steps = next(f for f in figures if f["layout"]["title"]["text"] == "Each step's time")
    samples = pa.load(run_dir).samples.query("scope == 'step' and backend == 'wallclock'")
    assert steps["data"][0]["y"] == pytest.approx((samples["value"] * 1e3).tolist())
    # speed.py's 30 steps, in order, but the first (from the target's start: its setup) and
    # those in cProfile's window of steps
    assert len(steps["data"][0]["y"]) == 29 - len(pa.load(run_dir).meta.passes[0].window_steps)
    assert "mprof plot" in page and "profile-all view" in page
    assert f"<code>{run_dir}</code>" in page  # the final directory, not the one built in
    # the memory chart's region bands come from the report's timeline: the page drawn as
    # the run was saved and one drawn after loading it are the same
    memory = figures[2]
    assert memory["layout"]["shapes"], "no region band"
    assert _chart_data(html.render(pa.load(run_dir)))[2] == memory


def _in_chromium(page: str, probe_js: str, tmp_path, console: list[str] | None = None) -> str:
    """The page's title after `probe_js` ran in headless Chromium (it sets the title);
    the browser console's messages (plotly.js's warnings among them) go to `console`."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium on PATH (apt-get install chromium; .ci/run installs it)")
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", f"""<script>
window.onerror = function (message) {{ document.title = "ERROR " + message; }};
{probe_js}
</script></body>"""))
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0",
                           "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=120)
    if console is not None:
        console += [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    title = re.search(r"<title>(.*?)</title>", done.stdout, re.S)
    assert title is not None, done.stderr[-2000:]
    return html_module.unescape(title.group(1))


def test_the_page_draws_in_a_real_browser(run_dir, tmp_path):
    """Headless Chromium opens the page: plotly.js draws every chart (an SVG each) and the
    console holds no error."""
    page = (run_dir / "report.html").read_text()
    count = len(_chart_data(page))
    title = _in_chromium(page, """
setTimeout(function () {
  var drawn = document.querySelectorAll('.chart.js-plotly-plot').length;
  if (!document.querySelectorAll('.chart.js-plotly-plot .main-svg').length) { drawn = 0; }
  if (document.title.indexOf('ERROR') !== 0) { document.title = 'CHARTS ' + drawn; }
}, 1500);""", tmp_path)
    assert title == f"CHARTS {count}", title  # drawn, each an SVG


@pytest.fixture(scope="module")
def recursive_run(tmp_path_factory):
    """A target whose pstats edges claim more than their callers (recursion)."""
    out = tmp_path_factory.mktemp("html") / "recursive"
    done = profile_all_here("run", TARGETS / "recursive.py", "-b", "cprofile", "-o", out)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory):
    """py-spy's samples of a script, whole: its call tree is drawn as a flame graph."""
    out = tmp_path_factory.mktemp("html") / "sampled"
    done = profile_all_here("run", TARGETS / "two_costs.py", "-b", "py-spy", "--pass-steps", "all",
                            "--py-spy-rate", "200", "-o", out, "--", "30")
    assert done.returncode == 0, done.stderr
    return out


def _bars(figure: dict) -> list[tuple[int, str, float, float]]:
    """A flame graph's bars: (level, label, start, width), from every package's trace."""
    return [(level, custom[3], start, width) for trace in figure["data"]
            for level, custom, start, width in zip(trace["y"], trace["customdata"],
                                                   trace["base"], trace["x"], strict=True)]


@pytest.mark.parametrize("which", ["speed", "recursive", "sampled"])
def test_the_call_tree_draws_in_a_real_browser(which, run_dir, recursive_run, sampled_run,
                                               tmp_path):
    """cProfile's call tree and py-spy's flame graph are drawn, a bar a node, offline, each
    on its caller's span, coloured by package, and plotly.js says nothing."""
    folder = {"speed": run_dir, "recursive": recursive_run, "sampled": sampled_run}[which]
    page = (folder / "report.html").read_text()
    figures = _chart_data(page)
    [index] = [i for i, f in enumerate(figures) if f["layout"].get("meta", {}).get("widen")]
    figure = figures[index]
    bars = _bars(figure)
    roots = [bar for bar in bars if bar[0] == 0]
    # every bar lies inside a bar one level nearer the root (its caller's span), to the
    # figures' 6 digits
    slack = 1e-5 * max(start + width for _level, _label, start, width in bars)
    for level, label, start, width in bars:
        if level:
            assert any(start >= outer[2] - slack and start + width <= outer[2] + outer[3] + slack
                       for outer in bars if outer[0] == level - 1), label
    assert len({trace["marker"]["color"] for trace in figure["data"]}) == len(figure["data"])
    if which == "sampled":  # a flame graph: the thread at the bottom, the script on it
        assert figure["layout"]["title"]["text"].startswith("Flame graph, sampled")
        assert figure["layout"]["yaxis"]["autorange"] is True
        assert [root[1] for root in roots] == ["thread MainThread"]
        assert any(label.endswith(":1(<module>)") for level, label, *_ in bars if level == 1)
        assert {trace["name"] for trace in figure["data"]} >= {"thread", "two_costs"}
    elif which == "speed":  # cProfile's window of steps: what the script called in them
        assert figure["layout"]["yaxis"]["autorange"] == "reversed"
        assert all("profile_all" not in root[1] for root in roots)
        assert any("time.sleep" in root[1] for root in roots), roots
    else:
        assert any(root[1].endswith(":1(<module>)") for root in roots), roots
        assert all("profile_all" not in root[1] for root in roots)
    console: list[str] = []
    title = _in_chromium(page, """
setTimeout(function () {
  var bars = document.querySelectorAll('#chart-INDEX .trace.bars .point').length;
  var texts = Array.prototype.filter.call(
    document.querySelectorAll('#chart-INDEX .trace.bars .point text'),
    function (t) { return t.textContent !== ''; }).length;
  if (document.title.indexOf('ERROR') !== 0) { document.title = 'BARS ' + bars + ' ' + texts; }
}, 1500);""".replace("INDEX", str(index)), tmp_path, console)
    assert len(bars) >= (1 if which == "speed" else 3)  # speed.py's steps: two sleeps, flat
    # every label that its bar holds is drawn, the widest bar's among them
    labelled = sum(bool(text) for trace in figure["data"] for text in trace["text"])
    assert labelled >= 1
    assert title == f"BARS {len(bars)} {labelled}", (title, console)
    assert not [line for line in console if "WARN" in line or "rror" in line], console


def test_a_label_is_cut_to_what_its_bar_holds():
    from profile_all.render.flame_graph import fitted

    label = "torch/nn/modules/module.py:1774(_wrapped_call_impl)"
    assert fitted(label, 1.0) == label
    assert fitted(label, 0.1) == "torch/nn/modul…"  # 100 px: 15 characters
    assert fitted(label, 0.01) == ""


def test_a_click_on_a_bar_widens_the_flame_graph_to_it(recursive_run, tmp_path):
    page = (recursive_run / "report.html").read_text()
    figures = _chart_data(page)
    [index] = [i for i, f in enumerate(figures) if f["layout"].get("meta", {}).get("widen")]
    _level, label, start, width = max((bar for bar in _bars(figures[index]) if bar[0] == 2),
                                      key=lambda bar: bar[3])
    title = _in_chromium(page, """
setTimeout(function () {
  var chart = document.getElementById('chart-INDEX');
  var labels = function (t) { return t.customdata.map(function (c) { return c[3]; }); };
  var trace = chart.data.find(function (t) { return labels(t).indexOf(LABEL) >= 0; });
  var at = labels(trace).indexOf(LABEL);
  chart.emit('plotly_click', {points: [{customdata: trace.customdata[at]}]});
  setTimeout(function () {
    if (document.title.indexOf('ERROR') !== 0) {
      document.title = JSON.stringify(chart.layout.xaxis.range);
    }
  }, 300);
}, 1500);""".replace("INDEX", str(index)).replace("LABEL", json.dumps(label)), tmp_path)
    assert json.loads(title) == pytest.approx([start, start + width], rel=1e-5)


def test_a_long_table_shows_its_top_rows_and_sorts_empty_cells_last(tmp_path):
    """250 rows: the first 100 shown, a button for the rest; a column with empty cells
    sorts them last whichever way."""
    frame = pd.DataFrame({"name": [f"row {i}" for i in range(250)],
                          "time": [f"{i} ms" if i % 3 else "" for i in range(250)]})
    page = (f"<!DOCTYPE html><html><head><title>t</title></head><body>"
            f"{html.table_html(frame)}<script>{html.TABLE_JS}</script></body></html>")
    title = _in_chromium(page, """
var table = document.querySelector('table');
function shown() {
  return Array.prototype.filter.call(table.tBodies[0].rows,
                                     function (row) { return !row.hidden; });
}
var more = document.querySelector('button.more');
var before = [shown().length, more.textContent];
var header = table.querySelectorAll('th')[1];
header.click();
var down = [shown()[0].cells[1].textContent, table.tBodies[0].rows[249].cells[1].textContent];
header.click();
var up = [shown()[0].cells[1].textContent, table.tBodies[0].rows[249].cells[1].textContent];
more.click();
var after = [shown().length, more.hidden];
if (document.title.indexOf('ERROR') !== 0) {
  document.title = JSON.stringify([before, down, up, after]);
}""", tmp_path)
    assert json.loads(title) == [[100, "show the other 150 rows"], ["248 ms", ""],
                                 ["1 ms", ""], [250, True]], title


def test_the_page_is_small_with_every_chart(run_dir):
    """plotly.js's partial bundle, not the 4.8 MB full one: the page under 1.5 MB."""
    page = (run_dir / "report.html").read_text()
    assert html.plotly_js() in page
    assert len(_chart_data(page)) >= 4
    assert (run_dir / "report.html").stat().st_size < 1.5e6


def test_tables_hold_every_row_and_sort_and_filter_in_a_browser(run_dir, tmp_path):
    functions = pa.load(run_dir).functions()
    page = (run_dir / "report.html").read_text()
    # the sorted column's first cell, as displayed (names can tie at 3 digits)
    heaviest = fmt.seconds(functions["cumulative_time"].max())
    lightest = fmt.seconds(functions["cumulative_time"].min())
    sleeping = int(functions["name"].str.lower().str.contains("sleep").sum())
    title = _in_chromium(page, """
var table = document.querySelector('#functions table');
var rows = table.tBodies[0].rows.length;
var header = Array.prototype.filter.call(table.querySelectorAll('th'),
  function (th) { return th.textContent === 'cumulative'; })[0];
header.click();
var column = Array.prototype.indexOf.call(header.parentNode.children, header);
var first = table.tBodies[0].rows[0].cells[column].textContent;
header.click();
var last = table.tBodies[0].rows[0].cells[column].textContent;
var filter = document.querySelector('#functions input.filter');
filter.value = 'SLEEP';
filter.dispatchEvent(new Event('input'));
var shown = Array.prototype.filter.call(table.tBodies[0].rows,
  function (row) { return !row.hidden; }).length;
if (document.title.indexOf('ERROR') !== 0) {
  document.title = JSON.stringify([rows, first, last, shown]);
}""", tmp_path)
    assert json.loads(title) == [len(functions), heaviest, lightest, sleeping], title


def test_show_rewrites_the_page_and_jupyter_gets_the_same(run_dir):
    (run_dir / "report.html").unlink()
    done = profile_all_here("show", run_dir, "--html")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(run_dir / "report.html")
    assert '<section id="plots">' in (run_dir / "report.html").read_text()
    fragment = html.body(pa.load(run_dir), top=html.TOP)  # what a notebook shows
    assert '<section id="summary">' in fragment and "<html" not in fragment


def test_show_formats(run_dir):
    frame = pa.load(run_dir).frame
    as_csv = profile_all_here("show", run_dir, "--format", "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    assert len(pd.read_csv(StringIO(as_csv.stdout))) == len(frame)
    as_json = profile_all_here("show", run_dir, "--format", "json")
    parsed = json.loads(as_json.stdout)
    assert len(parsed["rows"]) == len(frame) and parsed["meta"]["status"] == "complete"
    as_md = profile_all_here("show", run_dir, "--format", "md", "--top", "2")
    assert "## Run, steps and regions" in as_md.stdout
    assert re.search(r"\d+ more rows? not shown", as_md.stdout)
    as_table = profile_all_here("show", run_dir, "--top", "2")
    assert re.search(r"\d+ more rows? not shown \(--top N", as_table.stdout)
    bad = profile_all_here("show", run_dir, "--format", "xml")
    assert bad.returncode == 2 and "xml" in bad.stderr
