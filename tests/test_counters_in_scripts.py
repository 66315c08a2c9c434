"""The FLOP counters on a script: flop-counter over the whole run, per step and per module;
thop and flops-profiler once per root module, on its first call, on a copy."""

from __future__ import annotations

import subprocess
import sys

import profile_all as pa
from conftest import EXAMPLES, profile_all, value_of

STEPS, BATCH = 12, 16
MLP = [(784, 256), (256, 128), (128, 10)]  # scripts/examples/train_mlp.py
FORWARD = 2 * BATCH * sum(i * o for i, o in MLP)
# backward: weight gradients of all three layers, input gradients of the last two
BACKWARD = 2 * BATCH * sum(i * o for i, o in MLP) + 2 * BATCH * sum(i * o for i, o in MLP[1:])


def test_counters_leave_the_script_s_results_unchanged(tmp_path):
    args = ["--steps", str(STEPS), "--batch-size", str(BATCH)]
    bare = subprocess.run([sys.executable, str(EXAMPLES / "train_mlp.py"), *args],
                          capture_output=True, text=True, check=True).stdout
    result = profile_all("run", "--separate-passes", EXAMPLES / "train_mlp.py", "-b",
                         "flop-counter", "-b", "thop", "-b", "flops-profiler", "--show-output",
                         "all", "-o", tmp_path / "run", "--", *args)
    assert result.returncode == 0, result.stderr
    # the timing pass and three counters' passes, each exactly as the bare script printed
    assert result.stdout == bare * 4

    report = pa.load(tmp_path / "run")
    frame = report.frame

    def value(backend, scope, name, metric, stat="total"):
        return value_of(frame, backend=backend, scope=scope, name=name, metric=metric,
                        stat=stat)

    assert value("flop-counter", "run", "run", "flops") == STEPS * (FORWARD + BACKWARD)
    assert value("flop-counter", "step", "step", "flops", "mean") == FORWARD + BACKWARD
    assert value("flop-counter", "step", "step", "calls") == STEPS
    assert value("flop-counter", "module", "Sequential.1", "flops") == STEPS * (
        2 * BATCH * 784 * 256 * 2)  # forward and weight gradient of the first Linear
    assert value("flop-counter", "module", "Sequential", "calls") == STEPS
    assert value("flop-counter", "module", "Sequential", "backward_calls") == STEPS
    # thop and flops-profiler: the root module once, forward only, one row each
    assert value("thop", "module", "Sequential", "flops") == FORWARD
    assert value("thop", "module", "Sequential", "calls") == 1
    assert value("flops-profiler", "module", "Sequential", "macs") == FORWARD / 2
    roots = frame[(frame["scope"] == "module") & ~frame["name"].str.contains(".", regex=False)]
    assert set(roots.loc[roots["backend"] != "flop-counter", "name"]) == {"Sequential"}
    # flop-counter saw the loss run too: no parameters, no FLOPs, not a root to compare
    assert value("flop-counter", "module", "CrossEntropyLoss", "calls") == STEPS
    assert set(report.counters()["module"]) == {"Sequential"}
    per_call = report.counters().set_index("counter")
    assert per_call.loc["flop-counter", "flops"] == FORWARD + BACKWARD
    assert per_call.loc["thop", "forward_flops"] == FORWARD


def test_a_counter_that_fails_never_reaches_the_script():
    import torch

    from profile_all.backends.roots import RootModules

    def broken_counter(name, module, args, kwargs):
        raise RuntimeError("this counter cannot count that")

    roots = RootModules(broken_counter)
    roots.start()
    try:
        model = torch.nn.Sequential(torch.nn.Linear(3, 2))
        loss = torch.nn.MSELoss()  # no parameters: not a root to count
        output = loss(model(torch.ones(1, 3)), torch.zeros(1, 2))
    finally:
        roots.stop()
    assert output.item() >= 0
    assert roots.notes == ["could not count Sequential: RuntimeError: this counter cannot "
                           "count that"]
    assert list(roots.names.values()) == ["Sequential"]
