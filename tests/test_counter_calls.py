"""FLOP counters compared per call, with the calls each counter saw and only the causes the
rows establish. Every figure is checked against a count made by hand here: a convolution
does outputs x in_channels/groups x kh x kw multiply-accumulates, a Linear batch x in x out,
and a multiply-accumulate is 2 FLOPs."""

from __future__ import annotations

import textwrap

import pytest
import torch
from torch import nn

import profile_all as pa
from conftest import profile_all_here

COUNTERS = ["flop-counter", "thop", "flops-profiler"]

# The seed notebook's case: nn.Conv2d(1, 1, 3, padding=1) with its bias, on 1x1x360x640.
SEED_OUTPUTS = 360 * 640
SEED_FLOPS = 2 * SEED_OUTPUTS * 1 * 3 * 3


def _script(tmp_path, text: str):
    path = tmp_path / "target.py"
    path.write_text(textwrap.dedent(text))
    return path


def _run_in_process(tmp_path, text: str, backends=COUNTERS):
    return pa.run(_script(tmp_path, text), backends=backends, isolate=False,
                  out=tmp_path / "run")


def _table(report):
    return report.counters().set_index(["module", "counter"])


def test_seed_conv_per_call_with_bias_as_the_cause(tmp_path):
    (tmp_path / "seed.py").write_text("from torch import nn\n\n\ndef make():\n"
                                      "    return nn.Conv2d(1, 1, 3, padding=1)\n")
    result = profile_all_here("model", f"{tmp_path / 'seed.py'}:make", "--input-shape",
                              "1,1,360,640", "--iters", "3", "--warmup", "1", "-o",
                              tmp_path / "run")
    assert result.returncode == 0, result.stderr
    table = pa.load(tmp_path / "run").counters().set_index("counter")
    assert SEED_FLOPS == 4_147_200
    assert table.loc["flop-counter", "flops"] == SEED_FLOPS
    assert table.loc["thop", "flops"] == SEED_FLOPS
    assert table.loc["thop", "macs"] == SEED_FLOPS / 2
    assert table.loc["flops-profiler", "flops"] == SEED_FLOPS + SEED_OUTPUTS == 4_377_600
    assert (table["calls"] == 1).all()
    assert table.loc["thop", "cause"] == "agrees"
    assert table.loc["flops-profiler", "cause"] == (
        f"bias counted in Conv2d (one add per output): +{SEED_OUTPUTS:,} FLOP per call")
    assert f"{table.loc['flops-profiler', 'vs_reference']:+.1%}" == "+5.6%"
    for shown in ("4,147,200", "4,377,600", "+5.6%"):
        assert shown in result.stderr


TWICE_SCRIPT = """
    import torch
    from torch import nn

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 1, 3, padding=1)

        def forward(self, x):
            return self.conv(self.conv(x))

    torch.manual_seed(0)
    twice = Twice()
    plain = nn.Conv2d(1, 2, 3, padding=1, bias=False)
    second = nn.Conv2d(2, 1, 1)
    x = torch.randn(1, 1, 36, 64)
    with torch.no_grad():
        for _ in range(3):
            y = twice(x)
        print(float(second(plain(y)).sum()))
"""
CONV_OUTPUTS = 36 * 64  # one channel


def test_a_layer_called_three_times_in_a_script_compares_per_call(tmp_path):
    result = profile_all_here("run", _script(tmp_path, TWICE_SCRIPT), "-b", "flop-counter", "-b",
                              "thop", "-b", "flops-profiler", "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    report = pa.load(tmp_path / "run")
    table = _table(report)
    twice = 2 * (2 * CONV_OUTPUTS * 9)  # the 3x3 conv twice per call
    plain = 2 * (2 * CONV_OUTPUTS) * 1 * 9  # 1->2 channels, no bias
    second = 2 * CONV_OUTPUTS * 2  # 1x1, 2->1 channels, with a bias
    expected = {
        ("Twice", "flop-counter"): (3, twice, "reference (exact count)"),
        ("Twice", "thop"): (1, twice, "agrees"),
        ("Twice", "flops-profiler"): (1, twice + 2 * CONV_OUTPUTS,
                                      f"bias counted in Conv2d (one add per output): "
                                      f"+{2 * CONV_OUTPUTS:,} FLOP per call"),
        ("Conv2d", "thop"): (1, plain, "agrees"),
        ("Conv2d", "flops-profiler"): (1, plain, "agrees"),
        ("Conv2d#2", "flop-counter"): (1, second, "reference (exact count)"),
        ("Conv2d#2", "flops-profiler"): (1, second + CONV_OUTPUTS,
                                         f"bias counted in Conv2d (one add per output): "
                                         f"+{CONV_OUTPUTS:,} FLOP per call"),
    }
    for key, (calls, flops, cause) in expected.items():
        assert (table.loc[key, "calls"], table.loc[key, "flops"], table.loc[key, "cause"]) == (
            calls, flops, cause), key
    modules = report.modules().set_index("module")
    # every counter names the same modules: the two Conv2d roots apart, Twice's conv below it
    assert list(modules.index) == ["Twice", "Twice.conv", "Conv2d", "Conv2d#2"]
    calls = modules[[f"{c} calls" for c in COUNTERS]]
    assert calls.loc["Twice.conv"].tolist() == [6, 2, 2]  # 2 per call of Twice
    assert calls.loc["Twice"].tolist() == [3, 1, 1]
    assert modules.loc["Twice.conv", COUNTERS].tolist() == [
        twice / 2, twice / 2, twice / 2 + CONV_OUTPUTS]
    assert "(3)" in result.stderr and "(6)" in result.stderr  # calls in the module table


class Shared(nn.Module):
    """Nested Sequentials in a ModuleList (never called itself), a ReLU shared by two
    blocks: named_modules() names it by its first path, as every counter must."""

    def __init__(self) -> None:
        super().__init__()
        act = nn.ReLU()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), act),
                                     nn.Sequential(nn.Linear(8, 8), act)])
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_module_names_line_up_across_counters(tmp_path):
    report = pa.profile_model(Shared(), input_shapes=[(4, 8)], backends=COUNTERS, iters=3,
                              warmup=1, out=tmp_path / "run")
    modules = report.modules().set_index("module")
    named = [f"Shared.{path}" if path else "Shared" for path, _ in Shared().named_modules()]
    assert set(modules.index) == set(named)
    ran = modules.drop(index="Shared.blocks")  # a ModuleList: flop-counter never sees it run
    assert ran[COUNTERS].notna().all().all(), ran
    assert modules.loc["Shared.blocks.0.1", "flop-counter calls"] == 2  # shared: both calls
    linear = 2 * 4 * 8 * 8
    assert modules.loc["Shared", "flop-counter"] == 2 * linear + 2 * 4 * 8 * 2
    table = report.counters().set_index("counter")
    assert table.loc["thop", "cause"] == "agrees"
    assert table.loc["flops-profiler", "cause"] == (
        f"element-wise ops counted (ReLU): +{2 * 4 * 8:,} FLOP per call")


def conv_bn_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 8 * 8, 10))


def test_element_wise_ops_are_named_by_type(tmp_path):
    report = pa.profile_model(conv_bn_net(), input_shapes=[(2, 3, 16, 16)], backends=COUNTERS,
                              iters=3, warmup=1, out=tmp_path / "run")
    outputs = 2 * 8 * 16 * 16  # of the conv, the BatchNorm and the ReLU; the pool's input
    exact = 2 * (outputs * 3 * 9 + 2 * 8 * 8 * 8 * 10)
    table = report.counters().set_index("counter")
    modules = report.modules().set_index("module")
    assert table.loc["flop-counter", "flops"] == exact
    assert (modules.loc[["Sequential.1", "Sequential.2", "Sequential.3"], "flop-counter"]
            == 0).all()
    # flops-profiler's own formulas: BatchNorm in eval with affine 2 per element, ReLU 1 per
    # element, max pool 1 per input element; and the conv's bias, 1 per output
    element_wise = 2 * outputs + outputs + outputs
    assert modules.loc[["Sequential.1", "Sequential.2", "Sequential.3"],
                       "flops-profiler"].sum() == element_wise
    assert table.loc["flops-profiler", "flops"] == exact + element_wise + outputs
    assert table.loc["flops-profiler", "cause"] == (
        f"element-wise ops counted (BatchNorm2d, ReLU, MaxPool2d): +{element_wise:,} FLOP per "
        f"call; bias counted in Conv2d (one add per output): +{outputs:,} FLOP per call")
    thop_norm = table.loc["thop", "flops"] - exact  # thop counts the BatchNorm only
    assert thop_norm == modules.loc["Sequential.1", "thop"] > 0
    assert table.loc["thop", "cause"] == (
        f"element-wise ops counted (BatchNorm2d): +{thop_norm:,.0f} FLOP per call")


TRAIN_SCRIPT = """
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 20)
    for _ in range(3):
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        print(float(model(x).sum()))  # one more forward, without backward
"""


def test_training_backward_measured_against_estimated(tmp_path):
    report = _run_in_process(tmp_path, TRAIN_SCRIPT)
    table = report.counters().set_index("counter")
    forward = 2 * 4 * (20 * 30 + 30 * 5)
    # weight gradients of both layers; the input gradient of the second only
    backward = 2 * 4 * (20 * 30 + 30 * 5) + 2 * 4 * 30 * 5
    reference = table.loc["flop-counter"]
    assert (reference["calls"], reference["backward_calls"]) == (4, 3)
    assert (reference["forward_flops"], reference["backward_flops"]) == (forward, backward)
    assert reference["backward"] == "measured"
    assert reference["cause"] == "reference (exact count); backward measured"
    thop = table.loc["thop"]
    assert (thop["calls"], thop["forward_flops"], thop["backward_flops"]) == (
        1, forward, 2 * forward)
    assert thop["backward"] == "estimated: 2x forward"
    assert thop["vs_reference"] == pytest.approx(3 * forward / (forward + backward) - 1)
    assert thop["cause"] == (f"backward estimated as 2x forward: {2 * forward - backward:+,} "
                             f"FLOP per call from the measured {backward:,}")
    assert table.loc["flops-profiler", "cause"].startswith(
        f"element-wise ops counted (ReLU): +{4 * 30:,} FLOP per call; backward estimated")
    modules = report.modules().set_index("module")
    assert modules.loc["Sequential.0", "flop-counter backward"] == 2 * 4 * 20 * 30
    assert modules.loc["Sequential.2", "flop-counter backward"] == 2 * 2 * 4 * 30 * 5
    assert modules.loc["Sequential", "flop-counter backward calls"] == 3


class SoftmaxHead(nn.Module):
    """A matmul and a softmax in one module: flops-profiler counts the softmax where
    flop-counter counts the matmul, which no recorded fact can tell apart."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(10, 32))

    def forward(self, x):
        return nn.functional.softmax(nn.functional.linear(x, self.weight), dim=-1)


def test_a_difference_without_an_established_cause_is_unexplained(tmp_path):
    report = pa.profile_model(SoftmaxHead(), input_shapes=[(4, 32)], backends=COUNTERS,
                              iters=3, warmup=1, out=tmp_path / "run")
    table = report.counters().set_index("counter")
    exact = 2 * 4 * 32 * 10
    assert table.loc["flop-counter", "flops"] == exact
    assert table.loc["thop", "flops"] == exact
    gap = table.loc["flops-profiler", "flops"] - exact
    assert gap > 0
    assert table.loc["flops-profiler", "cause"] == (
        f"unexplained: {gap:+,.0f} FLOP per call ({gap / exact:+.1%})")


def test_calls_of_different_sizes_are_grouped_not_averaged(tmp_path):
    report = _run_in_process(tmp_path, """
        import torch
        from torch import nn

        layer = nn.Linear(8, 4)
        with torch.no_grad():
            layer(torch.randn(2, 8))  # the call thop and flops-profiler count
            layer(torch.randn(6, 8))
    """, backends=["flop-counter", "thop"])
    table = report.counters().set_index("counter")
    # not the mean of the two calls (2 * 4 * 8 * 4, no call's): the first call's group,
    # the call the per-call counters count
    assert table.loc["flop-counter", "flops"] == 2 * 2 * 8 * 4
    assert table.loc["flop-counter", "cause"] == (
        "reference (exact count); per call of the 1 no_grad call of 2x8 (1 call of other "
        "shapes or modes apart: Report.call_groups())")
    assert table.loc["thop", "flops"] == 2 * 2 * 8 * 4
    assert table.loc["thop", "cause"] == "agrees"
    assert table.loc["thop", "vs_reference"] == 0
    groups = report.call_groups()
    assert list(groups["shapes"]) == ["2x8", "6x8"]
    assert list(groups["flops_per_call"]) == [2 * 2 * 8 * 4, 2 * 6 * 8 * 4]


def test_without_the_exact_counter_no_count_is_said_to_agree(tmp_path):
    """thop and flops-profiler alone, 5.6% apart on a convolution with a bias (flops-profiler
    counts the bias adds): each was said to 'agree'."""
    (tmp_path / "seed.py").write_text("from torch import nn\n\n\ndef make():\n"
                                      "    return nn.Conv2d(1, 1, 3, padding=1)\n")
    result = profile_all_here("model", f"{tmp_path / 'seed.py'}:make", "--input-shape",
                              "1,1,360,640", "--iters", "3", "--warmup", "1", "-b", "thop", "-b",
                              "flops-profiler", "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    table = pa.load(tmp_path / "run").counters().set_index("counter")
    assert table.loc["thop", "cause"] == (
        "-5.3% from flops-profiler; no exact counter ran (-b flop-counter) to say which is "
        "right")
    assert table.loc["flops-profiler", "cause"] == (
        "+5.6% from thop; no exact counter ran (-b flop-counter) to say which is right")


def test_a_model_with_nothing_counted_gets_no_rate(tmp_path):
    """An LSTM's 0 FLOPs (before its operator had a formula) led the findings as
    'achieved 0 GFLOP/s'. A LayerNorm is all element-wise: flop-counter counts none."""
    (tmp_path / "norm.py").write_text("from torch import nn\n\n\ndef make():\n"
                                      "    return nn.LayerNorm(8)\n")
    result = profile_all_here("model", f"{tmp_path / 'norm.py'}:make", "--input-shape", "4,8",
                              "--iters", "3", "--warmup", "1", "-b", "flop-counter",
                              "-o", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert "GFLOP/s" not in result.stderr
    frame = pa.load(tmp_path / "run").frame
    assert frame[frame["metric"] == "achieved_flops"].empty


def test_a_model_called_with_keywords_is_counted_by_every_counter(tmp_path):
    """HuggingFace's `model(input_ids=x, labels=y)`: thop and flops-profiler called the
    copy with the positional arguments only ('You have to specify either input_ids or
    inputs_embeds') and counted nothing, saying nothing in the table."""
    report = _run_in_process(tmp_path, """
        import torch
        from torch import nn

        class KeywordModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 4, bias=False)

            def forward(self, input_ids=None, scale=None):
                if input_ids is None:
                    raise ValueError("You have to specify input_ids")
                return self.proj(input_ids) * scale

        model = KeywordModel()
        with torch.no_grad():
            for _ in range(2):
                model(input_ids=torch.randn(3, 8), scale=2.0)
    """)
    table = report.counters().set_index("counter")
    assert set(table.index) == set(COUNTERS)
    assert (table["forward_flops"] == 2 * 3 * 8 * 4).all(), table
    said = [failure["error"] for p in report.meta.passes for failure in p.backend_failures]
    assert not any("could not count" in text for text in said), said
    # its calls grouped by the shapes of the tensors it was given by keyword
    assert report.call_groups()[["mode", "shapes", "calls"]].values.tolist() == [
        ["no_grad", "3x8", 2]]


class Conv1D(nn.Module):
    """HuggingFace's GPT-2 projection: a weight used by torch.addmm, which thop has no
    rule for."""

    def __init__(self, inputs: int, outputs: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(inputs, outputs))
        self.bias = nn.Parameter(torch.zeros(outputs))

    def forward(self, x):
        return torch.addmm(self.bias, x.view(-1, x.shape[-1]), self.weight).view(
            *x.shape[:-1], -1)


class ProjectedAttention(nn.Module):
    """Conv1D projections around a functional attention in the root's own forward, which
    thop counts at the root: a module it counts nothing in is still not counted."""

    def __init__(self) -> None:
        super().__init__()
        self.c_attn, self.c_proj = Conv1D(32, 96), Conv1D(32, 32)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(32, dim=2)
        return self.c_proj(nn.functional.scaled_dot_product_attention(q, k, v))


def test_a_module_a_counter_counts_nothing_in_is_not_counted_beside_a_root_of_its_own(
        tmp_path):
    """thop's count of HuggingFace's Conv1D is 0 and its root holds the functional
    attention: the gap was 'unexplained'. The root holds far less than the Conv1Ds' FLOPs,
    so they were counted nowhere."""
    report = pa.profile_model(ProjectedAttention(), input_shapes=[(2, 16, 32)],
                              backends=["flop-counter", "thop"], iters=3, warmup=1,
                              out=tmp_path / "run")
    table = report.counters().set_index("counter")
    projections = 2 * 2 * 16 * 32 * 96 + 2 * 2 * 16 * 32 * 32  # by hand
    assert table.loc["thop", "cause"].startswith(
        f"not counted: Conv1D: {-projections:+,.0f} FLOP per call")


def test_backward_flops_stay_with_the_modules_that_did_them(tmp_path):
    """torch's ModuleTracker keeps a module among the parents as a set. A module that
    returns its input (Dropout(p=0) in a residual block) was left before it was entered in
    the backward, and kept every later backward FLOP (nanoGPT's last dropout showed the
    whole model's); an LSTMCell unrolled over time was left at its first step's end, and
    its backward was counted nowhere (12 k FLOP a call of 4 M)."""
    report = _run_in_process(tmp_path, """
        import torch
        from torch import nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc, self.drop = nn.Linear(32, 32), nn.Dropout(0.0)

            def forward(self, x):
                return x + self.drop(self.fc(x))

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList(Block() for _ in range(3))
                self.cell, self.out = nn.LSTMCell(32, 16), nn.Linear(16, 1)

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                h = c = torch.zeros(8, 16)
                outs = []
                for step in range(10):
                    h, c = self.cell(x, (h, c))
                    outs.append(self.out(h))
                return torch.cat(outs, 1)

        model = Model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            loss = model(torch.randn(8, 32)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """, backends=["flop-counter"])
    modules = report.modules().set_index("module")
    backward = modules["flop-counter backward"]
    linear = 2 * 8 * 32 * 32  # a block's Linear: its weight's gradient, and its input's
    assert [backward[f"Model.blocks.{i}.drop"] for i in range(3)] == [0, 0, 0]
    assert [backward[f"Model.blocks.{i}.fc"] for i in range(3)] == [linear, 2 * linear,
                                                                    2 * linear]
    # per cell call, by hand: its weights' gradients (input 32, hidden 16, 4 gates of 16),
    # the input's (every call: x comes from the blocks), the hidden state's (9 calls of
    # 10: the first's is zeros); measured a little above it: the output layer's backward
    # of step t runs while step t+1's cell is still open (2 x 8 x 16 a call)
    gates = 4 * 16
    cell = (2 * 8 * gates * (32 + 16) + 2 * 8 * gates * 32 + 9 / 10 * 2 * 8 * gates * 16)
    assert cell <= backward["Model.cell"] <= 1.02 * cell
    assert modules.loc["Model", "flop-counter backward"] == pytest.approx(
        linear * 5 + 10 * cell + 10 * 2 * 2 * 8 * 16, rel=1e-9)
