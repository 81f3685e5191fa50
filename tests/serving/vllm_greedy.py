"""Runs vllm.LLM greedy on a tiny local model and prints the tokens as JSON (a child of test_vllm.py).

vLLM keeps process-wide state (its platform, parallel groups), so every engine gets a process of its own.
"""
import json
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
sys.path.insert(0, os.path.dirname(__file__))


def main():
    folder, max_tokens = sys.argv[1], int(sys.argv[2])
    import tiny_models
    from vllm import LLM, SamplingParams

    llm = LLM(model=folder, dtype="float32", max_model_len=256, max_num_seqs=8, kv_cache_memory_bytes=8 << 20,
              enforce_eager=True, seed=0)
    outs = llm.generate(tiny_models.PROMPTS, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True))
    print("TOKENS " + json.dumps([list(o.outputs[0].token_ids) for o in outs]))


if __name__ == "__main__":
    main()
