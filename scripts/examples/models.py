"""Small example models, written here (no torchvision, no downloaded weights), with the
FLOPs of one forward pass worked out by hand in each docstring.

    profile-all model scripts/examples/models.py:mlp --input-shape 32,784
    profile-all model scripts/examples/models.py:small_cnn --input-shape 8,3,32,32
    profile-all model scripts/examples/models.py:encoder_layer --input-shape 4,16,64
"""

from torch import nn


def mlp() -> nn.Module:
    """784 -> 256 -> 10 with a ReLU: per sample 2 x (784x256 + 256x10) FLOPs in matmuls."""
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))


def small_cnn() -> nn.Module:
    """Two 3x3 convolutions (padding 1) and a linear head, on 3x32x32 images:
    conv1 3->16 at 32x32, conv2 16->32 at 16x16 (after a 2x2 pool), linear 32*8*8 -> 10."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def encoder_layer() -> nn.Module:
    """One transformer encoder layer: d_model 64, 4 heads, feed-forward 128, batch first."""
    return nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
