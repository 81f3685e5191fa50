"""Fused eager mode specifics: what cuts a graph, what is materialised, what is reused."""
import os
import sys

import pytest
import torch
import torch_tpu

from conftest import assert_close

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from gpt import train  # noqa: E402


@pytest.fixture
def fused():
    with torch_tpu.eager_mode("fused"):
        yield


def stats():
    return torch_tpu._C._fused_stats()


def test_ops_are_deferred_until_host_read(fused):
    before = stats()
    x = torch.arange(6.0).to("tpu")
    y = (x * 2 + 1).exp()
    assert stats()["flushes"] == before["flushes"]  # nothing ran yet
    assert_close(y, (torch.arange(6.0) * 2 + 1).exp())
    after = stats()
    assert after["flushes"] == before["flushes"] + 1
    assert after["fused_ops"] - before["fused_ops"] == 3


def test_synchronize_and_mode_change_flush(fused):
    x = torch.ones(4).to("tpu")
    x.add_(1)
    before = stats()["flushes"]
    torch.tpu.synchronize()
    assert stats()["flushes"] == before + 1
    x.mul_(3)
    torch_tpu.set_eager_mode("strict")  # mode change flushes
    assert stats()["flushes"] == before + 2
    assert_close(x, torch.full((4,), 6.0))


def test_size_bound_cuts_graph(fused):
    torch_tpu._C._set_fused_max_ops(50)
    try:
        x = torch.zeros(8).to("tpu")
        before = stats()["flushes"]
        for _ in range(60):
            x.add_(1)
        assert stats()["flushes"] == before + 1
        assert_close(x, torch.full((8,), 60.0))
    finally:
        torch_tpu._C._set_fused_max_ops(1000)


def test_dead_intermediates_are_not_outputs(fused):
    x = torch.arange(4.0).to("tpu")
    torch.tpu.synchronize()
    a = x * 2
    b = a + 1
    del a  # dies before the flush: never materialised
    c = b.sum()
    del b
    assert c.item() == pytest.approx(16.0)


def test_views_and_inplace_keep_strict_semantics(fused):
    cpu = torch.arange(24.0).reshape(4, 6)
    tpu = cpu.clone().to("tpu")
    for t in (cpu, tpu):
        v = t[1:, ::2].t()
        v.mul_(-1)
        t[0].fill_(5)
        t.view(-1)[3:9].add_(100)
    assert_close(tpu, cpu)


def test_second_step_compiles_nothing(fused):
    def step(model, opt, x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = torch.randn(5, 4).to("tpu"), torch.randn(5, 1).to("tpu")
    step(model, opt, x, y)
    step(model, opt, x, y)  # optimizer state now exists: the steady-state graph
    compiles = stats()["compiles"]
    step(model, opt, x, y)
    assert stats()["compiles"] == compiles


def test_rng_matches_strict_for_same_seed(fused):
    torch.tpu.manual_seed(3)
    a = torch.rand(5, device="tpu").cpu()
    torch_tpu.set_eager_mode("strict")
    torch.tpu.manual_seed(3)
    b = torch.rand(5, device="tpu").cpu()
    assert torch.equal(a, b)


def test_gpt_losses_match_strict_and_cpu(fused):
    fused_losses = train("tpu", steps=20)
    torch_tpu.set_eager_mode("strict")
    strict_losses = train("tpu", steps=20)
    cpu_losses = train("cpu", steps=20)
    assert fused_losses == pytest.approx(strict_losses, rel=1e-4)
    assert fused_losses == pytest.approx(cpu_losses, rel=1e-4)
