"""nanoGPT's train.py, small: a char-level GPT trained with AdamW, `estimate_loss()` under
no_grad every `eval_interval` iterations (iteration 0 included), and a short generation at
the end. The set-up tokenises a corpus first, as prepare.py and the data loading do."""

import sys

import torch
import torch.nn.functional as F
from _setup import corpus
from torch import nn

torch.manual_seed(0)
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 60
block, batch, width, heads, layers, eval_interval, eval_iters = 64, 8, 96, 4, 3, 20, 5
data = torch.tensor(corpus(2_000_000)) % 256
train, val = data[: int(0.9 * len(data))], data[int(0.9 * len(data)):]


def get_batch(split):
    source = train if split == "train" else val
    ix = torch.randint(len(source) - block, (batch,))
    return (torch.stack([source[i:i + block] for i in ix]),
            torch.stack([source[i + 1:i + 1 + block] for i in ix]))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (p.view(b, t, heads, c // heads).transpose(1, 2)
                   for p in self.attn(self.ln_1(x)).split(c, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(256, width), nn.Embedding(block, width)
        self.h = nn.ModuleList(Block() for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(width), nn.Linear(width, 256, bias=False)

    def forward(self, idx, targets=None):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.h:
            x = b(x)
        logits = self.head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, 256), targets.view(-1))
        return logits, loss


model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


@torch.no_grad()
def estimate_loss():
    model.eval()
    out = {split: torch.stack([model(*get_batch(split))[1] for _ in range(eval_iters)]).mean()
           for split in ("train", "val")}
    model.train()
    return out


for it in range(iters):
    if it % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {it}: train {losses['train']:.3f} val {losses['val']:.3f}")
    _, loss = model(*get_batch("train"))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()

model.eval()
with torch.no_grad():
    idx = torch.zeros((1, 1), dtype=torch.long)
    for _ in range(20):
        logits, _ = model(idx[:, -block:])
        idx = torch.cat((idx, torch.multinomial(F.softmax(logits[:, -1], -1), 1)), dim=1)
