"""Train a small LightningModule on synthetic data, validating inside the loop: a script
that knows nothing of profile-all.

    python scripts/examples/train_lightning.py --max-steps 40
    profile-all run scripts/examples/train_lightning.py -- --max-steps 40

Needs PyTorch Lightning (`pip install lightning`).
"""

import argparse
import tempfile

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

    def training_step(self, batch, batch_idx):
        features, labels = batch
        return nn.functional.cross_entropy(self.net(features), labels)

    def validation_step(self, batch, batch_idx):
        features, labels = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(features), labels))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def loader(samples: int, batch_size: int, seed: int) -> DataLoader:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (samples,), generator=generator)
    features = torch.randn(10, 64, generator=generator)[labels] + torch.randn(
        samples, 64, generator=generator)
    return DataLoader(TensorDataset(features, labels), batch_size=batch_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--val-every", type=int, default=10, help="steps between validations")
    parser.add_argument("--profiler", choices=["simple", "advanced", "profile-all"],
                        help="Lightning's own profiler, or profile-all's (profile-all run "
                             "gives the Trainer profile-all's around any)")
    args = parser.parse_args()
    profiler = args.profiler
    if profiler == "profile-all":
        from profile_all.lightning import Profiler

        profiler = Profiler()

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as root:
        trainer = L.Trainer(max_steps=args.max_steps, val_check_interval=args.val_every,
                            limit_val_batches=4, check_val_every_n_epoch=None,
                            accelerator="cpu", devices=1, logger=False,
                            enable_progress_bar=False, enable_model_summary=False,
                            default_root_dir=root, profiler=profiler)
        trainer.fit(Classifier(), loader(args.batch_size * args.max_steps, args.batch_size, 0),
                    loader(args.batch_size * 4, args.batch_size, 1))


if __name__ == "__main__":
    main()
