"""On a device: idle time, host-device syncs, communication, FLOP/s against the peak."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from profile_all import units as fmt
from profile_all.report import trace_analyses
from profile_all.report.findings.finding import Finding, latency_doubt
from profile_all.report.findings.peaks import datasheet_peak

if TYPE_CHECKING:
    from profile_all.report.run_data import RunData

#: device idle above this share of the traced time: launch- or CPU-bound
IDLE = 0.3
#: kernels shorter than this on average, many of them: launch overhead dominates
TINY_KERNEL = 20e-6
#: syncs holding this share of the traced host time are worth naming
SYNC_SHARE = 0.05
#: communication kernels above this share of a rank's device time
COMMUNICATION = 0.1
#: achieved FLOP/s under this share of the peak is named as low
LOW_UTILIZATION = 0.3
_SYNC_CALLS = ("Synchronize",)  # (the CUDA API calls that wait)
_SCALAR_READS = ("aten::_local_scalar_dense", "aten::item")


def _trace_totals(report: RunData) -> pd.DataFrame:
    """Per backend, pass and rank that traced a device: host span and summed device time
    (made once: two findings ask)."""
    return report.once("trace_totals", lambda: _made_trace_totals(report))


def _made_trace_totals(report: RunData) -> pd.DataFrame:
    frame = report.scoped("run")
    trace = frame[(frame["name"] == "trace") & (frame["stat"] == "total")]
    table = trace.pivot_table(index=["backend", "pass", "rank"], columns="metric",
                              values="value", aggfunc="sum")
    if not {"wall_time", "gpu_time"} <= set(table.columns):
        return pd.DataFrame()
    return table.dropna(subset=["wall_time", "gpu_time"]).reset_index()


def _kernels_of(report: RunData, traced: pd.Series) -> tuple[float, float]:
    """(kernel calls, their device time) of one traced pass and rank."""
    rows = report.scoped("kernel")
    rows = rows[(rows["stat"] == "total") & (rows["backend"] == traced["backend"])
                & (rows["pass"] == traced["pass"]) & (rows["rank"] == traced["rank"])]
    return (float(rows.loc[rows["metric"] == "calls", "value"].sum()),
            float(rows.loc[rows["metric"] == "gpu_time", "value"].sum()))


def idle(report: RunData) -> list[Finding]:
    """Per traced pass and rank (named where a report holds several ranks), the device's
    idle share of the host's traced time, its kernels those of that rank alone."""
    out = []
    totals = _trace_totals(report)
    ranks = totals["rank"].nunique() if not totals.empty else 0
    for _, traced in totals.iterrows():
        if not traced["wall_time"] > 0:
            continue
        # the union over streams where the trace gave it; else the sum, which counts
        # overlapping streams twice: then idle is at least this
        exact = not pd.isna(traced.get("gpu_busy"))
        busy = traced["gpu_busy"] if exact else traced["gpu_time"]
        share = 1 - min(busy / traced["wall_time"], 1.0)
        if share < IDLE:
            continue
        calls, kernel_time = _kernels_of(report, traced)
        mean = kernel_time / calls if calls else float("nan")
        tiny = calls and mean < TINY_KERNEL
        who = f"rank {traced['rank']}: " if ranks > 1 else ""
        out.append(Finding(
            "device", f"{who}the device is idle {fmt.share(share)} of the traced time"
            + (f": {fmt.count(calls)} kernels of {fmt.seconds(mean)} on average (launch-bound)"
               if tiny else ": the host does not keep it fed (CPU-bound)"),
            weight=share * 0.9, share=share, amount=traced["wall_time"] - busy,
            unit="s", evidence=f"{traced['backend']} pass {traced['pass']} rank "
            f"{traced['rank']}: device busy {fmt.seconds(busy)} "
            + ("(the union over streams)" if exact else "(summed over streams: idle is at "
               "least this)") + f" in {fmt.seconds(traced['wall_time'])} of host time (the "
            "device time table's idle share is of the device's own span, first activity to "
            "last, not of the host's)",
            suggestion="CUDA graphs or torch.compile(mode='reduce-overhead') for many tiny "
                       "kernels; larger batches; move host work (data, Python) off the loop"
            if tiny else "find the host time in the functions and operators tables; larger "
                         "batches; overlap the input with DataLoader workers"))
    return out


def _by_rank(report: RunData, scope: str, metric: str, names: tuple[str, ...] = (),
             containing: str = "") -> pd.Series:
    """Per rank, the total of `metric` over the rows of `scope` (named `names`, or whose
    name holds `containing`): summed over passes within a backend, the largest backend's."""
    rows = report.scoped(scope)
    rows = rows[(rows["metric"] == metric) & (rows["stat"] == "total")]
    if names:
        rows = rows[rows["name"].isin(names)]
    if containing:
        rows = rows[rows["name"].str.contains(containing, regex=False)]
    return rows.groupby(["rank", "backend"])["value"].sum().groupby(level="rank").max()


def syncs(report: RunData) -> list[Finding]:
    """Host-device syncs in the loop: explicit ones, and `.item()` reads of device scalars,
    per rank against that rank's steps and traced time (a rank's finding is the same
    whatever other ranks' files are read beside it); the rank that waits most is named
    where a report holds several."""
    spans = _trace_totals(report)
    if report.kernels().empty or spans.empty:
        return []
    span = spans.groupby("rank")["wall_time"].max()
    waited = _by_rank(report, "api", "wall_time", containing=_SYNC_CALLS[0])
    waits = _by_rank(report, "api", "calls", containing=_SYNC_CALLS[0])
    reads = _by_rank(report, "operator", "calls", names=_SCALAR_READS)
    per_step = _by_rank(report, "step", "calls")
    found = pd.DataFrame({"span": span, "waited": waited, "waits": waits, "reads": reads,
                          "per_step": per_step}).reindex(span.index)
    found = found.fillna({"waited": 0.0, "waits": 0.0, "reads": 0.0})
    found = found[(found["waited"] >= SYNC_SHARE * found["span"])
                  | ((found["per_step"] > 0) & (found["reads"] >= found["per_step"]))]
    if found.empty:
        return []
    rank, worst = next(found.sort_values(["waited", "reads"], ascending=False).iterrows())
    share = worst["waited"] / worst["span"] if worst["span"] > 0 else float("nan")
    who = f"rank {rank}: " if len(span) > 1 else ""
    named = report.api_calls()
    named = ", ".join(named.loc[named["name"].str.contains(_SYNC_CALLS[0], regex=False),
                                "name"]) if not named.empty else ""
    return [Finding(
        "device", f"{who}host-device syncs: {fmt.seconds(worst['waited'])} waiting in "
        f"{fmt.count(worst['waits'])} synchronize calls, {fmt.count(worst['reads'])} scalar "
        "reads (.item())", weight=max(share, 0.2) * 0.8, share=share,
        amount=worst["waited"], unit="s",
        evidence=(f"CUDA API calls {named}; " if named else "") + "operators "
                 + ", ".join(_SCALAR_READS) + (f"; rank {rank} waits or reads most of the "
                                               f"{len(found)} of {len(span)} ranks past "
                                               "the threshold" if len(span) > 1 else ""),
        suggestion="read losses and metrics every N steps, not each; no torch.cuda."
                   "synchronize() in the loop; keep tensors on the device")]


def communication(report: RunData) -> list[Finding]:
    """Per rank (and pass, where one rank has several), the communication's time against
    what it is a share of, and how much of it computation overlapped, as the overlap and
    device-time tables give them: NCCL kernels (their union) against the device's busy time
    (the union of all its activities the steps launched); else gloo's collectives on the
    host against the trace's host time."""
    table = trace_analyses.of(report, "overlap", False)
    device = trace_analyses.of(report, "device_time", False).set_index(["pass", "rank"])
    traced = report.scoped("run")
    traced = traced[(traced["name"] == "trace") & (traced["metric"] == "wall_time")
                    & (traced["stat"] == "total")]
    traced = traced.groupby(["pass", "rank"])["value"].sum()
    several = table.groupby("rank")["pass"].nunique().gt(1)
    out = []
    for _, row in table.iterrows():
        key = (row["pass"], row["rank"])
        on_device = row["on"] == "device"
        base = device.loc[key, trace_analyses.DEVICE_TYPES].sum() if on_device and \
            key in device.index else traced.get(key, float("nan"))
        share = row["communication"] / base if base > 0 else 0.0
        if not share >= COMMUNICATION:
            continue
        who = f"rank {row['rank']}" + (f" (pass {row['pass']})" if several[row["rank"]] else "")
        what = "NCCL kernels" if on_device else "gloo's collectives"
        of = "the device's busy time" if on_device else "the traced host time"
        out.append(Finding(
            "communication", f"{who}: {what} take {fmt.share(share)} of {of} "
            f"({fmt.seconds(row['communication'])}); {fmt.share(row['overlap_share'])} of it "
            "overlapped by computation", weight=share * 0.8, share=share,
            amount=float(row["communication"]), unit="s",
            evidence=f"{what}' time on {who} (their union), of {fmt.seconds(base)}; "
                     "the overlap and device-time tables",
            suggestion="overlap it with compute (DDP bucket_cap_mb, gradient "
                       "accumulation with no_sync), fewer or larger collectives"))
    return out


def efficiency(report: RunData) -> list[Finding]:
    """A model's achieved FLOP/s against the peak: --peak-flops, else the datasheet's."""
    frame = report.scoped("model")
    achieved = frame[frame["metric"] == "achieved_flops"]
    if achieved.empty:
        return []
    model, target = report.meta.model, report.meta.target
    gpus = report.meta.environment.get("gpus") or []
    peak, source = model.get("peak_flops"), "--peak-flops"
    if not peak and gpus and str(model.get("device", target.get("device", ""))) != "cpu":
        peak = datasheet_peak(gpus[0], str(target.get("dtype", "float32")))
        source = f"{gpus[0]} datasheet, {target.get('dtype', 'float32')} dense"
    if not peak and model.get("measured_peak_flops"):
        peak = model["measured_peak_flops"]
        source = f"measured on the spot: {model.get('measured_peak_how', 'a matmul')}"
    if not peak:
        return []
    rate = float(achieved["value"].iloc[0])
    share = rate / peak
    return [Finding(
        "efficiency", f"achieved {fmt.by_unit(rate, 'FLOP/s')}: {fmt.share(share)} of the peak "
        f"({fmt.by_unit(peak, 'FLOP/s')})", weight=(1 - share) * 0.4 if share < LOW_UTILIZATION
        else 0.05, share=share, amount=rate, unit="FLOP/s",
        evidence=f"FLOPs per iteration / median latency; peak: {source}"
                 + latency_doubt(report),
        suggestion="larger batches, bfloat16 or TF32 (torch.set_float32_matmul_precision"
                   "('high')), torch.compile, fused kernels" if share < LOW_UTILIZATION
        else "")]
