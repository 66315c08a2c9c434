"""pytorch/examples' time_sequence_prediction, small: two LSTMCells unrolled over sine
waves, trained with LBFGS (a closure that runs forward and backward up to 20 times a
step), a prediction of 200 future points under no_grad after each step."""

import sys

import numpy as np
import torch
from _setup import corpus
from torch import nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2
np.random.seed(2)
T, L, N = 20, 300, 40
corpus(2_000_000)  # the data loading of a real job
x = np.empty((N, L), np.int64)
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
data = np.sin(x / 1.0 / T).astype("float64")


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1, self.lstm2 = nn.LSTMCell(1, 51), nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


torch.manual_seed(0)
input, target = torch.from_numpy(data[3:, :-1]), torch.from_numpy(data[3:, 1:])
test_input, test_target = torch.from_numpy(data[:3, :-1]), torch.from_numpy(data[:3, 1:])
seq = Sequence().double()
criterion = nn.MSELoss()
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8)
for i in range(steps):
    def closure():
        optimizer.zero_grad()
        loss = criterion(seq(input), target)
        loss.backward()
        return loss
    optimizer.step(closure)
    with torch.no_grad():
        pred = seq(test_input, future=200)
        print(f"step {i} test loss {criterion(pred[:, :-200], test_target).item():.6f}")
