"""One vllm.LLM engine running the checks of test_sampling.py; emits everything it saw as one JSON dict.

argv: model folder, index of the stop-string prompt, stop string. The test runs this twice (two
processes) and compares the runs.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllm_greedy import emit, make_llm  # noqa: E402

MAX_TOKENS = 12
SEEDS = (0, 1)
# Each sampler path vLLM has: temperature, top-k, top-p, min-p, the three penalties, all of them together.
CONFIGS = {
    "temperature": dict(temperature=0.8),
    "top_k": dict(temperature=1.0, top_k=5),
    "top_p": dict(temperature=1.0, top_p=0.8),
    "min_p": dict(temperature=1.0, min_p=0.05),
    "penalties": dict(temperature=1.0, repetition_penalty=1.3, presence_penalty=0.5, frequency_penalty=0.5),
    "all": dict(temperature=0.9, top_k=20, top_p=0.9, min_p=0.02, repetition_penalty=1.1,
                presence_penalty=0.2, frequency_penalty=0.2),
    "top_k_1": dict(temperature=1.0, top_k=1),  # one candidate: must equal greedy
}
N = 3
LOGPROBS = 5
CHAT = [{"role": "user", "content": "the quick brown fox"}]
TOO_LONG = "the quick brown fox " * 100  # > 256 tokens


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  the test asserts the type and message
        return [type(e).__name__, str(e)]
    return None


def main():
    folder, stop_prompt, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    import tiny_models
    from vllm import SamplingParams

    llm = make_llm(folder, max_num_seqs=32)
    prompts = tiny_models.PROMPTS
    result = {}

    def tokens(outs):
        return [list(o.outputs[0].token_ids) for o in outs]

    greedy = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True)
    result["greedy"] = tokens(llm.generate(prompts, greedy))

    # Every config and seed in one batch: each request draws from its own seeded generator.
    names = [(name, seed) for name in CONFIGS for seed in SEEDS]
    params = [SamplingParams(seed=seed, max_tokens=MAX_TOKENS, ignore_eos=True, **CONFIGS[name])
              for name, seed in names for _ in prompts]
    outs = tokens(llm.generate(prompts * len(names), params))
    result["sampled"] = {f"{name}/{seed}": outs[i * len(prompts):(i + 1) * len(prompts)]
                         for i, (name, seed) in enumerate(names)}

    out = llm.generate(prompts[:1], SamplingParams(n=N, seed=0, temperature=1.0, max_tokens=MAX_TOKENS,
                                                   ignore_eos=True))[0]
    result["n"] = [list(c.token_ids) for c in out.outputs]

    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True,
                                                logprobs=LOGPROBS, prompt_logprobs=1))
    result["logprobs"] = [{
        "prompt_ids": list(o.prompt_token_ids),
        "tokens": list(o.outputs[0].token_ids),
        "top": [{str(t): lp.logprob for t, lp in pos.items()} for pos in o.outputs[0].logprobs],
        # prompt_logprobs[0] is None (the first token has no prediction); later positions hold the
        # prompt token itself and the top-1.
        "prompt": [{str(t): lp.logprob for t, lp in pos.items()} for pos in o.prompt_logprobs[1:]],
    } for o in outs]

    c = llm.generate([prompts[stop_prompt]], SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True,
                                                          stop=[stop]))[0].outputs[0]
    result["stop"] = {"text": c.text, "finish_reason": c.finish_reason, "stop_reason": c.stop_reason}

    result["chat"] = list(llm.chat(CHAT, greedy)[0].outputs[0].token_ids)
    templated = llm.get_tokenizer().apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    result["chat_templated"] = tokens(llm.generate([templated], greedy))[0]

    result["errors"] = {
        "too_long": _error(lambda: llm.generate([TOO_LONG], greedy)),
        "temperature": _error(lambda: SamplingParams(temperature=-1.0)),
        "top_p": _error(lambda: SamplingParams(top_p=0.0)),
    }
    # The engine still serves after refusing a request.
    result["after_errors"] = tokens(llm.generate(prompts, greedy))
    emit(result)


if __name__ == "__main__":
    main()
