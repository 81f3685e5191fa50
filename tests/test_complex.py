"""complex64 / complex128 on tpu against CPU: storage and copies, printing, dtype-reinterpreting views
(view_as_real / view_as_complex / .real / .imag), the conj bit, construction (complex, polar), pointwise
math, reductions, matmuls, indexing, random fill, autograd, and the ops that refuse complex inputs.

Float results are judged as tests/opinfo/harness.py judges them: equal to CPU within (rtol, atol), or at
most CPU_ERROR_FACTOR times CPU's own complex64 error against the complex128 result (XLA's complex
functions round differently from CPU's, by a few ulps)."""
import warnings

import pytest
import torch

from conftest import assert_close, nonfinite_ok

RTOL, ATOL = 1e-5, 1e-5
CPU_ERROR_FACTOR = 4


def crand(*shape, dtype=torch.complex64, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=dtype) * scale)


def _upcast(x):
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.complex64:
            return x.to(torch.complex128)
        if x.dtype == torch.float32:
            return x.double()
    return x


def assert_as_accurate_as_cpu(fn, *inputs):
    """fn on tpu vs CPU: equal within (RTOL, ATOL), or within CPU's own error (x4) of the 128-bit result."""
    expected = fn(*inputs)
    actual = fn(*[x.to("tpu") if isinstance(x, torch.Tensor) else x for x in inputs])
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    a = actual.cpu()
    if torch.allclose(a, expected, rtol=RTOL, atol=ATOL, equal_nan=True):
        return
    ref = fn(*[_upcast(x) for x in inputs])
    wide = torch.complex128 if expected.is_complex() else torch.float64
    a, e, r = a.to(wide), expected.to(wide), ref.to(wide)
    cpu_err = (e - r).abs()
    cpu_err = cpu_err[cpu_err.isfinite()].max() if cpu_err.isfinite().any() else torch.tensor(0.0)
    bound = CPU_ERROR_FACTOR * cpu_err + ATOL + RTOL * r.abs()
    ok = ((a - r).abs() <= bound) | (a == r) | (a.isnan() & r.isnan())
    assert bool(ok.all()), f"max |tpu - ref| {(a - r).abs().max()} vs CPU's {cpu_err}"


# ---- storage, copies, printing -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_roundtrip_and_storage(dtype, mode):
    z = crand(3, 5, dtype=dtype)
    t = z.to("tpu")
    assert t.dtype == dtype and t.element_size() == z.element_size()
    assert t.untyped_storage().nbytes() == z.untyped_storage().nbytes()
    assert torch.equal(t.cpu(), z)
    assert torch.equal(t.t().cpu(), z.t())          # strided download
    assert torch.equal(t[1:, ::2].cpu(), z[1:, ::2])
    u = torch.zeros(4, 5, dtype=dtype, device="tpu")
    u[1:] = z                                        # upload into a partial view
    assert torch.equal(u.cpu()[1:], z) and torch.equal(u.cpu()[0], torch.zeros(5, dtype=dtype))
    assert t.clone().cpu().equal(z) and t.to(torch.complex128).cpu().equal(z.to(torch.complex128))
    assert t[2, 3].item() == z[2, 3].item()


def test_casts_between_real_and_complex(mode):
    x = torch.randn(6)
    assert torch.equal(x.to("tpu").to(torch.complex64).cpu(), x.to(torch.complex64))
    assert torch.equal(torch.arange(5, device="tpu").to(torch.complex64).cpu(), torch.arange(5).to(torch.complex64))
    z = crand(6)
    # Keeps the real part, as CPU (which warns once per process, as tpu does: not asserted here).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = z.to("tpu").to(torch.float32)
        e = z.to(torch.float32)
    assert torch.equal(r.cpu(), e)


def test_print_matches_cpu(mode):
    z = crand(2, 3)
    z[0, 0] = complex(float("nan"), 1)
    z[1, 2] = complex(3, float("inf"))
    with nonfinite_ok():
        s = str(z.to("tpu"))
    assert s.replace(", device='tpu:0'", "") == str(z)
    assert repr(torch.tensor(1 - 2j, device="tpu")).startswith("tensor(1.-2.j, device='tpu:0'")


# ---- views over one storage --------------------------------------------------------------------


def test_view_as_real_and_complex_share_storage(mode):
    z = crand(4, 3)
    t = z.to("tpu")
    r = torch.view_as_real(t)
    assert r.dtype == torch.float32 and r.shape == (4, 3, 2)
    assert r.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert torch.equal(r.cpu(), torch.view_as_real(z))
    assert torch.equal(torch.view_as_real(t[:, 1:]).cpu(), torch.view_as_real(z[:, 1:]))
    r.mul_(2)                                        # a float write seen through the complex tensor
    assert torch.equal(t.cpu(), z * 2)
    back = torch.view_as_complex(r)
    assert back.dtype == torch.complex64 and torch.equal(back.cpu(), z * 2)
    t.add_(1j)                                       # a complex write seen through the float view
    assert torch.equal(r.cpu(), torch.view_as_real(z * 2 + 1j))
    f = torch.randn(5, 2)
    assert torch.equal(torch.view_as_complex(f.to("tpu")).cpu(), torch.view_as_complex(f))


def test_dtype_views_of_complex_storage(mode):
    # Tensor.view(dtype) across widths: complex memory read as other types and written back through them.
    z = crand(4, 6, seed=21)
    t = z.to("tpu")
    for d in (torch.complex128, torch.float64, torch.int32, torch.uint8, torch.bfloat16):
        assert torch.equal(t.view(d).cpu(), z.view(d)), d
    f = torch.randn(4, 8)
    g = f.to("tpu")
    assert torch.equal(g.view(torch.complex128).cpu(), f.view(torch.complex128))
    g.view(torch.complex64).mul_(1j)
    e = f.clone()
    e.view(torch.complex64).mul_(1j)
    assert torch.equal(g.cpu(), e)


def test_real_imag_views(mode):
    z = crand(5)
    t = z.to("tpu")
    assert torch.equal(t.real.cpu(), z.real) and torch.equal(t.imag.cpu(), z.imag)
    t.real.mul_(3)
    t.imag[1:3] = torch.tensor([7.0, 8.0])
    e = z.clone()
    e.real.mul_(3)
    e.imag[1:3] = torch.tensor([7.0, 8.0])
    assert torch.equal(t.cpu(), e)


def test_conj_bit(mode):
    z = crand(3, 4)
    t = z.to("tpu")
    c = t.conj()
    assert c.is_conj() and c.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert torch.equal(c.cpu(), z.conj())
    assert torch.equal(c.resolve_conj().cpu(), z.conj().resolve_conj())
    assert not c.resolve_conj().is_conj()
    assert torch.equal(torch.conj_physical(t).cpu(), torch.conj_physical(z))
    assert torch.equal(c.imag.cpu(), z.conj().imag)  # a neg view
    assert torch.equal((c + t).cpu(), z.conj() + z)
    assert torch.equal(c.t().contiguous().cpu(), z.conj().t().contiguous())
    u = torch.zeros(3, 4, dtype=torch.complex64, device="tpu")
    u.copy_(c)
    assert torch.equal(u.cpu(), z.conj())
    w = torch.zeros(3, 4, dtype=torch.complex64, device="tpu").conj()
    w.copy_(t)                                       # into a conj view: stores conj(z)
    assert torch.equal(w.cpu(), z) and torch.equal(w.resolve_conj().cpu(), z)
    assert torch.equal(torch.conj_physical(torch.arange(3.0, device="tpu")).cpu(), torch.arange(3.0))


def test_complex_polar_angle_abs(mode):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(4, 5, generator=g), torch.randn(5, generator=g)
    assert torch.equal(torch.complex(a.to("tpu"), b.to("tpu")).cpu(), torch.complex(a, b))
    assert torch.equal(torch.complex(a.double().to("tpu"), a.double().to("tpu")).cpu(),
                       torch.complex(a.double(), a.double()))
    assert_as_accurate_as_cpu(torch.polar, a.abs(), b)
    z = crand(4, 5)
    assert_as_accurate_as_cpu(torch.angle, z)
    assert_as_accurate_as_cpu(torch.abs, z)
    assert_as_accurate_as_cpu(torch.angle, torch.tensor([-2.0, 0.0, 3.0, float("nan")]))
    assert torch.abs(z.to("tpu")).dtype == torch.float32
    with pytest.raises(RuntimeError):
        torch.complex(a.to("tpu"), b.double().to("tpu"))


# ---- pointwise ---------------------------------------------------------------------------------

UNARY = ["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh", "sigmoid", "reciprocal",
         "expm1", "log1p", "log2", "log10", "exp2", "neg", "sgn", "square", "asin", "acos", "atan", "asinh",
         "acosh", "atanh"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name, mode):
    fn = getattr(torch, name)
    z = crand(4, 6, seed=2)
    assert_as_accurate_as_cpu(fn, z)
    assert_as_accurate_as_cpu(lambda x: fn(x.t()), z)


def test_unary_complex128_and_inplace(mode):
    z = crand(3, 4, dtype=torch.complex128)
    assert_as_accurate_as_cpu(torch.exp, z)
    t = z.to("tpu")
    t.sqrt_()
    assert_close(t, z.sqrt(), rtol=1e-12, atol=1e-12)


def test_binary_and_scalars(mode):
    z, w = crand(3, 4, seed=3), crand(4, seed=4)
    for fn in (torch.add, torch.sub, torch.mul, torch.div, torch.pow):
        assert_as_accurate_as_cpu(fn, z, w)
    assert_as_accurate_as_cpu(lambda x: x * (1 + 2j) - 0.5j, z)
    assert_as_accurate_as_cpu(lambda x: x + torch.randn(3, 4).to(x.device), z)      # real + complex promotes
    assert_as_accurate_as_cpu(lambda x: 2 ** x, z)
    assert_as_accurate_as_cpu(lambda x: x ** 2, z)
    assert_as_accurate_as_cpu(lambda x: torch.add(x, x, alpha=1 - 1j), z)
    assert torch.equal((z.to("tpu") == z.to("tpu")).cpu(), z == z)
    assert torch.equal((z.to("tpu") != w.to("tpu")).cpu(), z != w)
    t = z.to("tpu")
    t.mul_(1j)
    assert torch.equal(t.cpu(), z * 1j)
    r = torch.randn(3, 4).to("tpu")
    with pytest.raises(RuntimeError):
        r.mul_(1j)                                   # complex result into a float tensor, as on CPU


def test_predicates(mode):
    z = torch.tensor([1 + 1j, complex(float("nan"), 0), complex(0, float("inf")), complex(float("-inf"), 2)])
    t = z.to("tpu")
    for fn in (torch.isnan, torch.isinf, torch.isfinite):
        assert torch.equal(fn(t).cpu(), fn(z))
    a, b = crand(10, seed=5), crand(10, seed=6)
    b2 = a + 1e-7 * b
    assert torch.equal(torch.isclose(a.to("tpu"), b2.to("tpu")).cpu(), torch.isclose(a, b2))
    assert torch.allclose(a.to("tpu"), b2.to("tpu")) == torch.allclose(a, b2)
    assert torch.allclose(a.to("tpu"), b.to("tpu")) == torch.allclose(a, b)


# ---- reductions, matmuls, shape and index ops --------------------------------------------------


def test_reductions(mode):
    z = crand(4, 5, 6, seed=7)
    assert_as_accurate_as_cpu(torch.sum, z)
    assert_as_accurate_as_cpu(lambda x: x.sum(dim=(0, 2)), z)
    assert_as_accurate_as_cpu(lambda x: x.mean(1, keepdim=True), z)
    assert_as_accurate_as_cpu(lambda x: x.prod(2), z * 0.5)
    assert_as_accurate_as_cpu(lambda x: torch.linalg.vector_norm(x, dim=1), z)
    assert_as_accurate_as_cpu(lambda x: x.norm(), z)
    assert_as_accurate_as_cpu(lambda x: x.real.sum(0) + x.imag.mean(), z)


def test_var_std_and_composites(mode):
    z, w = crand(4, 6, seed=19), crand(4, 6, seed=20)
    assert_as_accurate_as_cpu(lambda x: torch.var(x, dim=1), z)
    assert_as_accurate_as_cpu(lambda x: torch.std(x, correction=0), z)
    v, m = torch.var_mean(z.to("tpu"), dim=0)
    ev, em = torch.var_mean(z, dim=0)
    assert v.dtype == torch.float32 and m.dtype == torch.complex64
    torch.testing.assert_close(v.cpu(), ev, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(m.cpu(), em, rtol=1e-5, atol=1e-5)
    assert_as_accurate_as_cpu(lambda x, y: torch.lerp(x, y, 0.3 + 0.2j), z, w)
    assert_as_accurate_as_cpu(lambda x, y: torch.addcmul(x, x, y, value=2 - 1j), z, w)
    assert_as_accurate_as_cpu(lambda x, y: torch.addcdiv(x, x, y, value=0.5j), z, w)
    assert_as_accurate_as_cpu(lambda x, y: torch.rsub(x, y, alpha=2j), z, w)
    assert_as_accurate_as_cpu(lambda x: torch.logsumexp(x, 1), z)
    assert_as_accurate_as_cpu(torch.sinc, torch.cat([z.view(-1), torch.zeros(1, dtype=z.dtype)]))
    assert_as_accurate_as_cpu(lambda c, a, b: torch.addr(c, a, b, beta=1j, alpha=2), z, w[:, 0], w[0])
    for dev in ("cpu", "tpu"):
        torch.testing.assert_close(torch.linspace(1 - 2j, 3 + 4j, 7, device=dev).cpu(),
                                   torch.linspace(1 - 2j, 3 + 4j, 7), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(torch.logspace(0.5j, 1.2, 5, dtype=torch.complex64, device=dev).cpu(),
                                   torch.logspace(0.5j, 1.2, 5, dtype=torch.complex64), rtol=1e-5, atol=1e-5)
    u = torch.empty(50, 40, dtype=torch.complex64, device="tpu").uniform_(-1, 2)
    r = torch.view_as_real(u).cpu()
    assert r.min() >= -1 and r.max() < 2 and abs(r.mean().item() - 0.5) < 0.05


def test_matmuls(mode):
    a, b = crand(5, 7, seed=8), crand(7, 3, seed=9)
    assert_as_accurate_as_cpu(torch.mm, a, b)
    assert_as_accurate_as_cpu(torch.matmul, crand(2, 5, 7, seed=10), crand(2, 7, 3, seed=11))
    assert_as_accurate_as_cpu(lambda x, y: x @ y.conj(), a, b)          # a conj operand
    assert_as_accurate_as_cpu(lambda x: x.mH @ x, a)
    v, w = crand(7, seed=12), crand(7, seed=13)
    assert_as_accurate_as_cpu(torch.dot, v, w)
    assert_as_accurate_as_cpu(torch.vdot, v, w)
    assert_as_accurate_as_cpu(lambda m, x: m @ x, a, v)
    assert_as_accurate_as_cpu(lambda c, x, y: torch.addmm(c, x, y, beta=0.5j, alpha=2), crand(5, 3, seed=14), a, b)


def test_cat_stack_index(mode):
    z, w = crand(3, 4, seed=15), crand(3, 4, seed=16)
    t, u = z.to("tpu"), w.to("tpu")
    assert torch.equal(torch.cat([t, u], 1).cpu(), torch.cat([z, w], 1))
    assert torch.equal(torch.stack([t, u]).cpu(), torch.stack([z, w]))
    idx = torch.tensor([2, 0, 2])
    assert torch.equal(t[idx].cpu(), z[idx])
    assert torch.equal(t[:, idx.to("tpu")].cpu(), z[:, idx])
    assert torch.equal(torch.gather(t, 1, idx.view(1, 3).expand(3, 3).to("tpu")).cpu(),
                       torch.gather(z, 1, idx.view(1, 3).expand(3, 3)))
    assert torch.equal(torch.where(t.real > 0, t, u).cpu(), torch.where(z.real > 0, z, w))
    e = z.clone()
    e[torch.tensor([0, 2])] = 5 - 1j
    t[torch.tensor([0, 2]).to("tpu")] = 5 - 1j
    assert torch.equal(t.cpu(), e)
    assert torch.equal(t.flip(0).permute(1, 0).reshape(-1).cpu(), e.flip(0).permute(1, 0).reshape(-1))
    f = torch.full((2, 2), 1 + 2j, device="tpu")
    assert f.dtype == torch.complex64 and torch.equal(f.cpu(), torch.full((2, 2), 1 + 2j))
    assert torch.equal(torch.zeros(3, dtype=torch.complex128, device="tpu").cpu(), torch.zeros(3, dtype=torch.complex128))


def test_randn_complex(mode):
    torch.manual_seed(0)
    t = torch.randn(200, 100, dtype=torch.complex64, device="tpu")
    assert t.dtype == torch.complex64
    r = torch.view_as_real(t).cpu()
    # Each part is N(0, 1/2): E|z|^2 = 1 (20000 draws: the bounds are > 6 standard errors).
    assert abs(r.mean().item()) < 0.03
    assert abs(r[..., 0].var().item() - 0.5) < 0.05 and abs(r[..., 1].var().item() - 0.5) < 0.05
    assert abs(t.abs().pow(2).mean().item() - 1.0) < 0.1
    torch.manual_seed(3)
    a = torch.randn(8, dtype=torch.complex64, device="tpu").cpu()
    torch.manual_seed(3)
    assert torch.equal(torch.randn(8, dtype=torch.complex64, device="tpu").cpu(), a)


# ---- autograd --------------------------------------------------------------------------------


def test_autograd_wirtinger(mode):
    z, w = crand(4, 3, seed=17), crand(3, 2, seed=18)

    def loss(x, y):
        return ((x @ y).abs() ** 2).sum() + (x.exp() * x.conj()).real.sum() + torch.angle(x).sum()

    grads = []
    for dev in ("cpu", "tpu"):
        x = z.clone().to(dev).requires_grad_()
        y = w.clone().to(dev).requires_grad_()
        loss(x, y).backward()
        grads.append((x.grad.cpu(), y.grad.cpu()))
    for a, e in zip(*reversed(grads)):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
    # Real parameters through a complex intermediate.
    p = torch.randn(5, requires_grad=True)
    q = p.detach().to("tpu").requires_grad_()
    for x in (p, q):
        torch.view_as_real(torch.polar(x.abs() + 1, x) * (1 + 1j)).sum().backward()
    torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-5, atol=1e-5)


# ---- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [torch.floor, torch.sign, torch.relu, lambda x: torch.maximum(x, x),
                                lambda x: x < x, torch.amax, torch.argmax, lambda x: x.clamp(0, 1)])
def test_unsupported_ops_raise_like_cpu(fn, mode):
    z = crand(4)
    with pytest.raises(RuntimeError):
        fn(z)                                        # CPU refuses complex here too
    with pytest.raises(RuntimeError):
        fn(z.to("tpu"))
