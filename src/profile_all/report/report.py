"""The Report: one long, tidy DataFrame (`frame`, a row per measured value) and `meta`.

Every other table is a view of `frame`, computed when asked: `summary()`, `functions()`,
`operators()`, `kernels()`, `passes()`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from profile_all.report.schema import COLUMNS

#: version of the run-directory layout; `load` refuses a newer one
FORMAT_VERSION = 1

_TIMED_SCOPES = ["run", "step", "region"]
_FUNCTION_METRICS = ["calls", "primitive_calls", "self_time", "cumulative_time"]
_OPERATOR_METRICS = ["calls", "cpu_time", "self_time", "gpu_time", "self_gpu_time", "flops"]


class Report:
    def __init__(self, frame: pd.DataFrame, meta: dict[str, Any],
                 run_dir: Path | None = None) -> None:
        self.frame = frame
        self.meta = meta
        self.run_dir = run_dir

    @classmethod
    def from_rows(cls, rows: list[list[Any]], meta: dict[str, Any]) -> Report:
        frame = pd.DataFrame(rows, columns=COLUMNS)
        frame = frame.astype({"pass": "int64", "rank": "int64", "value": "float64"})
        return cls(frame, meta)

    @property
    def exit_code(self) -> int:
        return int(self.meta.get("exit_code", 0))

    def summary(self) -> pd.DataFrame:
        """A row per run, step and region; a column per `backend.metric.stat` measured."""
        timed = self.frame[self.frame["scope"].isin(_TIMED_SCOPES)]
        if timed.empty:
            return pd.DataFrame(columns=["scope", "name", "parent"])
        table = timed.pivot_table(index=["scope", "name", "parent"],
                                  columns=["backend", "metric", "stat"],
                                  values="value", aggfunc="median", sort=False)
        table.columns = [".".join(column) for column in table.columns]
        table = table.reset_index()
        table["_order"] = table["scope"].map(_TIMED_SCOPES.index)
        table["_path"] = table["parent"].where(table["parent"] == "", table["parent"] + "/")
        table["_path"] += table["name"]
        table = table.sort_values(["_order", "_path"], kind="stable")
        return table.drop(columns=["_order", "_path"]).reset_index(drop=True)

    def _table(self, scope: str, metrics: list[str], sort_by: str,
               top: int | None) -> pd.DataFrame:
        """A row per name of `scope` (summed over passes and ranks), largest `sort_by` first."""
        rows = self.frame[(self.frame["scope"] == scope) & (self.frame["stat"] == "total")]
        if rows.empty:
            return pd.DataFrame(columns=["name", *metrics])
        table = rows.pivot_table(index="name", columns="metric", values="value",
                                 aggfunc="sum", sort=False)
        table = table.reindex(columns=[m for m in metrics if m in table.columns])
        table = table.sort_values(sort_by, ascending=False).reset_index()
        table.columns.name = None
        return table.head(top) if top else table

    def functions(self, top: int | None = None) -> pd.DataFrame:
        """A row per Python function (cProfile), most self time first."""
        return self._table("function", _FUNCTION_METRICS, "self_time", top)

    def operators(self, top: int | None = None) -> pd.DataFrame:
        """A row per operator (torch.profiler): host times, device times (s), FLOPs."""
        table = self._table("operator", _OPERATOR_METRICS, "self_time", top)
        if "gpu_time" in table.columns and table["gpu_time"].sum() > 0:
            table = table.sort_values("self_gpu_time", ascending=False, ignore_index=True)
        return table

    def kernels(self, top: int | None = None) -> pd.DataFrame:
        """A row per GPU kernel (torch.profiler or nsys), most device time first."""
        return self._table("kernel", ["calls", "gpu_time"], "gpu_time", top)

    def passes(self) -> pd.DataFrame:
        """A row per pass: its backends, how it ended, its time and its overhead."""
        columns = ["pass", "backends", "status", "exit_code", "target_wall_time",
                   "process_wall_time", "overhead", "error"]
        table = pd.DataFrame(self.meta.get("passes", []))
        if table.empty:
            return pd.DataFrame(columns=columns)
        table["backends"] = table["backends"].map("+".join)
        return table[columns]

    def __repr__(self) -> str:
        where = f" at {self.run_dir}" if self.run_dir else ""
        return (f"<Report {self.meta.get('status', '?')}{where}: {len(self.frame)} rows from "
                f"{self.frame['backend'].nunique()} backends>")
