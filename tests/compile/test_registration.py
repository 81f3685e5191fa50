"""torch.compile registration for tpu: backend "tpu", Dynamo's device interface, the
default backend's choice per graph, and the refusal of backend="inductor"."""
import pytest
import torch
import torch_tpu
from torch_tpu import _C
from torch_tpu.compile import backend as tpu_backend_module

from conftest import assert_close


def _f(x, y):
    return torch.sin(x) * y + 1


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g)


def test_backend_tpu_is_registered():
    assert "tpu" in torch._dynamo.list_backends()
    assert torch._dynamo.lookup_backend("tpu") is tpu_backend_module.tpu_backend


def test_backend_tpu_matches_cpu(mode):
    x, y = _inputs()
    before = _C._executor_stats()["compiled_graphs"]
    out = torch.compile(_f, backend="tpu")(x.to("tpu"), y.to("tpu"))
    assert _C._executor_stats()["compiled_graphs"] == before + 1
    assert_close(out, _f(x, y))


def test_default_torch_compile_on_tpu_uses_backend_tpu(mode):
    x, y = _inputs()
    before = _C._executor_stats()["compiled_graphs"]
    out = torch.compile(_f)(x.to("tpu"), y.to("tpu"))  # no backend: inductor would need jax
    assert _C._executor_stats()["compiled_graphs"] == before + 1
    assert_close(out, _f(x, y))


def test_default_backend_sends_graphs_without_tpu_to_inductor(monkeypatch):
    # CPU graphs must reach inductor exactly as before (mode and options included);
    # a stand-in for inductor's wrapper records the call instead of compiling C++.
    calls = []

    class FakeInductor:
        def __init__(self, mode, options, dynamic):
            calls.append((mode, options))

        def __call__(self, gm, example_inputs):
            return gm.forward

    monkeypatch.setattr(torch, "_TorchCompileInductorWrapper", FakeInductor)
    x, y = _inputs()
    out = torch.compile(_f, mode="max-autotune-no-cudagraphs")(x, y)
    assert calls == [("max-autotune-no-cudagraphs", None)]
    torch.testing.assert_close(out, _f(x, y))
    before = _C._executor_stats()["compiled_graphs"]
    out = torch.compile(_f)(x.to("tpu"), y.to("tpu"))  # tpu graph: not inductor
    assert len(calls) == 1 and _C._executor_stats()["compiled_graphs"] == before + 1


def test_graph_creating_tpu_tensors_without_inputs_uses_backend_tpu():
    def make():
        return torch.arange(6, device="tpu").float().reshape(2, 3) * 2

    assert tpu_backend_module.graph_uses_tpu  # the check looks at computed values too
    out = torch.compile(make)()
    assert_close(out, torch.arange(6).float().reshape(2, 3) * 2)


def test_backend_inductor_on_tpu_raises_naming_tpu():
    x, y = _inputs()
    with pytest.raises(Exception, match='backend "tpu"|backend="tpu"') as info:
        torch.compile(_f, backend="inductor")(x.to("tpu"), y.to("tpu"))
    assert "inductor" in str(info.value) and "jax" not in type(info.value).__name__.lower()


def test_dynamo_device_interface():
    from torch._dynamo.device_interface import get_interface_for_device
    from torch_tpu.compile.device_interface import TpuInterface

    iface = get_interface_for_device("tpu")
    assert iface is TpuInterface
    assert get_interface_for_device(torch.device("tpu", 0)) is TpuInterface
    assert iface.is_available() and iface.device_count() == torch.tpu.device_count()
    assert iface.current_device() == torch.tpu.current_device()
    assert iface.Stream is torch.tpu.Stream and iface.Event is torch.tpu.Event
    assert iface.current_stream() == torch.tpu.current_stream()
    side = torch.tpu.Stream()
    with iface.stream(side):
        assert iface.current_stream() == side and iface.get_raw_stream(side.device_index) == side.stream_id
    assert iface.current_stream() == torch.tpu.default_stream()
    assert iface.get_device_properties().multi_processor_count >= 1
    assert iface.get_compute_capability() == torch.tpu.get_device_capability()["platform"]
    if torch.tpu.device_count() > 1:
        previous = iface.exchange_device(1)
        assert torch.tpu.current_device() == 1
        iface.maybe_exchange_device(previous)
        assert torch.tpu.current_device() == previous
    start, end = iface.Event(enable_timing=True), iface.Event(enable_timing=True)
    start.record()
    (torch.randn(64, 64, device="tpu") @ torch.randn(64, 64, device="tpu")).sum()
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0
    iface.synchronize()


def test_compiled_graph_on_a_side_stream_is_recorded_by_its_events(mode):
    f = torch.compile(lambda a: (a @ a).relu().sum(), backend="tpu")
    x = torch.randn(32, 32)
    side = torch.tpu.Stream()
    for _ in range(2):  # traced, then replayed
        with torch.tpu.stream(side):
            out = f(x.to("tpu"))
            done = side.record_event()
        done.synchronize()
        assert done.query()
        torch.testing.assert_close(out.cpu(), (x @ x).relu().sum(), atol=1e-4, rtol=1e-5)


def test_import_torch_does_not_import_dynamo():
    # torch_tpu loads inside `import torch`; Dynamo (~1 s) is set up only once imported.
    import subprocess
    import sys
    code = ("import sys, torch; assert 'torch._dynamo' not in sys.modules, 'dynamo imported'; "
            "import torch._dynamo; "
            "assert 'tpu' in torch._dynamo.list_backends(); print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


def test_torch_tpu_log_recompile_names_the_failed_guard():
    import os
    import subprocess
    import sys
    code = ("import torch\n"
            "f = torch.compile(lambda x: x * 2, backend='tpu', dynamic=False)\n"
            "a = f(torch.ones(4, device='tpu')); b = f(torch.ones(5, device='tpu'))\n"
            "assert b.cpu().tolist() == [2.0] * 5\n")
    env = {k: v for k, v in os.environ.items() if k != "TORCH_LOGS"}
    env["TORCH_TPU_LOG"] = "recompile"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Recompiling function" in result.stderr
    assert "size mismatch at index 0. expected 4, actual 5" in result.stderr
