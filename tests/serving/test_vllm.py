"""vLLM on device tpu (torch_tpu.vllm): greedy tokens equal Hugging Face greedy on CPU (float64), for Llama
(all three eager modes), Qwen2, Qwen3, GPT-2 and Mixtral (MoE).

Skipped where vLLM is not installed (`make serving-deps` installs it; `make test-serving` runs this folder).
"""
import os
import sys

import pytest

pytest.importorskip("vllm")  # not installed: skipped; a broken install fails collection

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
import tiny_models  # noqa: E402
from vllm_greedy import run_child  # noqa: E402

MAX_TOKENS = 12


def _vllm_tokens(folder, mode, device="tpu"):
    return run_child("vllm_greedy.py", folder, MAX_TOKENS, mode=mode, device=device)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tiny_models.make_model("llama", str(tmp_path_factory.mktemp("llama")))
    return folder, tiny_models.hf_greedy(folder, tiny_models.PROMPTS, MAX_TOKENS)


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_llama_greedy_equals_hf(llama, mode):
    folder, expected = llama
    assert _vllm_tokens(folder, mode) == expected


@pytest.mark.parametrize("kind", ["qwen2", "qwen3", "gpt2", "mixtral"])
def test_more_architectures_greedy_equal_hf(tmp_path_factory, kind):
    folder = tiny_models.make_model(kind, str(tmp_path_factory.mktemp(kind)))
    assert _vllm_tokens(folder, "strict") == tiny_models.hf_greedy(folder, tiny_models.PROMPTS, MAX_TOKENS)


def test_llama_greedy_plugin_on_cpu(llama):
    # The same plugin on device "cpu" (the serving benchmark's baseline) gives the same tokens.
    folder, expected = llama
    assert _vllm_tokens(folder, "strict", device="cpu") == expected
