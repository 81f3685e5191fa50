"""Shape/data-movement and indexing ops on tpu vs CPU: cat/stack, tril/triu, pad,
flip, roll, repeat, where, clamp*, masked_fill, arange/linspace/eye, index_select,
gather, scatter*, index_add/index_fill, advanced indexing and index_put, nonzero,
masked_select, embedding backward; out=/in-place variants, writes through views,
gradients, empty tensors and errors."""
import warnings

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_close

DEV = "tpu"


def T(t):
    return t.to(DEV)


def cache_misses():
    import torch_tpu

    torch.tpu.synchronize()
    return torch_tpu._C._executor_stats()["cache_misses"]


def _grads(fn, *inputs, grad_out=None, atol=1e-5, rtol=1e-5):
    cpu = [t.clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
    dev = [T(t).requires_grad_() if t.is_floating_point() else T(t) for t in inputs]
    out_c, out_d = fn(*cpu), fn(*dev)
    g = torch.randn(out_c.shape) if grad_out is None else grad_out
    out_c.backward(g)
    out_d.backward(T(g))
    assert_close(out_d.detach(), out_c.detach(), atol=atol, rtol=rtol)
    for c, d in zip(cpu, dev):
        if c.is_floating_point():
            assert_close(d.grad, c.grad, atol=atol, rtol=rtol)


# ---- cat / stack ----------------------------------------------------------------------


def test_cat(mode):
    a, b, c = torch.randn(2, 3), torch.randn(4, 3), torch.randn(3, 5)
    assert_close(torch.cat([T(a), T(b)]), torch.cat([a, b]))
    assert_close(torch.cat([T(a), T(c).t()], dim=-2), torch.cat([a, c.t()], dim=-2))
    assert_close(torch.cat([T(a).t(), T(c)[:, ::2]], 1), torch.cat([a.t(), c[:, ::2]], 1))
    # legacy empty 1-D tensors are skipped; zero-size along dim contributes nothing
    assert_close(torch.cat([T(a), torch.ones(0, device=DEV), T(b)]), torch.cat([a, torch.ones(0), b]))
    assert_close(torch.cat([T(a), torch.ones(0, 3, device=DEV)]), a)
    assert_close(torch.cat([torch.ones(0, device=DEV), torch.ones(0, device=DEV)]), torch.ones(0))
    # type promotion across inputs
    i, f, bo = torch.arange(3), torch.randn(3), torch.tensor([True, False, True])
    assert_close(torch.cat([T(i), T(bo)]), torch.cat([i, bo]))
    assert_close(torch.cat([T(i), T(f), T(bo)]), torch.cat([i, f, bo]))
    assert_close(torch.cat([T(f).bfloat16(), T(f)]), torch.cat([f.bfloat16(), f]))
    # out=, including a dtype the result casts to
    out = torch.empty(0, dtype=torch.float64, device=DEV)
    torch.cat([T(i), T(f)], out=out)
    assert_close(out, torch.cat([i, f]).double())


def test_stack_repeat(mode):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    for d in (0, 1, 2, -1):
        assert_close(torch.stack([T(a), T(b)], d), torch.stack([a, b], d))
    assert_close(T(a).repeat(2, 1, 3), a.repeat(2, 1, 3))
    assert_close(T(a).t().repeat(1, 2), a.t().repeat(1, 2))


def test_cat_errors(mode):
    with pytest.raises(ValueError, match="non-empty list"):
        torch.cat([])
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([torch.ones(2, 3, device=DEV), torch.ones(3, 3, device=DEV)], 1)
    with pytest.raises(RuntimeError, match="zero-dimensional"):
        torch.cat([torch.tensor(1.0).to(DEV), torch.tensor(1.0).to(DEV)])
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        torch.cat([torch.ones(2, 3, device=DEV), torch.ones(3, device=DEV)])
    with pytest.raises(IndexError):
        torch.cat([torch.ones(2, 3, device=DEV)], 2)
    with pytest.raises(TypeError, match="can't be cast"):
        torch.cat([torch.ones(2, device=DEV)], out=torch.empty(2, dtype=torch.int64, device=DEV))


def test_grad_cat(mode):
    _grads(lambda a, b: torch.cat([a, b.t()], 1), torch.randn(3, 2), torch.randn(4, 3))
    _grads(lambda a, b: torch.stack([a, b], 1), torch.randn(3, 2), torch.randn(3, 2))


# ---- tril / triu / pad / flip / roll -----------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_tril_triu(mode, dtype):
    x = torch.randn(2, 4, 5) if dtype == torch.float32 else torch.randint(0, 3, (2, 4, 5)).to(dtype)
    for k in (-2, 0, 1, 7):
        assert_close(torch.tril(T(x), k), torch.tril(x, k))
        assert_close(torch.triu(T(x), k), torch.triu(x, k))
    assert_close(torch.tril(T(x).transpose(1, 2), -1), torch.tril(x.transpose(1, 2), -1))
    t = T(x)
    t.triu_(1)
    assert_close(t, x.triu(1))
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.tril(T(x), out=out)
    assert_close(out, x.tril())
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.tril(torch.ones(3, device=DEV))


def test_tril_diagonal_is_an_operand(mode):
    x = T(torch.randn(5, 5))
    torch.tril(x, 1).cpu()  # read back as the checks below are: the same graph in fused mode
    before = cache_misses()
    for k in (-3, 0, 2):
        assert_close(torch.tril(x, k), torch.tril(x.cpu(), k))
    assert cache_misses() == before


def test_constant_pad(mode):
    x = torch.randn(2, 3, 4)
    for pad in ([1, 2], [0, 1, 2, 0], [-1, 1], [1, 1, -1, 0, 2, 1], []):
        assert_close(F.pad(T(x), pad, value=1.5), F.pad(x, pad, value=1.5))
    i = torch.arange(6).reshape(2, 3)
    assert_close(F.pad(T(i), [1, 1]), F.pad(i, [1, 1]))
    assert_close(F.pad(T(x).transpose(0, 2), [2, 0]), F.pad(x.transpose(0, 2), [2, 0]))
    assert_close(F.pad(torch.ones(0, 2, device=DEV), [1, 1], value=3.0), F.pad(torch.ones(0, 2), [1, 1], value=3.0))
    assert_close(F.pad(torch.ones(2, 0, device=DEV), [1, 1], value=3.0), F.pad(torch.ones(2, 0), [1, 1], value=3.0))
    with pytest.raises(RuntimeError):
        F.pad(T(x), [1, 2, 3])
    with pytest.raises(RuntimeError):
        torch.constant_pad_nd(T(x), [-3, -2])


def test_grad_pad(mode):
    _grads(lambda x: F.pad(x, [1, 2, -1, 0]), torch.randn(3, 4))


def test_flip_roll(mode):
    x = torch.randn(3, 4, 5)
    for dims in ([0], [-1], [0, 2], []):
        assert_close(torch.flip(T(x), dims), torch.flip(x, dims))
    assert_close(torch.flip(T(x)[:, ::2], [1]), torch.flip(x[:, ::2], [1]))
    assert_close(torch.flip(torch.arange(5).to(DEV), [0]), torch.arange(5).flip(0))
    for shifts, dims in ((1, 0), (-2, -1), ((1, 7), (0, 2)), (5, None), (-13, None)):
        assert_close(torch.roll(T(x), shifts, dims), torch.roll(x, shifts, dims))
    assert_close(torch.roll(T(x).transpose(0, 1), 2, 0), torch.roll(x.transpose(0, 1), 2, 0))
    assert_close(torch.roll(torch.ones(0, 3, device=DEV), 1, 0), torch.ones(0, 3))
    with pytest.raises(RuntimeError, match="appears multiple times"):
        torch.flip(T(x), [0, -3])
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        torch.roll(T(x), (1, 1), (0,))


def test_roll_shift_is_an_operand(mode):
    x = T(torch.randn(4, 6))
    torch.roll(x, 1, 1).cpu()  # read back as the checks below are: the same graph in fused mode
    before = cache_misses()
    for s in (2, -1, 9):
        assert_close(torch.roll(x, s, 1), torch.roll(x.cpu(), s, 1))
    assert cache_misses() == before


# ---- where / clamp / masked_fill -------------------------------------------------------------


def test_where(mode):
    c, x, y = torch.randn(3, 4) > 0, torch.randn(3, 4), torch.randn(4)
    assert_close(torch.where(T(c), T(x), T(y)), torch.where(c, x, y))
    assert_close(torch.where(T(c), T(x), 0.5), torch.where(c, x, 0.5))
    assert_close(torch.where(T(c), 2, T(y).double()), torch.where(c, 2, y.double()))
    i = torch.arange(4)
    assert_close(torch.where(T(c), T(i), T(x)), torch.where(c, i, x))
    assert_close(torch.where(T(c)[:, :1], T(i), 7), torch.where(c[:, :1], i, 7))
    assert_close(torch.where(T(c).t(), T(x).t(), T(y)[:, None]), torch.where(c.t(), x.t(), y[:, None]))
    out = torch.empty(0, device=DEV)
    torch.where(T(c), T(x), T(y), out=out)
    assert_close(out, torch.where(c, x, y))
    assert_close(torch.where(torch.ones(0, 4, dtype=torch.bool, device=DEV), T(x)[:0], T(y)), torch.ones(0, 4))
    with pytest.raises(RuntimeError, match="boolean"):
        torch.where(T(x), T(x), T(y))
    with pytest.raises(RuntimeError, match="Expected out type"):
        torch.where(T(c), T(x), T(y), out=torch.empty(3, 4, dtype=torch.float64, device=DEV))


def test_grad_where(mode):
    c = torch.randn(3, 4) > 0
    _grads(lambda x, y: torch.where(T(c) if x.device.type == DEV else c, x, y), torch.randn(3, 4), torch.randn(3, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_clamp(mode, dtype):
    x = (torch.randn(3, 5) * 4).to(dtype)
    for lo, hi in ((-1, 1), (None, 0.5), (-0.5, None), (2, -2)):
        assert_close(torch.clamp(T(x), lo, hi), torch.clamp(x, lo, hi))
    lo_t, hi_t = (torch.randn(5) - 1).to(dtype), (torch.randn(3, 1) + 1).to(dtype)
    assert_close(torch.clamp(T(x), T(lo_t), T(hi_t)), torch.clamp(x, lo_t, hi_t))
    assert_close(torch.clamp(T(x), min=T(lo_t)), torch.clamp(x, min=lo_t))
    assert_close(T(x).clamp_min(0), x.clamp_min(0))
    assert_close(T(x).clamp_max(T(hi_t)), x.clamp_max(hi_t))
    assert_close(T(x).t().clamp(-1, 1), x.t().clamp(-1, 1))
    t = T(x)
    t.clamp_(-1, 1)
    assert_close(t, x.clamp(-1, 1))
    t = T(x)
    t.clamp_min_(T(lo_t))
    assert_close(t, x.clamp_min(lo_t))
    t = T(x)
    t.clamp_max_(0)
    assert_close(t, x.clamp_max(0))
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.clamp(T(x), max=T(hi_t), out=out)
    assert_close(out, torch.clamp(x, max=hi_t))


def test_clamp_promotion_nan_errors(mode):
    i = torch.arange(-3, 4)
    assert_close(torch.clamp(T(i), -0.5, 1.5), torch.clamp(i, -0.5, 1.5))  # int -> float
    b = torch.tensor([True, False])
    assert_close(torch.clamp(T(b), 0, 1), torch.clamp(b, 0, 1))
    n = torch.tensor([1.0, float("nan"), -3.0, 5.0])
    assert_close(torch.clamp(T(n), -1, 1), torch.clamp(n, -1, 1), equal_nan=True)
    lo = torch.tensor([float("nan"), 0.0, 0.0, 0.0])
    assert_close(torch.clamp(T(n), T(lo), T(torch.tensor(2.0))), torch.clamp(n, lo, torch.tensor(2.0)), equal_nan=True)
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        torch.clamp(T(n))
    with pytest.raises(RuntimeError, match="can't be cast"):
        T(i).clamp_(0.5, 1)
    assert_close(torch.clamp(torch.ones(0, 2, device=DEV), 0, 1), torch.ones(0, 2))


def test_clamp_bounds_are_operands(mode):
    x = T(torch.randn(8))
    torch.clamp(x, -1.0, 1.0).cpu()  # read back as the checks below are: the same graph in fused mode
    before = cache_misses()
    for lo, hi in ((-0.5, 0.2), (0.1, 3.0)):
        assert_close(torch.clamp(x, lo, hi), torch.clamp(x.cpu(), lo, hi))
    assert cache_misses() == before


def test_grad_clamp(mode):
    _grads(lambda x: torch.clamp(x, -0.5, 0.5), torch.randn(4, 5))
    _grads(lambda x, lo: torch.clamp(x, min=lo), torch.randn(4, 5), torch.randn(4, 5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_masked_fill(mode, dtype):
    x = torch.randint(-3, 3, (3, 4)).to(dtype)
    m = torch.randn(3, 4) > 0
    assert_close(T(x).masked_fill(T(m), 1), x.masked_fill(m, 1))
    assert_close(T(x).masked_fill(T(m[0]), 0), x.masked_fill(m[0], 0))
    assert_close(T(x).masked_fill(T(m), torch.tensor(1)), x.masked_fill(m, torch.tensor(1)))
    assert_close(T(x).masked_fill(T(m), T(torch.tensor(1).to(dtype))), x.masked_fill(m, torch.tensor(1).to(dtype)))
    t = T(x)
    t.masked_fill_(T(m).t().t(), 0)
    assert_close(t, x.masked_fill(m, 0))


def test_masked_fill_through_views(mode):
    x = torch.randn(4, 5)
    m = torch.tensor([True, False, True, False])
    t = T(x)
    t[:, 1].masked_fill_(T(m), 9.0)
    x[:, 1].masked_fill_(m, 9.0)
    assert_close(t, x)
    t[1::2].masked_fill_(T(x[1::2] > 0), -1.0)
    x[1::2].masked_fill_(x[1::2] > 0, -1.0)
    assert_close(t, x)
    t.t()[2:].clamp_(-0.1, 0.1)
    x.t()[2:].clamp_(-0.1, 0.1)
    assert_close(t, x)
    t[:, :3].tril_()
    x[:, :3].tril_()
    assert_close(t, x)


def test_masked_fill_errors_and_operand(mode):
    x = T(torch.randn(3))
    with pytest.raises(RuntimeError, match="boolean masks"):
        x.masked_fill_(T(torch.ones(3)), 1.0)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill_(T(torch.ones(3, dtype=torch.bool)), T(torch.ones(1)))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.masked_fill_(T(torch.ones(2, 3, dtype=torch.bool)), 1.0)
    m = T(torch.tensor([True, False, True]))
    x.masked_fill(m, 1.0).cpu()  # read back as the check below is: the same graph in fused mode
    before = cache_misses()
    assert_close(x.masked_fill(m, 2.5), x.cpu().masked_fill(m.cpu(), 2.5))
    assert cache_misses() == before


def test_grad_masked_fill(mode):
    m = torch.randn(3, 4) > 0
    _grads(lambda x: x.masked_fill(T(m) if x.device.type == DEV else m, 0.5), torch.randn(3, 4))


# ---- range factories --------------------------------------------------------------------------


def test_arange(mode):
    cases = [(0, 10, 1), (-5, 17, 3), (10, 0, -3), (0, 1, 0.1), (1, 2.5, 0.5), (-1.5, 2.25, 0.3), (0, 0, 1)]
    for start, end, step in cases:
        r, e = torch.arange(start, end, step, device=DEV), torch.arange(start, end, step)
        assert r.dtype == e.dtype and r.shape == e.shape
        assert_close(r, e)
    for dtype in (torch.int32, torch.float64, torch.bfloat16):
        assert_close(torch.arange(2, 20, 3, dtype=dtype, device=DEV), torch.arange(2, 20, 3, dtype=dtype))
    assert_close(torch.arange(7, device=DEV), torch.arange(7))
    out = torch.empty(2, 2, device=DEV)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.arange(0, 5, out=out)
    assert any("does not match the computed number" in str(x.message) for x in w)
    assert_close(out, torch.arange(0, 5, dtype=torch.float32))
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 10, 0, device=DEV)
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        torch.arange(0, 10, -1, device=DEV)


def test_arange_start_step_are_operands(mode):
    torch.arange(0.0, 8.0, 1.0, device=DEV).cpu()  # read back as the check below is: the same graph in fused mode
    before = cache_misses()
    assert_close(torch.arange(1.0, 5.0, 0.5, device=DEV), torch.arange(1.0, 5.0, 0.5))  # same length 8
    assert cache_misses() == before


def test_linspace_eye(mode):
    for start, end, steps in ((0, 1, 5), (-3, 7, 1), (2, -2, 8), (0, 10, 0)):
        assert_close(torch.linspace(start, end, steps, device=DEV), torch.linspace(start, end, steps))
    assert_close(torch.linspace(-5, 17, 7, dtype=torch.int64, device=DEV), torch.linspace(-5, 17, 7, dtype=torch.int64))
    assert_close(torch.eye(3, device=DEV), torch.eye(3))
    assert_close(torch.eye(2, 4, dtype=torch.int64, device=DEV), torch.eye(2, 4, dtype=torch.int64))
    assert_close(torch.eye(0, device=DEV), torch.eye(0))
    with pytest.raises(RuntimeError, match="must be non-negative"):
        torch.linspace(0, 1, -1, device=DEV)
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0"):
        torch.eye(-1, device=DEV)


# ---- index_select / gather / scatter ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_index_select_gather(mode, dtype):
    x = torch.randint(-5, 5, (4, 5)).to(dtype)
    idx = torch.tensor([3, 0, 3, 1])
    assert_close(T(x).index_select(1, T(idx)), x.index_select(1, idx))
    assert_close(T(x).index_select(-2, T(idx).int()), x.index_select(-2, idx.int()))
    assert_close(T(x).t().index_select(0, T(idx)), x.t().index_select(0, idx))
    assert_close(T(x).index_select(0, T(torch.tensor(2))), x.index_select(0, torch.tensor(2)))
    assert_close(T(x).index_select(0, T(idx[:0])), x.index_select(0, idx[:0]))
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.index_select(T(x), 1, T(idx), out=out)
    assert_close(out, x.index_select(1, idx))
    g = torch.randint(0, 5, (3, 5))
    assert_close(T(x).gather(1, T(g)), x.gather(1, g))
    assert_close(T(x).gather(0, T(g[:, :2]) % 4), x.gather(0, g[:, :2] % 4))
    assert_close(T(x)[:, ::2].gather(-1, T(g[:, :2]) % 3), x[:, ::2].gather(-1, g[:, :2] % 3))
    assert_close(T(x).gather(1, T(g).int()), x.gather(1, g.int()))
    assert_close(T(x).gather(1, T(g)[:0]), x.gather(1, g[:0]))
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.gather(T(x), 1, T(g), out=out)
    assert_close(out, x.gather(1, g))
    assert_close(torch.take_along_dim(T(x), T(g[:1]), 1), torch.take_along_dim(x, g[:1], 1))
    s = torch.tensor(5).to(dtype)
    assert_close(T(s).index_select(0, T(torch.tensor([0]))), s.index_select(0, torch.tensor([0])))
    assert_close(T(s).gather(0, T(torch.tensor(0))), s.gather(0, torch.tensor(0)))


def test_index_select_gather_errors(mode):
    x = T(torch.randn(3, 4))
    with pytest.raises(IndexError, match="supposed to be a vector"):
        x.index_select(0, T(torch.tensor([[0]])))
    with pytest.raises(RuntimeError, match="int32 or int64"):
        x.index_select(0, T(torch.tensor([0.0])))
    with pytest.raises(IndexError):
        x.index_select(2, T(torch.tensor([0])))
    with pytest.raises(RuntimeError, match="self indexing axis dim should be positive"):
        T(torch.ones(3, 0)).index_select(1, T(torch.tensor([0])))
    with pytest.raises(RuntimeError, match="int32/int64"):
        x.gather(0, T(torch.tensor([[0.0]])))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.gather(0, T(torch.tensor([0])))
    with pytest.raises(RuntimeError, match="to be no larger than self"):
        x.gather(0, T(torch.zeros(3, 5, dtype=torch.int64)))


def test_grad_index_select_gather(mode):
    idx = torch.tensor([2, 0, 2])
    _grads(lambda x: x.index_select(1, T(idx) if x.device.type == DEV else idx), torch.randn(3, 4))
    g = torch.tensor([[0, 0, 1], [2, 1, 1]])
    _grads(lambda x: x.gather(1, T(g) if x.device.type == DEV else g), torch.randn(2, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter(mode, dtype):
    x = torch.randint(-5, 5, (4, 5)).to(dtype)
    idx = torch.tensor([[0, 1, 2], [3, 0, 1], [1, 1, 4]])
    src = torch.randint(-5, 5, (3, 4)).to(dtype)
    for dim in (0, 1, -1):
        i = idx % 4 if dim == 0 else idx
        assert_close(T(x).scatter(dim, T(i), T(src)), x.scatter(dim, i, src))
        assert_close(T(x).scatter(dim, T(i), 7), x.scatter(dim, i, 7))
        assert_close(T(x).scatter_add(dim, T(i), T(src)), x.scatter_add(dim, i, src))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for red in ("add", "multiply"):
                assert_close(T(x).scatter(dim, T(i), T(src), reduce=red), x.scatter(dim, i, src, reduce=red))
                assert_close(T(x).scatter(dim, T(i), 3, reduce=red), x.scatter(dim, i, 3, reduce=red))
    t = T(x)
    t.scatter_(1, T(idx), T(src))
    assert_close(t, x.scatter(1, idx, src))
    t = T(x)
    t.scatter_add_(1, T(idx), T(src))
    assert_close(t, x.scatter_add(1, idx, src))
    t = T(x)
    t[:, 1:].scatter_(1, T(idx) % 4, -9)  # through a view
    e = x.clone()
    e[:, 1:].scatter_(1, idx % 4, -9)
    assert_close(t, e)
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.scatter_add(T(x), 1, T(idx), T(src), out=out)
    assert_close(out, x.scatter_add(1, idx, src))
    assert_close(T(x).scatter(1, T(idx)[:0], T(src)), x)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce(mode, reduce, include_self, dtype):
    x = torch.randint(-6, 6, (5, 3)).to(dtype)
    idx = torch.tensor([[0, 1, 1], [4, 1, 0], [0, 0, 0], [2, 1, 4]])
    src = torch.randint(-6, 6, (4, 3)).to(dtype)
    assert_close(T(x).scatter_reduce(0, T(idx), T(src), reduce, include_self=include_self),
                 x.scatter_reduce(0, idx, src, reduce, include_self=include_self))
    t = T(x)
    t.scatter_reduce_(0, T(idx), T(src), reduce, include_self=include_self)
    assert_close(t, x.scatter_reduce(0, idx, src, reduce, include_self=include_self))


def test_scatter_errors(mode):
    x = T(torch.randn(3, 4))
    i = T(torch.tensor([[0]]))
    with pytest.raises(RuntimeError, match="add or multiply"):
        x.scatter(0, i, T(torch.ones(1, 4)), reduce="foo")
    with pytest.raises(RuntimeError, match="sum, prod, mean, amax or amin"):
        x.scatter_reduce(0, i, T(torch.ones(1, 4)), "foo")
    with pytest.raises(RuntimeError, match="self.dtype to be equal to src.dtype"):
        x.scatter(0, i, T(torch.ones(1, 4, dtype=torch.float64)))
    with pytest.raises(RuntimeError, match="to be no larger than self"):
        x.scatter(0, T(torch.zeros(1, 5, dtype=torch.int64)), 1.0)


def test_grad_scatter_add(mode):
    idx = torch.tensor([[0, 1, 0], [2, 2, 1]])
    _grads(lambda x, s: x.scatter_add(0, T(idx) if x.device.type == DEV else idx, s), torch.randn(3, 3),
           torch.randn(2, 3))


def test_index_add_fill(mode):
    x, src = torch.randn(4, 5), torch.randn(4, 3)
    idx = torch.tensor([4, 0, 4])
    assert_close(T(x).index_add(1, T(idx), T(src)), x.index_add(1, idx, src))
    assert_close(T(x).index_add(1, T(idx).int(), T(src), alpha=-2), x.index_add(1, idx.int(), src, alpha=-2))
    t = T(x)
    t.index_add_(0, T(torch.tensor([1, 1])), T(torch.ones(2, 5)))
    assert_close(t, x.index_add(0, torch.tensor([1, 1]), torch.ones(2, 5)))
    i = torch.arange(20).reshape(4, 5)
    assert_close(T(i).index_add(0, T(torch.tensor([3])), T(i[:1])), i.index_add(0, torch.tensor([3]), i[:1]))
    assert_close(T(x).index_fill(1, T(torch.tensor([0, -1])), -1.0), x.index_fill(1, torch.tensor([0, -1]), -1.0))
    assert_close(T(x).index_fill(0, T(torch.tensor([2])), T(torch.tensor(3.0))),
                 x.index_fill(0, torch.tensor([2]), torch.tensor(3.0)))
    with pytest.raises(RuntimeError, match="Number of indices"):
        T(x).index_add_(0, T(torch.tensor([0])), T(torch.ones(2, 5)))
    with pytest.raises(IndexError, match="supposed to be a vector"):
        T(x).index_add_(0, T(torch.tensor([[0]])), T(torch.ones(1, 5)))


# ---- advanced indexing ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_index(mode, dtype):
    x = torch.randint(-5, 5, (3, 4, 5)).to(dtype)
    i, j = torch.tensor([[0], [2]]), torch.tensor([1, -1, 3])
    cases = [
        lambda a, dev: a[tt(torch.tensor([2, 0, -1]), dev)],
        lambda a, dev: a[tt(i, dev), :, tt(j, dev)],          # not adjacent: broadcast dims first
        lambda a, dev: a[:, tt(i, dev), tt(j, dev)],          # adjacent: in place
        lambda a, dev: a[tt(i, dev), tt(j, dev)],
        lambda a, dev: a[..., tt(j, dev)],
        lambda a, dev: a[None, tt(j, dev) % 3],
        lambda a, dev: a[tt(x.bool().any(-1) if dtype == torch.bool else x[:, :, 0] > 0, dev)],  # bool mask
        lambda a, dev: a[:, tt(torch.tensor([True, False, True, True]), dev)],
        lambda a, dev: a[1:, tt(torch.tensor([0, 1]), dev), ::2],
        lambda a, dev: a.transpose(0, 2)[tt(torch.tensor([4, 0]), dev)],
        lambda a, dev: a[tt(torch.tensor([], dtype=torch.int64), dev)],
        lambda a, dev: a[tt(torch.tensor([1, 2]), dev).int()],
    ]
    for f in cases:
        assert_close(f(T(x), True), f(x, False))
    # indices may live on the CPU
    assert_close(T(x)[torch.tensor([2, 0])], x[torch.tensor([2, 0])])
    assert_close(T(x)[[0, 2], [1, 1]], x[[0, 2], [1, 1]])


def tt(t, dev):
    return T(t) if dev else t


def test_index_errors(mode):
    x = T(torch.randn(3, 4))
    with pytest.raises(IndexError, match="too many indices"):
        torch.ops.aten.index(x, [T(torch.tensor([0]))] * 3)
    with pytest.raises(IndexError, match="shape mismatch"):
        x[T(torch.tensor([0, 1])), T(torch.tensor([0, 1, 2]))]
    with pytest.raises(IndexError, match="The shape of the mask"):
        x[T(torch.tensor([[True]]))]
    with pytest.raises(IndexError):
        x[T(torch.tensor([0.5]))]
    with pytest.raises(IndexError, match="out of bounds for dimension 1 with size 0"):
        T(torch.ones(2, 0))[:, T(torch.tensor([0]))]


def test_nonzero_masked_select(mode):
    x = torch.randn(3, 4, 5)
    for t in (x > 0.3, x, (x > 0).int(), torch.zeros(3, 2), torch.tensor(2.0), torch.tensor(0), torch.ones(0, 3)):
        assert_close(torch.nonzero(T(t)), torch.nonzero(t))
    assert_close(torch.nonzero(T(x).transpose(0, 2) > 0), torch.nonzero(x.transpose(0, 2) > 0))
    assert_close(torch.argwhere(T(x) > 0), torch.argwhere(x > 0))
    assert_close(torch.where(T(x) > 1), torch.where(x > 1))
    out = torch.empty(0, dtype=torch.int64, device=DEV)
    torch.nonzero(T(x) > 0, out=out)
    assert_close(out, torch.nonzero(x > 0))
    m = x[0] > 0
    assert_close(torch.masked_select(T(x), T(m)), torch.masked_select(x, m))
    assert_close(torch.masked_select(T(x)[:, ::2], T(x)[0, ::2] > 0), torch.masked_select(x[:, ::2], x[0, ::2] > 0))
    i = torch.arange(12).reshape(3, 4)
    assert_close(torch.masked_select(T(i), T(i) % 3 == 0), torch.masked_select(i, i % 3 == 0))
    assert_close(torch.masked_select(T(i), T(i) > 100), torch.masked_select(i, i > 100))
    out = torch.empty(0, device=DEV)
    torch.masked_select(T(x), T(m), out=out)
    assert_close(out, torch.masked_select(x, m))
    with pytest.raises(RuntimeError, match="expected BoolTensor"):
        torch.masked_select(T(x), T(x))


def _put(a, indices, values, accumulate):
    a = a.clone()
    a.index_put_(indices, values, accumulate=accumulate)
    return a


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_index_put(mode, accumulate, dtype):
    x = torch.randint(-5, 5, (4, 5)).to(dtype)
    v = torch.randint(-5, 5, (3, 5)).to(dtype)
    i = torch.tensor([3, 1, -4]) if not accumulate else torch.tensor([3, 1, 3])  # duplicates must sum
    assert_close(_put(T(x), (T(i),), T(v), accumulate), _put(x, (i,), v, accumulate))
    assert_close(_put(T(x), (T(i),), T(v[0]), accumulate), _put(x, (i,), v[0], accumulate))
    j = torch.tensor([0, 4, 0])
    assert_close(_put(T(x), (T(i), T(j)), T(v[:, 0]), accumulate), _put(x, (i, j), v[:, 0], accumulate))
    put = torch.ops.aten.index_put  # accepts None entries
    assert_close(put(T(x), [None, T(j)], T(v[0, :3]), accumulate), put(x, [None, j], v[0, :3], accumulate))
    m = x > 0
    one = torch.tensor(7).to(dtype)
    assert_close(_put(T(x), (T(m),), T(one), accumulate), _put(x, (m,), one, accumulate))
    assert_close(_put(T(x), (T(m),), one, accumulate), _put(x, (m,), one, accumulate))
    vals = torch.arange(int(m.sum())).to(dtype)
    assert_close(_put(T(x), (T(m),), T(vals), accumulate), _put(x, (m,), vals, accumulate))
    assert_close(_put(T(x), (T(i[:0]),), T(v[:0]), accumulate), x)


def test_setitem(mode):
    x = torch.randn(3, 4, 5)
    t = T(x)
    t[t > 0] = 0.0
    x[x > 0] = 0.0
    assert_close(t, x)
    t[[0, 2], :, [1, 1]] = T(torch.ones(2, 4))
    x[[0, 2], :, [1, 1]] = torch.ones(2, 4)
    assert_close(t, x)
    t[:, 1][T(torch.tensor([0, 2]))] = 5.0  # through a view
    x[:, 1][torch.tensor([0, 2])] = 5.0
    assert_close(t, x)
    t[1, :, T(torch.tensor([0, -1]))] += 1.0
    x[1, :, torch.tensor([0, -1])] += 1.0
    assert_close(t, x)


def test_index_put_errors(mode):
    x = T(torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="shape mismatch: value tensor"):
        x.index_put_((T(torch.tensor([0, 1])),), T(torch.ones(3)))
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.index_put_((T(torch.tensor([0, 1])),), T(torch.ones(4, dtype=torch.float64)))


def test_grad_index_index_put(mode):
    i = torch.tensor([2, 0, 2])
    _grads(lambda x: x[tt(i, x.device.type == DEV)], torch.randn(3, 4))
    _grads(lambda x: x[:, tt(i, x.device.type == DEV), None], torch.randn(2, 3))
    _grads(lambda x, v: x.index_put((tt(torch.tensor([1, 0]), x.device.type == DEV),), v, accumulate=True),
           torch.randn(3, 4), torch.randn(2, 4))
    _grads(lambda x, v: x.index_put((tt(torch.tensor([1, 0]), x.device.type == DEV),), v),
           torch.randn(3, 4), torch.randn(2, 4))


def test_embedding_backward(mode):
    idx = torch.tensor([[0, 2, 4], [4, 3, 2]])
    for padding_idx in (None, 2):
        _grads(lambda w: F.embedding(tt(idx, w.device.type == DEV), w, padding_idx=padding_idx), torch.randn(5, 3))
    _grads(lambda w: F.embedding(tt(idx, w.device.type == DEV), w, scale_grad_by_freq=True), torch.randn(5, 3))
    g = torch.randn(2, 3, 4).bfloat16()
    assert_close(torch.ops.aten.embedding_dense_backward(T(g), T(idx), 6, -1, False),
                 torch.ops.aten.embedding_dense_backward(g, idx, 6, -1, False), atol=2e-2, rtol=2e-2)
    assert_close(torch.ops.aten.embedding_dense_backward(T(g)[:, :0], T(idx)[:, :0], 6, -1, False),
                 torch.zeros(6, 4, dtype=torch.bfloat16))


def test_nonzero_static_masked_scatter(mode):
    x = torch.tensor([[0, 1, 0], [2, 0, 3]])
    for size, fill in ((5, -1), (2, 9), (0, 1), (6, 4)):
        assert_close(torch.nonzero_static(T(x), size=size, fill_value=fill),
                     torch.nonzero_static(x, size=size, fill_value=fill))
    assert_close(torch.nonzero_static(T(torch.tensor(3.0)), size=2), torch.nonzero_static(torch.tensor(3.0), size=2))
    s, m, src = torch.randn(3, 4), torch.randn(3, 4) > 0, torch.randn(20)
    assert_close(T(s).masked_scatter(T(m), T(src)), s.masked_scatter(m, src))
    assert_close(T(s).masked_scatter(T(m[0]), T(src)), s.masked_scatter(m[0], src))
    i = torch.arange(12).reshape(3, 4)
    t = T(i)
    t[:, 1:].masked_scatter_(T(m[:, 1:]), T(-i))  # through a view
    e = i.clone()
    e[:, 1:].masked_scatter_(m[:, 1:], -i)
    assert_close(t, e)
    with pytest.raises(RuntimeError, match="boolean masks"):
        T(s).masked_scatter_(T(s), T(src))


def test_grad_masked_select(mode):
    m = torch.randn(3, 4) > 0
    _grads(lambda x: torch.masked_select(x, tt(m, x.device.type == DEV)), torch.randn(3, 4))
