"""Dense peak FLOP/s of common GPUs by dtype, from NVIDIA's datasheets (no sparsity).

float32 is the plain CUDA-core rate (torch's default: TF32 matmuls off); bfloat16 and
float16 the tensor-core rate with FP32 accumulation. Sources: the NVIDIA H100 Tensor Core
GPU datasheet (SXM and PCIe; H200 has H100 SXM's compute), the A100 datasheet, the V100
datasheet (SXM2 and PCIe), the T4, A10, L4 and L40S datasheets, and the Ada GeForce RTX
4090 whitepaper (FP16 tensor with FP32 accumulate).
"""

from __future__ import annotations

#: (substring of torch.cuda.get_device_name(), {dtype: FLOP/s}), the most specific first
PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H100 PCIe", {"float32": 51.2e12, "bfloat16": 756e12, "float16": 756e12}),
    ("H100", {"float32": 67e12, "bfloat16": 989.4e12, "float16": 989.4e12}),
    ("H200", {"float32": 67e12, "bfloat16": 989.4e12, "float16": 989.4e12}),
    ("A100", {"float32": 19.5e12, "bfloat16": 312e12, "float16": 312e12}),
    ("V100-PCIE", {"float32": 14e12, "float16": 112e12}),
    ("V100", {"float32": 15.7e12, "float16": 125e12}),
    ("T4", {"float32": 8.1e12, "float16": 65e12}),
    ("A10", {"float32": 31.2e12, "bfloat16": 125e12, "float16": 125e12}),
    ("L40S", {"float32": 91.6e12, "bfloat16": 362.1e12, "float16": 362.1e12}),
    ("L4", {"float32": 30.3e12, "bfloat16": 121e12, "float16": 121e12}),
    ("RTX 4090", {"float32": 82.6e12, "bfloat16": 165.2e12, "float16": 165.2e12}),
)


def datasheet_peak(device_name: str, dtype: str) -> float | None:
    """The dense peak of `device_name` for `dtype`, None where the table has none."""
    for known, peaks in PEAKS:
        if known.lower() in device_name.lower():
            return peaks.get(dtype)
    return None
