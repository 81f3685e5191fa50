"""Foreach ops (csrc/aten/ForeachKernels.cpp): every `aten::_foreach_*` call is one program in Strict mode (its
per-tensor loop fused as an op group, replayed when it repeats) and runs the loop as is in Debug and Fused mode;
values against CPU in all three modes, bad input raises as on CPU, AdamW (foreach) steps match CPU."""
import pytest
import torch
import torch_tpu

from conftest import assert_close


def _lists(g, n=5):
    shapes = [(3,), (2, 4), (7,), (1,), (4, 3)][:n]
    return [torch.randn(s, generator=g) for s in shapes]


CASES = {
    "add_scalar": lambda a, b, c: torch._foreach_add(a, 0.5),
    "add_list_alpha": lambda a, b, c: torch._foreach_add(a, b, alpha=-2.0),
    "mul_scalarlist": lambda a, b, c: torch._foreach_mul(a, [1.0, 2.0, -3.0, 0.5, 4.0]),
    "mul_tensor": lambda a, b, c: torch._foreach_mul(a, torch.tensor(1.5, device=a[0].device)),
    "div_list": lambda a, b, c: torch._foreach_div(a, [x.abs() + 1 for x in b]),
    "addcmul": lambda a, b, c: torch._foreach_addcmul(a, b, c, value=0.3),
    "addcdiv_scalarlist": lambda a, b, c: torch._foreach_addcdiv(a, b, [x.abs() + 1 for x in c],
                                                                 [0.1, 0.2, 0.3, 0.4, 0.5]),
    "lerp": lambda a, b, c: torch._foreach_lerp(a, b, 0.25),
    "sqrt_abs": lambda a, b, c: torch._foreach_sqrt(torch._foreach_abs(a)),
    "maximum": lambda a, b, c: torch._foreach_maximum(a, b),
    "norm": lambda a, b, c: torch._foreach_norm(a),
    "exp_neg": lambda a, b, c: torch._foreach_exp(torch._foreach_neg(a)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_foreach_matches_cpu(mode, case):
    g = torch.Generator().manual_seed(0)
    a, b, c = _lists(g), _lists(g), _lists(g)
    want = CASES[case](a, b, c)
    to = lambda xs: [x.to("tpu") for x in xs]  # noqa: E731
    got = CASES[case](to(a), to(b), to(c))
    dbl = lambda xs: [x.double() for x in xs]  # noqa: E731
    exact = CASES[case](dbl(a), dbl(b), dbl(c))
    for g_, w, e in zip(got, want, exact):
        _close(g_, w, e)


def _close(got, want, exact):
    """Within four times CPU float32's own error against float64, at least float32's resolution at that scale."""
    eps = torch.finfo(torch.float32).eps
    tol = 4 * max((want.double() - exact).abs().max().item(), eps * exact.abs().max().item(), eps)
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu().double(), exact, rtol=0, atol=tol)


def test_in_place_foreach_matches_cpu(mode):
    g = torch.Generator().manual_seed(1)
    a, b = _lists(g), _lists(g)
    ta, tb = [x.to("tpu") for x in a], [x.to("tpu") for x in b]
    da, db = [x.double() for x in a], [x.double() for x in b]
    for xs, ys in ((a, b), (ta, tb), (da, db)):
        for _ in range(3):  # repeated: Strict replays the group's recorded program
            torch._foreach_mul_(xs, 0.9)
            torch._foreach_add_(xs, ys, alpha=0.1)
            torch._foreach_addcdiv_(xs, ys, [y.abs() + 1 for y in ys], value=0.01)
    for g_, w, e in zip(ta, a, da):
        _close(g_, w, e)


def test_strict_foreach_is_one_program_per_call():
    with torch_tpu.eager_mode("strict"):
        xs = [torch.ones(4, device="tpu") * i for i in range(6)]
        torch.tpu.synchronize()
        before = torch_tpu._C._fused_stats()
        for _ in range(4):
            torch._foreach_mul_(xs, 2.0)
        after = torch_tpu._C._fused_stats()
        assert after["flushes"] - before["flushes"] == 4  # one graph per call, not one program per tensor
        assert after["fused_ops"] - before["fused_ops"] == 4 * 6
        assert after["eager_replays"] - before["eager_replays"] >= 2  # repeated calls bind to the recorded program
        assert_close(xs, [torch.ones(4) * i * 16 for i in range(6)])


def test_foreach_bad_input_raises_as_on_cpu(mode):
    results = []
    for device in ("cpu", "tpu"):
        a = [torch.ones(3, device=device), torch.ones(2, device=device)]
        with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors"):
            torch._foreach_add(a, [torch.ones(3, device=device)])
        with pytest.raises(RuntimeError, match="must match the size"):
            # The loop fails at the second tensor, after the first was updated (on CPU too).
            torch._foreach_add_(a, [torch.ones(3, device=device), torch.ones(5, device=device)])
        # The failed group left nothing pending: later work runs.
        torch._foreach_add_(a, 1.0)
        results.append(a)
    assert_close(results[1], results[0])


def test_adamw_foreach_steps_match_cpu(mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x, y = torch.randn(5, 6), torch.randn(5, 3)

    def train(m, device, dtype):
        m = m.to(device, dtype)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, foreach=True)
        for _ in range(4):
            loss = torch.nn.functional.mse_loss(m(x.to(device, dtype)), y.to(device, dtype))
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.detach().cpu() for p in m.parameters()]

    import copy
    want = train(copy.deepcopy(model), "cpu", torch.float32)
    exact = train(copy.deepcopy(model), "cpu", torch.float64)
    got = train(copy.deepcopy(model), "tpu", torch.float32)
    # Four times CPU float32's own largest error against float64, at least float32's resolution.
    err = max((w.double() - e).abs().max().item() for w, e in zip(want, exact))
    tol = 4 * max(err, torch.finfo(torch.float32).eps)
    for g_, e in zip(got, exact):
        torch.testing.assert_close(g_.double(), e, rtol=0, atol=tol)
