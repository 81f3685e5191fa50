"""End-to-end training parity: the same model, seed and data on tpu and on CPU."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from gpt import train  # noqa: E402


def test_gpt_adamw_20_steps_matches_cpu(mode):
    cpu = train("cpu", steps=20, d_model=64, n_layers=2)
    tpu = train("tpu", steps=20, d_model=64, n_layers=2)
    assert len(tpu) == 20
    for step, (a, b) in enumerate(zip(tpu, cpu)):
        assert a == pytest.approx(b, rel=1e-4), f"step {step}: tpu {a} vs cpu {b}"
    assert tpu[-1] < tpu[0]  # it learns


def test_mlp_sgd_momentum_matches_cpu(mode):
    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                                    torch.nn.Tanh(), torch.nn.Linear(32, 3)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        g = torch.Generator().manual_seed(1)
        losses = []
        for _ in range(10):
            x = torch.randn(16, 8, generator=g).to(device)
            y = torch.randint(0, 3, (16,), generator=g).to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().cpu() for p in model.parameters()]

    cpu_losses, cpu_params = run("cpu")
    tpu_losses, tpu_params = run("tpu")
    assert tpu_losses == pytest.approx(cpu_losses, rel=1e-4)
    for a, b in zip(tpu_params, cpu_params):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
