"""Step graphs (torch_tpu/vllm/step_graph.py) on a stand-in runner: a forward over persistent buffers that
the host refills every step is replayed once two captures agree, and every step's values (its output and
the cache it updates in place) equal the same steps on CPU; host values that vary, host reads inside the
forward, per-step tensors and replaced buffers keep the forward traced, with the same values. All three
eager modes. (No vLLM needed: the runner's fields are what StepGraphs reads.)"""
from types import SimpleNamespace

import torch
from torch_tpu.vllm.step_graph import StepGraphs


class Runner:
    """What StepGraphs reads of TpuModelRunner: model, input_batch.block_table, kv_caches, device buffers."""

    def __init__(self, device, dtype=torch.float32):
        torch.manual_seed(0)
        layers = [torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8)]
        self.model = torch.nn.Sequential(*layers).to(device, dtype)
        self.input_batch = SimpleNamespace(block_table=SimpleNamespace(block_tables=[]))
        self.kv_caches = [torch.zeros(16, 8, device=device, dtype=dtype)]
        self.inputs = torch.zeros(4, 8, device=device, dtype=dtype)
        self.slots = torch.zeros(4, dtype=torch.int64, device=device)

    def fill(self, step):
        """The host's inputs of a step, copied into the persistent buffers as the runner's uploads do."""
        g = torch.Generator().manual_seed(step)
        self.inputs.copy_(torch.randn(4, 8, generator=g))
        self.slots.copy_(torch.randperm(16, generator=g)[:4])

    def forward(self, scale=1.0):
        out = self.model(self.inputs) * scale
        self.kv_caches[0][self.slots] = out  # the cache write: an in-place update of a persistent buffer
        return out + self.kv_caches[0].sum(0)


def _steps(runner, n, step=lambda r, i: r.forward(), graphs=None):
    outs = []
    for i in range(n):
        runner.fill(i)
        with torch.no_grad():
            outs.append(step(runner, i) if graphs is None else graphs.run(("k",), lambda: step(runner, i)))
    return [o.cpu() for o in outs], runner.kv_caches[0].cpu()


def _reference(n, step=lambda r, i: r.forward(), run=None):
    """CPU float32's results of `run(runner)` (default: n steps) and their tolerance: four times CPU
    float32's own largest error against the same steps in float64 (at least float32's resolution at the
    results' scale)."""
    run = run or (lambda r: _steps(r, n, step))
    outs, cache = run(Runner("cpu"))
    outs64, cache64 = run(Runner("cpu", torch.float64))
    err = max((a.double() - b).abs().max().item() for a, b in zip(outs + [cache], outs64 + [cache64]))
    scale = max(b.abs().max().item() for b in outs64 + [cache64])
    return outs, cache, 4 * max(err, torch.finfo(torch.float32).eps * scale)


def _check(got, want):
    (outs, cache), (ref_outs, ref_cache, tol) = got, want
    for o, r in zip(outs, ref_outs):
        torch.testing.assert_close(o, r, rtol=0, atol=tol)
    torch.testing.assert_close(cache, ref_cache, rtol=0, atol=tol)


def test_replays_after_two_agreeing_captures(mode):
    runner = Runner("tpu")
    graphs = StepGraphs(runner)
    got = _steps(runner, 6, graphs=graphs)
    _check(got, _reference(6))
    assert graphs.stats == {"captures": 2, "replays": 4, "traced": 0}


def test_varying_host_value_is_never_replayed(mode):
    # The step's data reaches the forward as a Python number: each capture has another operand value.
    step = lambda r, i: r.forward(scale=1.0 + i)  # noqa: E731
    runner = Runner("tpu")
    graphs = StepGraphs(runner)
    got = _steps(runner, 7, step, graphs)
    _check(got, _reference(7, step))
    assert graphs.stats["replays"] == 0
    assert graphs.stats["captures"] == StepGraphs.MAX_CAPTURES and graphs.stats["traced"] == 7 - StepGraphs.MAX_CAPTURES


def test_host_read_inside_the_forward_stays_traced(mode):
    def step(r, i):
        out = r.forward()
        return out * (1.0 if out.sum().item() > -1e9 else 0.0)  # a host read cuts the program

    runner = Runner("tpu")
    graphs = StepGraphs(runner)
    got = _steps(runner, 5, step, graphs)
    _check(got, _reference(5, step))
    assert graphs.stats["replays"] == 0 and graphs.stats["captures"] == 1


def test_per_step_tensor_is_not_replayed(mode):
    # A tensor made before the forward every step (not persistent): its storage is no static buffer.
    biases = {}

    def step(r, i):
        return r.forward() + biases[r.inputs.device.type]

    runner = Runner("tpu")
    graphs = StepGraphs(runner)
    outs = []
    for i in range(6):
        runner.fill(i)
        biases["tpu"] = torch.full((8,), 0.5, device="tpu")
        outs.append(graphs.run(("k",), lambda: step(runner, i)).cpu())
    biases["cpu"] = torch.full((8,), 0.5)
    _check((outs, runner.kv_caches[0].cpu()), _reference(6, step))
    assert graphs.stats == {"captures": StepGraphs.MAX_CAPTURES, "replays": 0, "traced": 6 - StepGraphs.MAX_CAPTURES}


def test_replaced_cache_drops_the_plans(mode):
    def run(runner, graphs=None):
        first, _ = _steps(runner, 4, graphs=graphs)
        if graphs is not None:
            assert graphs.stats["replays"] == 2
        cache = runner.kv_caches[0]
        runner.kv_caches = [torch.zeros_like(cache)]  # e.g. the KV cache reallocated
        second, cache = _steps(runner, 4, graphs=graphs)
        return first + second, cache

    runner = Runner("tpu")
    graphs = StepGraphs(runner)
    _check(run(runner, graphs), _reference(0, run=run))
    assert graphs.stats == {"captures": 4, "replays": 4, "traced": 0}
