"""A GPT in the style of nanoGPT and minGPT, small: embeddings, pre-norm blocks of causal
self-attention (scaled_dot_product_attention) and an MLP, a head without bias. Its forward
computes the loss itself and returns it as the argument says: `tuple` (logits, loss) as
nanoGPT, `loss` alone, `dict` ({"loss", "logits"}) or `dataclass` (an output class of its
own, as HuggingFace's models return); without targets, the logits. Trained with AdamW for
STEPS steps."""

import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, CONTEXT, WIDTH, HEADS, LAYERS, BATCH, STEPS, GENERATED = 64, 16, 32, 2, 2, 4, 3, 8


@dataclass
class Output:
    loss: torch.Tensor
    logits: torch.Tensor


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.c_proj = nn.Linear(WIDTH, WIDTH)
        self.c_fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.mlp_proj = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        batch, time, width = x.shape
        q, k, v = (part.view(batch, time, HEADS, width // HEADS).transpose(1, 2)
                   for part in self.c_attn(self.ln_1(x)).split(width, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(batch, time, width))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, returns):
        super().__init__()
        self.returns = returns
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(CONTEXT, WIDTH)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx, targets=None):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:  # inference, as `profile-all model` calls it
            return logits
        loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        if self.returns == "tuple":
            return logits, loss
        if self.returns == "loss":
            return loss
        if self.returns == "dict":
            return {"loss": loss, "logits": logits}
        return Output(loss, logits)


def language_model():
    """The factory `profile-all model tiny_gpt.py:language_model` builds."""
    return GPT("tuple")


def language_model_and_inputs():
    """A factory that gives its example inputs too, as torchbench's models do."""
    return GPT("tuple"), torch.randint(0, VOCAB, (BATCH, CONTEXT))


def generate(model, idx, tokens):
    """Greedy decoding, a token a call, under no_grad (as minGPT's sample)."""
    with torch.no_grad():
        for _ in range(tokens):
            idx = torch.cat([idx, model(idx)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


def main(returns, generating):
    torch.manual_seed(0)
    model = GPT(returns)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(STEPS):
        idx = torch.randint(0, VOCAB, (BATCH, CONTEXT))
        out = model(idx, torch.roll(idx, -1, dims=1))
        loss = (out[1] if returns == "tuple" else out if returns == "loss"
                else out["loss"] if returns == "dict" else out.loss)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if generating:  # a sample after each step: GENERATED calls of 1x4 to 1x(3 + GENERATED)
            generate(model, idx[:1, :4], GENERATED)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tuple", "generate" in sys.argv[2:])
