"""The timing pass of a model: latency with its spread, FPS, and the batch-size search.

Rows are of backend `bench`, scope `model`, named after the timed region (`forward`, or
`train_step` with --train).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from profile_all.model import allocator, build, timing_method
from profile_all.rows import row

SEARCH_WARMUP = 2
SEARCH_BUDGET_SECONDS = 2.0


def _rss_peak_reset() -> bool:
    """Reset this process's peak resident size (Linux: /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _rss_peak() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) * 1024
    return float("nan")


def _batch_point(target: Any, model: Any, device: Any,
                 batch: int) -> timing_method.BatchPoint | None:
    import torch

    on_gpu = device.type == "cuda"
    try:
        if on_gpu:
            torch.cuda.reset_peak_memory_stats(device)
        else:
            _rss_peak_reset()
        inputs = build.make_inputs(target.input_shapes, target.input_dtype or target.dtype,
                                   device, batch, vocabulary=target.vocabulary(model))
        work = build.Work(model, inputs, target.train)
        timing = timing_method.measure(work.plain, device=device, warmup=SEARCH_WARMUP,
                               budget_seconds=SEARCH_BUDGET_SECONDS, min_seconds=0.3)
        peak = torch.cuda.max_memory_allocated(device) if on_gpu else _rss_peak()
    except torch.cuda.OutOfMemoryError:
        inputs = work = None
        gc.collect()
        torch.cuda.empty_cache()
        return None
    except build.InputsTooLarge:  # refused before torch tried
        return None
    except RuntimeError as error:  # the CPU allocator's out of memory
        if "can't allocate memory" not in str(error):
            raise
        inputs = work = None
        gc.collect()
        return None
    median = timing_method.latency_statistics(timing.samples)["median"]
    return timing_method.BatchPoint(batch, median, peak)


#: block medians further apart than this share of the median, and than BLOCK_SPREAD_CI
#: times the median's own 95% interval, say the machine drifted during the timing
BLOCK_SPREAD_FLOOR = 0.05
BLOCK_SPREAD_CI = 3.0


def _blocks(samples: list[float], stats: dict[str, float]) -> dict[str, Any]:
    """The medians of the timing's contiguous blocks (noise.BLOCKS of them, in time order):
    their lowest and highest, and whether they disagree beyond the median's interval (the
    interval holds the iterations of one window; the blocks show the drift across it)."""
    from profile_all import noise

    if len(samples) < noise.BLOCKS * noise.CALLS_PER_BLOCK:
        return {}
    medians = noise.units(samples)
    low, high = float(medians.min()), float(medians.max())
    spread = (high - low) / stats["median"]
    interval = (stats["ci95_high"] - stats["ci95_low"]) / stats["median"]
    return {"block_min": low, "block_max": high, "blocks": len(medians),
            "blocks_disagree": bool(spread > max(BLOCK_SPREAD_FLOOR,
                                                 BLOCK_SPREAD_CI * interval))}


def benchmark(target: Any, work: build.Work, device: Any) -> tuple[list[list[Any]], dict]:
    timing = timing_method.measure(work.marked, device=device, warmup=target.warmup,
                           iters=target.iters, budget_seconds=target.budget_seconds,
                           warmup_step=work.plain)
    stats = timing_method.latency_statistics(timing.samples)
    batch = target.input_shapes[0][0]
    name = work.region_name
    rows = [row("model", name, "latency", value, stat=stat)
            for stat, value in stats.items() if stat not in ("cv", "count")]
    blocks = _blocks(timing.samples, stats)
    rows += [row("model", name, "latency", blocks[stat], stat=stat)
             for stat in ("block_min", "block_max") if stat in blocks]
    rows += [row("model", name, "latency_cv", stats["cv"], stat="value", unit="ratio"),
             row("model", name, "iterations", stats["count"], unit="count"),
             row("model", name, "warmup_iterations", timing.warmup, unit="count"),
             row("model", name, "page_faults", timing.page_faults, stat="mean",
                 unit="count"),
             row("model", name, "batch_size", batch, stat="value", unit="count"),
             row("model", name, "fps", batch / stats["median"], stat="median", unit="1/s")]
    target.samples = [("model", name, "", "latency", list(timing.samples))]
    facts = {"clock": timing.clock, "device": str(device), "region": name,
             "unstable": stats["cv"] > timing_method.UNSTABLE_CV, "cv": stats["cv"],
             "median": stats["median"], "ci95_low": stats["ci95_low"],
             "ci95_high": stats["ci95_high"], "page_faults": timing.page_faults, **blocks}
    facts["measured_peak_flops"], facts["measured_peak_how"] = timing_method.measured_peak(
        device, target.dtype)
    if target.batch_search:
        points = timing_method.search_batch_size(
            lambda b: _batch_point(target, work.model, device, b),
            on_gpu=device.type == "cuda", max_memory=target.max_memory)
        for point in sorted(points, key=lambda p: p.batch_size):
            label = str(point.batch_size)
            rows += [row("batch", label, "latency", point.latency, stat="median"),
                     row("batch", label, "throughput", point.throughput, stat="value",
                         unit="1/s"),
                     row("batch", label, "peak_memory", point.peak_memory, stat="max",
                         unit="B")]
        if points:
            best = max(points, key=lambda p: p.throughput)
            rows.append(row("model", name, "best_batch_size", best.batch_size, stat="value",
                            unit="count"))
            facts["best_batch_size"] = best.batch_size
    if device.type == "cpu":  # last: it fixes the allocator's thresholds for the process
        held = allocator.probe(work.marked, timing, warmup=target.warmup, iters=target.iters,
                               budget_seconds=min(target.budget_seconds, 1.0))
        if "median" in held:
            rows.append(row("model", name, "latency_memory_kept", held["median"],
                            stat="median"))
        if held:
            rows += [row("model", name, "latency_memory_given_back", held["before"],
                         stat="median"),
                     row("model", name, "page_faults_given_back", held["before_page_faults"],
                         stat="mean", unit="count"),
                     row("model", name, "page_fault_cost", held["fault_cost"], stat="value"),
                     row("model", name, "timing_drift", held["drift"], stat="value",
                         unit="ratio")]
            facts["memory_kept"] = held
    return rows, facts
