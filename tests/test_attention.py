"""Scaled dot-product attention as one op (csrc/aten/AttentionKernels.cpp): F.scaled_dot_product_attention on tpu
picks SDPBackend.OVERRIDEABLE where the shapes fit and runs `_scaled_dot_product_fused_attention_overrideable`
and its backward, one program each in Strict mode; eager training whose probabilities are no larger than q, k and
v keeps them for the backward instead (csrc/aten/AttentionAutograd.cpp), also one program each way. Values and
gradients against float64 CPU in all three modes, with a tolerance from CPU float32's own error, on both paths;
the math path where the user asks for it, for dropout and for shapes the fused op does not take; torch.compile
through it."""
import contextlib

import pytest
import torch
import torch.nn.functional as F
import torch_tpu
from torch.nn.attention import SDPBackend, sdpa_kernel


def _inputs(b, hq, hk, lq, lk, d, dv, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, lq, d, generator=g), torch.randn(b, hk, lk, d, generator=g),
            torch.randn(b, hk, lk, dv, generator=g))


def _bool_mask(b, lq, lk):
    m = torch.zeros(b, 1, lq, lk, dtype=torch.bool)
    m[..., : lk // 2 + 1] = True
    m[:, :, 1, :] = False  # a row with every key masked out: zeros, as ATen's _safe_softmax gives
    return m


# name: (batch, query heads, key heads, query len, key len, head dim, value dim, kwargs builder)
CASES = {
    "plain": (2, 4, 4, 5, 7, 8, 8, lambda: {}),
    "causal": (2, 2, 2, 6, 6, 8, 4, lambda: {"is_causal": True}),
    "causal_rectangular": (1, 2, 2, 3, 5, 8, 8, lambda: {"is_causal": True}),
    "gqa": (2, 4, 2, 5, 7, 8, 8, lambda: {"enable_gqa": True}),
    # peaked rows (scores spread over hundreds): the backward's recomputed probabilities must keep the top one at 1
    "large_scores": (2, 2, 2, 4, 6, 8, 8, lambda: {"scale": 30.0}),
    "gqa_causal_scale": (1, 6, 2, 4, 4, 16, 8, lambda: {"enable_gqa": True, "is_causal": True, "scale": 0.3}),
    "bool_mask": (2, 2, 2, 4, 6, 8, 8, lambda: {"attn_mask": _bool_mask(2, 4, 6)}),
    "bool_mask_causal": (1, 2, 2, 4, 6, 8, 8, lambda: {"attn_mask": _bool_mask(1, 4, 6), "is_causal": True}),
    "float_bias": (2, 3, 3, 4, 5, 8, 8, lambda: {"attn_mask": torch.randn(1, 3, 4, 5,
                                                                          generator=torch.Generator().manual_seed(9),
                                                                          requires_grad=True)}),
    # keys longer than q, k and v are wide: the probabilities are recomputed in the backward (the one op's)
    "plain_long": (1, 2, 2, 12, 40, 4, 4, lambda: {}),
    "causal_long": (1, 2, 2, 24, 24, 4, 4, lambda: {"is_causal": True}),
    "gqa_long": (1, 4, 2, 16, 32, 4, 4, lambda: {"enable_gqa": True}),
    "bool_mask_long": (1, 2, 2, 16, 40, 4, 4, lambda: {"attn_mask": _bool_mask(1, 16, 40)}),
}

KEEPS = "torch::autograd::CppNode<tpu::aten::(anonymous namespace)::AttentionKeepingProbabilities>"
RECOMPUTES = "ScaledDotProductFusedAttentionOverrideableBackward0"


def _backward_name(q, k, v):
    """Which backward a training call gets: the probabilities (float32 for every floating dtype but float64) are
    kept where they take no more bytes than q, k and v together."""
    b, hq, lq, lk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    item = 8 if q.dtype == torch.float64 else 4
    fits = b * hq * lq * lk * item <= sum(t.numel() * t.element_size() for t in (q, k, v))
    return KEEPS if fits else RECOMPUTES


def _run(args, kwargs, device, dtype):
    leaves = [a.detach().to(device, dtype).requires_grad_() for a in args]
    kw = {}
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor):
            v = v.detach().to(device, dtype if v.is_floating_point() else v.dtype)
            if v.is_floating_point():
                v.requires_grad_()
                leaves.append(v)
        kw[k] = v
    out = F.scaled_dot_product_attention(*leaves[:3], **kw)
    gout = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape).to(device, dtype)
    (out * gout).sum().backward()
    return out, [t.grad for t in leaves]


def _check(case, dtype=torch.float32, seeds=3):
    """Each output and gradient within four times CPU's largest error against float64 in this dtype over a few
    seeds (a peaked softmax makes one seed's error a matter of luck), at least the dtype's resolution."""
    b, hq, hk, lq, lk, d, dv, make_kwargs = CASES[case]
    runs = []
    for seed in range(seeds):
        args, kwargs = _inputs(b, hq, hk, lq, lk, d, dv, seed=seed), make_kwargs()
        exact, want, got = (_run(args, kwargs, device, dt) for device, dt in
                            (("cpu", torch.float64), ("cpu", dtype), ("tpu", dtype)))
        assert got[0].grad_fn.name() == _backward_name(*(a.to(dtype) for a in args))
        runs.append([(g, w, e) for g, w, e in zip([got[0], *got[1]], [want[0], *want[1]], [exact[0], *exact[1]])])
    eps = torch.finfo(dtype).eps
    bars = [max((w.double() - e).abs().max().item() for w, e in ((r[i][1], r[i][2]) for r in runs))
            for i in range(len(runs[0]))]
    for run in runs:
        for (g, w, e), bar in zip(run, bars):
            assert g.device.type == "tpu" and g.dtype == dtype
            tol = 4 * max(bar, eps * e.abs().max().item(), eps)
            torch.testing.assert_close(g.cpu().double(), e, rtol=0, atol=tol)


@pytest.mark.parametrize("case", sorted(CASES))
def test_sdpa_matches_cpu(mode, case):
    _check(case)


def test_sdpa_bfloat16_matches_cpu(mode):
    _check("gqa_causal_scale", torch.bfloat16)


@pytest.mark.parametrize("lk", [8, 64])  # keeps the probabilities, recomputes them
def test_strict_sdpa_is_one_program_each_way(lk):
    with torch_tpu.eager_mode("strict"):
        q, k, v = (t.to("tpu").requires_grad_() for t in _inputs(2, 2, 2, lk, lk, 8, 8, seed=3))
        assert F.scaled_dot_product_attention(q, k, v).grad_fn.name() == (KEEPS if lk == 8 else RECOMPUTES)
        for _ in range(2):  # the second call replays the recorded programs
            torch.tpu.synchronize()
            before = torch_tpu._C._fused_stats()
            out = F.scaled_dot_product_attention(q, k, v)
            mid = torch_tpu._C._fused_stats()
            out.backward(torch.ones_like(out))
            after = torch_tpu._C._fused_stats()
            assert mid["flushes"] - before["flushes"] == 1  # the forward: one graph
            assert after["flushes"] - mid["flushes"] == 1  # the backward: one graph
        assert after["eager_replays"] - before["eager_replays"] >= 1


def test_math_path_where_asked_or_needed(mode):
    q, k, v = (t.to("tpu") for t in _inputs(1, 2, 2, 4, 4, 8, 8, seed=5))
    with sdpa_kernel([SDPBackend.MATH]):
        assert torch._fused_sdp_choice(q, k, v) == SDPBackend.MATH.value
        want = F.scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu())
        torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v).cpu(), want)
    assert torch._fused_sdp_choice(q, k, v) == SDPBackend.OVERRIDEABLE.value
    assert torch._fused_sdp_choice(q, k, v, dropout_p=0.5) == SDPBackend.MATH.value  # dropout: math draws it
    assert torch._fused_sdp_choice(q[0], k[0], v[0]) == SDPBackend.MATH.value  # 3-d inputs
    k2, v2 = k[:, :1].expand(1, 3, 4, 8), v[:, :1].expand(1, 3, 4, 8)
    assert torch._fused_sdp_choice(q, k2, v2, enable_gqa=True) == SDPBackend.MATH.value  # 2 heads over 3


def test_sdpa_bad_input_raises_as_on_cpu(mode):
    for device in ("cpu", "tpu"):
        q, k, v = (t.to(device) for t in _inputs(1, 2, 2, 4, 4, 8, 8, seed=6))
        with pytest.raises(RuntimeError, match="Number of heads in key and value must divide"):
            F.scaled_dot_product_attention(q, k[:, :1].expand(1, 3, 4, 8), v[:, :1].expand(1, 3, 4, 8),
                                           enable_gqa=True)
        with pytest.raises(RuntimeError):  # head dims differ: the math path's matmul refuses it
            F.scaled_dot_product_attention(q, k[..., :5], v)
        with pytest.raises(RuntimeError, match="must match the size"):
            F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(3, 4, device=device))


def test_compiled_sdpa_matches_cpu():
    def block(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).relu().sum()

    args = _inputs(2, 4, 2, 6, 6, 8, 8, seed=7)
    compiled = torch.compile(block, backend="tpu")
    grads = {}
    for name, fn, device, dtype in (("got", compiled, "tpu", torch.float32), ("want", block, "cpu", torch.float32),
                                    ("exact", block, "cpu", torch.float64)):
        leaves = [a.detach().to(device, dtype).requires_grad_() for a in args]
        fn(*leaves).backward()
        grads[name] = [t.grad for t in leaves]
    for g, w, e in zip(grads["got"], grads["want"], grads["exact"]):
        tol = 4 * max((w.double() - e).abs().max().item(), torch.finfo(torch.float32).eps * e.abs().max().item())
        torch.testing.assert_close(g.cpu().double(), e, rtol=0, atol=tol)


def _leaves(args, device, dtype):
    return [a.detach().to(device, dtype).requires_grad_() for a in args]


def test_kept_probabilities_output_takes_in_place_ops(mode):
    """The training path's output is memory of its own, not a view of the node's temporaries: an in-place op
    on it is allowed and differentiated (CPU's flash backward keeps its output, so CPU runs the same ops out of
    place)."""
    args = _inputs(2, 2, 2, 6, 6, 8, 8, seed=11)
    grads = {}
    for device, dtype in (("cpu", torch.float64), ("cpu", torch.float32), ("tpu", torch.float32)):
        leaves = _leaves(args, device, dtype)
        out = F.scaled_dot_product_attention(*leaves, is_causal=True)
        if device == "tpu":
            assert out.grad_fn.name() == KEEPS and not out._is_view()
        out = out.mul_(3).sigmoid_() if device == "tpu" else out.mul(3).sigmoid()
        out.sum().backward()
        grads[device, dtype] = [t.grad for t in leaves]
    for got, want, exact in zip(grads["tpu", torch.float32], grads["cpu", torch.float32], grads["cpu", torch.float64]):
        tol = 4 * max((want.double() - exact).abs().max().item(), torch.finfo(torch.float32).eps)
        torch.testing.assert_close(got.cpu().double(), exact, rtol=0, atol=tol)


def test_kept_probabilities_double_backward_matches_cpu(mode):
    """create_graph: the backward recomputes the probabilities with autograd recording, so second derivatives
    (through the probabilities too) are those of CPU's math path (its flash kernel has none)."""
    args = _inputs(1, 2, 2, 5, 5, 4, 4, seed=12)
    results = {}
    for device, dtype in (("cpu", torch.float64), ("cpu", torch.float32), ("tpu", torch.float32)):
        q, k, v = _leaves(args, device, dtype)
        with sdpa_kernel([SDPBackend.MATH]) if device == "cpu" else contextlib.nullcontext():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if device == "tpu":
            assert out.grad_fn.name() == KEEPS
        gq, = torch.autograd.grad(out.pow(2).sum(), q, create_graph=True)
        results[device, dtype] = torch.autograd.grad(gq.sum(), [q, k, v])
    for got, want, exact in zip(results["tpu", torch.float32], results["cpu", torch.float32],
                                results["cpu", torch.float64]):
        eps = torch.finfo(torch.float32).eps
        tol = 4 * max((want.double() - exact).abs().max().item(), eps * exact.abs().max().item())
        torch.testing.assert_close(got.cpu().double(), exact, rtol=0, atol=tol)


def test_inference_takes_the_one_op(mode):
    """No gradient recorded: the one op's forward, which keeps nothing; the training path only where autograd
    records."""
    q, k, v = (t.to("tpu").requires_grad_() for t in _inputs(1, 2, 2, 4, 4, 8, 8, seed=13))
    for grad in (False, True):
        with torch.set_grad_enabled(grad), torch.profiler.profile() as prof:
            out = F.scaled_dot_product_attention(q, k, v)
        ran = {e.key for e in prof.key_averages()}
        assert ("aten::_scaled_dot_product_fused_attention_overrideable" in ran) == (not grad)
        assert (out.grad_fn is None) == (not grad)
        want = F.scaled_dot_product_attention(q.detach().cpu(), k.detach().cpu(), v.detach().cpu())
        torch.testing.assert_close(out.detach().cpu(), want)
