"""Whether the numbers can be trusted: the run's doubts and losses, and a straggler rank."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from profile_all import units as fmt
from profile_all.report.findings.finding import Finding

if TYPE_CHECKING:
    from profile_all.pass_record import PassRecord
    from profile_all.report.run_data import RunData

#: a rank this much slower than the median rank (share of the median) is a straggler
STRAGGLER = 0.1
#: the doubts that make measured numbers unsafe to compare, by their first words
_SERIOUS = ("the clean timing pass", "passes did different work")
#: a doubt that says part of the report is missing (an ingest's broken rank file): first
_MISSING = ("left out, broken",)


def ended_badly(report: RunData) -> list[Finding]:
    """The target's own failure, first: every figure covers the run only up to it, and the
    hot spots of a script that failed at its start say nothing of the script."""
    passes = report.meta.passes
    lost = [_profiler_killed(p) for p in passes if p.killed_after_the_script(passes)]
    failed = [p for p in passes if not p.ended_well and p.error
              and not p.killed_after_the_script(passes)]
    if not failed:
        return lost
    first = failed[0]
    where = _where(failed, len(passes))
    seconds = first.target_wall_time
    after = f" after {fmt.seconds(seconds)}" if seconds is not None else ""
    logs = f"; its stderr is in {first.logs[-1]}" if first.logs else ""
    evidence = f"pass {first.number}: {first.status}{after}{logs}"
    stopped = _stopped(report, first, evidence)
    if stopped is not None:
        return [stopped]
    return [*lost, Finding(
        "failure", f"the script stopped with exit code {first.exit_code} in {where}: "
        f"{first.error}", weight=math.inf, evidence=evidence,  # before any other
        suggestion="the figures cover the script up to there: "
                   + ("a longer --timeout, or --max-steps N to end it sooner"
                      if first.status == "timeout" else "fix it, and run again"))]


def _where(failed: list[PassRecord], passes: int) -> str:
    """`every pass`, or the passes that ended as the first failed one did (a window stopped
    with its host's timeout ended by SIGTERM, 143, where its host timed out, 124)."""
    alike = [p for p in failed if p.exit_code == failed[0].exit_code]
    if len(alike) == passes > 1:
        return "every pass"
    return f"pass{'es' if len(alike) > 1 else ''} {', '.join(str(p.number) for p in alike)}"


def _stopped(report: RunData, first: PassRecord, evidence: str) -> Finding | None:
    """profile-all (or an attach) stopped, not the script: said as such."""
    if first.status == "interrupted" and report.meta.target.get("kind") == "process":
        return Finding("failure", f"the attach was stopped: {first.error}",
                       weight=math.inf, evidence=evidence,
                       suggestion="the figures cover the process up to the stop; the "
                                  "process itself went on")
    if first.status == "interrupted":  # profile-all was stopped, not the script
        return Finding("failure", f"the run was stopped in pass {first.number}: "
                       f"{first.error}", weight=math.inf, evidence=evidence,
                       suggestion="the figures cover the script up to the stop; passes "
                                  "after it did not run: run again to measure it whole")
    return None


def _profiler_killed(summary: PassRecord) -> Finding:
    """A profiler's pass killed where the script ended well in the clean timing pass."""
    backends = "+".join(summary.backends)
    return Finding(
        "trust", f"pass {summary.number} ({backends}) was {summary.error}, where the script "
        "ended well in the clean timing pass: the profiler's own cost (torch.profiler's "
        "events of a whole long script, say), not the script's failure; its figures are "
        "lost, the other passes' stand", weight=0.9,
        evidence=f"pass {summary.number}: killed"
                 + (f"; its stderr is in {summary.logs[-1]}" if summary.logs else ""),
        suggestion=f"fewer steps for it (--pass-steps N, --max-steps N), or leave "
                   f"{backends} out")


#: the doubts that become findings, each once; the others are counted in one more; each
#: cut to LONGEST_DOUBT characters (a crafted record held a doubt of 5 MB)
MOST_DOUBTS = 50
LONGEST_DOUBT = 1000


def doubts(report: RunData) -> list[Finding]:
    """Every doubt the run recorded and every loss a backend reported, as findings: the
    noisy clean pass and passes that did different work weigh more than the others."""
    lines = [line if len(line) <= LONGEST_DOUBT else f"{line[:LONGEST_DOUBT]}... (cut: "
             f"meta.json holds all {len(line):,} characters)"
             for line in dict.fromkeys(report.meta.doubts)]
    out = [Finding("trust", line, weight=0.95 if line.startswith(_MISSING)
                   else 0.35 if line.startswith(_SERIOUS) else 0.1,
                   evidence="the run's checks (meta.json doubts)")
           for line in lines[:MOST_DOUBTS]]
    if len(lines) > MOST_DOUBTS:  # a crafted record held 11 million of them
        out.append(Finding("trust", f"and {len(lines) - MOST_DOUBTS:,} more doubts: meta.json "
                           "holds every one", weight=0.1,
                           evidence="the run's checks (meta.json doubts)"))
    for summary in report.meta.passes:
        for failure in summary.backend_failures:
            if failure["phase"] == "lost":
                out.append(Finding(
                    "trust", f"backend {failure['backend']} lost data: {failure['error']}",
                    weight=0.3, evidence=f"pass {summary.number} (partial)",
                    suggestion="its totals miss what it lost; the other passes are whole"))
    return out


def _per_rank(report: RunData) -> pd.DataFrame:
    """Per backend and time metric, each rank's median step time (the warm-up step and
    those that compiled left out, as every per-step figure leaves them), else, where no
    backend timed steps, each rank's total time of the run and its steps (ranks())."""
    steps = report.scoped("step")
    steps = steps[(steps["stat"] == "median") & steps["metric"].isin(["wall_time", "gpu_time"])]
    if steps.empty:
        ranks = report.ranks()
        return ranks[ranks["scope"].isin(["step", "run"])]
    out = []
    for (backend, metric, name), rows in steps.groupby(["backend", "metric", "name"]):
        per_rank = rows.groupby("rank")["value"].median()
        if len(per_rank) > 1:
            out.append({"scope": "step", "name": f"{name} (median)", "backend": backend,
                        "metric": metric, "min": per_rank.min(), "median": per_rank.median(),
                        "max": per_rank.max(), "slowest_rank": int(per_rank.idxmax())})
    return pd.DataFrame(out, columns=["scope", "name", "backend", "metric", "min", "median",
                                      "max", "slowest_rank"])


def straggler(report: RunData) -> list[Finding]:
    """The slowest rank of the steps' median time (else of the run's total), when it lags
    the median rank."""
    timed = _per_rank(report)
    if timed.empty:
        return []
    lags = (timed["max"] - timed["median"]) / timed["median"].where(timed["median"] > 0)
    worst = timed.loc[lags.fillna(0).idxmax()]
    lag = float(lags.fillna(0).max())
    if lag < STRAGGLER:
        return []
    return [Finding(
        "straggler", f"rank {worst['slowest_rank']} is a straggler: {fmt.share(lag)} slower "
        f"than the median rank ({worst['scope']} {worst['name']})", weight=min(lag, 1.0) * 0.7,
        share=lag, amount=worst["max"] - worst["median"], unit="s",
        evidence=f"{worst['backend']} {worst['metric']} per rank: min "
                 f"{fmt.seconds(worst['min'])}, median {fmt.seconds(worst['median'])}, max "
                 f"{fmt.seconds(worst['max'])}",
        suggestion="an uneven data shard, a slower node or GPU, or work only that rank does "
                   "(logging, checkpoints on rank 0)")]
