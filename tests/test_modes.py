"""Eager modes (DESIGN.md §4): selection (API, environment, context manager),
debug mode's per-op checks (non-finite values naming the op and the Python
line, TORCH_TPU_DEBUG_NONFINITE=warn/off), and out-of-range indices, which
raise IndexError in every mode: at the next synchronization in strict mode,
at the op in debug mode."""
import inspect
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
import torch_tpu

from conftest import nonfinite_ok

DEV = "tpu"
HERE = os.path.basename(__file__)


def T(t):
    return t.to(DEV)


def next_line():
    """The line number after the caller's line."""
    return inspect.currentframe().f_back.f_lineno + 1


# ---- selection ---------------------------------------------------------------------


def test_mode_fixture_switches(mode):
    assert torch_tpu.get_eager_mode() == mode
    assert mode in torch_tpu.available_eager_modes()


def test_set_and_get(mode):
    torch_tpu.set_eager_mode("debug")
    assert torch_tpu.get_eager_mode() == "debug"
    torch_tpu.set_eager_mode("strict")
    assert torch_tpu.get_eager_mode() == "strict"
    torch_tpu.set_eager_mode(mode)


def test_invalid_names(mode):
    with pytest.raises(ValueError, match="'strict', 'debug', 'fused'"):
        torch_tpu.set_eager_mode("fast")
    with pytest.raises(ValueError, match="available modes"):
        torch_tpu.eager_mode("Debugg")
    with pytest.raises(TypeError):
        torch_tpu.set_eager_mode(1)
    assert torch_tpu.get_eager_mode() == mode


def test_context_manager(mode):
    other = "debug" if mode == "strict" else "strict"
    with torch_tpu.eager_mode(other) as m:
        assert m == other and torch_tpu.get_eager_mode() == other
        with torch_tpu.eager_mode(mode):
            assert torch_tpu.get_eager_mode() == mode
        assert torch_tpu.get_eager_mode() == other
    assert torch_tpu.get_eager_mode() == mode
    # restored when the block raises
    with pytest.raises(KeyError):
        with torch_tpu.eager_mode(other):
            raise KeyError("x")
    assert torch_tpu.get_eager_mode() == mode


def test_switch_synchronizes_pending_errors():
    x = T(torch.randn(3, 4))
    with torch_tpu.eager_mode("strict"):
        x.index_select(0, T(torch.tensor([3])))  # launched, not checked yet
        with pytest.raises(IndexError, match="aten::index_select"):
            torch_tpu.set_eager_mode("debug")  # synchronizes first: the error is strict's
        assert torch_tpu.get_eager_mode() == "strict"
        torch.tpu.synchronize()  # reported once


ENV_CASES = [
    ({}, "strict", None),
    ({"TORCH_TPU_EAGER_MODE": "debug"}, "debug", None),
    ({"TORCH_TPU_EAGER_MODE": "strict"}, "strict", None),
    ({"TPU_LAUNCH_BLOCKING": "1"}, "debug", None),
    ({"TPU_LAUNCH_BLOCKING": "0"}, "strict", None),
    ({"TORCH_TPU_EAGER_MODE": "strict", "TPU_LAUNCH_BLOCKING": "1"}, "strict", None),
    ({"TORCH_TPU_EAGER_MODE": "bogus"}, "strict", "unknown eager mode 'bogus'"),
    ({"TORCH_TPU_EAGER_MODE": "fused"}, "fused", None),
    ({"TORCH_TPU_DEFER_AND_FUSE": "1"}, "fused", None),
]
ENV_NAMES = ("TORCH_TPU_EAGER_MODE", "TPU_LAUNCH_BLOCKING", "TORCH_TPU_DEFER_AND_FUSE")


@pytest.mark.parametrize("env,expected,warning", ENV_CASES)
def test_environment(env, expected, warning, monkeypatch):
    # What `import torch` runs (torch_tpu._register), applied to each environment.
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with torch_tpu.eager_mode("strict"):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            torch_tpu._init_eager_mode_from_env()
        try:
            assert torch_tpu.get_eager_mode() == expected
        finally:
            torch_tpu.set_eager_mode("strict")
    messages = [str(w.message) for w in record]
    if warning:
        assert any(warning in m and "'strict', 'debug'" in m for m in messages), messages
    else:
        assert not messages


def test_environment_at_import():
    procs = []
    for env in ({"TORCH_TPU_EAGER_MODE": "debug"}, {"TPU_LAUNCH_BLOCKING": "1"}):
        full = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
        full.update(env)
        code = "import torch; x = torch.zeros(2, device='tpu'); import torch_tpu; print(torch_tpu.get_eager_mode())"
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=full, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.strip() == "debug", err


# ---- debug mode: non-finite values ------------------------------------------------------


def test_debug_nonfinite_names_op_and_line():
    a = T(torch.zeros(3))
    with torch_tpu.eager_mode("debug"):
        with pytest.raises(RuntimeError) as info:
            line = next_line()
            a / a
    msg = str(info.value)
    assert "aten::div.Tensor" in msg and "non-finite" in msg
    assert f"{HERE}:{line}" in msg, msg
    assert "TORCH_TPU_DEBUG_NONFINITE" in msg


def test_debug_nonfinite_through_torch_functions():
    # The line reported is the user's, not one inside torch/.
    x = T(torch.full((2, 3), 1e30))
    with torch_tpu.eager_mode("debug"):
        with pytest.raises(RuntimeError) as info:
            line = next_line()
            F.linear(x, x)  # overflows to inf
    assert f"{HERE}:{line}" in str(info.value)
    assert "aten::" in str(info.value)


def test_debug_nonfinite_inplace_and_integer_inputs():
    with torch_tpu.eager_mode("debug"):
        a = T(torch.tensor([1.0, 0.0]))
        with pytest.raises(RuntimeError, match="div"):
            a.div_(0)  # in-place: the inputs are checked as they were before the op
        with pytest.raises(RuntimeError, match="aten::log"):
            T(torch.tensor([0, 1])).log()  # integers are finite
        with pytest.raises(RuntimeError, match="aten::_to_copy|aten::copy_"):
            T(torch.tensor([1e5])).half()  # float16 overflow


def test_debug_nonfinite_allowed_cases():
    inf = float("inf")
    with torch_tpu.eager_mode("debug"):
        x = T(torch.tensor([1.0, inf, 2.0]))
        assert (x * 2).cpu()[1] == inf  # non-finite in, non-finite out
        y = T(torch.tensor([1.0, 2.0]))
        assert (y + inf).cpu()[0] == inf  # a non-finite Python scalar
        m = T(torch.tensor([True, False]))
        assert y.masked_fill(m, -inf).cpu()[0] == -inf
        assert torch.full((2,), float("nan"), device=DEV).isnan().all().item()
        torch.softmax(T(torch.tensor([0.0, -inf])), 0).cpu()  # -inf input, finite output


def test_debug_checks_views_next_to_non_finite_values():
    # The storage holds an inf, the views the op reads do not: 0 / 0 is still the op's own NaN.
    inf = float("inf")
    with torch_tpu.eager_mode("debug"):
        base = T(torch.tensor([1.0, 0.0, inf]))
        with pytest.raises(RuntimeError, match="aten::div"):
            base[:2] / base[1:2]
        assert (base[:2] * 2).cpu().tolist() == [2.0, 0.0]  # finite views, finite result: no error


def test_debug_runs_the_strict_programs():
    # Debug checks what an op wrote with one small program per (dtype, length), not inside the op's own
    # program: an op Strict mode compiled needs no second program in Debug.
    x = T(torch.linspace(0.1, 0.9, 7))
    ops = (torch.sin, torch.cos, torch.tanh, torch.exp)
    with torch_tpu.eager_mode("strict"):
        expected = [op(x).cpu() for op in ops]
    before = torch.tpu.executor_stats()["cache_misses"]
    with torch_tpu.eager_mode("debug"):
        got = [op(x).cpu() for op in ops]
    assert torch.tpu.executor_stats()["cache_misses"] == before
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_debug_nonfinite_warn(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DEBUG_NONFINITE", "warn")
    a = T(torch.zeros(2))
    with torch_tpu.eager_mode("debug"):
        with pytest.warns(UserWarning, match="aten::div.Tensor") as record:
            line = next_line()
            r = a / a
        assert r.isnan().all().item()
    assert any(f"{HERE}:{line}" in str(w.message) for w in record)


def test_debug_nonfinite_off(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DEBUG_NONFINITE", "off")
    a = T(torch.zeros(2))
    with torch_tpu.eager_mode("debug"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (a / a).isnan().all().item()


def test_strict_has_no_nonfinite_check():
    a = T(torch.zeros(2))
    with torch_tpu.eager_mode("strict"):
        assert (a / a).isnan().all().item()


def test_nonfinite_ok_helper():
    a = T(torch.zeros(2))
    with torch_tpu.eager_mode("debug"), nonfinite_ok():
        assert (a / a).isnan().all().item()
    assert "TORCH_TPU_DEBUG_NONFINITE" not in os.environ or os.environ["TORCH_TPU_DEBUG_NONFINITE"] != "off"


def test_debug_backward_checked():
    # Backward ops run on autograd's device thread: still checked and named.
    x = T(torch.tensor([0.0, 1.0])).requires_grad_()
    with torch_tpu.eager_mode("debug"):
        y = x.sqrt()  # sqrt(0) = 0 is finite; its gradient 1/(2*sqrt(0)) is inf
        with pytest.raises(RuntimeError, match="non-finite"):
            y.sum().backward()


# ---- out-of-range indices ----------------------------------------------------------------

X = torch.arange(12.0).reshape(3, 4)
BAD = torch.tensor([0, 3])  # 3 is out of range for dim 0 (size 3)


def _scatter_(x, i, name):
    idx = i.reshape(2, 1).expand(2, 4).contiguous()
    src = torch.ones_like(x[:2])
    return {
        "scatter": lambda: x.scatter(0, idx, src),
        "scatter_value": lambda: x.scatter(0, idx, 2.0),
        "scatter_add": lambda: x.scatter_add(0, idx, src),
        "scatter_reduce": lambda: x.scatter_reduce(0, idx, src, "amax"),
        "scatter_": lambda: x.clone().scatter_(0, idx, src, reduce="add"),
    }[name]()


def _put(x, i, accumulate):
    y = x.clone()
    y.index_put_((i,), torch.ones(2, 4, device=x.device), accumulate=accumulate)
    return y


def _setitem(x, i):
    y = x.clone()
    y[i] = 5.0
    return y


def _nll(x, t, **kw):
    return F.nll_loss(torch.log_softmax(x, 1)[:2], t, **kw)


# (case id, aten name in the message, function of (x, indices))
CASES = [
    ("index_select", "aten::index_select", lambda x, i: x.index_select(0, i)),
    ("index_select_neg", "aten::index_select", lambda x, i: x.index_select(0, i - 3)),  # -3: CPU raises too
    ("embedding", "aten::index_select", lambda x, i: F.embedding(i, x)),
    ("gather", "aten::gather", lambda x, i: x.gather(0, i.reshape(2, 1).expand(2, 4))),
    ("scatter", "aten::scatter", lambda x, i: _scatter_(x, i, "scatter")),
    ("scatter_value", "aten::scatter", lambda x, i: _scatter_(x, i, "scatter_value")),
    ("scatter_add", "aten::scatter", lambda x, i: _scatter_(x, i, "scatter_add")),
    ("scatter_reduce", "aten::scatter", lambda x, i: _scatter_(x, i, "scatter_reduce")),
    ("scatter_inplace", "aten::scatter", lambda x, i: _scatter_(x, i, "scatter_")),
    ("index_add", "aten::index_add", lambda x, i: x.index_add(0, i, torch.ones(2, 4, device=x.device))),
    ("index_fill", "aten::index_fill_", lambda x, i: x.index_fill(0, i, -1.0)),
    ("index_fill_neg", "aten::index_fill_", lambda x, i: x.index_fill(0, i - 7, -1.0)),  # -4
    ("index", "aten::index.Tensor", lambda x, i: x[i]),
    ("index_neg", "aten::index.Tensor", lambda x, i: x[i - 7]),  # -7, -4: out of range
    ("index_2d", "aten::index.Tensor", lambda x, i: x[torch.zeros_like(i), i + 1]),  # column 4
    ("index_put", "aten::_index_put_impl_", lambda x, i: _put(x, i, False)),
    ("index_put_acc", "aten::_index_put_impl_", lambda x, i: _put(x, i, True)),
    ("setitem", "aten::_index_put_impl_", _setitem),
    ("nll_loss", "aten::nll_loss_forward", lambda x, i: _nll(x, i + 1)),  # target 4 for 4 classes
    ("nll_loss_neg", "aten::nll_loss_forward", lambda x, i: _nll(x, i - 1)),  # target -1
    ("cross_entropy", "aten::nll_loss_forward", lambda x, i: F.cross_entropy(x[:2], i + 1)),
    ("nll_loss2d", "aten::nll_loss2d_forward",
     lambda x, i: F.nll_loss(x.reshape(1, 3, 2, 2), (i + 1).reshape(1, 1, 2).expand(1, 2, 2))),
    ("gather_neg", "aten::gather", lambda x, i: x.gather(0, (i - 4).reshape(2, 1).expand(2, 4))),  # -1: no wrap
    ("take", "aten::take", lambda x, i: x.take(i * 4)),  # 12 of 12 elements
    ("take_neg", "aten::take", lambda x, i: x.take(-i * 5)),  # -15
    ("put", "aten::put_", lambda x, i: x.clone().put_(i * 4, torch.ones(2, device=x.device))),
    ("put_acc", "aten::put_", lambda x, i: x.clone().put_(i * 4, torch.ones(2, device=x.device), accumulate=True)),
    ("index_copy", "aten::index_copy", lambda x, i: x.index_copy(0, i, torch.ones(2, 4, device=x.device))),
    ("index_copy_neg", "aten::index_copy", lambda x, i: x.index_copy(0, i - 3, torch.ones(2, 4, device=x.device))),
    ("index_reduce", "aten::index_reduce",
     lambda x, i: x.index_reduce(0, i, torch.ones(2, 4, device=x.device), "amax")),
    ("embedding_bag", "aten::_embedding_bag",
     lambda x, i: F.embedding_bag(i, x, torch.tensor([0], device=x.device))),
    ("embedding_bag_max", "aten::_embedding_bag",
     lambda x, i: F.embedding_bag(i, x, torch.tensor([0], device=x.device), mode="max")),
    ("one_hot", "aten::scatter", lambda x, i: F.one_hot(i, 3)),  # class 3 of 3
]


def cpu_error(fn):
    """The exception type CPU raises for the same call: the type tpu must raise."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # index_reduce is in beta
        with pytest.raises((IndexError, RuntimeError)) as info:
            fn(X, BAD)
    return info.type


def test_cpu_error_types_are_not_all_the_same():
    # The table is worth running per op: CPU answers with both types.
    types = {c[0]: cpu_error(c[2]) for c in CASES}
    assert types["gather"] is types["scatter"] is types["index_add"] is types["embedding_bag"] is RuntimeError
    assert types["index_select"] is types["take"] is types["index_copy"] is types["nll_loss"] is IndexError


@pytest.mark.parametrize("eager", ["strict", "fused"])
@pytest.mark.parametrize("case,name,fn", CASES, ids=[c[0] for c in CASES])
def test_out_of_range_raises_at_sync(case, name, fn, eager):
    x = T(X)
    expected = cpu_error(fn)
    with torch_tpu.eager_mode(eager), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = fn(x, T(BAD))  # launched (strict) or deferred (fused): the host does not wait
        with pytest.raises(Exception, match=f"index out of range in {name}") as info:
            r.cpu()
        assert info.type is expected, (info.type, expected)
        assert "synchronization" in str(info.value)
        r.cpu()  # reported once; the flag is clear again
        torch.tpu.synchronize()


@pytest.mark.parametrize("case,name,fn", CASES, ids=[c[0] for c in CASES])
def test_out_of_range_debug_raises_at_op(case, name, fn):
    x = T(X)
    expected = cpu_error(fn)
    with torch_tpu.eager_mode("debug"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception, match=f"index out of range in {name}") as info:
            fn(x, T(BAD))
        assert info.type is expected, (info.type, expected)
        # the innermost frame outside torch: the lambda in CASES or a helper here
        assert f"{HERE}:" in str(info.value), str(info.value)
        torch.tpu.synchronize()


def test_out_of_range_debug_names_the_line():
    x = T(X)
    with torch_tpu.eager_mode("debug"):
        with pytest.raises(IndexError) as info:
            line = next_line()
            x[T(BAD)]
        assert f"{HERE}:{line}" in str(info.value)
        with pytest.raises(IndexError) as info:
            line = next_line()
            F.cross_entropy(x[:2], T(BAD + 1))
        assert f"{HERE}:{line}" in str(info.value) and "nll_loss_forward" in str(info.value)


@pytest.mark.parametrize("sync", ["item", "synchronize", "other_tensor", "nonzero"])
def test_out_of_range_strict_sync_points(sync):
    x = T(X)
    with torch_tpu.eager_mode("strict"):
        r = x.index_select(0, T(BAD))
        with pytest.raises(IndexError, match="aten::index_select"):
            if sync == "item":
                r.sum().item()
            elif sync == "synchronize":
                torch.tpu.synchronize()
            elif sync == "other_tensor":
                T(torch.ones(2)).cpu()  # any download: the error is the device's, like CUDA
            else:
                torch.nonzero(x)  # reads a count from the device
        torch.tpu.synchronize()


def test_valid_indices_never_flag(mode):
    x = T(X)
    # negative indices that PyTorch wraps, ignore_index, empty index tensors
    assert x[T(torch.tensor([-3, -1]))].cpu().equal(X[torch.tensor([-3, -1])])
    assert x.index_fill(0, T(torch.tensor([-1])), 0.0).cpu().equal(X.index_fill(0, torch.tensor([-1]), 0.0))
    t = torch.tensor([1, -100])
    torch.testing.assert_close(F.cross_entropy(x[:2], T(t)).cpu(), F.cross_entropy(X[:2], t))
    torch.testing.assert_close(F.cross_entropy(x[:2], T(torch.tensor([1, 9])), ignore_index=9).cpu(),
                               F.cross_entropy(X[:2], torch.tensor([1, 9]), ignore_index=9))
    assert x.index_select(0, T(torch.tensor([], dtype=torch.long))).shape == (0, 4)
    torch.tpu.synchronize()


def test_out_of_range_first_op_is_named():
    x = T(X)
    with torch_tpu.eager_mode("strict"):
        x.gather(0, T(torch.tensor([[5]])))
        x.index_select(0, T(BAD))
        with pytest.raises(RuntimeError, match="aten::gather"):  # CPU's type for gather
            torch.tpu.synchronize()
        torch.tpu.synchronize()


def test_out_of_range_in_backward_of_embedding(mode):
    w = T(torch.randn(4, 3)).requires_grad_()
    with pytest.raises(IndexError, match="aten::index_select"):
        F.embedding(T(torch.tensor([1, 4])), w).sum().backward()
        torch.tpu.synchronize()


# ---- device failures ---------------------------------------------------------------------


@pytest.mark.parametrize("m", ["strict", "debug"])
def test_allocation_failure_names_op_and_bytes(m):
    n = 2**50  # beyond any device (and the host's address space): fails at once
    x = torch.empty(n, dtype=torch.uint8, device=DEV)  # no device memory until written
    with torch_tpu.eager_mode(m):
        with pytest.raises(torch.OutOfMemoryError, match=f"aten::fill_.*{n} bytes requested") as info:
            line = next_line()
            x.fill_(1)
            torch.tpu.synchronize()
        if m == "debug":
            assert "aten::fill_.Scalar" in str(info.value) and f"{HERE}:{line}" in str(info.value)
    del x


# ---- errors still on the device at exit -------------------------------------------------

EXIT_CHILD = r"""
import sys, torch, torch_tpu
torch_tpu.set_eager_mode(sys.argv[1])
x = torch.arange(5.0, device="tpu")
index = torch.tensor([1, int(sys.argv[2])], device="tpu")
y = x[index]  # never synchronized: the process ends here
print("exiting", flush=True)
"""


@pytest.mark.parametrize("m", ["strict", "debug", "fused"])
def test_out_of_range_never_synchronized_is_reported_at_exit(m):
    # CUDA reports a device-side assert at the latest when the process ends; so do we. Debug raises at the op.
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    procs = [subprocess.Popen([sys.executable, "-c", EXIT_CHILD, m, str(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in (7, 4)]
    (bad_out, bad_err), (ok_out, ok_err) = [p.communicate(timeout=300) for p in procs]
    assert procs[1].returncode == 0 and "exiting" in ok_out, ok_err
    assert "never synchronized" not in ok_err and "out of range" not in ok_err
    if m == "debug":
        assert procs[0].returncode != 0 and "exiting" not in bad_out
        assert "IndexError: index out of range in aten::index.Tensor" in bad_err
    else:
        assert procs[0].returncode == 0 and "exiting" in bad_out, bad_err
        assert ("[torch_tpu] warning: an error found on the device was never synchronized before exit: "
                "index out of range in aten::index.Tensor") in bad_err, bad_err
        assert "frame #" not in bad_err  # the message, not a C++ backtrace
