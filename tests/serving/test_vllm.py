"""vLLM on device tpu (torch_tpu.vllm): greedy tokens equal Hugging Face greedy on CPU (float64), for Llama
(all three eager modes), Qwen2, Qwen3 and GPT-2.

Skipped where vLLM is not installed (`make serving-deps` installs it; `make test-serving` runs this folder).
"""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("vllm")  # not installed: skipped; a broken install fails collection

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
import tiny_models  # noqa: E402

MAX_TOKENS = 12


def _vllm_tokens(folder, mode, device="tpu"):
    env = dict(os.environ, TORCH_TPU_EAGER_MODE=mode, TORCH_TPU_VLLM_DEVICE=device)
    proc = subprocess.run([sys.executable, os.path.join(HERE, "vllm_greedy.py"), folder, str(MAX_TOKENS)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("TOKENS ")][-1]
    return json.loads(line[len("TOKENS "):])


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tiny_models.make_model("llama", str(tmp_path_factory.mktemp("llama")))
    return folder, tiny_models.hf_greedy(folder, tiny_models.PROMPTS, MAX_TOKENS)


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_llama_greedy_equals_hf(llama, mode):
    folder, expected = llama
    assert _vllm_tokens(folder, mode) == expected


@pytest.mark.parametrize("kind", ["qwen2", "qwen3", "gpt2"])
def test_more_architectures_greedy_equal_hf(tmp_path_factory, kind):
    folder = tiny_models.make_model(kind, str(tmp_path_factory.mktemp(kind)))
    assert _vllm_tokens(folder, "strict") == tiny_models.hf_greedy(folder, tiny_models.PROMPTS, MAX_TOKENS)


def test_llama_greedy_plugin_on_cpu(llama):
    # The same plugin on device "cpu" (the serving benchmark's baseline) gives the same tokens.
    folder, expected = llama
    assert _vllm_tokens(folder, "strict", device="cpu") == expected
