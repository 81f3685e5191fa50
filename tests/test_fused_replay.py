"""Fused replay (a repeated step bound to its recorded program without tracing), view offsets that
move (a KV cache written at a Python-int position) and the compile counters. Every test runs in all
three eager modes against CPU PyTorch; the fused-only counters are checked in fused mode."""
import uuid

import pytest
import torch
import torch_tpu

from conftest import assert_close


def fused_stats():
    return torch_tpu._C._fused_stats()


def compiles():
    return torch.tpu.executor_stats()["compiles"]


def mlp_training(device, steps, change=None):
    """A small MLP trained with AdamW; the loss is read every step. change(step, h) may alter the step."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = [(torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g)) for _ in range(steps)]
    losses = []
    for step, (x, y) in enumerate(data):
        x, y = x.to(device), y.to(device)
        h = model(x)
        if change is not None:
            h = change(step, h)
        loss = torch.nn.functional.cross_entropy(h, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def check_training(mode, steps, change=None):
    cpu_losses, cpu_params = mlp_training("cpu", steps, change)
    before = fused_stats()
    tpu_losses, tpu_params = mlp_training("tpu", steps, change)
    after = fused_stats()
    assert tpu_losses == pytest.approx(cpu_losses, rel=1e-4)
    for a, b in zip(tpu_params, cpu_params):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    return {k: after[k] - before[k] for k in after}


def test_training_steps_replay_without_tracing(mode):
    delta = check_training(mode, 12)
    if mode == "fused":
        # After the first steps every graph is bound to a recorded program.
        assert delta["eager_replays"] >= 8
        assert delta["fused_ops"] > 0


def test_replay_stops_compiling(mode):
    if mode != "fused":
        pytest.skip("counts fused graphs")
    mlp_training("tpu", 4)  # the graphs of this loop are compiled and recorded
    c0, r0 = compiles(), fused_stats()["eager_replays"]
    mlp_training("tpu", 6)
    assert compiles() == c0
    assert fused_stats()["eager_replays"] - r0 >= 6


def test_stream_that_changes_mid_run(mode):
    # Steps 0-4 and 9-11 run one op stream, steps 5-8 add ops in the middle of the forward: the
    # replay sees a mismatch there, runs what it bound as a prefix and traces the rest.
    def change(step, h):
        return h * 0.5 + h.relu() if 5 <= step < 9 else h

    delta = check_training(mode, 12, change)
    if mode == "fused":
        assert delta["replay_fallbacks"] >= 1
        assert delta["eager_replays"] >= 4


def test_data_dependent_branch(mode):
    # Which ops a step runs depends on a value read back in the step before.
    def run(device):
        x = torch.linspace(-1, 1, 64).reshape(8, 8).to(device)
        w = torch.full((8, 8), 0.25).to(device)
        out = []
        for _ in range(14):
            y = x @ w
            if y.sum().item() > 0:
                x = torch.tanh(y) * 0.5 - 0.3
            else:
                x = (y * 1.5).sin() * 0.5 + 0.2
                x[:, 1:3] = x[:, 1:3] * 2
            out.append(x.sum().item())
        return out, x.cpu()

    cpu_out, cpu_x = run("cpu")
    before = fused_stats()
    tpu_out, tpu_x = run("tpu")
    assert tpu_out == pytest.approx(cpu_out, rel=1e-4, abs=1e-5)
    torch.testing.assert_close(tpu_x, cpu_x, rtol=1e-4, atol=1e-5)
    assert len(set(v > 0 for v in cpu_out)) == 2  # both branches ran
    if mode == "fused":
        assert fused_stats()["eager_replays"] > before["eager_replays"]


def test_dead_and_live_outputs_change_between_steps(mode):
    # A step that keeps one more tensor alive than the recorded one: the replay must still
    # materialise it (a prefix program with that output), and results stay the same.
    def run(device):
        x = torch.arange(32.0).reshape(4, 8).to(device)
        kept = []
        for step in range(8):
            a = x * 2
            b = a + 1
            x = b.tanh() * 3
            if step % 3 == 2:
                kept.append(a)  # alive at the flush this time
            del a, b
            x.sum().item()
        return x.cpu(), [k.cpu() for k in kept]

    cpu_x, cpu_kept = run("cpu")
    tpu_x, tpu_kept = run("tpu")
    torch.testing.assert_close(tpu_x, cpu_x)
    for a, b in zip(tpu_kept, cpu_kept):
        torch.testing.assert_close(a, b)


def kv_cache_decode(device, steps, B=2, H=3, T=16, D=4):
    g = torch.Generator().manual_seed(1)
    ks = [torch.randn(B, H, 1, D, generator=g) for _ in range(steps)]
    q = torch.randn(B, H, 1, D, generator=g).to(device)
    cache = torch.zeros(B, H, T, D).to(device)
    flat = torch.zeros(B * T).to(device)
    outs = []
    for pos in range(steps):
        cache[:, :, pos:pos + 1] = ks[pos].to(device)  # strided view at a moving offset
        flat[pos * 2:pos * 2 + 2] = float(pos)        # contiguous view at a moving offset
        window = cache[:, :, pos:pos + 1]              # read back at the moving offset
        outs.append(((window * q).sum() + (cache * q).sum() + flat[pos * 2:pos * 2 + 3].sum()).item())
    return outs, cache.cpu(), flat.cpu()


def test_moving_offset_does_not_compile_every_step(mode):
    cpu_out, cpu_cache, cpu_flat = kv_cache_decode("cpu", 12)
    kv_cache_decode("tpu", 3)  # programs for the first positions
    c0 = compiles()
    tpu_out, tpu_cache, tpu_flat = kv_cache_decode("tpu", 12)
    assert tpu_out == pytest.approx(cpu_out, rel=1e-5, abs=1e-5)
    torch.testing.assert_close(tpu_cache, cpu_cache)
    torch.testing.assert_close(tpu_flat, cpu_flat)
    # Offsets 3..11 are new, but they are operands of strict programs and fused graphs alike: the
    # same programs serve every position.
    assert compiles() == c0


def test_executor_stats_count_fused_compiles(mode):
    if mode != "fused":
        pytest.skip("fused-mode counter")
    n = 1000 + uuid.uuid4().int % 90000  # a module text no cache directory holds yet
    s0 = torch.tpu.executor_stats()
    x = torch.ones(n).to("tpu")
    y = (x * 3 - 1).sum()
    assert y.item() == pytest.approx(2.0 * n)
    s1 = torch.tpu.executor_stats()
    assert s1["fused_compiles"] >= s0["fused_compiles"] + 1
    assert s1["compiles"] >= s0["compiles"] + 1
    assert s1["compile_seconds"] > s0["compile_seconds"]
