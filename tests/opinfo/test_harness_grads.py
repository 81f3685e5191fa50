"""The harness's gradient cotangents (`_grads`): complex outputs are differentiated with complex cotangents, the
float64 reference sees the same cotangent values as the float32 run, and a sample with no differentiable
output yields None (grad n/a). Pure CPU computations with a known answer; no device needed."""
import os
import sys
from types import SimpleNamespace

import torch
from torch.testing._internal.opinfo.core import SampleInput

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def _op(fn):
    """The two attributes of an OpInfo that `_grads` calls."""
    return SimpleNamespace(get_op=lambda: fn, gradcheck_wrapper=lambda f, *a, **k: f(*a, **k))


def _cotangent(shape, dtype):
    """The first cotangent `_grads` draws (its generator and seed)."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(1234), dtype=dtype)


def test_complex_output_gets_a_complex_cotangent():
    # torch.complex(a, b) = a + ib: the gradient for cotangent g is (Re g, Im g) (PyTorch's convention).
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 4, generator=g).requires_grad_()
    b = torch.randn(3, 4, generator=g).requires_grad_()
    ga, gb = harness._grads(_op(torch.complex), SampleInput(a, args=(b,)), [a, b])
    cot = _cotangent((3, 4), torch.complex64)
    assert cot.imag.abs().sum() > 0
    torch.testing.assert_close(ga, cot.real, rtol=0, atol=0)
    torch.testing.assert_close(gb, cot.imag, rtol=0, atol=0)


def test_float64_reference_sees_the_same_complex_cotangent():
    # The reference output is complex128; its cotangent is the float32 run's complex64 draw, widened.
    x = torch.randn(2, 5, generator=torch.Generator().manual_seed(1))
    x32, x64 = x.clone().requires_grad_(), x.double().requires_grad_()
    (g32,) = harness._grads(_op(torch.fft.rfft), SampleInput(x32), [x32])
    (g64,) = harness._grads(_op(torch.fft.rfft), SampleInput(x64), [x64], cot_dtype=torch.float32)
    assert g64.dtype == torch.float64 and g64.abs().sum() > 0
    torch.testing.assert_close(g32.double(), g64, rtol=1e-6, atol=1e-6)
    # Known answer: rfft is x @ W.T with W the first 3 rows of the 5-point DFT matrix; for real x and complex
    # cotangent g, PyTorch's vector-Jacobian product is Re(g @ conj(W)).
    cot = _cotangent((2, 3), torch.complex64).to(torch.complex128)
    n = torch.arange(5, dtype=torch.float64)
    k = torch.arange(3, dtype=torch.float64)
    w = torch.exp(-2j * torch.pi * torch.outer(k, n) / 5)  # [3, 5]: rfft = x @ w.T
    expected = (cot @ w.conj()).real
    torch.testing.assert_close(g64, expected, rtol=1e-10, atol=1e-10)


def test_mixed_real_and_complex_outputs_draw_in_order():
    x = torch.randn(4, generator=torch.Generator().manual_seed(2)).requires_grad_()
    (gx,) = harness._grads(_op(lambda t: (t * 2, torch.polar(t, t))), SampleInput(x), [x])
    gen = torch.Generator().manual_seed(1234)
    c0 = torch.randn(4, generator=gen)
    c1 = torch.randn(4, generator=gen, dtype=torch.complex64)
    xd = x.detach().double().requires_grad_()
    y0, y1 = xd * 2, torch.polar(xd, xd)
    (expected,) = torch.autograd.grad([y0, y1], [xd], [c0.double(), c1.to(torch.complex128)])
    torch.testing.assert_close(gx.double(), expected, rtol=1e-5, atol=1e-5)


def test_no_differentiable_output_is_none():
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(3)).requires_grad_()
    assert harness._grads(_op(lambda t: torch.argmax(t, dim=1)), SampleInput(x), [x]) is None
    assert harness._grads(_op(lambda t: torch.isnan(t)), SampleInput(x), [x]) is None
