"""summary.md: the report as a markdown page."""

from __future__ import annotations

import pandas as pd

from profile_all.report import tables
from profile_all.report.report import Report

TOP_FUNCTIONS = 25
TOP_OPERATORS = 25


def _table(frame: pd.DataFrame) -> str:
    escaped = frame.map(lambda cell: str(cell).replace("|", "\\|"))
    escaped.columns = [str(column).replace("\n", " ") for column in frame.columns]
    return escaped.to_markdown(index=False)


def render(report: Report) -> str:
    meta = report.meta
    target = meta.get("target", {})
    out = [f"# profile-all: `{target.get('command', '')}`", "",
           f"Status: **{meta.get('status')}**, exit code {meta.get('exit_code')}.", ""]
    problems = tables.problems(report)
    if problems:
        out += ["## Problems", "", *[f"- {line}" for line in problems], ""]
    out += ["## Passes", "",
            "Overhead is each pass's target time over the clean timing pass's.", "",
            _table(tables.passes_table(report)), ""]
    for title, table in (("Model latency (warm-up excluded)", tables.latency_table(report)),
                         ("Batch-size search", tables.batches_table(report)),
                         ("FLOP counters side by side", tables.counters_table(report)),
                         ("Modules (FLOPs per counter)", tables.modules_table(report, 40))):
        if not table.empty:
            out += [f"## {title}", "", _table(table), ""]
    summary = tables.summary_table(report)
    if not summary.empty:
        out += ["## Run, steps and regions", "", _table(summary), ""]
    functions = tables.functions_table(report, TOP_FUNCTIONS)
    if not functions.empty:
        out += [f"## Top {TOP_FUNCTIONS} functions by self time (cProfile)", "",
                _table(functions), ""]
    operators = tables.operators_table(report, TOP_OPERATORS)
    if not operators.empty:
        out += [f"## Top {TOP_OPERATORS} operators (torch.profiler)", "", _table(operators), ""]
    kernels = tables.kernels_table(report, TOP_OPERATORS)
    if not kernels.empty:
        out += [f"## Top {TOP_OPERATORS} kernels by device time", "", _table(kernels), ""]
    commands = tables.open_commands(report)
    if commands:
        out += ["## Native files", "",
                *[f"- {backend}: `{path}`: `{command}`" for backend, path, command in commands],
                ""]
    env = meta.get("environment", {})
    out += ["## Environment", "",
            f"- Python {env.get('python')} on {env.get('os')}",
            f"- CPU: {env.get('cpu')} ({env.get('cpu_count')} logical cores)",
            f"- torch {env.get('torch') or env.get('packages', {}).get('torch')}; GPUs: "
            f"{', '.join(env.get('gpus', [])) or 'none'}", ""]
    return "\n".join(out)
