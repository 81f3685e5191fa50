"""accelerate with tpu present: explicit CPU choices are kept, tpu is the default, device_map fills tpu first.

torch_tpu adapts accelerate's default device and get_max_memory when accelerate is imported
(torch_tpu/_integrations.py). CPU runs made in this process (tpu present) must equal the same runs in a
plain CPU process (TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch_tpu never loads) bit for bit: the same CPU ops in
the same order. device_map placements are compared with CPU by logits and greedy generate.
"""
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

import accelerate
import transformers
from accelerate import Accelerator
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import get_max_memory, infer_auto_device_map
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

import accelerate_runs

transformers.logging.set_verbosity_error()
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RUNS = os.path.join(HERE, "accelerate_runs.py")


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("ACCELERATE_TORCH_DEVICE", "ACCELERATE_USE_CPU", "TORCH_TPU_ACCELERATE")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def _result(cmd, **env):
    out = subprocess.run(cmd, env=_env(**env), capture_output=True, text=True, timeout=150, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def plain_cpu(tmp_path_factory):
    """The runs in a process without torch_tpu."""
    res = _result([sys.executable, RUNS, str(tmp_path_factory.mktemp("plain")), "trainer_cpu", "accelerator"],
                  TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert not res["tpu_loaded"] and res["accelerator"]["acc_device"] == "cpu"
    return res


@pytest.fixture
def fresh_state():
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


# ---- who chooses the device ----------------------------------------------------------------------

def test_default_device_is_tpu_unless_chosen(fresh_state, monkeypatch):
    assert PartialState().device.type == "tpu"  # nobody chose: tpu
    AcceleratorState._reset_state(reset_partial_state=True)
    assert Accelerator(cpu=True).device.type == "cpu"
    AcceleratorState._reset_state(reset_partial_state=True)
    monkeypatch.setenv("ACCELERATE_USE_CPU", "1")  # what `accelerate launch --cpu` sets
    assert Accelerator().device.type == "cpu"
    monkeypatch.delenv("ACCELERATE_USE_CPU")
    AcceleratorState._reset_state(reset_partial_state=True)
    monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", "cpu")
    assert Accelerator().device.type == "cpu"
    assert "ACCELERATE_TORCH_DEVICE" not in _env()  # torch_tpu no longer sets it at import


OPT_OUT_THEN_INSTALL = """
import json, os, torch, accelerate.utils as u, transformers.integrations.accelerate as t
from accelerate.state import PartialState
seen = [str(PartialState().default_device), list(map(str, u.get_max_memory()))]
os.environ.pop("TORCH_TPU_ACCELERATE")
import torch_tpu._integrations as adapter
adapter.install(); adapter.install()  # accelerate already loaded: patched in place, once
seen += [str(PartialState().default_device), list(map(str, u.get_max_memory())),
         t.accelerate_max_memory is u.get_max_memory is u.modeling.get_max_memory]
print("RESULT", json.dumps(seen))
"""


def test_opt_out_then_install_after_import():
    # TORCH_TPU_ACCELERATE=0: accelerate's own answers; install() later patches the loaded modules and the
    # copies other modules imported of get_max_memory.
    cpu_dev, cpu_keys, dev, keys, same = _result([sys.executable, "-c", OPT_OUT_THEN_INSTALL],
                                                 TORCH_TPU_ACCELERATE="0")
    assert cpu_dev == "cpu" and cpu_keys == ["cpu"]
    assert dev == "tpu" and keys == [*map(str, range(torch.tpu.device_count())), "cpu"] and same


def test_trainer_use_cpu_equals_plain_cpu_process(fresh_state, plain_cpu, tmp_path):
    run = accelerate_runs.trainer_cpu(str(tmp_path))
    assert run["devices"] == ["cpu"] and run["args_device"] == "cpu"
    assert len(run["losses"]) == accelerate_runs.STEPS
    assert run["losses"] == plain_cpu["trainer_cpu"]["losses"]


def test_accelerator_cpu_equals_plain_cpu_process(fresh_state, plain_cpu):
    run = accelerate_runs.accelerator_run(True)
    assert run["devices"] == ["cpu"] and run["acc_device"] == "cpu"
    assert run["losses"] == plain_cpu["accelerator"]["losses"]


def test_accelerate_launch_cpu_equals_plain_cpu_process(plain_cpu, tmp_path):
    launcher = os.path.join(os.path.dirname(sys.executable), "accelerate")
    res = _result([launcher, "launch", "--cpu", "--num_processes", "1", "--num_machines", "1",
                   "--mixed_precision", "no", "--dynamo_backend", "no", RUNS, str(tmp_path), "accelerator"])
    assert res["tpu_loaded"]
    assert res["accelerator"]["devices"] == ["cpu"], res
    assert res["accelerator"]["losses"] == plain_cpu["accelerator"]["losses"]


def test_accelerator_default_trains_on_tpu(mode, fresh_state, plain_cpu):
    run = accelerate_runs.accelerator_run(None)
    assert run["devices"] == ["tpu"] and run["acc_device"].startswith("tpu")
    cpu = torch.tensor(plain_cpu["accelerator"]["losses"], dtype=torch.float64)
    # Same float32 model and data on another device: within 1e-5 relative (the suite's usual bound).
    torch.testing.assert_close(torch.tensor(run["losses"], dtype=torch.float64), cpu, atol=1e-5, rtol=1e-5)


# ---- device_map: tpu memory first -----------------------------------------------------------------

def test_get_max_memory_lists_tpu_devices():
    found = get_max_memory()
    n = torch.tpu.device_count()
    assert list(found) == [*range(n), "cpu"]
    for i in range(n):
        assert 0 < found[i] <= torch.tpu.mem_get_info(i)[1]
    asked = {"cpu": "2GB", 1: "1GB", 0: 5000}
    assert get_max_memory(asked) == {0: 5000, 1: 10**9, "cpu": 2 * 10**9}
    assert list(get_max_memory(dict(asked))) == [0, 1, "cpu"]  # tpu devices first
    with pytest.raises(ValueError, match="not recognized"):
        get_max_memory({"tpu": "1GB"})
    with pytest.raises(TypeError, match="max_memory"):
        get_max_memory(["1GB"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        get_max_memory({n + 3: "1GB"})
    assert any(f"tpu device {n + 3} does not exist" in str(w.message) for w in caught)


def test_infer_auto_device_map_fills_tpu_first():
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(4)])  # 4 x 16.6 kB
    assert set(infer_auto_device_map(model).values()) <= set(range(torch.tpu.device_count()))
    split = infer_auto_device_map(model, max_memory={0: 40_000, "cpu": 10**9})
    assert split["0"] == 0 and "cpu" in split.values()  # max_memory still decides


LLAMA_TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, max_position_embeddings=32)
MODELS = {
    "llama": (LlamaForCausalLM, lambda: LlamaConfig(**LLAMA_TINY)),
    "gpt2": (GPT2LMHeadModel, lambda: GPT2Config(**accelerate_runs.GPT2_TINY)),
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    paths = {}
    for name, (cls, config) in MODELS.items():
        paths[name] = str(tmp_path_factory.mktemp(name))
        torch.manual_seed(0)
        cls(config()).save_pretrained(paths[name])
    return paths


def _generate(model, device):
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        return model.generate(ids.to(device), attention_mask=torch.ones_like(ids).to(device), max_new_tokens=8,
                              do_sample=False, pad_token_id=0).cpu()


@pytest.mark.parametrize("device_map", ["auto", "balanced"])
@pytest.mark.parametrize("name", list(MODELS))
def test_device_map_places_on_tpu_and_generates_like_cpu(mode, saved, name, device_map):
    cls = MODELS[name][0]
    cpu = cls.from_pretrained(saved[name])
    model = cls.from_pretrained(saved[name], device_map=device_map)
    assert {p.device.type for p in model.parameters()} == {"tpu"}
    placed = getattr(model, "hf_device_map", {"": model.device.index})  # absent when one device holds all
    assert set(placed.values()) <= set(range(torch.tpu.device_count())), placed
    assert torch.equal(_generate(model, model.device), _generate(cpu, "cpu"))


def test_device_map_auto_honours_max_memory(mode, saved):
    cpu = GPT2LMHeadModel.from_pretrained(saved["gpt2"])
    model = GPT2LMHeadModel.from_pretrained(saved["gpt2"], device_map="auto", max_memory={1: "1GB", "cpu": "1GB"})
    # All on one device: transformers keeps no hf_device_map then.
    assert {p.device for p in model.parameters()} == {torch.device("tpu", 1)}
    assert torch.equal(_generate(model, model.device), _generate(cpu, "cpu"))
