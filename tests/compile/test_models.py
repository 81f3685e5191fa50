"""torch.compile(backend="tpu") on models: each AOTAutograd graph is one fused program,
and the results equal eager tpu (and CPU): MLP, CNN with BatchNorm, a small GPT with
dropout, forward and backward, in every eager mode.

Bounds (atol 1e-5, rtol 1e-5 or 1e-4 where a convolution or the GPT's attention sums in another order):
CPU float32 itself is within 4e-8 (MLP outputs) / 9e-9 (MLP grads) and 3.4e-7 / 1.8e-7 (CNN) of float64
on these inputs, so the bounds leave a margin of 30x or more for XLA's summation order; a wrong graph
(a missed mutation, another dropout mask) is off by far more."""
import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_tpu import _C

from conftest import assert_close


def _compiled_graphs():
    return _C._executor_stats()["compiled_graphs"]


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def _grads(model):
    return [p.grad.cpu() if p.grad.device.type == "tpu" else p.grad for p in model.parameters()]


def test_mlp_forward_backward_matches_cpu_one_program_per_graph(mode):
    cpu = _mlp()
    tpu = copy.deepcopy(cpu).to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    x = torch.randn(6, 8)
    expected = cpu(x)
    expected.square().mean().backward()

    flushes = _C._fused_stats()["flushes"]
    out = compiled(x.to("tpu"))
    # The forward graph is exactly one program, whatever the eager mode.
    assert _C._fused_stats()["flushes"] == flushes + 1
    out.square().mean().backward()
    assert_close(out, expected, atol=1e-5, rtol=1e-5)
    for got, want in zip(_grads(tpu), _grads(cpu)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("replay", ["1", "0"])
def test_repeated_call_reuses_the_compiled_programs(mode, replay, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_COMPILE_REPLAY", replay)  # read when a graph is compiled
    cpu = _mlp()
    model = copy.deepcopy(cpu).to("tpu")
    compiled = torch.compile(model, backend="tpu")
    x = torch.randn(6, 8)
    for _ in range(2):  # compiles forward and backward (and, in fused mode, the eager ops around them)
        compiled(x.to("tpu")).sum().backward()
    torch.tpu.synchronize()
    stats = _C._fused_stats()
    graphs = _compiled_graphs()
    for _ in range(3):
        out = compiled(x.to("tpu"))
        out.sum().backward()
    after = _C._fused_stats()
    assert _compiled_graphs() == graphs + 6  # 3 x (forward, backward)
    assert after["compiles"] == stats["compiles"]
    if replay == "1":  # launched directly: no trace, no module text
        assert after["replays"] == stats["replays"] + 6
    else:  # traced again; the module text finds the executable
        assert after["replays"] == stats["replays"]
        assert after["cache_hits"] >= stats["cache_hits"] + 6
    for _ in range(5):
        cpu(x).sum().backward()
    assert_close(out, cpu(x), atol=1e-5, rtol=1e-5)
    for got, want in zip(_grads(model), _grads(cpu)):  # 5 accumulated gradients
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 2 * 2, 5))


def test_cnn_batchnorm_training_updates_running_stats_like_cpu(mode):
    cpu = _cnn()
    tpu = copy.deepcopy(cpu).to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(4, 3, 8, 8, generator=g)
        cpu.zero_grad()
        tpu.zero_grad()
        expected = cpu(x)
        F.cross_entropy(expected, torch.arange(4)).backward()
        out = compiled(x.to("tpu"))
        F.cross_entropy(out, torch.arange(4, device="tpu")).backward()
        assert_close(out, expected, atol=1e-5, rtol=1e-4)
    for name, buf in cpu.named_buffers():
        got = dict(tpu.named_buffers())[name]
        assert_close(got, buf, atol=1e-6, rtol=1e-5)  # running_mean/var, num_batches_tracked == 3
    for got, want in zip(_grads(tpu), _grads(cpu)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_cnn_eval_no_grad_and_inference_mode_match_cpu(mode):
    cpu = _cnn()
    cpu(torch.randn(4, 3, 8, 8))  # non-trivial running stats
    cpu.eval()
    tpu = copy.deepcopy(cpu).to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        out = compiled(x.to("tpu"))
    assert not out.requires_grad
    assert_close(out, cpu(x).detach(), atol=1e-5, rtol=1e-4)
    with torch.inference_mode():
        out = compiled(x.to("tpu"))
    assert out.is_inference()
    assert_close(out, cpu(x).detach(), atol=1e-5, rtol=1e-4)


class _Attention(nn.Module):
    def __init__(self, d, heads, p):
        super().__init__()
        self.heads, self.p = heads, p
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        att = F.dropout(att.softmax(-1), self.p, self.training)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class _GPT(nn.Module):
    def __init__(self, vocab=17, d=32, layers=2, heads=4, p=0.2, max_len=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(nn.ModuleDict(dict(
            ln1=nn.LayerNorm(d), att=_Attention(d, heads, p), ln2=nn.LayerNorm(d),
            mlp=nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(p))))
            for _ in range(layers))
        self.drop = nn.Dropout(p)
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.drop(self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device)))
        for blk in self.blocks:
            x = x + blk["att"](blk["ln1"](x))
            x = x + blk["mlp"](blk["ln2"](x))
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _gpt_step(model, call, idx, targets, seed):
    torch.manual_seed(seed)
    model.zero_grad()
    loss = call(idx, targets)
    loss.backward()
    return loss.detach().cpu(), [p.grad.cpu() for p in model.parameters()]


def test_gpt_with_dropout_matches_eager_tpu_for_the_same_seed(mode):
    torch.manual_seed(0)
    eager = _GPT().to("tpu")
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model, backend="tpu")
    g = torch.Generator().manual_seed(2)
    idx = torch.randint(0, 17, (3, 12), generator=g).to("tpu")
    targets = torch.randint(0, 17, (3, 12), generator=g).to("tpu")
    for seed in (10, 11):
        want_loss, want_grads = _gpt_step(eager, eager, idx, targets, seed)
        got_loss, got_grads = _gpt_step(compiled_model, compiled, idx, targets, seed)
        # The same dropout masks (the device generator's seed and offset) and the same kernels.
        torch.testing.assert_close(got_loss, want_loss, atol=1e-5, rtol=1e-5)
        for got, want in zip(got_grads, want_grads):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    # Another seed gives other masks, so the comparison above is not vacuous.
    other_loss, _ = _gpt_step(compiled_model, compiled, idx, targets, 99)
    assert not torch.equal(other_loss, got_loss)


def test_gpt_eval_matches_cpu(mode):
    torch.manual_seed(0)
    cpu = _GPT().eval()
    tpu = copy.deepcopy(cpu).to("tpu")
    idx = torch.randint(0, 17, (2, 10))
    targets = torch.randint(0, 17, (2, 10))
    loss = torch.compile(tpu, backend="tpu")(idx.to("tpu"), targets.to("tpu"))
    assert_close(loss.detach(), cpu(idx, targets).detach(), atol=1e-5, rtol=1e-5)
