"""A script that runs a profiler itself (thop, flops-profiler, FlopCounterMode,
torch.profiler, cProfile, memory_profiler), under profile-all's backends: each of
profile-all's counters stays exact per call (a hand count: 36 x 64 x 9 = 20,736 MACs,
41,472 FLOPs), the script's own figure is unchanged in every pass, its steps are its own
(a counter's forward on its copy is no step), and the report names the collision with
the file and line of the script's call."""

from __future__ import annotations

import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here

TARGET = TARGETS / "self_profiling.py"
FLOPS = 2 * 36 * 64 * 9
COUNTERS = ["thop", "flops-profiler", "flop-counter"]
#: what the script prints of its own profile, unchanged by profile-all
OWN = {"thop": f"OWN {FLOPS // 2} MACs", "flops-profiler": f"OWN {FLOPS} FLOPs",
       "flop-counter": f"OWN {FLOPS} FLOPs", "torch-profiler": "OWN 1 conv2d calls",
       "cprofile": "OWN True calls seen", "memory_profiler": "OWN a memory table"}
#: the name the report gives each tool, and the pass that a collision makes partial
NAMED = {"thop": ("thop", None), "flops-profiler": ("flops-profiler", None),
         "flop-counter": ("FlopCounterMode", None),
         "torch-profiler": ("torch.profiler", "torch-profiler"),
         "cprofile": ("cProfile", "cprofile"), "memory_profiler": ("memory_profiler", None)}


COLLIDES = {"torch-profiler": "torch-profiler", "cprofile": "cprofile",
            "memory_profiler": "memory"}


def _line_of(tool: str) -> int:
    marker = f"# {tool.upper()} CALL"
    [number] = [n for n, line in enumerate(TARGET.read_text().splitlines(), 1) if marker in line]
    return number


@pytest.mark.parametrize("tool", list(OWN))
def test_a_script_that_profiles_itself(tmp_path, tool):
    out = tmp_path / "run"
    # the counters for a counting tool, else the backend it collides with (and the timing
    # pass, which every run has)
    backends = COUNTERS if tool in COUNTERS else [COLLIDES[tool]]
    done = profile_all_here("run", TARGET, "-o", out, "--show-output", "all",
                            *[arg for name in backends for arg in ("-b", name)], "--", tool)
    assert done.returncode == 0, done.stderr[-3000:]
    report = pa.load(out)
    passes = report.meta.passes
    assert done.stdout.count(OWN[tool]) == len(passes), done.stdout
    assert [p.steps for p in passes] == [4] * len(passes)
    name, partial = NAMED[tool]
    said = [d for d in report.meta.doubts if d.startswith(f"the target runs {name} itself")]
    assert len(said) == 1, report.meta.doubts
    assert f"{TARGET}:{_line_of(tool)} (" in said[0], said[0]
    assert said[0] in (out / "summary.md").read_text()
    for summary in passes:
        assert summary.status == ("partial" if partial in summary.backends else "ok"), summary
    if tool in COUNTERS:
        counters = report.counters().set_index("counter")
        for counter in COUNTERS:
            assert counters.loc[counter, "forward_flops"] == FLOPS, counter


def test_profile_alls_own_calls_of_the_same_profilers_are_not_the_targets(tmp_path):
    out = tmp_path / "run"
    done = profile_all_here("run", TARGETS / "step_kinds.py", "-o", out,
                            *[arg for name in [*COUNTERS, "torch-profiler", "cprofile"]
                         for arg in ("-b", name)], "--", "optimizer", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    report = pa.load(out)
    assert not [d for d in report.meta.doubts if "itself" in d], report.meta.doubts
    assert all(not p.target_profilers for p in report.meta.passes)
