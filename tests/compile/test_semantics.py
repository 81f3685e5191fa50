"""torch.compile(backend="tpu") behaves as eager: graph breaks, non-tensor outputs,
outputs that alias inputs, in-place updates of inputs and their views, RNG state,
pending eager work around a compiled graph."""
import pytest
import torch
from torch_tpu import _C

from conftest import assert_close, assert_within_cpu_error


def _compiled_graphs():
    return _C._executor_stats()["compiled_graphs"]


def _data(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_graph_break_runs_two_graphs_and_matches_cpu(mode):
    def f(x):
        y = torch.relu(x) * 3
        print_count = int(y.sum().item() > 0)  # .item(): a graph break
        return y.exp() + print_count

    x = _data(5, 4)
    before = _compiled_graphs()
    out = torch.compile(f, backend="tpu")(x.to("tpu"))
    assert _compiled_graphs() - before == 2
    assert_close(out, f(x))


def test_graph_break_with_backward(mode):
    def f(x, w):
        h = torch.tanh(x @ w)
        torch._dynamo.graph_break()
        return (h * h).sum()

    x, w = _data(4, 3), _data(3, 2, seed=1).requires_grad_()
    wt = w.detach().to("tpu").requires_grad_()
    f(x, w).backward()
    loss = torch.compile(f, backend="tpu")(x.to("tpu"), wt)
    loss.backward()
    assert_close(wt.grad, w.grad, atol=1e-6, rtol=1e-5)


def test_non_tensor_outputs(mode):
    def f(x, n):
        return x * n, n + 1, "label", x.shape[0], None

    x = _data(3)
    out = torch.compile(f, backend="tpu")(x.to("tpu"), 2)
    want = f(x, 2)
    assert_close(out[0], want[0])
    assert out[1:] == want[1:]


def test_outputs_aliasing_inputs_are_views(mode):
    def f(x):
        return x.view(-1), x[1], x.t(), x * 2

    x = _data(3, 4)
    xt = x.to("tpu")
    flat, row, tr, dbl = torch.compile(f, backend="tpu")(xt)
    for out, want in zip((flat, row, tr, dbl), f(x)):
        assert_close(out, want)
    assert flat._base is xt and row._base is xt and tr._base is xt
    xt.add_(1)  # a view sees the write, as in eager
    assert_close(row, x[1] + 1)


def test_in_place_updates_of_inputs_and_views(mode):
    def f(x, buf):
        buf.mul_(0.9).add_(x.mean(0), alpha=0.1)  # a running average, as BatchNorm keeps
        x[0].zero_()  # a write through a view of an input
        return x.sum()

    x, buf = _data(4, 3), _data(3, seed=1)
    xt, buft = x.to("tpu"), buf.to("tpu")
    want = f(x, buf)
    got = torch.compile(f, backend="tpu")(xt, buft)
    assert_close(got, want, atol=1e-6, rtol=1e-5)
    assert_close(xt, x)
    assert_close(buft, buf, atol=1e-6, rtol=1e-5)


def test_mutating_a_parameter_under_no_grad(mode):
    lin = torch.nn.Linear(3, 3).to("tpu")

    @torch.compile(backend="tpu")
    def decay(m):
        with torch.no_grad():
            for p in m.parameters():
                p.mul_(0.5)

    w = lin.weight.detach().cpu()
    decay(lin)
    assert_close(lin.weight.detach(), w * 0.5)


def test_random_ops_advance_the_generator_as_eager(mode):
    # Calls after the first replay the program: each random op's {seed, offset} is drawn
    # again from the generator, in the traced order, so values and state equal eager's.
    def f(x):
        return x + torch.rand_like(x), torch.randn(3, device=x.device)

    x = torch.zeros(5, device="tpu")
    torch.manual_seed(7)
    want = [f(x) for _ in range(4)]
    state_after_eager = torch.tpu.get_rng_state()
    compiled = torch.compile(f, backend="tpu")
    torch.manual_seed(7)
    replays = _C._fused_stats()["replays"]
    got = [compiled(x) for _ in range(4)]
    assert _C._fused_stats()["replays"] == replays + 3
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert torch.equal(a.cpu(), b.cpu())
    assert not torch.equal(got[0][1].cpu(), got[1][1].cpu())  # the offset advanced
    assert torch.equal(torch.tpu.get_rng_state(), state_after_eager)  # the same offset as eager


def test_random_ops_with_an_explicit_generator_are_traced_every_call(mode):
    # A generator argument is not the device default that a replay draws from.
    gen = torch.Generator(device="tpu")
    gen.manual_seed(3)
    f = torch.compile(lambda x: x + torch.rand(x.shape, device=x.device, generator=gen), backend="tpu")
    x = torch.zeros(6, device="tpu")
    got = [f(x).cpu() for _ in range(3)]
    gen.manual_seed(3)
    want = [(x + torch.rand(x.shape, device=x.device, generator=gen)).cpu() for _ in range(3)]
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_pending_fused_eager_work_is_not_mixed_into_the_graph():
    # In fused mode the eager ops before the call are flushed first, so the compiled
    # graph's module is the same at every call.
    import torch_tpu

    f = torch.compile(lambda a: (a * 2).sin(), backend="tpu")
    with torch_tpu.eager_mode("fused"):
        x = torch.ones(4, device="tpu") + 1  # pending eager work
        f(x)
        compiles = _C._fused_stats()["compiles"]
        y = torch.ones(4, device="tpu") * 3 - 1  # other pending eager work
        out = f(y)
        torch.tpu.synchronize()
        assert _C._fused_stats()["compiles"] - compiles == 1  # only the new eager graph
    assert_close(out, (torch.full((4,), 2.0) * 2).sin())


def test_error_inside_a_graph_leaves_the_runtime_usable(mode):
    def f(x, idx):
        return x[idx] * 2

    x = _data(4)
    f_c = torch.compile(f, backend="tpu")
    with pytest.raises(IndexError, match="out of range"):
        f_c(x.to("tpu"), torch.tensor([1, 9]).to("tpu")).cpu()
    assert_close(f_c(x.to("tpu"), torch.tensor([3, 0]).to("tpu")), f(x, torch.tensor([3, 0])))


def test_replay_follows_new_values_and_in_place_updates(mode):
    def f(x, buf):
        buf.mul_(0.5).add_(x.sum(0))
        return (x * buf).tanh()

    compiled = torch.compile(f, backend="tpu")
    buf, buft = torch.zeros(3), torch.zeros(3, device="tpu")
    replays = _C._fused_stats()["replays"]
    for step in range(4):
        x = _data(2, 3, seed=step)
        assert_close(compiled(x.to("tpu"), buft), f(x, buf), atol=1e-6, rtol=1e-5)
        assert_close(buft, buf, atol=1e-6, rtol=1e-5)
    assert _C._fused_stats()["replays"] == replays + 3  # every call after the first


def test_graphs_with_empty_outputs_replay(mode):
    # A split into pieces of which some have no elements (a jagged feature with no ids): no program writes them,
    # a replay makes them anew.
    def f(x):
        a, b, c = (x * 2).split([3, 0, 2])
        return a.sum(), b, c, x.new_zeros(0, 4)

    compiled = torch.compile(f, backend="tpu")
    replays = _C._fused_stats()["replays"]
    for step in range(3):
        x = _data(5, seed=step)
        got, want = compiled(x.to("tpu")), f(x)
        for g, w in zip(got, want):
            assert g.device.type == "tpu" and g.shape == w.shape and g.dtype == w.dtype and g.stride() == w.stride()
            assert_close(g, w)
    assert _C._fused_stats()["replays"] == replays + 2  # every call after the first


def test_replay_checks_storage_offsets(mode):
    # Two views with the same shape and strides at other offsets of one buffer: Dynamo's
    # guards accept both; the program read the first one's offset, so the second is traced.
    def f(x):
        return x * 10

    base = _data(8)
    bt = base.to("tpu")
    compiled = torch.compile(f, backend="tpu")
    assert_close(compiled(bt[:4]), f(base[:4]))
    assert_close(compiled(bt[:4]), f(base[:4]))
    assert_close(compiled(bt[4:]), f(base[4:]))
    assert_close(compiled(bt[2:6]), f(base[2:6]))


def test_dropout_graphs_replay_with_new_masks(mode):
    f = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.5) + 1, backend="tpu")
    x = torch.ones(64, device="tpu")
    f(x)
    replays = _C._fused_stats()["replays"]
    a, b = f(x).cpu(), f(x).cpu()
    assert _C._fused_stats()["replays"] == replays + 2
    assert not torch.equal(a, b)  # new masks: the generator advanced
    for m in (a, b):  # dropout's values: 0 or 1 + 1/(1-p)
        assert set(m.unique().tolist()) <= {1.0, 3.0}


def test_replay_can_be_turned_off(mode, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_COMPILE_REPLAY", "0")
    f = torch.compile(lambda x: x.exp() - 1, backend="tpu")
    x = _data(5)
    replays = _C._fused_stats()["replays"]
    for _ in range(3):
        assert_close(f(x.to("tpu")), x.exp() - 1)
    assert _C._fused_stats()["replays"] == replays


def test_dynamic_shapes_without_buckets_replay_each_seen_length(mode, monkeypatch):
    # TORCH_TPU_COMPILE_BUCKETS=0: one Dynamo graph for every length; each length's program is
    # traced once and replayed when the length comes back (its size is a constant of that program).
    # Buckets (the default) are tested in test_buckets.py.
    monkeypatch.setenv("TORCH_TPU_COMPILE_BUCKETS", "0")

    def f(x, w):
        return torch.softmax(x @ w, dim=-1).sum(1)

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    w = _data(8, 8, seed=1)
    wt = w.to("tpu")
    replays = _C._fused_stats()["replays"]
    lengths = [3, 5, 7, 3, 5, 7, 5]
    for i, n in enumerate(lengths):
        x = _data(2, n, 8, seed=i)
        assert_close(compiled(x.to("tpu"), wt), f(x, w), atol=1e-5, rtol=1e-5)
    assert _C._fused_stats()["replays"] - replays == len(lengths) - len(set(lengths))


def test_cpu_scalar_arguments_follow_their_values(mode):
    # A 0-dim CPU tensor that only reaches tpu results is passed as a tpu tensor: replayed, and each
    # call sees its current value. One whose math reaches a CPU output stays on CPU (traced).
    def scaled(x, s):
        return x * (s * 2 + 1)

    def both(x, s):
        return x * s, s + 1

    f, g = torch.compile(scaled, backend="tpu"), torch.compile(both, backend="tpu")
    x = _data(5)
    xt = x.to("tpu")
    replays = _C._fused_stats()["replays"]
    for v in (0.5, -1.5, 3.0, 0.25):
        s = torch.tensor(v)
        assert_close(f(xt, s), scaled(x, s))
    assert _C._fused_stats()["replays"] - replays == 3
    for v in (0.5, 2.0):
        s = torch.tensor(v)
        out, nxt = g(xt, s)
        assert_close(out, x * s)
        assert nxt.device.type == "cpu" and nxt.item() == v + 1


def test_outputs_written_through_views_replay(mode):
    # repeat writes its fresh output through strided views (reading the never-written storage): its
    # zeros are constants of the program, right at every replay, so the graph replays.
    f = torch.compile(lambda x: x.repeat(2, 3) * 2, backend="tpu")
    replays = _C._fused_stats()["replays"]
    for i in range(3):
        x = _data(5, 3, seed=i)
        assert_close(f(x.to("tpu")), x.repeat(2, 3) * 2)
    assert _C._fused_stats()["replays"] - replays == 2


def test_arguments_read_before_written_are_not_replayed(mode):
    # A graph reading an argument no op has written yet (torch.empty) has its zeros as constants:
    # replaying it on the same argument after a write would be wrong, so the call is traced again.
    f = torch.compile(lambda x: x + 1, backend="tpu")
    x = torch.empty(4, device="tpu")
    first = f(x).cpu()
    x.copy_(torch.arange(4.0))
    assert_close(f(x), torch.arange(4.0) + 1)
    assert first.shape == (4,)


def test_graphs_with_tensor_constants_replay(mode):
    # torch.tensor(...) inside a compiled function is a constant of the graph (lift_fresh_copy of an
    # attribute): a CPU one moved to tpu and returned (Mistral's graphs), a tpu one concatenated with
    # the input (Falcon's empty cache). The constants are passed to the program as arguments, so
    # these graphs replay; every call returns fresh tensors, as eager does.
    def f(x):
        offset = torch.tensor(2)
        empty = torch.tensor([], device=x.device).view(0, 3)
        moved = offset.to(x.device)
        return torch.cat([empty, x + moved]), moved

    compiled = torch.compile(f, backend="tpu")
    replays = _C._fused_stats()["replays"]
    seen = []
    for i in range(4):
        x = _data(2, 3, seed=i)
        out, moved = compiled(x.to("tpu"))
        assert_close(out, x + 2)
        assert moved.device.type == "tpu" and moved.item() == 2
        moved.add_(1)  # the caller's tensor, not the graph's constant
        seen.append(moved)
    assert len({t.untyped_storage().data_ptr() for t in seen}) == 4
    assert _C._fused_stats()["replays"] - replays == 3


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_mm_compiles_in_float32_and_bfloat16(mode, dtype):
    # torch's fake grouped_mm accepts bfloat16 only (cuda's limit); on tpu every float dtype runs.
    def f(a, b, offs):
        return torch.nn.functional.grouped_mm(a, b, offs=offs) * 2

    a, b = _data(12, 8).to(dtype), _data(3, 8, 8, seed=1).to(dtype)
    offs = torch.tensor([4, 9, 12], dtype=torch.int32)
    got = torch.compile(f, backend="tpu")(a.to("tpu"), b.to("tpu"), offs.to("tpu"))
    want = f(a, b, offs)
    # float64 reference, group by group (CPU's grouped_mm has no float64)
    exact = torch.cat([a[s:e].double() @ b[g].double() for g, (s, e) in enumerate(zip([0, 4, 9], [4, 9, 12]))]) * 2
    assert got.dtype == dtype
    assert_within_cpu_error(got, want, exact, floor=1e-6 if dtype == torch.float32 else 1e-2, rtol=0)


def _addmm_scaled(b, x, w):
    return torch.addmm(b, x, w, beta=0.5, alpha=2.0)[1:3] * 3 + 1


_CONSTANTS_CHILD = """
import sys, torch, torch_tpu
sys.path.insert(0, sys.argv[3])
from test_semantics import _addmm_scaled, _data
torch_tpu.set_eager_mode(sys.argv[1])
g = torch.compile(_addmm_scaled, backend="tpu")
torch.save(g(*[_data(4, 4, seed=i).to("tpu") for i in range(3)]).cpu(), sys.argv[2])
"""


def test_graph_constants_are_constants_of_its_program(mode, tmp_path):
    # Python numbers of the graph (addmm's alpha and beta, the scales) and its view offsets are baked into
    # the module (XLA folds them), not passed as scalar operands: @main takes the three storages only.
    import os
    import re
    import subprocess
    import sys
    env = dict(os.environ, TORCH_TPU_LOG="hlo", TORCH_TPU_CACHE="0")
    out = str(tmp_path / "got.pt")
    result = subprocess.run([sys.executable, "-c", _CONSTANTS_CHILD, mode, out, os.path.dirname(__file__)],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    args = [_data(4, 4, seed=i) for i in range(3)]
    assert_within_cpu_error(torch.load(out).to("tpu"), _addmm_scaled(*args),
                            _addmm_scaled(*[a.double() for a in args]))
    module = result.stderr.split("compiling fused graph of")[-1]
    params = re.search(r"func\.func public @main\(([^)]*)\)", module).group(1)
    types = re.findall(r"tensor<([^>]*)>", params)
    assert types == ["16xf32"] * 3, params


def test_graphs_called_with_numbers_keep_them_operands(mode, monkeypatch):
    # A plain number among the arguments (a dynamic int here) may change from call to call: it stays an
    # operand, so each new value replans the capture without compiling a program of its own.
    monkeypatch.setenv("TORCH_TPU_COMPILE_BUCKETS", "0")
    compiled = torch.compile(lambda x, n: x * n + n, backend="tpu", dynamic=True)
    x = _data(6)
    xt = x.to("tpu")
    assert_close(compiled(xt, 2), x * 2 + 2)
    compiles = _C._fused_stats()["compiles"]
    for n in (3, 4, 5, 6):
        assert_close(compiled(xt, n), x * n + n)
    assert _C._fused_stats()["compiles"] == compiles
