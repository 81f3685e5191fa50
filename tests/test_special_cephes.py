"""torch.special's Cephes-fit functions (Bessel J0/J1/Y0/Y1, modified Bessel K0/K1 and their scaled forms,
Airy Ai, ndtri, erfcx, log_ndtr) on tpu against CPU float32, over points in every branch of ATen's
implementation (the branch edges, zero, negatives, the far tails, inf, nan). A value passes when it is within
1e-5 (relative and absolute) of CPU float32, or as close to the float64 CPU value as 4x CPU float32's own
largest error there (tests/opinfo/harness.py's rule)."""
import math

import pytest
import torch
from conftest import nonfinite_ok

POINTS = [-math.inf, -1e8, -60.0, -27.0, -26.0, -7.0, -6.0, -5.0, -2.1, -2.09, -2.0, -1.0, -0.5, -1e-6, 0.0, 1e-6,
          1e-3, 0.1, 0.5, 1.0, 1.9, 2.0, 2.09, 2.1, 3.0, 4.99, 5.0, 5.01, 8.0, 8.32, 8.4, 20.0, 49.0, 51.0, 103.0,
          104.0, 1e3, 6e7, 1e30, math.inf, math.nan]
PROBS = [0.0, 1e-30, 1e-12, 1e-5, 0.01, 0.1, 0.135, 0.2, 0.5, 0.8, 0.865, 0.9, 0.999, 1 - 1e-7, 1.0, -0.5, 1.5,
         math.nan]

FUNCS = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
         "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai", "erfcx", "log_ndtr"]


def check(fn, x):
    with nonfinite_ok():  # inf at poles and nan outside the domain are the right answers here
        got = fn(x.to("tpu"))
    assert got.device.type == "tpu" and got.dtype == torch.float32
    got = got.cpu().double()
    cpu, ref = fn(x).double(), fn(x.double())
    same = torch.isclose(got, cpu, rtol=1e-5, atol=1e-5, equal_nan=True)
    finite = torch.isfinite(ref) & torch.isfinite(cpu)
    cpu_err = (cpu - ref)[finite].abs().max() if bool(finite.any()) else torch.tensor(0.0)
    close = (got - ref).abs() <= 4 * cpu_err + 1e-5 + 1e-5 * ref.abs()
    ok = same | (finite & close)
    assert bool(ok.all()), f"x={x[~ok].tolist()} tpu={got[~ok].tolist()} cpu={cpu[~ok].tolist()}"


@pytest.mark.parametrize("name", FUNCS)
def test_cephes_functions(mode, name):
    fn = getattr(torch.special, name)
    check(fn, torch.tensor(POINTS))
    check(fn, torch.linspace(-12, 12, 240).reshape(3, 80)[:, ::2])  # dense, non-contiguous


def test_ndtri(mode):
    check(torch.special.ndtri, torch.tensor(PROBS))
    check(torch.special.ndtri, torch.linspace(0, 1, 101))


def test_integer_input_and_out(mode):
    x = torch.arange(-3, 6)
    torch.testing.assert_close(torch.special.bessel_j0(x.to("tpu")).cpu(), torch.special.bessel_j0(x))
    check(torch.special.airy_ai, torch.tensor(1.5))  # 0-dim
    out = torch.empty(9, device="tpu")
    torch.special.erfcx(x.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), torch.special.erfcx(x))


@pytest.mark.parametrize("name", ["ndtri", "erfcx", "log_ndtr"])
def test_gradients(mode, name):
    fn = getattr(torch.special, name)
    x = torch.linspace(0.02, 0.98, 9) if name == "ndtri" else torch.linspace(-8, 8, 9)
    xt = x.to("tpu").requires_grad_()
    fn(xt).sum().backward()
    xc = x.clone().requires_grad_()
    fn(xc).sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_igamma(mode, name):
    # Every method ATen picks (series, continued fraction, DLMF 8.7.3, the large-a region) and the edges.
    a = torch.tensor([0.0, 0.0, 0.5, 1.0, 2.0, 5.0, 0.01, 0.3, 25.0, 100.0, 150.0, 300.0, 3.0, 1e-3, 10.0, -1.0,
                      2.0, math.inf, 2.0, 7.0, 0.7, math.nan])
    x = torch.tensor([0.0, 1.0, 0.3, 1.0, 3.0, 4.0, 0.2, 0.8, 24.0, 101.0, 140.0, 310.0, 0.0, 1.05, 30.0, 1.0,
                      math.inf, 1.0, -1.0, 1.0, 0.6, 1.0])
    fn = getattr(torch.special, name)
    check(lambda t: fn(t[0], t[1]), torch.stack([a, x]))
    g = torch.Generator().manual_seed(0)
    a2, x2 = torch.rand(4, 6, generator=g) * 8, torch.rand(6, generator=g) * 8  # broadcast
    check(lambda t: fn(t[:4], t[4]), torch.cat([a2, x2[None]]))
    y = a2.to("tpu")
    (y.igamma_ if name == "gammainc" else y.igammac_)(x2.to("tpu"))
    torch.testing.assert_close(y.cpu(), fn(a2, x2), rtol=1e-5, atol=1e-6)
