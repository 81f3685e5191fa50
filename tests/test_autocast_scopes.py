"""torch.autocast("tpu") beyond the op lists (tests/test_autocast.py): nested regions, enabled=False, the
weight-cast cache, autocast inside torch.compile(backend="tpu"), and a GPT training step under bf16 autocast
against torch.autocast("cpu", torch.bfloat16)."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import gpt  # noqa: E402


def _mats(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(6, 8, generator=g), torch.randn(8, 5, generator=g)


def test_nested_regions_and_disabled(mode):
    a, b = _mats()
    at, bt = a.to("tpu"), b.to("tpu")
    dtypes = {}
    for dev, (x, y) in (("cpu", (a, b)), ("tpu", (at, bt))):
        with torch.autocast(dev, dtype=torch.bfloat16):
            outer = x @ y
            with torch.autocast(dev, dtype=torch.float16):
                inner = x @ y
            with torch.autocast(dev, enabled=False):
                off = x @ y
            back = x @ y
        dtypes[dev] = [t.dtype for t in (outer, inner, off, back)]
        if dev == "tpu":
            torch.testing.assert_close(off.cpu(), a @ b)  # float32 inside enabled=False
            torch.testing.assert_close(inner.cpu(), (a.half() @ b.half()), rtol=1e-3, atol=1e-3)
    assert dtypes["tpu"] == [torch.bfloat16, torch.float16, torch.float32, torch.bfloat16]
    assert dtypes["tpu"] == dtypes["cpu"]
    assert not torch.is_autocast_enabled("tpu")


class _CountCasts(TorchDispatchMode):
    def __init__(self, target):
        super().__init__()
        self.target, self.casts = target, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._to_copy.default and args[0] is self.target:
            self.casts += 1
        return func(*args, **(kwargs or {}))


def test_weight_cast_cache(mode):
    # A leaf float32 weight that requires grad is cast once per autocast region (torch's cast cache), however
    # many ops use it; the cache is dropped when the outermost region exits.
    w = torch.randn(8, 8, device="tpu", requires_grad=True)
    x = torch.randn(4, 8, device="tpu")
    counts = []
    for _ in range(2):
        with torch.autocast("tpu", dtype=torch.bfloat16):
            with _CountCasts(w) as counter:
                y = F.linear(F.linear(F.linear(x, w), w), w)
        counts.append(counter.casts)
        assert y.dtype == torch.bfloat16
    assert counts == [1, 1]
    with torch.autocast("tpu", dtype=torch.bfloat16, cache_enabled=False):
        with _CountCasts(w) as counter:
            F.linear(F.linear(x, w), w)
    assert counter.casts == 2


def test_autocast_inside_torch_compile():
    a, b = _mats(1)
    w = torch.randn(5, 5, generator=torch.Generator().manual_seed(2))

    def f(x, y, w):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            h = x @ y
            return torch.softmax(h @ w, -1), h

    eager_cpu = f(a, b, w)
    compiled = torch.compile(f, backend="tpu")(a.to("tpu"), b.to("tpu"), w.to("tpu"))
    eager_tpu = f(a.to("tpu"), b.to("tpu"), w.to("tpu"))
    # softmax runs in float32 under CUDA's (and tpu's) policy, in bf16 under CPU's: compare values there
    assert [c.dtype for c in compiled] == [e.dtype for e in eager_tpu] == [torch.float32, torch.bfloat16]
    for c, e, r in zip(compiled, eager_tpu, eager_cpu):
        torch.testing.assert_close(c.cpu(), e.cpu(), rtol=0, atol=0)  # the same kernels, traced
        # CPU autocast: other policy for softmax; within a few bfloat16 roundings (2^-8 relative each)
        torch.testing.assert_close(c.cpu().float(), r.float(), rtol=1.6e-2, atol=1e-2)
    torch._dynamo.reset()


def _gpt_step(device, autocast):
    data, vocab = gpt.load_text()
    torch.manual_seed(0)
    model = gpt.GPT(vocab, d_model=32, n_layers=1, max_len=16).to(device)
    x, y = next(gpt.batches(data, 1, 4, 16))
    with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
        _, loss = model(x.to(device), y.to(device))
    loss.backward()
    return loss.detach().cpu().float(), [p.grad.detach().cpu().float() for p in model.parameters()]


def test_gpt_step_under_bf16_autocast_matches_cpu_autocast(mode):
    # Reference: the float32 step on CPU. tpu's bf16 step must be as close to it as CPU's bf16 autocast step
    # is (4x CPU's largest error per tensor, the OpInfo harness's factor). The two policies differ only where
    # CUDA's and CPU's lists differ (cross_entropy's log_softmax: bf16 on tpu/CUDA, float32 on CPU).
    loss32, grads32 = _gpt_step("cpu", autocast=False)
    loss_c, grads_c = _gpt_step("cpu", autocast=True)
    loss_t, grads_t = _gpt_step("tpu", autocast=True)
    for t, c, r in zip([loss_t] + grads_t, [loss_c] + grads_c, [loss32] + grads32):
        bound = 4 * (c - r).abs().max() + 1e-6
        assert (t - r).abs().max() <= bound, ((t - r).abs().max(), (c - r).abs().max())
