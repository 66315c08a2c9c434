"""The FLOP counters side by side, per call, with only the causes that the rows establish.

flop-counter (FlopCounterMode) counts every call of every module over the whole target,
forward and backward; thop and flops-profiler count each root module once, on its first
call, forward only. Their totals are different amounts of work, so they are never
compared: each counter's FLOPs of a module are divided by the calls of it that the counter
saw, and each root module is compared per call.

A difference gets a cause only where the rows recorded at counting time establish it
(counter_causes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from profile_all.report import call_groups
from profile_all.report.counter_causes import explain_forward
from profile_all.rows import Facts

COUNTER_COLUMNS = ["module", "counter", "calls", "backward_calls", "forward_flops",
                   "backward_flops", "flops", "macs", "params", "vs_reference", "backward",
                   "cause"]


@dataclass(frozen=True)
class Counting:
    """The run's FLOP counters, from what their backends state (`Facts`): the exact one
    (the reference) first, then the others in the run's order."""

    counters: tuple[str, ...] = ()
    reference: str | None = None
    forward_only: frozenset[str] = frozenset()
    #: counters that count what they cannot place in a module at the root
    unplaced_at_root: frozenset[str] = frozenset()

    @classmethod
    def of(cls, facts: Mapping[str, Facts]) -> Counting:
        counting = [name for name, said in facts.items() if said.counts_flops]
        exact = [name for name in counting if facts[name].exact]
        return cls(tuple(exact + [name for name in counting if name not in exact]),
                   exact[0] if exact else None,
                   frozenset(name for name in counting if facts[name].forward_only),
                   frozenset(name for name in counting if facts[name].unplaced_at_root))


def _module_rows(frame: pd.DataFrame, counting: Counting) -> pd.DataFrame:
    """The counters' module rows, of the first rank only: each rank counts its own calls."""
    rows = frame[(frame["scope"] == "module") & frame["backend"].isin(counting.counters)]
    return rows[rows["rank"] == rows["rank"].min()] if not rows.empty else rows


def _facts(frame: pd.DataFrame, counting: Counting) -> dict[str, pd.DataFrame]:
    """Per counter, a table by module path: every metric's total over the calls the
    counter saw, `forward_flops`, and the module's `type`."""
    facts = {}
    for counter, rows in _module_rows(frame, counting).groupby("backend", sort=False):
        table = rows[rows["stat"] == "total"].pivot_table(
            index="name", columns="metric", values="value", aggfunc="sum", sort=False)
        table.columns.name = None
        for metric in ("calls", "backward_calls", "backward_flops", "outputs", "bias_adds",
                       "attention_flops", "params", "macs"):
            if metric not in table.columns:
                table[metric] = math.nan if metric == "calls" else 0.0
        table["forward_flops"] = table["flops"] - table["backward_flops"]
        kinds = rows[rows["metric"] == "module_type"].drop_duplicates("name")
        table["type"] = kinds.set_index("name")["stat"].reindex(table.index)
        facts[str(counter)] = table
    return {c: facts[c] for c in counting.counters if c in facts}


def _tree_order(names: list[str]) -> list[str]:
    """Every module after its parent, siblings in the order they first appear (the
    reference lists a module when its forward ends: children before their parent)."""
    unique = list(dict.fromkeys(names))
    position = {name: index for index, name in enumerate(unique)}

    def key(name: str) -> list[int]:
        parts = name.split(".")
        return [position.get(".".join(parts[:depth]), position[name])
                for depth in range(1, len(parts) + 1)]

    return sorted(unique, key=key)


def modules(frame: pd.DataFrame, counting: Counting, train: bool) -> pd.DataFrame:
    """A row per module: its type and parameters, and each counter's forward FLOPs per call
    of the module beside the calls it saw (the exact counter's backward too, when
    measured). Where a root's calls are of unlike work, the exact counter's figures of its
    modules are of the group of calls the counters table stands for (`_as_of_group`)."""
    facts = _facts(frame, counting)
    if not facts:
        return pd.DataFrame(columns=["module", "type", "params"])
    names = _tree_order([name for table in facts.values() for name in table.index])
    table = pd.DataFrame(index=pd.Index(names, name="module"))
    table["type"] = pd.concat([f["type"] for f in facts.values()], axis=1).reindex(
        names).bfill(axis=1).iloc[:, 0]
    table["params"] = pd.concat([f["params"] for f in facts.values()], axis=1).reindex(
        names).max(axis=1)
    for counter, counted in facts.items():
        counted = counted.reindex(names)
        table[counter] = counted["forward_flops"] / counted["calls"]
        table[f"{counter} calls"] = counted["calls"]
        if counter == counting.reference and (counted["backward_calls"] > 0).any():
            table[f"{counter} backward"] = (counted["backward_flops"]
                                            / counted["backward_calls"].where(lambda c: c > 0))
            table[f"{counter} backward calls"] = counted["backward_calls"]
    if counting.reference in facts:
        _as_of_group(table, frame, facts, counting, train)
    return table.reset_index()


def _as_of_group(table: pd.DataFrame, frame: pd.DataFrame, facts: dict[str, pd.DataFrame],
                 counting: Counting, train: bool) -> None:
    """The exact counter's forward FLOPs and calls of each module of a root whose calls
    fall in groups of unlike work, as of the group the counters row stands for
    (call_groups.chosen), in place: a mean over training, evaluation and generation calls
    matches no call."""
    reference = counting.reference
    groups = call_groups.call_groups(frame, reference)
    detail = call_groups.module_detail(frame, reference)
    ref = facts[reference]
    for root in _roots(facts):
        if root not in ref.index:
            continue
        training = train or ref.at[root, "backward_calls"] > 0
        group = call_groups.chosen(groups, root, training)
        if group is None or detail is None:
            continue
        key = f"{group['mode']} {group['shapes']}".strip()
        if key not in detail.index.get_level_values("stat"):
            continue
        own = detail.xs(key, level="stat")
        under = [name for name in table.index if name == root or name.startswith(root + ".")]
        calls = own["group_module_calls"].reindex(under)
        table.loc[under, reference] = (own["group_module_flops"].reindex(under)
                                       / calls.where(lambda c: c > 0)).to_numpy()
        table.loc[under, f"{reference} calls"] = calls.to_numpy()


def _roots(facts: dict[str, pd.DataFrame]) -> list[str]:
    """Top-level modules with parameters or FLOPs (not a loss function), reference's first."""
    names = []
    for table in facts.values():
        top = table[~table.index.str.contains(".", regex=False)]
        names += list(top.index[(top["params"] > 0) | (top["flops"] > 0)])
    return list(dict.fromkeys(names))


def _row(counter: str, root: str, table: pd.DataFrame, training: bool,
         counting: Counting, group: pd.Series | None = None) -> dict[str, Any]:
    calls = table.at[root, "calls"]
    forward = table.at[root, "forward_flops"] / calls
    if group is not None:  # calls of several shapes or modes: one group's, not their mean
        calls, forward = float(group["calls"]), float(group["flops_per_call"])
    if counter not in counting.forward_only:
        backward_calls = table.at[root, "backward_calls"]
        backward = table.at[root, "backward_flops"] / backward_calls if backward_calls else 0.0
        macs, how = (forward + backward) / 2, "measured" if training else ""
    else:
        backward_calls = math.nan
        backward = 2 * forward if training else 0.0
        macs = table.at[root, "macs"] / calls * (3 if training else 1)
        how = "estimated: 2x forward" if training else ""
    return {"module": root, "counter": counter, "calls": calls,
            "backward_calls": backward_calls, "forward_flops": forward,
            "backward_flops": backward, "flops": forward + backward, "macs": macs,
            "params": table.at[root, "params"], "backward": how}


def _cause(row: dict[str, Any], facts: dict[str, pd.DataFrame], training: bool,
           reference: dict[str, Any] | None, counting: Counting,
           rows: list[dict[str, Any]]) -> str:
    counter, root = row["counter"], row["module"]
    if counter == counting.reference:
        return "reference (exact count)" + (
            "; backward measured" if training else "") + row.get("group_said", "")
    if reference is None:
        return _unchecked(row, rows, training)
    first = reference.get("first")  # its calls of unlike work: against its first call
    causes = explain_forward(counter, root, facts[counting.reference] if first is None
                             else first, facts[counter], counting.reference,
                             counter in counting.unplaced_at_root)
    if training:
        gap = row["backward_flops"] - reference["backward_flops"]
        causes.append(f"backward estimated as 2x forward: {gap:+,.0f} FLOP per call "
                      f"from the measured {reference['backward_flops']:,.0f}")
    return "; ".join(causes) or "agrees"


def _unchecked(row: dict[str, Any], rows: list[dict[str, Any]], training: bool) -> str:
    """Without the exact counter nothing says which count is right: how the counter
    stands against the others (counters 8% apart were each said to 'agree')."""
    said = ["backward estimated as 2x forward"] if training else []
    others = [other for other in rows if other is not row]
    apart = [f"{row['flops'] / other['flops'] - 1:+.1%} from {other['counter']}"
             for other in others
             if other["flops"] and not math.isclose(row["flops"], other["flops"], rel_tol=1e-9)]
    if apart:
        said.append(f"{', '.join(apart)}; no exact counter ran (-b flop-counter) to say "
                    "which is right")
    elif others:
        said.append(f"the same as {', '.join(o['counter'] for o in others)}; no exact "
                    "counter ran (-b flop-counter)")
    else:
        said.append("no exact counter ran (-b flop-counter) to check it")
    return "; ".join(said)


def counters(frame: pd.DataFrame, counting: Counting, train: bool) -> pd.DataFrame:
    """A row per root module and counter: the forward and backward calls it saw, and per
    call its FLOPs (forward + backward when training), MACs, parameters, difference from
    the exact counter, how the backward was had, and the established causes of the
    difference. Training: `train`, or the exact counter saw the root's backward."""
    facts = _facts(frame, counting)
    groups = call_groups.call_groups(frame, counting.reference)
    table = []
    for root in _roots(facts):
        ref = facts.get(counting.reference) if counting.reference else None
        has_ref = ref is not None and root in ref.index and ref.at[root, "calls"] > 0
        training = train or (has_ref and ref.at[root, "backward_calls"] > 0)
        rows = _root_rows(root, facts, groups, training, counting, frame)
        reference = next((r for r in rows if r["counter"] == counting.reference), None)
        for row in rows:
            _against(row, reference, _cause(row, facts, training, reference, counting, rows))
        table += rows
    return pd.DataFrame(table, columns=COUNTER_COLUMNS)


def _root_rows(root: str, facts: dict[str, pd.DataFrame], groups: pd.DataFrame,
               training: bool, counting: Counting, frame: pd.DataFrame
               ) -> list[dict[str, Any]]:
    """Each counter's row of `root`: the reference's of one group of its calls where they
    are of unlike work (call_groups)."""
    group = call_groups.chosen(groups, root, training)
    rows = [_row(counter, root, counted, training, counting,
                 group if counter == counting.reference else None)
            for counter, counted in facts.items()
            if root in counted.index and counted.at[root, "calls"] > 0]
    if group is not None and rows and rows[0]["counter"] == counting.reference:
        rows[0]["group"] = group
        rows[0]["group_said"] = "; " + call_groups.said(groups, group)
        rows[0]["first"] = call_groups.first_call(frame, counting.reference,
                                                  facts[counting.reference], root)
    return rows


def _against(row: dict[str, Any], reference: dict[str, Any] | None, cause: str) -> None:
    """A counter's row with its difference from the reference and the cause; no difference
    where the counters saw unlike calls (different inputs)."""
    row["cause"] = cause
    row["vs_reference"] = math.nan if cause.startswith("calls differ") or not reference \
        or not reference["flops"] else row["flops"] / reference["flops"] - 1
