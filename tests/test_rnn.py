"""nn.LSTM / nn.GRU / nn.LSTMCell / nn.GRUCell on tpu (the fused cells _thnn_fused_{lstm,gru}_cell and their
backwards) against CPU: forward, backward and one SGD step. float32 results must be as close to a float64 CPU
reference as CPU float32 is (4x CPU's largest error, plus 1e-5), the rule of tests/opinfo/harness.py."""
import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

CPU_ERROR_FACTOR = 4
RTOL = ATOL = 1e-5


def assert_as_accurate(actual, cpu, ref, what):
    assert actual.device.type == "tpu", f"{what}: result is on {actual.device}"
    a, e, r = actual.detach().cpu().double(), cpu.detach().double(), ref.detach().double()
    assert a.shape == e.shape == r.shape, what
    bound = CPU_ERROR_FACTOR * (e - r).abs().max() + ATOL + RTOL * r.abs()
    err = (a - r).abs()
    assert bool((err <= bound).all()), f"{what}: tpu error {err.max():.3g}, CPU float32 error {(e - r).abs().max():.3g}"


def step(make, inputs, device, dtype):
    """Builds the module (seeded), runs forward, a sum-of-squares loss, backward and one SGD step.
    Returns the outputs, the gradients (inputs then parameters) and the updated parameters."""
    torch.manual_seed(0)
    mod = make().to(device=device, dtype=dtype)
    leaves = []

    def move(x):
        if isinstance(x, (tuple, list)):
            return type(x)(move(v) for v in x)
        x = x.detach().to(device=device, dtype=dtype, copy=True).requires_grad_()
        leaves.append(x)
        return x
    out = mod(*[move(x) for x in inputs])
    flat = []

    def collect(o):
        if isinstance(o, torch.Tensor):
            flat.append(o)
        elif hasattr(o, "data") and hasattr(o, "batch_sizes"):  # PackedSequence
            flat.append(o.data)
        elif isinstance(o, (tuple, list)):
            for v in o:
                collect(v)
    collect(out)
    loss = sum((o * o).sum() + o.sum() for o in flat)
    loss.backward()
    grads = [x.grad for x in leaves]
    grads += [p.grad for p in mod.parameters()]
    torch.optim.SGD(mod.parameters(), lr=0.1).step()
    return flat, grads, [p.detach() for p in mod.parameters()]


def check(make, inputs):
    t = step(make, inputs, "tpu", torch.float32)
    c = step(make, inputs, "cpu", torch.float32)
    r = step(make, inputs, "cpu", torch.float64)
    for name, a_list, c_list, r_list in zip(("output", "grad", "param"), t, c, r):
        assert len(a_list) == len(c_list) == len(r_list)
        for i, (a, e, ref) in enumerate(zip(a_list, c_list, r_list)):
            assert_as_accurate(a, e, ref, f"{name} {i}")


def seq(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("layers,bidirectional,batch_first", [(1, False, False), (2, True, True)])
def test_lstm(mode, layers, bidirectional, batch_first):
    x = seq(3, 4, 4) if batch_first else seq(4, 3, 4)
    check(lambda: nn.LSTM(4, 6, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first), [x])


def test_lstm_initial_state_proj_size(mode):
    h0, c0 = seq(4, 3, 2), seq(4, 3, 5)  # (layers * directions, batch, proj / hidden)
    check(lambda: nn.LSTM(4, 5, num_layers=2, bidirectional=True, proj_size=2), [seq(3, 3, 4), (h0, c0)])


def test_lstm_no_bias(mode):
    check(lambda: nn.LSTM(4, 6, bias=False), [seq(5, 2, 4)])


class Packed(nn.Module):
    """Runs the RNN over a padded batch packed by lengths and returns the padded output and final state."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        packed = pack_padded_sequence(x, torch.tensor([4, 2, 1]), batch_first=True)
        out, state = self.rnn(packed)
        return pad_packed_sequence(out, batch_first=True)[0], state


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_packed_sequence(mode, kind):
    cls = nn.LSTM if kind == "lstm" else nn.GRU
    check(lambda: Packed(cls(4, 6, bidirectional=True, batch_first=True)), [seq(3, 4, 4)])


@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)])
def test_gru(mode, layers, bidirectional):
    check(lambda: nn.GRU(4, 6, num_layers=layers, bidirectional=bidirectional), [seq(5, 3, 4), seq(layers * (1 + bidirectional), 3, 6)])


@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell(mode, bias):
    check(lambda: nn.LSTMCell(4, 6, bias=bias), [seq(3, 4), (seq(3, 6), seq(3, 6))])


def test_lstm_cell_unbatched(mode):
    check(lambda: nn.LSTMCell(4, 6), [seq(4)])


@pytest.mark.parametrize("bias", [True, False])
def test_gru_cell(mode, bias):
    check(lambda: nn.GRUCell(4, 6, bias=bias), [seq(3, 4), seq(3, 6)])


class Unrolled(nn.Module):
    """An LSTMCell unrolled over time (cell state carried), as seq2seq decoders do."""

    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(4, 5)

    def forward(self, x):
        h = c = torch.zeros(x.shape[1], 5, device=x.device, dtype=x.dtype)
        outs = []
        for t in range(x.shape[0]):
            h, c = self.cell(x[t], (h, c))
            outs.append(h)
        return torch.stack(outs)


def test_lstm_cell_unrolled_only_h_used(mode):
    # Only hy reaches the loss at the last step: the backward gets an undefined grad_cy there.
    check(Unrolled, [seq(4, 2, 4)])


def test_fused_cell_ops_direct(mode):
    ig, hg, cx = seq(2, 8), seq(2, 8) * 0.5, seq(2, 2)
    bi, bh = seq(8), seq(8)
    for args in [(ig, hg, cx, bi, bh), (ig, hg, cx)]:
        got = torch.ops.aten._thnn_fused_lstm_cell(*[a.to("tpu") for a in args])
        g = args[0] + args[1] + (args[3] + args[4] if len(args) > 3 else 0)
        i, f, c, o = g.chunk(4, 1)
        i, f, c, o = i.sigmoid(), f.sigmoid(), c.tanh(), o.sigmoid()
        cy = f * args[2] + i * c
        for a, e in zip(got, (o * cy.tanh(), cy, torch.cat([i, f, c, o], 1))):
            torch.testing.assert_close(a.cpu(), e)
    hx = seq(2, 2)
    got = torch.ops.aten._thnn_fused_gru_cell(ig[:, :6].to("tpu"), hg[:, :6].to("tpu"), hx.to("tpu"))
    r, z, n = ig[:, :6].chunk(3, 1)
    hr, hz, hn = hg[:, :6].chunk(3, 1)
    r, z = (r + hr).sigmoid(), (z + hz).sigmoid()
    n = (n + r * hn).tanh()
    torch.testing.assert_close(got[0].cpu(), n + z * (hx - n))


def test_fused_cell_bad_input(mode):
    d = "tpu"
    with pytest.raises(RuntimeError, match="_thnn_fused_lstm_cell"):
        torch.ops.aten._thnn_fused_lstm_cell(torch.randn(2, 8, device=d), torch.randn(2, 6, device=d), torch.randn(2, 2, device=d))
    with pytest.raises(RuntimeError, match="_thnn_fused_lstm_cell"):
        torch.ops.aten._thnn_fused_lstm_cell(torch.randn(2, 8, device=d), torch.randn(2, 8, device=d), torch.randn(2, 3, device=d))
    with pytest.raises(RuntimeError, match="_thnn_fused_gru_cell"):
        torch.ops.aten._thnn_fused_gru_cell(torch.randn(2, 6, device=d), torch.randn(2, 6, device=d), torch.randn(2, 2, device=d),
                                   torch.randn(6, device=d))
    with pytest.raises(RuntimeError, match="input.size"):
        nn.LSTM(4, 6).to(d)(torch.randn(5, 2, 3, device=d))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_double_backward(mode, kind):
    # create_graph=True takes ATen's differentiable cell backward (_thnn_differentiable_*), composed of tpu ops.
    def run(device):
        torch.manual_seed(0)
        cell = (nn.LSTMCell if kind == "lstm" else nn.GRUCell)(3, 4).to(device)
        x = seq(2, 3).to(device).requires_grad_()
        out = cell(x)
        loss = sum((o * o).sum() for o in out) if kind == "lstm" else (out * out).sum()
        g, = torch.autograd.grad(loss, x, create_graph=True)
        gg, = torch.autograd.grad(g.sum(), x)
        return g.detach(), gg
    for a, e in zip(run("tpu"), run("cpu")):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-6)


def test_lstm_reduced_precision(mode):
    # float16 weights and input: the cell computes in float32 (as CUDA's accscalar_t) and stores float16.
    torch.manual_seed(0)
    m = nn.LSTM(4, 5)
    x = seq(3, 2, 4)
    ref, _ = m(x)
    out, (h, c) = m.to("tpu").half()(x.to("tpu").half())
    assert out.dtype == h.dtype == c.dtype == torch.float16
    # Bound: a few float16 roundings (eps 9.8e-4) of weights, input and each of the 3 steps, outputs below 1.
    torch.testing.assert_close(out.float().cpu(), ref.detach(), rtol=0, atol=5e-3)
