"""vLLM's FP8 on device tpu (torch_tpu.vllm.fp8 and the fp8 KV cache), one engine per process (vllm_fp8.py),
against CPU references in plain torch and Hugging Face float64 (fp8_reference.py):
- online FP8 weight quantization (fp8_per_tensor, fp8_per_channel) holds exactly the weights and scales vLLM's
  quantization gives on CPU, and its log-probabilities are within FP8's rounding error of the unquantized
  model while nearer the FP8 model's own;
- an fp8 checkpoint (quantization "fp8" read from its config) serves the same model bit for bit;
- kv_cache_dtype="fp8" (e4m3) and "fp8_e5m2" equal a float64 reference whose keys and values are rounded the same way;
- quantization methods tpu does not implement get vLLM's error.

FP8 linear layers need a float16 / bfloat16 model (vLLM's rule); float16's rounding (2^-11) is far below FP8's
(2^-4), so what the tests see is FP8's. Skipped where vLLM is not installed.
"""
import json
import os
import sys

import pytest
import torch

pytest.importorskip("vllm")  # not installed: skipped; a broken install fails collection

sys.path.insert(0, os.path.dirname(__file__))
import fp8_reference as ref  # noqa: E402
import tiny_models  # noqa: E402
from vllm_greedy import run_child  # noqa: E402

DTYPE = torch.float16
# Hoeffding: an entry beyond LAMBDA sigma has probability <= 2 exp(-LAMBDA^2 / 2) = 4.6e-11; over the
# ~2e4 log-probabilities compared (6 prompts, 7 positions on average, 384 tokens), <= 1e-6 that any is.
LAMBDA = 7.0
# float32 log_softmax over the tiny Llama's vocabulary: as test_sampling.py (HF float32 is within 1e-5 of
# float64; tpu's other reduction order and exp/log get 10x that).
LOGPROB_ATOL = 1e-4
FLIP_SHARE = 0.05  # test_fp8_kv_cache_equals_fp8_rounded_reference: a rounding-boundary flip's share
KERNEL = "TpuFP8ScaledMMLinearKernel"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_models.make_model("llama", str(tmp_path_factory.mktemp("llama")))


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """engine(model folder, **overrides): the saved result of vllm_fp8.py, one process per distinct call."""
    cache = {}

    def run(model, **overrides):
        key = (model, json.dumps(overrides, sort_keys=True))
        if key not in cache:
            out = str(tmp_path_factory.mktemp("engine") / "result.pt")
            run_child("vllm_fp8.py", model, out, key[1], timeout=900)
            cache[key] = torch.load(out)
        return cache[key]

    return run


def _sequences(result):
    """(token ids, the engine's [positions, vocab] log-probabilities predicting ids[1:]) per prompt."""
    return [(r["prompt_ids"] + r["tokens"], torch.cat([r["prompt"], r["decode"]])) for r in result["runs"]]


def _rms(errors):
    return float(torch.cat([e.flatten() for e in errors]).pow(2).mean().sqrt())


ONLINE = {"fp8_per_tensor": False, "fp8_per_channel": True}  # method -> per-channel scales


@pytest.mark.parametrize("method", ONLINE)
def test_online_fp8_weights_equal_cpu_quantization(folder, engine, method):
    result = engine(folder, quantization=method, dtype="float16")
    expected = ref.quantize_weights(folder, DTYPE, per_channel=ONLINE[method])
    assert sorted(result["layers"]) == sorted(expected)  # every projection, fused as vLLM fuses them
    for name, (codes, scale) in expected.items():
        got_codes, got_scale, kernel = result["layers"][name]
        assert kernel == KERNEL
        assert torch.equal(got_codes, codes.view(torch.uint8)), name
        assert torch.equal(got_scale, scale.reshape(got_scale.shape)), name
    assert result["plain"] == ["model.embed_tokens", "lm_head"]  # vLLM leaves these unquantized


@pytest.mark.parametrize("method", ONLINE)
def test_online_fp8_logprobs_within_fp8_error(folder, engine, method):
    exact = ref.Reference(folder, DTYPE)  # the unquantized model the engine loads, in float64
    fp8 = ref.Reference(folder, DTYPE, quantized=ref.quantize_weights(folder, DTYPE, per_channel=ONLINE[method]))
    # The engine's own float16 error, unquantized: added to FP8's bound (float16 rounds the quantized run too).
    f16_error = max(float((lp - exact.log_softmax(ids)[:-1]).abs().max())
                    for ids, lp in _sequences(engine(folder, dtype="float16")))
    to_exact, to_fp8 = [], []
    for ids, lp in _sequences(engine(folder, quantization=method, dtype="float16")):
        error = (lp - exact.log_softmax(ids)[:-1]).abs()
        bound = LAMBDA * exact.fp8_spread(ids)[:-1] + f16_error
        assert bool((error <= bound).all()), float((error - bound).max())
        to_exact.append(error)
        to_fp8.append(lp - fp8.log_softmax(ids)[:-1])
    # Quantization happened, and is FP8's: tpu is nearer the float64 FP8 model (which rounds activations
    # where tpu's float16 values round, up to the values float16 moves across a rounding boundary) than the
    # unquantized one.
    assert _rms(to_fp8) < _rms(to_exact)


def test_fp8_checkpoint_serves_the_same_model(folder, engine, tmp_path):
    # A checkpoint holding fp8_per_tensor's weights and scales (quant_method "fp8" in its config, no
    # quantization argument): vLLM requantizes each fused layer to its largest scale, here the shared one,
    # so the engine holds the same weights and computes the same log-probabilities, bit for bit.
    checkpoint = ref.write_fp8_checkpoint(folder, str(tmp_path / "fp8"), DTYPE)
    online = engine(folder, quantization="fp8_per_tensor", dtype="float16")
    loaded = engine(checkpoint, dtype="float16")
    for name, (codes, scale, kernel) in online["layers"].items():
        got_codes, got_scale, got_kernel = loaded["layers"][name]
        assert got_kernel == kernel and torch.equal(got_codes, codes) and torch.equal(got_scale.flatten(), scale)
    for a, b in zip(loaded["runs"], online["runs"]):
        assert a["tokens"] == b["tokens"]
        assert torch.equal(a["prompt"], b["prompt"]) and torch.equal(a["decode"], b["decode"])


@pytest.mark.parametrize("cache", ["fp8", "fp8_e5m2"])
def test_fp8_kv_cache_equals_fp8_rounded_reference(folder, engine, cache):
    # float32 model, float8 cache ("fp8" is e4m3) with vLLM's default k/v scales of 1.0: the reference rounds
    # K (after rotary) and V to the cache's format from float32 as the cache write does, so only float32's
    # error separates the two.
    exact = ref.Reference(folder, torch.float32)
    rounded = ref.Reference(folder, torch.float32,
                            kv_fp8=torch.float8_e5m2 if cache == "fp8_e5m2" else torch.float8_e4m3fn)
    result = engine(folder, kv_cache_dtype=cache)
    assert result["layers"] == {}
    fp8_effect = 0.0
    for (ids, lp), run in zip(_sequences(result), result["runs"]):
        expected = rounded.log_softmax(ids)[:-1]
        effect = float((expected - exact.log_softmax(ids)[:-1]).abs().max())
        # A key or value within float32's error of a rounding boundary of the cache format rounds to the
        # other neighbour in one of the two (one fp8 step of one element); from there on that sequence moves
        # by a small share of the format's whole effect (measured: 0.0044 of 0.644, once in 12 sequences).
        # Any other difference (another format, scales, unrounded entries) moves it by about the whole effect.
        assert float((lp - expected).abs().max()) <= max(LOGPROB_ATOL, FLIP_SHARE * effect)
        start = len(run["prompt_ids"]) - 1
        assert expected[start:].argmax(-1).tolist() == run["tokens"]  # greedy, as the reference would pick
        fp8_effect = max(fp8_effect, effect)
    assert fp8_effect > 10 * LOGPROB_ATOL  # the float8 cache is visible at this tolerance: the test can tell


def test_unsupported_quantization_gets_vllm_errors(folder, tmp_path):
    errors = run_child("vllm_fp8.py", folder, str(tmp_path / "unused"), json.dumps(
        [dict(quantization="awq"), dict(quantization="fp8_per_block", dtype="float16"),
         dict(quantization="fp8_per_tensor"), dict(kv_cache_dtype="fp8_inc")]), timeout=600)
    # vLLM's config validation (pydantic wraps its ValueError); the cache dtype is the plugin's check.
    expected = [
        "awq quantization is currently not supported in tpu.",
        "fp8_per_block quantization is currently not supported in tpu.",
        "torch.float32 is not supported for quantization method fp8_per_tensor. Supported dtypes: "
        "[torch.bfloat16, torch.float16]",
    ]
    for (kind, message), text in zip(errors, expected):
        assert kind == "ValidationError" and f"Value error, {text} [type=value_error" in message
    assert errors[3] == ["ValueError", "tpu: kv_cache_dtype 'fp8_inc' is not supported by torch_tpu's vLLM attention "
                                       "backend; use one of auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2"]
