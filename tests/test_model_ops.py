"""Ops that the Hugging Face model suite (tests/models) needed on tpu: _grouped_mm (MoE experts) and histc on
integer tensors (MoE token counts per expert)."""
import pytest
import torch

from conftest import assert_close

OFFS = [2, 5, 5, 9]  # group 2 is empty; rows 9.. belong to no group


def _offs(device="cpu"):
    return torch.tensor(OFFS, dtype=torch.int32, device=device)


def _ref_2d_3d(a, b, offs):
    out = torch.zeros(a.shape[0], b.shape[-1], dtype=a.dtype)
    start = 0
    for g, end in enumerate(offs):
        out[start:end] = a[start:end] @ b[g]
        start = end
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_mm_2d_3d_matches_cpu(mode, dtype):
    # The MoE forward: rows of a are jagged over the experts. CPU's kernel needs 16-byte aligned strides
    # (K = 8) and b column-major, as transformers lays it out (weight.transpose(-2, -1)).
    g = torch.Generator().manual_seed(0)
    a = torch.randn(11, 8, generator=g).to(dtype)
    b = torch.randn(4, 6, 8, generator=g).to(dtype).transpose(-2, -1)
    expected = torch._grouped_mm(a, b, _offs())
    actual = torch._grouped_mm(a.to("tpu"), b.to("tpu"), _offs("tpu"))
    # Rows past the last offset: CPU leaves them uninitialized, tpu writes zeros.
    tol = dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else {}
    assert_close(actual[:9], expected[:9], **tol)
    assert torch.equal(actual[9:].cpu(), torch.zeros(2, 6, dtype=dtype))
    assert actual.dtype == dtype


def test_grouped_mm_2d_2d_and_3d_2d_and_3d_3d(mode):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(3, 11, generator=g)
    b = torch.randn(11, 5, generator=g)
    # (M, K) x (K, N): the contraction is jagged, one (M, N) product per group.
    expected = torch.stack([a[:, s:e] @ b[s:e] for s, e in zip([0] + OFFS[:-1], OFFS)])
    assert_close(torch._grouped_mm(a.to("tpu"), b.to("tpu"), _offs("tpu")), expected)
    # (G, M, K) x (K, N): columns of b are jagged.
    a3 = torch.randn(4, 3, 5, generator=g)
    b2 = torch.randn(5, 11, generator=g)
    actual = torch._grouped_mm(a3.to("tpu"), b2.to("tpu"), _offs("tpu")).cpu()
    for grp, (s, e) in enumerate(zip([0] + OFFS[:-1], OFFS)):
        torch.testing.assert_close(actual[:, s:e], a3[grp] @ b2[:, s:e])
    # (G, M, K) x (G, K, N): a batched matmul, no offsets.
    b3 = torch.randn(4, 5, 2, generator=g)
    assert_close(torch._grouped_mm(a3.to("tpu"), b3.to("tpu")), torch.bmm(a3, b3))


def test_grouped_mm_gradients_match_cpu(mode):
    # Autograd's formula calls _grouped_mm again (the weight gradient is the 2-D x 2-D form).
    g = torch.Generator().manual_seed(2)
    a = torch.randn(9, 8, generator=g)
    b = torch.randn(4, 8, 6, generator=g)
    w = torch.randn(9, 6, generator=g)
    ca, cb = a.clone().requires_grad_(), b.clone().requires_grad_()
    (_ref_2d_3d(ca, cb, OFFS) * w).sum().backward()
    ta, tb = a.to("tpu").requires_grad_(), b.to("tpu").requires_grad_()
    (torch._grouped_mm(ta, tb, _offs("tpu")) * w.to("tpu")).sum().backward()
    assert_close(ta.grad, ca.grad)
    assert_close(tb.grad, cb.grad)


def test_grouped_mm_bad_input(mode):
    a, b = torch.randn(4, 8, device="tpu"), torch.randn(2, 8, 3, device="tpu")
    with pytest.raises(RuntimeError, match="offs is required"):
        torch._grouped_mm(a, b)
    with pytest.raises(RuntimeError, match="int32"):
        torch._grouped_mm(a, b, torch.tensor([2, 4], device="tpu"))
    with pytest.raises(RuntimeError, match="bias is not supported"):
        torch._grouped_mm(a, b, torch.tensor([2, 4], dtype=torch.int32, device="tpu"),
                          bias=torch.zeros(2, 3, device="tpu"))
    with pytest.raises(RuntimeError, match="contraction sizes differ"):
        torch._grouped_mm(a, torch.randn(2, 5, 3, device="tpu"), torch.tensor([2, 4], dtype=torch.int32,
                                                                                device="tpu"))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("bins,lo,hi", [(4, 0, 3), (3, 1, 7), (5, 0, 0)])
def test_histc_integer_like_cuda(mode, dtype, bins, lo, hi):
    # CPU has no integer histc; CUDA bins integers with the same rule as floats (int64 arithmetic), so CPU's
    # float histc of the same values is the reference. Values outside [lo, hi] are not counted.
    x = torch.randint(0, 9, (60,), generator=torch.Generator().manual_seed(3)).to(dtype)
    expected = torch.histc(x.float(), bins, lo, hi).to(dtype)
    actual = torch.histc(x.to("tpu"), bins, lo, hi)
    assert actual.dtype == dtype
    assert_close(actual, expected)


def test_histc_integer_bad_input(mode):
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(torch.arange(4, device="tpu"), 3, 2, 1)
    with pytest.raises(RuntimeError, match="floating-point"):
        torch.histc(torch.ones(3, dtype=torch.bool, device="tpu"), 2)


@pytest.mark.parametrize("kernel, stride, padding, ceil, count_pad, divisor, shape", [
    # EfficientNet's pooler: AvgPool2d(hidden_dim, ceil_mode=True) over a feature map smaller than the kernel.
    (128, 128, 0, True, True, None, (2, 16, 1, 1)),
    (96, 96, 0, True, False, None, (2, 4, 5, 3)),
    (3, 2, 1, True, False, None, (2, 3, 7, 6)),
    (5, 3, 2, False, True, 7, (1, 2, 9, 8)),
])
def test_avg_pool2d_large_kernel_matches_cpu(mode, kernel, stride, padding, ceil, count_pad, divisor, shape):
    # The window sum is one reduce_window: its program does not grow with the kernel's volume (one slice and
    # add per kernel offset made a 128x128 kernel 16384 slices, which XLA:CPU took minutes to compile).
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    grad = None

    def run(device):
        xd = x.detach().to(device).requires_grad_()
        y = torch.nn.functional.avg_pool2d(xd, kernel, stride, padding, ceil, count_pad, divisor)
        nonlocal grad
        if grad is None:
            grad = torch.randn(y.shape, generator=g, dtype=torch.float64)
        y.backward(grad.to(device))
        return y.detach(), xd.grad

    y_cpu, gx_cpu = run("cpu")
    y_tpu, gx_tpu = run("tpu")
    assert_close(y_tpu, y_cpu)
    assert_close(gx_tpu, gx_cpu)


def test_avg_pool3d_large_kernel_matches_cpu(mode):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 9, 10, 8, generator=g)
    xd = x.to("tpu").requires_grad_()
    xc = x.clone().requires_grad_()
    y_cpu = torch.nn.functional.avg_pool3d(xc, 7, 3, 2, ceil_mode=True, count_include_pad=False)
    y_tpu = torch.nn.functional.avg_pool3d(xd, 7, 3, 2, ceil_mode=True, count_include_pad=False)
    grad = torch.randn(y_cpu.shape, generator=g)
    y_cpu.backward(grad)
    y_tpu.backward(grad.to("tpu"))
    assert_close(y_tpu.detach(), y_cpu.detach())
    assert_close(xd.grad, xc.grad)
    # avg_pool3d (unlike avg_pool2d) refuses a kernel larger than the input, on CPU and on tpu.
    small = torch.randn(2, 3, 2, 3, 2, generator=g)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="smaller than kernel size"):
            torch.nn.functional.avg_pool3d(small.to(device), 40, ceil_mode=True)
