"""torch_tpu.pallas: JAX functions and Pallas kernels (interpret mode) as torch ops, against PyTorch on CPU.

Accuracy: float32 results must be as close to a float64 reference as CPU float32 is (within 4x CPU's
largest error on that output, the OpInfo harness's CPU_ERROR_FACTOR, plus one float32 rounding of the
result), since the JAX function and PyTorch compute the same math in different orders.
"""
import functools

import pytest
import torch
import torch.nn.functional as F

jax = pytest.importorskip("jax")  # a requirement (requirements.txt): the import must work here
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import torch_tpu  # noqa: E402,F401
from torch_tpu.pallas import custom_jax_kernel, jax_op  # noqa: E402

CPU_ERROR_FACTOR = 4
EPS32 = torch.finfo(torch.float32).eps


def assert_as_accurate_as_cpu(actual, cpu32, ref64):
    assert actual.device.type == "tpu"
    a, e, r = actual.detach().cpu().double(), cpu32.detach().double(), ref64.detach().double()
    assert a.shape == r.shape and actual.dtype == cpu32.dtype
    bound = CPU_ERROR_FACTOR * (e - r).abs().max() + EPS32 * r.abs()
    err = (a - r).abs()
    assert bool((err <= bound).all()), f"max error {err.max():.3g} vs CPU's {(e - r).abs().max():.3g}"


# ---- JAX functions and kernels under test -------------------------------------------------------------

def _tanh_mm(x, y):
    return jnp.tanh(x) @ y + 1.0


@jax.custom_vjp
def jax_silu(x):
    return x * jax.nn.sigmoid(x)


def _silu_fwd(x):
    s = jax.nn.sigmoid(x)
    return x * s, (x, s)


def _silu_bwd(res, g):
    x, s = res
    return (g * (s + x * s * (1 - s)),)


jax_silu.defvjp(_silu_fwd, _silu_bwd)


@jax.custom_vjp
def quantize_ste(x):  # straight-through estimator: the gradient is NOT what autodiff of round() gives (0)
    return jnp.round(x * 4) / 4


quantize_ste.defvjp(lambda x: (jnp.round(x * 4) / 4, None), lambda _, g: (g,))


def _matmul_kernel(x_ref, y_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def pallas_matmul(x, y, block=8):
    """Tiled matmul: grid (m/b, n/b, k/b), accumulating into the output block."""
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        _matmul_kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // block, n // block, k // block),
        in_specs=[pl.BlockSpec((block, block), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((block, block), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((block, block), lambda i, j, kk: (i, j)), interpret=True)(x, y)


@jax.custom_vjp
def pallas_matmul_ad(x, y):
    return pallas_matmul(x, y)


pallas_matmul_ad.defvjp(lambda x, y: (pallas_matmul(x, y), (x, y)),
                        lambda res, g: (pallas_matmul(g, res[1].T), pallas_matmul(res[0].T, g)))


def _softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - x.max(axis=-1, keepdims=True))
    o_ref[...] = e / e.sum(axis=-1, keepdims=True)


def pallas_softmax(x, rows=8):
    """Fused row softmax, one block of rows per program."""
    return pl.pallas_call(_softmax_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // rows,),
                          in_specs=[pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0)), interpret=True)(x)


@jax.custom_vjp
def pallas_softmax_ad(x):
    return pallas_softmax(x)


pallas_softmax_ad.defvjp(lambda x: (pallas_softmax(x), pallas_softmax(x)),
                         lambda y, g: (y * (g - (g * y).sum(axis=-1, keepdims=True)),))


tanh_mm = jax_op("tpu_test::tanh_mm", _tanh_mm)
silu = jax_op("tpu_test::silu", jax_silu)
ste = jax_op("tpu_test::quantize_ste", quantize_ste)
pmatmul = jax_op("tpu_test::pallas_matmul", pallas_matmul_ad)
psoftmax = jax_op("tpu_test::pallas_softmax", pallas_softmax_ad)


@custom_jax_kernel("tpu_test::split_scale", num_outputs=2)
def split_scale(x, n):  # two outputs; an integer input that has no gradient
    return x * 2.0, x.sum() * n.astype(x.dtype)


# ---- tests ------------------------------------------------------------------------------------------------

def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_forward_and_grad_of_a_jax_function(mode):
    x, y = _randn(4, 8, seed=1), _randn(8, 3, seed=2)
    xt, yt = x.to("tpu").requires_grad_(), y.to("tpu").requires_grad_()
    out = tanh_mm(xt, yt)
    xc, yc = x.clone().requires_grad_(), y.clone().requires_grad_()
    ref = torch.tanh(xc) @ yc + 1.0
    assert_as_accurate_as_cpu(out, ref, torch.tanh(x.double()) @ y.double() + 1.0)
    ct = _randn(4, 3, seed=3)
    out.backward(ct.to("tpu"))
    ref.backward(ct)
    x64, y64 = x.double().requires_grad_(), y.double().requires_grad_()
    (torch.tanh(x64) @ y64 + 1.0).backward(ct.double())
    assert_as_accurate_as_cpu(xt.grad, xc.grad, x64.grad)
    assert_as_accurate_as_cpu(yt.grad, yc.grad, y64.grad)


def test_cpu_tensors_run_the_jax_function():
    x, y = _randn(4, 8), _randn(8, 3)
    torch.testing.assert_close(tanh_mm(x, y), torch.tanh(x) @ y + 1.0)


def test_custom_vjp_gradient_is_the_users(mode):
    x = _randn(6, 5, seed=4) * 2
    xt = x.to("tpu").requires_grad_()
    out = ste(xt)
    xc = x.clone().requires_grad_()
    ref = xc + (torch.round(xc * 4) / 4 - xc).detach()  # PyTorch's straight-through estimator
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=0, atol=0)
    g = _randn(6, 5, seed=5)
    out.backward(g.to("tpu"))
    ref.backward(g)
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=0, atol=0)  # identity, not round's zero


def test_silu_with_its_own_gradient(mode):
    x = _randn(16, 32, seed=6)
    xt = x.to("tpu").requires_grad_()
    xc = x.clone().requires_grad_()
    out, ref = silu(xt), F.silu(xc)
    assert_as_accurate_as_cpu(out, ref, F.silu(x.double()))
    out.sum().backward()
    ref.sum().backward()
    x64 = x.double().requires_grad_()
    F.silu(x64).sum().backward()
    assert_as_accurate_as_cpu(xt.grad, xc.grad, x64.grad)


def test_pallas_tiled_matmul(mode):
    a, b = _randn(16, 24, seed=7), _randn(24, 32, seed=8)
    out = pmatmul(a.to("tpu"), b.to("tpu"))
    assert_as_accurate_as_cpu(out, a @ b, a.double() @ b.double())


def test_pallas_fused_softmax(mode):
    x = _randn(16, 40, seed=9) * 3
    out = psoftmax(x.to("tpu"))
    assert_as_accurate_as_cpu(out, torch.softmax(x, -1), torch.softmax(x.double(), -1))


def test_strided_inputs_and_two_outputs_with_an_integer_input(mode):
    base = _randn(5, 4, seed=10)
    n = torch.tensor(3, dtype=torch.int64)
    x = base.to("tpu").t()  # a transposed view: read through its strides
    xt = x.detach().requires_grad_()
    a, s = split_scale(xt, n.to("tpu"))
    torch.testing.assert_close(a.cpu(), base.t() * 2.0)
    torch.testing.assert_close(s.cpu(), base.sum() * 3)
    (a.sum() + s).backward()
    torch.testing.assert_close(xt.grad.cpu(), torch.full((4, 5), 2.0 + 3.0))


def test_bfloat16(mode):
    x = _randn(8, 8, seed=11).bfloat16()
    out = silu(x.to("tpu"))
    ref = silu(x)  # JAX on CPU: same bfloat16 program
    torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)
    assert out.dtype == torch.bfloat16


class _Net(torch.nn.Module):
    def __init__(self, jax_ops: bool):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(16, 32)
        self.w2 = torch.nn.Parameter(torch.randn(32, 16) * 0.2)
        self.jax_ops = jax_ops

    def forward(self, x):
        h = self.fc1(x)
        if self.jax_ops:
            return psoftmax(pmatmul(silu(h), self.w2))
        return torch.softmax(F.silu(h) @ self.w2, -1)


def _train(net, x, target, steps=3):
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        p = net(x)
        loss = -(p.clamp_min(1e-6).log() * target).sum(-1).mean()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def test_training_step_with_a_pallas_kernel_and_a_jax_activation(mode):
    x = _randn(16, 16, seed=12)
    target = F.one_hot(torch.arange(16) % 16, 16).float()
    ref_net = _Net(jax_ops=False)
    net = _Net(jax_ops=True).to("tpu")
    ref64 = _Net(jax_ops=False).double()
    ref_losses = _train(ref_net, x, target)
    losses = _train(net, x.to("tpu"), target.to("tpu"))
    losses64 = _train(ref64, x.double(), target.double())
    for a, e, r in zip(losses, ref_losses, losses64):
        assert_as_accurate_as_cpu(a, e, r)
    for (name, p), pc, p64 in zip(net.named_parameters(), ref_net.parameters(), ref64.parameters()):
        assert_as_accurate_as_cpu(p, pc, p64)


def test_torch_compile_inlines_the_op():
    x = _randn(16, 32, seed=13)

    def f(h, w):
        return psoftmax(pmatmul(silu(h * 0.5), w)) + 1.0

    w = _randn(32, 16, seed=14)
    compiled = torch.compile(f, backend="tpu")
    out = compiled(x.to("tpu"), w.to("tpu"))
    ref = torch.softmax(F.silu(x * 0.5) @ w, -1) + 1.0
    ref64 = torch.softmax(F.silu(x.double() * 0.5) @ w.double(), -1) + 1.0
    assert_as_accurate_as_cpu(out, ref, ref64)
    torch._dynamo.reset()


def test_no_jax_after_export(mode, monkeypatch):
    x, y = _randn(4, 8, seed=15), _randn(8, 3, seed=16)
    tanh_mm(x.to("tpu"), y.to("tpu"))  # exported (if not already) for this signature

    def refuse(*a, **k):
        raise AssertionError("JAX was called on the hot path")

    monkeypatch.setattr(jax.export, "export", refuse)
    monkeypatch.setattr(jax, "eval_shape", refuse)
    out = tanh_mm(x.to("tpu"), y.to("tpu"))
    assert_as_accurate_as_cpu(out, torch.tanh(x) @ y + 1.0, torch.tanh(x.double()) @ y.double() + 1.0)


def test_fused_mode_puts_the_op_in_the_graph():
    x = _randn(16, 32, seed=17)
    with torch_tpu.eager_mode("fused"):
        torch.tpu.synchronize()
        before = torch_tpu._C._fused_stats()
        xt = x.to("tpu")
        out = silu(xt * 2.0) + 1.0
        got = out.cpu()
        after = torch_tpu._C._fused_stats()
    assert_as_accurate_as_cpu(out, F.silu(x * 2.0) + 1.0, F.silu(x.double() * 2.0) + 1.0)
    assert got.shape == (16, 32)
    # one graph of three ops (mul, the JAX function, add), flushed by the host read
    assert after["flushes"] - before["flushes"] == 1
    assert after["fused_ops"] - before["fused_ops"] == 3


def test_bad_use_raises_clear_errors():
    with pytest.raises(ValueError, match="namespace::name"):
        jax_op("no_namespace", lambda x: x)
    with pytest.raises(RuntimeError, match="already defined"):
        jax_op("tpu_test::silu", jax_silu)
    two = jax_op("tpu_test::declared_one", lambda x: (x, x))
    with pytest.raises(ValueError, match="num_outputs"):
        two(torch.ones(2, device="tpu"))
    with pytest.raises(TypeError, match="has no JAX equivalent"):
        silu(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(RuntimeError, match="expected at most 1 argument"):
        silu(torch.ones(2, device="tpu"), torch.ones(2, device="tpu"))


def test_plugin_stablehlo_version_is_read():
    from torch_tpu.pallas import _export
    current, minimum = torch_tpu._C._plugin_stablehlo_versions()
    assert current.count(".") == 2 and minimum.count(".") == 2
    assert _export._version_tuple(minimum) <= _export._version_tuple(current)
    from jax._src.lib.mlir.dialects import hlo
    ours = hlo.get_current_version()
    assert _export.target_version() == min(current, ours, key=_export._version_tuple)


def test_stablehlo_newer_than_the_plugin_is_refused_clearly(monkeypatch):
    # float8_e4m3 (IEEE-style) converts need StableHLO 1.8+: a plugin reading 1.5.0 must get a clear error
    # from the export, not an opaque parse error from its compiler.
    def f8_roundtrip(x):
        return x.astype(jnp.float8_e4m3).astype(jnp.float32)

    op = jax_op("tpu_test::f8_roundtrip", f8_roundtrip)
    x = torch.linspace(-3, 3, 16).reshape(4, 4)
    ref = op(x)  # JAX on CPU
    torch.testing.assert_close(op(x.to("tpu")).cpu(), ref, rtol=0, atol=0)  # this plugin reads 1.13.3
    monkeypatch.setattr(torch_tpu._C, "_plugin_stablehlo_versions", lambda: ("1.5.0", "0.9.0"))
    with pytest.raises(RuntimeError, match="newer than version 1.5.0"):
        op(x.to("tpu").reshape(2, 8))  # a new shape signature: exported again


cube = jax_op("tpu_test::cube", lambda x: x ** 3, vjp=lambda x, g: (3.0 * x ** 2 * g,))
cube_marked = jax_op("tpu_test::cube_marked", lambda x: x ** 3, vjp=lambda x, g: (jnp.full_like(x, 7.0),))


def test_user_vjp(mode):
    x = _randn(5, 6, seed=18)
    xt = x.to("tpu").requires_grad_()
    xc = x.clone().requires_grad_()
    out, ref = cube(xt), xc ** 3
    assert_as_accurate_as_cpu(out, ref, x.double() ** 3)
    out.sum().backward()
    ref.sum().backward()
    x64 = x.double().requires_grad_()
    (x64 ** 3).sum().backward()
    assert_as_accurate_as_cpu(xt.grad, xc.grad, x64.grad)
    xm = x.to("tpu").requires_grad_()
    cube_marked(xm).sum().backward()  # the vjp given is the one used
    torch.testing.assert_close(xm.grad.cpu(), torch.full((5, 6), 7.0), rtol=0, atol=0)


def test_compiled_training_step_with_jax_ops(mode):
    # torch.compile(backend="tpu") of the model: the JAX ops and their backward ops are inside the graphs
    x = _randn(16, 16, seed=12)
    target = F.one_hot(torch.arange(16) % 16, 16).float()
    ref_net, ref64 = _Net(jax_ops=False), _Net(jax_ops=False).double()
    net = _Net(jax_ops=True).to("tpu")
    losses = _train(torch.compile(net, backend="tpu"), x.to("tpu"), target.to("tpu"))
    ref_losses = _train(ref_net, x, target)
    losses64 = _train(ref64, x.double(), target.double())
    for a, e, r in zip(losses, ref_losses, losses64):
        assert_as_accurate_as_cpu(a, e, r)
    for p, pc, p64 in zip(net.parameters(), ref_net.parameters(), ref64.parameters()):
        assert_as_accurate_as_cpu(p, pc, p64)
    torch._dynamo.reset()
