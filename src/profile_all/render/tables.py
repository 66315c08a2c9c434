"""The report's views as display tables (text cells), one function a view: what every
renderer (terminal, markdown, HTML) shows, in the order `sections.SECTIONS` gives."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pandas as pd

from profile_all import units as fmt
from profile_all.rows import region_paths
from profile_all.safe_text import utf8

if TYPE_CHECKING:
    from profile_all.report.report import Report

#: the time metrics of the summary; the first backend's with its full spread
_TIME_METRICS = ("wall_time", "gpu_time", "gpu_span", "cpu_time")
_SHOWN_STATS = {"wall_time": ("total", "mean", "median", "std", "p90"),
                "gpu_time": ("total", "mean", "median", "std", "p90"),
                "gpu_span": ("total", "mean"), "cpu_time": ("total",)}
#: what a time column's header says before its statistic (`CPU total`, `mean`)
_TIME_LABELS = {"wall_time": "", "gpu_time": "GPU ", "gpu_span": "device span ",
                "cpu_time": "CPU "}
#: memory columns of the summary: (metric, stat, label)
_MEMORY = (("peak_rss", "max", "peak RSS"), ("rss_increase", "max", "RSS increase"),
           ("gpu_mem_peak", "max", "GPU mem peak"))


def summary_table(report: Report) -> pd.DataFrame:
    summary = report.summary_by_measure()
    if summary.empty:
        return pd.DataFrame()
    shown = pd.DataFrame({"scope": summary["scope"]})
    shown["name"] = region_paths(summary["parent"], summary["name"])
    measures = [column for column in summary.columns if isinstance(column, tuple)]
    calls = [column for column in measures if column[1:] == ("calls", "total")]
    if calls:  # the first backend's that counted the row (ProfilerStep: the trace's)
        shown["calls"] = summary[calls].bfill(axis=1).iloc[:, 0].map(fmt.count)
    for label, column in _time_columns(measures):
        shown[label] = summary[column].map(fmt.seconds)
    for metric, stat, label in _MEMORY:
        found = [column for column in measures if column[1:] == (metric, stat)]
        if found:
            shown[label] = summary[found[0]].map(fmt.size)
    measured = len(shown.columns) > (3 if calls else 2)
    if not measured:
        return pd.DataFrame()
    shown.attrs["rank"] = _kept_first(summary, measures)
    return shown


def _kept_first(summary: pd.DataFrame, measures: list[tuple]) -> list[float]:
    """What a cut keeps: the run and its steps, then the longest regions, in the tree's
    order (the first rows of a tree read down held a Lightning run's 2.5 µs hooks and left
    out a 15.8 ms data fetch)."""
    wall = next((column for column in measures if column[1:] == ("wall_time", "total")), None)
    times = summary[wall].fillna(0.0).tolist() if wall else [0.0] * len(summary)
    return [math.inf if scope in ("run", "step") else value
            for scope, value in zip(summary["scope"], times, strict=True)]


def _time_columns(measures: list[tuple]) -> list[tuple[str, tuple]]:
    """(header, column) of the summary's time measures: every statistic of the first
    backend's wall and device time, the total and mean of the others', CPU time's total;
    the backend named only where two time rows."""
    first_backend = measures[0][0] if measures else ""
    timers = {backend for backend, metric, _stat in measures if metric in _TIME_METRICS}
    shown = []
    for column in measures:
        backend, metric, stat = column
        if metric not in _TIME_METRICS:
            continue
        full = backend == first_backend or metric == "cpu_time"
        if stat in (_SHOWN_STATS[metric] if full else ("total", "mean")):
            label = _TIME_LABELS[metric] + stat
            shown.append((label + (f"\n({backend})" if len(timers) > 1 else ""), column))
    return shown


def findings_table(report: Report) -> pd.DataFrame:
    found = report.findings()
    return pd.DataFrame({"finding": found["finding"], "share": found["share"].map(fmt.share),
                         "evidence": found["evidence"], "try": found["try"]})


def ranks_table(report: Report) -> pd.DataFrame:
    """The cross-rank view: where the slowest rank was, and by how much."""
    ranks = report.ranks()
    if ranks.empty:
        return pd.DataFrame()
    return pd.DataFrame({
        "scope": ranks["scope"],
        "name": region_paths(ranks["parent"], ranks["name"]),
        "measure": ranks["backend"] + " " + ranks["metric"],
        "ranks": ranks["ranks"].astype(str),
        "min": ranks["min"].map(fmt.seconds),
        "median": ranks["median"].map(fmt.seconds),
        "max": ranks["max"].map(fmt.seconds),
        "slowest rank": ranks["slowest_rank"].astype(str),
        "spread": ranks["spread"].map(fmt.share),
    })


def passes_table(report: Report) -> pd.DataFrame:
    """A windowed pass's steps say of how many: `25 of 60` (the timing pass ran 60); a
    model's passes have iterations, not steps (the latency table counts them)."""
    passes = report.passes()
    timed = passes.loc[passes["window"].isna(), "steps"].dropna()
    whole = timed.max() if not timed.empty else float("nan")
    model = report.meta.target.get("kind") == "model"
    return pd.DataFrame({
        "pass": passes["pass"].astype(str),
        "backends": passes["backends"],
        "status": passes["status"],
        "steps": ["" if model else fmt.count(steps) + (
            f" of {fmt.count(whole)}" if window and not pd.isna(window) and not pd.isna(whole)
            else "") for steps, window in zip(passes["steps"], passes["window"], strict=True)],
        "target time": passes["target_wall_time"].map(fmt.seconds),
        "overhead": [fmt.overhead(*values) for values in zip(
            passes["overhead"], passes["overhead_low"], passes["overhead_high"],
            passes["overhead_verdict"], strict=True)],
        "exit code": passes["exit_code"].astype(str),
        "error": passes["error"],
    })


Column = tuple[str, str, Callable[[Any], str]]  # (metric in the view, label, formatter)


def _shown(view: pd.DataFrame, name_label: str, columns: list[Column]) -> pd.DataFrame:
    """A view's name column and those of `columns` it has, formatted for display."""
    shown = pd.DataFrame({name_label: view["name"]})
    for metric, label, formatter in columns:
        if metric in view.columns:
            shown[label] = view[metric].map(formatter)
    return shown


def functions_table(report: Report) -> pd.DataFrame:
    shown = _shown(report.functions(), "function", [
        ("calls", "calls", fmt.count), ("self_time", "self", fmt.seconds),
        ("cumulative_time", "cumulative", fmt.seconds)])
    cwd = report.meta.cwd
    shown["function"] = shown["function"].map(lambda name: fmt.code_path(name, cwd))
    return shown


def sampled_functions_table(report: Report) -> pd.DataFrame:
    view = report.sampled_functions()
    cwd = report.meta.cwd
    shown = pd.DataFrame({"function": view["name"].map(lambda name: fmt.code_path(name, cwd))})
    if (view["process"] != "").any():
        shown["process"] = view["process"].replace("", "target")
    shown["self"] = view["self_time"].map(fmt.seconds)
    shown["±"] = view["self_error"].map(fmt.seconds)
    shown["cumulative"] = view["cumulative_time"].map(fmt.seconds)
    shown["share"] = [fmt.share(value) + (f" ±{error * 100:.1f}" if error == error else "")
                      for value, error in zip(view["share"], view["share_error"], strict=True)]
    shown["samples"] = view["samples"].map(fmt.count)
    return shown


def traced_vs_sampled_table(report: Report) -> pd.DataFrame:
    view = report.traced_vs_sampled()
    if view.empty:
        return pd.DataFrame()
    cwd = report.meta.cwd
    traced, sampled = view["traced_by"].iloc[0], view["sampled_by"].iloc[0]
    return pd.DataFrame({
        "function": view["name"].map(lambda name: fmt.code_path(name, cwd)),
        f"{traced} share": view["traced_share"].map(fmt.share),
        f"{sampled} share": [f"{fmt.share(value)} ±{error * 100:.1f}" for value, error in zip(
            view["sampled_share"], view["sampled_share_error"], strict=True)],
        "difference": view["difference"].map(lambda value: f"{value * 100:+.1f} pts"),
        f"{traced} cumulative": view["traced_time"].map(fmt.seconds),
        f"{sampled} cumulative": view["sampled_time"].map(fmt.seconds)})


def threads_table(report: Report) -> pd.DataFrame:
    view = report.threads()
    if view.empty:
        return pd.DataFrame()
    shown = pd.DataFrame({"thread": view["thread"], "samples": view["samples"].map(fmt.count)})
    for metric, label in (("active_time", "on the CPU"), ("sampled_time", "sampled"),
                          ("idle_time", "idle")):
        if view[metric].notna().any():
            shown[label] = view[metric].map(fmt.seconds)
    return shown


def operators_table(report: Report) -> pd.DataFrame:
    return _shown(report.operators(), "operator", [
        ("calls", "calls", fmt.count), ("cpu_time", "CPU total", fmt.seconds),
        ("self_time", "CPU self", fmt.seconds), ("gpu_time", "device total", fmt.seconds),
        ("self_gpu_time", "device self", fmt.seconds), ("flops", "FLOP", fmt.si),
        ("tc_eligible", "TC eligible", lambda v: "yes" if v else "no"),
        ("tc_self_share", "TC self %", fmt.share), ("tc_total_share", "TC total %", fmt.share)])


def transfers_table(report: Report) -> pd.DataFrame:
    return _shown(report.transfers(), "copy or fill", [
        ("calls", "calls", fmt.count), ("gpu_time", "device time", fmt.seconds),
        ("bytes", "bytes", fmt.size), ("bandwidth", "bandwidth", fmt.bandwidth)])


def api_table(report: Report) -> pd.DataFrame:
    return _shown(report.api_calls(), "CUDA API call", [
        ("calls", "calls", fmt.count), ("wall_time", "host time", fmt.seconds)])


def lines_table(report: Report) -> pd.DataFrame:
    lines = report.lines()
    if lines.empty:
        return pd.DataFrame()
    if "named" in lines.columns:  # the lines of functions asked for by name first
        lines = lines.sort_values("named", ascending=False, kind="stable", na_position="last")
    shown = pd.DataFrame({"function": lines["function"], "line": lines["line"]})
    shown.attrs["kept"] = int(lines["named"].fillna(0).sum()) if "named" in lines else 0
    for metric, label, formatter in (
            ("calls", "calls", fmt.count), ("rss_increment", "increment", fmt.size),
            ("rss", "RSS", fmt.size), ("self_time", "self (sampled)", fmt.seconds),
            ("cumulative_time", "cumulative (sampled)", fmt.seconds)):
        if metric in lines.columns:
            shown[label] = lines[metric].map(formatter)
    return shown


def open_commands(report: Report) -> list[tuple[str, str, str]]:
    """(backend, native file, the command that opens it) for every native file of the run."""
    run_dir = utf8(str(report.run_dir)) if report.run_dir else "RUN"  # bytes as escapes
    # the command is text from meta.json: a placeholder replaced, never str.format
    return [(a.backend, a.path, a.open_command.replace("{run_dir}", run_dir))
            for a in report.meta.artifacts]


def native_files_table(report: Report) -> pd.DataFrame:
    commands = open_commands(report)
    if not commands:
        return pd.DataFrame()
    return pd.DataFrame(commands, columns=["backend", "native file", "open with"])


def skipped_table(report: Report) -> pd.DataFrame:
    skipped = report.meta.skipped_backends
    if not skipped:
        return pd.DataFrame()
    return pd.DataFrame({"backend": list(skipped), "why": list(skipped.values())})


def environment_table(report: Report) -> pd.DataFrame:
    env = dict(report.meta.environment)
    packages = env.pop("packages", {}) or {}
    facts = {key: json.dumps(value) if isinstance(value, list | dict) else value
             for key, value in env.items()}
    facts.update({f"package {name}": version for name, version in packages.items() if version})
    return pd.DataFrame({"what": list(facts), "value": [str(v) for v in facts.values()]})


def cut(frame: pd.DataFrame, top: int | None) -> tuple[pd.DataFrame, int]:
    """The first `top` rows (all without `top`; at least the first `frame.attrs["kept"]`,
    rows asked for by name), and how many were left out; where `frame.attrs["rank"]` ranks
    the rows, the `top` ranked highest, in the frame's order."""
    if top is None:
        return frame, 0
    top = max(top, frame.attrs.get("kept", 0))
    rank = frame.attrs.get("rank")
    if rank is not None and len(frame) > top:
        best = sorted(sorted(range(len(frame)), key=lambda at: -rank[at])[:top])
        return frame.iloc[best], len(frame) - top
    return frame.head(top), max(0, len(frame) - top)


def compilation_table(report: Report) -> pd.DataFrame:
    view = report.compilation()
    if view.empty:
        return view
    cwd = report.meta.cwd
    return pd.DataFrame({
        "event": view["event"],
        "where": view["where"].map(lambda where: fmt.code_path(where, cwd)),
        "time": view["seconds"].map(fmt.seconds),
        "times": view["count"].map(fmt.count),
        "reason": view["reason"].map(lambda text: text.splitlines()[0] if text else "")})
