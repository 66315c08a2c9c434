"""The FLOP counters side by side, in one unit, with their disagreements explained.

Every counter's total is shown in FLOPs (2 x MACs for a counter that counts MACs), beside
its relative difference from the reference, the exact count of FlopCounterMode
(flop-counter), and the known reason for a difference.
"""

from __future__ import annotations

import pandas as pd

REFERENCE = "flop-counter"
COUNTERS = ("flop-counter", "thop", "flops-profiler")
FORWARD_ONLY = ("thop", "flops-profiler")
AGREES_WITHIN = 1e-9  # counts are integers: any real difference has a cause


def _module_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["scope"] == "module") & frame["backend"].isin(COUNTERS)]


def modules(frame: pd.DataFrame) -> pd.DataFrame:
    """A row per module: each counter's FLOPs side by side, and the parameters."""
    rows = _module_rows(frame)
    if rows.empty:
        return pd.DataFrame(columns=["module", "params", *COUNTERS])
    flops = rows[rows["metric"] == "flops"].pivot_table(
        index="name", columns="backend", values="value", aggfunc="max", sort=False)
    params = rows[rows["metric"] == "params"].groupby("name", sort=False)["value"].max()
    table = flops.reindex(columns=[c for c in COUNTERS if c in flops.columns])
    table.insert(0, "params", params.reindex(table.index))
    table.columns.name = None
    return table.rename_axis("module").reset_index()


def _is_root(names: pd.Series) -> pd.Series:
    return ~names.str.contains(".", regex=False)


def _attention_counted(frame: pd.DataFrame) -> bool:
    operators = frame[(frame["backend"] == REFERENCE) & (frame["scope"] == "operator")]
    return operators["name"].str.contains("scaled_dot_product|bmm", regex=True).any()


def _cause(counter: str, difference: float, train: bool, attention: bool) -> str:
    if counter == REFERENCE:
        return "reference: exact count of matmul, convolution and attention operators"
    causes = []
    if train and counter in FORWARD_ONLY:
        causes.append("counts forward only: backward estimated as 2x forward")
    if abs(difference) <= AGREES_WITHIN:
        causes.append("agrees")
    elif difference < 0 and attention:
        causes.append("attention not counted")
    elif difference > 0:
        causes.append("element-wise ops counted (activations, normalisation, pooling)")
    else:
        causes.append("some operators not counted")
    if counter == "thop":
        causes.append("bias ignored")
    return "; ".join(causes)


def counters(frame: pd.DataFrame, train: bool) -> pd.DataFrame:
    """A row per counter: FLOPs, MACs, params, difference from the reference, and why."""
    rows = _module_rows(frame)
    roots = rows[_is_root(rows["name"])]
    totals = roots.pivot_table(index="backend", columns="metric", values="value",
                               aggfunc="sum")
    exact = frame[(frame["backend"] == REFERENCE) & (frame["scope"] == "run")
                  & (frame["metric"] == "flops")]["value"]
    table = []
    for counter in COUNTERS:
        if counter == REFERENCE and not exact.empty:
            flops = float(exact.iloc[0])
            macs = flops / 2  # it counts matmul, convolution and attention: 2 FLOPs a MAC
        elif counter in totals.index:
            counted = totals.loc[counter]
            macs = counted.get("macs", float("nan"))
            flops = counted.get("flops", 2 * macs)
            if train and counter in FORWARD_ONLY:
                flops, macs = 3 * flops, 3 * macs
        else:
            continue
        params = totals.loc[counter].get("params") if counter in totals.index else None
        table.append({"counter": counter, "flops": flops, "macs": macs, "params": params})
    result = pd.DataFrame(table, columns=["counter", "flops", "macs", "params"])
    if result.empty:
        return result
    reference = result.loc[result["counter"] == REFERENCE, "flops"]
    base = float(reference.iloc[0]) if not reference.empty else float("nan")
    result["vs_reference"] = result["flops"] / base - 1
    attention = _attention_counted(frame)
    result["cause"] = [_cause(c, d, train, attention)
                       for c, d in zip(result["counter"], result["vs_reference"], strict=True)]
    return result


def zero_counts(frame: pd.DataFrame) -> list[str]:
    """Modules with parameters that a counter says compute nothing: worth a warning."""
    table = modules(frame)
    warnings = []
    for _, module in table.iterrows():
        if not module["params"] or pd.isna(module["params"]):
            continue
        for counter in COUNTERS:
            if counter in table.columns and module[counter] == 0:
                warnings.append(f"{counter} counted 0 FLOPs for {module['module']}, which has "
                                f"{int(module['params']):,} parameters")
    return warnings
