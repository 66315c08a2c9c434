"""FLOPs of matrix products from their input shapes, as torch's `with_flops` counts them:
traces of recent torch carry the shapes but not the count."""

from __future__ import annotations

MATMUL_OPERANDS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1),
                   "aten::baddbmm": (1, 2)}


def matmul_flops(name: str, dims: list) -> int:
    """2 x batch x M x K x N for `aten::mm`, `addmm`, `bmm` and `baddbmm` (`dims`: their
    input shapes); 0 for other operators (not derived)."""
    operands = MATMUL_OPERANDS.get(name)
    if operands is None:
        return 0
    try:
        first, second = dims[operands[0]], dims[operands[1]]
        *batch, m, k = first
        n = second[-1]
        return 2 * (batch[0] if batch else 1) * m * k * n
    except (ValueError, TypeError, IndexError):
        return 0
