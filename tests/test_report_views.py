"""Every view and renderer of a Report built from a dozen hand-written rows: fast (no
target, no backend, no torch), and a check that the report needs nothing but rows and meta.
The counter and the timer here are named like no backend profile-all has: the report
learns what they are from the facts their backends state, never from their names."""

import io

import pandas as pd
from rich.console import Console

from profile_all.pass_record import PassRecord
from profile_all.render import html, markdown, sections, terminal
from profile_all.report import derived
from profile_all.report.report import Report
from profile_all.rows import Facts
from profile_all.run_record import ArtifactRecord, RunRecord

FACTS = {"my.counter": Facts(counts_flops=True, exact=True).to_dict(),
         "my.rough": Facts(counts_flops=True, forward_only=True).to_dict(),
         "my.timer": Facts(region_timer="wall_time").to_dict()}
ROWS = [
    ["my.timer", 1, 0, "run", "run", "", "wall_time", "total", 2.0, "s"],
    ["my.timer", 1, 0, "region", "step", "", "wall_time", "median", 0.010, "s"],
    ["my.timer", 1, 0, "region", "step", "", "wall_time", "total", 1.0, "s"],
    ["my.timer", 1, 0, "region", "step", "", "calls", "total", 100, "count"],
    ["my.timer", 1, 0, "region", "fwd", "step", "wall_time", "total", 0.4, "s"],
    ["my.counter", 2, 0, "region", "step", "", "flops", "mean", 2e9, "FLOP"],
    ["my.counter", 2, 0, "module", "Net", "", "flops", "total", 4e9, "FLOP"],
    ["my.counter", 2, 0, "module", "Net", "", "calls", "total", 2, "count"],
    ["my.counter", 2, 0, "module", "Net", "", "params", "total", 1000, "count"],
    ["my.rough", 3, 0, "module", "Net", "", "flops", "total", 2.2e9, "FLOP"],
    ["my.rough", 3, 0, "module", "Net", "", "calls", "total", 1, "count"],
    ["my.rough", 3, 0, "module", "Net", "", "params", "total", 1000, "count"],
    ["tracer", 3, 0, "function", "train <x> | y", "", "self_time", "total", 0.5, "s"],
    ["tracer", 3, 0, "operator", "aten::mm", "", "self_time", "total", 0.3, "s"],
]
META = RunRecord(
    status="complete", backend_facts=FACTS, target={"command": "python train.py"},
    skipped_backends={"x": "not here"},
    passes=[PassRecord(number=1, backends=["my.timer"], status="ok", target_wall_time=2.0,
                       steps=100, overhead_verdict="reference")],
    artifacts=[ArtifactRecord(backend="tracer", path="artifacts/t.json", viewer="Perfetto",
                              open_command="open {run_dir}/artifacts/t.json")],
    environment={"python": "3.11", "packages": {"torch": "2.13"}})


def _report():
    rows = ROWS + derived.region_achieved_flops_rows(
        pd.DataFrame(ROWS, columns=Report.from_rows([], RunRecord()).frame.columns),
        {name: Facts.from_dict(said) for name, said in FACTS.items()})
    return Report.from_rows(rows, META)


def test_every_view_and_renderer_from_hand_written_rows():
    report = _report()
    # achieved FLOP/s of a region: the exact counter's FLOPs per call over the timer's median
    rate = report.frame[report.frame["metric"] == "achieved_flops"]
    assert rate["value"].tolist() == [2e9 / 0.010]
    # the counters, per call: the exact one is the reference; the other +10% per call
    counters = report.counters().set_index("counter")
    assert counters.loc["my.counter", "flops"] == 2e9
    assert counters.loc["my.rough", "flops"] == 2.2e9
    assert abs(counters.loc["my.rough", "vs_reference"] - 0.1) < 1e-12
    assert counters.loc["my.counter", "cause"].startswith("reference")
    summary = report.summary()
    assert "my.timer.wall_time.total" in summary.columns  # a dotted name survives
    assert summary["name"].tolist() == ["run", "step", "fwd"]
    assert report.functions()["name"].tolist() == ["train <x> | y"]
    shown = {section.anchor for section, _table, _left in sections.shown(report, 25)}
    assert {"passes", "counters", "modules", "summary", "functions", "operators", "native",
            "skipped", "environment"} <= shown
    page = html.render(report)
    assert "&lt;x&gt;" in page and "<x>" not in page
    for section in shown:
        assert f'<section id="{section}">' in page
    text = markdown.render(report)
    assert "## FLOP counters side by side" in text and "train &lt;x&gt; \\| y" in text
    console = Console(file=io.StringIO(), width=80)
    terminal.render(report, console)
    printed = console.file.getvalue()
    assert "FLOP counters side by side" in printed and "backend x skipped" in printed


def test_an_empty_report_renders_without_a_section():
    anchors = [section.anchor for section in sections.SECTIONS]
    assert len(anchors) == len(set(anchors))
    report = Report.from_rows([], RunRecord())
    assert sections.shown(report, 10) == []
    assert "<section" not in html.body(report)
    assert "## " not in markdown.render(report)


def test_narrow_tables_keep_names_apart_and_drop_rows_left_blank():
    """At 80 columns two kernel names that differ in their middle stay different, and rows
    whose figures were all in left-out columns are counted, not shown blank."""
    from profile_all.render.fitted_columns import fitted

    kernel = ("void at::native::vectorized_elementwise_kernel<4, at::native::{}Functor<float>, "
              "std::array<char*, 3> >(int, at::native::{}Functor<float>, std::array<char*, 3>)")
    headers = ["name", "device time", *(f"profiler {n}" for n in range(4))]
    rows = [[kernel.format("Add", "Add"), "1.2 ms", "", "", "", ""],
            [kernel.format("Mul", "Mul"), "0.8 ms", "", "", "", ""],
            ["aten::mm", "", *["34,406,400 (measured)"] * 4]]
    shown = fitted(headers, rows, 50)
    names = [row[0] for row in shown.rows]
    assert len(set(names)) == 2 and "aten::mm" not in names
    assert "Add" in names[0] and "Mul" in names[1]
    assert max(map(len, names)) <= 50
    assert shown.dropped[-1] == "1 row with figures only there"
    # the summary's shape: a scope column before the names is no figure either (the demo
    # showed `run trace` and `step ProfilerStep` blank)
    headers = ["scope", "name", "calls", "total wallclock",
               *(f"torch-profiler {n}" for n in range(6))]
    rows = [["run", "run", "", "106 ms", *[""] * 6],
            ["run", "trace", "", "", *["5 ms"] * 6],
            ["step", "step", "100", "97 ms", *[""] * 6]]
    shown = fitted(headers, rows, 50)
    assert [row[1] for row in shown.rows] == ["run", "step"]
    assert shown.dropped[-1] == "1 row with figures only there"
    # an empty column goes first, never the names; with no width nothing else is cut
    shown = fitted(["name", "empty", "time"], [["a" * 40, " ", "1 s"]], None)
    assert shown.headers == ["name", "time"] and shown.rows == [["a" * 40, "1 s"]]


def test_function_names_are_shown_as_people_name_their_files():
    """The functions table cuts names to fit: a whole site-packages path lost its file name
    (`/tmp/…/profile-…inear.py:130(forward)`); the data keeps the whole path."""
    from profile_all.units import code_path

    venv = "/tmp/stranger/profile-all/.venv/lib/python3.11/site-packages/"
    assert code_path(venv + "torch/nn/modules/linear.py:130(forward)") == \
        "torch/nn/modules/linear.py:130(forward)"
    assert code_path("/usr/lib/python3.11/inspect.py:867(cleandoc)") == "inspect.py:867(cleandoc)"
    assert code_path("/home/me/proj/train.py:3(main)", "/home/me/proj") == "train.py:3(main)"
    assert code_path("/home/me/other/train.py:3(main)", "/home/me/proj") == \
        "/home/me/other/train.py:3(main)"
    assert code_path("{built-in method time.sleep}", "/home/me") == "{built-in method time.sleep}"


def test_a_scope_s_rows_are_the_frame_s_rows_of_it_and_cannot_spoil_them():
    report = Report.from_rows(ROWS, META)
    frame = report.frame
    for scopes in (("module",), ("function", "region"), ("region", "function"), ("nothing",)):
        expected = frame[frame["scope"].isin(scopes)]
        pd.testing.assert_frame_equal(report.scoped(*scopes), expected)
    mine = report.scoped("module")
    mine.loc[:, "value"] = -1.0  # a caller's change stays its own
    assert (report.scoped("module")["value"] > 0).all()
    report.frame = pd.concat([frame, frame.iloc[:1]], ignore_index=True)  # another frame
    assert len(report.scoped("run")) == 2
    report.frame = frame.iloc[::-1]  # an index out of order: still the frame's order
    expected = report.frame[report.frame["scope"].isin(["module", "region"])]
    pd.testing.assert_frame_equal(report.scoped("module", "region"), expected)


def test_the_summary_reads_as_a_tree_the_longest_first():
    """Each region after its parent, siblings the longest first: a Lightning run's 100
    regions began with its callbacks' hooks, in the alphabet's order."""
    times = {"a": 1.0, "b": 3.0, "b/x": 0.5, "b/y": 2.0, "a/z": 0.1, "b/y/q": 1.0}
    rows = [["w", 1, 0, "run", "run", "", "wall_time", "total", 5.0, "s"],
            ["w", 1, 0, "step", "step", "", "wall_time", "total", 4.5, "s"]]
    rows += [["w", 1, 0, "region", path.rpartition("/")[2], path.rpartition("/")[0],
              "wall_time", "total", seconds, "s"] for path, seconds in times.items()]
    summary = Report.from_rows(rows, RunRecord(status="complete")).summary()
    paths = [f"{parent}/{name}" if parent else name
             for name, parent in zip(summary["name"], summary["parent"], strict=True)]
    assert paths == ["run", "step", "b", "b/y", "b/y/q", "b/x", "a", "a/z"]
    # cut to 5 rows (--top 5): the run, its steps and the longest regions, in that order
    from profile_all.render.tables import cut, summary_table

    longer_a = Report.from_rows([r if r[4] != "a" or r[5] else [*r[:8], 1.5, "s"]
                                 for r in rows], RunRecord(status="complete"))
    shown, left_out = cut(summary_table(longer_a), 5)
    assert shown["name"].tolist() == ["run", "step", "b", "b/y", "a"] and left_out == 3


def test_a_timeout_with_a_window_in_its_process_is_said_as_it_was():
    """A stranger's hang: pass 1 timed out (124) with pass 2's window open in its process,
    stopped by the same SIGTERM (143) before a step of the window ended. The finding said
    `exit code 124 in every pass`, the layout `steps 6-5`."""
    from profile_all.runner.judging.layout_doubts import windows

    passes = [PassRecord(number=1, backends=["wallclock"], status="timeout", exit_code=124,
                         error="timed out after 4 s, in stuck (hang.py:5)", steps=5,
                         target_wall_time=4.0),
              PassRecord(number=2, backends=["cprofile"], status="terminated", exit_code=143,
                         error="terminated by SIGTERM", steps=0, host=1, window_from=6,
                         target_wall_time=1.0)]
    record = RunRecord(status="timeout", exit_code=124, passes=passes)
    report = Report.from_rows(
        [["wallclock", 1, 0, "step", "step", "", "wall_time", "total", 4.0, "s"]], record)
    [first] = report.findings().loc[lambda f: f["rule"] == "failure", "finding"]
    assert first.startswith("the script stopped with exit code 124 in pass 1: timed out "
                            "after 4 s, in stuck (hang.py:5)"), first
    [said] = windows(passes)
    assert "2 (cprofile) from step 6, stopped before a step of it ended" in said, said
