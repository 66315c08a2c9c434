"""minGPT's trainer, small: batches from a torch DataLoader with worker processes, an
evaluation on the held-out split at iteration 0 (a callback), then training with AdamW."""

import itertools
import sys

import torch
import torch.nn.functional as F
from _setup import corpus
from torch import nn
from torch.utils.data import DataLoader, Dataset

block, width, vocab = 32, 64, 512


class Tokens(Dataset):
    def __init__(self, ids):
        self.ids = ids

    def __len__(self):
        return len(self.ids) - block - 1

    def __getitem__(self, i):
        chunk = self.ids[i:i + block + 1]
        return chunk[:-1], chunk[1:]


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, 4, 4 * width, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(width, vocab)

    def forward(self, x, y):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        logits = self.head(self.blocks(self.embed(x), mask=mask, is_causal=True))
        return logits, F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))


def main():
    torch.manual_seed(0)
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    ids = torch.tensor(corpus(2_000_000)) % vocab
    train = Tokens(ids[: int(0.9 * len(ids))])
    test = Tokens(ids[int(0.9 * len(ids)):])
    model = GPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    loader = DataLoader(train, batch_size=16, shuffle=True, num_workers=2)

    def evaluate():  # the trainer's callback at iteration 0
        model.eval()
        with torch.no_grad():
            losses = [model(x, y)[1]
                      for x, y in itertools.islice(DataLoader(test, batch_size=16), 20)]
        model.train()
        return torch.stack(losses).mean()

    for it, (x, y) in enumerate(loader):
        if it == 0:
            print(f"held-out loss {evaluate():.3f}")
        _, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if it + 1 == iters:
            break


if __name__ == "__main__":
    main()
