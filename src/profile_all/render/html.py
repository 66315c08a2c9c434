"""report.html: the whole report as one self-contained page that works offline.

Every string that came from the user or the target (script, arguments, regions, functions,
operators, errors) is escaped through `text`, table cells too (written here: pandas'
`to_html` took a third of a report's write). The charts are Plotly figures (charts.py)
drawn in the browser by plotly.js, inlined once (no CDN): their data is JSON in a `<script
type="application/json">` with every `<` written as a JSON escape, so no name can end the
element or open another.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pandas as pd

from profile_all.render import charts, sections
from profile_all.render.problems import problems
from profile_all.render.status import steps_line
from profile_all.safe_text import visible, visible_all

if TYPE_CHECKING:
    from profile_all.report.report import Report

#: rows of a long table in a notebook cell (the page itself has every row)
TOP = 25

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1100px;
       padding: 1em 1.5em; color: #1f2328; }
h1 { font-size: 1.4em; overflow-wrap: anywhere; }
h2 { font-size: 1.15em; border-bottom: 1px solid #d0d7de; padding-bottom: .2em;
     margin-top: 1.8em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12.5px; margin: .5em 0; }
th, td { border: 1px solid #d0d7de; padding: 3px 7px; text-align: left;
         vertical-align: top; white-space: pre-wrap; }
th { background: #f6f8fa; cursor: pointer; }
th[aria-sort=descending]::after { content: " ▼"; } th[aria-sort=ascending]::after { content: " ▲"; }
input.filter { margin: .3em 0; padding: 2px 6px; width: 18em; }
button.more { margin: .2em 0 .8em; }
td { max-width: 42em; overflow-wrap: anywhere; }
.chart { width: 100%; min-height: 200px; }
.status-ok { color: #1a7f37; } .status-bad { color: #cf222e; }
ul.problems li { color: #9a6700; }
code { background: #f6f8fa; padding: 1px 4px; border-radius: 4px; overflow-wrap: anywhere; }
nav a { margin-right: 1em; }
"""


def text(value: object) -> str:
    return html.escape(visible(str(value)), quote=True)


#: sorts a table by a header's column (a click; again: the other way; empty cells last
#: either way) and filters its rows by the text typed above it; figures sort by value
#: (`1.2 ms` < `3 s`, `2 KiB` < `1 MiB`). A table shows its first SHOWN rows (sorted and
#: filtered), a button the rest: a DDP run's 5,001-row table made a page 132,000 px tall.
TABLE_JS = """
(function () {
  var SHOWN = 100;
  var scale = {ns: 1e-9, 'µs': 1e-6, ms: 1e-3, s: 1, B: 1, KiB: 1024, MiB: 1048576,
               GiB: 1073741824, '%': 0.01, x: 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15};
  var figure = new RegExp(/^\\s*([+-]?[\\d,]*\\.?\\d+(?:e[+-]?\\d+)?)\\s*/.source +
                          /(ns|µs|ms|s|B|KiB|MiB|GiB|%|x|k|M|G|T|P)?\\b/.source);
  function key(text) {
    if (!text.trim()) { return [2, '']; }
    var m = figure.exec(text);
    if (!m) { return [1, text.toLowerCase()]; }
    return [0, parseFloat(m[1].replace(/,/g, '')) * (scale[m[2]] || 1)];
  }
  function compare(a, b) {
    if (a[0] !== b[0]) { return a[0] - b[0]; }
    return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var body = table.tBodies[0];
    var filter = table.parentNode.previousElementSibling;
    var more = document.createElement('button');
    var whole = false;
    function refresh() {
      var wanted = filter.value.toLowerCase();
      var matched = 0;
      Array.prototype.forEach.call(body.rows, function (row) {
        var match = wanted === '' || row.textContent.toLowerCase().indexOf(wanted) >= 0;
        matched += match ? 1 : 0;
        row.hidden = !match || (!whole && matched > SHOWN);
      });
      more.hidden = whole || matched <= SHOWN;
      more.textContent = 'show the other ' + (matched - SHOWN).toLocaleString() + ' rows';
    }
    more.className = 'more';
    more.addEventListener('click', function () { whole = true; refresh(); });
    table.parentNode.parentNode.insertBefore(more, table.parentNode.nextSibling);
    table.querySelectorAll('thead th').forEach(function (th, column) {
      th.addEventListener('click', function () {
        var down = th.getAttribute('aria-sort') !== 'descending';
        var rows = Array.prototype.slice.call(body.rows).map(function (row) {
          return [key(row.cells[column].textContent), row];
        });
        rows.sort(function (a, b) {
          var empty = (a[0][0] === 2) - (b[0][0] === 2);
          return empty || compare(a[0], b[0]) * (down ? -1 : 1);
        });
        var sorted = document.createDocumentFragment();
        rows.forEach(function (pair) { sorted.appendChild(pair[1]); });
        body.appendChild(sorted);
        table.querySelectorAll('thead th').forEach(function (other) {
          other.removeAttribute('aria-sort');
        });
        th.setAttribute('aria-sort', down ? 'descending' : 'ascending');
        refresh();
      });
    });
    filter.addEventListener('input', refresh);
    refresh();
  });
})();
"""


def cell(value: object) -> str:
    return "" if value is None or (isinstance(value, float) and value != value) \
        else text(value)


def table_html(frame: pd.DataFrame, total: int | None = None) -> str:
    """Every row, sortable by any column and filtered by the box above it."""
    if frame.empty:
        return ""
    note = ""
    if total is not None and total > len(frame):
        note = f"<p>Top {len(frame)} of {total} rows.</p>"
    head = "".join(f"<th>{text(str(column).replace(chr(10), ' '))}</th>"
                   for column in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(value)}</td>" for value in row) + "</tr>\n"
                   for row in frame.itertuples(index=False, name=None))
    return (f'<input class="filter" type="search" placeholder="filter these {len(frame):,} '
            f'rows" aria-label="filter rows"><div class="scroll"><table class="sortable">'
            f"<thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table></div>{note}")


#: plotly.js's partial bundle of the traces the charts draw (scatter and bar), gzipped:
#: 395 KB where the plotly package's full bundle is 4.8 MB (vendor/README.md)
PLOTLY_JS = Path(__file__).parent / "vendor" / "plotly-basic.min.js.gz"


def plotly_js() -> str | None:
    """plotly.js gzipped, in base64, inlined in the page (the browser unpacks it); None
    where the file is missing (a broken install: the page says so and keeps its
    tables)."""
    return base64.b64encode(PLOTLY_JS.read_bytes()).decode() if PLOTLY_JS.is_file() else None


#: unpacks plotly.js (the browser's DecompressionStream: Chrome 80, Firefox 113, Safari
#: 16.4 on), runs it, then draws every figure
LOAD_JS = """(function () {
  var figures = JSON.parse(document.getElementById('chart-data').textContent);
  if (typeof DecompressionStream === 'undefined') {
    document.getElementById('charts-note').textContent =
      'The charts need a browser that unpacks gzip (Chrome 80, Firefox 113, Safari 16.4 ' +
      'or later); the tables below hold the same numbers.';
    return;
  }
  var packed = atob(document.getElementById('plotly-js').textContent);
  var bytes = new Uint8Array(packed.length);
  for (var i = 0; i < packed.length; i++) { bytes[i] = packed.charCodeAt(i); }
  new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip')))
    .text().then(function (code) {
      var script = document.createElement('script');
      script.textContent = code;
      document.head.appendChild(script);
      figures.forEach(DRAW);
    });
})();"""


#: draws a figure; a click on a bar of a flame graph (`meta.widen`) widens the chart to it
DRAW_JS = """function (figure, index) {
  Plotly.newPlot('chart-' + index, figure.data, figure.layout,
                 // names are text, never LaTeX: a region named "$x$" is shown as it is
                 {responsive: true, displaylogo: false, typesetMath: false})
    .then(function (chart) {
      if (!(figure.layout.meta && figure.layout.meta.widen)) { return; }
      chart.on('plotly_click', function (event) {
        var bar = event.points[0].customdata;
        Plotly.relayout(chart, {'xaxis.range': [bar[0], bar[1]]});
      });
    });
}"""


def _charts(report: Report, script: str | None) -> str:
    figures = charts.all_charts(report)
    if not figures:
        return ""
    if script is None:
        return (f"<p>The charts need plotly.js ({text(PLOTLY_JS)}), missing from this "
                "install (reinstall profile-all); the tables below hold the same "
                "numbers.</p>")
    divs = "".join(f'<div class="chart" id="chart-{index}" title="{text(title)}"></div>'
                   for index, (title, _figure) in enumerate(figures))
    data = orjson.dumps([visible_all(figure) for _title, figure in figures],
                        option=orjson.OPT_SERIALIZE_NUMPY).decode()
    data = data.replace("<", "\\u003c")  # nothing in the data can close the element
    return (f'<p id="charts-note"></p>{divs}'
            f'<script type="application/gzip;base64" id="plotly-js">{script}</script>'
            f'<script type="application/json" id="chart-data">{data}</script>'
            f"<script>{LOAD_JS.replace('DRAW', DRAW_JS)}</script>")


def section_html(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{text(title)}</h2>{body}</section>' if body else ""


def body(report: Report, with_charts: bool = False,
         shown: list[sections.Shown] | None = None, top: int | None = None) -> str:
    """The page's content, without <html> and <head>: every row of every table (`top`:
    the first rows of the long ones); the charts with plotly.js inlined `with_charts`
    (a Report in a notebook, render.notebook, shows the rest: no 0.5 MB of script in a cell)."""
    meta = report.meta
    status = meta.status or "?"
    css_class = "status-ok" if status == "complete" else "status-bad"
    steps = steps_line(report)
    parts = [f"<h1>profile-all: <code>{text(meta.target.get('command', ''))}</code></h1>",
             f'<p>Status: <b class="{css_class}">{text(status)}</b>, exit code '
             f"{text(meta.exit_code)}"
             f"{text('; ' + steps) if steps else ''}. "
             "Run directory: "
             f"<code>{text(report.run_dir or '(not saved)')}</code></p>"]
    found = problems(report)
    if found:
        items = "".join(f"<li>{text(line)}</li>" for line in found)
        parts.append(section_html("problems", "Problems", f'<ul class="problems">{items}</ul>'))
    rendered = []
    for section, table, left_out in shown if shown is not None else sections.shown(report,
                                                                                   top):
        note = f"<p>{text(section.note)}</p>" if section.note else ""
        rendered.append(section_html(section.anchor, section.title,
                                 note + table_html(table, len(table) + left_out)))
    if rendered and 'id="findings"' in rendered[0]:  # the answer first, before the charts
        parts.insert(2, rendered.pop(0))
    if with_charts:
        parts.append(section_html("plots", "Charts", _charts(report, plotly_js())))
    parts += rendered
    parts.append(f"<script>{TABLE_JS}</script>")
    return "\n".join(part for part in parts if part)


def render(report: Report, shown: list[sections.Shown] | None = None) -> str:
    target = report.meta.target
    attached = f"attach {target.get('pid')}: " if target.get("kind") == "process" else ""
    title = text(f"profile-all {attached}{target.get('command', '')}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title><style>{CSS}</style></head>\n"
            f"<body>\n{body(report, with_charts=True, shown=shown)}\n</body></html>\n")
