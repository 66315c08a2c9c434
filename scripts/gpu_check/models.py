"""Models for `profile-all model --device cuda`: a conv net, and one whose activations
take gigabytes a sample, so that the batch search meets an out-of-memory in a few steps."""

from torch import nn


def conv_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))


def wide_activations() -> nn.Module:
    """1x2048x2048 in, 512 channels out: 8 GiB of float32 activation a sample."""
    return nn.Sequential(nn.Conv2d(1, 512, 3, padding=1), nn.ReLU())
