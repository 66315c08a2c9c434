"""A root module's calls grouped by grad mode and input shapes, with the forward FLOPs per
call of each group (the exact counter's): a mean over calls of different sizes (300
`generate` calls of one token beside 25 training calls; 40 forwards of 99 time steps beside
2 of 1,099) matches no call, so the counters table takes one group and says which."""

from __future__ import annotations

import pandas as pd

COLUMNS = ["module", "mode", "shapes", "calls", "flops_per_call", "outputs_per_call"]


def call_groups(frame: pd.DataFrame, reference: str | None) -> pd.DataFrame:
    """A row per root module and group of its calls (first rank), most calls first."""
    rows = frame[(frame["backend"] == reference) & (frame["scope"] == "module")
                 & frame["metric"].isin(["group_calls", "group_flops", "group_outputs"])]
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = rows[rows["rank"] == rows["rank"].min()]
    table = rows.pivot_table(index=["name", "stat"], columns="metric", values="value",
                             aggfunc="sum", sort=False).reset_index()
    mode, _, shapes = table["stat"].str.partition(" ").T.values
    out = pd.DataFrame({"module": table["name"], "mode": mode, "shapes": shapes,
                        "calls": table["group_calls"],
                        "flops_per_call": table["group_flops"] / table["group_calls"],
                        "outputs_per_call": table["group_outputs"] / table["group_calls"]})
    return out.sort_values(["module", "calls"], ascending=[True, False],
                           kind="stable").reset_index(drop=True)


def chosen(groups: pd.DataFrame, module: str, training: bool) -> pd.Series | None:
    """The group a counters row stands for where `module`'s calls fall in several of unlike
    FLOPs: the training calls (with grad) when training, else the most numerous (the first
    seen of those as many: the call the per-call counters count); None where every call
    has the same FLOPs."""
    own = groups[groups["module"] == module]
    if len(own) < 2 or (own["flops_per_call"] == own["flops_per_call"].iloc[0]).all():
        return None  # one figure is every call's
    if training and (own["mode"] == "grad").any():
        own = own[own["mode"] == "grad"]
    return own.iloc[0]


def said(groups: pd.DataFrame, group: pd.Series) -> str:
    """Which calls a figure is of, and how many others are left apart."""
    calls = int(group["calls"])
    others = int(groups[groups["module"] == group["module"]]["calls"].sum()) - calls
    return (f"per call of the {calls} {group['mode']} call{'s' if calls != 1 else ''} of "
            f"{group['shapes'] or 'no tensor'} ({others} call{'s' if others != 1 else ''} of "
            "other shapes or modes apart: Report.call_groups())")


def module_detail(frame: pd.DataFrame, reference: str | None) -> pd.DataFrame | None:
    """Each module's forward calls and FLOPs within the groups recorded module by module
    (`group_module_calls`, `group_module_flops`), indexed by module and group key (first
    rank); None where none were."""
    rows = frame[(frame["backend"] == reference) & (frame["scope"] == "module")
                 & frame["metric"].isin(["group_module_calls", "group_module_flops"])]
    if rows.empty:
        return None
    rows = rows[rows["rank"] == rows["rank"].min()]
    table = rows.pivot_table(index=["name", "stat"], columns="metric", values="value",
                             aggfunc="sum")
    return table.rename_axis(index=["module", "stat"])


def first_call(frame: pd.DataFrame, reference: str | None, ref: pd.DataFrame,
               root: str) -> pd.DataFrame | None:
    """The exact counter's table of `root` (`ref`, by module) as of the root's first call
    alone, the call thop and flops-profiler count: each module's forward and attention
    FLOPs in it, the root's output elements, one root call. None where not recorded."""
    rows = frame[(frame["backend"] == reference) & (frame["scope"] == "module")
                 & frame["metric"].str.startswith("first_call_")]
    if rows.empty:
        return None
    rows = rows[rows["rank"] == rows["rank"].min()]
    values = rows.pivot_table(index="name", columns="metric", values="value", aggfunc="sum")
    if root not in values.index or "first_call_outputs" not in values.columns:
        return None
    names = [name for name in ref.index if name == root or name.startswith(root + ".")]
    table = ref.loc[names].copy()
    for column, metric in (("forward_flops", "first_call_flops"),
                           ("attention_flops", "first_call_attention_flops")):
        measured = values[metric] if metric in values.columns else pd.Series(dtype=float)
        table[column] = measured.reindex(names).fillna(0.0).to_numpy()
    table.loc[root, "calls"] = 1
    table.loc[root, "outputs"] = float(values.at[root, "first_call_outputs"])
    return table
