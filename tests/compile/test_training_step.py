"""torch.compile of a whole training step (forward, backward, optimizer.step) with
backend="tpu": 10 steps of SGD and AdamW give the losses of the same eager tpu loop.
Dynamo breaks the graph at loss.backward() (it does not trace autograd calls), so the
step runs as forward / backward / optimizer graphs, each one fused program.

Bounds (losses 1e-5, weights atol 1e-5 / rtol 1e-4): the same 10 steps on CPU float32 are within 7e-8 (SGD)
and 2e-7 (AdamW) of float64 in losses and weights."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_tpu import _C


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.AdamW])
def test_compiled_training_step_matches_eager_for_10_steps(mode, optimizer):
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4)).to("tpu")
    model = copy.deepcopy(eager)
    opt_eager = optimizer(eager.parameters(), lr=0.05)
    opt = optimizer(model.parameters(), lr=0.05)
    compiled = torch.compile(_step, backend="tpu")
    g = torch.Generator().manual_seed(1)
    graphs = _C._executor_stats()["compiled_graphs"]
    want, got = [], []
    for _ in range(10):
        x, y = torch.randn(16, 8, generator=g).to("tpu"), torch.randn(16, 4, generator=g).to("tpu")
        want.append(_step(eager, opt_eager, x, y).item())
        got.append(compiled(model, opt, x, y).item())
    assert got == pytest.approx(want, abs=1e-5)
    assert got[-1] < got[0]
    assert _C._executor_stats()["compiled_graphs"] - graphs >= 20  # compiled, not run eagerly
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), atol=1e-5, rtol=1e-4)
