"""About 10 ms matmuls on the GPU in a region each, synchronised inside the region, so that
the host's wall clock and the device's CUDA events time the same work."""

import torch

import profile_all as pa

size = 8192  # about 10 ms a matmul in float32 on an H100 (tf32 off)
torch.backends.cuda.matmul.allow_tf32 = False
a, b = (torch.randn(size, size, device="cuda") for _ in range(2))
for _ in range(3):  # warm-up, outside any region
    a @ b
torch.cuda.synchronize()
for _ in range(30):
    with pa.region("matmul"):
        a @ b
        torch.cuda.synchronize()
    pa.step()
