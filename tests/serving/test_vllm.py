"""vLLM on device tpu (torch_tpu.vllm): greedy tokens equal Hugging Face greedy on CPU (float64), for Llama
(all three eager modes), Qwen2, Qwen3, GPT-2, Mixtral (MoE) and BLIP-2 (a vision-language model, with images).

Skipped where vLLM is not installed (`make serving-deps` installs it; `make test-serving` runs this folder).
"""
import os
import sys

import pytest
import torch

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


@pytest.fixture(scope="module")
def vlm(tmp_path_factory):
    folder = tiny_models.make_vlm(str(tmp_path_factory.mktemp("blip2")))
    return folder, tiny_models.hf_vlm_greedy(folder, tiny_models.vlm_requests(), MAX_TOKENS)


def test_vlm_reference_depends_on_the_image(vlm):
    # So that the test below fails if the image is lost: each prompt's tokens are not the same for all three.
    _, expected = vlm
    requests = tiny_models.vlm_requests()
    for prompt in tiny_models.PROMPTS[:3]:
        assert len({tuple(t) for t, (p, _) in zip(expected, requests) if p == prompt}) > 1, prompt


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_vlm_greedy_equals_hf(vlm, mode):
    # 9 requests (3 prompts x 3 images of different sizes) batched: the vision tower (MMEncoderAttention on
    # torch SDPA), Q-Former and OPT run on tpu. A prompt with two images gets vLLM's own error, then the
    # engine serves the first request again.
    folder, expected = vlm
    got = run_child("vllm_vlm.py", folder, MAX_TOKENS, mode=mode)
    assert got["tokens"] == expected
    assert got["refused"].startswith("VLLMValidationError: At most 1 image(s) may be provided in one prompt")
    assert got["again"] == expected[0]


def test_vit_attention_backend():
    # Multimodal encoders run torch SDPA on tpu; asking for another backend is a ValueError that says so.
    from torch_tpu.vllm.platform import TpuPlatform
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    sdpa = AttentionBackendEnum.TORCH_SDPA
    assert TpuPlatform.get_vit_attn_backend(16, torch.float32) == sdpa
    assert TpuPlatform.get_vit_attn_backend(16, torch.float32, sdpa) == sdpa
    with pytest.raises(ValueError, match="mm_encoder_attn_backend FLASH_ATTN is not supported"):
        TpuPlatform.get_vit_attn_backend(16, torch.float32, AttentionBackendEnum.FLASH_ATTN)
