"""A model's latency as the user's own process would see it: the timing pass is a fresh
interpreter (not forked from profile-all's server, whose allocator state is not the
user's), its page faults per iteration are measured, and iterations that faulted are timed
again after it with the heap held (model/allocator.py), so the report can say how much of
the latency is glibc giving memory back to the OS and taking it again. The allocator's state is set
here from outside, as a user would, by glibc's environment variables; the assertions are
on page-fault counts, not on times."""

from __future__ import annotations

import re

import profile_all as pa
from conftest import REPO, profile_all_here
from profile_all.model.allocator import FAULTING, fault_cost
from profile_all.report.report import Report
from profile_all.run_record import RunRecord

MODEL = f"{REPO / 'scripts' / 'examples' / 'models.py'}:small_cnn"
#: glibc gives memory back at every free: small_cnn's activations fault in each iteration
TRIMMING = {"MALLOC_TRIM_THRESHOLD_": "0"}
#: glibc keeps what the process frees: no page fault an iteration
HELD = {"MALLOC_TRIM_THRESHOLD_": "1073741824", "MALLOC_MMAP_THRESHOLD_": "33554432"}


def _benchmark(tmp_path, env):
    out = tmp_path / "run"
    done = profile_all_here("model", MODEL, "--input-shape", "16,3,32,32", "--device", "cpu",
                            "--iters", "60", "--warmup", "3", "-b", "flop-counter", "-o", out,
                            env={"OMP_NUM_THREADS": "1", **env})
    assert done.returncode == 0, done.stderr[-3000:]
    report = pa.load(out)
    latency = report.latency().set_index(["metric", "stat"])["value"]
    return report, latency, report.meta.model.get("memory_kept")


def test_iterations_that_fault_are_timed_again_with_the_heap_held(tmp_path):
    report, latency, held = _benchmark(tmp_path, TRIMMING)
    # the timing passes in fresh interpreters; the others forked, from a server new or kept
    assert re.fullmatch(r"fork( from a server kept from an earlier run)?, timing passes: "
                        r"fresh interpreter", report.meta.process_start)
    assert latency[("page_faults", "mean")] > FAULTING
    # a few faults an iteration may remain (the allocator's own growth, a loaded machine's
    # reclaim): a small share of the trimming's
    assert held["page_faults"] < latency[("page_faults", "mean")] / 10
    kept = latency[("latency_memory_kept", "median")]
    assert kept == held["median"]
    # the comparison's other block, timed just before the held one, faulted as the timing did
    assert latency[("latency_memory_given_back", "median")] == held["before"]
    assert latency[("page_faults_given_back", "mean")] > FAULTING
    assert 0 < latency[("page_fault_cost", "value")] < 1e-3
    assert latency[("timing_drift", "value")] >= 0
    findings = report.findings()
    said = findings[findings["finding"].str.contains("allocator's page faults")]
    # said when the held heap ran over 5% faster (1.7x on this project's 2-core VM)
    assert len(said) == (held["before"] > kept * 1.05)


def test_iterations_that_do_not_fault_are_not_timed_again(tmp_path):
    _report, latency, held = _benchmark(tmp_path, HELD)
    assert latency[("page_faults", "mean")] <= FAULTING
    assert held is None and ("latency_memory_kept", "median") not in latency


def _model_report(median, faults, kept, **probe):
    rows = [["bench", 1, 0, "model", "forward", "", "latency", "median", median, "s"],
            ["bench", 1, 0, "model", "forward", "", "page_faults", "mean", faults, "count"],
            ["bench", 1, 0, "model", "forward", "", "latency_memory_kept", "median", kept,
             "s"]]
    rows += [["bench", 1, 0, "model", "forward", "", metric, stat, value, unit]
             for (metric, stat, unit), value in [
                 (("latency_memory_given_back", "median", "s"), probe.get("before")),
                 (("page_fault_cost", "value", "s"), probe.get("cost")),
                 (("timing_drift", "value", "ratio"), probe.get("drift"))]
             if value is not None]
    return Report.from_rows(rows, RunRecord(status="complete"))


def test_a_page_fault_s_cost_is_measured_on_faults_that_happen():
    """fault_cost's premise, by the kernel's own count: each page of a fresh mapping
    touched once is one minor fault."""
    import mmap
    import resource

    pages = 2048
    mapped = mmap.mmap(-1, pages * mmap.PAGESIZE)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for offset in range(0, pages * mmap.PAGESIZE, mmap.PAGESIZE):
        mapped[offset] = 1
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    mapped.close()
    assert pages <= faults < pages * 1.1
    assert 0 < fault_cost() < 1e-3


def test_a_comparison_the_faults_cannot_explain_or_the_machine_moved_is_hedged():
    """The 54.79x once said: a before and after of a loaded machine. Two blocks one after
    the other, a gauge of the machine around them, and the faults' own cost beside it."""
    steady = _model_report(4e-3, 670, 2.8e-3, before=4e-3, cost=3.5e-6, drift=0.02)
    [said] = steady.findings().loc[lambda f: f["rule"] == "memory", "finding"]
    assert "page faults hold 30.0%" in said
    assert "670 faults cost about 2.34 ms at 3.5 µs each, measured here" in said
    loaded = _model_report(4e-3, 670, 2.8e-3, before=150e-3, cost=3.5e-6, drift=0.02)
    [said] = loaded.findings().loc[lambda f: f["rule"] == "memory", "finding"]
    assert "page faults may hold 98.1%" in said and "2.8 ms instead of 150 ms" in said
    assert "more than 670 faults can cost (2.34 ms at 3.5 µs each" in said
    moved = _model_report(4e-3, 670, 2.8e-3, before=4e-3, cost=3.5e-6, drift=0.3)
    [said] = moved.findings().loc[lambda f: f["rule"] == "memory", "finding"]
    assert "may hold" in said
    assert "the machine's speed changed by 30% between the two timings" in said


def test_the_allocator_finding_says_both_latencies():
    findings = _model_report(4e-3, 670, 2.8e-3).findings()
    [finding] = findings.loc[findings["rule"] == "memory", "finding"]
    assert finding.startswith(
        "the allocator's page faults hold 30.0% of the latency: each iteration faulted in "
        "670 pages as glibc gave freed memory back to the OS and took it again; with its "
        "heap held, 2.8 ms instead of 4 ms (1.43x)"), finding
    assert "MALLOC_TRIM_THRESHOLD_" in findings.loc[findings["rule"] == "memory", "try"].iloc[0]
    within = _model_report(4e-3, 670, 3.9e-3).findings()  # within 5%: nothing to say
    assert within[within["rule"] == "memory"].empty


def test_faults_that_stopped_after_the_timing_are_said_with_both_latencies():
    """small_cnn once faulted 216-669 pages an iteration in its timing and 0.02 in the
    block timed after it (glibc's thresholds settled): nothing was held, nothing said.
    The two blocks of the same process are the comparison then."""
    rows = [["bench", 1, 0, "model", "forward", "", "latency_memory_given_back", "median",
             2.9e-3, "s"],
            ["bench", 1, 0, "model", "forward", "", "page_faults_given_back", "mean", 0.02,
             "count"]]
    report = _model_report(4e-3, 670, None, cost=2.7e-6, drift=0.03)
    report = Report.from_rows(
        [r for r in report.frame.values.tolist() if r[6] != "latency_memory_kept"] + rows,
        RunRecord(status="complete"))
    [said] = report.findings().loc[lambda f: f["rule"] == "memory", "finding"]
    assert said.startswith("the allocator's page faults hold 27.5% of the latency: each "
                           "iteration faulted in 670 pages"), said
    assert ("once they faulted no more (glibc's thresholds settled as the process went on), "
            "2.9 ms instead of 4 ms (1.38x)") in said
