"""Activations and their backward ops, glu, lerp/addcmul/addcdiv, floor_divide and
optimizer steps built from them: tpu against CPU PyTorch."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_close

# (name, function): each is differentiable and takes a float tensor.
ACTIVATIONS = [
    ("gelu", F.gelu),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
    ("relu", F.relu),
    ("silu", F.silu),
    ("sigmoid", torch.sigmoid),
    ("tanh", torch.tanh),
    ("threshold", lambda x: F.threshold(x, 0.25, -2.0)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2)),
    ("elu", lambda x: F.elu(x, 1.5)),
    ("selu", F.selu),
    ("celu", lambda x: F.celu(x, 0.7)),
    ("softplus", F.softplus),
    ("softplus_beta", lambda x: F.softplus(x, beta=2.0, threshold=3.0)),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 1.5)),
    ("relu6", F.relu6),
    ("hardsigmoid", F.hardsigmoid),
    ("hardswish", F.hardswish),
    ("mish", F.mish),
    ("logsigmoid", F.logsigmoid),
    ("glu", lambda x: F.glu(x, -1)),
    ("glu0", lambda x: F.glu(x, 0)),
]


def sample(*shape, dtype=torch.float32, scale=4.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    # Keep values off the kinks (0, +-3, thresholds) where one ulp flips a branch.
    x = torch.randn(*shape, generator=g) * scale
    x = torch.where((x * 4).round() == x * 4, x + 0.01, x)
    return x.to(dtype)


@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_activation_forward_backward(mode, name, fn, dtype):
    x = sample(6, 8, dtype=dtype)
    a = x.clone().requires_grad_()
    b = x.to("tpu").requires_grad_()
    ya, yb = fn(a), fn(b)
    assert yb.dtype == ya.dtype
    tol = {} if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    assert_close(yb, ya.detach(), **tol)
    g = sample(*ya.shape, dtype=dtype, scale=1.0, seed=1)
    ya.backward(g)
    yb.backward(g.to("tpu"))
    assert_close(b.grad, a.grad, **tol)


@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_noncontiguous_and_special(mode, name, fn):
    base = sample(8, 6)
    base[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0])
    base[1, :2] = torch.tensor([40.0, -40.0])
    x = base.t()[:, ::2]  # transposed, strided
    xt = base.to("tpu").t()[:, ::2]
    assert not xt.is_contiguous()
    assert_close(fn(xt), fn(x), equal_nan=True)


@pytest.mark.parametrize("name,fn", [a for a in ACTIVATIONS if not a[0].startswith("glu")],
                         ids=[a[0] for a in ACTIVATIONS if not a[0].startswith("glu")])
def test_activation_zero_size_and_0dim(mode, name, fn):
    e = torch.empty(0, 3)
    assert fn(e.to("tpu")).shape == fn(e).shape
    s = torch.tensor(0.75)
    assert_close(fn(s.to("tpu")), fn(s))


INPLACE = [
    ("gelu_", lambda x: torch.ops.aten.gelu_(x), lambda x: F.gelu(x)),
    ("gelu_tanh_", lambda x: torch.ops.aten.gelu_(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
    ("threshold_", lambda x: F.threshold_(x, 0.5, 3.0), lambda x: F.threshold(x, 0.5, 3.0)),
    ("leaky_relu_", lambda x: F.leaky_relu_(x, 0.1), lambda x: F.leaky_relu(x, 0.1)),
    ("elu_", lambda x: F.elu_(x, 2.0), lambda x: F.elu(x, 2.0)),
    ("hardtanh_", lambda x: F.hardtanh_(x, -1.0, 2.0), lambda x: F.hardtanh(x, -1.0, 2.0)),
    ("hardsigmoid_", lambda x: F.hardsigmoid(x, inplace=True), F.hardsigmoid),
    ("hardswish_", lambda x: F.hardswish(x, inplace=True), F.hardswish),
    ("mish_", lambda x: F.mish(x, inplace=True), F.mish),
]


@pytest.mark.parametrize("name,inplace,ref", INPLACE, ids=[a[0] for a in INPLACE])
def test_activation_inplace(mode, name, inplace, ref):
    x = sample(4, 6)
    base = x.to("tpu")
    view = base[:, 1:5]  # in-place through a view updates the base
    r = inplace(view)
    assert r is view
    expected = x.clone()
    expected[:, 1:5] = ref(x[:, 1:5])
    assert_close(base, expected)


OUT = [
    ("gelu", lambda x, out: torch.ops.aten.gelu.out(x, out=out), F.gelu),
    ("threshold", lambda x, out: torch.threshold(x, 0.1, 20.0, out=out), lambda x: F.threshold(x, 0.1, 20.0)),
    ("leaky_relu", lambda x, out: torch.ops.aten.leaky_relu.out(x, 0.3, out=out), lambda x: F.leaky_relu(x, 0.3)),
    ("elu", lambda x, out: torch.ops.aten.elu.out(x, 0.5, 2.0, 1.5, out=out),
     lambda x: torch.ops.aten.elu(x, 0.5, 2.0, 1.5)),
    ("softplus", lambda x, out: torch.ops.aten.softplus.out(x, 1.5, 4.0, out=out), lambda x: F.softplus(x, 1.5, 4.0)),
    ("hardtanh", lambda x, out: torch.ops.aten.hardtanh.out(x, -2.0, 2.0, out=out), lambda x: F.hardtanh(x, -2.0, 2.0)),
    ("hardsigmoid", lambda x, out: torch.ops.aten.hardsigmoid.out(x, out=out), F.hardsigmoid),
    ("hardswish", lambda x, out: torch.ops.aten.hardswish.out(x, out=out), F.hardswish),
    ("mish", lambda x, out: torch.ops.aten.mish.out(x, out=out), F.mish),
    ("silu", lambda x, out: torch.ops.aten.silu.out(x, out=out), F.silu),
    ("glu", lambda x, out: torch.ops.aten.glu.out(x, 1, out=out), lambda x: F.glu(x, 1)),
]


@pytest.mark.parametrize("name,out_fn,ref", OUT, ids=[a[0] for a in OUT])
def test_activation_out(mode, name, out_fn, ref):
    x = sample(4, 6)
    out = torch.empty(0, device="tpu")  # resized like resize_output
    r = out_fn(x.to("tpu"), out)
    assert r is out
    assert_close(out, ref(x))


def test_log_sigmoid_forward_output(mode):
    x = sample(3, 5)
    out, buf = torch.empty(0, device="tpu"), torch.empty(0, device="tpu")
    o, b = torch.ops.aten.log_sigmoid_forward.output(x.to("tpu"), output=out, buffer=buf)
    assert o is out and b is buf
    assert_close(out, F.logsigmoid(x))
    assert buf.shape == x.shape


# Backward ops called directly: (op, extra args after (grad, input)), input is x or y = forward(x).
BACKWARD = [
    ("gelu_backward", lambda g, x: torch.ops.aten.gelu_backward(g, x)),
    ("gelu_backward_tanh", lambda g, x: torch.ops.aten.gelu_backward(g, x, approximate="tanh")),
    ("silu_backward", lambda g, x: torch.ops.aten.silu_backward(g, x)),
    ("sigmoid_backward", lambda g, x: torch.ops.aten.sigmoid_backward(g, torch.sigmoid(x))),
    ("tanh_backward", lambda g, x: torch.ops.aten.tanh_backward(g, torch.tanh(x))),
    ("threshold_backward", lambda g, x: torch.ops.aten.threshold_backward(g, x, 0.3)),
    ("leaky_relu_backward", lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, 0.2, False)),
    ("leaky_relu_backward_result", lambda g, x: torch.ops.aten.leaky_relu_backward(g, F.leaky_relu(x, 0.2), 0.2, True)),
    ("elu_backward", lambda g, x: torch.ops.aten.elu_backward(g, 1.3, 1.1, 0.9, False, x)),
    ("elu_backward_result",
     lambda g, x: torch.ops.aten.elu_backward(g, 1.3, 1.1, 0.9, True, torch.ops.aten.elu(x, 1.3, 1.1, 0.9))),
    ("softplus_backward", lambda g, x: torch.ops.aten.softplus_backward(g, x, 2.0, 3.0)),
    ("hardtanh_backward", lambda g, x: torch.ops.aten.hardtanh_backward(g, x, -1.0, 1.0)),
    ("hardsigmoid_backward", lambda g, x: torch.ops.aten.hardsigmoid_backward(g, x)),
    ("hardswish_backward", lambda g, x: torch.ops.aten.hardswish_backward(g, x)),
    ("mish_backward", lambda g, x: torch.ops.aten.mish_backward(g, x)),
    ("log_sigmoid_backward",
     lambda g, x: torch.ops.aten.log_sigmoid_backward(g, x, torch.ops.aten.log_sigmoid_forward(x)[1])),
]


@pytest.mark.parametrize("name,fn", BACKWARD, ids=[a[0] for a in BACKWARD])
def test_backward_ops(mode, name, fn):
    x = sample(5, 4)
    g = sample(5, 4, scale=1.0, seed=3)
    assert_close(fn(g.to("tpu"), x.to("tpu")), fn(g, x))
    # Broadcast grad and a transposed input.
    gb, xt = g[:1], x.t().contiguous().t()
    assert_close(fn(gb.to("tpu"), x.to("tpu").t().contiguous().t()), fn(gb, xt))


GRAD_INPUT = [
    ("gelu_backward", lambda g, x, out: torch.ops.aten.gelu_backward.grad_input(g, x, grad_input=out),
     lambda g, x: torch.ops.aten.gelu_backward(g, x)),
    ("silu_backward", lambda g, x, out: torch.ops.aten.silu_backward.grad_input(g, x, grad_input=out),
     lambda g, x: torch.ops.aten.silu_backward(g, x)),
    ("threshold_backward", lambda g, x, out: torch.ops.aten.threshold_backward.grad_input(g, x, 0.0, grad_input=out),
     lambda g, x: torch.ops.aten.threshold_backward(g, x, 0.0)),
    ("softplus_backward",
     lambda g, x, out: torch.ops.aten.softplus_backward.grad_input(g, x, 1.0, 20.0, grad_input=out),
     lambda g, x: torch.ops.aten.softplus_backward(g, x, 1.0, 20.0)),
    ("hardtanh_backward",
     lambda g, x, out: torch.ops.aten.hardtanh_backward.grad_input(g, x, -1.0, 1.0, grad_input=out),
     lambda g, x: torch.ops.aten.hardtanh_backward(g, x, -1.0, 1.0)),
    ("elu_backward",
     lambda g, x, out: torch.ops.aten.elu_backward.grad_input(g, 1.0, 1.0, 1.0, False, x, grad_input=out),
     lambda g, x: torch.ops.aten.elu_backward(g, 1.0, 1.0, 1.0, False, x)),
]


@pytest.mark.parametrize("name,out_fn,ref", GRAD_INPUT, ids=[a[0] for a in GRAD_INPUT])
def test_backward_grad_input(mode, name, out_fn, ref):
    x, g = sample(3, 4), sample(3, 4, seed=2)
    out = torch.empty(0, device="tpu")
    assert out_fn(g.to("tpu"), x.to("tpu"), out) is out
    assert_close(out, ref(g, x))


def test_glu_backward(mode):
    x = sample(4, 6)
    g = sample(4, 3, seed=5)
    assert_close(torch.ops.aten.glu_backward(g.to("tpu"), x.to("tpu"), -1), torch.ops.aten.glu_backward(g, x, -1))
    out = torch.empty(0, device="tpu")
    torch.ops.aten.glu_backward.grad_input(g.to("tpu"), x.to("tpu"), 1, grad_input=out)
    assert_close(out, torch.ops.aten.glu_backward(g, x, 1))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integer_threshold_hardtanh_relu(mode, dtype):
    x = torch.tensor([[0, 1, 2, 5], [7, 3, 9, 4]], dtype=dtype)
    assert_close(torch.threshold(x.to("tpu"), 3, 100), torch.threshold(x, 3, 100))
    assert_close(torch.threshold(x.to("tpu"), 2.5, 9), torch.threshold(x, 2.5, 9))
    assert_close(F.hardtanh(x.to("tpu"), 1, 4), F.hardtanh(x, 1, 4))
    assert_close(F.hardtanh(x.to("tpu"), 1.7, 4.2), F.hardtanh(x, 1.7, 4.2))
    g = torch.ones_like(x)
    assert_close(torch.ops.aten.threshold_backward(g.to("tpu"), x.to("tpu"), 4),
                 torch.ops.aten.threshold_backward(g, x, 4))


def test_activation_errors(mode):
    xi = torch.tensor([1, 2]).to("tpu")
    xf = torch.tensor([1.0, 2.0, 3.0]).to("tpu")
    for fn in [F.gelu, F.leaky_relu, F.elu, F.softplus, F.hardsigmoid, F.hardswish, F.mish, F.logsigmoid]:
        with pytest.raises(NotImplementedError):
            fn(xi)
    with pytest.raises(RuntimeError, match="approximate argument"):
        F.gelu(xf, approximate="x")
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(xf)
    with pytest.raises(RuntimeError, match="glu does not support scalars"):
        F.glu(torch.tensor(1.0).to("tpu"))
    with pytest.raises(IndexError):
        F.glu(xf.reshape(1, 3), 2)
    with pytest.raises(RuntimeError, match="Bool inputs not supported for hardtanh"):
        F.hardtanh(torch.tensor([True]).to("tpu"))
    with pytest.raises(RuntimeError, match="unsigned type with negative limits"):
        F.hardtanh(torch.tensor([1], dtype=torch.uint8).to("tpu"))
    with pytest.raises(RuntimeError, match="negative slope"):
        torch.ops.aten.leaky_relu_backward(xf, xf, -0.1, True)
    with pytest.raises(RuntimeError, match="negative slope"):
        torch.ops.aten.elu_backward(xf, -1.0, 1.0, 1.0, True, xf)
    with pytest.raises(NotImplementedError):
        torch.ops.aten.sigmoid_backward(xi, xi)
    with pytest.raises(RuntimeError):
        torch.ops.aten.gelu_backward(xf, torch.ones(2).to("tpu"))  # shapes do not broadcast


def test_leaky_relu_inplace_autograd(mode):
    x = sample(3, 4)
    a = x.clone().requires_grad_()
    b = x.to("tpu").requires_grad_()
    ya = F.leaky_relu_(a * 1.0, 0.1)
    yb = F.leaky_relu_(b * 1.0, 0.1)
    g = sample(3, 4, seed=9)
    ya.backward(g)
    yb.backward(g.to("tpu"))
    assert_close(b.grad, a.grad)


# ---- lerp / addcmul / addcdiv ---------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_lerp(mode, dtype):
    tol = {} if dtype != torch.bfloat16 else dict(rtol=2e-2, atol=2e-2)
    s, e = sample(4, 5, dtype=dtype), sample(5, dtype=dtype, seed=1)
    w = torch.rand(4, 1, generator=torch.Generator().manual_seed(2)).to(dtype) * 1.4 - 0.2
    for weight in [0.25, 0.5, 0.9, -0.3]:
        assert_close(torch.lerp(s.to("tpu"), e.to("tpu"), weight), torch.lerp(s, e, weight), **tol)
    assert_close(torch.lerp(s.to("tpu"), e.to("tpu"), w.to("tpu")), torch.lerp(s, e, w), **tol)
    # Weight broadcasts the result beyond self's shape.
    assert_close(torch.lerp(e.to("tpu"), e.to("tpu"), w.to("tpu")), torch.lerp(e, e, w), **tol)
    # In-place (through a transposed view) and out=.
    st = s.to("tpu")
    st.t().lerp_(e.reshape(5, 1).to("tpu").expand(5, 4), 0.3)
    assert_close(st, s.t().lerp(e.reshape(5, 1).expand(5, 4), 0.3).t(), **tol)
    st = s.to("tpu")
    st.lerp_(e.to("tpu"), w.to("tpu"))
    assert_close(st, s.lerp(e, w), **tol)
    out = torch.empty(0, dtype=dtype, device="tpu")
    torch.lerp(s.to("tpu"), e.to("tpu"), 0.7, out=out)
    assert_close(out, torch.lerp(s, e, 0.7), **tol)
    torch.lerp(s.to("tpu"), e.to("tpu"), w.to("tpu"), out=out)
    assert_close(out, torch.lerp(s, e, w), **tol)


def test_lerp_grad_and_edge(mode):
    s, e = sample(3, 4), sample(3, 4, seed=1)
    w = torch.rand(3, 4, generator=torch.Generator().manual_seed(3))
    ts, te, tw = [t.to("tpu").requires_grad_() for t in (s, e, w)]
    cs, ce, cw = [t.clone().requires_grad_() for t in (s, e, w)]
    g = sample(3, 4, seed=4)
    torch.lerp(cs, ce, cw).backward(g)
    torch.lerp(ts, te, tw).backward(g.to("tpu"))
    for a, b in [(ts, cs), (te, ce), (tw, cw)]:
        assert_close(a.grad, b.grad)
    # 0-dim operands and a CPU scalar weight tensor; empty tensors.
    z = torch.tensor(1.5)
    assert_close(torch.lerp(z.to("tpu"), torch.tensor(-2.0).to("tpu"), 0.25), torch.lerp(z, torch.tensor(-2.0), 0.25))
    assert_close(torch.lerp(s.to("tpu"), e.to("tpu"), torch.tensor(0.6)), torch.lerp(s, e, torch.tensor(0.6)))
    assert torch.lerp(torch.empty(0, 2).to("tpu"), torch.empty(0, 2).to("tpu"), 0.5).shape == (0, 2)


def test_lerp_errors(mode):
    a = torch.ones(3).to("tpu")
    with pytest.raises(RuntimeError, match="expected dtype float for `end`"):
        torch.lerp(a, a.double(), 0.5)
    with pytest.raises(RuntimeError, match="expected dtype float for `weight`"):
        torch.lerp(a, a, a.double())
    with pytest.raises(NotImplementedError):
        torch.lerp(a.long(), a.long(), 0.5)
    with pytest.raises(RuntimeError):
        a.lerp_(torch.ones(2, 3).to("tpu"), 0.5)  # in-place cannot broadcast self
    with pytest.raises(RuntimeError):
        torch.lerp(a, torch.ones(4).to("tpu"), 0.5)


# Integer addcdiv is an error (test_addc_errors).
@pytest.mark.parametrize("op,dtype", [("addcmul", torch.float32), ("addcmul", torch.bfloat16), ("addcmul", torch.int64),
                                      ("addcdiv", torch.float32), ("addcdiv", torch.bfloat16)])
def test_addcmul_addcdiv(mode, op, dtype):
    fn = getattr(torch, op)
    tol = {} if dtype != torch.bfloat16 else dict(rtol=2e-2, atol=2e-2)
    if dtype.is_floating_point:
        s, t1 = sample(4, 5, dtype=dtype), sample(5, dtype=dtype, seed=1)
        t2 = (sample(4, 1, seed=2).abs() + 0.5).to(dtype)
        values = [1, 0.5, -2.25]
    else:
        s, t1, t2 = (torch.randint(-9, 9, sh, generator=torch.Generator().manual_seed(i), dtype=dtype)
                     for i, sh in enumerate([(4, 5), (5,), (4, 1)]))
        values = [1, 3, -2]
    for v in values:
        assert_close(fn(s.to("tpu"), t1.to("tpu"), t2.to("tpu"), value=v), fn(s, t1, t2, value=v), **tol)
    st = s.to("tpu")
    getattr(st, op + "_")(t1.to("tpu"), t2.to("tpu"), value=values[2])
    assert_close(st, fn(s, t1, t2, value=values[2]), **tol)
    stt = s.to("tpu").t()
    getattr(stt, op + "_")(t2.t().to("tpu"), t1.reshape(5, 1).to("tpu"), value=values[1])
    assert_close(stt, getattr(s.t().clone(), op + "_")(t2.t(), t1.reshape(5, 1), value=values[1]), **tol)
    out = torch.empty(0, dtype=dtype, device="tpu")
    fn(s.to("tpu"), t1.to("tpu"), t2.to("tpu"), value=values[1], out=out)
    assert_close(out, fn(s, t1, t2, value=values[1]), **tol)


def test_addc_mixed_dtypes_and_grad(mode):
    s = sample(3, 4)
    t1 = torch.arange(12).reshape(3, 4)
    t2 = sample(3, 4, seed=1, dtype=torch.float64)
    assert_close(torch.addcmul(s.to("tpu"), t1.to("tpu"), t2.to("tpu")), torch.addcmul(s, t1, t2))
    assert_close(torch.addcdiv(s.to("tpu"), t1.to("tpu"), t2.to("tpu"), value=0.1), torch.addcdiv(s, t1, t2, value=0.1))
    # Integer addcmul with a float value truncates the value, as on CPU.
    i = torch.arange(6)
    assert_close(torch.addcmul(i.to("tpu"), i.to("tpu"), i.to("tpu"), value=2.7), torch.addcmul(i, i, i, value=2.7))
    # Gradients.
    a, b, c = (sample(2, 3, seed=k) for k in range(3))
    ts = [t.to("tpu").requires_grad_() for t in (a, b, c)]
    cs = [t.clone().requires_grad_() for t in (a, b, c)]
    g = sample(2, 3, seed=7)
    (torch.addcmul(*cs, value=0.5) + torch.addcdiv(*cs, value=-1.5)).backward(g)
    (torch.addcmul(*ts, value=0.5) + torch.addcdiv(*ts, value=-1.5)).backward(g.to("tpu"))
    for x, y in zip(ts, cs):
        assert_close(x.grad, y.grad)
    z = torch.tensor(2.0)
    assert_close(torch.addcdiv(z.to("tpu"), z.to("tpu"), z.to("tpu")), torch.addcdiv(z, z, z))
    assert torch.addcmul(torch.empty(0).to("tpu"), torch.empty(0).to("tpu"), torch.empty(0).to("tpu")).shape == (0,)


def test_addc_errors(mode):
    i = torch.arange(3).to("tpu")
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        torch.addcdiv(i.float(), i, i)
    with pytest.raises(NotImplementedError):
        torch.addcmul(i.bool(), i.bool(), i.bool())
    with pytest.raises(RuntimeError):
        i.addcmul_(i.float(), i.float())  # float result cannot be written to int64
    with pytest.raises(RuntimeError):
        torch.addcmul(i, torch.ones(2).to("tpu"), i)


# ---- floor_divide -----------------------------------------------------------------

def test_floor_divide_float(mode):
    a = torch.tensor([7.0, -7.0, 7.0, -7.0, 0.0, -0.0, 1.0, -1.0, 5.0, 0.3, float("inf"), float("nan"), 1e30, -2.5])
    b = torch.tensor([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0, 0.0, 0.1, 0.1, 2.0, 1.0, 3.0, -0.5])
    assert_close(torch.floor_divide(a.to("tpu"), b.to("tpu")), torch.floor_divide(a, b), equal_nan=True)
    # Signed zeros match too.
    r = torch.floor_divide(a.to("tpu"), b.to("tpu")).cpu()
    assert torch.equal(torch.signbit(r[:6]), torch.signbit(torch.floor_divide(a, b)[:6]))
    x = sample(4, 5)
    y = sample(5, seed=1)
    for other in [y, 0.7, -3]:
        o = other.to("tpu") if isinstance(other, torch.Tensor) else other
        assert_close(torch.floor_divide(x.to("tpu"), o), torch.floor_divide(x, other))
    xb = x.to(torch.bfloat16)
    assert_close(torch.floor_divide(xb.to("tpu"), 0.5), torch.floor_divide(xb, 0.5))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_floor_divide_int(mode, dtype):
    lo = 0 if dtype == torch.uint8 else -20
    a = torch.arange(lo, 20, 3).to(dtype)
    b = torch.tensor([3, 7, 2, 5, 1, 4, 9] * 4)[: a.numel()].to(dtype)
    if dtype != torch.uint8:
        b[::2] = -b[::2]
    assert_close(torch.floor_divide(a.to("tpu"), b.to("tpu")), torch.floor_divide(a, b))
    assert_close(torch.floor_divide(a.to("tpu"), 4), torch.floor_divide(a, 4))
    t = a.to("tpu")
    t.floor_divide_(b.to("tpu"))
    assert_close(t, torch.floor_divide(a, b))
    t = a.to("tpu")
    t.floor_divide_(3)
    assert_close(t, torch.floor_divide(a, 3))
    out = torch.empty(0, dtype=dtype, device="tpu")
    torch.floor_divide(a.to("tpu"), b.to("tpu"), out=out)
    assert_close(out, torch.floor_divide(a, b))


def test_floor_divide_promotion_and_errors(mode):
    a = torch.arange(6).reshape(2, 3)
    b = torch.tensor([1.5, -2.0, 4.0])
    assert_close(torch.floor_divide(a.to("tpu"), b.to("tpu")), torch.floor_divide(a, b))
    assert_close(torch.floor_divide(a.to("tpu").t(), 2), torch.floor_divide(a.t(), 2))
    assert torch.floor_divide(torch.empty(0, 3).to("tpu"), b.to("tpu")).shape == (0, 3)
    assert_close(torch.floor_divide(torch.tensor(7).to("tpu"), torch.tensor(-2).to("tpu")),
                 torch.floor_divide(torch.tensor(7), torch.tensor(-2)))
    with pytest.raises(NotImplementedError):
        torch.floor_divide(torch.tensor([True]).to("tpu"), torch.tensor([True]).to("tpu"))
    with pytest.raises(RuntimeError):
        a.to("tpu").floor_divide_(b.to("tpu"))  # float result into int64


# ---- optimizers -----------------------------------------------------------------

def _optimizer_run(make_opt, device, steps=3):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Linear(7, 3), torch.nn.Linear(3, 33)).to(device)
    opt = make_opt(model.parameters())
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=g).to(device)
        opt.step()
    return [p.detach() for p in model.parameters()]


OPTIMIZERS = [
    ("adamw_foreach", lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.05, foreach=True)),
    ("adamw", lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=False)),
    ("adam_foreach", lambda ps: torch.optim.Adam(ps, lr=1e-2, foreach=True)),
    ("adam_wd", lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.1, foreach=False)),
    # foreach amsgrad needs _foreach_maximum_ -> clamp_min.Tensor (another family); the loop uses maximum.
    ("adam_amsgrad", lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True, foreach=False)),
    ("sgd_nesterov_foreach",
     lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=1e-3, foreach=True)),
    ("sgd_nesterov",
     lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=1e-3, foreach=False)),
    ("sgd_plain", lambda ps: torch.optim.SGD(ps, lr=0.1, foreach=True)),
]


@pytest.mark.parametrize("name,make", OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_optimizer_matches_cpu(mode, name, make):
    expected = _optimizer_run(make, "cpu")
    actual = _optimizer_run(make, "tpu")
    if name.startswith("sgd") and mode == "debug":
        for a, e in zip(actual, expected):  # no sqrt involved, one program per op: bit-exact
            assert torch.equal(a.cpu(), e)
    elif name.startswith("sgd"):
        # Fused graphs, and Strict's step as one program (torch_tpu/optim.py), let XLA contract one op's a*b with
        # the next op's +c into one FMA: a last-bit difference.
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a.cpu(), e, rtol=1e-6, atol=1e-7)
    else:
        # Adam's sqrt: CPU's float32 sqrt is not always correctly rounded (XLA's is), so
        # a parameter may differ by an ulp; everything else (lerp_, addcmul_, addcdiv_) is exact.
        assert_close(actual, expected, rtol=1e-6, atol=1e-8)


def test_clip_grad_norm(mode, monkeypatch):
    # linalg_vector_norm/clamp/stack are lowered in another family; run them through the CPU fallback here.
    monkeypatch.setenv("TORCH_TPU_CPU_FALLBACK", "1")
    g = torch.Generator().manual_seed(0)
    cpu = [torch.randn(5, 3, generator=g), torch.randn(3, generator=g)]
    grads = [torch.randn(p.shape, generator=g) for p in cpu]
    for foreach in [False, True]:
        ps = [p.clone().requires_grad_() for p in cpu]
        ts = [p.to("tpu").requires_grad_() for p in cpu]
        for p, t, gr in zip(ps, ts, grads):
            p.grad, t.grad = gr.clone(), gr.to("tpu")
        total_t = torch.nn.utils.clip_grad_norm_(ts, 1.0, foreach=foreach)
        total = torch.nn.utils.clip_grad_norm_(ps, 1.0, foreach=foreach)
        assert_close(total_t, total)
        for p, t in zip(ps, ts):
            assert_close(t.grad, p.grad)


def test_rrelu(mode):
    x = torch.linspace(-3, 3, 61).reshape(61)
    x[30] = 0.0
    # Evaluation: leaky_relu with the mean slope, as CPU.
    torch.testing.assert_close(F.rrelu(x.to("tpu"), 0.1, 0.3).cpu(), F.rrelu(x, 0.1, 0.3))
    # Training: a slope in [lower, upper] for every element <= 0, the identity above; the gradient is that slope.
    xt = x.to("tpu").requires_grad_()
    y = F.rrelu(xt, 0.1, 0.3, training=True)
    y.sum().backward()
    yc, g = y.detach().cpu(), xt.grad.cpu()
    pos, neg = x > 0, x < 0
    torch.testing.assert_close(yc[pos], x[pos])
    slope = yc[neg] / x[neg]
    assert bool(((slope >= 0.1 - 1e-6) & (slope <= 0.3 + 1e-6)).all()) and slope.std() > 0.01
    torch.testing.assert_close(g[neg], slope)
    torch.testing.assert_close(g[pos], torch.ones(int(pos.sum())))
    z = x.to("tpu").clone()
    F.rrelu(z, 0.1, 0.3, training=True, inplace=True)
    assert bool((z.cpu()[pos] == x[pos]).all()) and bool((z.cpu()[neg] / x[neg] >= 0.1 - 1e-6).all())
