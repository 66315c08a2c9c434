"""A model's latency as the user's own process would see it: the timing pass is a fresh
interpreter (not forked from profile-all's server, whose allocator state is not the
user's), its page faults per iteration are measured, and iterations that faulted are timed
again after it with the heap held (model/allocator.py), so the report can say how much of
the latency is glibc giving memory back to the OS and taking it again. The allocator's state is set
here from outside, as a user would, by glibc's environment variables; the assertions are
on page-fault counts, not on times."""

from __future__ import annotations

import profile_all as pa
from conftest import REPO, profile_all
from profile_all.model.allocator import FAULTING
from profile_all.report.report import Report
from profile_all.run_record import RunRecord

MODEL = f"{REPO / 'scripts' / 'examples' / 'models.py'}:small_cnn"
#: glibc gives memory back at every free: small_cnn's activations fault in each iteration
TRIMMING = {"MALLOC_TRIM_THRESHOLD_": "0"}
#: glibc keeps what the process frees: no page fault an iteration
HELD = {"MALLOC_TRIM_THRESHOLD_": "1073741824", "MALLOC_MMAP_THRESHOLD_": "33554432"}


def _benchmark(tmp_path, env):
    out = tmp_path / "run"
    done = profile_all("model", MODEL, "--input-shape", "16,3,32,32", "--device", "cpu",
                       "--iters", "60", "--warmup", "3", "-b", "flop-counter", "-o", out,
                       env={"OMP_NUM_THREADS": "1", **env})
    assert done.returncode == 0, done.stderr[-3000:]
    report = pa.load(out)
    latency = report.latency().set_index(["metric", "stat"])["value"]
    return report, latency, report.meta.model.get("memory_kept")


def test_iterations_that_fault_are_timed_again_with_the_heap_held(tmp_path):
    report, latency, held = _benchmark(tmp_path, TRIMMING)
    assert report.meta.process_start == "fork, timing passes: fresh interpreter"
    assert latency[("page_faults", "mean")] > FAULTING
    # a few faults an iteration may remain (the allocator's own growth, a loaded machine's
    # reclaim): a small share of the trimming's
    assert held["page_faults"] < latency[("page_faults", "mean")] / 10
    kept = latency[("latency_memory_kept", "median")]
    assert kept == held["median"]
    findings = report.findings()
    said = findings[findings["finding"].str.contains("allocator's page faults")]
    median = latency[("latency", "median")]
    # said when the held heap ran over 5% faster (1.7x on this project's 2-core VM)
    assert len(said) == (median > kept * 1.05)


def test_iterations_that_do_not_fault_are_not_timed_again(tmp_path):
    _report, latency, held = _benchmark(tmp_path, HELD)
    assert latency[("page_faults", "mean")] <= FAULTING
    assert held is None and ("latency_memory_kept", "median") not in latency


def _model_report(median, faults, kept):
    rows = [["bench", 1, 0, "model", "forward", "", "latency", "median", median, "s"],
            ["bench", 1, 0, "model", "forward", "", "page_faults", "mean", faults, "count"],
            ["bench", 1, 0, "model", "forward", "", "latency_memory_kept", "median", kept,
             "s"]]
    return Report.from_rows(rows, RunRecord(status="complete"))


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
