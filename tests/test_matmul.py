"""Matrix products on tpu vs CPU: mm, bmm, addmm, baddbmm, addbmm, dot, mv, addmv,
matmul/linear/einsum (which decompose into them), out=/in-place variants,
dtypes, non-contiguous inputs, empty shapes, gradients and errors."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_close

DEV = "tpu"


def has_kernel(op):
    return torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1")


needs_sum = pytest.mark.skipif(
    not has_kernel("aten::sum.dim_IntList"),
    reason="the backward of a broadcast operand reduces with aten::sum (reductions family, not built here)",
)


def rand(*shape, dtype=torch.float32, low=-4, high=4):
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    return torch.randint(low, high, shape, dtype=dtype)


def tol(dtype):
    if dtype in (torch.bfloat16, torch.float16):
        return dict(atol=5e-2, rtol=2e-2)
    return {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32])
def test_mm_dtypes(mode, dtype):
    a, b = rand(5, 7, dtype=dtype), rand(7, 3, dtype=dtype)
    r = torch.mm(a.to(DEV), b.to(DEV))
    assert r.dtype == dtype
    if dtype.is_floating_point:
        expected = torch.mm(a.float(), b.float()).to(dtype)  # f32 accumulation, one rounding
    else:
        expected = torch.mm(a, b)
    assert_close(r, expected, **tol(dtype))


def test_mm_noncontiguous(mode):
    a = torch.randn(6, 5)
    b = torch.randn(8, 12)
    ta, tb = a.to(DEV), b.to(DEV)
    # transposed and stepped views
    assert_close(torch.mm(ta.t(), tb[:6, ::2]), torch.mm(a.t(), b[:6, ::2]))
    assert_close(ta.t() @ ta, a.t() @ a)


def test_mm_out_and_empty(mode):
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    out = torch.empty(0, device=DEV)
    torch.mm(a.to(DEV), b.to(DEV), out=out)
    assert_close(out, a @ b)
    assert_close(torch.mm(torch.ones(0, 3, device=DEV), torch.ones(3, 4, device=DEV)), torch.ones(0, 4))
    assert_close(torch.mm(torch.ones(2, 0, device=DEV), torch.ones(0, 3, device=DEV)), torch.zeros(2, 3))
    s = torch.randn(2, 3)
    assert_close(torch.addmm(s.to(DEV), torch.ones(2, 0, device=DEV), torch.ones(0, 3, device=DEV), beta=2),
                 2 * s)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_bmm_baddbmm_addbmm(mode, dtype):
    a, b = rand(3, 4, 5, dtype=dtype), rand(3, 5, 2, dtype=dtype)
    s = rand(3, 4, 2, dtype=dtype)
    ta, tb, ts = a.to(DEV), b.to(DEV), s.to(DEV)
    up = (lambda t: t.float()) if dtype == torch.bfloat16 else (lambda t: t)
    down = (lambda t: t.to(dtype))
    assert_close(torch.bmm(ta, tb), down(torch.bmm(up(a), up(b))), **tol(dtype))
    assert_close(torch.baddbmm(ts, ta, tb, beta=2, alpha=3), down(torch.baddbmm(up(s), up(a), up(b), beta=2, alpha=3)),
                 **tol(dtype))
    s2 = rand(4, 2, dtype=dtype)
    assert_close(torch.addbmm(s2.to(DEV), ta, tb, beta=2, alpha=-1),
                 down(torch.addbmm(up(s2), up(a), up(b), beta=2, alpha=-1)), **tol(dtype))
    # broadcast self
    assert_close(torch.baddbmm(s[0, 0].to(DEV), ta, tb), down(torch.baddbmm(up(s[0, 0]), up(a), up(b))), **tol(dtype))


def test_bmm_variants(mode):
    a, b, s = torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(2, 3, 5)
    ta, tb, ts = a.to(DEV), b.to(DEV), s.to(DEV)
    out = torch.empty(0, device=DEV)
    torch.bmm(ta, tb, out=out)
    assert_close(out, torch.bmm(a, b))
    ts.baddbmm_(ta, tb, alpha=0.5)
    assert_close(ts, s.baddbmm(a, b, alpha=0.5))
    s2 = torch.randn(3, 5)
    t2 = s2.to(DEV)
    t2.addbmm_(ta, tb)
    assert_close(t2, s2.addbmm(a, b))
    # transposed batch operands
    assert_close(torch.bmm(tb.transpose(1, 2), ta.transpose(1, 2)), torch.bmm(b.transpose(1, 2), a.transpose(1, 2)))
    assert_close(torch.bmm(torch.ones(0, 2, 3, device=DEV), torch.ones(0, 3, 4, device=DEV)), torch.ones(0, 2, 4))


def test_addmm_beta_alpha(mode):
    s, a, b = torch.randn(4, 3), torch.randn(4, 5), torch.randn(5, 3)
    ts, ta, tb = s.to(DEV), a.to(DEV), b.to(DEV)
    for beta, alpha in [(1, 1), (0.5, 2.0), (0, 1.5), (-1, 0)]:
        assert_close(torch.addmm(ts, ta, tb, beta=beta, alpha=alpha), torch.addmm(s, a, b, beta=beta, alpha=alpha))
    # beta=0 ignores NaN in self, as BLAS does
    nan = torch.full((4, 3), float("nan"))
    assert_close(torch.addmm(nan.to(DEV), ta, tb, beta=0), torch.addmm(nan, a, b, beta=0))
    # broadcast bias (what F.linear does)
    bias = torch.randn(3)
    assert_close(torch.addmm(bias.to(DEV), ta, tb), torch.addmm(bias, a, b))
    out = torch.empty(4, 3, device=DEV)
    torch.addmm(ts, ta, tb, alpha=2, out=out)
    assert_close(out, torch.addmm(s, a, b, alpha=2))
    ts.addmm_(ta, tb, beta=0.25)
    assert_close(ts, s.addmm(a, b, beta=0.25))


def test_addmm_no_recompile_for_new_scalars(mode):
    import torch_tpu

    s, a, b = (torch.randn(2, 2).to(DEV) for _ in range(3))
    torch.addmm(s, a, b, beta=0.3, alpha=0.7)
    torch.tpu.synchronize()
    misses = torch_tpu._C._executor_stats()["cache_misses"]
    r = torch.addmm(s, a, b, beta=0.9, alpha=1.7)
    assert torch_tpu._C._executor_stats()["cache_misses"] == misses
    assert_close(r, torch.addmm(s.cpu(), a.cpu(), b.cpu(), beta=0.9, alpha=1.7))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_dot_mv_addmv(mode, dtype):
    m, v, w = rand(4, 6, dtype=dtype), rand(6, dtype=dtype), rand(6, dtype=dtype)
    s = rand(4, dtype=dtype)
    tm, tv, tw, ts = (t.to(DEV) for t in (m, v, w, s))
    assert_close(torch.dot(tv, tw), torch.dot(v, w))
    assert_close(torch.mv(tm, tv), torch.mv(m, v))
    assert_close(torch.mv(tm.t()[::1].t(), tv), torch.mv(m, v))
    assert_close(torch.addmv(ts, tm, tv, beta=2, alpha=3), torch.addmv(s, m, v, beta=2, alpha=3))
    assert_close(torch.addmv(ts[:1], tm, tv), torch.addmv(s[:1], m, v))
    ts.addmv_(tm, tv)
    assert_close(ts, s.addmv(m, v))
    assert_close(torch.dot(torch.ones(0, dtype=dtype, device=DEV), torch.ones(0, dtype=dtype, device=DEV)),
                 torch.zeros((), dtype=dtype))


@pytest.mark.parametrize(
    "sa,sb",
    [((5,), (5,)), ((3, 5), (5,)), ((5,), (5, 4)), ((3, 5), (5, 4)), ((2, 3, 5), (5, 4)), ((5,), (2, 5, 4)),
     ((2, 3, 5), (5,)), ((2, 3, 5), (2, 5, 4)), ((2, 1, 3, 5), (4, 5, 2)), ((1, 3, 5), (2, 5, 4)),
     ((0, 3, 5), (5, 2))],
)
def test_matmul_shapes(mode, sa, sb):
    a, b = torch.randn(sa), torch.randn(sb)
    assert_close(torch.matmul(a.to(DEV), b.to(DEV)), torch.matmul(a, b), atol=1e-5, rtol=1e-5)


def test_matmul_bf16_and_int(mode):
    a, b = torch.randn(2, 3, 8).bfloat16(), torch.randn(8, 4).bfloat16()
    r = a.to(DEV) @ b.to(DEV)
    assert r.dtype == torch.bfloat16
    assert_close(r, (a.float() @ b.float()).bfloat16(), atol=5e-2, rtol=2e-2)
    i, j = torch.randint(-5, 5, (2, 3, 4)), torch.randint(-5, 5, (4, 2))
    assert_close(i.to(DEV) @ j.to(DEV), i @ j)


def test_linear_and_einsum(mode):
    x, w, bias = torch.randn(2, 3, 6), torch.randn(4, 6), torch.randn(4)
    assert_close(F.linear(x.to(DEV), w.to(DEV), bias.to(DEV)), F.linear(x, w, bias), atol=1e-5, rtol=1e-5)
    assert_close(F.linear(x[0].to(DEV), w.to(DEV), bias.to(DEV)), F.linear(x[0], w, bias), atol=1e-5, rtol=1e-5)
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    assert_close(torch.einsum("bij,bjk->bik", a.to(DEV), b.to(DEV)), torch.einsum("bij,bjk->bik", a, b),
                 atol=1e-5, rtol=1e-5)
    assert_close(torch.einsum("bij,bkj->ik", a.to(DEV), a.to(DEV)), torch.einsum("bij,bkj->ik", a, a),
                 atol=1e-5, rtol=1e-5)


def _grads(fn, *inputs, grad_out=None):
    """(output, grads) of fn on CPU and tpu with the same upstream gradient."""
    cpu = [t.clone().requires_grad_() for t in inputs]
    dev = [t.to(DEV).requires_grad_() for t in inputs]
    out_c = fn(*cpu)
    out_d = fn(*dev)
    g = torch.randn(out_c.shape) if grad_out is None else grad_out
    out_c.backward(g)
    out_d.backward(g.to(DEV))
    assert_close(out_d.detach(), out_c.detach(), atol=1e-5, rtol=1e-5)
    for c, d in zip(cpu, dev):
        assert_close(d.grad, c.grad, atol=1e-5, rtol=1e-5)


def test_grad_mm_bmm_addmm(mode):
    _grads(torch.mm, torch.randn(3, 4), torch.randn(4, 5))
    _grads(torch.bmm, torch.randn(2, 3, 4), torch.randn(2, 4, 5))
    _grads(lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2), torch.randn(3, 5), torch.randn(3, 4),
           torch.randn(4, 5))
    _grads(lambda s, a, b: torch.baddbmm(s, a, b, alpha=2), torch.randn(2, 3, 5), torch.randn(2, 3, 4),
           torch.randn(2, 4, 5))


def test_grad_matmul_linear(mode):
    _grads(torch.matmul, torch.randn(2, 3, 4), torch.randn(4, 5))
    _grads(torch.matmul, torch.randn(2, 3, 4), torch.randn(2, 4, 5))
    _grads(torch.matmul, torch.randn(4), torch.randn(4, 5))
    _grads(torch.matmul, torch.randn(3, 4), torch.randn(4))
    _grads(lambda x, w: F.linear(x, w), torch.randn(2, 3, 6), torch.randn(4, 6))


@needs_sum
def test_grad_broadcast_matmul_and_bias(mode):
    _grads(torch.matmul, torch.randn(2, 1, 3, 4), torch.randn(5, 4, 2))
    _grads(F.linear, torch.randn(3, 6), torch.randn(4, 6), torch.randn(4))


def test_errors(mode):
    a, b = torch.randn(2, 3).to(DEV), torch.randn(4, 5).to(DEV)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(a, b)
    with pytest.raises(RuntimeError, match="must be a matrix"):
        torch.mm(a, torch.randn(3).to(DEV))
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(a, torch.randn(3, 2, dtype=torch.float64).to(DEV))
    with pytest.raises(NotImplementedError):
        torch.mm(a.bool(), a.t().bool())
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        torch.bmm(a, a)
    with pytest.raises(RuntimeError, match="Expected size for first two dimensions"):
        torch.bmm(torch.ones(2, 2, 3, device=DEV), torch.ones(3, 3, 5, device=DEV))
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        torch.dot(torch.ones(2, device=DEV), torch.ones(3, device=DEV))
    with pytest.raises(RuntimeError, match="1D tensors expected"):
        torch.dot(a, a)
    with pytest.raises(RuntimeError, match="size mismatch"):
        torch.mv(a, torch.ones(4, device=DEV))
    with pytest.raises(RuntimeError, match="expanded size"):
        torch.addmm(torch.ones(4, device=DEV), a, a.t())
    with pytest.raises(RuntimeError, match="Bad in-place call"):
        torch.ones(2, device=DEV).addmm_(a, a.t())
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype"):
        torch.mm(a, a.t(), out=torch.empty(2, 2, device=DEV, dtype=torch.float64))


def test_float32_matmul_precision_selects_the_program(mode):
    # torch.set_float32_matmul_precision is part of the program: "highest" (PyTorch's default) asks XLA for
    # true float32 products (it would pick one bf16 pass on TPU, TF32 on NVIDIA GPUs), and a change compiles
    # a new program instead of reusing the old one.
    import torch_tpu

    # A shape no other test (nor this one in another mode: Debug runs Strict's programs) compiles.
    rows = {"strict": 7, "fused": 8, "debug": 9}[mode]
    a, b = rand(rows, 13), rand(13, 5)
    ta, tb = a.to(DEV), b.to(DEV)
    before = torch.get_float32_matmul_precision()
    try:
        for precision in ("highest", "high", "medium"):
            torch.set_float32_matmul_precision(precision)
            torch.tpu.synchronize()
            misses = torch_tpu._C._executor_stats()["cache_misses"]
            fused = torch_tpu._C._fused_stats()["compiles"]
            r = ta @ tb
            tol = {} if precision == "highest" else dict(atol=5e-2, rtol=2e-2)
            assert_close(r, a @ b, **tol)
            stats = torch_tpu._C._executor_stats()["cache_misses"] - misses
            stats += torch_tpu._C._fused_stats()["compiles"] - fused
            assert stats >= 1, precision  # a program of its own
    finally:
        torch.set_float32_matmul_precision(before)
