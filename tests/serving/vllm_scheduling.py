"""Child of test_scheduling.py: one vllm.LLM engine with a scheduling feature on, greedy tokens as JSON.

argv: feature, model folder. Features:
- spec: n-gram speculative decoding (SPEC_CONFIG), the tokens and vLLM's draft / acceptance counters;
- prefix: prefix caching, PREFIX_PROMPTS one generate call after the other (the second finds the first's
  blocks), the tokens and each request's num_cached_tokens;
- chunked: chunked prefill at CHUNK tokens per step (prefix caching off, so every chunk is computed), the
  tokens and prompt lengths.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_models  # noqa: E402
from vllm_greedy import emit, make_llm  # noqa: E402

MAX_TOKENS = 24
SPEC_CONFIG = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
# Repetitive prompts (the n-gram proposer looks the last tokens up in prompt and output) and the usual ones.
SPEC_PROMPTS = ["the quick brown fox the quick brown fox the quick brown fox",
                "to be or not to be to be or not to be"] + tiny_models.PROMPTS
# ~80 shared tokens: several full 16-token blocks that the second request finds cached.
PREFIX = " ".join(tiny_models.CORPUS[:8])
PREFIX_PROMPTS = [PREFIX + " the quick brown fox", PREFIX + " to be or not"]
CHUNK = 16
CHUNKED_PROMPTS = [" ".join(tiny_models.CORPUS[:6]), tiny_models.PROMPTS[0], " ".join(tiny_models.CORPUS[2:5]),
                   tiny_models.PROMPTS[3]]


def _greedy():
    from vllm import SamplingParams

    return SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True)


def spec(folder):
    llm = make_llm(folder, speculative_config=SPEC_CONFIG, disable_log_stats=False)
    outs = llm.generate(SPEC_PROMPTS, _greedy(), use_tqdm=False)
    counters = {}
    for m in llm.get_metrics():
        if m.name.startswith("vllm:spec_decode_"):
            counters[m.name[len("vllm:spec_decode_"):]] = getattr(m, "values", None) or m.value
    emit({"tokens": [list(o.outputs[0].token_ids) for o in outs], "counters": counters})


def prefix(folder):
    llm = make_llm(folder, enable_prefix_caching=True)
    outs = [llm.generate([p], _greedy(), use_tqdm=False)[0] for p in PREFIX_PROMPTS]
    emit({"tokens": [list(o.outputs[0].token_ids) for o in outs], "cached": [o.num_cached_tokens for o in outs],
          "prompt_ids": [list(o.prompt_token_ids) for o in outs]})


def chunked(folder):
    llm = make_llm(folder, enable_chunked_prefill=True, enable_prefix_caching=False, max_num_batched_tokens=CHUNK)
    outs = llm.generate(CHUNKED_PROMPTS, _greedy(), use_tqdm=False)
    emit({"tokens": [list(o.outputs[0].token_ids) for o in outs],
          "prompt_lengths": [len(o.prompt_token_ids) for o in outs]})


if __name__ == "__main__":
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    {"spec": spec, "prefix": prefix, "chunked": chunked}[sys.argv[1]](sys.argv[2])
