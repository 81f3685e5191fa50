"""Moving modules between cpu and tpu keeps the same Parameter objects, as cpu <-> cuda does.

PyTorch converts a module's tensors in place (`param.data = param.to(device)`) only when the two tensor types
are shallow-copy compatible; csrc/aten/ShallowCopy.cpp tells it that cpu and tpu are. Everything that depends on
parameter identity is checked here: tied weights, optimizers built before the move, `.data =`, and the other
conversion paths (`swap_tensors`, `to_empty`, `load_state_dict(assign=True)`, parametrizations).
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import assert_close


class TiedLM(nn.Module):
    """A GPT-2-shaped language model whose output projection is the embedding matrix."""

    def __init__(self, vocab=48, d=32, ctx=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.ln1 = nn.LayerNorm(d)
        # No projection biases: the key bias has an exactly zero gradient (softmax ignores it), which Adam would
        # turn into +-lr steps of pure rounding noise on any backend, CPU included.
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True, bias=False)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        h = self.ln1(x)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=idx.device), 1)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        return self.lm_head(self.ln_f(x))


def _batches(n, vocab=48, batch=4, t=16):
    g = torch.Generator().manual_seed(7)
    return [torch.randint(0, vocab, (batch, t + 1), generator=g) for _ in range(n)]


def _train_tied(device, dtype=torch.float32, steps=5, optimizer_first=False):
    """5 AdamW steps of TiedLM moved to `device` after construction; returns losses and final weights."""
    torch.manual_seed(0)
    model = TiedLM().to(dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2) if optimizer_first else None
    model.to(device)
    if opt is None:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    assert model.lm_head.weight is model.wte.weight
    losses = []
    for seq in _batches(steps):
        seq = seq.to(device)
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), seq[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu().double() for k, v in model.state_dict().items()}


def test_to_keeps_parameter_objects(mode):
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    params = list(model.parameters())
    assert model.to("tpu") is model
    assert all(a is b for a, b in zip(model.parameters(), params))
    assert all(p.device.type == "tpu" for p in params)
    assert model[1].running_mean.device.type == "tpu"
    model.cpu()
    assert all(a is b for a, b in zip(model.parameters(), params))
    model.tpu()
    assert all(a is b and a.device.type == "tpu" for a, b in zip(model.parameters(), params))
    assert torch._has_compatible_shallow_copy_type(torch.zeros(1), torch.zeros(1, device="tpu"))
    assert torch._has_compatible_shallow_copy_type(torch.zeros(1, device="tpu"), torch.zeros(1))


def test_gradients_move_with_their_parameters(mode):
    model = nn.Linear(3, 2)
    model(torch.randn(5, 3)).sum().backward()
    grad, cpu_grad = model.weight.grad, model.weight.grad.clone()
    model.to("tpu")
    assert model.weight.grad is grad and grad.device.type == "tpu"
    assert_close(model.weight.grad, cpu_grad)


def _cpu_error_bound(optimizer_first=False):
    """The issue's bound for 5 AdamW steps, 1e-5, checked to be at least 3x CPU float32's own distance from
    float64 on the same run (measured: 2.2e-6 on losses, 8.5e-7 on weights)."""
    cpu_losses, cpu_state = _train_tied("cpu", optimizer_first=optimizer_first)
    ref_losses, ref_state = _train_tied("cpu", dtype=torch.float64, optimizer_first=optimizer_first)
    cpu_error = max([abs(a - b) for a, b in zip(cpu_losses, ref_losses)] +
                    [(cpu_state[k] - ref_state[k]).abs().max().item() for k in cpu_state])
    assert 3 * cpu_error <= 1e-5, f"CPU itself is {cpu_error:.2g} from float64: the 1e-5 bound has no margin"
    return cpu_losses, cpu_state, 1e-5


def test_tied_lm_trains_like_cpu(mode):
    cpu_losses, cpu_state, tol = _cpu_error_bound()
    tpu_losses, tpu_state = _train_tied("tpu")
    assert tpu_losses == pytest.approx(cpu_losses, abs=tol, rel=0)
    for key in cpu_state:
        torch.testing.assert_close(tpu_state[key], cpu_state[key], rtol=0, atol=tol, msg=key)


def test_optimizer_built_before_to_trains_the_tpu_weights(mode):
    cpu_losses, cpu_state, tol = _cpu_error_bound(optimizer_first=True)
    tpu_losses, tpu_state = _train_tied("tpu", optimizer_first=True)
    assert tpu_losses == pytest.approx(cpu_losses, abs=tol, rel=0)
    assert tpu_losses[-1] < tpu_losses[0]
    for key in cpu_state:
        torch.testing.assert_close(tpu_state[key], cpu_state[key], rtol=0, atol=tol, msg=key)


def test_optimizer_state_follows_the_parameter(mode):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model.to("tpu")
    x = torch.randn(8, 4)
    for _ in range(3):
        opt.zero_grad()
        model(x.to("tpu")).square().mean().backward()
        opt.step()
    assert all(opt.state[p]["momentum_buffer"].device.type == "tpu" for p in model.parameters())
    assert opt.param_groups[0]["params"][0] is model.weight


def test_data_assignment_across_devices(mode):
    p = nn.Parameter(torch.arange(6.0).reshape(2, 3))
    p.data = p.data.to("tpu") * 2
    assert isinstance(p, nn.Parameter) and p.requires_grad and p.device.type == "tpu"
    (p * p).sum().backward()
    assert p.grad.device.type == "tpu"
    assert_close(p.grad, 4 * torch.arange(6.0).reshape(2, 3))  # d(p*p)/dp = 2p, p = 2 * arange
    p.data = p.data.cpu()
    assert p.device.type == "cpu"
    assert torch.equal(p.detach(), torch.arange(6.0).reshape(2, 3) * 2)


def test_swap_tensors_conversion(mode):
    old = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        model = nn.Linear(3, 2)
        weight, expected = model.weight, model.weight.detach().clone()
        model.to("tpu")
        assert model.weight is weight and weight.device.type == "tpu"
        assert_close(model.weight.detach(), expected)
    finally:
        torch.__future__.set_swap_module_params_on_conversion(old)
    a, b = torch.arange(3.0), torch.arange(4.0, device="tpu")
    torch.utils.swap_tensors(a, b)
    assert a.device.type == "tpu" and b.device.type == "cpu"
    assert_close(a, torch.arange(4.0))


def test_to_empty_and_meta_init(mode):
    def meta_linear():
        with torch.device("meta"):
            return nn.Linear(5, 3)

    # meta -> cpu makes new Parameters (meta is not shallow-copy compatible with a dense backend); tpu does the same.
    cpu, tpu = meta_linear(), meta_linear()
    cpu_weight, tpu_weight = cpu.weight, tpu.weight
    cpu.to_empty(device="cpu")
    tpu.to_empty(device="tpu")
    assert (tpu.weight is tpu_weight) == (cpu.weight is cpu_weight)
    assert isinstance(tpu.weight, nn.Parameter) and tpu.weight.device.type == "tpu" and tpu.weight.shape == (3, 5)
    with torch.no_grad():
        tpu.weight.copy_(torch.arange(15.0).reshape(3, 5))
        tpu.bias.fill_(0.5)
        cpu.weight.copy_(torch.arange(15.0).reshape(3, 5))
        cpu.bias.fill_(0.5)
    x = torch.randn(2, 5)
    assert_close(tpu(x.to("tpu")), cpu(x))
    # A materialized module moved with to_empty keeps its Parameters, as on CPU.
    weight = cpu.weight
    cpu.to_empty(device="tpu")
    assert cpu.weight is weight and weight.device.type == "tpu"


def test_load_state_dict_assign(mode):
    torch.manual_seed(0)
    src = nn.Linear(4, 3)
    state = {k: v.to("tpu") for k, v in src.state_dict().items()}
    dst = nn.Linear(4, 3)
    dst.load_state_dict(state, assign=True)
    assert isinstance(dst.weight, nn.Parameter) and dst.weight.requires_grad
    assert dst.weight.device.type == "tpu"
    x = torch.randn(2, 4)
    assert_close(dst(x.to("tpu")), src(x))
    # Without assign, the cpu parameters are kept and filled from the tpu tensors.
    keep = nn.Linear(4, 3)
    w = keep.weight
    keep.load_state_dict(state)
    assert keep.weight is w and w.device.type == "cpu"
    assert torch.equal(w.detach(), src.weight.detach())


def test_parametrizations_move(mode):
    import torch.nn.utils.parametrize as P

    class Symmetric(nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(0, 1)

    torch.manual_seed(0)
    model = nn.Linear(4, 4)
    P.register_parametrization(model, "weight", Symmetric())
    original = model.parametrizations.weight.original
    expected = model.weight.detach().clone()
    model.to("tpu")
    assert model.parametrizations.weight.original is original and original.device.type == "tpu"
    assert_close(model.weight.detach(), expected)
    x = torch.randn(3, 4)
    out = model(x.to("tpu"))
    out.sum().backward()
    assert original.grad.device.type == "tpu"
    cpu = nn.Linear(4, 4)
    P.register_parametrization(cpu, "weight", Symmetric())
    with torch.no_grad():
        cpu.parametrizations.weight.original.copy_(original.detach().cpu())
        cpu.bias.copy_(model.bias.detach().cpu())
    cpu(x).sum().backward()
    assert_close(original.grad, cpu.parametrizations.weight.original.grad)
