"""A fixed seed set of the differential fuzzer (tools/fuzz.py) in every mode.

Each seed is a random program of 5-60 ops (views, in-place writes through views, aliasing, broadcasting,
0-size shapes, bfloat16/float16/int/bool, backward, RNG) that must give CPU's values, gradients, view strides
and errors in Strict, Debug, Fused and compiled (called twice, so the second call replays). `make fuzz` runs
thousands; these seeds keep every mode honest in `make test`. The programs run in tools/fuzz.py's worker
subprocess (a crash or hang is a reported failure of one seed, never of pytest), with shrinking off: a failure
names the seed, and `python tools/fuzz.py --seeds S:S+1 --modes M` shrinks it to a reproducer.
"""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import nonfinite_ok

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = (0, 40)


@pytest.mark.parametrize("m", ["strict", "debug", "fused", "compile"])
def test_fixed_seeds(m, tmp_path):
    out = tmp_path / "results.json"
    cmd = [sys.executable, os.path.join(ROOT, "tools", "fuzz.py"), "--seeds", f"{SEEDS[0]}:{SEEDS[1]}",
           "--modes", m, "--jobs", "1", "--shrink-budget", "0", "--timeout", "300", "--out", str(tmp_path),
           "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    results = json.loads(out.read_text())["results"] if out.exists() else []
    assert len(results) == SEEDS[1] - SEEDS[0], proc.stdout[-3000:] + proc.stderr[-3000:]
    # compile skips a program with an op CPU rejects (a compiled function raises as a whole)
    assert all(r["modes"] == [m] or (m == "compile" and not r["modes"]) for r in results if not r["fails"])
    failing = {r["seed"]: r["fails"] for r in results if r["fails"]}
    assert not failing and proc.returncode == 0, proc.stdout[-6000:]


# ---- regression tests: bugs the fuzzer found, from their shrunk reproducers ----------------------

def test_fill_on_an_expanded_view_writes_every_alias(mode):
    # Seed 4: zero_/fill_ on an expanded view wrote only the view's first alias. CPU writes them all
    # (the Scalar overload allows overlap, fill is idempotent); the Tensor overload refuses it.
    for dev in ("cpu", "tpu"):
        b = torch.arange(3.0, device=dev).reshape(3, 1).clone()
        b.expand(3, 4).fill_(2.5)
        got = [b.cpu().clone()]
        b.t().expand(2, 3).zero_()
        got.append(b.cpu().clone())
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            torch.arange(6.0, device=dev).reshape(3, 2)[:, :1].expand(3, 5).fill_(torch.tensor(7.0, device=dev))
        if dev == "cpu":
            expected = got
    assert all(torch.equal(g, e) for g, e in zip(got, expected)), (got, expected)


NAN = float("nan")


def test_maximum_and_minimum_propagate_a_nan_on_either_side(mode):
    # Seeds 287, 437, 541: torch.maximum(y, log(x)) lost the NaN of log(-1) when it was the right operand
    # (XLA:CPU's maximum keeps only a NaN on its left). PyTorch: a NaN on either side wins.
    a = torch.tensor([1.0, NAN, 2.0, NAN, -0.0, 0.0])
    b = torch.tensor([NAN, 1.0, 3.0, NAN, 0.0, -0.0])
    for fn in (torch.maximum, torch.minimum, torch.max, torch.min, torch.fmax, torch.fmin):
        for x, y in ((a, b), (b, a)):
            got = fn(x.to("tpu"), y.to("tpu")).cpu()
            assert torch.equal(got.isnan(), fn(x, y).isnan()), (fn, x, y, got)
            torch.testing.assert_close(got, fn(x, y), equal_nan=True, rtol=0, atol=0)
    for dtype in (torch.bfloat16, torch.float16):
        got = torch.maximum(a.to(dtype).to("tpu"), b.to(dtype).to("tpu")).cpu()
        assert torch.equal(got.isnan(), torch.maximum(a.to(dtype), b.to(dtype)).isnan())


def test_reductions_that_combine_by_max_keep_a_nan(mode):
    # The same combination inside scatter_reduce (amax/amin) and logcumsumexp.
    src = torch.tensor([1.0, NAN, 3.0, 4.0])
    index = torch.tensor([0, 0, 1, 1])
    for reduce in ("amax", "amin"):
        for include_self in (True, False):
            expected = torch.zeros(2).scatter_reduce(0, index, src, reduce, include_self=include_self)
            got = torch.zeros(2, device="tpu").scatter_reduce(0, index.to("tpu"), src.to("tpu"), reduce,
                                                              include_self=include_self)
            torch.testing.assert_close(got.cpu(), expected, equal_nan=True)
    x = torch.tensor([0.5, NAN, -1.0, 2.0])
    torch.testing.assert_close(torch.logcumsumexp(x.to("tpu"), 0).cpu(), torch.logcumsumexp(x, 0), equal_nan=True)


def test_views_of_pointwise_results_have_cpus_strides(mode):
    # Seed 209: softplus of a (1, 3) tensor with strides (1, 1) is contiguous on CPU, (3, 1); its .t() was
    # (1, 1) on tpu. Seed 311: lerp of a transposed tensor keeps the transposition, so .unbind(0) of it is
    # strided as CPU's. (tests/test_result_layout.py covers the layouts op by op.)
    def programs(dev):
        v = torch.tensor([1.16, 0.99, -0.24], device=dev).view(1, 3).as_strided((1, 3), (1, 1), 0)
        w = torch.arange(30.0, device=dev).view(3, 2, 5).transpose(1, -1)
        return [F.softplus(v).t(), torch.lerp(w, torch.tensor(-4.9, device=dev), 0.3).unbind(0)[1]]

    for got, expected in zip(programs("tpu"), programs("cpu")):
        assert (got.stride(), got.storage_offset()) == (expected.stride(), expected.storage_offset())
        torch.testing.assert_close(got.cpu(), expected)


def test_a_replayed_compiled_graph_keeps_autograd_version_checks():
    # Seed 284: `x.mul_(y)` on an input x with y requiring grad saves x for backward, and AOTAutograd then
    # writes x in place. PyTorch's compile (aot_eager on CPU) raises "modified by an inplace operation" at
    # backward on every call; the replayed second call returned a new tensor object (its own version
    # counter) for the saved x, so backward ran on the overwritten x and gave a wrong gradient.
    def program(x, y):
        x.mul_(y)
        return x

    a, b = torch.randn(8, 2, generator=torch.Generator().manual_seed(284)), torch.tensor([[-0.16, 0.69]])
    torch._dynamo.reset()
    for backend, dev in (("aot_eager", "cpu"), ("tpu", "tpu")):
        fn = torch.compile(program, backend=backend)
        for _ in range(2):
            y = b.clone().to(dev).requires_grad_(True)
            out = fn(a.clone().to(dev), y)
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                torch.autograd.grad(out.sum(), [y])
        torch._dynamo.reset()


EXTREMES = [float("inf"), -float("inf"), NAN, 0.0, 1.0, -1.0, 3.0, 5.0, 9.0, 20.5, -20.5, 88.8, -88.8, 1e30, -1e30, 3e38]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("op", ["asinh", "acosh", "sinh", "cosh", "erfc", "erf", "hypot", "div_floor"])
def test_functions_at_their_extremes(op, dtype, mode):
    # Seeds 1446, 2103, 4707: asinh(inf) was NaN (inf / inf in its formula), poisoning what followed; the sweep
    # this led to found acosh/sinh/cosh overflowing early, erfc as 1 - erf (no digits left past 3),
    # float64 erf at float32's accuracy, hypot squaring its way to inf and inf // 3 not NaN (CPU, Python).
    x = torch.tensor(EXTREMES, dtype=torch.float64).to(dtype)
    special = {"hypot": lambda t: torch.hypot(t, t.flip(0)),
               "div_floor": lambda t: torch.div(t, 3.0, rounding_mode="floor")}
    fn = special[op] if op in special else getattr(torch, op)
    expected, got = fn(x), fn(x.to("tpu")).cpu()
    assert torch.equal(got.isnan(), expected.isnan()) and torch.equal(got.isinf(), expected.isinf()), (got, expected)
    # as accurate as CPU against float64, where finite (the rule of tests/opinfo/harness.py)
    ref = fn(x.to(torch.float64))
    finite = expected.isfinite()
    err_cpu = (expected.double() - ref).abs()[finite]
    err = (got.double() - ref).abs()[finite]
    eps = torch.finfo(dtype).eps
    assert bool((err <= 4 * err_cpu + 2 * eps * ref.abs()[finite] + 1e-300).all()), (got, expected)


def test_a_mask_times_nan_or_inf_is_nan_as_on_cpu(mode):
    # Seeds 912, 3052, 1814: XLA's simplifier rewrites y * convert(mask) into select(mask, y, 0), dropping y's NaN
    # and inf where the mask is false (CPU: NaN * 0 and inf * 0 are NaN). amax/amin backward multiplies the
    # incoming gradient by such a mask; torch.eye is one inside a fused graph.
    y = torch.tensor([NAN, float("inf"), -float("inf"), 2.0, -3.0, 0.0])
    mask = torch.tensor([True, False, False, False, True, False])
    with nonfinite_ok():
        cases = [
            (lambda dev: y.to(dev) * mask.to(dev)),
            (lambda dev: mask.to(dev) * y.to(dev)),
            (lambda dev: torch.eye(2, device=dev) * NAN),
            (lambda dev: torch.eye(3, device=dev) * y[:3].to(dev)),
            (lambda dev: y.to(dev) * (y.to(dev) > 1)),
            (lambda dev: (y.to(dev) > 0).to(torch.bfloat16) * y.to(dev).to(torch.bfloat16)),
        ]
        for case in cases:
            expected, got = case("cpu"), case("tpu").cpu()
            assert got.dtype == expected.dtype
            torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0)
        for reduce in (torch.amax, torch.amin):
            grads = []
            for dev in ("cpu", "tpu"):
                x = torch.tensor([[1.0, 2.0], [3.0, 3.0]], device=dev, requires_grad=True)
                reduce(x, 1).backward(torch.tensor([NAN, 1.0], device=dev))
                grads.append(x.grad.cpu())
            torch.testing.assert_close(grads[1], grads[0], equal_nan=True, rtol=0, atol=0)


def _idx(x, *values):
    return torch.tensor(values, device=x.device)


# Writes whose argument shares some, not all, of the written tensor's elements: CPU refuses them (TensorIterator's
# check, and the scatter/index_add family's), so tpu must too, instead of computing a value CPU never gives.
PARTIAL_OVERLAP = {
    "add_": lambda x: x[1:].add_(x[:-1], alpha=2),
    "mul_": lambda x: x[1:].mul_(x[:-1]),
    "pow_": lambda x: x[1:].pow_(x[:-1]),
    "atan2_": lambda x: x[1:].atan2_(x[:-1]),
    "hypot_": lambda x: x[1:].hypot_(x[:-1]),
    "clamp_": lambda x: x[1:].clamp_(min=x[:-1]),
    "addcmul_": lambda x: x[1:].addcmul_(x[:-1], x[:-1]),
    "addcdiv_": lambda x: x[1:].addcdiv_(x[:-1], x[:-1] + 5),
    "lerp_": lambda x: x[1:].lerp_(x[:-1] * 2, x[:-1]),
    "exp.out": lambda x: torch.exp(x[:-1], out=x[1:]),
    "maximum.out": lambda x: torch.maximum(x[:-1], x[:-1] * 2, out=x[1:]),
    "logaddexp.out": lambda x: torch.logaddexp(x[:-1], x[:-1], out=x[1:]),
    "where.out": lambda x: torch.where(x[:-1] > 2, x[:-1], x[:-1] * 3, out=x[1:]),
    "clamp.out": lambda x: torch.clamp(x[:-1], 1, 3, out=x[1:]),
    "copy_": lambda x: x[1:].copy_(x[:-1]),
    "cumsum.out": lambda x: torch.cumsum(x[:4], 0, out=x[1:5]),
    "sort.values": lambda x: torch.sort(x[:3], out=(x[1:4], torch.empty(3, dtype=torch.long, device=x.device))),
    "index_add_": lambda x: x[1:].index_add_(0, _idx(x, 0, 1), x[:2]),
    "index_add_ self": lambda x: x.index_add_(0, _idx(x, 0, 1, 2, 3, 4, 5), x),
    "scatter_": lambda x: x[1:].scatter_(0, _idx(x, 0, 1), x[:2]),
    "scatter_add_ self": lambda x: x.scatter_add_(0, _idx(x, 0, 1, 2, 3, 4, 5), x),
    "scatter_reduce_": lambda x: x[1:].scatter_reduce_(0, _idx(x, 0, 1), x[:2], "sum"),
}

# The same ops where the argument is the written tensor itself (or disjoint from it): well defined, computed.
FULL_OR_NO_OVERLAP = {
    "add_ self": lambda x: x.add_(x),
    "exp.out self": lambda x: torch.exp(x, out=x),
    "mul_ disjoint": lambda x: x[3:].mul_(x[:3]),
    "cumsum.out self": lambda x: torch.cumsum(x, 0, out=x),
    "sort.values self": lambda x: torch.sort(x.flip(0).clone(), out=(x, torch.empty(6, dtype=torch.long, device=x.device))),
    "index_add_ disjoint": lambda x: x[3:].index_add_(0, _idx(x, 0, 2), x[:2]),
}


@pytest.mark.parametrize("case", sorted(PARTIAL_OVERLAP))
def test_a_write_through_a_partially_overlapping_argument_raises_as_on_cpu(case, mode):
    # Seeds 2695, 5116: tpu computed x[1:].add_(x[:-1]) where CPU raises.
    fn = PARTIAL_OVERLAP[case]
    with pytest.raises(RuntimeError, match="unsupported operation: some elements of the input tensor and the "
                                           "written-to tensor refer to a single memory location") as cpu:
        fn(torch.arange(1.0, 7.0))
    x = torch.arange(1.0, 7.0, device="tpu")
    with pytest.raises(RuntimeError) as tpu:
        fn(x)
    assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]
    assert torch.equal(x.cpu(), torch.arange(1.0, 7.0))  # nothing was written


@pytest.mark.parametrize("case", sorted(FULL_OR_NO_OVERLAP))
def test_a_write_through_the_same_or_a_disjoint_argument_computes(case, mode):
    fn = FULL_OR_NO_OVERLAP[case]
    expected, x = torch.arange(1.0, 7.0), torch.arange(1.0, 7.0, device="tpu")
    ref = torch.arange(1.0, 7.0, dtype=torch.float64)
    fn(expected)
    fn(x)
    fn(ref)
    # as accurate as CPU float32 against float64 (the rule of tests/opinfo/harness.py)
    err, err_cpu = (x.cpu().double() - ref).abs(), (expected.double() - ref).abs()
    assert bool((err <= 4 * err_cpu + 2 * torch.finfo(torch.float32).eps * ref.abs()).all()), (x.cpu(), expected)
