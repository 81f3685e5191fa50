"""Softmax/log_softmax, layer/group/batch norm and the nll/cross-entropy/mse losses against CPU: forward,
backward, running statistics, dtypes, views, out= variants and errors."""
import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_close, nonfinite_ok

def sample(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def tpu(x):
    return x.to("tpu") if isinstance(x, torch.Tensor) else x


def check(fn, *inputs, grad=True, grad_args=None, rtol=1e-4, atol=1e-5, seed=1):
    """Runs fn on CPU and tpu copies of `inputs`; compares outputs and the grads of the floating inputs
    (those in `grad_args` when given)."""
    def wants_grad(i, x):
        return grad and x.is_floating_point() and (grad_args is None or i in grad_args)
    a = [x.clone().requires_grad_(wants_grad(i, x)) if isinstance(x, torch.Tensor) else x
         for i, x in enumerate(inputs)]
    b = [x.detach().to("tpu").requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x for x in a]
    ya, yb = fn(*a), fn(*b)
    assert_close(yb.detach(), ya.detach(), rtol=rtol, atol=atol, equal_nan=True)
    if grad:
        g = sample(ya.shape, seed=seed).to(ya.dtype)
        ya.backward(g)
        yb.backward(g.to("tpu"))
        for xa, xb in zip(a, b):
            if isinstance(xa, torch.Tensor) and xa.requires_grad:
                assert_close(xb.grad, xa.grad, rtol=rtol, atol=atol, equal_nan=True)


# ---- softmax ------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax(fn, mode):
    x = sample((3, 4, 5))
    for dim in (0, 1, -1):
        check(lambda t: fn(t, dim), x)
    check(lambda t: fn(t.transpose(0, 2)[::2], 1), x)
    big = sample((4, 6)) * 1000  # stable: the max is subtracted
    check(lambda t: fn(t, 1), big, rtol=1e-4, atol=1e-3)
    inf = torch.tensor([[0.0, float("-inf"), 1.0], [float("-inf")] * 3])
    assert_close(fn(tpu(inf), 1), fn(inf, 1), equal_nan=True)
    assert_close(fn(tpu(torch.tensor(3.0)), 0), fn(torch.tensor(3.0), 0))
    assert_close(fn(tpu(torch.zeros(0, 3)), 1), fn(torch.zeros(0, 3), 1))
    h = x.to(torch.bfloat16)
    assert_close(fn(tpu(h), 1), fn(h, 1), rtol=1e-2, atol=1e-2)
    assert_close(fn(tpu(h), 1, dtype=torch.float32), fn(h, 1, dtype=torch.float32), rtol=1e-5, atol=1e-5)
    with pytest.raises(IndexError):
        fn(tpu(x), 3)


def test_softmax_internal_ops(mode):
    x = sample((4, 7))
    h = x.to(torch.bfloat16)
    # half_to_float (CUDA's fused path; CPU PyTorch does not offer it)
    got = torch._softmax(tpu(h), 1, True)
    assert got.dtype == torch.float32
    assert_close(got, torch.softmax(h.float(), 1), rtol=1e-5, atol=1e-5)
    got = torch._log_softmax(tpu(h), 0, True)
    assert_close(got, torch.log_softmax(h.float(), 0), rtol=1e-5, atol=1e-5)
    y = torch.softmax(x, 1)
    g = sample((4, 7), seed=3)
    assert_close(torch._softmax_backward_data(tpu(g), tpu(y), 1, torch.float32),
                 torch._softmax_backward_data(g, y, 1, torch.float32), rtol=1e-5, atol=1e-6)
    ly = torch.log_softmax(x, 0)
    assert_close(torch._log_softmax_backward_data(tpu(g), tpu(ly), 0, torch.float32),
                 torch._log_softmax_backward_data(g, ly, 0, torch.float32), rtol=1e-5, atol=1e-6)
    out = torch.empty(0, device="tpu")
    torch._softmax(tpu(x), 1, False, out=out)
    assert_close(out, torch.softmax(x, 1))
    bf_grad = torch._softmax_backward_data(tpu(g), tpu(y), 1, torch.bfloat16)
    assert bf_grad.dtype == torch.bfloat16


# ---- layer norm / group norm -----------------------------------------------------------------

@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(affine, mode):
    x = sample((4, 3, 6)) * 2 + 1
    w, b = sample((3, 6), seed=5) if affine else None, sample((3, 6), seed=6) if affine else None
    check(lambda t, w, b: F.layer_norm(t, (6,), w[0] if w is not None else None, b[0] if b is not None else None),
          x, w, b)
    check(lambda t, w, b: F.layer_norm(t, (3, 6), w, b), x, w, b)
    check(lambda t, w, b: F.layer_norm(t.transpose(0, 1)[:, ::2], (6,), w[1] if w is not None else None,
                                       None), x, w, b)
    # mean/rstd as native_layer_norm returns them
    got = torch.native_layer_norm(tpu(x), [6], None, None, 1e-5)
    assert_close(got, torch.native_layer_norm(x, [6], None, None, 1e-5), rtol=1e-4, atol=1e-5)


def test_layer_norm_bf16_and_empty(mode):
    x = sample((4, 16)).to(torch.bfloat16)
    w = sample((16,), seed=2)
    assert_close(F.layer_norm(tpu(x), (16,)), F.layer_norm(x, (16,)), rtol=2e-2, atol=2e-2)
    # bfloat16 input with float32 parameters: statistics in float32, as on CPU
    got = torch.native_layer_norm(tpu(x), [16], tpu(w), None, 1e-5)
    want = torch.native_layer_norm(x, [16], w, None, 1e-5)
    assert [t.dtype for t in got] == [t.dtype for t in want]
    assert_close(got, want, rtol=2e-2, atol=2e-2)
    e = torch.zeros(0, 5)
    check(lambda t: F.layer_norm(t, (5,)), e)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(tpu(x), (15,))
    with pytest.raises(RuntimeError, match="weight"):
        F.layer_norm(tpu(x), (16,), tpu(torch.ones(4)))


@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4, 2, 3), 2), ((2, 4, 3), 4), ((2, 6), 2), ((2, 6, 3), 1)])
def test_group_norm(shape, groups, mode):
    x = sample(shape) * 3 + 0.5
    c = shape[1]
    w, b = sample((c,), seed=5), sample((c,), seed=6)
    check(lambda t, w, b: F.group_norm(t, groups, w, b), x, w, b)
    check(lambda t: F.group_norm(t, groups), x)


def test_group_norm_stats_and_errors(mode):
    x = sample((2, 6, 5))
    got = torch.native_group_norm(tpu(x), None, None, 2, 6, 5, 3, 1e-5)
    assert_close(got, torch.native_group_norm(x, None, None, 2, 6, 5, 3, 1e-5), rtol=1e-4, atol=1e-5)
    h = x.to(torch.bfloat16)
    assert_close(F.group_norm(tpu(h), 2), F.group_norm(h, 2), rtol=2e-2, atol=2e-2)
    with pytest.raises(RuntimeError, match="divisible"):
        F.group_norm(tpu(x), 4)


# ---- batch norm ---------------------------------------------------------------------------------

def run_module(m_cpu, x, steps=2, train=True):
    """Runs a module and its tpu copy for a few steps; compares outputs, grads and buffers."""
    m_tpu = copy.deepcopy(m_cpu).to("tpu")
    m_cpu.train(train)
    m_tpu.train(train)
    for step in range(steps):
        xs = x * (step + 1) + step
        a = xs.clone().requires_grad_()
        b = xs.to("tpu").requires_grad_()
        ya, yb = m_cpu(a), m_tpu(b)
        assert_close(yb, ya, rtol=1e-4, atol=1e-5)
        g = sample(ya.shape, seed=step + 10)
        ya.backward(g)
        yb.backward(g.to("tpu"))
        assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-4)
        for (n, p), (_, q) in zip(m_cpu.named_parameters(), m_tpu.named_parameters()):
            assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-4)
        for (n, p), (_, q) in zip(m_cpu.named_buffers(), m_tpu.named_buffers()):
            assert_close(q, p, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("kind", ["bn1d_2d", "bn1d_3d", "bn2d", "bn2d_noaffine", "bn2d_nostats", "bn2d_cma"])
def test_batch_norm_modules(kind, train, mode):
    if kind == "bn1d_2d":
        m, x = torch.nn.BatchNorm1d(5), sample((8, 5))
    elif kind == "bn1d_3d":
        m, x = torch.nn.BatchNorm1d(4), sample((3, 4, 6))
    elif kind == "bn2d":
        m, x = torch.nn.BatchNorm2d(3), sample((4, 3, 5, 5))
    elif kind == "bn2d_noaffine":
        m, x = torch.nn.BatchNorm2d(3, affine=False), sample((2, 3, 4, 4))
    elif kind == "bn2d_nostats":
        m, x = torch.nn.BatchNorm2d(3, track_running_stats=False), sample((2, 3, 4, 4))
    else:  # cumulative moving average: momentum = 1 / num_batches_tracked, a new value every step
        m, x = torch.nn.BatchNorm2d(3, momentum=None), sample((2, 3, 4, 4))
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(sample(p.shape, seed=4))
        if m.running_var is not None:
            m.running_mean.copy_(sample((m.num_features,), seed=8))
            m.running_var.copy_(sample((m.num_features,), seed=9).abs() + 0.5)
    run_module(m, x, steps=3, train=train)


def test_batch_norm_running_stats_no_recompile(mode):
    m = torch.nn.BatchNorm2d(3, momentum=None).to("tpu")
    x = sample((2, 3, 4, 4)).to("tpu")
    m(x)
    m(x)
    torch.tpu.reset_executor_stats()
    for _ in range(3):  # momentum changes every step: a runtime operand, not a constant
        m(x)
    assert torch.tpu.executor_stats()["cache_misses"] == 0


def test_batch_norm_bf16_mixed(mode):
    x = sample((4, 3, 5)).to(torch.bfloat16)
    w, b = sample((3,), seed=1), sample((3,), seed=2)
    rm, rv = sample((3,), seed=3), sample((3,), seed=4).abs() + 0.5
    for training in (True, False):
        rm_c, rv_c, rm_t, rv_t = rm.clone(), rv.clone(), tpu(rm), tpu(rv)
        want = torch.native_batch_norm(x, w, b, rm_c, rv_c, training, 0.1, 1e-5)
        got = torch.native_batch_norm(tpu(x), tpu(w), tpu(b), rm_t, rv_t, training, 0.1, 1e-5)
        assert [t.dtype for t in got] == [t.dtype for t in want]
        assert_close(got, want, rtol=2e-2, atol=2e-2)
        assert_close(rm_t, rm_c, rtol=1e-3, atol=1e-3)
        assert_close(rv_t, rv_c, rtol=1e-3, atol=1e-3)


def test_batch_norm_internal_ops(mode):
    A = torch.ops.aten
    x = sample((4, 3, 5))
    w, b = sample((3,), seed=1), sample((3,), seed=2)
    rm, rv = sample((3,), seed=3), sample((3,), seed=4).abs() + 0.5

    def both(fn, *args):
        cpu_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        tpu_args = [tpu(a) for a in args]
        want, got = fn(*cpu_args), fn(*tpu_args)
        assert_close(tuple(got), tuple(want), rtol=1e-4, atol=1e-5)
        for ca, ta in zip(cpu_args, tpu_args):  # running stats updated in place
            if isinstance(ca, torch.Tensor):
                assert_close(ta, ca, rtol=1e-5, atol=1e-6)
        return want

    both(A._native_batch_norm_legit, x, w, b, rm, rv, True, 0.1, 1e-5)
    both(A._native_batch_norm_legit, x, w, b, rm, rv, False, 0.1, 1e-5)
    both(A._native_batch_norm_legit.no_stats, x, w, b, True, 0.1, 1e-5)
    both(A._native_batch_norm_legit_no_training, x, w, b, rm, rv, 0.1, 1e-5)
    out, mean, invstd, _ = both(A._batch_norm_with_update, x, w, b, rm, rv, 0.1, 1e-5)
    g = sample(x.shape, seed=7)
    both(lambda *a: A.batch_norm_backward(*a, [True, True, True], torch.empty(0, dtype=torch.uint8, device=a[0].device)),
         g, x, w, rm, rv, mean, invstd, True, 1e-5)
    both(A.native_batch_norm_backward, g, x, w, rm, rv, mean, invstd, True, 1e-5, [True, True, True])
    both(A.native_batch_norm_backward, g, x, w, rm, rv, None, None, False, 1e-5, [True, False, True])
    outs = [torch.empty(0, device="tpu") for _ in range(3)]
    A.native_batch_norm.out(tpu(x), tpu(w), tpu(b), None, None, True, 0.1, 1e-5, out=outs[0], save_mean=outs[1],
                            save_invstd=outs[2])
    assert_close(tuple(outs), tuple(torch.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)), rtol=1e-4,
                 atol=1e-5)
    with pytest.raises(RuntimeError, match="running_mean"):
        A.native_batch_norm(tpu(x), None, None, None, None, False, 0.1, 1e-5)
    with pytest.raises(RuntimeError):
        A.native_batch_norm(tpu(x), tpu(torch.ones(4)), None, None, None, True, 0.1, 1e-5)


def test_functional_batch_norm(mode):
    x = sample((6, 4))
    check(lambda t: F.batch_norm(t, None, None, training=True), x)
    w, b = sample((4,), seed=1), sample((4,), seed=2)
    rm, rv = sample((4,), seed=3), sample((4,), seed=4).abs() + 0.5
    check(lambda t, w, b: F.batch_norm(t, rm.to(t.device), rv.to(t.device), w, b, training=False), x, w, b)


# ---- losses ---------------------------------------------------------------------------------------

REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(reduction, mode):
    x = torch.log_softmax(sample((6, 5)), 1)
    target = torch.tensor([0, 4, -100, 2, 2, 1])
    w = sample((5,), seed=3).abs()
    check(lambda t: F.nll_loss(t, tpu(target) if t.device.type == "tpu" else target, reduction=reduction), x)
    check(lambda t, w: F.nll_loss(t, target.to(t.device), weight=w, reduction=reduction), x, w, grad_args=(0,))
    check(lambda t: F.nll_loss(t, target.clamp(min=0).to(t.device), ignore_index=2, reduction=reduction), x)
    # 1-D input with a 0-dim target, uint8 targets
    check(lambda t: F.nll_loss(t[1], target[1].to(t.device), reduction=reduction), x)
    check(lambda t: F.nll_loss(t, target.clamp(min=0).to(torch.uint8).to(t.device), reduction=reduction), x)
    # every target ignored: mean is 0/0 = nan, as on CPU
    ignored = torch.full((6,), -100)
    with nonfinite_ok():
        check(lambda t: F.nll_loss(t, ignored.to(t.device), reduction=reduction), x)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_spatial(reduction, mode):
    x = torch.log_softmax(sample((2, 4, 3, 5)), 1)
    target = torch.randint(0, 4, (2, 3, 5), generator=torch.Generator().manual_seed(0))
    target[0, 0, 0] = -100
    w = sample((4,), seed=3).abs()
    check(lambda t, w: F.nll_loss(t, target.to(t.device), weight=w, reduction=reduction), x, w, grad_args=(0,))
    # 3-D and 5-D inputs (nll_loss_nd reshapes them)
    check(lambda t: F.nll_loss(t[:, :, 0], target[:, 0].to(t.device), reduction=reduction), x)
    check(lambda t: F.nll_loss(t.unsqueeze(-1), target.unsqueeze(-1).to(t.device), reduction=reduction), x)


def test_nll_loss_internal_and_errors(mode):
    A = torch.ops.aten
    x = torch.log_softmax(sample((4, 3)), 1)
    target = torch.tensor([0, 2, 1, -100])
    out, total = torch.empty(0, device="tpu"), torch.empty(0, device="tpu")
    A.nll_loss_forward.output(tpu(x), tpu(target), None, 1, -100, output=out, total_weight=total)
    assert_close((out, total), tuple(A.nll_loss_forward(x, target, None, 1, -100)))
    assert_close(A.nll_loss_forward(tpu(x), tpu(target), None, 0, -100),
                 tuple(A.nll_loss_forward(x, target, None, 0, -100)))
    h = x.to(torch.bfloat16)
    assert_close(A.nll_loss_forward(tpu(h), tpu(target), None, 1, -100),
                 tuple(A.nll_loss_forward(h, target, None, 1, -100)), rtol=1e-2, atol=1e-2)
    with pytest.raises(RuntimeError, match="target dtype"):
        F.nll_loss(tpu(x), tpu(target.int()))
    with pytest.raises(ValueError, match="batch_size"):
        F.nll_loss(tpu(x), tpu(target[:3]))
    with pytest.raises(RuntimeError, match="size mismatch"):
        A.nll_loss_forward(tpu(x), tpu(target[:3]), None, 1, -100)
    with pytest.raises(RuntimeError, match="weight"):
        F.nll_loss(tpu(x), tpu(target), weight=tpu(torch.ones(4)))


@pytest.mark.parametrize("case", ["plain", "weight", "ignore", "spatial", "none", "soft", "smooth", "smooth_weight",
                                  "smooth_spatial"])
def test_cross_entropy(case, mode):
    x = sample((6, 5)) * 2
    target = torch.tensor([0, 4, -100, 2, 2, 1])
    w = sample((5,), seed=3).abs()
    on = lambda t, ref: ref.to(t.device)  # noqa: E731
    if case == "plain":
        check(lambda t: F.cross_entropy(t, on(t, target.clamp(min=0))), x)
    elif case == "weight":
        check(lambda t, w: F.cross_entropy(t, on(t, target), weight=w), x, w, grad_args=(0,))
    elif case == "ignore":
        check(lambda t: F.cross_entropy(t, on(t, target.clamp(min=0)), ignore_index=2), x)
    elif case == "spatial":
        xs = sample((2, 5, 3, 4))
        ts = torch.randint(0, 5, (2, 3, 4), generator=torch.Generator().manual_seed(1))
        check(lambda t, w: F.cross_entropy(t, on(t, ts), weight=w), xs, w, grad_args=(0,))
    elif case == "none":
        check(lambda t: F.cross_entropy(t, on(t, target), reduction="none"), x)
    elif case == "soft":
        probs = torch.softmax(sample((6, 5), seed=9), 1)
        check(lambda t: F.cross_entropy(t, on(t, probs)), x)
    elif case == "smooth":
        check(lambda t: F.cross_entropy(t, on(t, target), label_smoothing=0.1), x)
    elif case == "smooth_weight":
        check(lambda t, w: F.cross_entropy(t, on(t, target), weight=w, label_smoothing=0.2), x, w,
              grad_args=(0,))
    else:
        xs = sample((2, 5, 3))
        ts = torch.tensor([[0, -100, 4], [1, 1, 3]])
        check(lambda t: F.cross_entropy(t, on(t, ts), label_smoothing=0.3, reduction="sum"), xs)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss(reduction, mode):
    a, b = sample((4, 5)), sample((4, 5), seed=1)
    check(lambda x, y: F.mse_loss(x, y, reduction=reduction), a, b)
    check(lambda x, y: F.mse_loss(x.t(), y.t()[:, ::1], reduction=reduction), a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # F.mse_loss warns about the broadcast
        check(lambda x, y: F.mse_loss(x, y[0], reduction=reduction), a, b)
    h = a.to(torch.bfloat16)
    check(lambda x: F.mse_loss(x, tpu(h) if x.device.type == "tpu" else h, reduction=reduction), a * 1.5,
          grad=False, rtol=2e-2, atol=2e-2)


def test_mse_loss_dtypes_and_out(mode):
    a, b = sample((3, 4)), sample((3, 4), seed=1).double()
    got = torch.ops.aten.mse_loss(tpu(a), tpu(b), 0)
    assert got.dtype == torch.float64
    assert_close(got, torch.ops.aten.mse_loss(a, b, 0))
    out = torch.empty(0, device="tpu")
    torch.ops.aten.mse_loss.out(tpu(a), tpu(a * 2), 1, out=out)
    assert_close(out, torch.ops.aten.mse_loss(a, a * 2, 1))
    g = torch.tensor(2.0)
    assert_close(torch.ops.aten.mse_loss_backward(tpu(g), tpu(a), tpu(a * 3), 1),
                 torch.ops.aten.mse_loss_backward(g, a, a * 3, 1))
    with pytest.raises(NotImplementedError):
        F.mse_loss(tpu(torch.arange(3)), tpu(torch.arange(3)))
