"""Miscellaneous ops models call (issue 14), each against CPU: multinomial, histc, histogram, bincount,
EmbeddingBag, weight norm, embedding renorm, multi_margin_loss, cdist, grid_sample, TransformerEncoderLayer's
fast path, ctc_loss, antialiased interpolate, segment_reduce."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import assert_close, nonfinite_ok

CPU_ERROR_FACTOR = 4
RTOL = ATOL = 1e-5


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def assert_as_accurate(actual, cpu, ref, what=""):
    """float32 tpu result at most 4x CPU float32's largest error against float64 (plus 1e-5), as the OpInfo
    harness requires."""
    assert actual.device.type == "tpu", f"{what}: result is on {actual.device}"
    a, e, r = actual.detach().cpu().double(), cpu.detach().double(), ref.detach().double()
    assert a.shape == e.shape == r.shape, what
    bound = CPU_ERROR_FACTOR * (e - r).abs().max() + ATOL + RTOL * r.abs()
    err = (a - r).abs()
    assert bool((err <= bound).all()), f"{what}: tpu error {err.max():.3g}, CPU float32 error {(e - r).abs().max():.3g}"


def check_fn(fn, *inputs, grad=True):
    """fn(*inputs) on tpu float32 vs CPU float32 and float64: outputs, and gradients of a fixed cotangent
    for every floating input."""
    def run(device, dtype):
        xs = [x.detach().to(device=device, dtype=dtype if x.is_floating_point() else x.dtype, copy=True)
              .requires_grad_(grad and x.is_floating_point()) if isinstance(x, torch.Tensor) else x for x in inputs]
        out = fn(*xs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        grads = []
        if grad:
            cot = [torch.randn(o.shape, generator=gen(7)).to(device=device, dtype=o.dtype) for o in outs]
            leaves = [x for x in xs if isinstance(x, torch.Tensor) and x.requires_grad]
            grads = torch.autograd.grad(outs, leaves, cot, allow_unused=True)
            grads = [g if g is not None else torch.zeros_like(x) for g, x in zip(grads, leaves)]
        return outs, grads
    t, c, r = run("tpu", torch.float32), run("cpu", torch.float32), run("cpu", torch.float64)
    for k in range(2):
        assert len(t[k]) == len(c[k])
        for i, (a, e, ref) in enumerate(zip(t[k], c[k], r[k])):
            if e.is_floating_point():
                assert_as_accurate(a, e, ref, f"{'output' if k == 0 else 'grad'} {i}")
            else:
                assert_close(a, e)


# ---- multinomial, histc, histogram, bincount ------------------------------------------------------

def test_multinomial_without_replacement(mode):
    p = torch.tensor([[0.0, 1.0, 2.0, 0.0, 4.0], [1.0, 1.0, 0.0, 1.0, 1.0]])
    torch.manual_seed(3)
    s = torch.multinomial(p.to("tpu"), 3)
    assert s.device.type == "tpu" and s.dtype == torch.int64 and s.shape == (2, 3)
    s = s.cpu()
    for row, pr in zip(s, p):
        assert len(set(row.tolist())) == 3  # no repeats
        assert all(pr[i] > 0 for i in row)  # never a zero-probability category
    torch.manual_seed(3)
    assert torch.equal(torch.multinomial(p.to("tpu"), 3).cpu(), s)  # seeded: reproducible
    one = torch.multinomial(p[0].to("tpu"), 1)
    assert one.shape == (1,) and p[0][one.cpu()].item() > 0


def test_multinomial_frequencies(mode):
    # 1-d and 2-d; with replacement: empirical frequencies match the distribution (4000 draws per row:
    # the bound is ~6 standard deviations, so the test fails only on a wrong sampler).
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    n = 4000
    torch.manual_seed(0)
    for replacement in (True, False):
        if replacement:
            s = torch.multinomial(p.to("tpu"), n, replacement=True).cpu()
        else:  # one draw per call without replacement is a draw from p
            s = torch.stack([torch.multinomial(p.to("tpu"), 1).cpu()[:, 0] for _ in range(200)], 1)
        freq = torch.stack([torch.bincount(r, minlength=4).double() / r.numel() for r in s])
        sd = (p.double() * (1 - p.double()) / s.shape[1]).sqrt()
        assert bool(((freq - p.double()).abs() <= 6 * sd + 1e-12).all()), freq
        assert bool((freq[0, 1] == 0))
    s1 = torch.multinomial(p[0].to("tpu"), 7, replacement=True)
    assert s1.shape == (7,)


def test_multinomial_bad_input(mode):
    d = "tpu"
    with pytest.raises(RuntimeError, match="probability tensor contains"):
        torch.multinomial(torch.tensor([0.5, -0.1], device=d), 1)
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        torch.multinomial(torch.zeros(2, 3, device=d), 1)
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(torch.ones(3, device=d), 4)


@pytest.mark.parametrize("bins,lo,hi", [(5, 0, 0), (7, -1.0, 0.5), (4, 0.25, 0.25)])
def test_histc(mode, bins, lo, hi):
    x = torch.randn(50, generator=gen())
    x[3] = 0.5  # on the right edge: the last bin
    assert_close(torch.histc(x.to("tpu"), bins, lo, hi), torch.histc(x, bins, lo, hi))
    assert_close(torch.histc(torch.empty(0, device="tpu"), 3), torch.histc(torch.empty(0), 3))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x.to("tpu"), 3, 1, 0)


@pytest.mark.parametrize("density", [False, True])
def test_histogram(mode, density):
    x = torch.randn(40, generator=gen())
    w = torch.rand(40, generator=gen(1))
    for kw in [dict(bins=6), dict(bins=5, range=(-1.0, 1.0)), dict(bins=torch.tensor([-2.0, -0.5, 0.0, 0.1, 3.0]))]:
        kw_tpu = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        for weight in (None, w):
            e = torch.histogram(x, weight=weight, density=density, **kw)
            a = torch.histogram(x.to("tpu"), weight=None if weight is None else weight.to("tpu"), density=density,
                                **kw_tpu)
            assert_close(a.hist, e.hist)
            assert_close(a.bin_edges, e.bin_edges)


def test_bincount(mode):
    x = torch.tensor([0, 3, 3, 1, 7, 3])
    assert_close(torch.bincount(x.to("tpu")), torch.bincount(x))
    assert_close(torch.bincount(x.to("tpu"), minlength=10), torch.bincount(x, minlength=10))
    for w in (torch.rand(6, generator=gen()), torch.rand(6, generator=gen(), dtype=torch.float64),
              torch.arange(6, dtype=torch.int32)):
        assert_close(torch.bincount(x.to("tpu"), w.to("tpu")), torch.bincount(x, w))
    assert_close(torch.bincount(torch.empty(0, dtype=torch.long, device="tpu"), minlength=2),
                 torch.bincount(torch.empty(0, dtype=torch.long), minlength=2))
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(torch.tensor([1, -1], device="tpu"))
    with pytest.raises(RuntimeError, match="same length"):
        torch.bincount(x.to("tpu"), torch.ones(2, device="tpu"))


# ---- EmbeddingBag, embedding renorm -------------------------------------------------------------

@pytest.mark.parametrize("bag_mode", ["sum", "mean", "max"])
def test_embedding_bag(mode, bag_mode):
    w = torch.randn(10, 3, generator=gen())
    idx2 = torch.tensor([[1, 2, 4], [4, 3, 9]])
    check_fn(lambda w: F.embedding_bag(idx2.to(w.device), w, mode=bag_mode), w)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 2, 2, 5])  # bag 1 is empty
    check_fn(lambda w: F.embedding_bag(idx.to(w.device), w, offsets.to(w.device), mode=bag_mode, padding_idx=4), w)
    last = torch.tensor([0, 3, 8])
    check_fn(lambda w: F.embedding_bag(idx.to(w.device), w, last.to(w.device), mode=bag_mode,
                                       include_last_offset=True), w)


def test_embedding_bag_per_sample_weights_and_module(mode):
    w = torch.randn(10, 3, generator=gen())
    psw = torch.rand(8, generator=gen(1))
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 2, 2, 5])
    check_fn(lambda w, p: F.embedding_bag(idx.to(w.device), w, offsets.to(w.device), mode="sum",
                                          per_sample_weights=p, padding_idx=2), w, psw)
    # scale_grad_by_freq: CUDA's rule (each row's gradient divided by how often its index occurs); CPU's
    # kernel of this torch version looks counts up at the wrong position, so the reference is CPU's unscaled
    # gradient divided by the counts.
    wt = w.to("tpu").requires_grad_()
    F.embedding_bag(idx.to("tpu"), wt, offsets.to("tpu"), scale_grad_by_freq=True).sum().backward()
    wc = w.clone().requires_grad_()
    F.embedding_bag(idx, wc, offsets).sum().backward()
    assert_close(wt.grad, wc.grad / torch.bincount(idx, minlength=10).clamp_min(1).unsqueeze(1).float())
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(10, 3, mode="mean")
    with torch.no_grad():
        assert_close(bag.to("tpu")(idx.to("tpu"), offsets.to("tpu")), bag.cpu()(idx, offsets))
    with pytest.raises(RuntimeError, match="per_sample_weights"):
        F.embedding_bag(idx.to("tpu"), w.to("tpu"), offsets.to("tpu"), mode="max", per_sample_weights=psw.to("tpu"))


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm(mode, norm_type):
    torch.manual_seed(0)
    emb = nn.Embedding(10, 4, max_norm=1.5, norm_type=norm_type)
    x = torch.tensor([[1, 2, 2], [7, 1, 0]])
    emb_tpu = nn.Embedding(10, 4, max_norm=1.5, norm_type=norm_type).to("tpu")
    with torch.no_grad():
        emb_tpu.weight.copy_(emb.weight.to("tpu"))
    out_cpu, out_tpu = emb(x), emb_tpu(x.to("tpu"))
    assert_close(out_tpu, out_cpu)
    assert_close(emb_tpu.weight, emb.weight.detach())  # renormalised in place, others untouched
    out_cpu.sum().backward()
    out_tpu.sum().backward()
    assert_close(emb_tpu.weight.grad, emb.weight.grad)


# ---- weight norm, multi_margin_loss, cdist ------------------------------------------------------

@pytest.mark.parametrize("dim", [0, -1])
def test_weight_norm(mode, dim):
    v = torch.randn(4, 3, 5, generator=gen())
    g = torch.rand(4, 1, 1, generator=gen(1)) + 0.5 if dim == 0 else torch.rand(1, 1, 5, generator=gen(1)) + 0.5
    check_fn(lambda v, g: torch._weight_norm(v, g, dim), v, g)
    check_fn(lambda v, g: torch._weight_norm_interface(v, g, dim % 3), v, g, grad=False)


def test_weight_norm_module_trains(mode):
    def run(device):
        torch.manual_seed(0)
        lin = nn.utils.parametrizations.weight_norm(nn.Linear(5, 3)).to(device)
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        x = torch.randn(4, 5, generator=gen()).to(device)
        for _ in range(3):
            opt.zero_grad()
            lin(x).square().sum().backward()
            opt.step()
        return [p.detach().cpu() for p in lin.parameters()]
    for a, e in zip(run("tpu"), run("cpu")):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p,reduction", [(1, "mean"), (2, "sum"), (1, "none")])
def test_multi_margin_loss(mode, p, reduction):
    x = torch.randn(5, 4, generator=gen())
    y = torch.tensor([0, 3, 1, 1, 2])
    w = torch.rand(4, generator=gen(1))
    check_fn(lambda x: F.multi_margin_loss(x, y.to(x.device), p=p, margin=0.7, reduction=reduction), x)
    check_fn(lambda x: F.multi_margin_loss(x, y.to(x.device), p=p, weight=w.to(x.device, x.dtype), reduction=reduction), x)
    check_fn(lambda x: F.multi_margin_loss(x, y[1].to(x.device), p=p, reduction=reduction), x[0])
    check_fn(lambda x: F.multi_margin_loss(x, torch.tensor(0, device=x.device), p=p, reduction=reduction), x[0, 0])
    with pytest.raises(RuntimeError, match="only p == 1 and p == 2"):
        torch.ops.aten.multi_margin_loss(x.to("tpu"), y.to("tpu"), 3)
    with pytest.raises(RuntimeError, match="inconsistent target size"):
        F.multi_margin_loss(x.to("tpu"), y[:3].to("tpu"))


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 3.0, float("inf")])
def test_cdist(mode, p):
    x1 = torch.randn(2, 5, 3, generator=gen())
    x2 = torch.randn(1, 4, 3, generator=gen(1))
    x2[0, 1] = x1[0, 2]  # a zero distance
    cm = "donot_use_mm_for_euclid_dist"
    check_fn(lambda a, b: torch.cdist(a, b, p=p, compute_mode=cm), x1, x2)
    check_fn(lambda a, b: torch.cdist(a, b, p=p), x1[0], x2[0])


# ---- grid_sample ----------------------------------------------------------------------------------

@pytest.mark.parametrize("interp,padding,align", [
    ("bilinear", "zeros", False), ("bilinear", "border", True), ("bilinear", "reflection", False),
    ("bilinear", "reflection", True), ("nearest", "zeros", True), ("nearest", "reflection", False),
    ("bicubic", "zeros", False), ("bicubic", "border", True), ("bicubic", "reflection", False)])
def test_grid_sample(mode, interp, padding, align):
    x = torch.randn(2, 3, 5, 4, generator=gen())
    grid = torch.rand(2, 3, 6, 2, generator=gen(1)) * 2.6 - 1.3  # some points outside [-1, 1]
    if interp == "nearest":  # keep away from the .5 ties, where float rounding decides the pixel
        grid = torch.rand(2, 3, 6, 2, generator=gen(1)).mul(2.6).sub(1.3)
        grid = grid.where(((grid + 1) * 2).frac().sub(0.5).abs() > 0.05, grid + 0.07)
    check_fn(lambda x, g: F.grid_sample(x, g, mode=interp, padding_mode=padding, align_corners=align), x, grid)


def test_grid_sample_bad_input(mode):
    with pytest.raises(RuntimeError, match="grid"):
        F.grid_sample(torch.randn(1, 2, 4, 4, device="tpu"), torch.rand(1, 3, 3, 3, device="tpu"), align_corners=False)


# ---- TransformerEncoderLayer / MultiheadAttention inference fast paths ------------------------------

def run_no_grad(make, device, dtype, *inputs, **kwargs):
    torch.manual_seed(0)
    m = make().to(device=device, dtype=dtype).eval()
    with torch.no_grad():
        return m(*[x.to(device=device, dtype=dtype if x.is_floating_point() else x.dtype) for x in inputs], **kwargs)


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
@pytest.mark.parametrize("masked", [False, True])
def test_transformer_encoder_layer_fast_path(mode, norm_first, activation, masked):
    make = lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, activation=activation, batch_first=True,
                                              norm_first=norm_first)
    x = torch.randn(3, 5, 8, generator=gen())
    kw = {}
    if masked:
        kw_cpu = dict(src_key_padding_mask=torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]]))
    else:
        kw_cpu = {}
    res = [run_no_grad(make, d, t, x, **{k: v.to(d) for k, v in kw_cpu.items()})
           for d, t in (("tpu", torch.float32), ("cpu", torch.float32), ("cpu", torch.float64))]
    assert_as_accurate(*res, "encoder layer output")
    torch.manual_seed(0)
    import unittest.mock
    with unittest.mock.patch.object(torch, "_transformer_encoder_layer_fwd", side_effect=AssertionError("fast path")):
        with pytest.raises(AssertionError, match="fast path"):  # the fast path really ran
            run_no_grad(make, "tpu", torch.float32, x)


@pytest.mark.parametrize("masked", [False, True])
def test_multihead_attention_fast_path(mode, masked):
    make = lambda: nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 4, 8, generator=gen())
    mask = torch.tensor([[False, False, True, True], [False] * 4]) if masked else None
    res = []
    for d, t in (("tpu", torch.float32), ("cpu", torch.float32), ("cpu", torch.float64)):
        kw = dict(need_weights=False, key_padding_mask=None if mask is None else mask.to(d))
        res.append(run_no_grad(make, d, t, x, x, x, **kw)[0])
    assert_as_accurate(*res, "attention output")


def test_masked_softmax(mode):
    x = torch.randn(2, 2, 3, 3, generator=gen())
    m = torch.tensor([[False, True, False], [True, True, True]])
    rand = torch.rand(2, 2, 3, 3, generator=gen(1)) > 0.5
    rand[..., 0] = False
    for mask, mt in [(m[:1].expand(2, 3).contiguous(), 1), (rand, 2), (m[:1].expand(3, 3).contiguous(), 0)]:
        e = torch._masked_softmax(x, mask, 3, mt)
        assert_close(torch._masked_softmax(x.to("tpu"), mask.to("tpu"), 3, mt), e)
    full = torch.zeros(2, 2, 3, 3, dtype=torch.bool)
    full[0, 0, 1] = True  # a fully masked row is NaN, as on CPU
    with nonfinite_ok():
        assert_close(torch._masked_softmax(x.to("tpu"), full.to("tpu"), 3, 2), torch._masked_softmax(x, full, 3, 2),
                     equal_nan=True)


# ---- antialiased interpolate ------------------------------------------------------------------------

@pytest.mark.parametrize("interp,size,scale,align", [("bilinear", (4, 3), None, False), ("bicubic", (11, 5), None, True),
                                                    ("bilinear", None, 0.4, False), ("bicubic", (9, 14), None, False)])
def test_interpolate_antialias(mode, interp, size, scale, align):
    x = torch.randn(2, 3, 10, 7, generator=gen())
    check_fn(lambda x: F.interpolate(x, size=size, scale_factor=scale, mode=interp, align_corners=align,
                                     antialias=True), x)


# ---- segment_reduce -------------------------------------------------------------------------------

@pytest.mark.parametrize("reduce,initial", [("sum", None), ("mean", None), ("mean", 0.5), ("max", None),
                                            ("min", 0.5), ("prod", None), ("prod", 0.5)])
def test_segment_reduce(mode, reduce, initial):
    data = torch.randn(7, 3, generator=gen())
    data[2, 1] = 0.0  # a zero in a prod segment
    lengths = torch.tensor([2, 0, 4, 1])
    fn = lambda d: torch.segment_reduce(d, reduce, lengths=lengths.to(d.device), initial=initial)
    with nonfinite_ok():  # an empty segment's mean is NaN, its max -inf, as on CPU
        out = fn(data.to("tpu"))
        assert_close(out, fn(data), equal_nan=True)
    # gradients (the empty segment gets none)
    check = lambda d: fn(d)[[0, 2, 3]]
    check_fn(check, data)
    offsets = torch.tensor([0, 2, 2, 6, 7])
    fo = lambda d: torch.segment_reduce(d, reduce, offsets=offsets.to(d.device), initial=initial)[[0, 2, 3]]
    check_fn(fo, data)


def test_segment_reduce_2d_lengths(mode):
    data = torch.randn(2, 5, 3, generator=gen())
    lengths = torch.tensor([[2, 3], [4, 1]])
    check_fn(lambda d: torch.segment_reduce(d, "sum", lengths=lengths.to(d.device), axis=1), data)
    check_fn(lambda d: torch.segment_reduce(d, "max", lengths=lengths.to(d.device), axis=1), data)
    with pytest.raises(RuntimeError, match="unsupported reduction"):
        torch.segment_reduce(data.to("tpu"), "median", lengths=lengths.to("tpu"), axis=1)


# ---- ctc_loss -------------------------------------------------------------------------------------

@pytest.mark.parametrize("reduction,concatenated", [("mean", False), ("sum", True), ("none", False)])
def test_ctc_loss(mode, reduction, concatenated):
    t_len, n, c = 8, 3, 5
    logits = torch.randn(t_len, n, c, generator=gen())
    targets = torch.tensor([[1, 2, 2, 4], [3, 1, 0, 0], [4, 4, 2, 0]])  # repeats need a blank between
    tgt_len = torch.tensor([4, 2, 3])
    in_len = torch.tensor([8, 5, 7])
    if concatenated:
        targets = torch.cat([targets[i, :l] for i, l in enumerate(tgt_len.tolist())])
    fn = lambda x: F.ctc_loss(x.log_softmax(2), targets.to(x.device), in_len, tgt_len, blank=0, reduction=reduction)
    check_fn(fn, logits)


def test_ctc_loss_zero_infinity_and_blank(mode):
    logits = torch.randn(4, 2, 4, generator=gen())
    targets = torch.tensor([[1, 1, 1], [2, 3, 0]])  # sample 0 needs 5 frames: impossible in 3
    in_len, tgt_len = torch.tensor([3, 4]), torch.tensor([3, 2])
    for zi in (True, False):
        fn = lambda x: F.ctc_loss(x.log_softmax(2), targets.to(x.device), in_len, tgt_len, blank=0,
                                  reduction="none", zero_infinity=zi)
        if zi:
            check_fn(fn, logits)
        else:
            with nonfinite_ok():
                assert_close(fn(logits.to("tpu")), fn(logits))
    fn = lambda x: F.ctc_loss(x.log_softmax(2), (targets.to(x.device) + 1) % 4, in_len, torch.tensor([1, 2]),
                              blank=3, reduction="sum")
    check_fn(fn, logits)


def test_ctc_loss_module_tensor_lengths(mode):
    logits = torch.randn(6, 2, 4, generator=gen())
    targets = torch.tensor([[1, 2], [3, 3]])
    loss = nn.CTCLoss()
    check_fn(lambda x: loss(x.log_softmax(2), targets.to(x.device), torch.tensor([6, 6]).to(x.device),
                            torch.tensor([2, 2]).to(x.device)), logits)


# ---- repeat_interleave, pdist, multilabel_margin_loss -------------------------------------------

def test_repeat_interleave(mode):
    r = torch.tensor([2, 0, 3, 1])
    assert_close(torch.repeat_interleave(r.to("tpu")), torch.repeat_interleave(r))
    x = torch.randn(4, 3, generator=gen())
    assert_close(x.to("tpu").repeat_interleave(r.to("tpu"), dim=0), x.repeat_interleave(r, dim=0))
    assert_close(x.to("tpu").repeat_interleave(2, dim=1), x.repeat_interleave(2, dim=1))
    assert_close(torch.repeat_interleave(r.to("tpu"), output_size=6), torch.repeat_interleave(r, output_size=6))
    check_fn(lambda x: x.repeat_interleave(r.to(x.device), dim=0), x)
    with pytest.raises(RuntimeError, match="negative"):
        torch.repeat_interleave(torch.tensor([1, -1], device="tpu"))


@pytest.mark.parametrize("p", [1.0, 2.0, 0.5, float("inf")])
def test_pdist(mode, p):
    x = torch.randn(5, 3, generator=gen())
    x[3] = x[1]  # a zero distance
    check_fn(lambda x: F.pdist(x, p=p), x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss(mode, reduction):
    x = torch.randn(3, 4, generator=gen())
    t = torch.tensor([[3, 0, -1, 1], [1, 2, 3, -1], [-1, 0, 0, 0]])
    check_fn(lambda x: F.multilabel_margin_loss(x, t.to(x.device), reduction=reduction), x)
    check_fn(lambda x: F.multilabel_margin_loss(x, t[1].to(x.device), reduction=reduction), x[0])


@pytest.mark.parametrize("interp,padding,align", [("bilinear", "zeros", False), ("bilinear", "border", True),
                                                  ("bilinear", "reflection", False), ("nearest", "zeros", True)])
def test_grid_sample_3d(mode, interp, padding, align):
    x = torch.randn(2, 2, 3, 4, 5, generator=gen())
    grid = torch.rand(2, 2, 3, 2, 3, generator=gen(1)) * 2.4 - 1.2
    if interp == "nearest":  # away from .5 ties
        grid = grid.where(((grid + 1) * 2).frac().sub(0.5).abs() > 0.05, grid + 0.07)
    check_fn(lambda x, g: F.grid_sample(x, g, mode=interp, padding_mode=padding, align_corners=align), x, grid)


@pytest.mark.parametrize("density", [False, True])
def test_histogramdd(mode, density):
    x = torch.randn(30, 2, generator=gen())
    w = torch.rand(30, generator=gen(1))
    for kw in [dict(bins=[3, 4]), dict(bins=[2, 5], range=[-1.0, 1.0, -2.0, 0.5]),
               dict(bins=[torch.tensor([-2.0, 0.0, 2.0]), torch.tensor([-1.0, -0.2, 0.3, 1.0])])]:
        kw_tpu = {k: [b.to("tpu") for b in v] if k == "bins" and isinstance(v[0], torch.Tensor) else v
                  for k, v in kw.items()}
        for weight in (None, w):
            e = torch.histogramdd(x, weight=weight, density=density, **kw)
            a = torch.histogramdd(x.to("tpu"), weight=None if weight is None else weight.to("tpu"), density=density,
                                  **kw_tpu)
            assert_close(a.hist, e.hist)
            for ea, ee in zip(a.bin_edges, e.bin_edges):
                assert_close(ea, ee)


@pytest.mark.parametrize("p,dim", [(2.0, 0), (1.0, 1), (3.0, -1)])
def test_renorm(mode, p, dim):
    x = torch.randn(3, 4, 2, generator=gen())
    check_fn(lambda x: torch.renorm(x, p, dim, 1.2), x)
    t = x.to("tpu")
    t.renorm_(p, dim, 1.2)
    assert_close(t, torch.renorm(x, p, dim, 1.2))
    with pytest.raises(RuntimeError, match="non-positive-norm"):
        torch.renorm(x.to("tpu"), 0, 0, 1.0)


@pytest.mark.parametrize("rank", [2, 3])
def test_fractional_max_pool(mode, rank):
    # With explicit samples the windows are CPU's (pseudo-random intervals): values, indices and gradients match.
    g = torch.Generator().manual_seed(0)
    shape, kernel, out = ((2, 3, 11, 17), (2, 3), (4, 5)) if rank == 2 else ((2, 2, 7, 9, 10), (2, 2, 3), (3, 1, 5))
    x = torch.randn(*shape, generator=g)
    samples = torch.rand(shape[0], shape[1], rank, generator=g)
    fn = torch.nn.functional.fractional_max_pool2d if rank == 2 else torch.nn.functional.fractional_max_pool3d
    xt = x.to("tpu").requires_grad_()
    xc = x.clone().requires_grad_()
    yt, it = fn(xt, kernel, output_size=out, return_indices=True, _random_samples=samples.to("tpu"))
    yc, ic = fn(xc, kernel, output_size=out, return_indices=True, _random_samples=samples)
    assert torch.equal(yt.detach().cpu(), yc.detach()) and torch.equal(it.cpu(), ic)
    cot = torch.randn(yc.shape, generator=g)
    yt.backward(cot.to("tpu"))
    yc.backward(cot)
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)
    # Unbatched input, and the generator's own samples: the windows hold the maxima.
    y, i = fn(x[0].to("tpu"), kernel, output_size=out, return_indices=True)
    flat = x[0].flatten(1)
    torch.testing.assert_close(y.cpu().flatten(1), flat.gather(1, i.cpu().flatten(1)))


def test_nested_tensor_from_mask_left_aligned(mode):
    # TransformerEncoder's sparsity fast path asks it first (its mask: true for a token); equal to CPU's answer.
    masks = [[[1, 1, 0], [1, 0, 0]], [[1, 0, 1], [1, 1, 1]], [[0, 0, 0], [1, 1, 1]], [[0, 1, 1], [1, 1, 0]]]
    for rows in masks + [[[1], [0]]]:
        mask = torch.tensor(rows, dtype=torch.bool)
        t = torch.zeros(mask.shape[0], mask.shape[1], 4)
        want = torch._nested_tensor_from_mask_left_aligned(t, mask)
        assert torch._nested_tensor_from_mask_left_aligned(t.to("tpu"), mask.to("tpu")) == want, rows
    t = torch.zeros(2, 3, 4, device="tpu")
    with pytest.raises(RuntimeError, match="expected mask to be of type Bool"):
        torch._nested_tensor_from_mask_left_aligned(t, torch.ones(2, 3, device="tpu"))
    with pytest.raises(RuntimeError, match="mask size should match input size"):
        torch._nested_tensor_from_mask_left_aligned(t, torch.ones(2, 4, dtype=torch.bool, device="tpu"))
    # The module that asks: a Transformer in eval with a key padding mask equals CPU.
    torch.manual_seed(0)
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16).eval()
    src, tgt = torch.randn(3, 2, 8), torch.randn(4, 2, 8)
    pad = torch.tensor([[False, False, True], [False, False, False]])
    want = model(src, tgt, src_key_padding_mask=pad).detach()
    exact = copy.deepcopy(model).double()(src.double(), tgt.double(), src_key_padding_mask=pad).detach()
    tol = 4 * (want.double() - exact).abs().max().item() + torch.finfo(torch.float32).eps
    got = model.to("tpu")(src.to("tpu"), tgt.to("tpu"), src_key_padding_mask=pad.to("tpu"))
    assert_close(got.detach(), want, rtol=0, atol=tol)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_binary_search(right, mode):
    # Boundaries of every length up to past a power of two (the unrolled search's step count), batched rows,
    # ties, and NaN on both sides, which CPU's binary search sends to the end.
    torch.manual_seed(0)
    for m in [1, 2, 3, 7, 8, 9, 513]:
        for dtype in [torch.float32, torch.int64]:
            seq = torch.sort(torch.randint(-5, 5, (m,)).to(dtype))[0]
            x = torch.randint(-7, 7, (3, 33)).to(dtype)
            assert torch.equal(torch.searchsorted(seq.to("tpu"), x.to("tpu"), right=right).cpu(),
                               torch.searchsorted(seq, x, right=right))
            rows = torch.sort(torch.randint(-5, 5, (2, 3, m)).to(dtype), -1)[0]
            xr = torch.randint(-7, 7, (2, 3, 5)).to(dtype)
            assert torch.equal(torch.searchsorted(rows.to("tpu"), xr.to("tpu"), right=right).cpu(),
                               torch.searchsorted(rows, xr, right=right))
    seq = torch.tensor([0.0, 1.0, 1.0, 2.0, float("nan")])
    x = torch.tensor([float("nan"), 1.0, -1.0, 3.0, 2.0])
    assert torch.equal(torch.searchsorted(seq.to("tpu"), x.to("tpu"), right=right).cpu(),
                       torch.searchsorted(seq, x, right=right))
    assert torch.equal(torch.bucketize(x.to("tpu"), seq[:4].to("tpu"), right=right, out_int32=True).cpu(),
                       torch.bucketize(x, seq[:4], right=right, out_int32=True))
    empty = torch.searchsorted(torch.zeros(0, device="tpu"), torch.ones(4, device="tpu"), right=right)
    assert empty.cpu().tolist() == [0, 0, 0, 0]
