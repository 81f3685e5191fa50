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
    replays = _C._fused_stats()["replays"]
    want, got = [], []
    for _ in range(10):
        x, y = torch.randn(16, 8, generator=g).to("tpu"), torch.randn(16, 4, generator=g).to("tpu")
        want.append(_step(eager, opt_eager, x, y).item())
        got.append(compiled(model, opt, x, y).item())
    assert got == pytest.approx(want, abs=1e-5)
    assert got[-1] < got[0]
    assert _C._executor_stats()["compiled_graphs"] - graphs >= 20  # compiled, not run eagerly
    # forward, backward and optimizer graphs are replayed from the third step on (AdamW's step
    # counters live on tpu: capturable, as Dynamo makes them on cuda)
    assert _C._fused_stats()["replays"] - replays >= 3 * 8
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), atol=1e-5, rtol=1e-4)


def _optimizer_steps(make_optimizer, steps, seed, scheduled=False):
    """The same Linear trained on tpu eagerly, on tpu with `opt.step` compiled, on CPU in float32 and
    in float64 (make_optimizer(params, eager=...)); returns the models and the replays counted."""
    torch.manual_seed(0)
    base = nn.Linear(6, 3)
    models = {"eager": copy.deepcopy(base).to("tpu"), "compiled": copy.deepcopy(base).to("tpu"),
              "cpu": copy.deepcopy(base), "f64": copy.deepcopy(base).double()}
    opts = {k: make_optimizer(m.parameters(), eager=k == "eager") for k, m in models.items()}
    schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1 / (s + 1)) for o in opts.values()] if scheduled else []
    step = torch.compile(opts["compiled"].step, backend="tpu")
    g = torch.Generator().manual_seed(seed)
    replays = _C._fused_stats()["replays"]
    for _ in range(steps):
        x = torch.randn(4, 6, generator=g)
        for k, m in models.items():
            opts[k].zero_grad()
            xk = x.double() if k == "f64" else x.to(next(m.parameters()).device)
            m(xk).square().sum().backward()
            if k != "compiled":
                opts[k].step()
        step()
        for s in schedulers:
            s.step()
    return models, _C._fused_stats()["replays"] - replays


def _assert_compiled_equals_eager(models):
    """Compiled weights equal eager tpu's within 1e-7 plus 4x CPU float32's own largest error against
    float64 on each weight."""
    for p, e, c, r in zip(*(models[k].parameters() for k in ("compiled", "eager", "cpu", "f64"))):
        cpu_error = (c.detach().double() - r.detach()).abs().max().item()
        assert cpu_error < 1e-6
        torch.testing.assert_close(p.detach().cpu(), e.detach().cpu(), atol=1e-7 + 4 * cpu_error, rtol=0)


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.AdamW, torch.optim.Adam])
def test_compiled_optimizer_step_alone_matches_eager(mode, optimizer):
    # Compiled, Adam runs its capturable algorithm (step counters and bias corrections on
    # device in float32), the one Dynamo picks on cuda; so it is compared with eager tpu
    # running that algorithm (capturable=True), within 1e-7 plus 4x CPU float32's own largest error
    # against float64 on each weight (float32 capturable itself is ~1e-4 off float64 on
    # 1 - beta2**step). SGD has no such option.
    def make(params, eager):
        extra = {"capturable": True} if eager and optimizer is not torch.optim.SGD else {}
        return optimizer(params, lr=0.1, **extra)

    models, replays = _optimizer_steps(make, steps=5, seed=2)
    assert replays >= 3  # steps 2.. replay the optimizer graph
    _assert_compiled_equals_eager(models)


def test_compiled_optimizer_step_with_a_tensor_learning_rate_and_a_scheduler_replays(mode):
    # lr as a CPU tensor (PyTorch's advice against a recompile per scheduler step): its value and
    # the scalar math on it reach the program as a tpu operand, so every step replays with the
    # scheduler's new value. Compared with eager tpu running the same (capturable) algorithm.
    def make(params, eager):
        return torch.optim.AdamW(params, lr=torch.tensor(0.05), capturable=eager)

    models, replays = _optimizer_steps(make, steps=6, seed=3, scheduled=True)
    assert replays >= 4
    _assert_compiled_equals_eager(models)


def test_optimizer_step_donating_weights_a_running_backward_reads_matches_eager(mode):
    # The optimizer graph overwrites the weights in place (donated buffers) right after the backward
    # graph that reads them was launched: the launch does not wait for backward
    # (FusedGraph::dropRunningHolds); PJRT runs it after backward's reads. The layers are large
    # enough that backward is still running when the optimizer step launches.
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 8))
    models = {"eager": copy.deepcopy(base).to("tpu"), "compiled": copy.deepcopy(base).to("tpu"),
              "cpu": copy.deepcopy(base), "f64": copy.deepcopy(base).double()}
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for k, m in models.items()}
    compiled = torch.compile(_step, backend="tpu")
    g = torch.Generator().manual_seed(4)
    replays = _C._fused_stats()["replays"]
    for _ in range(5):
        x, y = torch.randn(2048, 256, generator=g), torch.randn(2048, 8, generator=g)
        for k, m in models.items():
            w = next(m.parameters())
            (compiled if k == "compiled" else _step)(m, opts[k], x.to(w), y.to(w))
    assert _C._fused_stats()["replays"] - replays >= 3 * 3  # steps 3.. replay forward, backward, optimizer
    _assert_compiled_equals_eager(models)
