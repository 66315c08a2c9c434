"""Why two FLOP counters differ on a root module, per call: only the causes that the rows
recorded at counting time establish.

Module by module (each module's own FLOPs: its count less its children's):

- the difference is exactly the module's bias adds (one per output element of a module
  with a `bias`) where flop-counter counted its matmul or convolution: bias counted;
- the counter counts FLOPs in a module that ran under flop-counter, which counted none
  there (it counts matmul, convolution and attention only): element-wise ops counted;
- the counter counts none, or exactly the attention FLOPs fewer, in a module where
  flop-counter counted attention operators: attention not counted;
- the counter saw the module run and counted none where flop-counter counted some: not
  counted;
- in a recurrent layer (LSTM, GRU, RNN and their cells), where flop-counter counts the
  matrix products alone: a counter that counts more counts the gates' element-wise ops
  and biases (thop's rule); one that counts about half counts a multiply-accumulate as one
  FLOP (flops-profiler's rule for recurrent layers);
- with training, a forward-only counter's backward is 2x its forward, an estimate, where
  flop-counter measured it.

What is left is "unexplained", with its size. thop counts the functional products it
meets outside its layer rules (a matmul in a custom module) at the root, not in the module
that ran them: so its root's own count is never taken as element-wise ops, and where it
counted any, a module it counted nothing in is not said to be missed unless the root holds
less beyond the reference's than that module's FLOPs (then they are nowhere).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def _subtree(facts: pd.DataFrame, other: pd.DataFrame, root: str) -> list[str]:
    names = dict.fromkeys([*facts.index, *other.index])
    return [n for n in names if n == root or n.startswith(root + ".")]


def _own(values: pd.Series) -> pd.Series:
    """Each module's own part of a count that includes its submodules'."""
    parents = pd.Series([n.rpartition(".")[0] for n in values.index], index=values.index)
    children = values.groupby(parents).sum()
    return values - children.reindex(values.index).fillna(0)


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


def _types(facts: pd.DataFrame, names: list[str]) -> str:
    return ", ".join(dict.fromkeys(str(facts.at[n, "type"]) for n in names
                                   if n in facts.index and isinstance(facts.at[n, "type"], str)))


def _per_root_call(table: pd.DataFrame, names: list[str], root: str, column: str) -> pd.Series:
    """`column` per call of `root` for each of `names`; a module the counter has no row
    for (a ModuleList, never called itself) holds what its submodules hold."""
    values = table[column].reindex(names)
    for name in sorted(names, key=lambda n: -n.count(".")):  # the deepest first
        if pd.isna(values[name]):
            children = [n for n in names if n.rpartition(".")[0] == name]
            values[name] = values[children].fillna(0).sum()
    return values / table.at[root, "calls"]


#: the recurrent modules of torch.nn
_RECURRENT = frozenset({"LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell"})
#: the share of flop-counter's count that counting a multiply-accumulate as one FLOP
#: leaves, give or take the element-wise ops and biases counted besides
_ONE_PER_MAC = (0.45, 0.6)


def _recurrent(d: float, ref: dict[str, Any], other: dict[str, Any]) -> str | None:
    if other["type"] not in _RECURRENT or ref["own"] <= 0:
        return None
    if d > 0:
        return "element-wise ops and biases of the recurrent cells counted ({types})"
    low, high = _ONE_PER_MAC
    if low * ref["own"] <= other["own"] <= high * ref["own"]:
        return "a multiply-accumulate counted as one FLOP, not two ({types})"
    return None


def _classify(d: float, ref: dict[str, Any], other: dict[str, Any], placed: bool,
              unplaced_here: bool) -> str | None:
    """The established cause of the difference `d` in one module's own FLOPs per call, or
    None. `ref` and `other` hold the module's own FLOPs, attention FLOPs, bias adds and
    calls under each counter; `placed`: the counter counted no FLOPs away from where
    they ran (thop at the root); `unplaced_here`: the module is the root where the
    counter counts what it could not place."""
    recurrent = _recurrent(d, ref, other)
    if recurrent:
        return recurrent
    if d > 0:
        if ref["own"] > 0 and other["bias"] > 0 and _same(d, other["bias"]):
            return "bias counted in {types} (one add per output)"
        if _same(ref["own"], 0) and ref["calls"] > 0 and not unplaced_here:
            return "element-wise ops counted ({types})"
        return None
    return _uncounted(d, ref, other) if other["calls"] > 0 and placed else None


def _uncounted(d: float, ref: dict[str, Any], other: dict[str, Any]) -> str | None:
    """What a counter that counted less (`d` < 0) left out: attention, or the module."""
    if ref["attention"] > 0 and (_same(other["own"], 0) or _same(-d, ref["attention"])):
        return "attention not counted ({types})"
    if _same(other["own"], 0) and ref["own"] > 0:
        return "not counted: {types}"
    return None


def explain_forward(counter: str, root: str, ref: pd.DataFrame, other: pd.DataFrame,
                    reference: str, unplaced: bool) -> list[str]:
    """The established causes of `counter`'s forward difference per call of `root` from
    the `reference` counter's (their tables by module: `ref`, `other`), with their size,
    and what is left unexplained. `unplaced`: the counter counts what it cannot place in a
    module at the root."""
    ref_outputs = ref.at[root, "outputs"] / ref.at[root, "calls"]
    other_outputs = other.at[root, "outputs"] / other.at[root, "calls"]
    if ref_outputs > 0 and other_outputs > 0 and not _same(ref_outputs, other_outputs):
        return [f"calls differ: {counter} counted {other_outputs:,.0f} output elements per "
                f"call, {reference} {ref_outputs:,.0f} (the mean of "
                f"{ref.at[root, 'calls']:,.0f} calls): not compared per module"]
    names = _subtree(ref, other, root)
    ref_own = _own(_per_root_call(ref, names, root, "forward_flops"))
    other_own = _own(_per_root_call(other, names, root, "forward_flops"))
    ref_attention = _own(_per_root_call(ref, names, root, "attention_flops"))
    bias = _per_root_call(other, names, root, "bias_adds")
    placed = not unplaced or len(names) == 1 or _same(other_own.get(root, 0), 0)
    # what the counter holds at the root beyond the reference's: the most it can have
    # placed there of a module it counted nothing in (HF's Conv1D, 25 M each, against a
    # root that holds 0.1 M more: not counted, not moved)
    at_root = max(0.0, other_own.get(root, 0.0) - ref_own.get(root, 0.0))
    causes: dict[str, list[Any]] = {}  # cause -> [FLOPs, modules]
    for name in names:
        d = other_own[name] - ref_own[name]
        if _same(d, 0):
            continue
        cause = _classify(
            d, {"own": ref_own[name], "attention": ref_attention[name],
                "calls": ref["calls"].get(name, 0)},
            {"own": other_own[name], "bias": bias[name], "calls": other["calls"].get(name, 0),
             "type": other["type"].get(name)},
            placed or (name != root and ref_own[name] > at_root * (1 + 1e-9)),
            unplaced and name == root)
        if cause:
            found = causes.setdefault(cause, [0.0, []])
            found[0] += d
            found[1].append(name)
    return _said(causes, root, ref, other)


def _said(causes: dict[str, list[Any]], root: str, ref: pd.DataFrame,
          other: pd.DataFrame) -> list[str]:
    """Each cause with its FLOPs per call, the largest first, and what they leave of the
    root's gap, unexplained."""
    gap = (other.at[root, "forward_flops"] / other.at[root, "calls"]
           - ref.at[root, "forward_flops"] / ref.at[root, "calls"])
    base = ref.at[root, "forward_flops"] / ref.at[root, "calls"]
    shown = [f"{cause.format(types=_types(other, names_))}: {flops:+,.0f} FLOP per call"
             for cause, (flops, names_) in sorted(causes.items(), key=lambda c: -abs(c[1][0]))]
    unexplained = gap - sum(flops for flops, _ in causes.values())
    if not _same(unexplained, 0):
        share = f" ({unexplained / base:+.1%})" if base else ""
        shown.append(f"unexplained: {unexplained:+,.0f} FLOP per call{share}")
    return shown
