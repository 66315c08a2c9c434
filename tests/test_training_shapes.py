"""The models people train today, small and made here: each figure checked against a count
made by hand from the shapes (a Linear's forward is 2 x rows x in x out FLOPs and its
backward twice that; attention's forward two batched matmuls of 2 x B x H x T x T x d, its
backward five, as FlashAttention recomputes the scores)."""

from __future__ import annotations

import sys

import pytest

import profile_all as pa
from conftest import TARGETS

sys.path.insert(0, str(TARGETS))
import tiny_gpt as gpt  # noqa: E402

ROWS = gpt.BATCH * gpt.CONTEXT
HEAD_WIDTH = gpt.WIDTH // gpt.HEADS


def _linear(inputs: int, outputs: int) -> int:
    return 2 * ROWS * inputs * outputs


def _attention_matmul() -> int:
    return 2 * gpt.BATCH * gpt.HEADS * gpt.CONTEXT * gpt.CONTEXT * HEAD_WIDTH


W = gpt.WIDTH
LINEARS = gpt.LAYERS * (_linear(W, 3 * W) + _linear(W, W) + 2 * _linear(W, 4 * W)) \
    + _linear(W, gpt.VOCAB)
FORWARD = LINEARS + gpt.LAYERS * 2 * _attention_matmul()
BACKWARD = 2 * LINEARS + gpt.LAYERS * 5 * _attention_matmul()


@pytest.mark.parametrize("returns", ["tuple", "loss", "dict", "dataclass"])
def test_a_gpt_that_returns_its_loss_has_its_backward_counted_once(tmp_path, returns):
    """`out.loss.backward()` on what the root returned: the root's backward was counted
    twice at half its FLOPs ((logits, loss)), or not at all (the loss alone)."""
    report = pa.run(TARGETS / "tiny_gpt.py", args=[returns], backends=["flop-counter"],
                    isolate=False, out=tmp_path / "run")
    table = report.counters().set_index("module")
    assert table.loc["GPT", "calls"] == table.loc["GPT", "backward_calls"] == gpt.STEPS
    assert table.loc["GPT", "forward_flops"] == FORWARD
    assert table.loc["GPT", "backward_flops"] == BACKWARD
    assert table.loc["GPT", "flops"] == pytest.approx(3 * FORWARD, rel=0.02)
    assert table.loc["GPT", "backward"] == "measured"
