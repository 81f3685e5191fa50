"""`python -m torch_tpu.doctor` and `torch_tpu.collect_env()`, with the CPU plugin and with no plugin.

The doctor runs in child processes (as a user runs it), on a temporary compile cache folder so that
the developer's own cache is neither scanned nor written. No `mode` fixture: the doctor reports the
eager mode, it does not depend on it.
"""
import glob
import json
import os
import re
import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import _elf, _env_vars, _plugins

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP_KEYS = {"ok", "problems", "warnings", "python", "torch", "torch_tpu", "plugins", "eager_mode",
            "compile_cache", "environment", "integrations"}


def _doctor(tmp_path, *args, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TPU_")}  # the developer's settings
    env["TORCH_TPU_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "torch_tpu.doctor", *args], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=240)


def _cpu_plugin():
    found = [path for name, path in _plugins.candidates() if name == "cpu"]
    if not found:
        pytest.skip("no XLA CPU plugin installed")
    return found[0]


def test_doctor_text_with_plugin(tmp_path):
    plugin = _cpu_plugin()
    r = _doctor(tmp_path, "--no-imports")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("torch_tpu doctor: OK, tpu works")
    assert plugin in out and "[chosen] cpu" in out and "PJRT API 0." in out
    assert f"torch         {torch.__version__}" in out
    assert f"torch_tpu     {torch_tpu.__version__}" in out
    assert f"Devices: {torch.tpu.device_count()} x {torch.tpu.get_device_name()}" in out
    assert "tpu:0  memory" in out and "first op (compile + run + read back): ok" in out
    assert "Eager mode: strict (from default" in out
    assert str(tmp_path / "cache") in out and "does not exist yet; can be created" in out
    assert "Optional integrations: not checked" in out


def test_doctor_json_with_plugin(tmp_path):
    (tmp_path / "cache").mkdir()
    r = _doctor(tmp_path, "--json", TORCH_TPU_EAGER_MODE="fused", TORCH_TPU_EAGRE_MODE="x")
    assert r.returncode == 0, r.stdout + r.stderr
    env = json.loads(r.stdout)
    assert TOP_KEYS <= set(env) and env["ok"] and env["problems"] == []
    assert env["torch"]["version"] == torch.__version__
    assert env["torch"]["cxx11_abi"] == bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    ext = env["torch_tpu"]["extension"]
    assert ext["loaded"] and ext["cxx11_abi"] == env["torch"]["cxx11_abi"] and ext["compiler"]
    chosen = env["plugins"]["chosen"]
    assert chosen["path"] == _cpu_plugin() and re.fullmatch(r"\d+\.\d+", chosen["pjrt_api_version"])
    cand = next(c for c in env["plugins"]["candidates"] if c["status"] == "chosen")
    # The child probe (ctypes on GetPjrtApi) reads the same version the runtime did.
    assert cand["pjrt_api_version"] == chosen["pjrt_api_version"]
    dev = env["plugins"]["devices"]
    assert dev["count"] == torch.tpu.device_count() == len(dev["devices"]) and dev["first_op"]["ok"]
    assert env["eager_mode"] == {"mode": "fused", "available": torch_tpu.available_eager_modes(),
                                 "source": "TORCH_TPU_EAGER_MODE"}
    cache = env["compile_cache"]
    assert cache["directory"] == str(tmp_path / "cache") and cache["permissions"]["writable"]
    assert env["environment"]["set"]["TORCH_TPU_EAGER_MODE"]["value"] == "fused"
    assert env["environment"]["unknown"] == ["TORCH_TPU_EAGRE_MODE"]
    assert any("TORCH_TPU_EAGRE_MODE" in w for w in env["warnings"])
    for name in ("jax", "vllm", "torchrec", "transformers"):
        entry = env["integrations"][name]
        assert {"installed", "imports", "version", "error"} <= set(entry)
        if entry["imports"]:
            assert entry["version"] and entry["error"] is None
        else:
            assert entry["error"]


def test_doctor_without_plugin(tmp_path):
    r = _doctor(tmp_path, "--no-imports", TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("torch_tpu doctor: tpu is NOT usable")
    assert "[failed] TORCH_TPU_PJRT_PLUGIN: /nonexistent/plugin.so (file does not exist)" in out
    assert "no PJRT plugin could be started" in out and "dlopen failed" in out
    assert "pip install xla-cpu-pjrt" in out and "Devices: none" in out
    r = _doctor(tmp_path, "--json", "--no-imports", TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    assert r.returncode == 1
    env = json.loads(r.stdout)
    assert not env["ok"] and env["plugins"]["chosen"] is None
    assert "/nonexistent/plugin.so" in env["problems"][0]


def test_collect_env_in_process():
    env = torch_tpu.collect_env(integrations=False)
    assert TOP_KEYS <= set(env) and env["ok"], env["problems"]
    assert env["integrations"] is None
    assert env["plugins"]["chosen"]["path"] == torch_tpu._C._plugin_path()
    json.dumps(env)  # plain data only


def test_probe_and_elf_read_real_files():
    probe = os.path.join(ROOT, "torch_tpu", "_pjrt_probe.py")
    r = subprocess.run([sys.executable, "-I", probe, _cpu_plugin()], capture_output=True, text=True, timeout=60)
    major, minor = torch_tpu._C._pjrt_api_version()
    assert json.loads(r.stdout)["pjrt_api_version"] == f"{major}.{minor}"
    libc = next(iter(glob.glob("/lib/*/libc.so.6") + glob.glob("/lib64/libc.so.6")), None)
    if libc:
        r = subprocess.run([sys.executable, "-I", probe, libc], capture_output=True, text=True, timeout=60)
        assert json.loads(r.stdout) == {"error": "library has no GetPjrtApi symbol"}
    info = _elf.build_info(torch_tpu._C.__file__)
    assert info["cxx11_abi"] == bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    assert any(os.path.exists(os.path.join(d, "libtorch_cpu.so")) for d in info["runpath"])
    assert _elf.build_info(os.path.join(ROOT, "README.md")) == {}


def test_every_variable_the_code_reads_is_listed():
    names = set()
    files = glob.glob(os.path.join(ROOT, "torch_tpu", "**", "*.py"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "csrc", "**", "*.cpp"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "csrc", "**", "*.h"), recursive=True)
    for path in files:
        with open(path, errors="replace") as f:
            names |= set(re.findall(r"\bTORCH_TPU_[A-Z0-9_]+\b", f.read()))
    names.discard("TORCH_TPU_PAGED")  # vLLM's attention backend name, not a variable
    assert names, "no TORCH_TPU_ names found: the scan is broken"
    assert sorted(names - set(_env_vars.KNOWN)) == []


def test_no_plugin_error_points_at_doctor(tmp_path):
    # The first tpu tensor without a usable plugin raises a RuntimeError that names the doctor.
    code = ("import torch\ntry:\n    torch.ones(1, device='tpu')\nexcept RuntimeError as e:\n"
            "    print('RAISED', e)\n")
    env = dict(os.environ, TORCH_TPU_PJRT_PLUGIN="/nonexistent/plugin.so")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert "RAISED torch_tpu: no PJRT plugin could be started" in r.stdout, r.stdout + r.stderr
    assert "python -m torch_tpu.doctor" in r.stdout


def test_cache_key_is_never_shown():
    env = _env_vars.report({"TORCH_TPU_CACHE_KEY": "s3cret", "TORCH_TPU_CACHE_KEY_FILE": "/k"})
    assert env["set"]["TORCH_TPU_CACHE_KEY"]["value"] == "<set, not shown>"
    assert env["set"]["TORCH_TPU_CACHE_KEY_FILE"]["value"] == "/k"


def test_torch_mismatch_message():
    """The import-time check (torch_tpu/_build_info.py against the running torch): major.minor.patch and
    the CXX11 ABI must match; the local label (+cpu) does not matter. tools/test_wheel.sh checks the
    ImportError, `import torch`'s warning and the doctor with a mismatched build info in a fresh venv."""
    assert torch_tpu._torch_mismatch("2.13.0+cpu", True, "2.13.0", True) is None
    msg = torch_tpu._torch_mismatch("2.14.1", True, "2.13.0+cpu", True)
    assert "built against torch 2.13.0+cpu (CXX11 ABI=1)" in msg and "this Python has torch 2.14.1" in msg
    assert "pip install torch==2.13.0" in msg and "--no-build-isolation" in msg
    assert "CXX11 ABI=0" in torch_tpu._torch_mismatch("2.13.0+cpu", False, "2.13.0+cpu", True)
    from torch_tpu import _build_info
    assert _build_info.torch_version == torch.__version__
