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


def test_inplace_updates_donate_their_buffers(fused):
    x = torch.arange(8.0).to("tpu")
    y = torch.ones(8).to("tpu")
    torch.tpu.synchronize()
    before = stats()["donated_buffers"]
    x.add_(1).mul_(2)  # read and overwritten: its buffer is reused for the new value
    z = x + y          # y is only read: kept
    torch.tpu.synchronize()
    assert stats()["donated_buffers"] == before + 1
    assert_close(x, (torch.arange(8.0) + 1) * 2)
    assert_close(y, torch.ones(8))
    assert_close(z, (torch.arange(8.0) + 1) * 2 + 1)


def test_donation_skips_a_new_value_of_another_dtype(fused):
    x = torch.arange(8.0).to("tpu")
    torch.tpu.synchronize()
    before = stats()["donated_buffers"]
    x.view(torch.int32).add_(1)  # the storage's new value is int32: the float32 buffer cannot hold it
    torch.tpu.synchronize()
    assert stats()["donated_buffers"] == before
    expected = torch.arange(8.0)
    expected.view(torch.int32).add_(1)
    assert torch.equal(x.cpu(), expected)


def _mlp_step(model, opt, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("max_ops", [100, 30])  # a step (~90 ops) within the bound, and across 3 bounds
def test_repeated_steps_are_cut_at_the_step_boundary(fused, max_ops):
    # No host read inside the loop: only the size bound and the learned period cut graphs.
    # A step is not a multiple of the bound, so size-bound cuts alone would start every
    # graph at a different op (a new program each time); the learned boundary makes the
    # graphs repeat, and steady-state steps compile nothing.
    torch_tpu._C._set_fused_max_ops(max_ops)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        x, y = torch.randn(5, 4).to("tpu"), torch.randn(5, 1).to("tpu")
        cpu_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        cpu_model.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
        cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
        for _ in range(20):
            loss = _mlp_step(model, opt, x, y)  # (keeping `loss` alive is part of what the graphs output)
        start = stats()
        for _ in range(20):
            loss = _mlp_step(model, opt, x, y)
        end = stats()
        assert end["step_boundaries"] > start["step_boundaries"]
        assert end["compiles"] == start["compiles"]
        for _ in range(40):
            cpu_loss = _mlp_step(cpu_model, cpu_opt, x.cpu(), y.cpu())
        assert loss.item() == pytest.approx(cpu_loss.item(), rel=1e-4)
    finally:
        torch_tpu._C._set_fused_max_ops(1000)


def test_step_boundary_is_forgotten_when_the_stream_changes(fused):
    torch_tpu._C._set_fused_max_ops(30)
    try:
        x = torch.zeros(4).to("tpu")
        for _ in range(100):  # period 2: learned, then cut every 30 ops
            x.add_(1)
            x.mul_(1)
        before = stats()["step_boundaries"]
        assert before > 0
        for _ in range(10):
            x.sub_(1)  # breaks the period: back to the size bound, values still exact
        assert_close(x, torch.full((4,), 90.0))
        assert stats()["step_boundaries"] == before
    finally:
        torch_tpu._C._set_fused_max_ops(1000)


def test_index_ops_stay_in_the_graph_and_still_raise(fused):
    table = torch.arange(12.0).reshape(6, 2)
    t = table.to("tpu")
    good = torch.tensor([5, 0, 2])
    before = stats()["flushes"]
    y = torch.nn.functional.embedding(good.to("tpu"), t) * 2
    assert stats()["flushes"] == before  # the index op did not cut the graph
    assert_close(y, torch.nn.functional.embedding(good, table) * 2)
    bad = torch.tensor([1, 6])
    z = torch.nn.functional.embedding(bad.to("tpu"), t) + 1
    w = z.sum()
    with pytest.raises(IndexError, match="aten::index_select"):
        w.item()  # the host read runs the graph, then raises before handing out a value
    torch.tpu.synchronize()  # reported once


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


def test_flush_does_not_wait_for_its_graph(fused):
    # A flush enqueues the graph and returns; the inputs it reads stay alive until it has run,
    # even when Python drops them at once (the plugin would otherwise block in their release).
    g = torch.Generator().manual_seed(0)
    a_cpu = torch.randn(1024, 1024, generator=g) / 32
    a = a_cpu.to("tpu")
    torch.tpu.synchronize()
    torch_tpu._C._set_fused_max_ops(9)
    try:
        y = a
        for _ in range(8):
            y = y @ a
        total = y.sum()  # the 9th op: the size bound flushes ~17 GFLOP without waiting for them
        assert stats()["running_graphs"] == 1
    finally:
        torch_tpu._C._set_fused_max_ops(1000)
    del a, y
    expected = a_cpu
    for _ in range(8):
        expected = expected @ a_cpu
    assert_close(total, expected.sum(), rtol=1e-3, atol=1e-3)
    torch.tpu.synchronize()
    assert stats()["running_graphs"] == 0
