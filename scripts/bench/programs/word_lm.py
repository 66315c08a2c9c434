"""pytorch/examples' word_language_model, small: an LSTM language model trained by hand
(no optimizer: `p.data.add_(p.grad, alpha=-lr)`, gradient clipping), its loss a module
(`nn.NLLLoss`), evaluated on the validation split after the epoch."""

import sys

import torch
from _setup import corpus
from torch import nn

torch.manual_seed(0)
batches = int(sys.argv[1]) if len(sys.argv) > 1 else 60
bptt, batch_size, emsize, nhid = 35, 20, 200, 200
ids = torch.tensor(corpus(2_000_000))
ntokens = int(ids.max()) + 1
split = int(0.9 * len(ids))


def batchify(data):
    n = data.size(0) // batch_size
    return data[: n * batch_size].view(batch_size, -1).t().contiguous()


train_data, val_data = batchify(ids[:split]), batchify(ids[split:])


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(ntokens, emsize)
        self.rnn = nn.LSTM(emsize, nhid, 2, dropout=0.2)
        self.decoder = nn.Linear(nhid, ntokens)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return nn.functional.log_softmax(self.decoder(output), dim=-1), hidden


model, criterion, lr = RNNModel(), nn.NLLLoss(), 20.0


def hidden_state():
    return tuple(torch.zeros(2, batch_size, nhid) for _ in range(2))


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def evaluate(source):
    model.eval()
    total, hidden = 0.0, hidden_state()
    with torch.no_grad():
        for i in range(0, min(len(source) - 1, 10 * bptt), bptt):
            data, targets = get_batch(source, i)
            output, hidden = model(data, hidden)
            total += len(data) * criterion(output.view(-1, ntokens), targets).item()
    return total / min(len(source) - 1, 10 * bptt)


model.train()
hidden = hidden_state()
for i in range(0, batches * bptt, bptt):
    data, targets = get_batch(train_data, i)
    hidden = tuple(h.detach() for h in hidden)
    model.zero_grad()
    output, hidden = model(data, hidden)
    loss = criterion(output.view(-1, ntokens), targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
print(f"validation loss {evaluate(val_data):.2f}")
