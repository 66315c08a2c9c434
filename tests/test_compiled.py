"""A torch.compile'd training loop under every pass: profile-all does not change what torch
compiles (the same graphs and recompiles as a bare run, no global-hook warning), and the
report shows compile time, each recompile with its guard and each graph break with its
line, and leaves the steps that compiled out of per-step statistics."""

from __future__ import annotations

import re
import subprocess
import sys

import pandas as pd
import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here, value_of

TARGET = TARGETS / "compiled_train.py"
ARGS = ["--backend", "aot_eager", "--report"]
#: every backend that runs in a pass of its own here (nsys and cuda-events cannot)
BACKENDS = ["wallclock", "cprofile", "torch-profiler", "thop", "flops-profiler", "memory",
            "flop-counter"]
HOOK_WARNING = "when there are global hooks on modules"


def _bare_counts() -> tuple[int, int]:
    done = subprocess.run([sys.executable, str(TARGET), *ARGS], capture_output=True,
                          text=True, timeout=240, check=True)
    graphs, recompiles = re.search(r"GRAPHS (\d+) RECOMPILES (\d+)", done.stdout).groups()
    return int(graphs), int(recompiles)


@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("compiled") / "run"
    done = profile_all_here("run", TARGET, "-o", out, "--pass-steps", "all", "--show-output", "all",
                            *[arg for name in BACKENDS for arg in ("-b", name)], "--", *ARGS)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done, pa.load(out)


def test_every_pass_compiles_what_a_bare_run_compiles(compiled_run):
    out, done, report = compiled_run
    graphs, recompiles = _bare_counts()
    assert (graphs, recompiles) == (4, 2)  # two frames (the break), each twice (the size)
    frame = report.frame
    counted = frame[(frame["scope"] == "compile") & (frame["name"] == "run")]
    by_pass = {backends[0]: number for number, backends in
               ((p.number, p.backends) for p in report.meta.passes)}
    for name, number in by_pass.items():
        logs = (out / "artifacts" / f"pass{number}.stderr.log").read_text()
        assert HOOK_WARNING not in logs, name
        own = counted[counted["pass"] == number].set_index("metric")["value"]
        if name == "flop-counter":  # torch compiles nothing under a dispatch mode: said
            assert own.empty
            notes = [f["error"] for p in report.meta.passes if p.number == number
                     for f in p.backend_failures]
            assert any("compiles nothing under FlopCounterMode" in note for note in notes)
            continue
        assert (own["graphs"], own["recompiles"]) == (graphs, recompiles), name
    # the script's own count, printed by it in each pass, agrees too
    assert done.stdout.count(f"GRAPHS {graphs} RECOMPILES {recompiles}") == len(BACKENDS) - 1


def test_recompiles_and_graph_breaks_are_named_with_their_lines(compiled_run):
    _out, _done, report = compiled_run
    events = report.compilation()
    source = TARGET.read_text().splitlines()
    breaks = events[events["event"] == "graph break"]
    assert len(breaks) == 1
    where = breaks["where"].iloc[0]
    assert where.startswith(f"{TARGET}:")
    line = int(where.split(":")[1].split("(")[0])
    assert "if hidden.sum() > 0" in source[line - 1]
    recompiled = events[events["event"] == "recompile"]
    assert len(recompiled) == 2
    assert recompiled["reason"].str.contains("size mismatch at index 0. expected 8, "
                                             "actual 12").all()
    assert (recompiled["seconds"] > 0).all()
    findings = report.findings()
    said = " | ".join(findings.loc[findings["rule"] == "compile", "finding"])
    assert "torch.compile compiled for" in said and "recompiled" in said
    assert "graph break at" in said and "compiled_train.py:" in said
    tries = " | ".join(findings.loc[findings["rule"] == "compile", "try"])
    assert "mark_dynamic" in tries and "fullgraph=True" in tries


def test_steps_that_compiled_are_counted_and_left_out_of_statistics(compiled_run):
    _out, _done, report = compiled_run
    timing = next(p for p in report.meta.passes if p.timing)
    assert timing.steps == 8
    # step 1 compiles both frames, step 5 (the new batch size) recompiles them
    assert timing.compile_steps == [1, 5]
    frame = report.frame
    steps = frame[(frame["backend"] == "wallclock") & (frame["scope"] == "step")]
    assert value_of(steps, metric="calls") == 8
    assert value_of(steps, metric="excluded_calls") == 2
    samples = report.samples
    kept = samples[(samples["backend"] == "wallclock") & (samples["scope"] == "step")]
    assert len(kept) == 6
    assert value_of(steps, metric="wall_time", stat="median") == pytest.approx(
        kept["value"].median())
    assert "steps 1, 5, left out of per-step statistics" in " ".join(
        report.findings()["finding"])
    # the trace's steps too: ProfilerStep#0 (the setup) and #4 (the recompile)
    traced = frame[(frame["backend"] == "torch-profiler") & (frame["scope"] == "step")]
    assert value_of(traced, metric="calls") == 8
    assert value_of(traced, metric="excluded_calls") == 2


def test_compile_machinery_is_compile_time_not_operators(compiled_run):
    _out, _done, report = compiled_run
    operators = report.operators()
    assert not operators.empty
    assert not operators["name"].str.contains("dynamo_timed|compile_id=").any()
    regions = report.summary()
    assert not regions["name"].str.contains("dynamo_timed|compile_id=").any()
    frame = report.frame
    in_trace = frame[(frame["backend"] == "torch-profiler")
                     & frame["name"].str.endswith(" (dynamo_timed)")]
    assert not in_trace.empty  # still in the data, as torch.profiler recorded them
    assert isinstance(report.compilation(), pd.DataFrame)


def test_a_compiled_model_is_timed_counted_and_its_compile_recorded(tmp_path):
    """`profile-all model` of a factory that returns torch.compile(model): its passes import
    torch alone (no pass imports Dynamo before the model's own torch.compile does), and
    the compile is still watched from that import: recorded in the timing pass, the FLOP
    counters' note said, every counter's FLOPs those of the eager model, by hand."""
    out = tmp_path / "run"
    done = profile_all_here("model", f"{TARGETS / 'compiled_model.py'}:compiled_mlp",
                            "--input-shape", "8,64", "--iters", "30", "--warmup", "3",
                            "-b", "flop-counter", "-b", "thop", "-o", out)
    assert done.returncode == 0, done.stderr[-3000:]
    report = pa.load(out)
    assert report.meta.preimported == ["torch"]
    compiled = report.compilation()
    assert list(compiled["pass"]) == [1] and compiled["seconds"].iloc[0] > 0
    assert report.meta.passes[0].compilation["graphs"] == 1
    flop_pass = next(p for p in report.meta.passes if p.backends == ["flop-counter"])
    assert any("torch.compile compiles nothing under FlopCounterMode" in failure["error"]
               for failure in flop_pass.backend_failures)
    by_hand = 2 * 8 * (64 * 128 + 128 * 10)  # two matmuls, multiply and add
    counters = report.counters().set_index("counter")["flops"]
    assert counters["flop-counter"] == counters["thop"] == by_hand
    assert HOOK_WARNING not in done.stderr


COUNT_THEN_COMPILE = """
import sys, torch
from torch import nn
from profile_all.backends.flop_counter import _tracked_counter
from profile_all.backends.roots import RootModules
roots = RootModules(lambda *call: None)
roots.start()
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
x = torch.randn(8, 64)
counter = _tracked_counter(roots, {})
with counter:
    model(x)
print("EAGER", counter.get_total_flops(), "torch._dynamo" in sys.modules)
counter = _tracked_counter(roots, {})
with counter:  # Dynamo imported while the mode counts, by the model's own compile
    torch.compile(model, backend="aot_eager")(x)
print("COMPILED", counter.get_total_flops(), "torch._dynamo" in sys.modules)
"""


def test_flop_counting_imports_no_dynamo_until_the_target_does():
    """torch wraps FlopCounterMode's dispatch so that Dynamo never traces it, importing
    Dynamo at the first operator counted; profile-all's counter imports it no earlier than
    the target, and counts the same once the target's torch.compile imported it."""
    done = subprocess.run([sys.executable, "-c", COUNT_THEN_COMPILE], capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    by_hand = 2 * 8 * (64 * 128 + 128 * 10)
    assert f"EAGER {by_hand} False" in done.stdout
    assert f"COMPILED {by_hand} True" in done.stdout


def test_a_recompile_gets_advice_for_the_guard_that_failed():
    """An evaluation under no_grad, then training: 'GLOBAL_STATE changed: grad_mode' (torch
    2.13's reason, from tests' recompiling script run by hand) got shape advice
    (mark_dynamic, dynamic=True)."""
    from profile_all.report.findings.compiling import _try_for

    grad = _try_for("0/0: GLOBAL_STATE changed: grad_mode")
    assert grad.startswith("the grad mode changed") and "mark_dynamic" not in grad
    assert "mark_dynamic" in _try_for("0/1: tensor 'L['x']' size mismatch at index 0. "
                                      "expected 8, actual 12")
    assert _try_for("0/2: something new") == ("TORCH_LOGS=recompiles shows each guard that "
                                             "failed and why")
