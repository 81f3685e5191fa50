"""Unary and binary pointwise ops against CPU: dtypes, promotion, broadcasting, views, variants."""
import math

import pytest
import torch

from conftest import assert_close

FLOAT_UNARY = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
               "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid",
               "erf", "erfc"]
SAME_UNARY = ["abs", "neg", "floor", "ceil", "round", "trunc", "frac", "sign", "relu"]
DOMAIN = {"log": (0.1, 5), "log2": (0.1, 5), "log10": (0.1, 5), "log1p": (-0.5, 5), "sqrt": (0.1, 5),
          "rsqrt": (0.1, 5), "reciprocal": (0.5, 5), "asin": (-0.9, 0.9), "acos": (-0.9, 0.9),
          "acosh": (1.1, 5), "atanh": (-0.9, 0.9), "tan": (-1.2, 1.2)}


def sample(name, shape=(4, 6), dtype=torch.float32):
    lo, hi = DOMAIN.get(name, (-3, 3))
    g = torch.Generator().manual_seed(0)
    return (torch.rand(shape, generator=g) * (hi - lo) + lo).to(dtype)


@pytest.mark.parametrize("name", FLOAT_UNARY + SAME_UNARY)
def test_unary_float32(name, mode):
    x = sample(name)
    fn = getattr(torch, name)
    assert_close(fn(x.to("tpu")), fn(x), rtol=2e-5, atol=2e-6)
    # non-contiguous input, in-place and out= variants
    assert_close(fn(x.to("tpu").t()), fn(x.t()), rtol=2e-5, atol=2e-6)
    y = x.clone().to("tpu")
    getattr(y, name + "_")()
    assert_close(y, fn(x), rtol=2e-5, atol=2e-6)
    if name != "relu":  # relu has no out= overload
        out = torch.empty(0, device="tpu")
        fn(x.to("tpu"), out=out)
        assert_close(out, fn(x), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh", "erf", "sqrt", "abs", "neg"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_unary_half(name, dtype, mode):
    x = sample(name, dtype=dtype)
    fn = getattr(torch, name)
    assert_close(fn(x.to("tpu")), fn(x), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name", ["exp", "sqrt", "sin", "sigmoid"])
def test_unary_int_promotes_to_float(name, mode):
    x = torch.arange(1, 7)
    fn = getattr(torch, name)
    got = fn(x.to("tpu"))
    assert got.dtype == torch.float32
    assert_close(got, fn(x))
    with pytest.raises(RuntimeError, match="can't be cast"):
        getattr(x.to("tpu"), name + "_")()


@pytest.mark.parametrize("name", ["abs", "neg", "sign", "floor", "relu"])
def test_unary_int_keeps_dtype(name, mode):
    x = torch.arange(-4, 5, dtype=torch.int64)
    assert_close(getattr(torch, name)(x.to("tpu")), getattr(torch, name)(x))


def test_unary_special_values(mode):
    x = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 2.5, -2.5, 0.5, 1.5])
    t = x.to("tpu")
    for fn in (torch.round, torch.trunc, torch.floor, torch.ceil, torch.sign, torch.exp, torch.isnan, torch.isinf,
               torch.isfinite, torch.isposinf, torch.isneginf, torch.signbit, torch.relu, torch.abs):
        assert_close(fn(t), fn(x), equal_nan=True)


BINARY = ["add", "sub", "mul", "div", "remainder", "fmod", "maximum", "minimum", "atan2", "pow", "hypot",
          "copysign", "xlogy"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_float32_broadcast(name, mode):
    a = sample("x", (3, 1, 5))
    b = sample("y", (4, 1)) + (3.5 if name in ("pow",) else 0)
    if name in ("pow", "xlogy"):
        a, b = a.abs() + 0.1, b.abs() + 0.1
    fn = getattr(torch, name)
    assert_close(fn(a.to("tpu"), b.to("tpu")), fn(a, b), rtol=2e-5, atol=2e-6)
    out = torch.empty(0, device="tpu")
    fn(a.to("tpu"), b.to("tpu"), out=out)
    assert_close(out, fn(a, b), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "floor_div", "remainder", "max"])
def test_binary_int64(op, mode):
    a = torch.tensor([[-7, -3, 0, 5, 9]])
    b = torch.tensor([[2], [-3], [4]])
    fns = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "max": torch.maximum,
           "floor_div": lambda x, y: torch.div(x, y, rounding_mode="floor"), "remainder": torch.remainder}
    assert_close(fns[op](a.to("tpu"), b.to("tpu")), fns[op](a, b))


def test_div_rounding_modes(mode):
    a = torch.tensor([-7.5, -3.0, 0.0, 5.25, 9.0])
    b = torch.tensor([2.0, -3.0, 4.0, -0.5, 2.5])
    for rm in (None, "trunc", "floor"):
        assert_close(torch.div(a.to("tpu"), b.to("tpu"), rounding_mode=rm), torch.div(a, b, rounding_mode=rm))
    ia, ib = torch.tensor([-7, 7, -8, 9]), torch.tensor([2, -2, 3, 4])
    for rm in (None, "trunc", "floor"):
        assert_close(torch.div(ia.to("tpu"), ib.to("tpu"), rounding_mode=rm), torch.div(ia, ib, rounding_mode=rm))
    with pytest.raises(RuntimeError, match="rounding_mode"):
        torch.div(a.to("tpu"), b.to("tpu"), rounding_mode="bad")


def test_alpha_and_python_scalars(mode):
    a, b = sample("a"), sample("b")
    ta, tb = a.to("tpu"), b.to("tpu")
    assert_close(torch.add(ta, tb, alpha=0.25), torch.add(a, b, alpha=0.25))
    assert_close(torch.sub(ta, tb, alpha=3), torch.sub(a, b, alpha=3))
    assert_close(ta * 0.5 + 2, a * 0.5 + 2)
    assert_close(2 - ta, 2 - a)
    assert_close(ta / 3, a / 3)
    assert_close(ta ** 2, a ** 2)
    assert_close(2 ** ta, 2 ** a)


def test_scalars_do_not_recompile(mode):
    x = torch.randn(8, device="tpu")
    x * 0.1
    torch.tpu.synchronize()
    before = torch.tpu.executor_stats()["cache_misses"]
    for step in range(5):
        x * (0.2 + step)
    assert torch.tpu.executor_stats()["cache_misses"] == before


@pytest.mark.parametrize("lhs,rhs", [(torch.int32, torch.float16), (torch.int64, torch.float32),
                                     (torch.bool, torch.int8), (torch.uint8, torch.int8),
                                     (torch.bfloat16, torch.float16), (torch.float32, torch.float64)])
def test_type_promotion(lhs, rhs, mode):
    a = torch.arange(6).reshape(2, 3).to(lhs)
    b = (torch.arange(3) + 1).to(rhs)
    got = a.to("tpu") + b.to("tpu")
    want = a + b
    assert got.dtype == want.dtype
    assert_close(got, want)
    # scalar promotion: an int tensor with a float scalar becomes float, a float16 tensor stays float16
    assert (a.to("tpu") * 1.5).dtype == (a * 1.5).dtype
    assert (a.to("tpu") + torch.tensor(2.5)).dtype == (a + torch.tensor(2.5)).dtype


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(name, mode):
    a = torch.tensor([[1.0, 2.0, float("nan")], [4.0, -1.0, 0.0]])
    b = torch.tensor([1.0, 3.0, float("nan")])
    fn = getattr(torch, name)
    assert_close(fn(a.to("tpu"), b.to("tpu")), fn(a, b))
    assert_close(fn(a.to("tpu"), 1.0), fn(a, 1.0))
    ia = torch.tensor([3, -2, 7])
    assert_close(fn(ia.to("tpu"), 3), fn(ia, 3))
    x = a.clone().to("tpu")
    getattr(x, name + "_")(b.to("tpu"))
    assert_close(x, getattr(a.clone(), name + "_")(b))


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                                  "bitwise_xor"])
def test_logical_and_bitwise(name, mode):
    a = torch.tensor([0, 1, 2, -3, 12])
    b = torch.tensor([1, 0, 3, -3, 10])
    fn = getattr(torch, name)
    assert_close(fn(a.to("tpu"), b.to("tpu")), fn(a, b))
    assert_close(fn(a.to("tpu") > 0, b.to("tpu") > 0), fn(a > 0, b > 0))
    assert_close(torch.bitwise_not(a.to("tpu")), torch.bitwise_not(a))
    assert_close(torch.logical_not(a.to("tpu")), torch.logical_not(a))
    assert_close(a.to("tpu") << 2, a << 2)
    assert_close(a.to("tpu") >> 1, a >> 1)


def test_bitwise_on_float_raises(mode):
    with pytest.raises(RuntimeError, match="integer"):
        torch.bitwise_and(torch.ones(2, device="tpu"), torch.ones(2, device="tpu"))


def test_bool_sub_raises(mode):
    t = torch.tensor([True, False], device="tpu")
    with pytest.raises(RuntimeError, match="Subtraction"):
        t - t


def test_inplace_shape_mismatch_raises(mode):
    x = torch.zeros(3, device="tpu")
    with pytest.raises(RuntimeError):
        x.add_(torch.zeros(2, 3, device="tpu"))


def test_mixed_device_raises(mode):
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)


def test_zero_size_and_0dim(mode):
    e = torch.empty(0, 4)
    assert_close(e.to("tpu") * 2 + 1, e * 2 + 1)
    s = torch.tensor(3.0)
    assert_close(s.to("tpu").exp(), s.exp())
    assert_close(torch.ones(2, 3).to("tpu") + s.to("tpu"), torch.ones(2, 3) + s)


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "sin", "log", "sqrt", "erf", "abs"])
def test_unary_gradients(name, mode):
    x = sample("log" if name in ("log", "sqrt") else name, (5,))
    xc = x.clone().requires_grad_()
    xt = x.to("tpu").requires_grad_()
    (getattr(torch, name)(xc) * 3).backward(torch.ones(5))
    (getattr(torch, name)(xt) * 3).backward(torch.ones(5, device="tpu"))
    assert_close(xt.grad, xc.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "atan2"])
def test_binary_gradients(name, mode):
    a, b = sample("a", (3, 4)).abs() + 0.5, sample("b", (4,)).abs() + 0.5
    ac, bc = a.clone().requires_grad_(), b.clone().requires_grad_()
    at, bt = a.to("tpu").requires_grad_(), b.to("tpu").requires_grad_()
    fn = getattr(torch, name)
    g = torch.linspace(-1, 1, 12).reshape(3, 4)
    fn(ac, bc).backward(g)
    fn(at, bt).backward(g.to("tpu"))
    assert_close(at.grad, ac.grad, rtol=1e-5, atol=1e-6)
    assert_close(bt.grad, bc.grad, rtol=1e-5, atol=1e-6)
