"""aten::linear with a one-program backward in Strict mode (csrc/aten/LinearKernels.cpp): values and the three
gradients against float64 CPU in all three modes; the paths that keep PyTorch's composite (no grad, functorch,
forward-mode AD) still give CPU's results; double backward and checkpointing work through the one node."""
import pytest
import torch
import torch.nn.functional as F
import torch_tpu

SHAPES = {  # name: (input shape, out features, bias)
    "2d": ((5, 6), 4, True),
    "3d": ((2, 3, 6), 4, True),
    "1d": ((6,), 3, True),
    "no_bias": ((2, 3, 6), 4, False),
    "4d": ((2, 3, 3, 6), 4, True),
}


def _leaves(name, device, dtype, seed=0):
    shape, out, bias = SHAPES[name]
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(shape, generator=g), torch.randn(out, shape[-1], generator=g)
    b = torch.randn(out, generator=g) if bias else None
    return [t.to(device, dtype).requires_grad_() if t is not None else None for t in (x, w, b)]


def _grads(name, device, dtype):
    x, w, b = _leaves(name, device, dtype)
    y = F.linear(x, w, b)
    y.backward(torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(y.shape).to(device, dtype))
    return [y] + [t.grad for t in (x, w, b) if t is not None]


def _within_cpu_error(got, want, exact):
    for g, w, e in zip(got, want, exact):
        eps = torch.finfo(torch.float32).eps
        tol = 4 * max((w.double() - e).abs().max().item(), eps * e.abs().max().item(), eps)
        assert g.device.type == "tpu"
        torch.testing.assert_close(g.detach().cpu().double(), e, rtol=0, atol=tol)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_linear_gradients_match_cpu(mode, name):
    _within_cpu_error(_grads(name, "tpu", torch.float32), _grads(name, "cpu", torch.float32),
                      _grads(name, "cpu", torch.float64))


@pytest.mark.parametrize("name", ["3d", "4d", "2d"])
def test_output_modified_in_place(mode, name):
    # Linear then ReLU(inplace=True) (Swinv2's position-bias MLP): the output of a 3-d or wider input is addmm's
    # result reshaped, and must not be a view autograd refuses to modify in place.
    def run(device, dtype):
        x, w, b = _leaves(name, device, dtype)
        y = torch.relu_(F.linear(x, w, b))
        y.backward(torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(y.shape).to(device, dtype))
        return [y, x.grad, w.grad, b.grad]

    _within_cpu_error(run("tpu", torch.float32), run("cpu", torch.float32), run("cpu", torch.float64))


def test_strict_linear_backward_is_one_program():
    with torch_tpu.eager_mode("strict"):
        x, w, b = _leaves("3d", "tpu", torch.float32)
        for _ in range(2):
            y = F.linear(x, w, b)
            assert "LinearFunction" in y.grad_fn.name()
            torch.tpu.synchronize()
            before = torch_tpu._C._fused_stats()
            y.backward(torch.ones_like(y))
            after = torch_tpu._C._fused_stats()
            assert after["flushes"] - before["flushes"] == 1  # grad_input, grad_weight, grad_bias: one graph


def test_only_the_needed_gradients(mode):
    for wanted in ("x", "w", "b"):
        leaves = {}
        for device, dtype in (("tpu", torch.float32), ("cpu", torch.float32), ("cpu", torch.float64)):
            x, w, b = (t.detach() for t in _leaves("2d", device, dtype))
            {"x": x, "w": w, "b": b}[wanted].requires_grad_()
            F.linear(x, w, b).sum().backward()
            leaves[(device, dtype)] = [x.grad, w.grad, b.grad]
        got, want, exact = leaves.values()
        for g, w_, e in zip(got, want, exact):
            assert (g is None) == (e is None)
        _within_cpu_error(*([t for t in ts if t is not None] for ts in (got, want, exact)))


def test_double_backward_matches_cpu(mode):
    results = []
    for device, dtype in (("tpu", torch.float32), ("cpu", torch.float32), ("cpu", torch.float64)):
        x, w, b = _leaves("2d", device, dtype)
        y = torch.tanh(F.linear(x, w, b))
        (gx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        gx.pow(2).sum().backward()
        results.append([gx, w.grad, b.grad])
    _within_cpu_error(*results)


def test_composite_paths_match_cpu(mode):
    """no grad, torch.func.grad (functorch), forward-mode AD and a checkpointed block."""
    def f(x, w, b):
        return torch.tanh(F.linear(x, w, b)).sum()

    results = []
    for device, dtype in (("tpu", torch.float32), ("cpu", torch.float32), ("cpu", torch.float64)):
        x, w, b = (t.detach() for t in _leaves("3d", device, dtype))
        with torch.no_grad():
            plain = F.linear(x, w, b)
        func_grad = torch.func.grad(f, argnums=1)(x, w, b)
        _, jvp = torch.func.jvp(lambda x_: F.linear(x_, w, b), (x,), (torch.ones_like(x),))
        w.requires_grad_()
        torch.utils.checkpoint.checkpoint(f, x, w, b, use_reentrant=False).backward()
        results.append([plain, func_grad, jvp, w.grad])
    _within_cpu_error(*results)
