"""pytorch/examples' word_language_model, small: an Embedding, a 2-layer LSTM (or GRU) and a
Linear decoder with log_softmax; the loss a module (`nn.NLLLoss()`), no optimizer: the
gradients are clipped and the weights updated by hand, as main.py does. ITERATIONS
iterations of BPTT x BATCH tokens; with `eval`, an evaluation under no_grad every EVAL_EVERY
iterations from the second (in steps 2 and 5), as main.py's evaluate(), over the data
EVAL_ROUNDS times."""

import sys

import torch
from torch import nn

VOCAB, WIDTH, LAYERS, BPTT, BATCH, ITERATIONS, EVAL_EVERY, EVAL_ROUNDS = 100, 64, 2, 35, 20, 6, 3, 3


class RNNModel(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(VOCAB, WIDTH)
        self.rnn = getattr(nn, kind)(WIDTH, WIDTH, LAYERS, dropout=0.2)
        self.decoder = nn.Linear(WIDTH, VOCAB)

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
        decoded = self.decoder(self.drop(output)).view(-1, VOCAB)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, batch):
        weight = next(self.parameters())
        zeros = weight.new_zeros(LAYERS, batch, WIDTH)
        return (zeros, zeros.clone()) if isinstance(self.rnn, nn.LSTM) else zeros


def detach(hidden):
    return hidden.detach() if isinstance(hidden, torch.Tensor) else tuple(map(detach, hidden))


def main(kind, evaluate):
    torch.manual_seed(0)
    data = torch.randint(0, VOCAB, (BPTT * ITERATIONS + 1, BATCH))
    model, criterion = RNNModel(kind), nn.NLLLoss()
    hidden = model.init_hidden(BATCH)
    for i in range(ITERATIONS):
        if evaluate and i % EVAL_EVERY == 1:  # after the first iteration, and so on
            model.eval()
            with torch.no_grad():
                held = model.init_hidden(BATCH)
                for start in list(range(0, BPTT * ITERATIONS, BPTT)) * EVAL_ROUNDS:
                    output, held = model(data[start:start + BPTT], held)
                    criterion(output, data[start + 1:start + 1 + BPTT].reshape(-1))
            model.train()
        source = data[i * BPTT:(i + 1) * BPTT]
        targets = data[i * BPTT + 1:(i + 1) * BPTT + 1].reshape(-1)
        model.zero_grad()
        hidden = detach(hidden)
        output, hidden = model(source, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-20)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "LSTM", "eval" in sys.argv[2:])
