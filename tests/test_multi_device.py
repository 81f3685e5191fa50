"""Every addressable device works (the XLA CPU plugin exposes 4): programs run on the
device their tensors live on, copies between devices, device guards, per-device memory
statistics and generators. Each result is compared with CPU PyTorch."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_close

pytestmark = pytest.mark.skipif(torch.tpu.device_count() < 2, reason="needs two tpu devices")


def last():
    return torch.tpu.device_count() - 1


def test_ops_run_on_the_tensors_device(mode):
    a, b = torch.randn(4, 5), torch.randn(5, 3)
    x, y = a.to("tpu:1"), b.to("tpu:1")
    z = (x @ y).relu().sum(0) * 2 + x[:, :3].mean(0)
    assert z.device == torch.device("tpu:1")
    assert_close(z, (a @ b).relu().sum(0) * 2 + a[:, :3].mean(0))
    # In-place ops, views and reductions on the last device.
    w = a.to(f"tpu:{last()}")
    w[1:3].mul_(3).add_(1)
    ref = a.clone()
    ref[1:3].mul_(3).add_(1)
    assert_close(w, ref)
    assert w.device.index == last()


def test_factory_ops_with_an_explicit_index(mode):
    x = torch.arange(4.0, device="tpu:1")
    assert x.device == torch.device("tpu:1")
    assert_close(x, torch.arange(4.0))
    assert_close(torch.ones(2, 3, device=f"tpu:{last()}"), torch.ones(2, 3))
    assert_close(torch.full((3,), 7, device="tpu:2"), torch.full((3,), 7))
    e = torch.empty(0, device="tpu:1")
    e.resize_(5).fill_(2)  # resize_ grows the storage on tpu:1, whatever the current device
    assert_close(e, torch.full((5,), 2.0))
    assert torch.tpu.current_device() == 0


def test_device_context_places_new_tensors(mode):
    with torch.tpu.device(1):
        assert torch.tpu.current_device() == 1
        t = torch.ones(3, device="tpu")
        r = torch.zeros(2, 2, device="tpu") + 1
        c = torch.tensor([1.0, 2.0]).to("tpu")
    assert torch.tpu.current_device() == 0
    for v in (t, r, c):
        assert v.device == torch.device("tpu:1")
    assert_close(t, torch.ones(3))
    assert_close(r, torch.ones(2, 2))
    assert_close(c, torch.tensor([1.0, 2.0]))
    # Ops on tpu:1 tensors run there while another device is current.
    with torch.tpu.device(2):
        s = t * 4
    assert s.device.index == 1
    assert_close(s, torch.full((3,), 4.0))


def test_copies_between_devices(mode):
    a = torch.randn(6, 4)
    x0 = a.to("tpu:0")
    x1 = x0.to("tpu:1")
    assert x1.device.index == 1
    assert_close(x1, a)
    # A strided source, a dtype change and a partial destination on a third device.
    d = torch.zeros(5, 6, device=f"tpu:{last()}", dtype=torch.float64)
    d[1:5, ::2].copy_(x0[:4, 1:].t()[:, :4].t().t()[:3].t())
    ref = torch.zeros(5, 6, dtype=torch.float64)
    ref[1:5, ::2].copy_(a[:4, 1:].t()[:, :4].t().t()[:3].t())
    assert_close(d, ref)
    # Broadcasting copy and an integer tensor back and forth.
    b = torch.empty(3, 4, device="tpu:1")
    b.copy_(x0[0])
    assert_close(b, a[0].expand(3, 4))
    i = torch.arange(10, device="tpu:1").to("tpu:0") * 3
    assert i.device.index == 0
    assert_close(i, torch.arange(10) * 3)
    # A tensor computed but not yet materialised (fused mode keeps it pending).
    p = (x0 * 2).to("tpu:1") + 1
    assert_close(p, a * 2 + 1)
    # Never written memory reads as zeros on the other device too.
    z = torch.empty(4, device="tpu:0").zero_().to("tpu:2")
    assert_close(z, torch.zeros(4))


def test_mixing_devices_raises(mode):
    x0 = torch.ones(3, device="tpu:0")
    x1 = torch.ones(3, device="tpu:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x0 + x1
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(torch.ones(2, 2, device="tpu:0"), torch.ones(2, 2, device="tpu:1"))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x1.add_(x0)
    assert_close(x1, torch.ones(3))  # untouched
    # A CPU scalar tensor still combines with any device, as with CUDA.
    assert_close(x1 * torch.tensor(3.0), torch.full((3,), 3.0))


def test_memory_stats_are_per_device(mode):
    torch.tpu.synchronize()
    before = [torch.tpu.memory_allocated(d) for d in range(torch.tpu.device_count())]
    big = torch.empty(1000, device="tpu:1")
    other = torch.empty(250, dtype=torch.float64, device=f"tpu:{last()}")
    now = [torch.tpu.memory_allocated(d) for d in range(torch.tpu.device_count())]
    assert now[1] - before[1] == 4000
    assert now[last()] - before[last()] == 2000
    assert now[0] == before[0]
    grown = torch.empty(0, device="tpu:1")
    grown.resize_(100)  # resized on tpu:1 while tpu:0 is current
    assert torch.tpu.memory_allocated(1) - before[1] == 4400
    assert torch.tpu.memory_allocated(0) == before[0]
    del big, other, grown
    assert [torch.tpu.memory_allocated(d) for d in range(torch.tpu.device_count())] == before


def test_generators_are_per_device(mode):
    torch.tpu.manual_seed_all(1234)
    r0 = torch.randn(8, device="tpu:0").cpu()
    r1 = torch.randn(8, device="tpu:1").cpu()
    assert torch.equal(r0, r1)  # same seed, same stream on each device
    torch.tpu.manual_seed_all(1234)
    with torch.tpu.device(1):
        torch.tpu.manual_seed(99)  # seeds the current device only
    assert torch.equal(torch.randn(8, device="tpu:0").cpu(), r0)
    s1 = torch.randn(8, device="tpu:1").cpu()
    assert not torch.equal(s1, r1)
    torch.tpu.manual_seed_all(1234)
    torch.randn(8, device="tpu:1")  # draws on tpu:1 do not advance tpu:0's generator
    assert torch.equal(torch.randn(8, device="tpu:0").cpu(), r0)
    assert torch.tpu.get_rng_state(1).shape == (16,)
    with torch.tpu.device(1):
        torch.tpu.manual_seed(99)
        assert torch.tpu.initial_seed() == 99
    assert torch.tpu.initial_seed() == 1234


def test_module_to_second_device(mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(5, 8)
    ref = model(x)
    moved = model.to("tpu:1")
    assert all(p.device == torch.device("tpu:1") for p in moved.parameters())
    out = moved(x.to("tpu:1"))
    assert out.device.index == 1
    assert_close(out, ref, atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert all(p.grad.device.index == 1 for p in moved.parameters())


def _train_and_ops(device):
    torch.manual_seed(0)
    emb, ln, lin = torch.nn.Embedding(50, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 50)
    conv = torch.nn.Conv2d(3, 4, 3)
    mods = torch.nn.ModuleList([emb, ln, lin, conv]).to(device)
    opt = torch.optim.AdamW(mods.parameters(), lr=1e-2)
    idx = torch.randint(0, 50, (4, 7)).to(device)
    img = torch.randn(2, 3, 8, 8).to(device)
    outs = []
    for _ in range(2):
        h = ln(emb(idx))
        att = F.scaled_dot_product_attention(h[:, None], h[:, None], h[:, None], is_causal=True)[:, 0]
        logits = lin(att)
        loss = F.cross_entropy(logits.reshape(-1, 50), idx.reshape(-1))
        loss = loss + F.max_pool2d(F.relu(conv(img)), 2).mean() + logits.softmax(-1).max(-1).values.mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(mods.parameters(), 1.0)
        opt.step()
        outs.append(loss.detach())
    x = torch.randn(10).to(device)
    i = torch.tensor([1, 3]).to(device)
    outs += [x.sort().values, x.topk(3).values, x.cumsum(0), torch.nonzero(x > 0), x[x > 0],
             torch.where(x > 0, x, torch.zeros_like(x)), x.index_select(0, i), torch.cat([x, x]),
             torch.gather(x, 0, i), x.clone().scatter_add_(0, i, torch.ones(2).to(device))]
    return [o.cpu() for o in outs]


def test_training_on_a_second_device_touches_no_other(mode):
    # Kernels allocate their outputs and temporaries on their inputs' device, not the current one.
    torch.tpu.synchronize()
    for d in range(torch.tpu.device_count()):
        torch.tpu.reset_peak_memory_stats(d)
    base = torch.tpu.memory_allocated(0)
    got = _train_and_ops("tpu:1")
    assert torch.tpu.max_memory_allocated(0) == base
    assert torch.tpu.max_memory_allocated(1) > 0
    for g, r in zip(got, _train_and_ops("cpu")):
        torch.testing.assert_close(g, r, atol=1e-4, rtol=1e-4)
