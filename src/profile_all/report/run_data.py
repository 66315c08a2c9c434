"""A run's data: one long, tidy DataFrame (`frame`, a row per measured value), `meta` (the
run's record, run_record.RunRecord), the per-call `samples` and the `timeline`.

Every other table is a view of `frame`, computed when asked: `summary()`, `functions()`,
`operators()`, `kernels()`, `memory()`, `lines()`, `passes()`, `compilation()`, `ranks()`,
`sampled_functions()`, `traced_vs_sampled()`, `threads()`,
and for models `latency()`, `batches()`, `counters()`, `modules()`. The analyses over these
views (findings, compare) are the Report's (report.py), which is this and them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from profile_all.report import compilation, sampling
from profile_all.report.frame_views import FrameViews
from profile_all.report.tree_order import tree_order
from profile_all.rows import (
    BENCHMARK,
    DERIVED,
    SAMPLE_COLUMNS,
    TIMELINE_COLUMNS,
    Facts,
)
from profile_all.run_record import RunRecord

_TIMED_SCOPES = ["run", "step", "region"]
_FUNCTION_METRICS = ["calls", "primitive_calls", "self_time", "cumulative_time"]
_LINE_COLUMNS = ["function", "line", "calls", "rss_increment", "rss", "self_time",
                 "cumulative_time", "samples", "named"]


def empty_samples() -> pd.DataFrame:
    return pd.DataFrame(columns=SAMPLE_COLUMNS).astype(
        {"pass": "int64", "rank": "int64", "value": "float64"})


def timeline_frame(entries: list[list[Any]] | None = None) -> pd.DataFrame:
    return pd.DataFrame(entries or [], columns=TIMELINE_COLUMNS).astype(
        {"pass": "int64", "rank": "int64", "start": "float64", "end": "float64",
         "value": "float64"})


class RunData(FrameViews):
    def __init__(self, frame: pd.DataFrame, meta: RunRecord,
                 run_dir: Path | None = None, samples: pd.DataFrame | None = None,
                 timeline: pd.DataFrame | None = None) -> None:
        self.frame = frame
        self.meta = meta
        self.run_dir = run_dir
        #: a row per call of each timed region, step and model iteration (SAMPLE_COLUMNS)
        self.samples = samples if samples is not None else empty_samples()
        #: memory over time and the top-level regions' calls (TIMELINE_COLUMNS)
        self.timeline = timeline if timeline is not None else timeline_frame()
        super().__init__()

    def _stamp(self) -> tuple:
        return (*super()._stamp(), repr(self.meta.backend_facts), self._train)

    @property
    def facts(self) -> dict[str, Facts]:
        """What each backend stated about its rows (meta `backend_facts`): which count
        FLOPs, which time regions; the views use them, never a backend's name."""
        return {name: Facts.from_dict(said)
                for name, said in self.meta.backend_facts.items()}

    @property
    def counting(self) -> Any:
        """The run's FLOP counters, the exact one first (report.counters.Counting)."""
        from profile_all.report.counters import Counting

        return Counting.of(self.facts)

    @property
    def exit_code(self) -> int:
        return self.meta.exit_code

    def summary_by_measure(self) -> pd.DataFrame:
        """A row per run, step and region (scope, name, parent); a column per measure,
        named by the tuple (backend, metric, stat), each the median over passes and ranks."""
        timed = compilation.without_machinery(self.scoped(*_TIMED_SCOPES))
        if timed.empty:
            return pd.DataFrame(columns=["scope", "name", "parent"])
        table = timed.pivot_table(index=["scope", "name", "parent"],
                                  columns=["backend", "metric", "stat"],
                                  values="value", aggfunc="median", sort=False)
        table.columns = list(table.columns)
        table = table.reset_index()
        return table.iloc[tree_order(table, _TIMED_SCOPES)].reset_index(drop=True)

    def summary(self) -> pd.DataFrame:
        """A row per run, step and region; a column per `backend.metric.stat` measured."""
        table = self.summary_by_measure()
        return table.rename(columns=lambda c: ".".join(c) if isinstance(c, tuple) else c)

    def _table(self, scope: str, metrics: list[str], sort_by: str,
               top: int | None) -> pd.DataFrame:
        """A row per name of `scope`, largest `sort_by` first (else the last metric); made
        once per frame (every renderer and finding asks)."""
        table = self.once(f"table:{scope}", lambda: self._whole_table(scope, metrics, sort_by))
        return table.head(top) if top else table

    def _whole_table(self, scope: str, metrics: list[str], sort_by: str) -> pd.DataFrame:
        rows = self.scoped(scope)
        rows = rows[(rows["stat"] == "total")
                    & ~rows["backend"].isin(sampling.sampled_backends(self.facts))]
        rows = compilation.without_machinery(rows)  # compile time, not operators
        if rows.empty:
            return pd.DataFrame(columns=["name", *metrics])
        # summed over passes and ranks within a backend; where two backends measure the
        # same metric of a name (FLOPs by torch-profiler and flop-counter), the larger
        per_backend = rows.groupby(["name", "metric", "backend"], sort=False)["value"].sum()
        table = per_backend.groupby(level=["name", "metric"], sort=False).max().unstack()
        table = table.reindex(columns=[m for m in metrics if m in table.columns])
        if sort_by not in table.columns:
            sort_by = table.columns[-1]
        table = table.sort_values(sort_by, ascending=False).reset_index()
        table.columns.name = None
        return table

    def functions(self, top: int | None = None) -> pd.DataFrame:
        """A row per Python function as a tracer measured it (cProfile), most self time
        first; a sampler's are `sampled_functions`."""
        return self._table("function", _FUNCTION_METRICS, "self_time", top)

    def sampled_functions(self, top: int | None = None) -> pd.DataFrame:
        """A row per function and process a sampling profiler (py-spy) saw: samples, time
        estimated from them with its 95% error, share (report.sampling)."""
        table = self.once("sampled", lambda: sampling.sampled_functions(
            self.scoped("function", "run", "thread"), self.facts))
        return table.head(top) if top else table

    def traced_vs_sampled(self) -> pd.DataFrame:
        """Each function's share of the run as traced (cProfile) and as sampled (py-spy),
        side by side, the largest difference first (report.sampling)."""
        return self.once("traced_vs_sampled",
                          lambda: sampling.traced_vs_sampled(self.scoped("function"),
                                                             self.facts))

    def threads(self) -> pd.DataFrame:
        """A row per thread a sampling profiler saw: samples, time on and off the CPU."""
        return sampling.threads(self.scoped("thread"), self.facts)

    def compilation(self) -> pd.DataFrame:
        """What torch.compile did in the timing pass: compiles, recompiles, graph breaks."""
        return self.once("compilation", lambda: compilation.events(self.meta))

    def kernels(self, top: int | None = None) -> pd.DataFrame:
        """A row per GPU kernel (torch.profiler or nsys), most device time first."""
        return self._table("kernel", ["calls", "gpu_time"], "gpu_time", top)

    def transfers(self, top: int | None = None) -> pd.DataFrame:
        """A row per kind of device copy and fill (memcpy, memset): calls, device time,
        bytes and the bandwidth they achieved (B/s), most device time first."""
        tables = [self._table(scope, ["calls", "gpu_time", "bytes"], "gpu_time", None)
                  .assign(kind=scope) for scope in ("memcpy", "memset")]
        table = pd.concat([t for t in tables if not t.empty] or [tables[0]],
                          ignore_index=True)
        table = table.reindex(columns=["kind", "name", "calls", "gpu_time", "bytes"])
        table["bandwidth"] = table["bytes"] / table["gpu_time"].where(table["gpu_time"] > 0)
        table = table.sort_values("gpu_time", ascending=False, ignore_index=True)
        return table.head(top) if top else table

    def api_calls(self, top: int | None = None) -> pd.DataFrame:
        """A row per CUDA runtime or driver API (cudaLaunchKernel, cudaMemcpyAsync,
        cudaDeviceSynchronize...): calls and host time spent in them, most time first."""
        return self._table("api", ["calls", "wall_time"], "wall_time", top)

    @property
    def _train(self) -> bool:
        return bool(self.meta.model.get("train"))

    def latency(self) -> pd.DataFrame:
        """The model's benchmark: a row per statistic of one iteration's latency (seconds),
        with FPS, iterations, warm-up iterations, the lowest and highest median of the
        timing's blocks, and achieved FLOP/s; `pass` tells repeated timing passes apart
        (0: derived from all of them)."""
        rows = self.scoped("model")
        rows = rows[rows["backend"].isin([BENCHMARK, DERIVED])]
        return rows[["pass", "name", "metric", "stat", "value", "unit"]].reset_index(drop=True)

    def batches(self) -> pd.DataFrame:
        """The batch-size search: a row per batch size tried."""
        rows = self.scoped("batch")
        rows = rows[rows["backend"] == BENCHMARK]
        if rows.empty:
            return pd.DataFrame(columns=["batch_size", "latency", "throughput", "peak_memory"])
        table = rows.pivot_table(index="name", columns="metric", values="value", sort=False)
        table.index = table.index.astype(int)
        table.columns.name = None
        return table.rename_axis("batch_size").sort_index().reset_index()

    def counters(self) -> pd.DataFrame:
        """A row per FLOP counter: FLOPs, MACs, params, its difference from the exact count
        (flop-counter), and the known cause of the difference."""
        from profile_all.report.counters import counters

        return self.once("counters", lambda: counters(self.frame, self.counting, self._train))

    def call_groups(self) -> pd.DataFrame:
        """A row per root module and group of its calls by grad mode and input shapes: calls
        and forward FLOPs per call (the exact counter's; report.call_groups)."""
        from profile_all.report.call_groups import call_groups

        return call_groups(self.frame, self.counting.reference)

    def modules(self) -> pd.DataFrame:
        """A row per module: every counter's FLOPs side by side, and the parameters (the
        exact counter's of the calls the counters table stands for: Report.call_groups())."""
        from profile_all.report.counters import modules

        return self.once("modules", lambda: modules(self.frame, self.counting, self._train))

    def ranks(self) -> pd.DataFrame:
        """Across ranks, per run, step and region and each timer: the min, median and max of
        each rank's total time, the slowest rank, and the spread ((max - min) / median).
        Empty with one rank."""
        columns = ["scope", "name", "parent", "backend", "metric", "ranks", "min", "median",
                   "max", "slowest_rank", "spread"]
        timed = self.scoped(*_TIMED_SCOPES)
        timed = timed[timed["metric"].isin(["wall_time", "gpu_time", "cpu_time"])
                      & (timed["stat"] == "total")]
        if timed["rank"].nunique() < 2:
            return pd.DataFrame(columns=columns)
        keys = ["scope", "name", "parent", "backend", "metric"]
        per_rank = timed.groupby([*keys, "rank"], sort=False)["value"].sum().reset_index()
        grouped = per_rank.groupby(keys, sort=False)
        table = grouped["value"].agg(["count", "min", "median", "max"]).rename(
            columns={"count": "ranks"})
        table["slowest_rank"] = per_rank.loc[grouped["value"].idxmax(), "rank"].to_numpy()
        table["spread"] = (table["max"] - table["min"]) / table["median"]
        table = table.reset_index()
        table["_order"] = table["scope"].map(_TIMED_SCOPES.index)
        return table.sort_values(["_order", "max"], ascending=[True, False])[columns] \
            .reset_index(drop=True)

    def memory(self) -> pd.DataFrame:
        """The memory timeline: a row per sample, its time since the pass's target started
        (s), and the RSS of the process and of its children summed (B)."""
        rows = self.timeline[self.timeline["series"] == "rss"]
        if rows.empty:
            return pd.DataFrame(columns=["pass", "rank", "time", "process", "children"])
        table = rows.rename(columns={"start": "time"}).pivot_table(
            index=["pass", "rank", "time"], columns="name", values="value",
            sort=True).reset_index()
        table.columns.name = None
        return table

    def lines(self) -> pd.DataFrame:
        """Line by line, a row per line of each function, in the order of the source:
        memory (memory --memory-lines: calls, increment, RSS) and time sampled (py-spy's
        hottest functions and --py-spy-lines: self and cumulative time, samples); `named`
        is 1 on the lines of functions asked for by name."""
        rows = self.scoped("line")
        if rows.empty:
            return pd.DataFrame(columns=_LINE_COLUMNS)
        table = rows.pivot_table(index=["parent", "name"], columns="metric", values="value",
                                 aggfunc="max", sort=False).reset_index()
        table.columns.name = None
        table = table.rename(columns={"parent": "function", "name": "line"})
        number = pd.to_numeric(table["line"].str.extract(r":(\d+)", expand=False),
                               errors="coerce")
        order = table.assign(_n=number).sort_values(["function", "_n"], kind="stable").index
        return table.loc[order].reindex(columns=[c for c in _LINE_COLUMNS
                                                 if c in table.columns]).reset_index(drop=True)

    def passes(self) -> pd.DataFrame:
        """A row per pass: its backends, how it ended (`partial`: the target ended well but
        a backend failed), the steps it saw (`window`: the step it ended the target at,
        when it ran a window of steps), its time, and its overhead over the clean
        timing pass with the interval, the verdict and what they rest on."""
        columns = ["pass", "backends", "status", "exit_code", "steps", "window",
                   "target_wall_time",
                   "process_wall_time", "overhead", "overhead_low", "overhead_high",
                   "overhead_verdict", "overhead_basis", "error"]
        table = pd.DataFrame([summary.to_json() for summary in self.meta.passes])
        if table.empty:
            return pd.DataFrame(columns=columns)
        table["backends"] = table["backends"].map(lambda names: "+".join(names) or "benchmark")
        return table.reindex(columns=columns)

    def __repr__(self) -> str:
        where = f" at {self.run_dir}" if self.run_dir else ""
        return (f"<{type(self).__name__} {self.meta.status or '?'}{where}: "
                f"{len(self.frame)} rows from {self.frame['backend'].nunique()} backends>")

