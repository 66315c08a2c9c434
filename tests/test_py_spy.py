"""The py-spy backend on real runs: what it samples agrees with the wall clock where the
tracer does not (and the report names the tracer's distortion), its native frames reach
torch's C++, its native files open (speedscope JSON, an SVG flame graph, read back by
ingest), and where it cannot run it is skipped with the reason."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

import profile_all as pa
from conftest import EXAMPLES, TARGETS, profile_all, profile_all_here


@pytest.fixture(scope="module")
def two_costs(tmp_path_factory):
    """train-free: the two parts of known cost, under wallclock, py-spy and cProfile, each
    pass whole."""
    run = tmp_path_factory.mktemp("two") / "run"
    done = profile_all_here("run", TARGETS / "two_costs.py", "-b", "wallclock", "-b", "py-spy",
                            "-b", "cprofile", "--pass-steps", "all", "--py-spy-rate", "200",
                            "-o", run, "--", "100", env={"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    return pa.load(run)


def _sampled_share(report, function):
    table = report.sampled_functions()
    row = table[table["name"].str.endswith(f"({function})") & (table["process"] == "")]
    assert len(row) == 1, table.head(20)
    return row.iloc[0]


def test_sampled_shares_agree_with_the_wall_clock(two_costs):
    """The independent measure: the wall clock's region totals of the two parts, from the
    clean pass. py-spy's cumulative share of each (its samples over the root's) is within
    its sampling error (plus 5 points for the parts' own spread between passes)."""
    summary = two_costs.summary()
    walls = summary.set_index("name")["wallclock.wall_time.total"]
    truth = walls["calls"] / (walls["calls"] + walls["loop"])
    calls, loop = _sampled_share(two_costs, "calls"), _sampled_share(two_costs, "loop")
    sampled = calls["cumulative_time"] / (calls["cumulative_time"] + loop["cumulative_time"])
    assert calls["samples"] + loop["samples"] >= 60
    error = 2 * (sampled * (1 - sampled) / (calls["samples"] + loop["samples"])) ** 0.5
    assert abs(sampled - truth) < error + 0.05, (sampled, truth, error)


def test_the_tracer_s_distortion_is_named(two_costs):
    """cProfile slows each of `calls`' 40,000 small calls a step: its share of the run
    rises well above the wall clock's, py-spy's stays with it; the side-by-side view and a
    finding say so, with both passes' overheads."""
    side = two_costs.traced_vs_sampled().set_index("name")
    calls = side.loc[next(name for name in side.index if name.endswith("(calls)"))]
    assert calls["traced_share"] - calls["sampled_share"] > calls["sampled_share_error"]
    found = two_costs.findings()
    distortion = found[found["rule"] == "distortion"]
    assert len(distortion) == 1
    said = distortion.iloc[0]
    assert said["finding"].startswith("cprofile makes ")
    assert "heavier than py-spy sees" in said["finding"]
    assert "(calls)" in said["finding"]
    assert "overheads: cprofile" in said["evidence"] and "py-spy" in said["evidence"]


def test_a_window_of_steps_is_not_set_against_a_whole_script(two_costs):
    """A tracer's window of steps against a sampler's whole script (imports and all): their
    shares are of unlike extents, and no distortion is said (a Lightning run's 97.9%
    traced against 1.6% sampled was). The same run, its cProfile pass read as a window."""
    import copy

    windowed = pa.load(two_costs.run_dir)
    record = copy.deepcopy(windowed.meta)
    [traced] = [one for one in record.passes if one.backends == ["cprofile"]]
    traced.host = 1
    windowed.meta = record
    assert windowed.findings().query("rule == 'distortion'").empty


def test_a_sampled_function_is_named_as_cprofile_names_it(two_costs):
    traced = set(two_costs.functions()["name"])
    sampled = set(two_costs.sampled_functions()["name"])
    shared = {name for name in traced & sampled if "two_costs.py" in name}
    assert {name.rsplit(":", 1)[1] for name in shared} >= {"12(tiny)", "16(calls)",
                                                          "23(loop)", "1(<module>)"}


def test_native_files_open_and_read_back(two_costs, tmp_path):
    artifacts = two_costs.run_dir / "artifacts"
    document = json.loads((artifacts / "py_spy.speedscope.json").read_text())
    assert document["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    svg = ElementTree.parse(artifacts / "py_spy.svg").getroot()
    titles = [title.text for title in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert any(text.startswith("thread MainThread") for text in titles)
    assert any("(loop)" in text for text in titles)
    done = profile_all_here("ingest", artifacts / "py_spy.speedscope.json", "-o", tmp_path / "in")
    assert done.returncode == 0, done.stderr
    again = pa.load(tmp_path / "in")
    assert set(again.frame["backend"]) == {"py-spy"}
    kept, = again.meta.artifacts  # a copy in the folder, for speedscope
    assert kept.path == "artifacts/py_spy.pass1.rank0.speedscope.json"
    assert (tmp_path / "in" / kept.path).read_bytes() == (
        artifacts / "py_spy.speedscope.json").read_bytes()
    assert set(again.sampled_functions()["name"]) >= {
        name for name in two_costs.sampled_functions()["name"] if "two_costs" in name}


def test_sampled_lines_sit_beside_the_functions(two_costs):
    lines = two_costs.lines()
    loop_lines = lines[lines["function"] == "two_costs.py:23(loop)"]
    assert len(loop_lines) >= 1 and loop_lines["cumulative_time"].max() > 0
    assert loop_lines["line"].str.contains("total += index", regex=False).any()


def test_native_frames_show_torch_s_cpp_under_backward(tmp_path):
    run = tmp_path / "run"
    done = profile_all_here("run", EXAMPLES / "train_cnn.py", "-b", "py-spy", "--native",
                            "--py-spy-rate", "200", "--pass-steps", "all", "-o", run, "--",
                            "--steps", "20", env={"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    calls = pa.load(run).frame
    calls = calls[calls["scope"] == "call"]
    under_backward = calls[calls["parent"].str.contains(r"_tensor\.py:\d+\(backward\)")]
    assert under_backward["name"].str.contains("libtorch").any(), under_backward["name"]


def test_py_spy_that_cannot_run_is_skipped_with_the_reason(tmp_path):
    done = profile_all("run", TARGETS / "speed.py", "-b", "wallclock", "-b", "py-spy", "-o",
                       tmp_path / "run", env={"PROFILE_ALL_PY_SPY": "/nonexistent/py-spy"})
    assert done.returncode == 0, done.stderr
    meta = pa.load(tmp_path / "run").meta
    assert meta.skipped_backends == {
        "py-spy": "PROFILE_ALL_PY_SPY names '/nonexistent/py-spy', which is not an executable"}
    listed = profile_all("backends", env={"PROFILE_ALL_PY_SPY": "/nonexistent/py-spy"})
    assert "py-spy" in listed.stdout and "not an executable" in listed.stdout


def test_ptrace_scope_says_why_py_spy_cannot_read(monkeypatch, tmp_path):
    """Yama's ptrace_scope as the kernel gives it: 3 forbids every reader; 1 lets a process
    allow py-spy on itself (the backend) but not attach to a stranger without the
    capability; the reason names the fix."""
    from profile_all.backends import py_spy_recorder

    scope = tmp_path / "ptrace_scope"
    monkeypatch.setattr(py_spy_recorder, "YAMA", scope)
    scope.write_text("3\n")
    assert "ptrace_scope is 3" in py_spy_recorder.why_not(of_own_child=True)
    scope.write_text("1\n")
    assert py_spy_recorder.why_not(of_own_child=True) == ""
    monkeypatch.setattr(py_spy_recorder, "_capable", lambda: False)
    said = py_spy_recorder.why_not(of_own_child=False)
    assert "ptrace_scope is 1" in said and "--cap-add SYS_PTRACE" in said


def test_the_recorder_s_wait_ends_with_the_process_or_at_its_patience():
    from profile_all.backends.py_spy_recorder import _wait

    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            _wait(process, 0.2)
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        _wait(process, 60)
        assert process.returncode == -signal.SIGTERM
        _wait(process, 1)  # reaped already: returns at once
    finally:
        process.kill()
        process.wait()


def test_a_pass_samples_the_target_s_child_and_py_spy_is_not_below_the_target(tmp_path):
    """py-spy follows the target's subprocesses; started by the target's own process it
    was one of them and waited, one start in two, 100 ms for its own failed attach: it is
    started apart now (backends/apart_process.py)."""
    run = tmp_path / "run"
    done = profile_all_here("run", TARGETS / "child_work.py", "-b", "py-spy", "--show-output",
                            "all", "-o", run)
    assert done.returncode == 0, done.stderr
    below = [line for line in done.stdout.splitlines() if line.startswith("below:")]
    assert len(below) == 2 and all("py-spy" not in line for line in below), below
    assert all("python" in line for line in below), below  # (the child was seen)
    sampled = pa.load(run).sampled_functions()
    child = sampled[sampled["process"] != ""]
    assert not child.empty and child["process"].str.startswith("process ").all()
    assert child["name"].str.contains("<string>").any()  # the child's own code


def test_lines_asked_for_by_name_are_shown_whatever_the_top(tmp_path):
    """`--py-spy-lines two_costs:tiny`: its lines were in summary.md and the terminal only
    with --top 100 (behind the hottest functions' lines)."""
    run = tmp_path / "run"
    done = profile_all_here("run", TARGETS / "two_costs.py", "-b", "py-spy", "--pass-steps", "all",
                            "--py-spy-rate", "200", "--py-spy-lines", "two_costs:tiny",
                            "-o", run, "--", "100", env={"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    # 100 turns: about 20 samples of `tiny` (30 turns gave 6 here quiet, and none once in CI)
    lines = pa.load(run).lines()
    named = lines[lines["named"] == 1]
    assert not named.empty and named["function"].str.endswith("(tiny)").all()
    summary = (run / "summary.md").read_text()
    for line in named["line"]:
        assert line in summary
