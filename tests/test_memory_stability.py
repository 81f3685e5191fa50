"""Memory over a long training run (issue 26 item 2): a tiny GPT trained for STEPS steps in each eager mode
and compiled keeps device memory exactly where it was after warm-up, host RSS within a bound, and the
executable cache within the programs of a step; deleting the model and optimizer returns device memory to its start.

STEPS is 200 in `make test` and 1000 in `make test-memory` (TORCH_TPU_MEMORY_STEPS); the numbers of a
1000-step run are in docs/reliability.md. The loss is compared with the same run on CPU, so a leak that
changed results would show there too.
"""
import gc
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_tpu

STEPS = int(os.environ.get("TORCH_TPU_MEMORY_STEPS", "200"))
WARMUP = 40  # Fused mode learns its step boundary and compiles that period's graphs by about step 30
RSS_BOUND = 50 * 2**20  # bytes of host RSS growth allowed after warm-up
VOCAB, DIM, SEQ, BATCH = 64, 32, 16, 4


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.randn(SEQ, DIM) * 0.02)
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(DIM), nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, 2, c // 2).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x))


def rss_bytes():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def batches(n):
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g) for _ in range(n)]


def train(dev, steps, compiled=False, probe=None, dtype=torch.float32):
    torch.manual_seed(0)
    model = TinyGPT().to(dev, dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    fwd = torch.compile(model, backend="tpu") if compiled else model
    losses = []
    for step, data in enumerate(batches(steps), 1):
        data = data.to(dev)
        logits = fwd(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), data[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        if probe:
            probe(step)
    return model, opt, torch.stack([l.cpu() for l in losses])


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_memory_returns_to_its_level_over_a_long_run(mode, compiled):
    if compiled:
        torch._dynamo.reset()
    torch.tpu.synchronize()
    gc.collect()
    start = torch.tpu.memory_allocated()
    seen = {}

    def probe(step):
        # Every 10 steps, as a loop logging its progress would: Fused mode cuts its graphs at a learned step
        # boundary (a period of a few steps), and a synchronize elsewhere in that period ends a graph of a new
        # length, compiled once (a bounded set, one per phase). Synchronizing only at the two probes met a new
        # phase at the second, whose compile (not a leak) grew host RSS by 60-250 MiB.
        if step % 10 == 0:
            torch.tpu.synchronize()
        if step in (WARMUP, STEPS):
            torch.tpu.synchronize()
            gc.collect()
            seen[step] = (torch.tpu.memory_allocated(), torch.tpu.memory_reserved(), rss_bytes(),
                          torch.tpu.executor_stats()["cached_executables"])

    # The losses live on the device until the end: their bytes grow by design, so they are subtracted.
    model, opt, losses = train("tpu", STEPS, compiled, probe)
    loss_bytes = losses.element_size()
    (a0, r0, rss0, exe0), (a1, r1, rss1, exe1) = seen[WARMUP], seen[STEPS]
    print(f"\n[memory] {mode}{' compiled' if compiled else ''}: steps {WARMUP}->{STEPS}: allocated "
          f"{a1 - (STEPS - WARMUP) * loss_bytes - a0:+d} B (losses kept aside), reserved "
          f"{r1 - (STEPS - WARMUP) * loss_bytes - r0:+d} B, host RSS {(rss1 - rss0) / 2**20:+.1f} MiB, "
          f"executables {exe0}->{exe1}")
    assert a1 - (STEPS - WARMUP) * loss_bytes == a0, (a0, a1)  # exactly: no tensor of any step survives it
    assert r1 - (STEPS - WARMUP) * loss_bytes <= r0, (r0, r1)
    assert rss1 - rss0 < RSS_BOUND, f"host RSS grew {(rss1 - rss0) / 2**20:.1f} MiB over {STEPS - WARMUP} steps"
    # An in-place op's program comes in two variants, donating its old buffer or not (when something
    # in flight still holds it, which depends on timing): the cache may meet a variant late, but its
    # size is bounded by the programs of one step, never growing with the step count.
    assert exe1 <= 2 * exe0, f"the executor cached {exe1 - exe0} new executables after warm-up ({exe0})"
    # Same data and init on CPU; the bound is what float32 CPU training itself drifts from float64 in
    # this loop, with room for a different (equally valid) float32 rounding order.
    _, _, cpu32 = train("cpu", STEPS)
    _, _, cpu64 = train("cpu", STEPS, dtype=torch.float64)
    drift = (cpu32.double() - cpu64).abs().max().item()
    assert (losses.double() - cpu64).abs().max().item() <= 4 * drift + 1e-6, (losses, cpu64)

    del model, opt, losses
    gc.collect()
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() == start
    torch.tpu.empty_cache()
    assert torch.tpu.memory_reserved() <= r0
