"""torch.fft on tpu (stablehlo.fft through _fft_c2c / _fft_r2c / _fft_c2r) against CPU: every transform,
1-D / 2-D / n-D, the three norm modes, sizes that are not powers of two, transforms over leading and
non-contiguous dims, more dims than stablehlo.fft takes at once, out=, stft/istft, and gradients.

Tolerance as in tests/test_complex.py: within (rtol, atol) of CPU, or at most 4x CPU's own float32 error
against the float64/complex128 transform (pocketfft and XLA's FFT round differently)."""
import pytest
import torch

from test_complex import assert_as_accurate_as_cpu

NORMS = [None, "forward", "ortho"]


def rand(*shape, complex=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.complex64 if complex else torch.float32)


@pytest.mark.parametrize("norm", NORMS)
def test_1d_transforms(norm, mode):
    z, x = rand(4, 12, complex=True), rand(4, 12, seed=1)
    assert_as_accurate_as_cpu(lambda t: torch.fft.fft(t, norm=norm), z)
    assert_as_accurate_as_cpu(lambda t: torch.fft.ifft(t, norm=norm), z)
    assert_as_accurate_as_cpu(lambda t: torch.fft.fft(t, norm=norm), x)           # real input: r2c, full
    assert_as_accurate_as_cpu(lambda t: torch.fft.rfft(t, norm=norm), x)
    assert_as_accurate_as_cpu(lambda t: torch.fft.irfft(t, norm=norm), z[:, :7])   # 2*(7-1) = 12 points
    assert_as_accurate_as_cpu(lambda t: torch.fft.irfft(t, n=11, norm=norm), z[:, :6])
    assert_as_accurate_as_cpu(lambda t: torch.fft.hfft(t, norm=norm), z[:, :7])
    assert_as_accurate_as_cpu(lambda t: torch.fft.ihfft(t, norm=norm), x)


def test_sizes_dims_and_padding(mode):
    z, x = rand(3, 5, 7, complex=True, seed=2), rand(6, 9, seed=3)
    assert_as_accurate_as_cpu(lambda t: torch.fft.fft(t, dim=0), z)              # a leading dim
    assert_as_accurate_as_cpu(lambda t: torch.fft.fft(t, n=10, dim=1), z)        # zero-padded
    assert_as_accurate_as_cpu(lambda t: torch.fft.fft(t, n=3), z)                # truncated
    assert_as_accurate_as_cpu(lambda t: torch.fft.fft(t.transpose(0, 2)), z)     # non-contiguous
    assert_as_accurate_as_cpu(lambda t: torch.fft.rfft(t, dim=0), x)
    assert_as_accurate_as_cpu(lambda t: torch.fft.rfft(t[:, ::2]), x)
    assert_as_accurate_as_cpu(lambda t: torch.fft.fft(t), torch.randn(1))


@pytest.mark.parametrize("norm", NORMS)
def test_nd_transforms(norm, mode):
    z, x = rand(2, 6, 5, 4, complex=True, seed=4), rand(2, 6, 5, 4, seed=5)
    assert_as_accurate_as_cpu(lambda t: torch.fft.fft2(t, norm=norm), z)
    assert_as_accurate_as_cpu(lambda t: torch.fft.ifft2(t, norm=norm), z)
    assert_as_accurate_as_cpu(lambda t: torch.fft.fftn(t, norm=norm), z)          # 4 dims: two stablehlo.fft groups
    assert_as_accurate_as_cpu(lambda t: torch.fft.ifftn(t, dim=(0, 2), norm=norm), z)
    assert_as_accurate_as_cpu(lambda t: torch.fft.rfft2(t, norm=norm), x)
    assert_as_accurate_as_cpu(lambda t: torch.fft.rfftn(t, norm=norm), x)
    assert_as_accurate_as_cpu(lambda t: torch.fft.irfft2(t, norm=norm), z)
    assert_as_accurate_as_cpu(lambda t: torch.fft.irfftn(t, s=(6, 5, 6), dim=(1, 2, 3), norm=norm), z)
    assert_as_accurate_as_cpu(lambda t: torch.fft.hfft2(t, norm=norm), z)
    assert_as_accurate_as_cpu(lambda t: torch.fft.ihfft2(t, norm=norm), x)


def test_roundtrip_shift_and_float64(mode):
    x = rand(4, 16, seed=6)
    t = x.to("tpu")
    torch.testing.assert_close(torch.fft.irfft(torch.fft.rfft(t), n=16).cpu(), x, rtol=1e-5, atol=1e-5)
    assert torch.equal(torch.fft.fftshift(t).cpu(), torch.fft.fftshift(x))
    assert torch.equal(torch.fft.ifftshift(t, dim=1).cpu(), torch.fft.ifftshift(x, dim=1))
    torch.testing.assert_close(torch.fft.fftfreq(8, device="tpu").cpu(), torch.fft.fftfreq(8))
    d = torch.randn(3, 10, dtype=torch.float64)
    torch.testing.assert_close(torch.fft.rfft(d.to("tpu")).cpu(), torch.fft.rfft(d), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.fft.ifft(d.to(torch.complex128).to("tpu")).cpu(),
                               torch.fft.ifft(d.to(torch.complex128)), rtol=1e-12, atol=1e-12)


def test_out_and_errors(mode):
    z = rand(3, 8, complex=True, seed=7)
    out = torch.empty(0, dtype=torch.complex64, device="tpu")
    torch.fft.fft(z.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), torch.fft.fft(z), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError):
        torch.fft.fft(z.to("tpu"), norm="bogus")
    with pytest.raises(IndexError):
        torch.fft.fft(z.to("tpu"), dim=5)
    with pytest.raises(RuntimeError):
        torch.fft.rfft(torch.randn(4, dtype=torch.bfloat16, device="tpu"))


def test_stft_istft(mode):
    x = rand(2, 200, seed=8)
    win = torch.hann_window(32)
    kw = dict(n_fft=32, hop_length=8, window=None, return_complex=True)
    assert_as_accurate_as_cpu(lambda t: torch.stft(t, **{**kw, "window": win.to(t.device)}), x)
    spec = torch.stft(x, **{**kw, "window": win})
    assert_as_accurate_as_cpu(lambda s: torch.istft(s, n_fft=32, hop_length=8, window=win.to(s.device),
                                                    length=200), spec)


def test_gradients(mode):
    z, x = rand(3, 8, complex=True, seed=9), rand(3, 10, seed=10)

    def loss(a, b):
        return (torch.fft.fft(a).abs() ** 2).sum() + torch.fft.rfft(b).real.sum() + torch.fft.irfft(a[:, :5]).sum()

    grads = []
    for dev in ("cpu", "tpu"):
        a = z.clone().to(dev).requires_grad_()
        b = x.clone().to(dev).requires_grad_()
        loss(a, b).backward()
        grads.append((a.grad.cpu(), b.grad.cpu()))
    for g_tpu, g_cpu in zip(grads[1], grads[0]):
        torch.testing.assert_close(g_tpu, g_cpu, rtol=1e-4, atol=1e-4)
