"""FLOPs of matrix products from their input shapes, as torch's `with_flops` counts them:
traces of recent torch carry the shapes but not the count."""

from __future__ import annotations

#: the largest size of a dimension taken for one (2^48: beyond any tensor's)
MAX_SIZE = 2**48
MATMUL_OPERANDS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1),
                   "aten::baddbmm": (1, 2)}


def matmul_flops(name: str, dims: list) -> int:
    """2 x batch x M x K x N for `aten::mm`, `addmm`, `bmm` and `baddbmm` (`dims`: their
    input shapes); 0 for other operators (not derived)."""
    operands = MATMUL_OPERANDS.get(name)
    if operands is None or type(dims) is not list or len(dims) <= max(operands):
        return 0
    first, second = dims[operands[0]], dims[operands[1]]
    if not (_sizes(first) and _sizes(second) and len(first) >= 2):
        return 0  # a shape of the wrong type (text, an object) is no shape: no FLOPs
    *batch, m, k = first
    return 2 * (batch[0] if batch else 1) * m * k * second[-1]


def _sizes(shape: object) -> bool:
    """A shape as torch records it: a non-empty list of whole numbers from 0 to MAX_SIZE
    (text would be repeated by `*`, a float is no size, a bool no number)."""
    return type(shape) is list and bool(shape) and all(
        type(size) is int and 0 <= size <= MAX_SIZE for size in shape)
