"""The report's tables as display strings, shared by the markdown and terminal renderers."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from profile_all.report.report import Report
from profile_all.rows import UNATTRIBUTED

_TIME_METRICS = ("wall_time", "gpu_time", "cpu_time")
_SHOWN_STATS = {"wall_time": ("total", "mean", "median", "std", "p90"),
                "gpu_time": ("total", "mean", "median", "std", "p90"),
                "cpu_time": ("total",)}


def fmt_seconds(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def fmt_count(value: Any) -> str:
    return "" if value is None or pd.isna(value) else f"{int(value):,}"


def region_paths(parents: Any, names: Any) -> list[str]:
    """`parent/name` for a region inside another, `name` for the rest."""
    return [f"{parent}/{name}" if parent else name
            for parent, name in zip(parents, names, strict=True)]


def fmt_change(value: Any) -> str:
    return "" if value is None or pd.isna(value) else f"{value:+.1%}"


def summary_table(report: Report) -> pd.DataFrame:
    summary = report.summary()
    if summary.empty:
        return pd.DataFrame()
    shown = pd.DataFrame({"scope": summary["scope"]})
    shown["name"] = region_paths(summary["parent"], summary["name"])
    calls = [c for c in summary.columns if c.endswith(".calls.total")]
    if calls:
        shown["calls"] = summary[calls[0]].map(fmt_count)
    first_backend = summary.columns[3].split(".")[0] if len(summary.columns) > 3 else ""
    for column in summary.columns[3:]:
        backend, metric, stat = column.split(".")
        # the full spread for the first backend; total and mean for the others
        if metric not in _TIME_METRICS:
            continue
        full = backend == first_backend or metric == "cpu_time"
        if stat in (_SHOWN_STATS[metric] if full else ("total", "mean")):
            label = f"{stat}\n{backend}" if metric == "wall_time" else f"{metric} {stat}\n{backend}"
            shown[label] = summary[column].map(fmt_seconds)
    for column, label in ((".peak_rss.max", "peak RSS"), (".rss_increase.max", "RSS increase"),
                          (".gpu_mem_peak.max", "GPU mem peak")):
        found = [c for c in summary.columns if c.endswith(column)]
        if found:
            shown[label] = summary[found[0]].map(fmt_bytes)
    measured = len(shown.columns) > (3 if calls else 2)
    return shown if measured else pd.DataFrame()


def fmt_bytes(value: Any) -> str:
    if value is None or pd.isna(value):
        return ""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


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
        "min": ranks["min"].map(fmt_seconds),
        "median": ranks["median"].map(fmt_seconds),
        "max": ranks["max"].map(fmt_seconds),
        "slowest rank": ranks["slowest_rank"].astype(str),
        "spread": ranks["spread"].map(lambda v: "" if pd.isna(v) else f"{v:.1%}"),
    })


def passes_table(report: Report) -> pd.DataFrame:
    passes = report.passes()
    shown = pd.DataFrame({
        "pass": passes["pass"].astype(str),
        "backends": passes["backends"],
        "status": passes["status"],
        "exit code": passes["exit_code"].astype(str),
        "steps": passes["steps"].map(fmt_count),
        "target time": passes["target_wall_time"].map(fmt_seconds),
        "overhead": [fmt_overhead(*values) for values in zip(
            passes["overhead"], passes["overhead_low"], passes["overhead_high"],
            passes["overhead_verdict"], strict=True)],
        "error": passes["error"],
    })
    return shown


def fmt_overhead(point: Any, low: Any, high: Any, verdict: Any) -> str:
    """`1.32x (1.25-1.40)`; an interval holding 1 is `within noise`, and one below 1 is
    never shown as a speed-up."""
    if verdict == "reference":
        return "reference"
    if point is None or pd.isna(point):
        return ""
    if low is None or pd.isna(low):
        return f"{point:.2f}x (one sample each: untested)"
    interval = f"{low:.2f}-{high:.2f}"
    if verdict == "above noise":
        return f"{point:.2f}x ({interval})"
    if verdict == "within noise":
        return f"within noise ({interval})"
    return f"noise, not a speed-up ({point:.2f}x, {interval})"


def fmt_giga(value: Any) -> str:
    return "" if value is None or pd.isna(value) else f"{value / 1e9:.3g}"


Column = tuple[str, str, Callable[[Any], str]]  # (metric in the view, label, formatter)


def _shown(view: pd.DataFrame, name_label: str, columns: list[Column]) -> pd.DataFrame:
    """A view's name column and those of `columns` it has, formatted for display."""
    shown = pd.DataFrame({name_label: view["name"]})
    for metric, label, fmt in columns:
        if metric in view.columns:
            shown[label] = view[metric].map(fmt)
    return shown


def functions_table(report: Report, top: int | None) -> pd.DataFrame:
    return _shown(report.functions(top), "function", [
        ("calls", "calls", fmt_count), ("self_time", "self", fmt_seconds),
        ("cumulative_time", "cumulative", fmt_seconds)])


def operators_table(report: Report, top: int | None) -> pd.DataFrame:
    return _shown(report.operators(top), "operator", [
        ("calls", "calls", fmt_count), ("cpu_time", "CPU total", fmt_seconds),
        ("self_time", "CPU self", fmt_seconds), ("gpu_time", "device total", fmt_seconds),
        ("self_gpu_time", "device self", fmt_seconds), ("flops", "GFLOP", fmt_giga)])


def lines_table(report: Report) -> pd.DataFrame:
    lines = report.lines()
    if lines.empty:
        return pd.DataFrame()
    return pd.DataFrame({"function": lines["function"], "line": lines["line"],
                         "calls": lines["calls"].map(fmt_count),
                         "increment": lines["rss_increment"].map(fmt_bytes),
                         "RSS": lines["rss"].map(fmt_bytes)})


def kernels_table(report: Report, top: int | None) -> pd.DataFrame:
    return _shown(report.kernels(top), "kernel", [
        ("calls", "calls", fmt_count), ("gpu_time", "device time", fmt_seconds)])


def transfers_table(report: Report, top: int | None) -> pd.DataFrame:
    return _shown(report.transfers(top), "copy or fill", [
        ("calls", "calls", fmt_count), ("gpu_time", "device time", fmt_seconds),
        ("bytes", "bytes", fmt_bytes), ("bandwidth", "bandwidth", fmt_bandwidth)])


def api_table(report: Report, top: int | None) -> pd.DataFrame:
    return _shown(report.api_calls(top), "CUDA API call", [
        ("calls", "calls", fmt_count), ("wall_time", "host time", fmt_seconds)])


def fmt_bandwidth(value: Any) -> str:
    return "" if value is None or pd.isna(value) else f"{value / 1e9:,.4g} GB/s"


def _fmt_by_unit(value: Any, unit: str) -> str:
    if unit == "s":
        return fmt_seconds(value)
    if unit == "FLOP/s":
        return f"{value / 1e9:.3g} GFLOP/s"
    if unit == "ratio":
        return f"{value:.1%}"
    if unit == "1/s":
        return f"{value:,.1f} /s"
    return fmt_count(value)


def latency_table(report: Report) -> pd.DataFrame:
    """A row per measure; a value column, or one per timing pass when it was repeated."""
    latency = report.latency()
    if latency.empty:
        return pd.DataFrame()
    latency = latency.assign(
        text=[_fmt_by_unit(v, u) for v, u in zip(latency["value"], latency["unit"],
                                                    strict=True)],
        measure=[m if s in ("total", "value") else f"{m} {s}"
                 for m, s in zip(latency["metric"], latency["stat"], strict=True)])
    timing = sorted(p for p in latency["pass"].unique() if p > 0)
    latency["column"] = latency["pass"].map(
        lambda p: "value" if len(timing) < 2 else ("all passes" if p == 0 else f"pass {p}"))
    table = latency.pivot_table(index=["name", "measure"], columns="column", values="text",
                                aggfunc="first", sort=False).fillna("")
    table.columns.name = None
    return table.reset_index().rename(columns={"name": "region"})


def counters_table(report: Report) -> pd.DataFrame:
    """Per root module and counter, per call: exact FLOPs (no rounding: the causes are
    sizes in FLOPs), the calls each counter saw, and why it differs from flop-counter."""
    counters = report.counters()
    if counters.empty:
        return pd.DataFrame()
    shown = pd.DataFrame({"module": counters["module"], "counter": counters["counter"],
                          "calls": counters["calls"].map(fmt_count)})
    if (counters["backward"] != "").any():  # training: the backward apart, and how it was had
        shown["calls"] += [f" + {fmt_count(b)} backward" if b > 0 else ""
                           for b in counters["backward_calls"].fillna(0)]
        shown["forward FLOP/call"] = counters["forward_flops"].map(fmt_count)
        shown["backward FLOP/call"] = [f"{fmt_count(flops)} ({how})" for flops, how in zip(
            counters["backward_flops"], counters["backward"], strict=True)]
    shown["FLOP/call"] = counters["flops"].map(fmt_count)
    shown["params"] = counters["params"].map(fmt_count)
    shown["vs flop-counter"] = counters["vs_reference"].map(fmt_change)
    shown["why"] = counters["cause"]
    return shown


def modules_table(report: Report, top: int | None) -> pd.DataFrame:
    """Per module, each counter's forward FLOPs per call of the module (and flop-counter's
    backward per backward call), with the calls it saw in brackets."""
    modules = report.modules()
    if modules.empty:
        return pd.DataFrame()
    counted = modules[[c for c in modules.columns[3:] if not c.endswith(" calls")]]
    modules = modules[counted.notna().any(axis=1)]  # a module no counter saw called
    shown = pd.DataFrame({"module": modules["module"], "type": modules["type"].fillna(""),
                          "params": modules["params"].map(fmt_count)})
    for column in modules.columns[3:]:
        if not column.endswith(" calls"):
            calls = modules[f"{column} calls"]
            shown[f"{column} FLOP/call (calls)"] = [
                "" if pd.isna(n) else f"{fmt_count(flops)} ({fmt_count(n)})"
                for flops, n in zip(modules[column], calls, strict=True)]
    return shown.head(top) if top else shown


def batches_table(report: Report) -> pd.DataFrame:
    batches = report.batches()
    if batches.empty:
        return pd.DataFrame()
    return pd.DataFrame({
        "batch size": batches["batch_size"].astype(str),
        "latency": batches["latency"].map(fmt_seconds),
        "throughput": batches["throughput"].map(lambda v: f"{v:,.1f} /s"),
        "peak memory": batches["peak_memory"].map(fmt_bytes),
    })


def open_commands(report: Report) -> list[tuple[str, str, str]]:
    """(backend, native file, the command that opens it) for every native file of the run."""
    run_dir = str(report.run_dir) if report.run_dir else "RUN"
    # the command is text from meta.json: a placeholder replaced, never str.format
    return [(a["backend"], a["path"], a["open_command"].replace("{run_dir}", run_dir))
            for a in report.meta.get("artifacts", [])]


def problems(report: Report) -> list[str]:
    """Skipped backends, failed passes and failing backends, one sentence each."""
    lines = [f"backend {name} skipped: {why}"
             for name, why in report.meta.get("skipped_backends", {}).items()]
    for summary in report.meta.get("passes", []):
        if summary["status"] == "partial":
            lines.append(f"pass {summary['pass']} ({'+'.join(summary['backends'])}) partial: "
                         "the target ended well, but a backend lost part of what it measured "
                         "(below)")
        elif summary["status"] != "ok":
            kept = "rows recovered from its journal" if summary.get("recovered") else \
                "rows measured until then are kept"
            lines.append(f"pass {summary['pass']} ({'+'.join(summary['backends'])}) "
                         f"{summary['status']}: {summary['error']} ({kept})")
            if summary.get("ranks"):
                lines.append(f"pass {summary['pass']} ranks: " + ", ".join(
                    f"rank {r['rank']} {r['status']} (exit {r['exit_code']})"
                    for r in summary["ranks"]))
        if summary.get("left_running"):
            lines.append(f"pass {summary['pass']}: the target left "
                         f"{len(summary['left_running'])} process(es) running in its group, "
                         f"ended at the end of the pass: {'; '.join(summary['left_running'])}")
        lines += [f"backend {f['backend']}: {f['error']}" if f["phase"] == "note" else
                  f"backend {f['backend']} lost data: {f['error']}" if f["phase"] == "lost"
                  else f"backend {f['backend']} failed in {f['phase']}: {f['error']}"
                  for f in summary.get("backend_failures", [])]
    model = report.meta.get("model", {})
    if model.get("unstable"):
        lines.append(f"unstable measurement: the latency's coefficient of variation is "
                     f"{model['cv']:.0%} (over 10%): a busy machine, frequency scaling, or too "
                     f"few iterations")
    if model:
        from profile_all.report.counters import zero_counts

        lines += zero_counts(report.frame)
    lines += attribution_warnings(report)
    lines += report.meta.get("doubts", [])
    if report.meta.get("passes_not_run"):
        lines.append("passes not run: " + ", ".join(map(str, report.meta["passes_not_run"])))
    return lines


#: below this share of device time reaching an operator, the operators' device times are
#: doubtful enough to say so
ATTRIBUTED_ENOUGH = 0.95


def attribution_warnings(report: Report) -> list[str]:
    """Traces whose device time mostly did not reach an operator (kernels launched outside
    any operator, or launches missing from the trace): their operator times are partial."""
    frame = report.frame
    shares = frame[(frame["metric"] == "attributed_share") & (frame["scope"] == "run")]
    return [f"pass {entry['pass']} rank {entry['rank']}: only {entry['value']:.1%} of the "
            f"device time reached an operator (the rest is the {UNATTRIBUTED} row): per-"
            "operator device times are partial" for _, entry in shares.iterrows()
            if entry["value"] < ATTRIBUTED_ENOUGH]


def _fmt_measure(metric: str, value: Any) -> str:
    if value is None or pd.isna(value):
        return ""
    if metric.startswith(("wall_time", "gpu_time", "latency", "self_time")):
        return fmt_seconds(value)
    if metric.startswith("flops"):
        return f"{fmt_count(value)} FLOP"
    return fmt_bytes(value)


def compare_table(table: pd.DataFrame) -> pd.DataFrame:
    """`Report.compare`'s table for display: the change and its 95% interval in percent."""
    return pd.DataFrame({
        "kind": table["kind"],
        "name": region_paths(table["parent"], table["name"]),
        "measure": table["backend"] + " " + table["metric"],
        "A": [_fmt_measure(m, v) for m, v in zip(table["metric"], table["a"], strict=True)],
        "B": [_fmt_measure(m, v) for m, v in zip(table["metric"], table["b"], strict=True)],
        "change": table["change"].map(fmt_change),
        "95% interval": [f"{fmt_change(low)} .. {fmt_change(high)}" if not pd.isna(low) else ""
                         for low, high in zip(table["ci_low"], table["ci_high"], strict=True)],
        "verdict": table["verdict"],
        "rests on": table["basis"].fillna(""),
    })


def cut(frame: pd.DataFrame, top: int) -> tuple[pd.DataFrame, int]:
    """The first `top` rows, and how many were left out."""
    return frame.head(top), max(0, len(frame) - top)
