"""`profile-all compare` and Report.compare: changes beyond the noise, and bad input."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here
from profile_all import units as fmt
from test_html_report import _in_chromium


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A baseline, the same again (an A/A pair), and a run whose "work" region sleeps 20%
    longer; each with three timing passes, so that verdicts rest on runs."""
    root = tmp_path_factory.mktemp("runs")
    made = {}
    for label, delay in (("base", "0.004"), ("again", "0.004"), ("slower", "0.0048")):
        done = profile_all_here("run", TARGETS / "speed.py", "-b", "wallclock", "-b", "cprofile",
                                "--repeat", "3", "-o", root / label, "--", delay)
        assert done.returncode == 0, done.stderr
        made[label] = root / label
    return made


def test_a_20_percent_slower_region_is_caught_and_fails_the_gate(runs):
    done = profile_all_here("compare", runs["base"], runs["slower"], "--fail-above", "10")
    assert done.returncode == 1, done.stderr
    # the step (work and steady: 6 -> 6.8 ms, +13%) may be named beside it, by its noise
    said = done.stderr.splitlines()[-1]
    assert "slower by more than 10% beyond the run-to-run noise: " in said
    assert "work (+" in said and "steady" not in said
    table = pa.load(runs["base"]).compare(pa.load(runs["slower"]))
    work = table[(table["kind"] == "region") & (table["name"] == "work")].iloc[0]
    assert work["verdict"] == "slower"
    assert 0.1 < work["change"] < 0.3 and work["ci_low"] > 0
    # 30 calls in each of 3 timing passes, but the 6 in cProfile's window of steps inside
    # the first (the steps the tracer slowed are no sample of the script's time)
    assert work["calls_a"] == work["calls_b"] == 84
    assert (work["runs_a"], work["runs_b"]) == (3, 3) and work["basis"] == "3+3 runs"
    # the unchanged region: its change is small; its verdict may, by design, be a false
    # "changed" in one comparison of twenty (95% family-wise), as the A/A test below allows,
    # so only the gate's promise is asserted: it is never named beyond the threshold
    steady = table[(table["kind"] == "region") & (table["name"] == "steady")].iloc[0]
    assert abs(steady["change"]) < 0.1, steady.to_dict()


def test_an_a_a_pair_says_no_change(runs):
    done = profile_all_here("compare", runs["base"], runs["again"], "--fail-above", "10",
                            "--format", "json")
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    timed = [row for row in table if row["kind"] in ("region", "step")]
    shown = [(row["name"], row["verdict"], round(row["change"], 4), round(row["ci_low"], 4),
              round(row["ci_high"], 4)) for row in timed]
    # the intervals hold together at 95% (Bonferroni): one A/A pair in twenty may show one
    # measure changed, by design; two would be a method that does not hold its promise
    assert len(timed) == 3, shown
    assert sum(row["verdict"].startswith("no change") for row in timed) >= 2, shown
    functions = [row for row in table if row["kind"] == "function"]
    assert functions and all(row["verdict"] == "no per-call samples: not tested"
                             for row in functions)


def test_a_change_below_the_threshold_passes(runs):
    done = profile_all_here("compare", runs["base"], runs["slower"], "--fail-above", "50")
    assert done.returncode == 0, done.stderr
    assert "slower" in done.stdout  # the verdict is shown, the threshold not crossed


def test_the_gate_refuses_runs_of_one_timing_pass(runs, tmp_path):
    single = tmp_path / "single"
    done = profile_all_here("run", TARGETS / "speed.py", "-b", "wallclock", "-o", single,
                            "--", "0.004", "extra")
    assert done.returncode == 0, done.stderr
    _refused(profile_all_here("compare", runs["base"], single, "--fail-above", "10"),
             "--fail-above needs at least 2 timing passes in each run")
    shown = profile_all_here("compare", runs["base"], single, "--format", "json")
    assert shown.returncode == 0
    rows = [row for row in json.loads(shown.stdout) if row["kind"] == "region"]
    assert [row["basis"] for row in rows if row["name"] != "extra"] == ["3+1 runs"] * 2
    extra = [row for row in rows if row["name"] == "extra"]  # a region new in B: shown
    assert len(extra) == 1 and extra[0]["verdict"] == "only in B (new)"
    as_md = profile_all_here("compare", runs["base"], single, "--format", "md").stdout.splitlines()
    assert as_md[0].startswith("| ") and set(as_md[1]) == {"|", "-"}
    assert len(as_md) == len(json.loads(shown.stdout)) + 2  # a line per row, under the head


def _refused(done, message):
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_runs_without_common_regions_are_refused(runs, tmp_path):
    script = tmp_path / "elsewhere.py"
    script.write_text("import profile_all as pa\nfor _ in range(5):\n"
                      "    with pa.region('elsewhere'):\n        pass\n")
    other = tmp_path / "other"
    done = profile_all_here("run", script, "-b", "wallclock", "-o", other)
    assert done.returncode == 0, done.stderr
    _refused(profile_all_here("compare", runs["base"], other),
             "the two runs have no timed region, step or model in common")


def test_unreadable_runs_are_refused_and_left_as_they_were(runs, tmp_path):
    newer = tmp_path / "newer"
    shutil.copytree(runs["base"], newer)
    meta = json.loads((newer / "meta.json").read_text())
    (newer / "meta.json").write_text(json.dumps({**meta, "format": 99}))
    _refused(profile_all_here("compare", runs["base"], newer), "written by a newer profile-all")

    missing = tmp_path / "missing"
    shutil.copytree(runs["base"], missing)
    (missing / "report.parquet").unlink()
    _refused(profile_all_here("compare", missing, runs["base"]), "report.parquet is missing")

    corrupt = tmp_path / "corrupt"
    shutil.copytree(runs["base"], corrupt)
    (corrupt / "report.parquet").write_bytes(b"PAR1 not really")
    before = sorted(path.name for path in corrupt.iterdir())
    _refused(profile_all_here("compare", runs["base"], corrupt), "report.parquet cannot be read")
    _refused(profile_all_here("show", corrupt), "report.parquet cannot be read")
    assert sorted(path.name for path in corrupt.iterdir()) == before


def test_two_model_benchmarks_compare_on_their_iterations(tmp_path):
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    runs = [pa.profile_model(model, [torch.randn(8, 64)], backends=counters, iters=40,
                             warmup=3, out=tmp_path / name)
            for name, counters in (("a", []), ("b", ["flop-counter"]))]
    table = runs[0].compare(runs[1])
    # their counters import differently (torch, or nothing): not the latency's concern
    assert runs[0].meta.preimported != runs[1].meta.preimported
    assert table.attrs["notes"] == []
    latency = table[table["kind"] == "model"].iloc[0]
    assert latency["metric"] == "latency median" and latency["backend"] == "bench"
    assert latency["calls_a"] == latency["calls_b"] == 40
    assert latency["ci_low"] <= latency["change"] <= latency["ci_high"]
    assert latency["verdict"].startswith("untested: one run a side")
    assert latency["basis"] == "1+1 run, blocks (drift between runs not measured)"


def test_runs_of_different_scripts_are_said_first_and_gated(runs, tmp_path):
    """The same regions, another script: compare says so before its table, and gates it
    as an A/B (baseline.py against candidate.py)."""
    other = tmp_path / "other_speed.py"
    shutil.copy(TARGETS / "speed.py", other)
    done = profile_all_here("run", other, "-b", "wallclock", "--repeat", "2", "-o",
                            tmp_path / "other", "--", "0.004")
    assert done.returncode == 0, done.stderr
    compared = profile_all_here("compare", runs["base"], tmp_path / "other")
    assert compared.returncode == 0, compared.stderr
    first = compared.stderr.splitlines()[0]
    assert first.startswith("profile-all: note: the runs profiled different targets: ")
    assert "speed.py against" in first and "other_speed.py" in first
    # an A/B of two scripts is gated too, after the note that says the targets differ
    gated = profile_all_here("compare", runs["base"], tmp_path / "other", "--fail-above", "10")
    assert gated.returncode in (0, 1, 3) and "Traceback" not in gated.stderr, gated.stderr
    assert gated.stderr.splitlines()[0] == first


@pytest.mark.parametrize("columns", ["80", "200"])
def test_the_terminal_table_shows_the_numbers(runs, columns):
    """The default table, piped: A, B, the change and the verdict of each region read back
    from the text are the comparison's own (they were once drawn zero wide)."""
    done = profile_all_here("compare", runs["base"], runs["slower"], env={"COLUMNS": columns})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line.rstrip()) <= int(columns) for line in lines)
    table = pa.load(runs["base"]).compare(pa.load(runs["slower"]))
    cells = {}
    for line in lines:
        parts = [part.strip() for part in line.split("│")]
        if len(parts) > 5:
            cells[parts[1]] = parts[2:6]
    for name in ("work", "steady"):
        row = table[(table["kind"] == "region") & (table["name"] == name)].iloc[0]
        a, b, change, verdict = cells[name]
        assert a == fmt.seconds(row["a"]) and b == fmt.seconds(row["b"])
        assert change.startswith(fmt.change(row["change"]))
        if not pd.isna(row["ci_low"]):  # the interval beside it, in whole percent
            assert f"({row['ci_low'] * 100:+.0f}.." in change
        # at 80 columns a text column is cut at its end: "no change beyond drift" is
        # "no change beyon…" there
        assert row["verdict"].startswith(verdict.removesuffix("…"))
    assert ("A: " + str(runs["base"])) in lines and ("B: " + str(runs["slower"])) in lines
    if columns == "80":
        assert "left out to fit 80 columns: " in done.stdout


def test_an_interval_too_wide_to_rule_out_a_change_is_inconclusive():
    """Two repeats a side once gave +172% with an interval of -95% to +14,828% and the
    verdict "no change": an interval that holds zero but reaches 25% either way is said
    to be inconclusive."""
    from profile_all import noise
    from profile_all.report.compare import _verdict

    def ratio(low, high):
        change = (low + high) / 2
        return noise.Ratio(change=change, centre_a=1.0, centre_b=1.0 + change, low=low,
                           high=high, runs_a=2, runs_b=2, blocked=False)

    assert _verdict(ratio(-0.95, 148.28)).startswith("inconclusive (the interval reaches 25%")
    assert _verdict(ratio(-0.30, 0.02)).startswith("inconclusive")
    assert _verdict(ratio(-0.05, 0.08)) == "no change"
    assert _verdict(ratio(0.10, 0.40)) == "slower"


def _trace_of(path, op_us: int, kernel_us: int) -> None:
    """Two steps of aten::mm (op_us each) launching a gemm (kernel_us each)."""
    events = []
    for step in range(2):
        at = step * 1000
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
             "tid": 1, "ts": at, "dur": 900},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
             "ts": at + 10, "dur": op_us},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": at + 20, "dur": 5, "args": {"correlation": step + 1}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": at + 30,
             "dur": kernel_us, "args": {"correlation": step + 1, "device": 0}}]
    path.write_text(json.dumps({"traceEvents": events}))


def test_two_ingested_traces_compare_on_operators_and_kernels(tmp_path):
    """TensorBoard's diff view: two traces (no timed region between them) compared on each
    operator's calls, host and device time and each kernel's, untested (totals)."""
    for label, op_us, kernel_us in (("a", 100, 80), ("b", 150, 120)):
        _trace_of(tmp_path / f"{label}.json", op_us, kernel_us)
        assert profile_all_here("ingest", tmp_path / f"{label}.json", "-o",
                                tmp_path / label).returncode == 0
    done = profile_all_here("compare", tmp_path / "a", tmp_path / "b")
    assert done.returncode == 0, done.stderr
    table = pa.load(tmp_path / "a").compare(pa.load(tmp_path / "b"))
    rows = table.set_index(["kind", "name", "metric"])
    assert rows.loc[("operator", "aten::mm", "calls"), ["a", "b"]].tolist() == [2, 2]
    assert rows.loc[("operator", "aten::mm", "cpu_time"), "change"] == pytest.approx(0.5)
    assert rows.loc[("operator", "aten::mm", "gpu_time"), ["a", "b"]].tolist() == \
        pytest.approx([160e-6, 240e-6])
    assert rows.loc[("kernel", "gemm", "gpu_time"), "change"] == pytest.approx(0.5)
    assert "aten::mm" in done.stdout and "240 µs" in done.stdout


def _linear_trace(path, addmm_us: int, relu: bool) -> None:
    """Two calls of aten::linear (100 µs) holding aten::t (10 µs) and aten::addmm
    (`addmm_us`, launching a 50 µs gemm), and where `relu` an aten::relu (5 µs)."""
    def x(cat, name, ts, dur, tid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 0 if tid == 7 else 1,
                "tid": tid, "ts": ts, "dur": dur, "args": args}
    events = []
    for call in range(2):
        at = call * 1000
        events += [x("cpu_op", "aten::linear", at, 100), x("cpu_op", "aten::t", at + 1, 10),
                   x("cpu_op", "aten::addmm", at + 12, addmm_us),
                   x("cuda_runtime", "cudaLaunchKernel", at + 14, 2, correlation=call + 1),
                   x("kernel", "gemm", at + 20, 50, tid=7, correlation=call + 1, device=0)]
        events += [x("cpu_op", "aten::relu", at + 94, 5)] if relu else []
    path.write_text(json.dumps({"traceEvents": events}))


def test_operator_trees_side_by_side_as_tensorboard_s_diff_view(tmp_path):
    """The trees of two traces joined node by node (figures from the events by hand), on
    a page `compare --html` writes, which opens in a real browser onto its tree."""
    for label, addmm_us, relu in (("a", 60, False), ("b", 80, True)):
        _linear_trace(tmp_path / f"{label}.json", addmm_us, relu)
        pa.ingest([tmp_path / f"{label}.json"], out=tmp_path / label)
    tree = pa.load(tmp_path / "a").operator_tree_diff(pa.load(tmp_path / "b"))
    assert tree[["path", "name", "depth"]].values.tolist() == [
        ["", "aten::linear", 0], ["aten::linear", "aten::addmm", 1],
        ["aten::linear", "aten::t", 1], ["aten::linear", "aten::relu", 1]]
    nodes = tree.set_index("name")
    assert nodes.loc["aten::linear", ["calls_a", "calls_b", "cpu_time_a", "gpu_time_b"]
                     ].tolist() == pytest.approx([2, 2, 200e-6, 100e-6])
    assert nodes.loc["aten::addmm", ["cpu_time_a", "cpu_time_b", "cpu_change"]].tolist() == \
        pytest.approx([120e-6, 160e-6, 1 / 3])
    assert pd.isna(nodes.loc["aten::relu", "calls_a"]) and nodes.loc["aten::relu",
                                                                     "calls_b"] == 2
    page = tmp_path / "diff.html"
    done = profile_all_here("compare", tmp_path / "a", tmp_path / "b", "--html", page)
    assert done.returncode == 0, done.stderr
    assert f"the comparison's page: {page}" in done.stderr and "aten::addmm" in done.stdout
    for folder in (".", str(tmp_path)):  # a folder is no page: one line, nothing written
        refused = profile_all_here("compare", tmp_path / "a", tmp_path / "b", "--html", folder)
        assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
            f"profile-all: error: cannot write {folder}: a folder, not a file name "
            "(--html FILE)"], refused.stderr
    title = _in_chromium(page.read_text(), """
var rows = document.querySelectorAll('.tree summary, .tree .leaf:not(.head)');
var first = document.querySelector('.tree summary').textContent;
document.title = rows.length + ' | ' + first;""", tmp_path)
    assert title == "4 | aten::linear22200 µs200 µs+0.0%100 µs100 µs+0.0%", title


def test_a_gate_that_cannot_decide_says_so_and_exits_3(runs, tmp_path):
    """B's `work` ten times slower in one of its three timing passes only: +115% as
    measured (the geometric mean of the runs), but the interval between runs holds no
    change: the gate neither passes it (a 10x slowdown once passed with exit 0) nor calls
    it slower; it exits 3, or 0 when told to pass what it cannot decide."""
    import pyarrow
    import pyarrow.parquet as pq

    shaken = tmp_path / "shaken"
    shutil.copytree(runs["base"], shaken)
    samples = pq.read_table(shaken / "samples.parquet").to_pandas()
    second = sorted(p.number for p in pa.load(shaken).meta.passes if p.timing)[1]
    work = (samples["pass"] == second) & (samples["name"] == "work")
    samples.loc[work, "value"] *= 10
    pq.write_table(pyarrow.Table.from_pandas(samples, preserve_index=False),
                   shaken / "samples.parquet")
    table = pa.compare(runs["base"], shaken, fail_above=10)
    row = table[(table["kind"] == "region") & (table["name"] == "work")].iloc[0]
    assert row["verdict"].startswith("inconclusive") and row["change"] > 1
    assert table.attrs["slower"].empty and table.attrs["undecided"]["name"].tolist() == ["work"]
    done = profile_all_here("compare", runs["base"], shaken, "--fail-above", "10")
    assert done.returncode == 3, done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("profile-all: undecided: slower by more than 10% as measured, but "
                           "within the run-to-run noise: work (+") and "more repeats" in said
    passed = profile_all_here("compare", runs["base"], shaken, "--fail-above", "10",
                              "--pass-undecided")
    assert passed.returncode == 0 and "(passed: --pass-undecided)" in passed.stderr


def test_an_unbounded_interval_reads_as_unbounded():
    """Two repeats a side once gave an interval up to +8.85e79%, printed in 80 digits."""
    from profile_all.render.compare_table import compare_table

    table = pd.DataFrame([{"kind": "region", "name": "work", "parent": "", "backend": "w",
                           "metric": "wall_time median", "a": 1e-3, "b": 1.1e-3,
                           "change": 0.1, "ci_low": -0.99, "ci_high": 8.85e77,
                           "verdict": "inconclusive", "basis": "2+2 runs"}])
    shown = compare_table(table).iloc[0]
    assert shown["change (95% interval)"] == "+10.0% (-99..unbounded)"
    assert compare_table(table.assign(change=3e40)).iloc[0]["change (95% interval)"] == \
        "> +10000% (-99..unbounded)"
    bounded = compare_table(table.assign(ci_high=0.274)).iloc[0]
    assert bounded["change (95% interval)"] == "+10.0% (-99..+27%)"
