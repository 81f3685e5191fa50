"""The `tpu` device: registration, the torch.tpu module, allocator stats, generators, errors."""
import os
import subprocess
import sys

import pytest
import torch
import torch_tpu

from conftest import assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, cwd=ROOT,
                          timeout=300)


def test_import_torch_alone_registers_tpu():
    out = run_python("import torch; print(torch.randn(3, device='tpu').sum().item())")
    assert out.returncode == 0, out.stderr
    float(out.stdout.strip().splitlines()[-1])


def test_missing_plugin_keeps_import_working_and_explains():
    code = (
        "import torch\n"
        "print('available', torch.tpu.is_available())\n"
        "try:\n"
        "    torch.zeros(2, device='tpu')\n"
        "except RuntimeError as e:\n"
        "    print('ERROR', e)\n"
    )
    out = run_python(code, TORCH_TPU_PJRT_PLUGIN="/nonexistent.so")
    assert out.returncode == 0, out.stderr
    assert "available False" in out.stdout
    assert "ERROR" in out.stdout
    assert "/nonexistent.so" in out.stdout          # names what was tried
    assert "pip install" in out.stdout              # and how to install a plugin


def test_device_module(mode):
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.tpu.current_device() == 0
    name = torch.tpu.get_device_name()
    assert "PJRT" in name and name.split()[0] in ("cpu", "cuda", "tpu", "gpu")
    assert torch.device("tpu").type == "tpu"
    assert torch.tpu.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    torch.tpu.synchronize()


def test_device_properties_read_as_cuda_s(mode):
    """Attributes, as torch.cuda.get_device_properties gives (libraries read props.total_memory), and the
    same fields by key."""
    props = torch.tpu.get_device_properties(0)
    assert props.name == props["name"] == torch.tpu.get_device_name()
    assert props.total_memory == torch.tpu.mem_get_info(0)[1] > 0
    assert props.multi_processor_count >= 1
    assert props.platform == props["platform"] == torch.tpu.get_device_capability()["platform"]
    assert set(props.keys()) >= {"name", "platform", "platform_version", "plugin", "pjrt_api_version", "total_memory"}
    assert "total_memory=" in repr(props)
    with pytest.raises(KeyError):
        props["no_such_field"]


def test_set_device_out_of_range_raises():
    with pytest.raises(RuntimeError, match="invalid device"):
        torch.tpu.set_device(10_000)


def test_tensor_methods_generated(mode):
    x = torch.ones(2).tpu()
    assert x.is_tpu and x.device.type == "tpu"
    assert not torch.ones(2).is_tpu
    s = x.untyped_storage()
    assert s.device.type == "tpu" and s.nbytes() == 8
    m = torch.nn.Linear(2, 2).tpu()
    assert m.weight.device.type == "tpu"


def test_memory_stats_follow_allocations(mode):
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    x = torch.empty(1024, device="tpu")
    assert torch.tpu.memory_allocated() == before + 4096
    assert torch.tpu.max_memory_allocated() >= before + 4096
    del x
    assert torch.tpu.memory_allocated() == before
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == before


def test_data_ptr_is_unique_and_views_share_it(mode):
    a = torch.zeros(4, 4, device="tpu")
    b = torch.zeros(4, 4, device="tpu")
    assert a.data_ptr() != b.data_ptr()
    assert a[1].data_ptr() == a.data_ptr() + 16
    assert a.untyped_storage().data_ptr() == a[2:].untyped_storage().data_ptr()


def test_manual_seed_and_rng_state():
    torch.tpu.manual_seed(123)
    assert torch.tpu.initial_seed() == 123
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.tpu.get_rng_state(), state)
    g = torch.Generator(device="tpu")
    g.manual_seed(7)
    assert g.initial_seed() == 7 and g.device.type == "tpu"


def test_unsupported_dtype_raises_type_error():
    with pytest.raises(TypeError, match="ComplexHalf"):
        torch.zeros(2, dtype=torch.complex32, device="tpu")


def test_unimplemented_op_names_schema_and_way_out():
    x = torch.ones(2, 2, device="tpu")
    with pytest.raises(NotImplementedError) as info:
        torch.ops.aten._compute_linear_combination(x, x)  # an ATen op with no tpu kernel (linalg_eig has one now)
    msg = str(info.value)
    assert "aten::_compute_linear_combination" in msg and "TORCH_TPU_CPU_FALLBACK=1" in msg and "schema" in msg


# An operator with a CPU kernel only: on tpu it reaches the fallback, whatever gains a lowering later.
_TEST_LIB = torch.library.Library("tpu_fallback_test", "DEF")
_TEST_LIB.define("scaled(Tensor x, float s) -> Tensor")
_TEST_LIB.define("scale_(Tensor(a!) x, float s) -> Tensor(a!)")
_TEST_LIB.impl("scaled", lambda x, s: x * s, "CPU")
_TEST_LIB.impl("scale_", lambda x, s: x.mul_(s), "CPU")


def test_op_without_lowering_raises_without_fallback():
    with pytest.raises(NotImplementedError, match="tpu_fallback_test::scaled"):
        torch.ops.tpu_fallback_test.scaled(torch.ones(2, device="tpu"), 2.0)


def test_cpu_fallback_runs_op_and_warns_once(monkeypatch, recwarn, capfd):
    monkeypatch.setenv("TORCH_TPU_CPU_FALLBACK", "1")
    base = torch.arange(1.0, 9.0).reshape(2, 4)
    x = base.to("tpu")
    got = torch.ops.tpu_fallback_test.scaled(x, 3.0)
    torch.ops.tpu_fallback_test.scaled(x, 3.0)
    # The warning reaches Python's warnings, or stderr when no Python warning handler is active
    # (operators called through torch.ops), exactly once.
    messages = [str(w.message) for w in recwarn] + capfd.readouterr().err.splitlines()
    assert len([m for m in messages if "tpu_fallback_test::scaled has no tpu lowering" in m]) == 1
    assert got.device.type == "tpu"
    assert_close(got, base * 3)
    # In-place through a view must update the tpu base, as on CPU.
    torch.ops.tpu_fallback_test.scale_(x[:, 1], -2.0)
    expected = base.clone()
    expected[:, 1].mul_(-2.0)
    assert_close(x, expected)


def test_save_load_roundtrip(tmp_path, mode):
    x = torch.arange(6.0).reshape(2, 3).to("tpu")
    path = tmp_path / "t.pt"
    torch.save({"x": x, "view": x[:, 1]}, path)
    loaded = torch.load(path)
    assert loaded["x"].device.type == "tpu"
    assert_close(loaded["x"], x.cpu())
    assert_close(loaded["view"], x.cpu()[:, 1])
    on_cpu = torch.load(path, map_location="cpu")
    assert on_cpu["x"].device.type == "cpu"
    assert torch.equal(on_cpu["x"], x.cpu())
    moved = torch.load(path, map_location="tpu")
    assert moved["x"].device.type == "tpu"


_DEVICES = """
import torch, torch_tpu
last = torch.tpu.device_count() - 1
x = torch.arange(6.0).reshape(2, 3)
y = (x.to(f"tpu:{last}") * 2).sum(0)
print(torch.tpu.device_count(), torch.equal(y.cpu(), (x * 2).sum(0)))
"""


@pytest.mark.parametrize("eager_mode", ["strict", "debug", "fused"])
def test_cpu_device_count_is_configurable(eager_mode):
    # TORCH_TPU_CPU_DEVICES sets the CPU plugin's cpu_device_count (its default: 4); each value in its own
    # process, since the client is created once.
    if torch_tpu._C._platform_name() != "cpu":
        pytest.skip("a CPU plugin option")
    for count in ("2", "1"):
        out = run_python(_DEVICES, TORCH_TPU_CPU_DEVICES=count, TORCH_TPU_EAGER_MODE=eager_mode)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split()[-2:] == [count, "True"]


def test_cpu_device_count_refuses_bad_values():
    if torch_tpu._C._platform_name() != "cpu":
        pytest.skip("a CPU plugin option")
    out = run_python("import torch, torch_tpu\ntorch.ones(1, device='tpu')", TORCH_TPU_CPU_DEVICES="four")
    assert out.returncode != 0
    assert "RuntimeError" in out.stderr and "TORCH_TPU_CPU_DEVICES=four is not a device count" in out.stderr
