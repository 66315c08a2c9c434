"""A script that profiles itself, as teaching notebooks do (argv[1] names the tool): a 1->1
3x3 convolution without bias on a 1x1x36x64 image, counted or traced by the tool the
script calls itself, whose own figure it prints ("OWN ..."), then 4 training steps. A
hand count: 36 x 64 x 9 = 20,736 MACs, 41,472 FLOPs, one forward."""

import sys

import torch
from torch import nn

tool = sys.argv[1]
torch.manual_seed(0)
conv = nn.Conv2d(1, 1, 3, padding=1, bias=False)
image = torch.randn(1, 1, 36, 64)

if tool == "thop":
    from thop import profile  # (bound as the module is imported: the watch is there first)

    macs, params = profile(conv, inputs=(image,), verbose=False)  # THOP CALL
    print(f"OWN {macs:.0f} MACs", flush=True)
elif tool == "flops-profiler":
    from flops_profiler.profiler import FlopsProfiler

    profiler = FlopsProfiler(conv)
    profiler.start_profile()  # FLOPS-PROFILER CALL
    conv(image)
    print(f"OWN {profiler.get_total_flops():.0f} FLOPs", flush=True)
    profiler.end_profile()
elif tool == "flop-counter":
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as mode:  # FLOP-COUNTER CALL
        conv(image)
    print(f"OWN {mode.get_total_flops():.0f} FLOPs", flush=True)
elif tool == "torch-profiler":
    from torch.profiler import profile

    with profile() as own:  # TORCH-PROFILER CALL
        conv(image)
    print(f"OWN {sum(e.count for e in own.key_averages() if e.key == 'aten::conv2d')} "
          "conv2d calls", flush=True)
elif tool == "cprofile":
    import cProfile

    with cProfile.Profile() as own:  # CPROFILE CALL
        conv(image)
    print(f"OWN {own.getstats()[0].callcount > 0} calls seen", flush=True)
elif tool == "memory_profiler":
    from memory_profiler import profile

    @profile  # MEMORY_PROFILER CALL
    def forward():
        return conv(image)

    forward()
    print("OWN a memory table", flush=True)

optimizer = torch.optim.SGD(conv.parameters(), lr=0.01)
for _ in range(4):
    loss = conv(torch.randn(1, 1, 36, 64)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
