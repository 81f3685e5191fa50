"""torch.autocast("tpu"): CUDA's op lists (lower precision / float32 / promote), compared with CPU computing
the same casts explicitly."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_close


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matmuls_and_convs_run_in_the_autocast_dtype(mode, dtype):
    g = torch.Generator().manual_seed(0)
    a, b, w, bias = (torch.randn(*s, generator=g) for s in [(6, 8), (8, 5), (5, 8), (5,)])
    img, k = torch.randn(2, 3, 8, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g)
    with torch.autocast("tpu", dtype=dtype):
        got = [torch.mm(a.to("tpu"), b.to("tpu")), F.linear(a.to("tpu"), w.to("tpu"), bias.to("tpu")),
               torch.bmm(a.to("tpu")[None], b.to("tpu")[None]), F.conv2d(img.to("tpu"), k.to("tpu"))]
    want = [torch.mm(a.to(dtype), b.to(dtype)), F.linear(a.to(dtype), w.to(dtype), bias.to(dtype)),
            torch.bmm(a.to(dtype)[None], b.to(dtype)[None]), F.conv2d(img.to(dtype), k.to(dtype))]
    for t, c in zip(got, want):
        assert t.dtype == dtype
        assert_close(t, c, atol=2e-2, rtol=2e-2)


def test_sensitive_ops_run_in_float32(mode):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 16, generator=g).bfloat16()
    target = torch.randint(0, 16, (4,), generator=g)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        xt = x.to("tpu")
        got = [torch.softmax(xt, -1), torch.log_softmax(xt, -1), F.layer_norm(xt, (16,)),
               F.nll_loss(xt.float().log_softmax(-1).bfloat16(), target.to("tpu")), xt.sum(), torch.exp(xt)]
    xf = x.float()
    want = [torch.softmax(xf, -1), torch.log_softmax(xf, -1), F.layer_norm(xf, (16,)),
            F.nll_loss(xf.log_softmax(-1).bfloat16().float(), target), xf.sum(), torch.exp(xf)]
    for t, c in zip(got, want):
        assert t.dtype == torch.float32
        assert_close(t, c, atol=1e-5, rtol=1e-5)


def test_cross_entropy_follows_cuda_policy(mode):
    # cross_entropy is not on CUDA's lists: it decomposes to log_softmax(x, dtype=x.dtype) (kept in bfloat16,
    # since a dtype is given) and nll_loss (float32). CPU autocast lists it as float32; CUDA and tpu do not.
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 16, generator=g).bfloat16()
    target = torch.randint(0, 16, (4,), generator=g)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        got = F.cross_entropy(x.to("tpu"), target.to("tpu"))
    assert got.dtype == torch.float32
    assert_close(got, F.nll_loss(torch.log_softmax(x, -1).float(), target), atol=1e-2, rtol=1e-2)


def test_promote_and_fallthrough(mode):
    a = torch.randn(5)
    b = torch.randn(5).bfloat16()
    with torch.autocast("tpu", dtype=torch.bfloat16):
        promoted = torch.addcmul(a.to("tpu"), b.to("tpu"), b.to("tpu"))  # widest input type
        plain = b.to("tpu") + 1  # not on any list: runs as without autocast
        with torch.autocast("tpu", enabled=False):
            off = torch.mm(a.to("tpu")[None], a.to("tpu")[:, None])
    assert promoted.dtype == torch.float32
    assert_close(promoted, torch.addcmul(a, b.float(), b.float()), atol=1e-6, rtol=1e-6)
    assert plain.dtype == torch.bfloat16
    assert_close(plain, b + 1)
    assert off.dtype == torch.float32


def test_backward_through_autocast_gives_float32_grads(mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))

    def grads(device):
        m = torch.nn.Sequential(*[type(l)(*([l.in_features, l.out_features] if hasattr(l, "in_features") else []))
                                  for l in model]).to(device)
        m.load_state_dict(model.state_dict())
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = F.cross_entropy(m(x.to(device)), y.to(device))
        loss.backward()
        return loss, [p.grad for p in m.parameters()]

    tpu_loss, tpu_grads = grads("tpu")
    cpu_loss, cpu_grads = grads("cpu")  # CPU autocast has the same policy for linear/gelu/cross_entropy
    assert tpu_loss.dtype == torch.float32
    assert_close(tpu_loss, cpu_loss, atol=2e-2, rtol=2e-2)
    for t, c in zip(tpu_grads, cpu_grads):
        assert t.dtype == torch.float32
        assert_close(t, c, atol=3e-2, rtol=3e-2)
