"""Child of test_buckets.py: vllm.LLM greedy on tpu after its warm-up, over batches of different sizes and
prompt lengths; prints the tokens and the programs the serving part added, as one JSON line.

argv: model folder, JSON file of [[prompt, max_tokens], ...] batches (one generate call per batch),
"async" or "sync" (vLLM's async_scheduling on, through TORCH_TPU_VLLM_ASYNC_SCHEDULING=1 which keeps it on
the CPU plugin, or off), and optionally "sampled": request i of a batch then samples with SAMPLED[i % 5]
(greedy or seeded, every paddable sampler feature) instead of greedily.
"""
import json
import os
import sys


# Greedy, greedy with penalties (a batch of the first two is greedy throughout), then seeded random sampling
# through temperature, top-k, top-p, min-p and the penalties.
SAMPLED = [dict(temperature=0.0), dict(temperature=0.0, repetition_penalty=1.5, frequency_penalty=0.5),
           dict(temperature=0.8, top_k=5, seed=1),
           dict(temperature=1.0, top_p=0.8, seed=2, repetition_penalty=1.3, presence_penalty=0.4,
                frequency_penalty=0.4),
           dict(temperature=0.9, top_k=20, top_p=0.9, min_p=0.05, seed=3)]


def _step_graphs(worker):
    graphs = worker.model_runner._step_graphs
    return None if graphs is None else graphs.stats


def main():
    folder, batches_file, scheduling = sys.argv[1], sys.argv[2], sys.argv[3]
    sampled = sys.argv[4:] == ["sampled"]
    with open(batches_file) as f:
        batches = json.load(f)
    if scheduling == "async":
        os.environ["TORCH_TPU_VLLM_ASYNC_SCHEDULING"] = "1"
    import torch_tpu.device as tpu_device
    from vllm import LLM, SamplingParams

    # Chunked prefill at 32 tokens: long prompts take several partial steps.
    llm = LLM(model=folder, dtype="float32", max_model_len=128, max_num_seqs=8, max_num_batched_tokens=32,
              kv_cache_memory_bytes=8 << 20, enforce_eager=True, seed=0, async_scheduling=scheduling == "async")
    tpu_device.reset_compile_cache_stats()  # LLM() has warmed up: everything from here is serving
    tokens = []
    for batch in batches:
        kinds = [SAMPLED[i % len(SAMPLED)] if sampled else dict(temperature=0) for i in range(len(batch))]
        params = [SamplingParams(max_tokens=m, ignore_eos=True, **kind) for (_, m), kind in zip(batch, kinds)]
        outs = llm.generate([p for p, _ in batch], params, use_tqdm=False)
        tokens.append([list(o.outputs[0].token_ids) for o in outs])
    stats = tpu_device.compile_cache_stats()
    print("RESULT " + json.dumps({"tokens": tokens, "new_programs": stats["memory"]["misses"],
                                  "compiles": stats["compiles"], "step_graphs": llm.collective_rpc(_step_graphs)[0],
                                  "async": llm.llm_engine.vllm_config.scheduler_config.async_scheduling}), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    main()
