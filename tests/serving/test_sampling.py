"""vLLM's sampling features on device tpu (torch_tpu.vllm), one engine per process (vllm_sampling.py):
seeded sampling reproducible across processes and seed-dependent, n > 1, logprobs and prompt logprobs against
Hugging Face float64 on CPU, stop strings, LLM.chat, vLLM's own errors for bad input.
"""
import os
import sys

import pytest

pytest.importorskip("vllm")  # not installed: skipped; a broken install fails collection

sys.path.insert(0, os.path.dirname(__file__))
import tiny_models  # noqa: E402
import vllm_sampling as child  # noqa: E402  (its constants; it imports vllm only in main())
from vllm_greedy import run_child  # noqa: E402

# Logprobs tolerance: Hugging Face float32 on CPU differs from float64 by at most ~1e-5 (9.5e-6 measured)
# in log_softmax over the whole vocabulary of the tiny Llama; tpu float32 (other reduction order,
# other exp/log) gets 10x that.
LOGPROB_ATOL = 1e-4


def _stop_case(tok, greedy):
    """(prompt index, stop string, expected text): the first greedy output whose decoded text is clean
    (no partial UTF-8) up to a multi-letter token, which becomes the stop string; vLLM stops before its first
    occurrence."""
    for i, ids in enumerate(greedy):
        for j in range(1, len(ids)):
            piece, text = tok.decode(ids[j:j + 1]), tok.decode(ids[:j + 1])
            if piece.strip().isalpha() and len(piece.strip()) > 1 and "\ufffd" not in text:
                stop = piece.strip()
                if text.find(stop) > 0:
                    return i, stop, text[:text.find(stop)]
    raise AssertionError("no clean stop string in the greedy outputs")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from transformers import AutoTokenizer

    folder = tiny_models.make_model("llama", str(tmp_path_factory.mktemp("llama")))
    tok = AutoTokenizer.from_pretrained(folder)
    greedy = tiny_models.hf_greedy(folder, tiny_models.PROMPTS, child.MAX_TOKENS)
    stop = _stop_case(tok, greedy)
    # Two engines in two processes with the same arguments: seeded sampling must not depend on the process.
    results = [run_child("vllm_sampling.py", folder, stop[0], stop[1]) for _ in range(2)]
    return dict(folder=folder, tok=tok, greedy=greedy, stop=stop, results=results)


def test_greedy_equals_hf(runs):
    for r in runs["results"]:
        assert r["greedy"] == runs["greedy"]
        assert r["after_errors"] == runs["greedy"]


def test_seeded_sampling_reproducible_across_processes(runs):
    first, second = runs["results"]
    assert first["sampled"] == second["sampled"]
    assert first["n"] == second["n"]


def test_different_seeds_differ(runs):
    sampled = runs["results"][0]["sampled"]
    for name in child.CONFIGS:
        if name != "top_k_1":
            assert sampled[f"{name}/0"] != sampled[f"{name}/1"], name


def test_top_k_1_is_greedy(runs):
    sampled = runs["results"][0]["sampled"]
    for seed in child.SEEDS:
        assert sampled[f"top_k_1/{seed}"] == runs["greedy"]


def test_top_k_samples_within_hf_top_k(runs):
    # Temperature keeps the ranking, so every token sampled with top_k=5 is among HF's 5 most likely there.
    tok, k = runs["tok"], child.CONFIGS["top_k"]["top_k"]
    for seed in child.SEEDS:
        outs = runs["results"][0]["sampled"][f"top_k/{seed}"]
        prompts = [tok(p).input_ids for p in tiny_models.PROMPTS]
        lps = tiny_models.hf_log_softmax(runs["folder"], [p + o for p, o in zip(prompts, outs)])
        for p, o, lp in zip(prompts, outs, lps):
            for j, t in enumerate(o):
                assert t in lp[len(p) - 1 + j].topk(k).indices.tolist()


def test_n_outputs(runs):
    n = runs["results"][0]["n"]
    assert len(n) == child.N and all(len(c) == child.MAX_TOKENS for c in n)
    assert len({tuple(c) for c in n}) > 1  # n samples, not one sample repeated


def test_logprobs_equal_hf_float64(runs):
    lp = runs["results"][0]["logprobs"]
    assert [r["tokens"] for r in lp] == runs["greedy"]
    hf = tiny_models.hf_log_softmax(runs["folder"], [r["prompt_ids"] + r["tokens"] for r in lp])
    for r, ref in zip(lp, hf):
        start = len(r["prompt_ids"]) - 1  # ref[i] predicts token i + 1
        for j, top in enumerate(r["top"]):
            row = ref[start + j]
            # The sampled token and the top-k: the same ids as HF's top-k (greedy: the sampled one is among them).
            assert {int(t) for t in top} == set(row.topk(child.LOGPROBS).indices.tolist())
            for t, v in top.items():
                assert v == pytest.approx(row[int(t)].item(), abs=LOGPROB_ATOL)
        for j, pos in enumerate(r["prompt"]):
            row = ref[j]
            assert str(r["prompt_ids"][j + 1]) in pos  # each prompt token's own logprob is returned
            for t, v in pos.items():
                assert v == pytest.approx(row[int(t)].item(), abs=LOGPROB_ATOL)


def test_stop_string_truncates(runs):
    _, stop, expected = runs["stop"]
    for r in runs["results"]:
        assert r["stop"] == {"text": expected, "finish_reason": "stop", "stop_reason": stop}


def test_chat_equals_generate_on_templated_prompt(runs):
    tok = runs["tok"]
    templated = tok.apply_chat_template(child.CHAT, tokenize=False, add_generation_prompt=True)
    assert templated == "user: the quick brown fox\nassistant:"  # tiny_models' template, not a default one
    expected = tiny_models.hf_greedy(runs["folder"], [templated], child.MAX_TOKENS)[0]
    r = runs["results"][0]
    assert r["chat"] == r["chat_templated"] == expected


def test_bad_input_gets_vllm_errors(runs):
    # vLLM's own validation (the same on every platform); the engine keeps serving (after_errors above).
    errors = runs["results"][0]["errors"]
    assert errors["too_long"] == [
        "VLLMValidationError",
        "This model's maximum context length is 256 tokens. However, your prompt contains at least 257 input "
        "tokens, which exceeds this limit even without any output tokens. Please reduce the length of the "
        "input prompt. (parameter=input_tokens, value=257)"]
    assert errors["temperature"] == ["VLLMValidationError",
                                     "temperature must be non-negative, got -1.0. (parameter=temperature, value=-1.0)"]
    assert errors["top_p"] == ["VLLMValidationError", "top_p must be in (0, 1], got 0.0. (parameter=top_p, value=0.0)"]
