"""Random numbers on tpu: distributions (shapes, dtypes, ranges, statistics),
seeding and generator state, dropout and randperm. Statistics are computed on CPU
from ~1e5 samples with tolerances many standard errors wide."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_close

N = 100_000
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def cpu(t):
    return t.cpu()


close = torch.testing.assert_close  # for statistics computed on CPU


# ---- uniform / normal ------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_rand_range_and_stats(mode, dtype):
    x = torch.rand(N, device="tpu", dtype=dtype)
    assert x.device.type == "tpu" and x.dtype == dtype and x.shape == (N,)
    c = cpu(x).double()
    assert c.min() >= 0 and c.max() < 1
    assert abs(c.mean() - 0.5) < 0.01
    assert abs(c.std() - math.sqrt(1 / 12)) < 0.01


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_bounds_never_reach_to(mode, dtype):
    # Rounding to a narrow dtype would often give `to`: such values become `from`.
    for lo, hi in [(-2.0, 3.0), (0.0, 0.3), (10.0, 10.0625)]:
        c = cpu(torch.empty(N, device="tpu", dtype=dtype).uniform_(lo, hi)).double()
        assert c.min() >= torch.tensor(lo, dtype=dtype).double()
        assert c.max() < hi
        if dtype == torch.float32:
            assert abs(c.mean() - (lo + hi) / 2) < 0.01 * (hi - lo)
    c = cpu(torch.empty(100, device="tpu", dtype=dtype).uniform_(1.5, 1.5))
    assert (c == 1.5).all()


@pytest.mark.parametrize("dtype", FLOATS)
def test_randn_stats(mode, dtype):
    x = torch.randn(N, device="tpu", dtype=dtype)
    assert x.dtype == dtype
    c = cpu(x).double()
    assert torch.isfinite(c).all()
    assert abs(c.mean()) < 0.02
    assert abs(c.std() - 1) < 0.02
    # Tails: about 4.55% beyond 2 sigma.
    assert abs((c.abs() > 2).double().mean() - 0.0455) < 0.005
    y = cpu(torch.empty(N, device="tpu", dtype=dtype).normal_(3.0, 0.5)).double()
    assert abs(y.mean() - 3) < 0.02 and abs(y.std() - 0.5) < 0.02


def test_shapes_like_and_odd_sizes(mode):
    for shape in [(3, 5), (7,), (2, 3, 1), (), (0, 4)]:
        for fn in [torch.rand, torch.randn]:
            t = fn(*shape, device="tpu") if shape else fn((), device="tpu")
            assert t.shape == shape and t.device.type == "tpu"
    base = torch.zeros(4, 6, device="tpu", dtype=torch.bfloat16)
    for fn in [torch.rand_like, torch.randn_like]:
        t = fn(base)
        assert t.shape == base.shape and t.dtype == base.dtype and t.device.type == "tpu"
    r = torch.randint_like(base, 3, 9)
    assert r.dtype == torch.bfloat16 and ((cpu(r) >= 3) & (cpu(r) < 9)).all()
    r = torch.randint_like(base, 5)
    assert ((cpu(r) >= 0) & (cpu(r) < 5)).all()
    # Odd element counts (Box-Muller pairs, Philox blocks of four) stay independent.
    torch.tpu.manual_seed(0)
    a = cpu(torch.randn(3, device="tpu"))
    b = cpu(torch.randn(5, device="tpu"))
    assert len(set(torch.cat([a, b]).tolist())) == 8


def test_inplace_on_views_only_touches_the_view(mode):
    # Needs the Executor's parameter order fix (main fecb219): an op with host operands that
    # writes part of a storage. Before it, fill_ on a view failed the same way.
    base = torch.full((4, 6), 7.0, device="tpu")
    base.t()[::2].uniform_(-1, 0)  # columns 0, 2, 4
    c = cpu(base)
    assert (c[:, 1::2] == 7).all()
    assert ((c[:, ::2] >= -1) & (c[:, ::2] < 0)).all()
    base[1].normal_()
    c2 = cpu(base)
    assert torch.equal(c2[0], c[0]) and torch.equal(c2[2:], c[2:])
    assert not torch.equal(c2[1], c[1])


def test_uniform_normal_errors(mode):
    t = torch.empty(3, device="tpu")
    with pytest.raises(RuntimeError, match=r"\[from, to\) range"):
        t.uniform_(1, 0)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        t.normal_(0, -1)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.empty(3, device="tpu", dtype=torch.float16).uniform_(0, 1e6)
    with pytest.raises(NotImplementedError):
        torch.empty(3, device="tpu", dtype=torch.int64).uniform_()
    with pytest.raises(NotImplementedError):
        torch.empty(3, device="tpu", dtype=torch.int64).normal_()


# ---- normal with tensor arguments --------------------------------------------------

def test_normal_tensor_overloads(mode):
    mean = torch.linspace(-5, 5, 11).repeat(N // 100, 1)  # (1000, 11)
    std = torch.linspace(0.5, 2, 11)
    tm, ts = mean.to("tpu"), std.to("tpu")

    r = torch.normal(tm, 2.0)  # Tensor_float
    assert r.shape == mean.shape and r.device.type == "tpu"
    c = cpu(r)
    assert (c.mean(0) - mean[0]).abs().max() < 0.3 and abs(c.sub(mean).std() - 2) < 0.05

    r = torch.normal(1.0, ts.expand(1000, 11))  # float_Tensor
    c = cpu(r)
    assert (c.mean(0) - 1).abs().max() < 0.3
    assert (c.std(0) / std - 1).abs().max() < 0.1

    r = torch.normal(tm, ts)  # Tensor_Tensor with broadcasting
    assert r.shape == (1000, 11)
    c = cpu(r)
    assert ((c - mean).std(0) / std - 1).abs().max() < 0.1

    r = torch.normal(2.0, 3.0, size=(N,), device="tpu")  # float_float
    c = cpu(r)
    assert abs(c.mean() - 2) < 0.05 and abs(c.std() - 3) < 0.05

    # out= variants.
    out = torch.empty(0, device="tpu")
    torch.normal(tm, ts, out=out)
    assert out.shape == (1000, 11)
    out = torch.empty(0, device="tpu")
    torch.normal(1.0, ts, out=out)
    assert out.shape == (11,)
    out = torch.empty(1000, 11, device="tpu")
    torch.normal(tm, 0.5, out=out)
    assert abs(cpu(out).sub(mean).std() - 0.5) < 0.02
    out = torch.empty(5, device="tpu", dtype=torch.float64)
    torch.normal(0.0, 1.0, size=(5,), out=out)
    assert out.dtype == torch.float64

    # dtypes follow mean (or std), and a zero std gives the mean exactly.
    r = torch.normal(torch.zeros(4, dtype=torch.float64, device="tpu"), torch.zeros(4, device="tpu"))
    assert r.dtype == torch.float64
    assert_close(r, torch.zeros(4, dtype=torch.float64))
    r = torch.normal(torch.zeros(3, dtype=torch.bfloat16, device="tpu"), 1.0)
    assert r.dtype == torch.bfloat16


def test_normal_tensor_errors(mode):
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        torch.normal(torch.zeros(3, device="tpu"), torch.tensor([1.0, -1.0, 1.0], device="tpu"))
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        torch.normal(0.0, torch.tensor([float("nan")], device="tpu"))
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.normal(torch.zeros(3, device="tpu"), -1.0)
    with pytest.raises(NotImplementedError):
        torch.normal(torch.zeros(3, dtype=torch.int64, device="tpu"), 1.0)
    with pytest.raises(RuntimeError):
        torch.normal(torch.zeros(3, device="tpu"), torch.ones(4, device="tpu"))


# ---- seeding and generator state ----------------------------------------------------

def test_tpu_manual_seed_reproducible(mode):
    torch.tpu.manual_seed(0)
    a = [cpu(torch.rand(7, device="tpu")), cpu(torch.randn(3, 4, device="tpu")),
         cpu(torch.randint(0, 100, (9,), device="tpu"))]
    torch.tpu.manual_seed(0)
    b = [cpu(torch.rand(7, device="tpu")), cpu(torch.randn(3, 4, device="tpu")),
         cpu(torch.randint(0, 100, (9,), device="tpu"))]
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    # Successive calls and other seeds differ.
    assert not torch.equal(cpu(torch.rand(7, device="tpu")), a[0])
    torch.tpu.manual_seed(1)
    assert not torch.equal(cpu(torch.rand(7, device="tpu")), a[0])


def test_torch_manual_seed_seeds_tpu(mode):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Set seed for `tpu` device does not take effect"
        torch.manual_seed(1234)
    assert torch.tpu.initial_seed() == 1234
    a = cpu(torch.randn(10, device="tpu"))
    torch.manual_seed(1234)
    b = cpu(torch.randn(10, device="tpu"))
    assert torch.equal(a, b)
    torch.tpu.manual_seed_all(1234)
    assert torch.equal(cpu(torch.randn(10, device="tpu")), a)


def test_rng_state_round_trip(mode):
    torch.tpu.manual_seed(7)
    torch.rand(5, device="tpu")
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    a = cpu(torch.rand(6, device="tpu"))
    b = cpu(torch.randn(6, device="tpu"))
    torch.tpu.set_rng_state(state)
    assert torch.equal(cpu(torch.rand(6, device="tpu")), a)
    assert torch.equal(cpu(torch.randn(6, device="tpu")), b)
    assert not torch.equal(torch.tpu.get_rng_state(), state)  # the offset advanced


def test_explicit_generator(mode):
    g = torch.Generator(device="tpu")
    g.manual_seed(99)
    a = cpu(torch.rand(8, device="tpu", generator=g))
    torch.tpu.manual_seed(0)  # the default generator does not affect g
    b = cpu(torch.rand(8, device="tpu", generator=g))
    g.manual_seed(99)
    assert torch.equal(cpu(torch.rand(8, device="tpu", generator=g)), a)
    assert torch.equal(cpu(torch.rand(8, device="tpu", generator=g)), b)
    g.manual_seed(99)
    c = cpu(torch.empty(8, device="tpu").uniform_(generator=g))
    assert torch.equal(c, a)
    with pytest.raises(RuntimeError):
        torch.rand(3, device="tpu", generator=torch.Generator())  # a CPU generator


def test_new_seed_does_not_recompile(mode):
    x = torch.empty(33, device="tpu")

    def step(seed):
        torch.tpu.manual_seed(seed)
        drawn = tuple(cpu(x.uniform_()).tolist())
        x.normal_()
        return drawn

    # Warm-up with the loop's own body: the first call writes never-written memory (its own
    # program), and in fused mode the first graphs hold the ops pending before the loop began
    # (executor_stats counts fused-graph programs too).
    for seed in (100, 101, 102):
        step(seed)
    before = torch.tpu.executor_stats()["cache_misses"]
    seen = {step(seed) for seed in range(5)}
    assert len(seen) == 5
    assert torch.tpu.executor_stats()["cache_misses"] == before


# ---- bernoulli ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_bernoulli_scalar_p(mode, dtype):
    for p in [0.0, 0.3, 1.0]:
        x = torch.empty(N, device="tpu", dtype=dtype).bernoulli_(p)
        c = cpu(x)
        assert c.dtype == dtype
        assert ((c == 0) | (c == 1)).all()
        assert abs(c.double().mean() - p) < 0.01
    r = torch.bernoulli(torch.empty(10, device="tpu", dtype=dtype), 0.5)  # bernoulli.p
    assert r.dtype == dtype and r.device.type == "tpu"


def test_bernoulli_tensor_p(mode):
    p = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0])
    probs = p.repeat(N // 5, 1)
    c = cpu(torch.bernoulli(probs.to("tpu")))  # functional bernoulli
    close(c.mean(0), p, atol=0.015, rtol=0)
    x = torch.empty(N // 5, 5, device="tpu", dtype=torch.int32).bernoulli_(p.to("tpu"))  # broadcast p
    assert x.dtype == torch.int32
    close(cpu(x).double().mean(0), p.double(), atol=0.015, rtol=0)
    x = torch.empty(N // 5, 5, device="tpu").bernoulli_(p.double().to("tpu"))
    close(cpu(x).mean(0), p, atol=0.015, rtol=0)
    out = torch.empty(0, device="tpu")
    torch.bernoulli(probs.to("tpu"), out=out)
    assert out.shape == probs.shape
    close(cpu(out).mean(0), p, atol=0.015, rtol=0)
    assert torch.bernoulli(torch.empty(0, 3, device="tpu")).shape == (0, 3)


def test_bernoulli_errors(mode):
    t = torch.empty(3, device="tpu")
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        t.bernoulli_(1.5)
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        t.bernoulli_(-0.1)
    with pytest.raises(NotImplementedError):
        t.bernoulli_(torch.ones(3, dtype=torch.int64, device="tpu"))
    with pytest.raises(RuntimeError):
        t.bernoulli_(torch.ones(4, device="tpu"))


# ---- random_ / randint ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8, torch.float32,
                                   torch.bfloat16, torch.float64])
def test_randint_range(mode, dtype):
    low, high = (0, 256) if dtype == torch.uint8 else (-7, 13)
    if dtype == torch.int8:
        low, high = -128, 128
    c = cpu(torch.randint(low, high, (N // 4,), device="tpu", dtype=dtype)).double()
    assert c.min() == low and c.max() == high - 1  # every value is reachable
    assert (c == c.round()).all()
    assert abs(c.mean() - (low + high - 1) / 2) < 0.02 * (high - low)
    c = cpu(torch.randint(5, (1000,), device="tpu", dtype=dtype))
    assert set(c.long().tolist()) == {0, 1, 2, 3, 4}


def test_random_defaults(mode):
    c = cpu(torch.empty(N, device="tpu", dtype=torch.uint8).random_())
    assert c.min() == 0 and c.max() == 255
    c = cpu(torch.empty(N, device="tpu", dtype=torch.bool).random_())
    assert 0.45 < c.double().mean() < 0.55
    c = cpu(torch.empty(1000, device="tpu", dtype=torch.int64).random_())
    assert c.min() >= 0 and c.double().mean() > 2**61  # spans [0, 2^63)
    c = cpu(torch.empty(1000, device="tpu", dtype=torch.int32).random_())
    assert c.min() >= 0 and c.double().mean() > 2**29
    c = cpu(torch.empty(1000, device="tpu", dtype=torch.float32).random_())
    assert c.min() >= 0 and c.max() <= 2**24 and (c == c.round()).all() and c.mean() > 2**22
    c = cpu(torch.empty(1000, device="tpu", dtype=torch.bfloat16).random_()).double()
    assert c.min() >= 0 and c.max() <= 256
    # random_(to), random_(from, None) up to the dtype maximum, and the full int64 range.
    c = cpu(torch.empty(N, device="tpu", dtype=torch.int64).random_(3))
    assert set(c.tolist()) == {0, 1, 2}
    c = cpu(torch.empty(N, device="tpu", dtype=torch.uint8).random_(250, None))
    assert c.min() == 250 and c.max() == 255
    c = cpu(torch.empty(1000, device="tpu", dtype=torch.int64).random_(-(2**63), None))
    assert (c < 0).any() and (c > 0).any() and c.abs().double().mean() > 2**60
    c = cpu(torch.empty(1000, device="tpu", dtype=torch.int64).random_(-(2**40), 2**40))
    assert c.min() >= -(2**40) and c.max() < 2**40 and c.abs().double().mean() > 2**37


def test_random_errors(mode):
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to'"):
        torch.empty(3, device="tpu", dtype=torch.int64).random_(5, 5)
    with pytest.raises(RuntimeError, match="from is out of bounds for unsigned char"):
        torch.empty(3, device="tpu", dtype=torch.uint8).random_(-1, 5)
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds"):
        torch.empty(3, device="tpu", dtype=torch.uint8).random_(0, 257)
    with pytest.raises(RuntimeError):
        torch.randint(5, 2, (3,), device="tpu")


# ---- other distributions ------------------------------------------------------------------

def test_exponential_and_friends(mode):
    c = cpu(torch.empty(N, device="tpu").exponential_(2.0)).double()
    assert c.min() >= 0 and torch.isfinite(c).all()
    assert abs(c.mean() - 0.5) < 0.01 and abs(c.std() - 0.5) < 0.02
    c = cpu(torch.empty(N, device="tpu", dtype=torch.float64).log_normal_(0.5, 0.25)).log()
    assert abs(c.mean() - 0.5) < 0.01 and abs(c.std() - 0.25) < 0.01
    c = cpu(torch.empty(N, device="tpu").cauchy_(1.0, 2.0))
    assert abs(c.median() - 1.0) < 0.05
    assert abs(((c - 1).abs() < 2).double().mean() - 0.5) < 0.01  # quartiles at median +- sigma
    c = cpu(torch.empty(N, device="tpu", dtype=torch.int64).geometric_(0.25)).double()
    assert c.min() >= 1 and abs(c.mean() - 4) < 0.1
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0"):
        torch.empty(3, device="tpu").exponential_(0)
    with pytest.raises(RuntimeError, match="dtype must be a floating point"):
        torch.empty(3, device="tpu", dtype=torch.int64).exponential_()
    with pytest.raises(RuntimeError, match="log_normal_ expects std > 0.0"):
        torch.empty(3, device="tpu").log_normal_(0, 0)
    with pytest.raises(RuntimeError, match=r"geometric_ expects p to be in \(0, 1\)"):
        torch.empty(3, device="tpu").geometric_(1.0)


# ---- dropout -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_dropout(mode, dtype):
    x = (torch.rand(200, 500) + 0.5).to(dtype)
    for p in [0.1, 0.5, 0.8]:
        out, mask = torch.native_dropout(x.to("tpu"), p, True)
        assert out.dtype == dtype and mask.dtype == torch.bool
        o, m = cpu(out), cpu(mask)
        assert abs(1 - m.double().mean() - p) < 0.01
        assert (o[~m] == 0).all()
        expected = (x.float() * (1 / (1 - p))).to(dtype)
        assert torch.equal(o[m], expected[m])
    out, mask = torch.native_dropout(x.to("tpu"), 0.0, True)
    assert torch.equal(cpu(out), x) and cpu(mask).all()
    out, mask = torch.native_dropout(x.to("tpu"), 1.0, True)
    assert (cpu(out) == 0).all() and not cpu(mask).any()
    out, mask = torch.native_dropout(x.to("tpu"), 0.5, False)
    assert torch.equal(cpu(out), x) and cpu(mask).all()
    out, mask = torch.native_dropout(torch.empty(0, 3, device="tpu"), 0.5, True)
    assert out.shape == (0, 3)


def test_dropout_autograd_uses_same_mask(mode):
    x = torch.rand(50, 40) + 1.0
    xt = x.to("tpu").requires_grad_()
    y = F.dropout(xt, 0.4, training=True)
    g = torch.rand(50, 40)
    y.backward(g.to("tpu"))
    yc, gc = cpu(y), cpu(xt.grad)
    kept = yc != 0
    assert abs(1 - kept.double().mean() - 0.4) < 0.05
    close(gc, torch.where(kept, g / 0.6, torch.zeros(())), rtol=1e-6, atol=0)
    grad = torch.ops.aten.native_dropout_backward(g.to("tpu"), kept.to("tpu"), 2.5)
    assert_close(grad, g * kept * 2.5)


def test_dropout_module_modes(mode):
    m = torch.nn.Dropout(0.3)
    x = torch.rand(64, 64, device="tpu") + 1
    m.eval()
    assert m(x) is x or torch.equal(cpu(m(x)), cpu(x))
    m.train()
    y = cpu(m(x))
    assert abs((y == 0).double().mean() - 0.3) < 0.05
    torch.tpu.manual_seed(3)
    a = cpu(F.dropout(x, 0.3))
    torch.tpu.manual_seed(3)
    b = cpu(F.dropout(x, 0.3))
    assert torch.equal(a, b)
    assert (cpu(F.dropout(x, 1.0)) == 0).all()
    assert torch.equal(cpu(F.dropout(x, 0.0)), cpu(x))
    with pytest.raises(ValueError):
        F.dropout(x, 1.5)


# ---- randperm --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.float16])
def test_randperm(mode, dtype):
    for n in [0, 1, 7, 1000]:
        r = torch.randperm(n, device="tpu", dtype=dtype)
        assert r.dtype == dtype and r.shape == (n,)
        assert torch.equal(cpu(r).long().sort().values, torch.arange(n))
    torch.tpu.manual_seed(5)
    a = cpu(torch.randperm(50, device="tpu", dtype=dtype))
    torch.tpu.manual_seed(5)
    assert torch.equal(cpu(torch.randperm(50, device="tpu", dtype=dtype)), a)
    assert not torch.equal(cpu(torch.randperm(50, device="tpu", dtype=dtype)), a)


def test_randperm_out_and_errors(mode):
    out = torch.empty(3, device="tpu", dtype=torch.int64)
    torch.randperm(20, out=out)
    assert torch.equal(cpu(out).sort().values, torch.arange(20))
    g = torch.Generator(device="tpu").manual_seed(1)
    a = cpu(torch.randperm(30, device="tpu", generator=g))
    g.manual_seed(1)
    assert torch.equal(cpu(torch.randperm(30, device="tpu", generator=g)), a)
    # Each position takes many values over repeated draws (not a fixed permutation).
    firsts = {int(cpu(torch.randperm(10, device="tpu"))[0]) for _ in range(30)}
    assert len(firsts) >= 5
    with pytest.raises(RuntimeError, match="n cannot be greater than 2049"):
        torch.randperm(3000, device="tpu", dtype=torch.float16)
    with pytest.raises(RuntimeError):
        torch.randperm(-1, device="tpu")
    with pytest.raises(NotImplementedError):
        torch.randperm(4, device="tpu", dtype=torch.bool)
