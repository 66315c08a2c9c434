"""Inference of a BERT-style encoder over a tokenised corpus, batch by batch under
inference_mode, as a classification or embedding job does."""

import sys

import torch
from _setup import corpus
from torch import nn

torch.manual_seed(0)
batches = int(sys.argv[1]) if len(sys.argv) > 1 else 80
vocab, width, seq_len, batch = 4096, 128, 128, 8
ids = torch.tensor(corpus(2_000_000)) % vocab


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, width), nn.Embedding(seq_len, width)
        layer = nn.TransformerEncoderLayer(width, 4, 4 * width, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 4)
        self.pooler = nn.Linear(width, width)

    def forward(self, x):
        hidden = self.encoder(self.tokens(x) + self.positions(torch.arange(x.shape[1])))
        return torch.tanh(self.pooler(hidden[:, 0]))


model = Encoder().eval()
pooled = []
with torch.inference_mode():
    for b in range(batches):
        start = b * batch * seq_len
        pooled.append(model(ids[start:start + batch * seq_len].view(batch, seq_len)))
print(torch.cat(pooled).shape)
