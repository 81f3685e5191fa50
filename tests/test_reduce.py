"""Reductions against CPU: sum/mean/prod/nansum, amax/amin, max/min, argmax/argmin, any/all, var/std,
vector norms, logsumexp, count_nonzero, cumsum/cumprod; dims, keepdim, dtypes, views, out=/in-place,
empty and 0-dim tensors, NaN handling, errors and gradients."""
import math
import warnings

import pytest
import torch

from conftest import assert_close, nonfinite_ok

def sample(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-4, 5, shape, generator=g).to(dtype)


def tpu(x):
    return x.to("tpu")


DIMS = [None, 0, -1, (0, 2), (-1, 1), ()]


# ---- sum / mean / prod -------------------------------------------------------------

@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.bool])
def test_sum_dims(dtype, keepdim, mode):
    x = sample((3, 4, 5), dtype)
    for dim in DIMS:
        got = torch.sum(tpu(x), dim, keepdim=keepdim) if dim is not None else torch.sum(tpu(x))
        want = torch.sum(x, dim, keepdim=keepdim) if dim is not None else torch.sum(x)
        assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("keepdim", [False, True])
def test_mean_prod_dims(keepdim, mode):
    x = sample((3, 4, 5))
    for dim in [0, -1, (0, 2), (-1, 1), ()]:
        assert_close(torch.mean(tpu(x), dim, keepdim=keepdim), torch.mean(x, dim, keepdim=keepdim))
    for dim in [0, -1, 1]:
        assert_close(torch.prod(tpu(x), dim, keepdim=keepdim), torch.prod(x, dim, keepdim=keepdim), rtol=1e-5,
                     atol=1e-5)
    xi = sample((3, 4), torch.int64)
    assert_close(torch.prod(tpu(xi), 1, keepdim=keepdim), torch.prod(xi, 1, keepdim=keepdim))
    assert_close(torch.prod(tpu(xi)), torch.prod(xi))
    assert_close(tpu(x).mean(), x.mean())
    assert_close(tpu(x).prod(), x.prod(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sum_mean_half(dtype, mode):
    x = sample((8, 300), dtype)
    # accumulation in float32: close to CPU (which also accumulates in float32)
    assert_close(tpu(x).sum(1), x.sum(1), rtol=1e-2, atol=1e-1)
    assert_close(tpu(x).mean(0), x.mean(0), rtol=1e-2, atol=1e-2)
    assert_close(tpu(x).sum(), x.sum(), rtol=1e-2, atol=1.0)
    ones = torch.ones(4096, dtype=dtype)
    assert tpu(ones).sum().item() == 4096  # a float16/bfloat16 accumulator would stall below this


def test_sum_dtypes_and_promotion(mode):
    b = sample((5, 3), torch.bool)
    assert tpu(b).sum().dtype == torch.int64
    assert_close(tpu(b).sum(0), b.sum(0))
    i = sample((5, 3), torch.int32)
    assert_close(tpu(i).sum(1), i.sum(1))
    assert_close(tpu(i).sum(1, dtype=torch.float32), i.sum(1, dtype=torch.float32))
    assert_close(tpu(i).prod(1, dtype=torch.float64), i.prod(1, dtype=torch.float64))
    x = sample((5, 3))
    assert_close(tpu(x).sum(0, dtype=torch.float64), x.sum(0, dtype=torch.float64))
    assert_close(tpu(x).mean(0, dtype=torch.float64), x.mean(0, dtype=torch.float64))
    assert_close(torch.nansum(tpu(i), 0), torch.nansum(i, 0))
    with pytest.raises(RuntimeError, match="mean"):
        tpu(i).mean()
    with pytest.raises(RuntimeError, match="mean"):
        tpu(x).mean(dtype=torch.int64)


def test_nansum(mode):
    x = sample((4, 5))
    x[1, 2] = float("nan")
    x[3, :] = float("nan")
    assert_close(torch.nansum(tpu(x)), torch.nansum(x))
    assert_close(torch.nansum(tpu(x), 1, keepdim=True), torch.nansum(x, 1, keepdim=True))


def test_noncontiguous(mode):
    x = sample((6, 8, 4))
    views = [lambda t: t.transpose(0, 2), lambda t: t[::2, 1::3], lambda t: t.permute(1, 2, 0)[1:, :, ::2]]
    for v in views:
        assert_close(v(tpu(x)).sum(1), v(x).sum(1), rtol=1e-5, atol=1e-5)
        assert_close(v(tpu(x)).amax(-1), v(x).amax(-1))
        assert_close(v(tpu(x)).max(0).indices, v(x).max(0).indices)
        assert_close(v(tpu(x)).var(1), v(x).var(1), rtol=1e-5, atol=1e-5)
        assert_close(v(tpu(x)).cumsum(1), v(x).cumsum(1), rtol=1e-5, atol=1e-5)
        assert_close(v(tpu(x)).argmin(), v(x).argmin())
        assert_close(torch.linalg.vector_norm(v(tpu(x)), 3, 0), torch.linalg.vector_norm(v(x), 3, 0))


def test_empty_and_zero_dim(mode):
    e = torch.zeros(3, 0)
    assert_close(tpu(e).sum(1), e.sum(1))
    assert_close(tpu(e).sum(), e.sum())
    assert_close(tpu(e).prod(1), e.prod(1))
    with nonfinite_ok():  # 0/0 and log(0) as on CPU
        assert_close(tpu(e).mean(1), e.mean(1), equal_nan=True)
        assert_close(torch.logsumexp(tpu(e), 1), torch.logsumexp(e, 1))
    assert_close(tpu(e).amax(0), e.amax(0))
    assert_close(tpu(e).any(1), e.any(1))
    assert_close(tpu(e).all(1), e.all(1))
    assert_close(tpu(e).cumsum(1), e.cumsum(1))
    assert_close(torch.linalg.vector_norm(tpu(e), 2, 1), torch.linalg.vector_norm(e, 2, 1))
    with pytest.raises(IndexError):
        tpu(e).amax(1)
    with pytest.raises(RuntimeError):
        tpu(e).amax()
    with pytest.raises(RuntimeError):
        tpu(e).max()
    with pytest.raises(IndexError):
        tpu(e).max(1)
    with pytest.raises(IndexError):
        tpu(e).argmax()
    with pytest.raises(RuntimeError):
        torch.linalg.vector_norm(tpu(e), float("inf"))
    s = torch.tensor(2.5)
    for fn in [lambda t: t.sum(), lambda t: t.sum(0), lambda t: t.max(), lambda t: t.argmax(), lambda t: t.argmax(0),
               lambda t: t.cumsum(0), lambda t: t.cumprod(-1), lambda t: t.amax(0, keepdim=True),
               lambda t: t.norm(), lambda t: t.logsumexp(0), lambda t: t.mean(0), lambda t: t.prod(0)]:
        assert_close(fn(tpu(s)), fn(s))
    assert_close(tpu(s).max(0), s.max(0))
    with warnings.catch_warnings(), nonfinite_ok():  # one sample: 0/0 as on CPU
        warnings.simplefilter("ignore")
        assert_close(tpu(s).var(0), s.var(0), equal_nan=True)


def test_errors(mode):
    x = tpu(sample((2, 3)))
    with pytest.raises(IndexError):
        x.sum(2)
    with pytest.raises(IndexError):
        x.amax(-3)
    with pytest.raises(RuntimeError, match="multiple times"):
        x.sum((0, -2))
    with pytest.raises(RuntimeError, match="bool"):
        tpu(torch.ones(3, dtype=torch.bool)).argmax()
    with pytest.raises(RuntimeError, match="floating point"):
        tpu(torch.arange(3)).var()
    with pytest.raises(RuntimeError, match="floating point"):
        torch.linalg.vector_norm(tpu(torch.arange(3)))
    with pytest.raises(RuntimeError, match="narrowing"):
        torch.linalg.vector_norm(x, dtype=torch.float16)


# ---- out= and in-place ---------------------------------------------------------------

def test_out_variants(mode):
    x = sample((4, 5))
    t = tpu(x)
    out = torch.empty(0, device="tpu")
    torch.sum(t, 1, out=out)
    assert_close(out, x.sum(1))
    out = torch.empty(0, device="tpu", dtype=torch.float64)
    torch.sum(t, 0, keepdim=True, out=out)
    assert_close(out, torch.sum(x, 0, keepdim=True, out=torch.empty(0, dtype=torch.float64)))
    out = torch.empty(0, device="tpu")
    torch.mean(t, (0, 1), out=out)
    assert_close(out, x.mean())
    out = torch.empty(0, device="tpu")
    torch.prod(t, 0, out=out)
    assert_close(out, x.prod(0))
    out = torch.empty(0, device="tpu")
    torch.amax(t, 1, out=out)
    assert_close(out, x.amax(1))
    with pytest.raises(RuntimeError, match="dtype"):
        torch.amax(t, 1, out=torch.empty(0, device="tpu", dtype=torch.int64))
    with pytest.raises(RuntimeError, match="dtype"):
        torch.sum(t, 1, dtype=torch.float64, out=torch.empty(0, device="tpu"))
    v, i = torch.empty(0, device="tpu"), torch.empty(0, device="tpu", dtype=torch.int64)
    torch.max(t, 1, out=(v, i))
    assert_close((v, i), tuple(x.max(1)))
    v, i = torch.empty(0, device="tpu"), torch.empty(0, device="tpu", dtype=torch.int64)
    torch.min(t, 0, keepdim=True, out=(v, i))
    assert_close((v, i), tuple(x.min(0, keepdim=True)))
    with pytest.raises(RuntimeError, match="dtype"):
        torch.max(t, 1, out=(v, torch.empty(0, device="tpu", dtype=torch.int32)))
    out = torch.empty(0, device="tpu", dtype=torch.int64)
    torch.argmax(t, 1, out=out)
    assert_close(out, x.argmax(1))
    out = torch.empty(0, device="tpu")
    torch.cumsum(t, 1, out=out)
    assert_close(out, x.cumsum(1))
    out = torch.empty(0, device="tpu")
    torch.var(t, 1, out=out)
    assert_close(out, torch.var(x, 1))
    out = torch.empty(0, device="tpu")
    torch.std(t, 0, correction=0, out=out)
    assert_close(out, torch.std(x, 0, correction=0))
    out = torch.empty(0, device="tpu")
    torch.linalg.vector_norm(t, 1.5, 1, out=out)
    assert_close(out, torch.linalg.vector_norm(x, 1.5, 1))
    out = torch.empty(0, device="tpu")
    torch.logsumexp(t, 1, out=out)
    assert_close(out, torch.logsumexp(x, 1))
    out = torch.empty(0, device="tpu", dtype=torch.bool)
    torch.any(t > 0.5, 1, out=out)
    assert_close(out, torch.any(x > 0.5, 1))
    with pytest.raises(RuntimeError, match="bool"):
        torch.all(t, 1, out=torch.empty(0, device="tpu"))
    mn, mx = torch.empty(0, device="tpu"), torch.empty(0, device="tpu")
    torch.aminmax(t, dim=0, out=(mn, mx))
    assert_close((mn, mx), tuple(torch.aminmax(x, dim=0)))
    # writing into a strided view of a bigger tensor
    big = torch.zeros(5, 3, device="tpu")
    torch.sum(t.t(), 1, out=big[:, 1])
    want = torch.zeros(5, 3)
    want[:, 1] = x.t().sum(1)
    assert_close(big, want)


def test_cumsum_cumprod(mode):
    for n in (1, 2, 7, 37, 64):
        x = sample((3, n))
        assert_close(tpu(x).cumsum(1), x.cumsum(1), rtol=1e-4, atol=1e-4)
        assert_close(tpu(x).cumsum(0), x.cumsum(0), rtol=1e-4, atol=1e-4)
    x = sample((4, 6)) * 0.5 + 1
    assert_close(tpu(x).cumprod(-1), x.cumprod(-1), rtol=1e-5, atol=1e-5)
    i = sample((3, 9), torch.int64)
    assert_close(tpu(i).cumsum(1), i.cumsum(1))
    assert_close(tpu(i).cumprod(1), i.cumprod(1))
    i32 = sample((3, 9), torch.int32)
    assert_close(tpu(i32).cumsum(1), i32.cumsum(1))  # promotes to int64
    assert_close(tpu(i32).cumsum(1, dtype=torch.float32), i32.cumsum(1, dtype=torch.float32))
    b = sample((3, 9), torch.bool)
    assert_close(tpu(b).cumsum(0), b.cumsum(0))
    y = tpu(x)
    y.cumsum_(0)
    assert_close(y, x.cumsum(0), rtol=1e-5, atol=1e-5)
    y = tpu(x)
    y.cumprod_(1)
    assert_close(y, x.cumprod(1), rtol=1e-5, atol=1e-5)
    yi = tpu(i32)
    yi.cumsum_(1)
    assert_close(yi, i32.clone().cumsum_(1))
    with pytest.raises(RuntimeError, match="in-place"):
        tpu(i32).cumsum_(1, dtype=torch.int64)
    special = torch.tensor([1.0, float("nan"), 2.0, float("inf"), 0.0])
    assert_close(tpu(special).cumsum(0), special.cumsum(0), equal_nan=True)
    assert_close(tpu(special).cumprod(0), special.cumprod(0), equal_nan=True)


# ---- max / min / argmax / any / all ------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_max_min(dtype, mode):
    x = sample((4, 6, 3), dtype)
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            for fn in (torch.max, torch.min):
                got, want = fn(tpu(x), dim, keepdim), fn(x, dim, keepdim)
                assert_close(got.values, want.values)
                assert_close(got.indices, want.indices)
            assert_close(torch.argmax(tpu(x), dim, keepdim), torch.argmax(x, dim, keepdim))
            assert_close(torch.argmin(tpu(x), dim, keepdim), torch.argmin(x, dim, keepdim))
    assert_close(tpu(x).max(), x.max())
    assert_close(tpu(x).min(), x.min())
    assert_close(tpu(x).argmax(), x.argmax())
    assert_close(tpu(x).argmin(keepdim=True), x.argmin(keepdim=True))
    assert_close(tpu(x).amax((0, 2)), x.amax((0, 2)))
    assert_close(tpu(x).amin((-1,), keepdim=True), x.amin((-1,), keepdim=True))
    assert_close(torch.aminmax(tpu(x)), tuple(torch.aminmax(x)))


def test_max_ties_nan_bool(mode):
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [0.0, float("nan"), 7.0, float("nan")],
                      [float("-inf"), float("-inf"), float("-inf"), float("-inf")]])
    for fn in (torch.max, torch.min):
        got, want = fn(tpu(x), 1), fn(x, 1)
        assert_close(got.values, want.values, equal_nan=True)
        assert_close(got.indices, want.indices)
    assert_close(tpu(x).argmax(1), x.argmax(1))
    assert_close(tpu(x).argmin(1), x.argmin(1))
    assert_close(tpu(x).argmax(), x.argmax())
    assert_close(tpu(x).amax(1), x.amax(1), equal_nan=True)
    assert_close(tpu(x).amin(0), x.amin(0), equal_nan=True)
    assert_close(tpu(x).max(), x.max(), equal_nan=True)
    i = torch.tensor([[3, 1, 3], [-2, -2, -5]])
    assert_close(tpu(i).max(1).indices, i.max(1).indices)
    assert_close(tpu(i).min(1).indices, i.min(1).indices)
    b = sample((3, 5), torch.bool)
    assert_close(tpu(b).max(1).values, b.max(1).values)
    assert_close(tpu(b).max(1).indices, b.max(1).indices)
    assert_close(tpu(b).amax(0), b.amax(0))
    assert_close(tpu(b).min(), b.min())


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.uint8, torch.int64])
def test_any_all(dtype, mode):
    x = sample((3, 4, 5), dtype) if dtype != torch.uint8 else torch.randint(0, 2, (3, 4, 5), dtype=torch.uint8)
    if dtype == torch.float32:
        x[0] = 0
        x[1, 1, 1] = float("nan")
    for fn in (torch.any, torch.all):
        assert_close(fn(tpu(x)), fn(x))
        assert_close(fn(tpu(x), 1), fn(x, 1))
        assert_close(fn(tpu(x), -1, keepdim=True), fn(x, -1, keepdim=True))
        assert_close(fn(tpu(x), (0, 2)), fn(x, (0, 2)))
        assert_close(fn(tpu(x), ()), fn(x, ()))
        assert_close(fn(tpu(x).transpose(0, 2), 0), fn(x.transpose(0, 2), 0))


def test_count_nonzero(mode):
    x = sample((4, 5))
    x[x.abs() < 0.5] = 0
    assert_close(torch.count_nonzero(tpu(x)), torch.count_nonzero(x))
    assert_close(torch.count_nonzero(tpu(x), 1), torch.count_nonzero(x, 1))
    assert_close(torch.count_nonzero(tpu(x), (0, 1)), torch.count_nonzero(x, (0, 1)))


# ---- var / std / norms / logsumexp --------------------------------------------------------

def test_var_std(mode):
    x = sample((4, 5, 6)) * 3 + 1
    for dim in (None, 0, -1, (0, 2)):
        for correction in (0, 1, 2, 0.5):
            for keepdim in (False, True):
                kw = dict(dim=dim, correction=correction, keepdim=keepdim)
                assert_close(torch.var(tpu(x), **kw), torch.var(x, **kw), rtol=1e-5, atol=1e-5)
    assert_close(torch.std(tpu(x), 1), torch.std(x, 1), rtol=1e-5, atol=1e-5)
    assert_close(torch.std(tpu(x), (0, 1), keepdim=True), torch.std(x, (0, 1), keepdim=True), rtol=1e-5, atol=1e-5)
    assert_close(tpu(x).var(unbiased=False), x.var(unbiased=False), rtol=1e-5, atol=1e-5)
    assert_close(torch.var_mean(tpu(x), 1), torch.var_mean(x, 1), rtol=1e-5, atol=1e-5)
    assert_close(torch.std_mean(tpu(x), (0, 2), correction=0), torch.std_mean(x, (0, 2), correction=0),
                 rtol=1e-5, atol=1e-5)
    h = x.to(torch.bfloat16)
    assert_close(torch.var(tpu(h), 1), torch.var(h, 1), rtol=2e-2, atol=2e-2)
    y = sample((2, 3))
    with pytest.warns(UserWarning, match="degrees of freedom"), nonfinite_ok():  # x/0 as on CPU
        got = torch.var(tpu(y), 0, correction=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_close(got, torch.var(y, 0, correction=5), equal_nan=True)


ORDS = [2, 1, float("inf"), float("-inf"), 0, 3, 0.5, -1]


def test_vector_norm(mode):
    x = sample((4, 5, 3))
    x[0, 0, 0] = 0
    for ord in ORDS:
        assert_close(torch.linalg.vector_norm(tpu(x), ord), torch.linalg.vector_norm(x, ord), rtol=1e-5, atol=1e-5)
        assert_close(torch.linalg.vector_norm(tpu(x), ord, (0, 2), keepdim=True),
                     torch.linalg.vector_norm(x, ord, (0, 2), keepdim=True), rtol=1e-5, atol=1e-5)
    assert_close(torch.linalg.vector_norm(tpu(x), 2, -1, dtype=torch.float64),
                 torch.linalg.vector_norm(x, 2, -1, dtype=torch.float64))
    h = x.to(torch.bfloat16)
    assert_close(torch.linalg.vector_norm(tpu(h), 2, 1), torch.linalg.vector_norm(h, 2, 1), rtol=1e-2, atol=1e-2)
    assert_close(torch.linalg.vector_norm(tpu(h), 2, 1, dtype=torch.float32),
                 torch.linalg.vector_norm(h, 2, 1, dtype=torch.float32), rtol=1e-5, atol=1e-5)
    # torch.norm and Tensor.norm
    assert_close(torch.norm(tpu(x)), torch.norm(x))
    assert_close(tpu(x).norm(1, 1), x.norm(1, 1))
    assert_close(tpu(x).norm(3, (0, 1), keepdim=True), x.norm(3, (0, 1), keepdim=True), rtol=1e-5, atol=1e-5)
    assert_close(torch.norm(tpu(x), float("inf"), dim=2), torch.norm(x, float("inf"), dim=2))
    special = torch.tensor([3.0, float("nan"), -4.0])
    for ord in (2, 1, float("inf"), 0):
        assert_close(torch.linalg.vector_norm(tpu(special), ord), torch.linalg.vector_norm(special, ord),
                     equal_nan=True)


def test_vector_norm_p_is_not_compiled_in(mode):
    x = tpu(sample((4, 5)))
    torch.linalg.vector_norm(x, 3.0)
    torch.tpu.reset_executor_stats()
    for p in (1.5, 2.5, 3.5, 4.0):
        torch.linalg.vector_norm(x, p)
    assert torch.tpu.executor_stats()["cache_misses"] == 0


def test_logsumexp(mode):
    x = sample((3, 6)) * 10
    x[1] = float("-inf")
    x[2, 0] = float("inf")
    assert_close(torch.logsumexp(tpu(x), 1), torch.logsumexp(x, 1), equal_nan=True)
    assert_close(torch.logsumexp(tpu(x), (0, 1), keepdim=True), torch.logsumexp(x, (0, 1), keepdim=True))
    big = sample((4, 7)) * 1000
    assert_close(torch.logsumexp(tpu(big), 0), torch.logsumexp(big, 0))
    i = torch.arange(6).reshape(2, 3)
    assert_close(torch.logsumexp(tpu(i), 1), torch.logsumexp(i, 1))


# ---- gradients ----------------------------------------------------------------------------

def check_grad(fn, x, rtol=1e-4, atol=1e-5):
    a = x.clone().requires_grad_()
    b = x.clone().to("tpu").requires_grad_()
    ya, yb = fn(a), fn(b)
    g = sample(ya.shape, seed=1)
    ya.backward(g)
    yb.backward(g.to("tpu"))
    assert_close(yb.detach(), ya.detach(), rtol=rtol, atol=atol, equal_nan=True)
    assert_close(b.grad, a.grad, rtol=rtol, atol=atol, equal_nan=True)


GRADS = {
    "sum": lambda t: t.sum((0, 2)),
    "sum_all": lambda t: t.sum(),
    "mean": lambda t: t.mean(1, keepdim=True),
    "prod": lambda t: t.prod(1),
    "amax": lambda t: t.amax(-1),
    "amin_ties": lambda t: t.round().amin((0, 1)),
    "var": lambda t: t.var(1),
    "var_mean": lambda t: torch.var_mean(t, (0, 2))[0] * 2 + torch.var_mean(t, (0, 2))[1],
    "norm2": lambda t: torch.linalg.vector_norm(t, 2, 1),
    "norm3": lambda t: torch.linalg.vector_norm(t, 3, (0, 1)),
    "norm_inf": lambda t: torch.linalg.vector_norm(t, float("inf"), -1),
    "logsumexp": lambda t: t.logsumexp(1),
    "cumsum": lambda t: t.cumsum(1),
    "cumprod": lambda t: t.cumprod(-1),
    "softmax": lambda t: t.softmax(1),
    "log_softmax": lambda t: t.log_softmax(-1),
    # these reach ops of other families in their autograd formulas
    "max_dim": lambda t: t.max(1).values,
    "min_dim": lambda t: t.min(0, keepdim=True).values,
    "max_all": lambda t: t.max(),
    "std": lambda t: t.std(1),
    "norm1": lambda t: torch.linalg.vector_norm(t, 1, 1),
    "prod_all": lambda t: t.prod(),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_gradients(name, mode):
    x = sample((3, 4, 5)) + 0.1
    check_grad(GRADS[name], x)


def test_gradient_noncontiguous(mode):
    x = sample((5, 4, 3))
    check_grad(lambda t: t.transpose(0, 2)[:, ::2].sum(1), x)
    check_grad(lambda t: t.permute(2, 0, 1).amax(0), x)
    check_grad(lambda t: t.transpose(0, 1).var(0, correction=0), x)


def test_clip_grad_norm(mode):
    ps = [torch.nn.Parameter(sample((3, 4), seed=s)) for s in range(3)]
    qs = [torch.nn.Parameter(p.detach().to("tpu")) for p in ps]
    for p, q in zip(ps, qs):
        p.grad = sample(p.shape, seed=7) * 5
        q.grad = p.grad.to("tpu")
    want = torch.nn.utils.clip_grad_norm_(ps, 1.0)
    got = torch.nn.utils.clip_grad_norm_(qs, 1.0)
    assert_close(got, want)
    for p, q in zip(ps, qs):
        assert_close(q.grad, p.grad)


# argmax / argmin and max.dim / min.dim lower to the extremum, then the first index holding it (Reduce.cpp
# argReduce): ties, NaN (the first NaN wins, as on CPU), signed zeros and infinities, against CPU exactly.
ARG_CASES = {
    "ties": torch.tensor([[2.0, 2.0, 1.0, 0.0], [1.0, 3.0, 3.0, 3.0], [-1.0, -1.0, -1.0, -1.0]]),
    "nan": torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [float("nan"), 0.0, 5.0, 1.0],
                         [4.0, 2.0, 1.0, 0.0]]),
    "zeros_inf": torch.tensor([[-0.0, 0.0, -1.0, -0.0], [float("-inf"), float("-inf"), float("-inf"), 1.0],
                               [float("inf"), 1.0, float("inf"), 0.0]]),
    "int": torch.tensor([[3, 1, 3, 0], [-2, -2, -5, -2], [7, 8, 8, 1]]),
    "half": torch.tensor([[0.5, 0.25, 0.5, 0.75]], dtype=torch.float16),
}


@pytest.mark.parametrize("case", sorted(ARG_CASES))
def test_arg_extremum_ties_nan_and_zeros(mode, case):
    x = ARG_CASES[case]
    for fn in (torch.argmax, torch.argmin):
        for dim in (None, 0, 1, -1):
            assert torch.equal(fn(x.to("tpu"), dim).cpu(), fn(x, dim)), (fn.__name__, dim)
    for fn in (torch.max, torch.min):
        got, want = fn(x.to("tpu"), 1), fn(x, 1)
        assert torch.equal(got.indices.cpu(), want.indices), fn.__name__
        torch.testing.assert_close(got.values.cpu(), want.values, rtol=0, atol=0, equal_nan=True)
