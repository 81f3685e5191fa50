"""A torch.optim step on tpu parameters: one program in Strict mode (torch_tpu/optim.py), CPU's values in every mode."""
import os
import subprocess
import sys
import threading

import pytest
import torch

from torch_tpu import _C

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Host reads inside one step (each runs what the group traced so far): ASGD's foreach path reads its eta and mu
# (.item()), Rprop's assigns through a boolean mask per parameter (nonzero).
HOST_READS = {torch.optim.ASGD: 1, torch.optim.Rprop: 3}

CONFIGS = [
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    (torch.optim.Adam, dict(lr=1e-2, amsgrad=True, foreach=False)),  # the for-loop path: many ops, one program
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    (torch.optim.Adagrad, dict(lr=0.1)),
    (torch.optim.RMSprop, dict(lr=1e-2, centered=True, momentum=0.5)),
    (torch.optim.Adamax, dict(lr=1e-2)),
    (torch.optim.NAdam, dict(lr=1e-2)),
    # foreach=False: the foreach path divides by zero in its first steps (and masks the Inf), which Debug's
    # non-finite check reports.
    (torch.optim.RAdam, dict(lr=1e-2, foreach=False)),
    (torch.optim.Adadelta, dict()),
    (torch.optim.ASGD, dict(lr=1e-2)),
    (torch.optim.Rprop, dict()),
]


def _flushes():
    return _C._fused_stats()["flushes"]


class _Stepping(torch.optim.Optimizer):
    """An optimizer whose step each test writes (no hyperparameters)."""

    def __init__(self, params):
        super().__init__(params, {})


def _step_beside(optimizer, other_thread):
    """optimizer.step() on this thread while other_thread() runs on another; the join is bounded."""
    t = threading.Thread(target=other_thread)
    t.start()
    optimizer.step()
    t.join(60)
    assert not t.is_alive()


def _params(device, dtype):
    torch.manual_seed(0)
    return [t.to(dtype).to(device).requires_grad_() for t in (torch.randn(5, 3), torch.randn(7), torch.randn(()))]


def _run(cls, kwargs, device, dtype, steps=4):
    """Parameters and tensor state after `steps` steps on fixed gradients; the fused flushes of each step."""
    params = _params(device, dtype)
    torch.manual_seed(1)
    grads = [[torch.randn(p.shape, dtype=torch.float64) for p in params] for _ in range(steps)]
    opt = cls(params, **kwargs)
    flushes = []
    for step in grads:
        for p, g in zip(params, step):
            p.grad = g.to(dtype).to(device)
        before = _flushes()
        opt.step()
        flushes.append(_flushes() - before)
    values = [t.detach().cpu().double() for p in params
              for t in [p] + [v for k, v in sorted(opt.state[p].items()) if k != "step" and torch.is_tensor(v)]]
    return values, flushes


@pytest.mark.parametrize("cls,kwargs", CONFIGS, ids=lambda c: getattr(c, "__name__", None))
def test_step_matches_cpu(mode, cls, kwargs):
    exact, _ = _run(cls, kwargs, "cpu", torch.float64)
    cpu, _ = _run(cls, kwargs, "cpu", torch.float32)
    tpu, flushes = _run(cls, kwargs, "tpu", torch.float32)
    assert len(tpu) == len(exact)
    for t, c, e in zip(tpu, cpu, exact):
        # Within a few times CPU's own float32 error from float64 (the rounding order may differ).
        tol = 4 * (c - e).abs().max().item() + 1e-6
        torch.testing.assert_close(t, e, atol=tol, rtol=0)
    # Strict: each step is one op group, run at the step's end (and at its host reads). Debug runs its ops one by
    # one; Fused leaves the step in its pending graph (but for the host reads).
    reads = HOST_READS.get(cls, 0)
    assert flushes == [{"strict": reads + 1, "debug": 0, "fused": reads}[mode]] * len(flushes)


def test_a_raising_step_leaves_strict_mode_as_it_was(mode):
    class Raising(_Stepping):
        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    p.add_(1.0)
            raise ValueError("step failed")

    params = _params("tpu", torch.float32)
    start = [p.detach().cpu() for p in params]
    with pytest.raises(ValueError, match="step failed"):
        Raising(params).step()
    # What the step did before it raised ran.
    for p, s in zip(params, start):
        torch.testing.assert_close(p.detach().cpu(), s + 1, atol=0, rtol=0)
    # Later ops are not traced into a group left open: in Strict each runs at once (no flush when read).
    before = _flushes()
    doubled = (params[0] * 2).cpu()
    torch.testing.assert_close(doubled, (start[0] + 1) * 2, atol=0, rtol=0)
    assert _flushes() - before == (1 if mode == "fused" else 0)


def test_closure_and_cpu_steps_keep_their_programs(mode):
    params = _params("tpu", torch.float32)
    for p in params:
        p.grad = torch.ones_like(p)
    opt = torch.optim.SGD(params, lr=0.1, foreach=False)
    before = _flushes()
    opt.step(lambda: None)  # a closure runs forward and backward inside the step: not grouped
    assert _flushes() - before == 0
    torch.testing.assert_close(params[1].detach().cpu(), _params("cpu", torch.float32)[1].detach() - 0.1)

    cpu_params = _params("cpu", torch.float32)
    for p in cpu_params:
        p.grad = torch.ones_like(p)
    before = _flushes()
    torch.optim.AdamW(cpu_params).step()
    assert _flushes() - before == 0
    assert not _C._optimizer_step_begin(opt.param_groups)  # outside a step: nothing to open


class _Tagged(torch.Tensor):
    """A tensor subclass: its ops may do anything (DTensor's talk to other processes), so its steps keep per-op
    programs."""


def test_subclass_parameters_keep_their_programs(mode):
    def run(device):
        params = [torch.Tensor._make_subclass(_Tagged, p.detach(), True) for p in _params(device, torch.float32)]
        for p in params:
            p.grad = torch.full_like(p, 0.5)
        opt = torch.optim.AdamW(params, lr=0.1)
        before = _flushes()
        opt.step()
        return [p.detach().cpu().as_subclass(torch.Tensor) for p in params], _flushes() - before

    tpu, flushes = run("tpu")
    cpu, _ = run("cpu")
    for t, c in zip(tpu, cpu):
        torch.testing.assert_close(t, c)
    if mode == "strict":  # torch takes the for-loop path here: each op its own program, no group (grouped: one)
        assert flushes == 0, flushes


def test_nested_steps_share_the_outer_group(mode):
    params = _params("tpu", torch.float32)
    for p in params:
        p.grad = torch.full_like(p, 0.5)
    inner = torch.optim.SGD(params[:1], lr=1.0, foreach=False)

    class Outer(torch.optim.SGD):
        def step(self, closure=None):
            inner.step()
            return super().step()

    outer = Outer(params[1:], lr=1.0, foreach=False)
    before = _flushes()
    outer.step()
    assert _flushes() - before == (1 if mode == "strict" else 0)
    expected = [p.detach() - 0.5 for p in _params("cpu", torch.float32)]
    for p, e in zip(params, expected):
        torch.testing.assert_close(p.detach().cpu(), e, atol=0, rtol=0)


def test_compiled_step_has_no_graph_break_from_the_hooks(mode):
    import torch._dynamo

    torch._dynamo.reset()
    params = _params("tpu", torch.float32)
    for p in params:
        p.grad = torch.ones_like(p)
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    torch._dynamo.utils.counters.clear()
    torch.compile(opt.step, backend="tpu")()
    # torch's own break (the momentum buffers' first step, torch/optim/optimizer.py) is the only one.
    breaks = dict(torch._dynamo.utils.counters["graph_break"])
    assert all("User-inserted graph break" in reason for reason in breaks), breaks
    torch.testing.assert_close(params[1].detach().cpu(), _params("cpu", torch.float32)[1].detach() - 0.1)


def test_programs_per_op_when_turned_off():
    code = ("import torch\nfrom torch_tpu import _C\n"
            "p = [torch.randn(4, device='tpu', requires_grad=True) for _ in range(3)]\n"
            "for q in p: q.grad = torch.ones_like(q)\n"
            "opt = torch.optim.AdamW(p)\nf = _C._fused_stats()['flushes']\nopt.step()\n"
            "print(_C._fused_stats()['flushes'] - f)\n")
    for value, grouped in (("0", False), ("1", True)):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                             env=dict(os.environ, TORCH_TPU_OPTIMIZER_PROGRAMS=value))
        assert out.returncode == 0, out.stderr
        flushes = int(out.stdout.strip().splitlines()[-1])
        # Off: AdamW's foreach ops, each its own op group; on: the step as one.
        assert (flushes == 1) == grouped and flushes >= 1, (value, flushes)


@pytest.mark.parametrize("touch", [False, True], ids=["own-tensors", "the-steps-tensor"])
def test_another_threads_op_cuts_a_step_only_where_it_touches_it(mode, touch):
    params = _params("tpu", torch.float32)
    start = params[0].detach().cpu()
    mine = torch.arange(8.0).to("tpu")
    inside, resume = threading.Event(), threading.Event()

    class Pausing(_Stepping):
        @torch.no_grad()
        def step(self, closure=None):
            p = self.param_groups[0]["params"][0]
            p.add_(1.0)
            inside.set()
            assert resume.wait(60)
            p.mul_(2.0)

    seen = {}

    def other_thread():
        assert inside.wait(60)
        # Reading the step's parameter runs what the step traced so far; the thread's own tensor does not.
        seen["value"] = (params[0] * 1 if touch else mine * 3).cpu()
        resume.set()

    before = _flushes()
    _step_beside(Pausing(params), other_thread)
    torch.testing.assert_close(seen["value"], start + 1 if touch else torch.arange(8.0) * 3, atol=0, rtol=0)
    torch.testing.assert_close(params[0].detach().cpu(), (start + 1) * 2, atol=0, rtol=0)
    if mode == "strict":
        assert _flushes() - before == (2 if touch else 1)


def test_another_threads_step_waits_for_an_open_step(mode):
    first, second = _params("tpu", torch.float32), _params("tpu", torch.float32)
    for p in second:
        p.grad = torch.ones_like(p)
    inside = threading.Event()

    class Pausing(_Stepping):
        @torch.no_grad()
        def step(self, closure=None):
            self.param_groups[0]["params"][0].add_(1.0)
            inside.set()
            threading.Event().wait(0.5)  # the other thread's step starts meanwhile

    def other_thread():
        assert inside.wait(60)
        torch.optim.SGD(second, lr=0.1, foreach=False).step()

    before = _flushes()
    _step_beside(Pausing(first), other_thread)
    # Strict: each step one group, the second waited for the first rather than running its ops one by one.
    if mode == "strict":
        assert _flushes() - before == 2
    torch.testing.assert_close(first[0].detach().cpu(), _params("cpu", torch.float32)[0].detach() + 1)
    torch.testing.assert_close(second[0].detach().cpu(), _params("cpu", torch.float32)[0].detach() - 0.1)


_STATE_COPIES = r"""
import glob, os, re, sys
import torch, torch_tpu
torch_tpu.set_eager_mode(sys.argv[1])
torch.manual_seed(0)
start = torch.randn(256, 512)
params = [start.double().requires_grad_(), start.clone().requires_grad_(), start.to("tpu").requires_grad_()]
opts = [torch.optim.AdamW([p], lr=1e-2) for p in params]
for step in range(3):
    g = torch.randn(256, 512)
    for p, o in zip(params, opts):
        p.grad = g.to(p.device, p.dtype)
        o.step()
exact, cpu, tpu = (p.detach().cpu().double() for p in params)
# Within a few times CPU's own float32 error from float64 (XLA may fuse a multiply and an add).
torch.testing.assert_close(tpu, exact, atol=4 * (cpu - exact).abs().max().item() + 1e-6, rtol=0)
copies = []
for path in glob.glob(os.path.join(os.environ["DUMP"], "*after_optimizations.txt")):
    text = open(path).read()
    if "sqrt(" in text:  # a program of the step (in Debug: the sqrt op's own)
        copies += re.findall(r"f32\[(?:131072|256,512)\]\S* copy\(", text)
print("programs", len(glob.glob(os.path.join(os.environ["DUMP"], "*after_optimizations.txt"))), "copies", len(copies))
"""


@pytest.mark.parametrize("eager", ["strict", "fused", "debug"])
def test_adamw_state_is_updated_in_place(eager, tmp_path):
    """AdamW's exp_avg, exp_avg_sq and parameter are each read and written once by the step's program. XLA:CPU
    once copied the donated buffers (and recomputed exp_avg inside the parameter update) when a pointwise op
    reshaped its operands between the storage and the op: the step took twice as long (docs/performance.md)."""
    env = dict(os.environ, DUMP=str(tmp_path), TORCH_TPU_CACHE="0",
               XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=^$")
    out = subprocess.run([sys.executable, "-c", _STATE_COPIES, eager], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    counts = out.stdout.split()
    assert counts[0] == "programs" and int(counts[1]) > 0, out.stdout
    assert counts[2:] == ["copies", "0"], out.stdout
