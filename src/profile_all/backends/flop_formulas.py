"""FLOP formulas for operators torch's FlopCounterMode has none for, which it counts as 0.

- The CPU attention kernel and its backward: torch's own attention formulas.
- Recurrent layers run as one operator: an LSTM on the CPU (oneDNN's `mkldnn_rnn_layer`,
  one call a layer and direction) and LSTM, GRU and RNN on a GPU (cuDNN's `_cudnn_rnn`,
  every layer in one call). Counted as FlopCounterMode counts a Linear, the matrix
  products alone: each token multiplies its input by W_ih and its hidden state by W_hh
  (and, with `proj_size`, the hidden state by W_hr), 2 FLOPs a multiply-accumulate; the
  gates' element-wise work and the biases are not counted (nor are a Linear's). A GRU
  and an RNN on the CPU run their matrix products as `addmm`/`mm`, counted already. The
  backward is twice the forward (gradients of the inputs and of the weights, as a
  Linear's), or once where cuDNN is asked for one of the two.
"""

from __future__ import annotations

import math
from typing import Any


def _tokens(input_shape: Any) -> int:
    """Rows of a recurrent layer's input: time x batch, or the packed sequence's rows."""
    return math.prod(input_shape[:-1])


def _matrices(weight_shapes: Any) -> int:
    """Elements of the weight matrices (W_ih, W_hh, W_hr) among a layer's weights."""
    return sum(math.prod(shape) for shape in weight_shapes if len(shape) == 2)


def _oned_nn_layer(input_shape, w_ih, w_hh, *args, out_shape=None, **kwargs) -> int:
    return 2 * _tokens(input_shape) * _matrices([w_ih, w_hh])


def _oned_nn_layer_backward(input_shape, w_ih, w_hh, *args, out_shape=None, **kwargs) -> int:
    return 2 * _oned_nn_layer(input_shape, w_ih, w_hh)


def _cudnn_rnn(input_shape, weights, *args, out_shape=None, **kwargs) -> int:
    return 2 * _tokens(input_shape) * _matrices(weights)


#: where `_cudnn_rnn_backward` takes its output_mask: (input, hx, cx, weight) gradients
_CUDNN_OUTPUT_MASK = 21


def _cudnn_rnn_backward(input_shape, weights, *args, out_shape=None, **kwargs) -> int:
    mask = kwargs.get("output_mask")
    if mask is None:
        mask = args[_CUDNN_OUTPUT_MASK - 2] if len(args) > _CUDNN_OUTPUT_MASK - 2 else [True] * 4
    products = int(any(mask[:3])) + int(mask[3])
    return products * _cudnn_rnn(input_shape, weights)


def _attention_formulas() -> dict[Any, Any]:
    import torch
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    def forward(query, key, value, *args, out_shape=None, **kwargs) -> int:
        return sdpa_flop_count(query, key, value)

    def backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
        return sdpa_backward_flop_count(grad_out, query, key, value)

    aten = torch.ops.aten
    return {aten._scaled_dot_product_flash_attention_for_cpu: forward,
            aten._scaled_dot_product_flash_attention_for_cpu_backward: backward}


def formulas() -> dict[Any, Any]:
    """FlopCounterMode's `custom_mapping`: operator -> formula on the arguments' shapes."""
    import torch

    aten = torch.ops.aten
    return {**_attention_formulas(),
            aten.mkldnn_rnn_layer: _oned_nn_layer,
            aten.mkldnn_rnn_layer_backward: _oned_nn_layer_backward,
            aten._cudnn_rnn: _cudnn_rnn,
            aten._cudnn_rnn_backward: _cudnn_rnn_backward}
