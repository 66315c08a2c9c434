"""A backend is one file: a plug-in installed beside profile-all (an entry point of the
`profile_all.backends` group), named like no built-in and with a dot in its name, runs in
its pass, its rows reach the counters table through the facts it states, and the option it
declares is a flag of `profile-all run`, with no line of profile-all changed."""

from __future__ import annotations

import pandas as pd

import profile_all as pa
from conftest import profile_all

PLUGIN = '''
"""A test plug-in: a multiple of the parameters' count as a module's FLOPs, forward only;
the multiple an option it declares."""
from profile_all.backends.base import Option
from profile_all.backends.roots import RootCounter
from profile_all.rows import Facts, row


class DoubleParams(RootCounter):
    name = "my.counter"
    facts = Facts(counts_flops=True, forward_only=True)
    measures = "a multiple of the parameters as FLOPs (a test plug-in)"
    offered_options = (Option("factor", "--my-factor", (int,), 2,
                              "my.counter: FLOPs per parameter", "N"),)

    def count(self, name, copy, args):
        import torch

        with torch.no_grad():  # the call a counter makes: its facts (calls, outputs) recorded
            copy(*args)
        params = sum(parameter.numel() for parameter in copy.parameters())
        return [row("module", name, "flops", self.options.get("factor", 2) * params,
                    unit="FLOP"),
                row("module", name, "params", params, unit="count")]
'''
SCRIPT = '''
import torch
layer = torch.nn.Linear(100, 10)
with torch.no_grad():
    layer(torch.randn(1, 100))
'''


def test_a_plugin_counter_reaches_the_counters_table(tmp_path):
    plugins = tmp_path / "plugins"
    info = plugins / "my_counter-0.1.dist-info"
    info.mkdir(parents=True)
    (plugins / "my_counter.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-counter\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[profile_all.backends]\nmy.counter = my_counter:DoubleParams\n")
    (tmp_path / "linear.py").write_text(SCRIPT)
    env = {"PYTHONPATH": str(plugins)}
    listed = profile_all("backends", env=env)
    assert "my.counter" in listed.stdout, listed.stdout + listed.stderr
    assert "--my-factor N" in profile_all("run", "--help", env=env).stdout
    done = profile_all("run", tmp_path / "linear.py", "-b", "flop-counter", "-b", "my.counter",
                       "--my-factor", "3", "-o", tmp_path / "run", env=env)
    assert done.returncode == 0, done.stderr
    report = pa.load(tmp_path / "run")
    assert report.meta.backend_facts["my.counter"] == {"counts_flops": True,
                                                         "forward_only": True}
    table = report.counters().set_index("counter")
    # per call: FlopCounterMode's exact 2 x 100 x 10; the plug-in's 3 x (1000 + 10)
    assert table.loc["flop-counter", "flops"] == 2000
    assert table.loc["my.counter", "flops"] == 3030
    assert abs(table.loc["my.counter", "vs_reference"] - 0.515) < 1e-9
    assert "unexplained: +1,030 FLOP per call" in table.loc["my.counter", "cause"]
    assert "my.counter" in (tmp_path / "run" / "summary.md").read_text()
    assert isinstance(report.modules(), pd.DataFrame) and "my.counter" in report.modules()
