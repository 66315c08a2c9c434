"""Memory by what holds it (-b torch-memory), checked against a count by hand: parameter
bytes are the sum of numel x itemsize, gradients as many, Adam's state twice as many; the
activations a wide MLP keeps for its backward are its ReLUs' and last hidden output's."""

from __future__ import annotations

import pytest

import profile_all as pa
from conftest import TARGETS, profile_all_here

FLOAT = 4
ADAM_PARAMETERS = ((1000 * 2000 + 2000) + (2000 * 10 + 10)) * FLOAT
WIDE_PARAMETERS = ((100 * 1000 + 1000) + (1000 * 1000 + 1000) + (1000 * 10 + 10)) * FLOAT
#: kept by the forward for the backward: the first Linear's output and the two ReLUs'
#: (each the next Linear's input), 2048 x 1000 each
WIDE_ACTIVATIONS = 3 * 2048 * 1000 * FLOAT  # at the forward's end (the peak is later)


def _run(tmp_path, *args: str) -> pa.Report:
    done = profile_all_here("run", TARGETS / "known_sizes.py", "-b", "torch-memory", "-o",
                            tmp_path / "run", "--", *args)
    assert done.returncode == 0, done.stderr
    return pa.load(tmp_path / "run")


@pytest.fixture(scope="module")
def adam(tmp_path_factory) -> pa.Report:
    return _run(tmp_path_factory.mktemp("adam"))


def test_each_step_ends_with_the_hand_count(adam):
    table = adam.held_memory()
    ends = table[(table["moment"] == "at_end") & (table["device"] == "cpu")]
    assert ends["step"].tolist() == ["step 1", "step 2", "step 3"]
    for _, end in ends.iterrows():
        assert end["parameters"] == ADAM_PARAMETERS
        assert end["gradients"] == ADAM_PARAMETERS
        # exp_avg and exp_avg_sq per parameter, and a 4-byte step count per parameter
        assert end["optimizer_state"] == pytest.approx(2 * ADAM_PARAMETERS, rel=0.01)


def test_optimizer_state_is_found_with_its_numbers(adam):
    found = adam.findings()
    line = found[found["finding"].str.startswith("optimizer state is 2.0x the parameters on "
                                                 "cpu")]
    assert len(line) == 1
    assert line["amount"].item() == pytest.approx(2 * ADAM_PARAMETERS, rel=0.01)


def test_every_output_draws_it(adam):
    page = (adam.run_dir / "report.html").read_text()
    summary = (adam.run_dir / "summary.md").read_text()
    assert "Memory by what holds it" in summary
    assert "Memory by what holds it, cpu" in page  # the chart over time
    series = adam.timeline[adam.timeline["series"] == "held_memory:cpu"]
    assert set(series["name"]) >= {"parameters", "gradients", "optimizer_state"}


def test_activations_that_make_the_peak(tmp_path):
    report = _run(tmp_path, "wide")
    table = report.held_memory()
    whole = table[(table["step"] == "") & (table["device"] == "cpu")].set_index("moment")
    assert whole.loc["at_peak", "largest"] == "activations"
    assert whole.loc["max", "activations"] == pytest.approx(WIDE_ACTIVATIONS, rel=0.01)
    assert whole.loc["max", "parameters"] == WIDE_PARAMETERS
    found = report.findings()["finding"].tolist()
    assert any(line.startswith("activations and their gradients make the peak on cpu in "
                               "step ") or line.startswith("activations make the peak on cpu "
                                                           "in step ") for line in found)


@pytest.mark.gpu
def test_cuda_memory_by_what_holds_it_and_the_allocator_snapshot(tmp_path):
    report = _run(tmp_path, "cuda")
    table = report.held_memory()
    ends = table[(table["moment"] == "at_end") & table["device"].str.startswith("cuda")]
    assert len(ends) == 3
    assert (ends["parameters"] == ADAM_PARAMETERS).all()
    assert ends["optimizer_state"].iloc[-1] == pytest.approx(2 * ADAM_PARAMETERS, rel=0.01)
    snapshot = report.run_dir / "artifacts" / "cuda_memory_snapshot.pickle"
    assert snapshot.stat().st_size > 0


def test_what_holds_a_small_peak_weighs_little():
    """A 4 MiB activation peak of a 0.1 M-parameter model was the first finding, above every
    time finding: a peak weighs by its share of the memory there (half of it or more: in
    full)."""
    from types import SimpleNamespace

    from profile_all.report.findings.held_memory import _pressure

    run = SimpleNamespace(meta=SimpleNamespace(environment={"memory_total": 24 * 2**30,
                                                            "gpu_memory_total": 80 * 2**30}))
    assert _pressure(run, "cpu", 4 * 2**20) == pytest.approx(4 / (12 * 1024))
    assert _pressure(run, "cuda:0", 60 * 2**30) == 1.0
    assert _pressure(SimpleNamespace(meta=SimpleNamespace(environment={})), "cpu", 1) == 1.0
