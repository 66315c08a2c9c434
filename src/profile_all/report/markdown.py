"""summary.md: the report as a markdown page."""

from __future__ import annotations

import html

import pandas as pd

from profile_all.report import tables
from profile_all.report.report import Report

TOP = 25
OVERHEAD_NOTE = ("Overhead is each pass's time over the clean timing pass's: the median step "
                 "time where the target marks steps, else the whole run's, with a 95% interval "
                 "from per-step times or the timing pass's repeats (--repeat); an interval "
                 "that holds 1 is within noise.")


def _text(value: object) -> str:
    """Text from the run (names, errors, commands) made inert: Markdown previews render
    raw HTML, so `<`, `>` and `&` are escaped; one line."""
    return html.escape(str(value), quote=False).replace("\n", " ")


def _code(value: object) -> str:
    """A code span, or the escaped text where a code span could not hold it."""
    text = str(value).replace("\n", " ")
    return f"`{text}`" if not set(text) & set("`<>&") else _text(text)


def _table(frame: pd.DataFrame, left_out: int = 0) -> str:
    escaped = frame.map(lambda cell: _text(cell).replace("|", "\\|"))
    escaped.columns = [_text(column) for column in frame.columns]
    note = f"\n\n{left_out:,} more rows not shown." if left_out else ""
    return escaped.to_markdown(index=False) + note


def render(report: Report, top: int = TOP) -> str:
    """The report as markdown; long tables cut to `top` rows, with a count of the rest."""
    meta = report.meta
    target = meta.get("target", {})
    out = [f"# profile-all: {_code(target.get('command', ''))}", "",
           f"Status: **{_text(meta.get('status'))}**, exit code {meta.get('exit_code')}.", ""]
    problems = tables.problems(report)
    if problems:
        out += ["## Problems", "", *[f"- {_text(line)}" for line in problems], ""]
    out += ["## Passes", "",
            OVERHEAD_NOTE, "",
            _table(tables.passes_table(report)), ""]
    for title, table in (("Model latency (warm-up excluded)", tables.latency_table(report)),
                         ("Batch-size search", tables.batches_table(report)),
                         ("FLOP counters side by side", tables.counters_table(report))):
        if not table.empty:
            out += [f"## {title}", "", _table(table), ""]
    for title, table in (("Modules (FLOPs per counter)", tables.modules_table(report, None)),
                         ("Run, steps and regions", tables.summary_table(report)),
                         ("Across ranks (total time per rank)", tables.ranks_table(report)),
                         ("Functions by self time (cProfile)",
                          tables.functions_table(report, None)),
                         ("Operators (torch.profiler)", tables.operators_table(report, None)),
                         ("Kernels by device time", tables.kernels_table(report, None)),
                         ("Device copies and fills", tables.transfers_table(report, None)),
                         ("CUDA API calls by host time", tables.api_table(report, None)),
                         ("Line-by-line memory", tables.lines_table(report))):
        if not table.empty:
            out += [f"## {title}", "", _table(*tables.cut(table, top)), ""]
    commands = tables.open_commands(report)
    if commands:
        out += ["## Native files", "",
                *[f"- {_text(backend)}: {_code(path)}: {_code(command)}"
                  for backend, path, command in commands],
                ""]
    env = meta.get("environment", {})
    out += ["## Environment", "",
            _text(f"- Python {env.get('python')} on {env.get('os')}"),
            _text(f"- CPU: {env.get('cpu')} ({env.get('cpu_count')} logical cores)"),
            _text(f"- torch {env.get('torch') or (env.get('packages') or {}).get('torch')}; "
                  f"GPUs: {', '.join(map(str, env.get('gpus') or [])) or 'none'}"), ""]
    return "\n".join(out)
