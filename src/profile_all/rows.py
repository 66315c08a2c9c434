"""The report's columns (DESIGN.md, "The report") and the helper that makes one row."""

from __future__ import annotations

from typing import Any

#: Column order of `Report.frame`. `parent` is the path of the enclosing region
#: ("train_step/forward"), empty for top-level regions and for every other scope.
COLUMNS = ["backend", "pass", "rank", "scope", "name", "parent", "metric", "stat", "value", "unit"]

#: Per-call samples (`Report.samples`, samples.parquet): a row per call of a region, step
#: or model iteration, kept so that two runs can be compared with their spread.
SAMPLE_COLUMNS = ["backend", "pass", "rank", "scope", "name", "parent", "metric", "value"]

#: Columns a backend fills; the worker adds backend, pass and rank.
MEASURED = ["scope", "name", "parent", "metric", "stat", "value", "unit"]

#: `memcpy` and `memset`: device copies and fills by kind (name as Kineto writes it, e.g.
#: "Memcpy HtoD (Pageable -> Device)"); `api`: CUDA runtime and driver calls on the host
SCOPES = ("run", "region", "step", "function", "operator", "operator_shape", "kernel",
          "memcpy", "memset", "api", "module", "line", "memory")

#: the operator row that holds device time no operator launched (kernels launched outside
#: any operator, or whose launch is not in the trace): kept, never dropped
UNATTRIBUTED = "(unattributed)"

UNIT_OF_METRIC = {
    "wall_time": "s",
    "cpu_time": "s",
    "gpu_time": "s",
    "self_time": "s",
    "cumulative_time": "s",
    "self_gpu_time": "s",
    "calls": "count",
    "primitive_calls": "count",
    "events": "count",
    "flops": "FLOP",
    "macs": "MAC",
    "params": "count",
    # FLOP counters, per module: forward calls are `calls`
    "backward_calls": "count",
    "backward_flops": "FLOP",
    "attention_flops": "FLOP",  # forward FLOPs of scaled dot-product attention operators
    "outputs": "count",  # output elements, over the calls seen
    "bias_adds": "count",  # one per output element of a module with a `bias` parameter
    "module_type": "count",  # 1, with the module's class name in the stat column
    "latency": "s",
    "iterations": "count",
    "peak_memory": "B",
    "bytes": "B",
    "gpu_span": "s",
    "attributed_share": "ratio",
}


def row(scope: str, name: str, metric: str, value: float, *, stat: str = "total",
        parent: str = "", unit: str | None = None) -> list[Any]:
    """One measured value, in the MEASURED column order, in SI base units."""
    return [scope, name, parent, metric, stat, float(value), unit or UNIT_OF_METRIC[metric]]
